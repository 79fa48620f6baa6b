#!/bin/sh
# Builds what tests/gpu/run.sh and tests/gpu/scale.sh run, here (the GPU
# machine has no libtool): the library out of tree in build-gpu/rt-build,
# then the collective tests (test_coll, test_scale) and the collective
# benchmark, statically linked against libmkcore, into build-gpu/rt (the
# folder to carry).  Run from the repository root.
#
# Lab builds: COLL_OUT and COLL_BLD name other folders, MK_BUILD_DEFS adds
# preprocessor definitions to the library (e.g. COLL_OUT=build-gpu/ctrace
# COLL_BLD=build-gpu/ctrace-build MK_BUILD_DEFS=-DMKI_COLL_TRACE=20: the
# collectives' globaltimer trace, read by tools/coll_trace.py).
set -eu
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CC=${CC:-gcc}
TOP=$(pwd)
BLD=${COLL_BLD:-build-gpu/rt-build}
OUT=${COLL_OUT:-build-gpu/rt}
mkdir -p "$BLD" "$OUT"
if [ ! -f "$BLD/Makefile" ]; then
    (cd "$BLD" && "$TOP/configure" -q)
fi
make -C "$BLD" -j"${JOBS:-2}" ${MK_BUILD_DEFS:+"DEFS=-DHAVE_CONFIG_H $MK_BUILD_DEFS"} libmkcore.la > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo uncommitted)
ARCH="-gencode=arch=compute_90a,code=sm_90a"
INC="-Iinclude -Isrc/core -Isrc -I. -Ikernels -Ikernels/gemm -I$BLD -Itools/mkbench -I/usr/lib/x86_64-linux-gnu/pmix2/include"
LIBS="$BLD/.libs/libmkcore.a -lnccl -lpmix -lhwloc -libverbs -lefa -lrt -ldl -lpthread -lm"
$NVCC $ARCH -O2 -std=c++17 $INC -DWITH_NCCL tests/gpu/test_coll.cu $LIBS -o $OUT/test_coll
$NVCC $ARCH -O2 -std=c++17 $INC tests/gpu/test_scale.cu $LIBS -o $OUT/test_scale
$CC -std=gnu11 -O2 -I/usr/local/cuda/include -DMKB_GIT_COMMIT="\"$COMMIT\"" \
    -c tools/mkbench/common.c -o $BLD/mkb_common.o
$NVCC $ARCH -O2 -std=c++17 $INC -DMKB_COLL_MAIN tools/mkbench/coll.cu $BLD/mkb_common.o \
    $LIBS -o $OUT/mkbench_coll
ls -la $OUT
