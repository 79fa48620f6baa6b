#!/bin/sh
# mpirun.sh - node grouping, MK_NODE_SIZE, paths and plans of a real
# communicator: tests/topo/test_topo_comm under mpirun -np 4 (PMIx), with
# GPU facts injected by MK_TOPO_FAKE_GPUS since CI has no GPU; then its
# launcher-free mode.  Every run is bounded by timeout(1).
builddir=${top_builddir:-.}
bin=$builddir/tests/topo/test_topo_comm
skip() { echo "SKIP: $*"; exit 77; }

[ -x "$bin" ] || skip "$bin is not built"
command -v timeout >/dev/null || skip "no timeout(1) to bound the runs"
MPIRUN=${MPIRUN:-$(command -v mpirun)}

passed=0 failed=0
report() {  # name, exit status, output, ranks expected clean
    printf '%s\n' "$3"
    ok=$(printf '%s\n' "$3" | grep -c ", 0 failed$")
    if [ "$2" = 0 ] && [ "$ok" = "$4" ]; then
        echo "PASS: $1"; passed=$((passed + 1))
    else
        echo "FAIL: $1 (exit $2, $ok of $4 ranks clean)"; failed=$((failed + 1))
    fi
}

out=$(MK_BOOTSTRAP=none MK_TOPO_FAKE_GPUS=n=1 timeout -k 5 60 "$bin" self 2>&1)
report "size-1 communicator: mkCommGetInfo" $? "$out" 1

[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || {
    echo "SKIP: the mpirun runs: no mpirun (configure found none)"
    [ $failed = 0 ] || exit 1; exit 77; }
# Open MPI refuses root without the flag; --oversubscribe lets 4 ranks run
# on fewer cores; single-copy needs ptrace rights containers often lack.
OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_vader_single_copy_mechanism
run() {
    name=$1; shift
    out=$(timeout -k 5 120 "$MPIRUN" --allow-run-as-root --oversubscribe \
          -np 4 -x MK_TOPO_FAKE_GPUS=n=2,link=nv18 "$@" 2>&1)
    report "$name" $? "$out" 4
}
run "4 ranks on 2 fake GPUs: same-gpu and nvlink paths, SM budget" \
    "$bin" shared
run "MK_NODE_SIZE=2: two virtual nodes over the socket transport" \
    -x MK_NODE_SIZE=2 "$bin" vnodes
run "MK_TRANSPORT=ibverbs with no RDMA device: mkErrTransport" \
    -x MK_NODE_SIZE=2 -x MK_TRANSPORT=ibverbs "$bin" notransport
run "malformed MK_SM_SPLIT: mkErrInvalidArgument" \
    -x MK_SM_SPLIT=intra=lots "$bin" badsplit
run "MK_SM_SPLIT on one rank only: every rank refuses" "$bin" mismatch
run "MK_SM_BUDGET overfilling a shared GPU: every rank refuses" \
    -x MK_SM_BUDGET=100 "$bin" overbudget
echo "$passed passed, $failed failed"
[ $failed = 0 ]
