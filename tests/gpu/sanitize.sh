#!/bin/bash
# compute-sanitizer on the GPU machine (issue 23): memcheck, racecheck and
# synccheck over a small subset, from the binaries tests/gpu/build.sh left
# in build-gpu/.
#
#   bash tests/gpu/sanitize.sh [2gpu|attn]
#
# 2gpu: only the two-rank steps (the one-rank ones recorded already).
# attn: only mkRingAttention's (the attention kernel alone on small cases,
# then the ring at two ranks).
#
# One rank (MK_BOOTSTRAP=none, no launcher; compute-sanitizer does not run
# under MPS): the GEMM engine with its fused-kernel hooks (test_gemm
# --small: signals from another stream, tile orders, epilogue stores with
# signals), the collectives' kernels (test_coll correct up to 64 KiB) and
# mkGemmReduceScatter and mkAllGatherGemm at one rank; with two GPUs also
# two ranks under mpirun, each rank under its own sanitizer: the
# collectives, the fused mkAllGatherGemm and mkGemmReduceScatter at one
# small shape each, mkMoEDispatch + mkMoECombine (memcheck, synccheck and
# racecheck: three routing cases of test_moe; mkMoEDispatchFfnCombine: memcheck and synccheck at
# one rank, memcheck and racecheck at two; the MoE calls' sequence across
# 2 x 1 virtual nodes: memcheck, two ranks on one GPU).  synccheck takes the GEMM engine and the one-rank
# mkGemmReduceScatter, racecheck the collectives (see below why not the
# GEMM engine).
# A step passes when the tool says "ERROR SUMMARY: 0 errors" and the
# program passed.  Log to $OUT/sanitize.log, a summary table last.
set -u
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
O=${OUT:-build-gpu/out}
mkdir -p "$O"
LOG=$O/sanitize.log
SUMMARY=$O/sanitize-summary.txt
: > "$LOG"; : > "$SUMMARY"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_DEBUG=${MK_DEBUG:-WARN} MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-120000}
unset MK_NODE_SIZE MK_TRANSPORT
if [ ! -x "$CS" ]; then
    printf "%-44s %-7s (no compute-sanitizer at %s)\n" "compute-sanitizer" SKIP "$CS" | tee -a "$SUMMARY"
    exit 0
fi
status=0
# racecheck sees shared memory only, and no ordering but barriers, so it
# reports the library's flag handshakes through shared memory (a write
# after a fence, a spin on the word, a fence after it) as races:
#   - the one-shot all-reduce in place: SEND's leader writes how many chunks
#     every peer has read, REDUCE's leader spins on it (kernels/ops/coll.cu:
#     send_role, wait_sent), and the LL one-phase all-reduce's *x.sent
#     likewise (coll_ll.cuh);
#   - mkMoECombine (and the layer's combine): one thread polls a peer's
#     staged flag and writes s_staged[d], the other warps spin on it
#     (moe_combine.cuh; s_staged is volatile).
# HS_SITES: FILE:LINE of every access to those words, found in the source
# (so that edits elsewhere move nothing); step() counts a report whose
# every access is there as known.
hs_lines() { # FILE PATTERN
    grep -n "$2" "kernels/ops/$1" | cut -d: -f1 | sed "s/^/$1:/"
}
HS_SITES=$( { hs_lines coll.cu '\*x\.sent =\|\*sent <'
              hs_lines coll_ll.cuh '\*x\.sent'
              hs_lines moe_combine.cuh 's_staged\[d\]'; } | tr '\n' ' ')
