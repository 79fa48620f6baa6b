#!/bin/bash
# plan_choices.sh - the plan's choice (fused or unfused) and model times of
# the fused GEMM operations over mkbench's shapes and a few layouts, one
# line each, from mkinfo (no GPU needed).  Run it before and after a change
# of the cost model and diff the two outputs:
#
#   tools/plan_choices.sh [MKINFO] > before.txt   (default build/tools/mkinfo)
#
# Line: RANKS_PER_NODE xNODES OP MxNxK DECISION FUSED_US UNFUSED_US
set -u
MK=${1:-build/tools/mkinfo}
[ -x "$MK" ] || { echo "plan_choices.sh: no $MK (build first)" >&2; exit 1; }
for lay in "2 1" "4 1" "8 1" "4 2" "8 2" "1 2"; do
    set -- $lay
    r=$1 nodes=$2
    for op in ag_gemm gemm_rs gemm_ar; do
        for s in 8192x8192x8192 16384x8192x8192 4096x8192x8192 16384x2048x8192 \
                 32768x1024x8192 16x8192x8192 128x8192x8192 1024x8192x8192 \
                 2048x8192x8192 6000x5000x4128 8192x1024x8192 16384x4096x16384 \
                 1x8192x8192 256x8192x8192 512x4096x4096 24x1024x2048; do
            IFS=x read -r m n k <<< "$s"
            out=$("$MK" --op $op --m "$m" --n "$n" --k "$k" --ranks "$r" --nodes "$nodes" 2>&1) ||
                { echo "plan_choices.sh: $out" >&2; exit 1; }
            d=$(printf '%s\n' "$out" | sed -n 's/.*decision  \([a-z]*\).*/\1/p')
            t=$(printf '%s\n' "$out" | sed -n 's/.*fused \([0-9]*\) us, unfused \([0-9]*\) us/\1 \2/p')
            echo "$r x$nodes $op $s $d $t"
        done
    done
done
