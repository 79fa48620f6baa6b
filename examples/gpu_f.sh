#!/bin/sh
# gpu_f.sh - examples/gpu_f (Fortran: mkMemAlloc, mkAllReduce,
# mkAllGatherGemm, checked) alone and, where there are 2 GPUs, on 2 ranks
# under mpirun.  Without a GPU it is skipped (exit 77), saying so.
builddir=${top_builddir:-.}
bin=$builddir/examples/gpu_f
[ -x "$bin" ] || { echo "SKIP: $bin not built (no Fortran compiler)"; exit 77; }
out=$(timeout -k 5 120 "$bin" 2>&1); rc=$?
printf '%s\n' "$out"
[ $rc = 77 ] && { echo "SKIP: no GPU on this machine"; exit 77; }
[ $rc = 0 ] && printf '%s\n' "$out" | grep -q "rank 0: PASS" || { echo "FAIL: gpu_f alone (exit $rc)"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
MPIRUN=${MPIRUN:-$(command -v mpirun)}
if [ "$ngpu" -ge 2 ] && [ -n "$MPIRUN" ]; then
    out=$(timeout -k 5 120 "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 "$bin" 2>&1); rc=$?
    printf '%s\n' "$out"
    [ $rc = 0 ] && [ "$(printf '%s\n' "$out" | grep -c ': PASS$')" = 2 ] ||
        { echo "FAIL: gpu_f on 2 ranks (exit $rc)"; exit 1; }
fi
echo "PASS"