step() { # NAME LIMIT NP TOOL[:OPTION,...] ARGS...
    local name=$1 limit=$2 np=$3 tool=${4%%:*} opts=
    case $4 in *:*) opts=${4#*:} ;; esac
    shift 4
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-44s %-7s (out of time)\n" "$name" SKIP >> "$SUMMARY"
        [ $status = 0 ] && status=3
        return
    fi
    local t0=$(date +%s) rc res=PASS tmp
    tmp=$(mktemp)
    echo "=== $name ($tool): $*" >> "$LOG"
    # memcheck instruments every kernel it loads: loaded eagerly, the
    # ranks' first calls reached the bootstrap's shape check tens of
    # seconds apart and the PMIx fence failed (2 x H100, 2026-11-25); the
    # library loads its own kernels at communicator creation anyway
    local CUDA_MODULE_LOADING=$CUDA_MODULE_LOADING
    case $tool in memcheck*) CUDA_MODULE_LOADING=LAZY ;; esac
    export CUDA_MODULE_LOADING
    if [ "$np" = 1 ]; then
        MK_BOOTSTRAP=none timeout -k 5 "$limit" "$CS" --tool "$tool" ${opts//,/ } --error-exitcode 99 "$@" > "$tmp" 2>&1
    else
        local x=""
        [ -n "${MK_NODE_SIZE:-}" ] && x="-x MK_NODE_SIZE -x MK_TRANSPORT"
        # shellcheck disable=SC2086
        timeout -k 5 "$limit" mpirun --allow-run-as-root --oversubscribe --bind-to none \
            -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS \
            -x CUDA_VISIBLE_DEVICES $x -np "$np" "$CS" --tool "$tool" ${opts//,/ } --error-exitcode 99 "$@" \
            > "$tmp" 2>&1
    fi
    rc=$?
    cat "$tmp" >> "$LOG"
    local errs known=0
    # "ERROR SUMMARY: N errors" (memcheck, synccheck), "RACECHECK SUMMARY:
    # H hazards displayed (N errors, W warnings)" (racecheck).
    errs=$( { grep -o "ERROR SUMMARY: [0-9]* error" "$tmp" | awk '{print $3}'
              grep -o "RACECHECK SUMMARY: .*(\([0-9]*\) error" "$tmp" |
                  sed 's/.*(\([0-9]*\) error/\1/'; } | awk '{s += $1} END {print s + 0}')
    # racecheck: the reports whose every access is at a flag word of the
    # handshakes (HS_SITES, above) are known; any other hazard fails.
    if [ "$tool" = racecheck ]; then
        known=$(awk -v hs="$HS_SITES" '
            function site(l) {
                return match(l, / in [A-Za-z0-9_.]+:[0-9]+/) ? substr(l, RSTART + 4, RLENGTH - 4) : ""
            }
            function done() { if (inb && good) k++; inb = 0 }
            BEGIN { n = split(hs, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 }
            /Error: Race reported between/ { done(); inb = 1; good = site($0) in ok; next }
            inb && /^=========  +and (Read|Write) access at/ { if (!(site($0) in ok)) good = 0; next }
            { done() }
            END { done(); print k + 0 }' "$tmp")
        errs=$((errs - known))
        [ "$rc" = 99 ] && [ "$errs" -le 0 ] && rc=0
    fi
    local runs
    runs=$(grep -cE "(ERROR|RACECHECK) SUMMARY" "$tmp")
    [ "$rc" -ne 0 ] && res=FAIL
    [ "$errs" -ne 0 ] && res=FAIL
    [ "$runs" -lt "$np" ] && res=FAIL
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    [ $res != PASS ] && status=1
    printf "%-44s %-7s %4d s  %s errors%s (rc %d)\n" "$name" "$res" $(( $(date +%s) - t0 )) "$errs" \
        "$([ "$known" -gt 0 ] && echo ", $known known: flag handshakes in shared memory")" $rc >> "$SUMMARY"
    rm -f "$tmp"
}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
only2=0
[ "${1:-}" = 2gpu ] && only2=1
if [ "${1:-}" = attn ]; then
    export CUDA_VISIBLE_DEVICES=0
    step "memcheck: attention kernel, small cases" 240 1 memcheck build-gpu/attn/test_attn_core small
    step "synccheck: attention kernel, small cases" 240 1 synccheck build-gpu/attn/test_attn_core small
    if [ "$ngpu" -ge 2 ]; then
        export CUDA_VISIBLE_DEVICES=0,1
        step "2gpu memcheck: ring, s1000 zigzag d128" 240 2 memcheck build-gpu/attn/test_attn correct bshd 2
    fi
    cat "$SUMMARY"
    exit $status
fi
export CUDA_VISIBLE_DEVICES=0
[ $only2 = 1 ] || {
step "memcheck: GEMM engine (--small)" 240 1 memcheck build-gpu/gemm/test_gemm --small
# NCCL (the reference) probes kernels of other GPUs at init: API errors
# that are not ours; memory errors are still reported.
step "memcheck: collectives, 1 rank" 120 1 memcheck:--report-api-errors,no build-gpu/rt/test_coll correct 65536
step "memcheck: gemm_rs 1001x1304x520, 1 rank" 120 1 memcheck build-gpu/grs/test_gemm_rs correct 2
step "memcheck: ag_gemm, 1 rank" 180 1 memcheck build-gpu/agg/test_ag_gemm uneven 1
# racecheck cannot analyze the GEMM engine's kernels (TMA, wgmma,
# mbarriers): "Internal Sanitizer Error: The Sanitizer failed to handle a
# hardware exception" (compute-sanitizer of CUDA 13.0, H100, 2026-11-25),
# and cuBLAS's own kernels (the reference) report hazards of their own.
# It takes the collectives' kernels (plain loads and stores).
step "racecheck: collectives, 1 rank" 180 1 racecheck:--report-api-errors,no build-gpu/rt/test_coll correct 65536
step "synccheck: GEMM engine (--small)" 240 1 synccheck build-gpu/gemm/test_gemm --small
step "synccheck: gemm_rs 1001x1304x520, 1 rank" 120 1 synccheck build-gpu/grs/test_gemm_rs correct 2
# mkMoEDispatchFfnCombine at one rank: the dispatch + gate/up kernel with
# SwiGLU in its epilogue, the grouped down projection, the combine (odd
# hidden and inter, skewed routing, empty slots)
step "memcheck: moe layer cases 0,2,7, 1 rank" 300 1 memcheck build-gpu/moe/test_moe layer 0,2,7
step "synccheck: moe layer cases 0,7, 1 rank" 300 1 synccheck build-gpu/moe/test_moe layer 0,7
# the MoE calls across nodes (their sequence, moe.h): 2 ranks as 2 x 1
# virtual nodes, which one GPU can hold without MPS (each rank waits only
# for the proxies, so the two contexts' time slices make progress)
CUDA_VISIBLE_DEVICES=0 MK_NODE_SIZE=1 MK_TRANSPORT=socket \
    step "memcheck: moe across 2x1 nodes, h 520/1032" 240 2 memcheck build-gpu/moe/test_moe correct 7,8
CUDA_VISIBLE_DEVICES=0 MK_NODE_SIZE=1 MK_TRANSPORT=socket \
    step "memcheck: moe layer across 2x1 nodes, case 0" 240 2 memcheck build-gpu/moe/test_moe layer 0
}
if [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu memcheck: collectives" 180 2 memcheck:--report-api-errors,no build-gpu/rt/test_coll correct 65536
    step "2gpu memcheck: gemm_rs 1001x1304x520" 180 2 memcheck build-gpu/grs/test_gemm_rs correct 2
    step "2gpu memcheck: ag_gemm uneven" 180 2 memcheck build-gpu/agg/test_ag_gemm uneven 1
    step "2gpu synccheck: gemm_rs 1001x1304x520" 180 2 synccheck build-gpu/grs/test_gemm_rs correct 2
    # mkGemmAllReduce, and both ops in K-slices (24 x 1024 x 2048)
    step "2gpu memcheck: gemm_ar 1001x1304x520, 24x1024 K-slices" 180 2 memcheck build-gpu/grs/test_gemm_rs ar-correct 28
    step "2gpu synccheck: gemm_ar 1001x1304x520, 24x1024 K-slices" 180 2 synccheck build-gpu/grs/test_gemm_rs ar-correct 28
    step "2gpu memcheck: gemm_rs 24x1024 (decode, 8 K-slices)" 120 2 memcheck build-gpu/grs/test_gemm_rs correct 8
    # the decode kernel: 1 x 256 x 64 (LL lines), 100 x 3000 x 1000 (counters, a partial
    # column block, a K tail, a rank of 0 rows)
    step "2gpu memcheck: gemm_ar decode 1x256, 100x3000" 180 2 memcheck build-gpu/grs/test_gemm_rs ar-correct 59
    step "2gpu synccheck: gemm_rs decode 1x256, 100x3000" 180 2 synccheck build-gpu/grs/test_gemm_rs correct 59
    step "2gpu racecheck: collectives" 240 2 racecheck:--report-api-errors,no build-gpu/rt/test_coll correct 65536
    step "2gpu memcheck: moe h 520/1032, dup experts" 180 2 memcheck build-gpu/moe/test_moe correct 7,8,10
    step "2gpu synccheck: moe h 520/1032, dup experts" 180 2 synccheck build-gpu/moe/test_moe correct 7,8,10
    step "2gpu racecheck: moe h 520" 240 2 racecheck build-gpu/moe/test_moe correct 7
    step "2gpu memcheck: moe layer cases 0,2,7" 300 2 memcheck build-gpu/moe/test_moe layer 0,2,7
    step "2gpu racecheck: moe layer case 0 (the combine)" 300 2 racecheck build-gpu/moe/test_moe layer 0
else
    printf "%-44s %-7s (%d GPU: two ranks need two GPUs, the tool refuses MPS)\n" "2gpu steps" SKIP "$ngpu" >> "$SUMMARY"
fi
unset CUDA_VISIBLE_DEVICES
grep -E "========= (Invalid|Race|Barrier|ERROR|Program hit)" "$LOG" | sort | uniq -c | head -20
cat "$SUMMARY"
exit $status
