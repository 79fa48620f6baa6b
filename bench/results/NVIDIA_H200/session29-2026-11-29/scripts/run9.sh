#!/bin/bash
# s29 call 9 (nvidia-h200, 1 GPU): stress (100 pairs without a sync) and the pair's CUDA graph x20 across 2 x 1 virtual nodes.
set -u
tar xJf build-gpu/s29g.tar.xz
B=build-gpu/moe
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-moe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-moe-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY $OUT
nvidia-cuda-mps-control -d
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
SUM=$OUT/summary.txt; : > $SUM
st() { # NAME LIMIT NP NODE_SIZE ARGS
  local name=$1 lim=$2 np=$3 ns=$4; shift 4; local t0=$(date +%s)
  local X=""
  if [ -n "$ns" ]; then export MK_NODE_SIZE=$ns MK_TRANSPORT=socket; X="-x MK_NODE_SIZE -x MK_TRANSPORT"; else unset MK_NODE_SIZE MK_TRANSPORT; fi
  echo "=== $name" >> $OUT/log.txt
  timeout -k 5 $lim $MPI $X -np $np "$@" >> $OUT/log.txt 2>&1; local rc=$?
  printf "%-50s rc %3d %4d s\n" "$name" $rc $(( $(date +%s) - t0 )) | tee -a $SUM
  pkill -9 -f "$B/test_moe" 2>/dev/null
}
st "x2 2x1 nodes stress" 120 2 1 $B/test_moe stress
st "x2 2x1 nodes graph" 120 2 1 $B/test_moe graph
echo quit | nvidia-cuda-mps-control
grep -E "FAIL|rror" $OUT/log.txt | head -40
cat $SUM
