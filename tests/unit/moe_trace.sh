#!/bin/sh
# moe_trace.sh - the MoE kernels' lab trace stays usable: tools/moe_trace.py
# reads a known set of "MKT" lines into the medians they hold, says so when
# there are none, and kernels/ops/moe.cu still compiles for sm_90a with
# -DMKI_MOE_TRACE (the lab build: MK_BUILD_DEFS=-DMKI_MOE_TRACE with
# tests/gpu/moe.sh build) without register spills.  77 (skip) without
# python3; the compile is skipped, with a note, without nvcc.
src=${top_srcdir:-.}
bld=${top_builddir:-.}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# Rank 0: three layer calls 8 ms apart (one block), each first kernel
# 6000 us long (its dispatch prologue done at 600), the combine entering 50
# us after it and done at 100 (first CTA) / 180 us (last); a fourth call
# 1 s later (a second block) whose combine waits 300 us for a peer.
# Rank 1 (another clock): one call.
{
    for i in 0 1 2; do
        t=$((1000000000 + i * 8000000))
        echo "MKT L rank 0 call $((i + 2)) t0 $t entry_max 0.3 pro 65.0 600.0 end 5990.0 6000.0 wsum 0.0 us"
        echo "MKT C rank 0 call $((i + 1)) t0 $((t + 6050000)) entry_max 0.2 pro 2.5 4.0 end 100.0 180.0 wsum 9.0 us"
    done
    t=2000000000
    echo "MKT L rank 0 call 9 t0 $t entry_max 0.3 pro 70.0 700.0 end 6990.0 7000.0 wsum 0.0 us"
    echo "unrelated output"
    echo "MKT C rank 0 call 8 t0 $((t + 7040000)) entry_max 0.2 pro 299.0 300.0 end 400.0 480.0 wsum 9.0 us"
    echo "MKT L rank 1 call 2 t0 77000000000 entry_max 0.3 pro 65.0 650.0 end 5000.0 5100.0 wsum 0.0 us"
    echo "MKT C rank 1 call 1 t0 77005150000 entry_max 0.2 pro 900.0 950.0 end 1000.0 1090.0 wsum 9.0 us"
} > "$tmp/log"
out=$(python3 "$src/tools/moe_trace.py" "$tmp/log" 2>&1)
echo "$out" | grep -Eq '^0 +0 +3 \| +600 +6000 \| +50 \| +4 +100 +180 \| +6230$' && ok || bad "rank 0 block 0: $out"
echo "$out" | grep -Eq '^0 +1 +1 \| +700 +7000 \| +40 \| +300 +400 +480 \| +7520$' && ok || bad "rank 0 block 1: $out"
echo "$out" | grep -Eq '^1 +0 +1 \| +650 +5100 \| +50 \| +950 +1000 +1090 \| +6240$' && ok || bad "rank 1: $out"
echo "unrelated" > "$tmp/none"
python3 "$src/tools/moe_trace.py" "$tmp/none" > "$tmp/none.out" 2>&1
[ $? = 1 ] && grep -q 'no MKT lines' "$tmp/none.out" && ok || bad "a log without stamps: $(cat "$tmp/none.out")"

. "$src/tests/unit/trace_build.sh"
trace_build MKI_MOE_TRACE moe.cu
echo "$pass passed, $fail failed"
[ $fail = 0 ]
