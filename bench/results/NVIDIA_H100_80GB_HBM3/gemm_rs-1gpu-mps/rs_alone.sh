#!/bin/bash
R=build-gpu/rep/rep
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=8000 CUDA_VISIBLE_DEVICES=0
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-z CUDA_MPS_LOG_DIRECTORY=/tmp/mps-z-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT"
export MK_NODE_SIZE=2 MK_TRANSPORT=socket
for i in 1 2 3 4 5 6 7 8; do
  r=$(timeout 60 $M -np 4 $R 327304 200 1 2>&1)
  echo "run $i (200 RS calls, no sync between): $(echo "$r" | grep -c 'bad 0 async success') ranks clean; $(echo "$r" | grep -c 'timed out') timeouts"
done
for i in 1 2 3 4; do
  r=$(timeout 60 $M -np 4 $R 327304 30 0 2>&1)
  echo "run $i (30 RS calls, host sync each): $(echo "$r" | grep -c 'bad 0 async success') ranks clean; $(echo "$r" | grep -c 'timed out') timeouts"
done
echo quit | nvidia-cuda-mps-control
