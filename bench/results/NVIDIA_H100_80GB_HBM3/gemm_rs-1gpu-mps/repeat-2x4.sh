#!/bin/bash
# the 2x2 virtual-node failure: repeat the unfused shape, with and without SM partitioning
B=build-gpu/grs
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=8000 CUDA_VISIBLE_DEVICES=0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-y CUDA_MPS_LOG_DIRECTORY=/tmp/mps-y-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT -x MK_DEBUG -x MK_SEED"
export MK_NODE_SIZE=4 MK_TRANSPORT=socket MK_DEBUG=WARN
for pct in "" 12; do
  for i in 1 2 3; do
    if [ -n "$pct" ]; then export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct; M2="$M -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"; else unset CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; M2="$M"; fi
    r=$(timeout 60 $M2 -np 8 $B/test_gemm_rs correct ${SHAPES:-23} 2>&1)
    echo "pct=${pct:-none} run $i: $(echo "$r" | grep -c ' ok$') ok, $(echo "$r" | grep -c 'FAIL') FAIL, $(echo "$r" | grep -c 'timed out') timeouts"
  done
done
echo quit | nvidia-cuda-mps-control
