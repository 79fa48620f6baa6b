#!/bin/bash
# Every GPU test and benchmark of the device runtime and the collectives,
# on the lent GPU machine, from the binaries tests/gpu/coll_build.sh left in
# build-gpu/rt (nothing is built here).  Logs, JSON and the plot go to $OUT
# when set (else build-gpu/rt/out); a short table ends the output.
#
#   bash tests/gpu/run.sh [quick|full] [tests|bench|all]
#
# quick: sizes up to 16 MB per rank; full: up to 1 GB.  Every step has its
# own timeout; MPS is started for the several-ranks-per-GPU steps and
# stopped in this script; leftover test processes are reported and killed.
set -u
B=build-gpu/rt
O=${OUT:-$B/out}
mkdir -p "$O"
mode=${1:-full}
what=${2:-all}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_MODULE_LOADING=EAGER
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MKT_NO_NCCL -x MK_COLL_CTAS -x MK_COLL_MOVER \
 -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SM_BUDGET \
 -x MK_TIMEOUT_MS"
# A device wait that never ends would cost the whole step: 20 s is plenty.
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000}
export MK_DEBUG=${MK_DEBUG:-WARN} MKT_NO_NCCL=${MKT_NO_NCCL:-} MK_COLL_CTAS=${MK_COLL_CTAS:-0}
export MK_SM_BUDGET=${MK_SM_BUDGET:-0} MK_COLL_MOVER=${MK_COLL_MOVER:-tma-send}
[ "$mode" = full ] && MAXB=$((1 << 30)) || MAXB=$((16 << 20))
LOG=$O/tests.log
: > "$LOG"
SUMMARY=$O/summary.txt
: > "$SUMMARY"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
nvidia-smi topo -m 2>/dev/null | head -4 >> "$LOG"

# step NAME LIMIT_S NP ARGS...: one mpirun under its own timeout.
step() {
    local name=$1 limit=$2 np=$3
    shift 3
    local t0=$(date +%s.%N) rc
    echo "=== $name (np $np, limit ${limit}s): $*" >> "$LOG"
    timeout -k 10 "$limit" $MPI -np "$np" "$@" >> "$LOG" 2>&1
    rc=$?
    local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    local res=PASS
    [ $rc -ne 0 ] && res=FAIL
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && res=TIMEOUT
    printf "%-34s %-7s %6.1f s  (rc %d)\n" "$name" "$res" "$dt" "$rc" >> "$SUMMARY"
    echo "--- $name: $res rc $rc ${dt}s" >> "$LOG"
    leftovers "$name"
}

# A test must never leave a process behind: report and end each by pid.
leftovers() {
    local pids
    pids=$(pgrep -f "$B/(test_coll|mkbench_coll)" || true)
    if [ -n "$pids" ]; then
        echo "LEFTOVER after $1: $pids" | tee -a "$SUMMARY" >> "$LOG"
        for p in $pids; do kill -9 "$p" 2>/dev/null; done
    fi
}

if [ "$what" != bench ]; then
    if [ "$ngpu" -ge 2 ]; then
        export CUDA_VISIBLE_DEVICES=0,1
        step "2gpu correct" 150 2 $B/test_coll correct $MAXB
        export MK_COLL_MOVER=reg
        step "2gpu correct, register stores" 90 2 $B/test_coll correct $((16 << 20))
        export MK_COLL_MOVER=tma
        step "2gpu correct, TMA for local copies too" 90 2 $B/test_coll correct $((16 << 20))
        export MK_COLL_MOVER=tma-send
        step "2gpu stress (1000 calls)" 60 2 $B/test_coll stress
        step "2gpu graph" 60 2 $B/test_coll graph
        step "2gpu badargs" 60 2 $B/test_coll badargs
        step "2gpu fault: rank never calls" 60 2 $B/test_coll nocall
        step "2gpu fault: mkCommAbort" 60 2 $B/test_coll abort
    fi
    # Several ranks on one GPU: MPS, started and stopped here.
    export CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        [ "$mode" = full ] && MB2=$((256 << 20)) || MB2=$((1 << 20))
        step "1gpu x2 MPS correct" 90 2 $B/test_coll correct $MB2
        step "1gpu x4 MPS correct" 90 4 $B/test_coll correct $MB2
        step "1gpu x4 MPS stress" 60 4 $B/test_coll stress
        step "1gpu x2 MPS fault: never calls" 60 2 $B/test_coll nocall
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        echo "1gpu MPS                           SKIP    (nvidia-cuda-mps-control -d failed)" >> "$SUMMARY"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    export MKT_NO_NCCL=
fi

if [ "$what" != tests ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    if [ "$mode" = full ]; then
        BARGS="--min 1M --max 1G --iters 20 --sweep"
    else
        BARGS="--min 1M --max 256M --iters 10 --sweep"
    fi
    echo "=== bench: $BARGS" >> "$LOG"
    OUT=$O timeout -k 10 150 $MPI -np 2 -x OUT $B/mkbench_coll $BARGS > "$O/bench.log" 2>&1
    rc=$?
    printf "%-34s %-7s (rc %d)\n" "bench (mkbench coll)" "$([ $rc -eq 0 ] && echo DONE || echo FAIL)" $rc >> "$SUMMARY"
    leftovers bench
    # The same table with TMA for the local copies too.
    OUT=$O MK_COLL_MOVER=tma timeout -k 10 100 $MPI -np 2 -x OUT $B/mkbench_coll \
        ${BARGS% --sweep} --tag tma > "$O/bench-tma.log" 2>&1
    rc=$?
    printf "%-34s %-7s (rc %d)\n" "bench, MK_COLL_MOVER=tma" "$([ $rc -eq 0 ] && echo DONE || echo FAIL)" $rc >> "$SUMMARY"
    leftovers bench-tma
    if [ -f "$O/coll.json" ]; then
        python3 tests/gpu/coll_plot.py "$O/coll.json" "$O/coll.png" >> "$LOG" 2>&1 ||
            echo "plot failed" >> "$SUMMARY"
    fi
fi

echo
grep -E "^(FAIL|PASS)" "$LOG" | grep -c "^PASS" | sed 's/^/checks passed: /'
grep -E "^FAIL" "$LOG" | head -20
[ -f "$O/bench.log" ] && sed -n '/^op /,$p' "$O/bench.log"
[ -f "$O/bench-tma.log" ] && sed -n '/^op /,$p' "$O/bench-tma.log"
echo
cat "$SUMMARY"
! grep -qE "FAIL|TIMEOUT|LEFTOVER" "$SUMMARY"
