#!/bin/sh
# Builds the GEMM engine, its GPU test and the gemm benchmark into
# build-gpu/gemm/ (for tests/gpu/gemm.sh on the GPU machine), and the CPU unit
# test. Run from the repository root. NVCC, CC and JOBS may be overridden.
# The Autotools build replaces this script; the flags below are the ones it
# must use.
set -eu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CC=${CC:-gcc}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
OUT=build-gpu/gemm
mkdir -p "$OUT"
NVFLAGS="-gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Xptxas -v -Ikernels/gemm -Ikernels -Itools/mkbench"
COMMIT=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo uncommitted)

# Host-only pieces: plain C.
$CC -std=c99 -O2 -Wall -Wextra -Ikernels/gemm -Ikernels -c kernels/gemm/gemm_host.c -o $OUT/gemm_host.o
$CC -std=c99 -O2 -Wall -Wextra -I"$CUDA_INC" -DMKB_GIT_COMMIT="\"$COMMIT\"" \
    -c tools/mkbench/common.c -o $OUT/common.o
$CC -std=c99 -O2 -Wall -Wextra -Ikernels/gemm -Ikernels tests/unit/test_gemm_args.c \
    kernels/gemm/gemm_host.c -o $OUT/test_gemm_args

# Device code: ptxas reports go to *.ptxas so spills can be checked.
$NVCC $NVFLAGS -c kernels/gemm/gemm.cu -o $OUT/gemm.o 2> $OUT/gemm.ptxas &
$NVCC $NVFLAGS -c tests/gpu/test_gemm.cu -o $OUT/test_gemm.o 2> $OUT/test_gemm.ptxas &
$NVCC $NVFLAGS -DMKB_GEMM_MAIN -c tools/mkbench/gemm.cu -o $OUT/bench_gemm.o 2> $OUT/bench_gemm.ptxas &
wait
cat $OUT/*.ptxas | grep -E "error|warning" && exit 1 || true
if grep -E "spill (stores|loads)" $OUT/*.ptxas | grep -v " 0 bytes spill stores, 0 bytes spill loads"; then
    echo "build.sh: spills in GEMM kernels" >&2; exit 1
fi
if grep -E "[1-9][0-9]* bytes stack frame" $OUT/*.ptxas; then
    echo "build.sh: stack frame (local memory) in GEMM kernels" >&2; exit 1
fi

# cudart static (nvcc default), cuBLAS dynamic.
$NVCC -gencode=arch=compute_90a,code=sm_90a $OUT/test_gemm.o $OUT/gemm.o $OUT/gemm_host.o \
    -o $OUT/test_gemm -lcublas -lcublasLt
$NVCC -gencode=arch=compute_90a,code=sm_90a $OUT/bench_gemm.o $OUT/gemm.o $OUT/gemm_host.o \
    $OUT/common.o -o $OUT/bench_gemm -lcublas -lcublasLt
echo "build.sh: built $OUT/test_gemm $OUT/bench_gemm $OUT/test_gemm_args"
