#!/bin/bash
# GEMM engine on the GPU machine: unit test, SASS check, GPU test, benchmark.
# Runs the binaries that kernels/gemm/build.sh left in build-gpu/gemm/ (build
# nothing here). Logs and JSON go to $OUT when set (else build-gpu/gemm/out).
# Usage: bash tests/gpu/gemm.sh [test|bench|all|sanitize] [extra bench args]
#   sanitize: compute-sanitizer memcheck over the small test cases (slow)
set -u
B=build-gpu/gemm
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER   # lazy loading can deadlock cross-stream waits
what=${1:-all}; shift || true
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv,noheader 2>&1 | tee "$O/gpu.txt"

if [ "$what" = sanitize ]; then
    CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    timeout 400 "$CS" --tool memcheck --error-exitcode 9 "$B/test_gemm" --small \
        > "$O/sanitizer.log" 2>&1
    rc=$?
    grep -E "FAIL|ERROR SUMMARY|Invalid" "$O/sanitizer.log" | head -10
    tail -2 "$O/sanitizer.log"
    echo "compute-sanitizer exit $rc"
    exit $rc
fi
if [ "$what" != bench ]; then
    "$B/test_gemm_args" > "$O/unit.log" 2>&1 || status=1
    tail -1 "$O/unit.log"
    if command -v cuobjdump > /dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
        CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
        $CUOBJ --dump-sass "$B/gemm.o" > /tmp/gemm.sass
        echo "SASS gemm.o: HGMMA $(grep -c HGMMA /tmp/gemm.sass), LDL $(grep -c 'LDL' /tmp/gemm.sass)," \
             "STL $(grep -c 'STL' /tmp/gemm.sass)" | tee "$O/sass.txt"
        grep -m3 HGMMA /tmp/gemm.sass | tee -a "$O/sass.txt"
    fi
    timeout 120 "$B/test_gemm" > "$O/test.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    grep -E "FAIL|timed out" "$O/test.log" | head -20
    tail -1 "$O/test.log"
    [ $rc -eq 124 ] && echo "test_gemm: TIMEOUT (hang?)"
fi
if [ "$what" != test ]; then
    timeout 170 "$B/bench_gemm" "$@" > "$O/bench.log" 2>&1 || status=1
    sed -n '/^GEMM bf16/,$p' "$O/bench.log"
    tail -3 "$O/bench.log" | grep -v "^results" | grep -iv "^[0-9a-z]*x" || true
fi
exit $status
