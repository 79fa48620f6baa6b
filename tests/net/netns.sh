#!/bin/sh
# netns.sh - the socket transport + proxy between two network namespaces
# joined by a veth pair (two "nodes" on one host).  Creates
#   mkt$$a (10.231.76.1/30 on veth mkv$$a) <-> mkt$$b (10.231.76.2/30 on mkv$$b)
# runs one rank of test_socket in each, checks that the bytes crossed the
# veth, and deletes everything on exit.  Skips (77) when it cannot make
# namespaces (not root, no ip(8), no netns support).
b=${top_builddir:-.}
prog=$b/tests/net/test_socket
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: not root: cannot create network namespaces"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "SKIP: no ip(8) (iproute2)"; exit 77; }

A=mkt$$a B=mkt$$b VA=mkv$$a VB=mkv$$b
dir=$(mktemp -d) || exit 1
cleanup() {
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    ip link del "$VA" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM HUP

if ! ip netns add "$A" 2>"$dir/err" || ! ip netns add "$B" 2>>"$dir/err"; then
    echo "SKIP: cannot create network namespaces: $(cat "$dir/err")"; exit 77
fi
if ! ip link add "$VA" type veth peer name "$VB" 2>"$dir/err"; then
    echo "SKIP: cannot create a veth pair: $(cat "$dir/err")"; exit 77
fi
for step in "link set $VA netns $A" "link set $VB netns $B" \
            "-n $A addr add 10.231.76.1/30 dev $VA" \
            "-n $B addr add 10.231.76.2/30 dev $VB" \
            "-n $A link set $VA up" "-n $B link set $VB up" \
            "-n $A link set lo up" "-n $B link set lo up"; do
    # shellcheck disable=SC2086 # the words of each step are arguments
    ip $step || { echo "FAIL: ip $step"; exit 1; }
done

rx_before=$(ip netns exec "$B" cat /sys/class/net/"$VB"/statistics/rx_bytes)
export MK_SOCKET_NCONN=4 MK_TIMEOUT_MS=30000
(MK_BOOTSTRAP_IFNAME=$VA MK_SOCKET_IFNAME=$VA ip netns exec "$A" "$prog" netns 0 "$dir") &
pa=$!
MK_BOOTSTRAP_IFNAME=$VB MK_SOCKET_IFNAME=$VB ip netns exec "$B" "$prog" netns 1 "$dir"
rb=$?
wait $pa
ra=$?
rx_after=$(ip netns exec "$B" cat /sys/class/net/"$VB"/statistics/rx_bytes)
moved=$((rx_after - rx_before))
echo "veth $VB received $moved bytes"
fail=0
[ $ra = 0 ] && [ $rb = 0 ] || { echo "FAIL: ranks exited $ra and $rb"; fail=1; }
# Each rank sends about 23 MiB of blocks plus 1 MiB of fenced writes.
[ $moved -gt 24000000 ] || { echo "FAIL: only $moved bytes crossed the veth"; fail=1; }
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
