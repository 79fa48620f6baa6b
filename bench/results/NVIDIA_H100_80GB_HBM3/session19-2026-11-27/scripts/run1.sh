#!/bin/bash
# s19 call 1: the review commit 103f182 (HEAD 1f0fe52) on the GPU: one node (2 GPUs) and virtual nodes
# (2 x 1, MPS 2 x 2, test_scale 16/8 ranks), the kill drill's 2 x 2 steps, then the socket path's --lat and bandwidth.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_BUDGET -x MK_COLL_HIER_MIN -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SOCKET_NCONN"
S=$W/summary.txt; : > $S
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %4d s\n" "$tag" $rc $(($(date +%s)-t0)) | tee -a $S
}
nvidia-smi -L | tee -a $S
t "2gpu 1 node correct" 120 2 build-gpu/rt/test_coll correct $((16<<20))
t "2gpu 1 node stress" 90 2 build-gpu/rt/test_coll stress
t "2gpu 1 node ag_gemm correct" 120 2 build-gpu/agg/test_ag_gemm correct
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
export MK_NODE_SIZE=1
t "2gpu 2x1 correct" 120 2 build-gpu/rt/test_coll correct $((16<<20))
t "2gpu 2x1 stress" 90 2 build-gpu/rt/test_coll stress
t "2gpu 2x1 graph" 90 2 build-gpu/rt/test_coll graph
t "2gpu 2x1 nocall" 90 2 build-gpu/rt/test_coll nocall
t "2gpu 2x1 ag_gemm correct" 120 2 build-gpu/agg/test_ag_gemm correct
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  export MKT_NO_NCCL=1
  MK_NODE_SIZE=2 t "4 ranks 2x2 correct" 120 4 build-gpu/rt/test_coll correct $((4<<20))
  MK_NODE_SIZE=2 MK_COLL_HIER_MIN=1 t "4 ranks 2x2 hierarchical correct" 120 4 build-gpu/rt/test_coll correct $((4<<20))
  MK_NODE_SIZE=8 t "16 ranks 2x8 test_scale x5" 180 16 build-gpu/rt/test_scale 5
  MK_NODE_SIZE=4 t "16 ranks 4x4 test_scale x5" 180 16 build-gpu/rt/test_scale 5
  MK_NODE_SIZE=2 t "16 ranks 8x2 test_scale x5" 180 16 build-gpu/rt/test_scale 5
  MK_NODE_SIZE=4 t "8 ranks 2x4 test_scale x5" 120 8 build-gpu/rt/test_scale 5
  MK_NODE_SIZE=8 t "16 ranks 2x8 ag_gemm uneven x5" 120 16 build-gpu/agg/test_ag_gemm uneven 5
  unset MKT_NO_NCCL
  echo quit | nvidia-cuda-mps-control
  sleep 1
fi
OUT=$W MK_KILL_ONLY="2x2" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill 2x2 rc=$?" | tee -a $S; tail -8 $W/kill-run.txt | tee -a $S
export MK_NODE_SIZE=1
lat() { timeout 120 $MPIB -np 2 build-gpu/rt/mkbench_coll --lat --op ag,ar --min 8 --max 64K > $W/lat-$1.log 2>&1; echo "== lat $1 rc=$?" | tee -a $S
  grep -E "^(allgather|allreduce) " $W/lat-$1.log | awk '{print "  "$1,$2,"ev",$4,$5,"gpu",$10,$11,$12}' | tee -a $S; }
bw() { timeout 150 $MPIB -np 2 build-gpu/rt/mkbench_coll --op ag,rs,ar --min 1M --max 256M --iters 5 > $W/bw-$1.log 2>&1; echo "== bw $1 rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce) " $W/bw-$1.log | awk '{printf "  %-13s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}' | tee -a $S; }
lat 1
bw 1
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
