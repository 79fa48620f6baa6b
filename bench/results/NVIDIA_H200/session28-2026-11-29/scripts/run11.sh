#!/bin/bash
# s28 call 11 (one H200, lab): the GEMM engine's run_cta twice in one kernel (two grouped GEMMs,
# a barrier between: setmaxnreg dec/inc to counts already held, barriers initialized again),
# against two launches, 4 repetitions.  Source: labs/twice.cu.
set -u
tar xJf build-gpu/s28h.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
mkdir -p $OUT
timeout 60 build-gpu/lab2/twice > $OUT/twice.txt 2>&1; echo "rc=$?" >> $OUT/twice.txt
cat $OUT/twice.txt
