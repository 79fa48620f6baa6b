#!/bin/bash
# sanitize.sh - build the library and its tests with AddressSanitizer and
# UndefinedBehaviorSanitizer in ./build-asan and run `make check` there,
# leak checking on (CI runs it after the plain `make check`).
#
#   tools/sanitize.sh [make check arguments, e.g. TESTS=tests/unit/test_live]
#
# Every report fails the test that caused it (UBSan halts on the first
# error).  libpciaccess, which hwloc's PCI plugin loads and unloads, leaks
# at its own start; it is linked in (so its frames have a name) and that
# leak is suppressed (tools/lsan.supp).  Nothing else is.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
PCI=
# grep reads all of ldconfig's output: with -q it could stop first, and
# under pipefail ldconfig's SIGPIPE would fail the test (seen in CI: the
# library then went unlinked and its leak unsuppressed)
if ldconfig -p | grep 'libpciaccess\.so\.0 ' > /dev/null; then
    PCI="-Wl,--no-as-needed,-l:libpciaccess.so.0,--as-needed"
fi
mkdir -p build-asan
cd build-asan
if [ ! -f Makefile ]; then
    ../configure -q --with-cuda="$CUDA_HOME" CFLAGS="-g -O1 $SAN" FCFLAGS="-g -O1 $SAN" \
        LDFLAGS="$SAN" LIBS="$PCI"
fi
make -j"$(nproc)" >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0
export LSAN_OPTIONS=suppressions=$top/tools/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
make check "$@"
