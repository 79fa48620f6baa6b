#!/bin/sh
# nvml.sh - run test_nvml with tests/topo/fake_nvml.c as libnvidia-ml.so.1
# (found through LD_LIBRARY_PATH, as dlopen would find the driver's), and
# once with no NVML at all.
builddir=${top_builddir:-.}
bin=$builddir/tests/topo/test_nvml
lib=$builddir/tests/topo/.libs/libfakenvml.so
[ -x "$bin" ] && [ -f "$lib" ] || { echo "SKIP: $bin or $lib not built"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
ln -s "$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")" "$dir/libnvidia-ml.so.1"
failed=0
for mode in direct switch down; do
    LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$bin" $mode ||
        { echo "FAIL: $mode"; failed=1; }
done
# The real library must not be found for this one: an empty search path
# is not enough when the driver is installed, so say so and skip it.
if ! ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1; then
    "$bin" missing || { echo "FAIL: missing"; failed=1; }
fi
exit $failed
