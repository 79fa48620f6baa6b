#!/bin/bash
# s18 call 12: the final build's collectives on one node (no transport): test_coll correct / stress / graph / bits on
# 2 GPUs, and 4 ranks on one GPU under MPS (the slot and spin changes touch the shared kernels)
set -u
tar xJf build-gpu/sk12.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
for m in correct stress graph bits; do timeout 120 $MPIB -np 2 build-gpu/rt/test_coll $m $((64<<20)) > $OUT/$m.log 2>&1; echo "2gpu $m rc=$?"; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1 MK_SM_BUDGET=32
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && { timeout 120 $MPIB -np 4 build-gpu/rt/test_coll correct $((4<<20)) > $OUT/mps4.log 2>&1; echo "1gpu x4 MPS correct rc=$?"; echo quit | nvidia-cuda-mps-control; }
