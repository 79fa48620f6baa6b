#!/bin/bash
# Old against new binaries, taking turns in one run on 2 GPUs: mkbench
# ag_gemm (its five default shapes) and mkbench coll (all-gather,
# reduce-scatter, all-reduce, all-to-all, bf16, 1 MB to 256 MB per rank).
# A round runs old ag_gemm, new ag_gemm, old coll, new coll; ROUNDS rounds
# (default 3; AB_KINDS=agg or AB_KINDS=coll runs one of the two).  Per row
# the median over rounds of our op's time (each run reports the slowest
# rank's median per call), new/old, and OK or SLOWER against the limit
# (ag_gemm 2%, collectives 3%).
#
#   bash tests/gpu/ab.sh            there; build-gpu/old.tar.xz unpacked
#                                   into build-gpu/old/{agg,rt}
#   bash tests/gpu/ab.sh pack DIR   here: pack DIR/build-gpu/{agg/mkbench_ag_gemm,
#                                   rt/mkbench_coll, rt/test_coll} (a build of
#                                   the old tree by tests/gpu/build.sh) into
#                                   build-gpu/old.tar.xz
#
# New binaries: build-gpu/agg/mkbench_ag_gemm, build-gpu/rt/mkbench_coll.
# Output in $OUT (else build-gpu/old/out): ab.log (every run), ab.txt (the
# table, printed last).  Exit 0 when nothing is slower than its limit, 1
# otherwise (or a run failed).
set -u
if [ "${1:-}" = pack ]; then
    d=${2:?usage: tests/gpu/ab.sh pack OLD_TREE}
    tmp=$(mktemp -d)
    mkdir -p "$tmp/build-gpu/old/agg" "$tmp/build-gpu/old/rt"
    cp "$d/build-gpu/agg/mkbench_ag_gemm" "$tmp/build-gpu/old/agg/" &&
        cp "$d/build-gpu/rt/mkbench_coll" "$d/build-gpu/rt/test_coll" "$tmp/build-gpu/old/rt/" ||
        exit 1
    mkdir -p build-gpu
    tar cJf build-gpu/old.tar.xz -C "$tmp" build-gpu/old && rm -rf "$tmp"
    ls -la build-gpu/old.tar.xz
    exit 0
fi
[ -f build-gpu/old.tar.xz ] && tar xJf build-gpu/old.tar.xz
OLD=build-gpu/old NEW=build-gpu
ROUNDS=${ROUNDS:-3}
KINDS=${AB_KINDS:-agg coll} # AB_KINDS=agg: mkAllGatherGemm only
O=${OUT:-$OLD/out}
mkdir -p "$O"
LOG=$O/ab.log TAB=$O/ab.txt
: > "$LOG"
for f in $OLD/agg/mkbench_ag_gemm $OLD/rt/mkbench_coll $NEW/agg/mkbench_ag_gemm $NEW/rt/mkbench_coll; do
    [ -x "$f" ] || { echo "ab.sh: no $f" | tee "$TAB"; exit 1; }
done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0,1 MK_DEBUG=WARN
unset MK_NODE_SIZE MK_TRANSPORT MK_COLL_MOVER MK_COLL_CTAS
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x CUDA_VISIBLE_DEVICES -x MK_DEBUG -x OUT"
status=0
# run WHICH(old|new) KIND(agg|coll) ROUND: rows "key ms" into $O/WHICH-KIND.txt
run() {
    local which=$1 kind=$2 round=$3 dir bin args limit=150 left
    [ "$which" = old ] && dir=$OLD || dir=$NEW
    if [ "$kind" = agg ]; then
        bin=$dir/agg/mkbench_ag_gemm args="--iters 10 --rounds 2"
    else
        bin=$dir/rt/mkbench_coll args="--min 1M --max 256M --iters 10"
    fi
    if [ -n "${MK_GPU_DEADLINE:-}" ]; then
        left=$((MK_GPU_DEADLINE - $(date +%s)))
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    if [ "$limit" -lt 20 ]; then
        echo "ab.sh: out of time before $which $kind round $round" | tee -a "$LOG"
        status=1
        return
    fi
    echo "=== $which $kind round $round: $bin $args" >> "$LOG"
    local out
    # shellcheck disable=SC2086 # args: several words
    out=$(OUT=$O/runs timeout -k 10 "$limit" $MPI -np 2 $bin $args 2>&1)
    local rc=$?
    echo "$out" >> "$LOG"
    if [ $rc -ne 0 ]; then
        echo "--- rc $rc" >> "$LOG"
        status=1
        return
    fi
    if [ "$kind" = agg ]; then # "MxNxK ours unfused ..."
        echo "$out" | awk '$1 ~ /^[0-9]+x[0-9]+x[0-9]+$/ && NF >= 5 { print "ag_gemm_" $1, $2, $3 }'
    else # "op dtype bytes ctas ours nccl speedup busbw nccl_busbw"
        echo "$out" | awk 'NF == 9 && $3 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ {
            print $1 "_" $2 "_" $3, $5, $6 }'
    fi >> "$O/$which-$kind.txt"
}
rm -f "$O"/old-*.txt "$O"/new-*.txt
for r in $(seq 1 "$ROUNDS"); do
    for kind in $KINDS; do
        run old $kind "$r"
        run new $kind "$r"
    done
done
# The table: median per key of old and new (and of the unfused / NCCL
# baseline as the new runs measured it).
{
    printf "%-36s %10s %10s %8s %6s  %s\n" "row (median of $ROUNDS runs)" "old ms" "new ms" \
        "new/old" "limit" "baseline/new"
    for kind in $KINDS; do
        [ "$kind" = agg ] && lim=1.02 || lim=1.03
        cat "$O/old-$kind.txt" "$O/new-$kind.txt" 2>/dev/null | awk '{ print $1 }' | sort -u -V |
        while read -r key; do
            o=$(awk -v k="$key" '$1 == k { print $2 }' "$O/old-$kind.txt" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
            n=$(awk -v k="$key" '$1 == k { print $2 }' "$O/new-$kind.txt" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
            b=$(awk -v k="$key" '$1 == k { print $3 }' "$O/new-$kind.txt" | sort -g |
                awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
            if [ -z "$o" ] || [ -z "$n" ]; then
                printf "%-36s %10s %10s %8s %6s\n" "$key" "${o:--}" "${n:--}" "-" "$lim"
                continue
            fi
            awk -v k="$key" -v o="$o" -v n="$n" -v b="$b" -v l="$lim" 'BEGIN {
                r = n / o
                printf "%-36s %10.4f %10.4f %8.3f %6.2f  %6.3fx  %s\n", k, o, n, r, l,
                       (b > 0 ? b / n : 0), (r <= l ? "OK" : "SLOWER")
            }'
        done
    done
} > "$TAB"
grep -q SLOWER "$TAB" && status=1
cat "$TAB"
exit $status
