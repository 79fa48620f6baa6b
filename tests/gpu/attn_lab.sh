#!/bin/bash
# A/B of attention-kernel variants on one GPU: lab binaries of
# tests/gpu/test_attn_core.cu built against a branch's kernels/attn, e.g.
#
#   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Ikernels \
#        -Iinclude tests/gpu/test_attn_core.cu kernels/attn/attn.cu \
#        -o build-gpu/attncore/core_NAME
#
# (build-gpu/attn/test_attn_core, main's, is the baseline).  Each binary's
# correctness cases first (a variant that fails or hangs is not timed),
# then `time REPS` of every binary in turns, ROUNDS rounds; a table of
# TFLOP/s per shape and binary (the best round) ends the output.
#
#   bash tests/gpu/attn_lab.sh [REPS [ROUNDS]]     (defaults 8, 2)
#
# Output lines go to $OUT/attn_lab.txt (else build-gpu/attncore/out).
set -u
L=${MK_GPU_ATTNLAB:-build-gpu/attncore}
REPS=${1:-8}
ROUNDS=${2:-2}
O=${OUT:-$L/out}
mkdir -p "$O"
LOG=$O/attn_lab.txt
: > "$LOG"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bins=()
[ -x build-gpu/attn/test_attn_core ] && bins+=(build-gpu/attn/test_attn_core)
for b in "$L"/core_*; do [ -x "$b" ] && bins+=("$b"); done
ok=()
for b in "${bins[@]}"; do
    # line-buffered, so that a hang still leaves the cases it passed
    timeout -k 5 90 stdbuf -oL "$b" > "$O/correct.tmp" 2>&1
    rc=$?
    { echo "== $b correct (rc $rc)"; tail -3 "$O/correct.tmp"; } >> "$LOG"
    if [ $rc -eq 0 ] && grep -q "^PASS" "$O/correct.tmp"; then ok+=("$b")
    else echo "== $b: not timed (rc $rc)" >> "$LOG"; fi
done
rm -f "$O/correct.tmp"
for ((r = 1; r <= ROUNDS; r++)); do
    for b in "${ok[@]}"; do
        echo "== $b time $REPS round $r" >> "$LOG"
        timeout -k 5 120 stdbuf -oL "$b" time "$REPS" >> "$LOG" 2>&1
    done
done
# the best round per shape and binary
awk '/^== .* time /{b = $2; next}
     $1 ~ /^(64|128)$/ && NF >= 7 {k = $1 " " $2 " " $3; if (!(k in seen)) {seen[k] = 1; keys[++nk] = k}
                                   if ($7 > best[k, b]) best[k, b] = $7; if (!(b in bs)) {bs[b] = 1; order[++nb] = b}}
     END {printf "%-20s", "d mask seq"; for (i = 1; i <= nb; i++) {n = order[i]; sub(/.*\//, "", n); printf " %14s", n}; printf "\n"
          for (j = 1; j <= nk; j++) {printf "%-20s", keys[j]; for (i = 1; i <= nb; i++) printf " %14.1f", best[keys[j], order[i]]; printf "\n"}}' "$LOG" | tee -a "$LOG"
grep -E "^== .*(correct|not timed)" "$LOG"
