#!/bin/sh
# coll_trace.sh - the collectives' lab trace stays usable: tools/coll_trace.py
# reads a known set of "COLLT" lines into the medians they hold, says so
# when there are none, and kernels/ops/coll.cu still compiles for sm_90a
# with -DMKI_COLL_TRACE (the lab build of tests/gpu/coll_build.sh) without
# register spills.  77 (skip) without python3; the compile is skipped,
# with a note, without nvcc.
src=${top_srcdir:-.}
bld=${top_builddir:-.}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# Two calls (e 10 and 30) on two ranks, CTA 0 of 64: entry at t0, SEND's
# start 5 us later, its end after 50 (call 10) or 60 us (call 30), leave
# after 100 / 120 us; rank 1's clock far from rank 0's.
{
    for e in 10 30; do
        for r in 0 1; do
            t0=$((1000000 * (r + 1) + e * 1000))
            d=$([ $e = 10 ] && echo 0 || echo 10000)
            echo "COLLT e $e rank $r cta 0 nch 64 ev 1 arg 0 t $t0"
            echo "COLLT e $e rank $r cta 0 nch 64 ev 14 arg 1 t $((t0 + 5000))"
            echo "COLLT e $e rank $r cta 0 nch 64 ev 4 arg 0 t $((t0 + 50000 + d))"
            echo "COLLT e $e rank $r cta 0 nch 64 ev 13 arg 0 t $((t0 + 100000 + 2 * d))"
        done
    done
    echo "an unrelated line"
} > "$tmp/log"
out=$(python3 "$src/tools/coll_trace.py" "$tmp/log" 2>&1)
echo "$out" | grep -Eq '^send: start +first +5\.0 +5\.0 +1\.0$' && ok || bad "send: start: $out"
echo "$out" | grep -Eq '^send: end \(flushed\) +first +55\.0 +55\.0 +1\.0$' && ok || bad "send: end: $out"
echo "$out" | grep -Eq '^leave +first +110\.0 +110\.0 +1\.0$' && ok || bad "leave: $out"
echo "$out" | grep -Eq ' (middle|last) +[0-9]' && bad "CTAs that did not stamp: $out" || ok
echo "unrelated" > "$tmp/none"
python3 "$src/tools/coll_trace.py" "$tmp/none" > "$tmp/none.out" 2>&1
[ $? = 1 ] && grep -q 'no COLLT lines' "$tmp/none.out" && ok || bad "a log without stamps: $(cat "$tmp/none.out")"

. "$src/tests/unit/trace_build.sh"
trace_build MKI_COLL_TRACE=20 coll.cu
echo "$pass passed, $fail failed"
[ $fail = 0 ]
