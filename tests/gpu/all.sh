#!/bin/bash
# All GPU tests (and, with "bench", the benchmarks) on a Hopper machine,
# from the binaries tests/gpu/build.sh left in build-gpu/ (nothing is
# built here; a part whose binaries were not carried is skipped, saying
# so).  Ends with one summary table.
#
#   bash tests/gpu/all.sh [tests|bench|all|scale|ab]
#
# tests: collectives (sizes up to 16 MB), GEMM engine, mkAllGatherGemm,
#        mkGemmReduceScatter, mkMoEDispatch / mkMoECombine,
#        mkRingAttention, the kill drill, compute-sanitizer, on
#        2 GPUs, 1 GPU under MPS, and where there are GPUs for them at 4
#        and 8 ranks and on virtual nodes (MK_NODE_SIZE, socket transport);
#        then tests/gpu/scale.sh (16 and 8 ranks on 2 GPUs under MPS as
#        virtual nodes, every call checked against a host reference);
# bench: the benchmarks (2 ranks, and one rank per GPU when more than 2);
# all:   tests at full sizes and the benchmarks;
# scale: only what needs more than 2 GPUs or virtual nodes (4- and 8-rank
#        steps, virtual-node steps, scale.sh, benchmarks at one rank per
#        GPU): what the 2-GPU runs have not recorded;
# soak:  tests/gpu/soak.sh for MK_SOAK_S seconds per layout (default 60;
#        "tests" runs it for 10);
# ab:    tests/gpu/ab.sh: the benchmarks of the binaries in build-gpu/old
#        (build-gpu/old.tar.xz) and of the new ones, taking turns;
# parts: the parts named in MK_PARTS, in that order, each NAME or
#        NAME:MODE (e.g. MK_PARTS="gemm_rs:bench kill demo gpusan"; the
#        names of the summary table, the modes of the part's script).
#
# Each part writes into its own folder of a scratch directory; at the end
# $OUT (else build-gpu/out) gets at most 8 files: summary.txt (the table
# printed last), all.log (every part's output and logs, one after the
# other), gpu-out.tar.gz (everything: logs, JSON, TSV, plots) and up to 5
# JSON files, those of more than 2 ranks first.
# MK_GPUS=n makes every part use only the first n GPUs (the 2-GPU steps
# of "all" on a host of 8, without the 4- and 8-rank ones).
# Time: the whole run stays within MK_GPU_BUDGET_S seconds (default 540):
# every step's timeout is cut to what is left (MK_GPU_DEADLINE) and a step
# that no longer fits is skipped, saying so, so that the results are
# always packed within the machine's 10-minute call.  Exit status: 0 all
# passed, 1 something failed, 3 nothing failed but steps were skipped for
# time.
set -u
# tests/gpu/build.sh packs the binaries into one archive (a sixth of their
# size, so that they fit what a device call carries): unpack it here.
if [ -f build-gpu/bins.tar.xz ]; then
    tar xJf build-gpu/bins.tar.xz || { echo "all.sh: cannot unpack build-gpu/bins.tar.xz" >&2; exit 1; }
