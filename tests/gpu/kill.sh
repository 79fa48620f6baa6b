#!/bin/bash
# The kill drill on the GPU machine (issue 23): one rank SIGKILLed in the
# middle of a stream of all-reduces (8 MiB, and 6 KB ones in LL lines), mkAllGatherGemm, mkGemmReduceScatter,
# mkGemmAllReduce and mkMoEDispatch + mkMoECombine calls (the MoE pair
# across 2 x 2 virtual nodes too, as its sequence); every survivor must report mkErrRemote naming
# it within 1.0 s with MK_TIMEOUT_MS = 60000, drain and exit cleanly.
# 2 ranks on 2 GPUs where there are two; 2, 4 and 8 ranks on one GPU under
# MPS; 4 ranks as 2 virtual nodes of 2 (socket transport).
#
#   bash tests/gpu/kill.sh build     here (no GPU): build-gpu/kill/test_kill
#                                    (the library of build-gpu/agg-build)
#   bash tests/gpu/kill.sh           there
#
# MK_KILL_ONLY=REGEX runs only the steps whose names match (e.g. "MPS.*ring");
# MK_KILL_LIMIT=S caps each step's time limit (seconds).
#
# test_kill starts its own ranks (a launcher would end the job when one
# dies by a signal).  Log to $OUT/kill.log; a summary table ends the output.
set -u
B=${MK_GPU_KILL:-build-gpu/kill}
if [ "${1:-}" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B"
    $NVCC $ARCH -O2 -std=c++17 $INC tests/gpu/test_kill.cu $LIBS -o $B/test_kill
    ls -la $B
    exit 0
fi
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_DEBUG=${MK_DEBUG:-WARN}
export MKT_STAMPS=${MKT_STAMPS:-1} # each survivor says when its output is copied and its stream drained
unset MK_NODE_SIZE MK_TRANSPORT
LOG=$O/kill.log
SUMMARY=$O/kill-summary.txt
: > "$LOG"; : > "$SUMMARY"
status=0
wanted() { [ -z "${MK_KILL_ONLY:-}" ] || echo "$1" | grep -qE "$MK_KILL_ONLY"; }
step() { # NAME LIMIT ARGS...
    local name=$1 limit=$2; shift 2
    wanted "$name" || return 0
    [ -n "${MK_KILL_LIMIT:-}" ] && [ "$MK_KILL_LIMIT" -lt "$limit" ] && limit=$MK_KILL_LIMIT
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-44s %-7s (out of time)\n" "$name" SKIP >> "$SUMMARY"
        return
    fi
    local t0=$(date +%s) rc res=PASS
    echo "=== $name (MK_NODE_SIZE=${MK_NODE_SIZE:-} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}): $*" >> "$LOG"
    # A step about to time out: every thread's stack of every test_kill
    # process left (gdb), then the timeout.
    local at=$((limit - 15)); [ $at -lt 12 ] && at=12
    ( sleep $at; for p in $(pgrep -f "^(\./)?$B/test_kill( |\$)"); do
          echo "--- stacks of pid $p ($name, about to time out)"
          timeout 20 gdb -p "$p" -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^(Thread|#)" | head -120
      done >> "$LOG.stacks" 2>&1 ) &
    local dumper=$!
    timeout -k 5 "$limit" "$@" >> "$LOG" 2>&1
    rc=$?
    kill "$dumper" 2>/dev/null; wait "$dumper" 2>/dev/null
    [ -s "$LOG.stacks" ] && { cat "$LOG.stacks" >> "$LOG"; : > "$LOG.stacks"; }
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    local worst
    worst=$(grep -E "^(PASS|FAIL) kill drill" "$LOG" | tail -1 | sed -n 's/.*after \([0-9.]*\) ms/\1 ms/p')
    [ $rc -ne 0 ] && worst=""
    printf "%-44s %-7s %4d s  %s\n" "$name" "$res" $(( $(date +%s) - t0 )) "${worst:+slowest $worst}" >> "$SUMMARY"
    local left
    left=$(pgrep -f "^(\./)?$B/test_kill( |$)" || true)
    if [ -n "$left" ]; then
        echo "LEFTOVER after $name: $left" >> "$SUMMARY"
        status=1
        for p in $left; do kill -9 "$p" 2>/dev/null; done
    fi
}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    for op in allreduce allreduce_small ag_gemm gemm_rs gemm_ar moe ring_attn; do
        step "2gpu kill: $op" 60 $B/test_kill $op 2 1
    done
fi
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-kill CUDA_MPS_LOG_DIRECTORY=/tmp/mps-kill-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
# A fresh MPS daemon for each step: a step that fails must not leave the
# next one a server still tearing down its clients.
mps() { # NAME LIMIT ARGS...
    wanted "$1" || return 0
    if ! nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        printf "%-44s %-7s (nvidia-cuda-mps-control -d failed)\n" "$1" SKIP >> "$SUMMARY"
        return
    fi
    : > "$CUDA_MPS_LOG_DIRECTORY/server.log" 2>/dev/null
    local before=$status
    status=0
    step "$@"
    # which client the MPS server saw fault first, and its process id (the
    # ranks print theirs): a fault in one client ends every client of the GPU
    if [ $status != 0 ]; then
        { echo "--- MPS server log of $1 (fatal errors, teardown):"
          grep -E "fatal|torn down|error trig|reset" "$CUDA_MPS_LOG_DIRECTORY/server.log" | head -8
        } >> "$LOG" 2>/dev/null
    fi
    [ $before != 0 ] && status=$before
    echo quit | nvidia-cuda-mps-control
    local i=0
    while pgrep -x nvidia-cuda-mps-server >/dev/null 2>&1 && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}
for op in allreduce allreduce_small ag_gemm gemm_rs gemm_ar ring_attn; do
    mps "1gpu x2 MPS kill: $op" 60 $B/test_kill $op 2 1
    mps "1gpu x4 MPS kill: $op" 60 $B/test_kill $op 4 2
    MK_NODE_SIZE=2 MK_TRANSPORT=socket mps "1gpu x4 MPS 2x2 kill: $op" 60 $B/test_kill $op 4 3
done
mps "1gpu x2 MPS kill: moe" 60 $B/test_kill moe 2 1
mps "1gpu x4 MPS kill: moe" 60 $B/test_kill moe 4 2
# across nodes the MoE pair is a sequence (moe.h): the bootstrap's
# exchange of the token counts, then the collectives
MK_NODE_SIZE=2 MK_TRANSPORT=socket mps "1gpu x4 MPS 2x2 kill: moe" 60 $B/test_kill moe 4 3
# 8 ranks: every op, the victim a different rank each time
v=5
for op in allreduce allreduce_small ag_gemm gemm_rs gemm_ar moe ring_attn; do
    mps "1gpu x8 MPS kill: $op" 90 $B/test_kill $op 8 $v
    v=$(( (v + 3) % 8 ))
done
unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
grep -E "FAIL|NOTE" "$LOG" | head -20
cat "$SUMMARY"
exit $status
