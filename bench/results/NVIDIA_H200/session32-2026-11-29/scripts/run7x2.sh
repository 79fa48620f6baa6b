#!/bin/bash
# s32 call 7 (2 x H200): the final push build (branch wip-push at its landing commit: the record word that every
# rank runs the one-launch layer, moe-push): tests/gpu/moe.sh test-gpus (every 2-GPU step of the MoE calls), then
# test_moe layer under MPS at 4 and 8 ranks on the 2 GPUs; all within MK_GPU_BUDGET_S.
set -u
T0=$(date +%s)
export MK_GPU_DEADLINE=$((T0 + ${MK_GPU_BUDGET_S:-300}))
tar xJf build-gpu/s32f.tar.xz -C build-gpu
MK_GPU_MOE=build-gpu/moe-push OUT=$OUT/moe bash tests/gpu/moe.sh test-gpus > $OUT/moe-test-gpus.log 2>&1
echo "moe.sh test-gpus rc=$? $(( $(date +%s) - T0 )) s"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
for np in 4 8; do
  left=$((MK_GPU_DEADLINE - $(date +%s)))
  [ $left -gt 30 ] || { echo "MPS $np ranks layer: skipped, out of time"; continue; }
  timeout $left mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -np $np build-gpu/moe-push/test_moe layer > $OUT/t-push-mps$np.txt 2>&1
  echo "push MPS $np ranks layer rc=$? $(( $(date +%s) - T0 )) s $(grep -c PASS $OUT/t-push-mps$np.txt) PASS $(grep -c FAIL $OUT/t-push-mps$np.txt) FAIL"
done
echo quit | nvidia-cuda-mps-control
tail -n 40 $OUT/moe-test-gpus.log