fi
# A device call that ended while its command went on (seen: the runner
# reported a call as failed after 3 s, and its all.sh kept running) leaves
# processes that share the GPUs with this run and kill its steps as their
# own leftovers.  Stop them first: our programs, other copies of these
# scripts (not this one's ancestors), and an MPS daemon.
stop_stale() {
    local anc=" $$ " p=$$ pids="" q
    while [ "$p" -gt 1 ] 2>/dev/null; do
        p=$(awk '{print $4}' /proc/$p/stat 2>/dev/null) || break
        anc="$anc$p "
    done
    for q in $(pgrep -f "build-gpu/([a-z0-9]+/)+(test_coll|test_scale|mkbench_coll|test_ag_gemm|mkbench_ag_gemm|test_gemm_rs|mkbench_gemm_rs|test_moe|mkbench_moe|test_attn|test_attn_core|mkbench_attn|test_kill|test_gemm|bench_gemm|mkbench_net|peer_red|demo)( |\$)" || true) \
             $(pgrep -f "tests/gpu/(all|run|ag_gemm|gemm_rs|moe|attn|gemm|net|demo|scale|ab|kill|sanitize|soak)\.sh" || true); do
        case "$anc" in *" $q "*) ;; *) pids="$pids $q" ;; esac
    done
    if [ -n "$pids" ]; then
        echo "all.sh: stopping processes of an earlier run:$pids" >&2
        kill -9 $pids 2>/dev/null
        sleep 1
    fi
    if pgrep -x nvidia-cuda-mps >/dev/null 2>&1 || pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1; then
        echo "all.sh: stopping an MPS daemon left running" >&2
        for d in /tmp/mps /tmp/mps-agg /tmp/mps-grs /tmp/mps-moe /tmp/mps-attn /tmp/mps-kill /tmp/mps-soak /tmp/mps-scale /tmp/nvidia-mps; do # the scripts' pipes, then the default
            echo quit | CUDA_MPS_PIPE_DIRECTORY=$d nvidia-cuda-mps-control >/dev/null 2>&1
        done
        sleep 1
    fi
}
stop_stale
what=${1:-tests}
case $what in tests|bench|all|scale|ab|soak|parts) ;; *) echo "usage: tests/gpu/all.sh [tests|bench|all|scale|ab|soak|parts]" >&2; exit 2 ;; esac
RT=${MK_GPU_RT:-build-gpu/rt}
AGG=${MK_GPU_AGG:-build-gpu/agg}
GRS=${MK_GPU_GRS:-build-gpu/grs}
MOE=${MK_GPU_MOE:-build-gpu/moe}
ATTN=${MK_GPU_ATTN:-build-gpu/attn}
GEMM=build-gpu/gemm
DEST=${OUT:-build-gpu/out}
mkdir -p "$DEST" && DEST=$(cd "$DEST" && pwd) || { echo "all.sh: cannot make $DEST" >&2; exit 1; }
S=$(mktemp -d /tmp/mkgpu.XXXXXX) || { echo "all.sh: mktemp failed" >&2; exit 1; }
T0=$(date +%s)
BUDGET=${MK_GPU_BUDGET_S:-540}
# Steps end by the deadline (their kill takes up to 10 s more); 20 s are
# left for the last kill and the packing.
export MK_GPU_DEADLINE=$((T0 + BUDGET - 20))
ALL=$S/all.log
: > "$ALL"
status=0
summary=()
part() { # NAME DIR COMMAND...
    local name=$1 dir=$2
    shift 2
    if [ ! -d "$dir" ]; then
        summary+=("$(printf '%-10s SKIP (no %s: run tests/gpu/build.sh and carry it)' "$name" "$dir")")
        return
    fi
    local left=$((MK_GPU_DEADLINE - $(date +%s)))
    if [ $left -lt 10 ]; then
        summary+=("$(printf '%-10s SKIP (out of time: MK_GPU_BUDGET_S=%s)' "$name" "$BUDGET")")
        [ $status = 0 ] && status=3
        return
    fi
    local t0
    t0=$(date +%s)
    echo "##### $name: $* (OUT=$S/$name)" >> "$ALL"
    mkdir -p "$S/$name"
    # The parts cut their steps to the deadline; this timeout only backs
    # that up (and bounds gemm.sh, which does not).
    OUT=$S/$name timeout -k 5 $((left + 15)) "$@" >> "$ALL" 2>&1
    local rc=$?
    local res=PASS
    case $rc in
    0) ;;
    3) res=INCOMPLETE; [ $status = 0 ] && status=3 ;; # steps skipped for time
    124|137) res=TIMEOUT; status=1 ;;
    *) res=FAIL; status=1 ;;
    esac
    summary+=("$(printf '%-10s %s (rc %d, %d s)' "$name" $res $rc $(($(date +%s) - t0)))")
    echo "[$(($(date +%s) - T0)) s] $name: $res (rc $rc)"
}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
echo "all.sh $what: $ngpu GPUs, budget ${BUDGET} s, scratch $S, results to $DEST"
case $what in
tests) part coll "$RT" bash tests/gpu/run.sh quick tests
       part ag_gemm "$AGG" bash tests/gpu/ag_gemm.sh test
       part gemm_rs "$GRS" bash tests/gpu/gemm_rs.sh test
       part gemm_ar "$GRS" bash tests/gpu/gemm_rs.sh ar-test
       part moe "$MOE" bash tests/gpu/moe.sh test
       part attn "$ATTN" bash tests/gpu/attn.sh test
       part demo build-gpu/demo bash tests/gpu/demo.sh run
       part gemm "$GEMM" bash tests/gpu/gemm.sh test
       part kill build-gpu/kill bash tests/gpu/kill.sh
       part gpusan "$GEMM" bash tests/gpu/sanitize.sh
       part soak "$RT" bash tests/gpu/soak.sh "${MK_SOAK_S:-10}"
       part scale "$RT" bash tests/gpu/scale.sh ;;
soak)  part soak "$RT" bash tests/gpu/soak.sh "${MK_SOAK_S:-60}" ;;
bench) part coll "$RT" bash tests/gpu/run.sh full bench
       part ag_gemm "$AGG" bash tests/gpu/ag_gemm.sh bench
       part gemm_rs "$GRS" bash tests/gpu/gemm_rs.sh bench
       part gemm_ar "$GRS" bash tests/gpu/gemm_rs.sh ar-bench
       part moe "$MOE" bash tests/gpu/moe.sh bench
       part attn "$ATTN" bash tests/gpu/attn.sh bench
       part net build-gpu/net bash tests/gpu/net.sh run
       part gemm "$GEMM" bash tests/gpu/gemm.sh bench ;;
