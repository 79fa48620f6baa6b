#!/bin/sh
# comm_net.sh - the inter-node path of a communicator under mpirun: runs
# tests/net/test_comm_net on 4 ranks as 2 virtual nodes (MK_NODE_SIZE=2)
# in each of its modes (see test_comm_net.c).  Every run is bounded by
# timeout(1), so a hang fails instead of blocking.
builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
bin=$builddir/tests/net/test_comm_net
skip() { echo "SKIP: $*"; exit 77; }

MPIRUN=${MPIRUN:-$(command -v mpirun)}
[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip "no mpirun (configure found none)"
[ -x "$bin" ] || skip "$bin not built"
command -v timeout >/dev/null || skip "no timeout(1) to bound the runs"

OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_vader_single_copy_mechanism
launch() {
    timeout -k 5 90 "$MPIRUN" --allow-run-as-root --oversubscribe -np 4 \
        -x MK_NODE_SIZE=2 -x MK_TIMEOUT_MS=3000 -x MK_WORKSPACE_SIZE=1M "$@"
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
        [ $rc = 124 ] || [ $rc = 137 ] && echo "(timed out after 90 s)"
        echo "FAIL: $name (exit $rc, $ok of 4 ranks clean, ${secs} s)"
        failed=$((failed + 1))
    fi
}

run "socket: wiring, FIFO write+signal, bounded destroy, no leaked thread" \
    -x MK_TRANSPORT=socket "$bin" data
run "MK_TRANSPORT=ibverbs without RDMA fails mkCommInit everywhere" \
    -x MK_TRANSPORT=ibverbs "$bin" nordma
run "MK_TRANSPORT=ibverbs, IB NICs in the topology but no RDMA device" \
    -x MK_TRANSPORT=ibverbs -x MK_TOPO_XML="$top_srcdir/tests/xml/dgx-h100.xml" \
    -x MK_TOPO_FAKE_GPUS=n=8,link=nv18 "$bin" nordma
run "a rank that leaves breaks its peers' communicators" \
    -x MK_TRANSPORT=socket "$bin" dead
run "mkCommAbort stops the proxy without waiting for peers" \
    -x MK_TRANSPORT=socket "$bin" abort
echo "$passed passed, $failed failed"
[ $failed = 0 ]
