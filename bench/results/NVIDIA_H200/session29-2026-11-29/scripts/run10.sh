#!/bin/bash
# s29 call 10 (nvidia-h200, 1 GPU): the layer's combine takes its dispatch's token counts (one exchange per call):
# layer, layergraph at 2 x 1, layeroverflow at 2 x 2, the soak at 2 x 2.
set -u
tar xJf build-gpu/s29h.tar.xz
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
  pkill -9 -f "build-gpu/(moe|rt)/test_" 2>/dev/null
}
st "x2 2x1 nodes layer" 120 2 1 build-gpu/moe/test_moe layer
st "x2 2x1 nodes layergraph" 90 2 1 build-gpu/moe/test_moe layergraph
st "x4 2x2 nodes layeroverflow" 90 4 2 build-gpu/moe/test_moe layeroverflow
st "x4 2x2 soak 40s" 100 4 2 build-gpu/rt/test_scale soak 40
echo quit | nvidia-cuda-mps-control
grep -E "FAIL|soak .* calls checked" $OUT/log.txt | tail -30
cat $SUM
