#!/bin/sh
# The fuzz harnesses (tests/fuzz/fz_*.c) over their corpus (kept in
# tests/fuzz/corpus/<target>) and a bounded number of mutated inputs, in
# make check.  Each prints its seed; -seed=S replays a run.
#
#   MK_FUZZ_TIME=seconds   run each harness this long instead (on request)
#   MK_FUZZ_SEED=S         the seed (default: a fresh one, printed)
#   tests/fuzz/run.sh --libfuzzer SECONDS
#                          build each harness with clang -fsanitize=fuzzer,
#                          address,undefined against the library's sources
#                          and run libFuzzer that long on a copy of the
#                          corpus (new inputs it finds stay in
#                          tests/fuzz/found/<target>; add the good ones to
#                          the corpus)
set -u
srcdir=${srcdir:-.}
top=$srcdir
[ -d "$top/tests/fuzz/corpus" ] || top=$(dirname "$0")/../..
top=$(cd "$top" && pwd)
corpus=$top/tests/fuzz/corpus
if [ "${1:-}" = --libfuzzer ]; then
    secs=${2:-60}
    command -v clang >/dev/null || { echo "run.sh: clang not found (apt-get install clang)"; exit 77; }
    # The library itself instrumented for coverage and the sanitizers, in
    # its own build folder (configured once), then one libFuzzer binary
    # per harness.
    bld=${MK_FUZZ_BUILD:-$top/build-fuzz}
    mkdir -p "$bld"
    if [ ! -f "$bld/Makefile" ]; then
        (cd "$bld" && "$top/configure" -q CC=clang \
            CFLAGS="-g -O1 -fsanitize=fuzzer-no-link,address,undefined") || exit 1
    fi
    make -C "$bld" -j2 libmkcore.la >/dev/null || exit 1
    out=$top/tests/fuzz/found
    for t in live socket config boot; do
        mkdir -p "$out/$t"
        clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_LIBFUZZER \
            -I"$top/include" -I"$top/src/core" -I"$top/src" -I"$top" -I"$bld" -I"$top/kernels" \
            -I/usr/local/cuda/include "$top/tests/fuzz/fz_$t.c" "$bld/.libs/libmkcore.a" \
            $(sed -n "s/^dependency_libs='\(.*\)'/\1/p" "$bld/libmkcore.la") -lstdc++ -o "$bld/fz_$t" || exit 1
        MK_DEBUG=NONE ASAN_OPTIONS=detect_leaks=0 "$bld/fz_$t" -max_total_time="$secs" -max_len=4096 \
            "$out/$t" "$corpus/$t" || exit 1
    done
    exit 0
fi
status=0
export MK_DEBUG=NONE # the refusals would fill the log
for spec in live:200000 socket:50000 config:50000 boot:100; do
    t=${spec%%:*} runs=${spec#*:}
    set -- "-runs=$runs"
    [ -n "${MK_FUZZ_TIME:-}" ] && set -- "-time=$MK_FUZZ_TIME"
    [ -n "${MK_FUZZ_SEED:-}" ] && set -- "$@" "-seed=$MK_FUZZ_SEED"
    if ! ./tests/fuzz/fz_$t "$@" "$corpus/$t"; then
        echo "FAIL: fuzz $t (rerun with the seed above to replay)"
        status=1
    fi
done
exit $status
