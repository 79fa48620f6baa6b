#!/bin/sh
# run.sh - communicators under mpirun (PMIx), checked against MPI: runs
# tests/mpi/test_comm on 4 ranks in each of its modes (see test_comm.c).
# Every run is bounded by timeout(1), so a hang fails instead of blocking.
builddir=${top_builddir:-.}
bin=$builddir/tests/mpi/test_comm
skip() { echo "SKIP: $*"; exit 77; }

MPIRUN=${MPIRUN:-$(command -v mpirun)}
[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip "no mpirun (configure found none)"
[ -x "$bin" ] || skip "$bin not built: configure found no mpicc"
command -v timeout >/dev/null || skip "no timeout(1) to bound the runs"

# Open MPI refuses root without the flag; --oversubscribe lets 4 ranks run
# on fewer cores.  Its shared-memory transport's single-copy mode needs
# ptrace rights that containers often lack.
OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_vader_single_copy_mechanism
launch() {
    timeout -k 5 120 "$MPIRUN" --allow-run-as-root --oversubscribe -np 4 "$@"
}

passed=0 failed=0
run() {
    name=$1; shift
    t0=$(date +%s)
    out=$(launch "$@" 2>&1); rc=$?
    secs=$(( $(date +%s) - t0 ))
    printf '%s\n' "$out"
    ok=$(printf '%s\n' "$out" | grep -c ', 0 failed$')
    if [ $rc = 0 ] && [ "$ok" = 4 ]; then
        echo "PASS: $name (${secs} s)"; passed=$((passed + 1))
    else
        [ $rc = 124 ] || [ $rc = 137 ] && echo "(timed out after 120 s)"
        echo "FAIL: $name (exit $rc, $ok of 4 ranks clean, ${secs} s)"
        failed=$((failed + 1))
    fi
}

run "mkCommInit, unique id, split, virtual nodes, missing rank" "$bin" mpi
run "MK_NODE_SIZE=2" -x MK_NODE_SIZE=2 "$bin" nodesize
run "bootstrap barrier deadline with an absent rank" "$bin" fence
echo "$passed passed, $failed failed"
[ $failed = 0 ]
