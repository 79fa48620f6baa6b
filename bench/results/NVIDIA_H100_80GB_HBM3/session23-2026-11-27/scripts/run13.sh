#!/bin/bash
# s23 call 13: the review commit (one failure path for FIFO pushes across nodes): test_coll at 2 x 1 (correct,
# stress, graph, nocall), MPS 2 x 2, and --lat across nodes in turns with 607032a's build (new23), one round.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23k.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
nvidia-smi --query-gpu=name --format=csv,noheader
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
t() { local tag=$1 to=$2 np=$3 f; shift 3; f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; printf "%-36s rc %d\n" "$tag" $?; }
t "2x1 correct 16M" 120 2 build-gpu/rt4/test_coll correct $((16<<20))
t "2x1 stress" 90 2 build-gpu/rt4/test_coll stress
t "2x1 graph" 90 2 build-gpu/rt4/test_coll graph
MK_TIMEOUT_MS=3000 t "2x1 nocall" 60 2 build-gpu/rt4/test_coll nocall
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MKT_NO_NCCL=1 MK_NODE_SIZE=2 t "MPS 4 ranks 2x2 correct" 120 4 build-gpu/rt4/test_coll correct $((4<<20))
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for b in new23 rt4; do
  timeout 100 $MPIB -np 2 build-gpu/$b/mkbench_coll --lat --op ag,rs,ar --min 8 --max 128 > $W/lat-$b.log 2>&1
  grep -E "^(allgather|reducescatter|allreduce) " $W/lat-$b.log | awk -v t=$b '{print t, $1, $2, "ev", $4, $5, "gpu", $10, $11}'
done
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
