#!/bin/bash
# The random soak of every op on the GPU machine (issue 23): the
# collectives, the fused GEMMs (mkGemmReduceScatter, mkGemmAllReduce,
# mkAllGatherGemm), the MoE calls (mkMoEDispatch + mkMoECombine,
# mkMoEDispatchGemm, the whole layer mkMoEDispatchFfnCombine: one-node
# layouts only) and mkRingAttention (layouts of at most 8 ranks):
# test_scale soak (seeded random batches of calls, no host sync inside a
# batch, eager or in CUDA graphs, registered or plain buffers, every call
# checked on every rank against a host reference; the summary line counts
# each kind) at 2 ranks on 2 GPUs where there are two, and on one GPU
# under MPS at 2, 4 and 8 ranks, flat and as virtual nodes (2 x 2, 2 x 4:
# socket transport), and with 4 or 8 GPUs one rank per GPU at 4 and 8
# ranks, flat and as 2 virtual nodes; then the 8-rank 2 x 4 case of issue 23 (every
# collective, dtype and placement) 50 times in a row; then,
# with two GPUs, 16 ranks (8 per GPU under MPS) as 2 x 8, 4 x 4 and 8 x 2
# virtual nodes; with four, 32 ranks (8 per GPU) as 4 x 8.
#
#   bash tests/gpu/soak.sh [SECONDS [16]]  per layout; default MK_SOAK_S or
#                                          20; "16": only the 16- and
#                                          32-rank steps
#   bash tests/gpu/soak.sh par SECONDS     the layouts side by side, each job
#                                          with its share of the SMs
#                                          (MK_SM_BUDGET), every job SECONDS:
#     one GPU:  wave 1: 2, 4 ranks and 2 x 2 virtual nodes (10 MPS clients,
#               12 SMs each); wave 2: 8 ranks and 2 x 4 (16 clients, 7 SMs
#               each), SECONDS split between the waves;
#   bash tests/gpu/soak.sh par SECONDS one  the five layouts in one wave on
#               GPU 0 (26 MPS clients, 5 SMs each; also on hosts of more
#               GPUs), every job SECONDS;
#     two GPUs: 2 ranks (one per GPU) beside 16 ranks as 2 x 8 virtual
#               nodes (9 MPS clients a GPU, 12 SMs each; 16 ranks twice
#               over do not fit 80 GB: seen, out of memory).
#   Besides more calls per minute of the machine, the jobs contend for
#   the GPU, the copy engines and the CPUs as other users' jobs would.
#   But a GPU fault in one job ends every MPS client of that GPU (the MPS
#   server tears them all down): when several jobs fail, the first
#   failure in time is the cause, the others' illegal addresses follow.
#
# Binaries: build-gpu/rt/test_scale (tests/gpu/build.sh).  Log to
# $OUT/soak.log; a summary table (calls checked per layout) ends it.
set -u
RT=${MK_GPU_RT:-build-gpu/rt}
S=${1:-${MK_SOAK_S:-20}}
O=${OUT:-$RT/out}
mkdir -p "$O"
LOG=$O/soak.log
SUMMARY=$O/soak-summary.txt
: > "$LOG"; : > "$SUMMARY"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_DEBUG=${MK_DEBUG:-WARN} MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000}
unset MK_NODE_SIZE MK_TRANSPORT
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES \
 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