all)   part coll "$RT" bash tests/gpu/run.sh full all
       part ag_gemm "$AGG" bash tests/gpu/ag_gemm.sh all
       part gemm_rs "$GRS" bash tests/gpu/gemm_rs.sh all
       part gemm_ar "$GRS" bash tests/gpu/gemm_rs.sh ar-all
       part moe "$MOE" bash tests/gpu/moe.sh all
       part attn "$ATTN" bash tests/gpu/attn.sh all
       part demo build-gpu/demo bash tests/gpu/demo.sh run
       part net build-gpu/net bash tests/gpu/net.sh run
       part gemm "$GEMM" bash tests/gpu/gemm.sh all
       part kill build-gpu/kill bash tests/gpu/kill.sh
       part scale "$RT" bash tests/gpu/scale.sh ;;
scale) if [ "$ngpu" -lt 2 ]; then
           summary+=("scale      SKIP ($ngpu GPUs: the scale steps need 2 or more)")
       fi
       part coll "$RT" bash tests/gpu/run.sh full scale
       part ag_gemm "$AGG" bash tests/gpu/ag_gemm.sh scale
       part scale "$RT" bash tests/gpu/scale.sh
       part demo build-gpu/demo bash tests/gpu/demo.sh run
       part net build-gpu/net bash tests/gpu/net.sh run
       summary+=("gemm       not run (scale: the GEMM engine is one GPU's)") ;;
ab)    part ab "$RT" bash tests/gpu/ab.sh ;;
parts) for p in ${MK_PARTS:-}; do # NAME[:MODE], in the order given
           m=${p#*:}; [ "$m" = "$p" ] && m=
           case ${p%%:*} in
           coll)    part coll "$RT" bash tests/gpu/run.sh quick "${m:-tests}" ;;
           ag_gemm) part ag_gemm "$AGG" bash tests/gpu/ag_gemm.sh "${m:-test}" ;;
           gemm_rs) part gemm_rs "$GRS" bash tests/gpu/gemm_rs.sh "${m:-test}" ;;
           gemm_ar) part gemm_ar "$GRS" bash tests/gpu/gemm_rs.sh "ar-${m:-test}" ;;
           moe)     part moe "$MOE" bash tests/gpu/moe.sh "${m:-test}" ;;
           attn)    part attn "$ATTN" bash tests/gpu/attn.sh "${m:-test}" ;;
           demo)    part demo build-gpu/demo bash tests/gpu/demo.sh run ;;
           gemm)    part gemm "$GEMM" bash tests/gpu/gemm.sh "${m:-test}" ;;
           kill)    part kill build-gpu/kill bash tests/gpu/kill.sh ;;
           gpusan)  part gpusan "$GEMM" bash tests/gpu/sanitize.sh $m ;;
           soak)    part soak "$RT" bash tests/gpu/soak.sh "${m:-10}" ;;
           scale)   part scale "$RT" bash tests/gpu/scale.sh ;;
           peer_red) part peer_red build-gpu/lab bash tests/gpu/peer_red.sh run ;;
           *) summary+=("$(printf '%-10s SKIP (unknown part in MK_PARTS)' "$p")") ;;
           esac
       done ;;
esac

# The table: parts, then each part's steps and benchmark tables.
{
    echo "== GPU summary ($what, $ngpu GPUs, $(($(date +%s) - T0)) s)"
    printf '%s\n' "${summary[@]}"
    for f in "$S"/coll/summary.txt "$S"/ag_gemm/ag_gemm-summary.txt \
             "$S"/gemm_rs/gemm_rs-summary.txt "$S"/gemm_ar/gemm_ar-summary.txt \
             "$S"/moe/moe-summary.txt "$S"/attn/attn-summary.txt \
             "$S"/kill/kill-summary.txt \
             "$S"/gpusan/sanitize-summary.txt "$S"/soak/soak-summary.txt \
             "$S"/scale/scale-summary.txt \
             "$S"/ab/ab.txt; do
        [ -s "$f" ] || continue
        echo
        echo "== $(basename "$(dirname "$f")")"
        cat "$f"
    done
} > "$S/summary.txt"
# The combined log: the parts' output (above), then every log they wrote.
for f in "$S"/*/*.log "$S"/*/*.txt; do
    [ -f "$f" ] || continue
    printf '\n##### %s\n' "${f#$S/}" >> "$ALL"
    cat "$f" >> "$ALL"
done
cp "$S/summary.txt" "$ALL" "$DEST"/
(cd "$S" && tar czf "$DEST/gpu-out.tar.gz" --exclude=all.log --exclude=summary.txt -- * 2>/dev/null) ||
    echo "all.sh: tar of $S failed" >&2
# Up to 5 JSON files beside them: more than 2 ranks (-npN) first.
n=0 copied=" "
for f in "$S"/*/*-np*.json "$S"/*/*.json; do
    [ -f "$f" ] || continue
    case $copied in *" $f "*) continue ;; esac
    [ $n -ge 5 ] && break
    cp "$f" "$DEST"/ && n=$((n + 1)) copied="$copied$f "
done
echo
cat "$S/summary.txt"
echo "(in $DEST: summary.txt, all.log, gpu-out.tar.gz, $n JSON)"
rm -rf "$S"
exit $status
