#!/bin/bash
B=build-gpu/grs
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=15000 CUDA_VISIBLE_DEVICES=0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-t CUDA_MPS_LOG_DIRECTORY=/tmp/mps-t-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SM_SPLIT"
echo "== 1 rank: the GEMM alone both ways (ours unfused = our GEMM)"
[ -n "${SKIP1:-}" ] || for sh in 8192x8192x4096 2048x8192x4096 16x8192x4096; do timeout 60 $M -np 1 $B/test_gemm_rs time $sh 2>&1 | grep "time "; done
nvidia-cuda-mps-control -d
for split in ${SPLITS:-gemm_rs:fused=1 gemm_rs:fused=0}; do
  for sh in 8192x8192x4096 16384x8192x4096 2048x8192x4096 16x8192x4096 6000x5000x2048; do
    echo "== 2 ranks MPS $split $sh"; MK_SM_SPLIT=$split timeout 60 $M -np 2 $B/test_gemm_rs time $sh 2>&1 | grep "time "
  done
done
echo quit | nvidia-cuda-mps-control