status=0
# summary_line NAME RESULT START_EPOCH CALLS NP: one line of the table.
summary_line() {
    printf "%-40s %-7s %4d s  %s\n" "$1" "$2" $(( $(date +%s) - $3 )) \
        "$( [ "$4" -gt 0 ] && echo "$4 calls, each checked on $5 ranks")" >> "$SUMMARY"
}
# leftovers WHAT: test processes still there after WHAT are a failure; killed.
leftovers() {
    local left
    left=$(pgrep -f "^(\./)?$RT/test_scale( |$)" || true)
    if [ -n "$left" ]; then
        echo "LEFTOVER after $1: $left" >> "$SUMMARY"
        status=1
        for p in $left; do kill -9 "$p" 2>/dev/null; done
    fi
}
step() { # NAME LIMIT NP ARGS...
    local name=$1 limit=$2 np=$3; shift 3
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-40s %-7s (out of time)\n" "$name" SKIP >> "$SUMMARY"
        [ $status = 0 ] && status=3
        return
    fi
    local t0=$(date +%s) rc res=PASS x=""
    echo "=== $name (np $np, MK_NODE_SIZE=${MK_NODE_SIZE:-}): $*" >> "$LOG"
    [ -n "${MK_NODE_SIZE:-}" ] && x="-x MK_NODE_SIZE -x MK_TRANSPORT"
    # shellcheck disable=SC2086
    timeout -k 10 "$limit" $MPI $x -np "$np" "$@" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    local calls
    calls=$(awk -v n="$name" '$0 == "=== " n || index($0, "=== " n " (") == 1 {on = 1; next}
        /^=== / {on = 0} on && /soak .* calls checked/ && $7 > m {m = $7} END {print m + 0}' "$LOG")
    summary_line "$name" "$res" "$t0" "$calls" "$np"
    leftovers "$name"
}
[ "$S" = par ] || lim=$((S + 60))
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# ---- par: several layouts at once --------------------------------------
# pjob NAME NP NODE_SIZE BUDGET ARGS...: one job in the background, its
# output in $O/par-N.log (then appended to $LOG), its status in par-N.rc.
npj=0
pnames=()
pjob() {
    local name=$1 np=$2 ns=$3 budget=$4; shift 4
    local x="-x MK_SM_BUDGET"
    [ -n "$ns" ] && x="$x -x MK_NODE_SIZE -x MK_TRANSPORT"
    pnames[$npj]="$name|$np"
    (
        export MK_SM_BUDGET=$budget
        [ -n "$ns" ] && export MK_NODE_SIZE=$ns MK_TRANSPORT=socket
        # shellcheck disable=SC2086
        timeout -k 10 "$plim" $MPI $x -np "$np" "$@" > "$O/par-$npj.log" 2>&1
        echo $? > "$O/par-$npj.rc"
    ) &
    npj=$((npj + 1))
}
# pwave: wait for the jobs, then one summary line each.
pwave() {
    local t0=$1 i
    wait
    for ((i = 0; i < npj; i++)); do
        local name=${pnames[$i]%|*} np=${pnames[$i]#*|}
        local rc res=PASS calls
        rc=$(cat "$O/par-$i.rc" 2>/dev/null || echo 99)
        [ "$rc" -ne 0 ] && res=FAIL && status=1
        { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && res=TIMEOUT
        { echo "=== $name (np $np, side by side)"; cat "$O/par-$i.log"; } >> "$LOG"
        calls=$(awk '/soak .* calls checked/ && $7 > m {m = $7} END {print m + 0}' "$O/par-$i.log")
        summary_line "$name" "$res" "$t0" "$calls" "$np"
        rm -f "$O/par-$i.log" "$O/par-$i.rc"
    done
    npj=0
    pnames=()
    leftovers "a wave"
}
if [ "$S" = par ]; then
    P=${2:-${MK_SOAK_S:-60}}
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s) - 90)) -lt "$P" ]; then
        P=$((MK_GPU_DEADLINE - $(date +%s) - 90))
    fi
    if [ "$P" -lt 20 ]; then
        echo "soak.sh par: no time left" >> "$SUMMARY"; cat "$SUMMARY"; exit 3
    fi
    # "one": the one-GPU wave on GPU 0, even where there are more
    if [ "$ngpu" -ge 2 ] && [ "${3:-}" != one ]; then
        export CUDA_VISIBLE_DEVICES=0,1 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-soak CUDA_MPS_LOG_DIRECTORY=/tmp/mps-soak-log
    else
        export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-soak CUDA_MPS_LOG_DIRECTORY=/tmp/mps-soak-log
    fi
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if ! nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        echo "soak.sh par: nvidia-cuda-mps-control -d failed" >> "$SUMMARY"; cat "$SUMMARY"; exit 1
    fi
    if [ "$ngpu" -ge 2 ] && [ "${3:-}" != one ]; then
        plim=$((P + 90))
        t0=$(date +%s)
        pjob "2gpu x2 soak ${P}s (par, 12 SMs)" 2 "" 12 $RT/test_scale soak "$P"
        pjob "2gpu x16 MPS 2x8 soak ${P}s (par, 12 SMs)" 16 8 12 $RT/test_scale soak "$P"
        pwave "$t0"
    elif [ "${3:-}" = one ]; then
        plim=$((P + 90))
        t0=$(date +%s)
        pjob "1gpu x2 MPS soak ${P}s (par, 5 SMs)" 2 "" 5 $RT/test_scale soak "$P"
        pjob "1gpu x4 MPS soak ${P}s (par, 5 SMs)" 4 "" 5 $RT/test_scale soak "$P"
        pjob "1gpu x4 MPS 2x2 soak ${P}s (par, 5 SMs)" 4 2 5 $RT/test_scale soak "$P"
        pjob "1gpu x8 MPS soak ${P}s (par, 5 SMs)" 8 "" 5 $RT/test_scale soak "$P"
        pjob "1gpu x8 MPS 2x4 soak ${P}s (par, 5 SMs)" 8 4 5 $RT/test_scale soak "$P"
        pwave "$t0"
    else
        P1=$((P / 2)); P2=$((P - P1))
        plim=$((P1 + 60))
        t0=$(date +%s)
        pjob "1gpu x2 MPS soak ${P1}s (par, 12 SMs)" 2 "" 12 $RT/test_scale soak "$P1"
        pjob "1gpu x4 MPS soak ${P1}s (par, 12 SMs)" 4 "" 12 $RT/test_scale soak "$P1"
        pjob "1gpu x4 MPS 2x2 soak ${P1}s (par, 12 SMs)" 4 2 12 $RT/test_scale soak "$P1"
        pwave "$t0"
        plim=$((P2 + 60))
        t0=$(date +%s)
        pjob "1gpu x8 MPS soak ${P2}s (par, 7 SMs)" 8 "" 7 $RT/test_scale soak "$P2"
        pjob "1gpu x8 MPS 2x4 soak ${P2}s (par, 7 SMs)" 8 4 7 $RT/test_scale soak "$P2"
        pwave "$t0"
    fi
    echo quit | nvidia-cuda-mps-control
    sleep 1
    grep -E "^FAIL|seed" "$LOG" | head -20
    cat "$SUMMARY"
    exit $status
