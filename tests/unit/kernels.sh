#!/bin/sh
# kernels.sh - every device source was compiled for sm_90a, and ptxas
# reports no register spills in any kernel (from the -Xptxas -v logs the
# build keeps next to each object).  Where cuobjdump exists (the GPU
# machines; not the Debian CUDA install), also check the SASS: device code
# for sm_90a only, and HGMMA in the GEMM kernels.
b=${top_builddir:-.}
fail=0 n=0
logs=$(find "$b/kernels" -name '*.lo.ptxas.log' 2>/dev/null)
[ -n "$logs" ] || { echo "FAIL: no ptxas logs under $b/kernels: were the kernels built?"; exit 1; }
for log in $logs; do
    n=$((n + 1))
    grep -q "for 'sm_90a'" "$log" || { echo "FAIL: $log: not compiled for sm_90a"; fail=1; }
    if grep -E 'bytes spill (stores|loads)' "$log" | grep -vq ' 0 bytes spill stores, 0 bytes spill loads'; then
        echo "FAIL: $log: register spills:"; grep -B2 -E '[1-9][0-9]* bytes spill' "$log"; fail=1
    fi
done
echo "checked $n device objects"
if command -v cuobjdump >/dev/null 2>&1 && [ -f "$b/.libs/libmkernel.so" ]; then
    lib=$b/.libs/libmkernel.so
    for a in $(cuobjdump --list-elf "$lib" | grep -o 'sm_[0-9a-z]*' | sort -u); do
        [ "$a" = sm_90a ] || { echo "FAIL: device code for $a"; fail=1; }
    done
    if cuobjdump --dump-sass "$lib" | grep -q 'Function : .*gemm'; then
        cuobjdump --dump-sass "$lib" | grep -q HGMMA || { echo "FAIL: GEMM kernels without HGMMA"; fail=1; }
    fi
else
    echo "note: no cuobjdump here; SASS checks run on the GPU machine (tests/gpu/run.sh)"
fi
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
