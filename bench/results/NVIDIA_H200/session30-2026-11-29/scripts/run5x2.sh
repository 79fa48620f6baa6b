#!/bin/bash
# s30 call 5 on nvidia-h200-x2: correctness on 2 GPUs: test_gemm_rs correct (both ops; the engine's two-problem
# change), then moe.sh test-gpus (the one-kernel dispatch + GEMM, the layer with its down projection into the
# combine's stage, 2 x 1 virtual nodes), under one budget.
set -u
tar xJf build-gpu/s30x.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS"
mkdir -p $OUT/grs
for m in correct ar-correct; do timeout 90 $MPI -np 2 build-gpu/grs/test_gemm_rs $m > $OUT/grs/$m.txt 2>&1; echo "2gpu test_gemm_rs $m rc=$? $(grep -c PASS $OUT/grs/$m.txt) PASS $(grep -c FAIL $OUT/grs/$m.txt) FAIL"; done
MK_PARTS="moe:test-gpus" MK_GPU_BUDGET_S=${BUDGET:-400} bash tests/gpu/all.sh parts
echo "all.sh rc=$?"
