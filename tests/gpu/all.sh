#!/bin/bash
# All GPU tests (and, with "bench", the benchmarks) on a Hopper machine,
# from the binaries tests/gpu/build.sh left in build-gpu/ (nothing is
# built here; a part whose binaries were not carried is skipped, saying
# so).  Logs go to $OUT when set.  Ends with one summary table.
#
#   bash tests/gpu/all.sh [tests|bench|all]
set -u
what=${1:-tests}
status=0
summary=()
part() { # NAME DIR COMMAND...
    local name=$1 dir=$2
    shift 2
    if [ ! -d "$dir" ]; then
        summary+=("$(printf '%-10s SKIP (no %s: run tests/gpu/build.sh and carry it)' "$name" "$dir")")
        return
    fi
    "$@"
    local rc=$?
    [ $rc -ne 0 ] && status=1
    summary+=("$(printf '%-10s %s (rc %d)' "$name" "$([ $rc = 0 ] && echo PASS || echo FAIL)" $rc)")
}
case $what in
tests) part coll build-gpu/rt bash tests/gpu/run.sh quick tests
       part gemm build-gpu/gemm bash tests/gpu/gemm.sh test
       part ag_gemm build-gpu/agg bash tests/gpu/ag_gemm.sh test ;;
bench) part coll build-gpu/rt bash tests/gpu/run.sh full bench
       part gemm build-gpu/gemm bash tests/gpu/gemm.sh bench
       part ag_gemm build-gpu/agg bash tests/gpu/ag_gemm.sh bench ;;
all)   part coll build-gpu/rt bash tests/gpu/run.sh full all
       part gemm build-gpu/gemm bash tests/gpu/gemm.sh all
       part ag_gemm build-gpu/agg bash tests/gpu/ag_gemm.sh all ;;
*) echo "usage: tests/gpu/all.sh [tests|bench|all]" >&2; exit 2 ;;
esac
echo "== GPU summary"
printf '%s\n' "${summary[@]}"
exit $status
