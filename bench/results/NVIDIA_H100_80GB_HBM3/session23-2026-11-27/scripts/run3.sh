#!/bin/bash
# s23 call 3: small chunks across nodes staged and pushed by one thread with one system-scope fence; the FIFO
# slot reserved first; the cached tail at GPU scope; one PCIe read for a remote credit (lab, uncommitted on 1590b07).
# Tests (GPU FIFO probe, 2 x 1 and MPS 2 x 2 / 2 x 8 virtual nodes), then --lat in turns with main (base23),
# the trace build's 8-byte all-gather, bandwidth spot checks, and test_socket --lat once more.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
nvidia-smi --query-gpu=name --format=csv,noheader
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_SPLIT -x MK_COLL_HIER_MIN -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-44s rc %d %4d s\n" "$tag" $rc $(($(date +%s)-t0)) | tee -a $S
}
(unset MK_TRANSPORT; CUDA_VISIBLE_DEVICES=0 timeout 60 build/tests/net/test_gpu_fifo > $W/gpu_fifo.log 2>&1; echo "test_gpu_fifo rc=$?" | tee -a $S; tail -3 $W/gpu_fifo.log)
export MK_NODE_SIZE=1
t "2x1 correct 16M" 120 2 build-gpu/rt/test_coll correct $((16<<20))
t "2x1 stress" 90 2 build-gpu/rt/test_coll stress
t "2x1 graph" 90 2 build-gpu/rt/test_coll graph
MK_TIMEOUT_MS=3000 t "2x1 nocall" 60 2 build-gpu/rt/test_coll nocall
t "2x1 test_scale x3" 90 2 build-gpu/rt/test_scale 3
MK_SM_SPLIT=ag_gemm:fused=1 t "2x1 ag_gemm fused correct" 90 2 build-gpu/agg/test_ag_gemm correct
MK_SM_SPLIT=ag_gemm:fused=1 t "2x1 ag_gemm fused stress" 90 2 build-gpu/agg/test_ag_gemm stress
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  export MKT_NO_NCCL=1
  MK_NODE_SIZE=2 t "MPS 4 ranks 2x2 correct" 120 4 build-gpu/rt/test_coll correct $((4<<20))
  MK_NODE_SIZE=2 MK_COLL_HIER_MIN=1 t "MPS 4 ranks 2x2 hierarchical correct" 120 4 build-gpu/rt/test_coll correct $((4<<20))
  MK_NODE_SIZE=2 t "MPS 4 ranks 2x2 stress" 120 4 build-gpu/rt/test_coll stress
  MK_NODE_SIZE=8 t "MPS 16 ranks 2x8 test_scale x3" 150 16 build-gpu/rt/test_scale 3
  MK_NODE_SIZE=2 t "MPS 16 ranks 8x2 test_scale x3" 150 16 build-gpu/rt/test_scale 3
  unset MKT_NO_NCCL
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
export MK_NODE_SIZE=1
lat() { timeout 100 $MPIB -np 2 $2 --lat --op ag,rs,ar --min 8 --max 64K > $W/lat-$1.log 2>&1; echo "== lat $1 rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce) " $W/lat-$1.log | awk '{print "  "$1,$2,"ev",$4,$5,"gpu",$10,$11,$12}' | tee -a $S; }
lat base1 build-gpu/base23/mkbench_coll
lat new1 build-gpu/rt/mkbench_coll
lat base2 build-gpu/base23/mkbench_coll
lat new2 build-gpu/rt/mkbench_coll
timeout 100 $MPIB -np 2 build-gpu/ctrace23n/mkbench_coll --lat --op ag --min 8 --max 8 > $W/ctrace.log 2>&1; echo "ctrace rc=$?" | tee -a $S
python3 tools/coll_trace.py $W/ctrace.log 2>&1 | head -20 | tee -a $S
bw() { timeout 100 $MPIB -np 2 $2 --op ag,ar --min 1M --max 64M --iters 5 > $W/bw-$1.log 2>&1; echo "== bw $1 rc=$?" | tee -a $S
  grep -E "^(allgather|allreduce) " $W/bw-$1.log | awk '{printf "  %-10s %8s ours %9s nccl %9s x %s\n",$1,$3,$5,$6,$7}' | tee -a $S; }
bw base build-gpu/base23/mkbench_coll
bw new build-gpu/rt/mkbench_coll
(unset MK_TRANSPORT MK_NODE_SIZE; timeout 60 build/tests/net/test_socket --lat 20000) 2>&1 | tee -a $S
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
cat $OUT/../summary.txt 2>/dev/null
