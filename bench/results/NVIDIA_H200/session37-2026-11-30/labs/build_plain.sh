#!/bin/sh
# s37: the engine's plain GEMM bench with the lab timeline (build-gpu/plain-lab)
set -eu
cd /work/main
NVCC=/usr/local/cuda/bin/nvcc
OUT=build-gpu/plain-lab
mkdir -p $OUT
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Xptxas -v -Ikernels/gemm -Ikernels -Itools/mkbench"
gcc -std=c99 -O2 -Ikernels/gemm -Ikernels -c kernels/gemm/gemm_host.c -o $OUT/gemm_host.o
gcc -std=c99 -O2 -I/usr/local/cuda/include -DMKB_GIT_COMMIT="\"s37lab\"" -c tools/mkbench/common.c -o $OUT/common.o
$NVCC $NVFLAGS -include s37/lab_ts.cuh -c kernels/gemm/gemm.cu -o $OUT/gemm.o 2> $OUT/gemm.ptxas
$NVCC $NVFLAGS -DMKB_GEMM_MAIN -c s37/bench_gemm_lab.cu -o $OUT/bench_gemm.o 2> $OUT/bench_gemm.ptxas
grep -E "spill|stack frame" $OUT/gemm.ptxas | sort | uniq -c | head
$NVCC -gencode=arch=compute_90a,code=sm_90a $OUT/bench_gemm.o $OUT/gemm.o $OUT/gemm_host.o $OUT/common.o -o $OUT/bench_gemm -lcublas -lcublasLt
ls -la $OUT/bench_gemm
