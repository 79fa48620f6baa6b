#!/bin/bash
# s31 call 2 (one H200): our grouped GEMM at the DeepSeek-like per-rank shape two ways: bench_gemm --grouped
# (128 groups of ~256 random rows, N 4096, K 7168) and mkbench moe's "mkgemm" series at 1 rank on the same
# sizes (8192 tokens, 128 experts, top-4: 32768 rows), which on 2 x H200 measured 4.39 ms against bench_gemm's 3.62.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
cd $OUT
G=$OLDPWD/build-gpu/gemm/bench_gemm; M=$OLDPWD/build-gpu/moe-main/mkbench_moe
timeout 120 $G --grouped 128x256rx4096x7168,128x256x4096x7168,128x264x4096x7168 --reps 30 2>&1 | tail -6
OUT=$OUT/m1 timeout 200 $MPI -np 1 $M --shapes 8192x7168x128x4,4096x7168x256x8 --series dgemm --routing random --rounds 2 --iters 10 2>&1 | tail -5
timeout 120 $G --grouped 128x256rx4096x7168 --reps 30 2>&1 | tail -2