fi
only16=0
[ "${2:-}" = 16 ] && only16=1
# 16 ranks: 8 per GPU on 2 GPUs under MPS, as 2 x 8, 4 x 4 and 8 x 2
# virtual nodes (a node holds at most 8 ranks); 32 as 4 x 8 on 4 GPUs.
soak16() {
    if [ "$ngpu" -lt 2 ]; then
        printf "%-40s %-7s (%d GPU: 16 ranks need 2 GPUs)\n" "16 ranks" SKIP "$ngpu" >> "$SUMMARY"
        return
    fi
    export CUDA_VISIBLE_DEVICES=0,1 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-soak16 CUDA_MPS_LOG_DIRECTORY=/tmp/mps-soak16-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        MK_NODE_SIZE=8 MK_TRANSPORT=socket step "2gpu x16 MPS 2x8 soak ${S}s" $lim 16 $RT/test_scale soak "$S"
        MK_NODE_SIZE=4 MK_TRANSPORT=socket step "2gpu x16 MPS 4x4 soak ${S}s" $lim 16 $RT/test_scale soak "$S"
        MK_NODE_SIZE=2 MK_TRANSPORT=socket step "2gpu x16 MPS 8x2 soak ${S}s" $lim 16 $RT/test_scale soak "$S"
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-40s %-7s (nvidia-cuda-mps-control -d failed)\n" "2gpu MPS" SKIP >> "$SUMMARY"
    fi
    # 32 ranks as 4 x 8 virtual nodes: 8 per GPU on 4 GPUs (16 per GPU
    # on 2 did not fit 80 GB beside the soak's buffers)
    if [ "$ngpu" -lt 4 ]; then
        printf "%-40s %-7s (%d GPUs: 32 ranks need 4)\n" "32 ranks" SKIP "$ngpu" >> "$SUMMARY"
        unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        return
    fi
    export CUDA_VISIBLE_DEVICES=0,1,2,3
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        MK_NODE_SIZE=8 MK_TRANSPORT=socket step "4gpu x32 MPS 4x8 soak ${S}s" $((lim + 60)) 32 $RT/test_scale soak "$S"
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-40s %-7s (nvidia-cuda-mps-control -d failed)\n" "4gpu MPS" SKIP >> "$SUMMARY"
    fi
    unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
if [ $only16 = 1 ]; then
    soak16
    grep -E "^FAIL|seed" "$LOG" | head -20
    cat "$SUMMARY"
    exit $status
fi
if [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu soak ${S}s" $lim 2 $RT/test_scale soak "$S"
fi
# one rank per GPU at 4 and 8 ranks, on one node and as 2 virtual nodes
# (issue 24: where users run)
for np in 4 8; do
    [ "$ngpu" -ge $np ] || continue
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((np - 1)))
    export CUDA_VISIBLE_DEVICES
    step "${np}gpu soak ${S}s" $lim $np $RT/test_scale soak "$S"
    MK_NODE_SIZE=$((np / 2)) MK_TRANSPORT=socket \
        step "${np}gpu 2x$((np / 2)) soak ${S}s" $lim $np $RT/test_scale soak "$S"
done
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-soak CUDA_MPS_LOG_DIRECTORY=/tmp/mps-soak-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
    step "1gpu x2 MPS soak ${S}s" $lim 2 $RT/test_scale soak "$S"
    step "1gpu x4 MPS soak ${S}s" $lim 4 $RT/test_scale soak "$S"
    step "1gpu x8 MPS soak ${S}s" $lim 8 $RT/test_scale soak "$S"
    MK_NODE_SIZE=2 MK_TRANSPORT=socket step "1gpu x4 MPS 2x2 soak ${S}s" $lim 4 $RT/test_scale soak "$S"
    MK_NODE_SIZE=4 MK_TRANSPORT=socket step "1gpu x8 MPS 2x4 soak ${S}s" $lim 8 $RT/test_scale soak "$S"
    MK_NODE_SIZE=4 MK_TRANSPORT=socket \
        step "1gpu x8 MPS 2x4 every case x50" 300 8 $RT/test_scale 50 1,7,65537
    echo quit | nvidia-cuda-mps-control
    sleep 1
else
    printf "%-40s %-7s (nvidia-cuda-mps-control -d failed)\n" "1gpu MPS" SKIP >> "$SUMMARY"
fi
unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
soak16
grep -E "^FAIL|seed" "$LOG" | head -20
cat "$SUMMARY"
exit $status
