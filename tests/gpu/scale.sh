#!/bin/bash
# Many ranks on 2 GPUs under MPS, as virtual nodes (MK_NODE_SIZE, socket
# transport): every collective (3 dtypes, counts 1, 7, 65537, 1000003, in
# and out of place) and mkAllGatherGemm with uneven rows, 20 calls in a row
# each, every call checked against a host reference (test_scale,
# test_ag_gemm uneven).  Steps: 16 ranks as 2 x 8 and as 4 x 4, then 8
# ranks as 2 x 4 four times over (a race once showed there in 2 runs of 4).
#
#   bash tests/gpu/scale.sh [reps]      (default 20; needs 2 GPUs)
#
# Binaries from tests/gpu/build.sh: build-gpu/rt/test_scale and
# build-gpu/agg/test_ag_gemm (MK_GPU_RT, MK_GPU_AGG name other folders).
# Logs to $OUT (else build-gpu/rt/out): scale.log, scale-summary.txt (one
# line a step, printed last).  Each step has its own timeout, cut to what
# is left before MK_GPU_DEADLINE; exit 0 all passed, 1 a failure, 3 steps
# skipped for time.
set -u
RT=${MK_GPU_RT:-build-gpu/rt}
AGG=${MK_GPU_AGG:-build-gpu/agg}
reps=${1:-20}
O=${OUT:-$RT/out}
mkdir -p "$O"
LOG=$O/scale.log
SUMMARY=$O/scale-summary.txt
: > "$LOG"; : > "$SUMMARY"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
export MK_TRANSPORT=socket CUDA_VISIBLE_DEVICES=0,1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-scale CUDA_MPS_LOG_DIRECTORY=/tmp/mps-scale-log
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x MK_NODE_SIZE -x MK_TRANSPORT \
 -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
status=0 late=0
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpu" -lt 2 ]; then
    echo "scale.sh: SKIP ($ngpu GPUs; the scale steps need 2)" | tee "$SUMMARY"
    exit 0
fi
for f in "$RT/test_scale" "$AGG/test_ag_gemm"; do
    [ -x "$f" ] || { echo "scale.sh: no $f (run tests/gpu/build.sh and carry it)" | tee "$SUMMARY"; exit 1; }
done

# step NAME LIMIT NODE_SIZE NP ARGS...
step() {
    local name=$1 limit=$2 ns=$3 np=$4 t0 rc res=PASS left
    shift 4
    if [ -n "${MK_GPU_DEADLINE:-}" ]; then
        left=$((MK_GPU_DEADLINE - $(date +%s)))
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-44s %-7s (out of time before MK_GPU_DEADLINE)\n" "$name" SKIP >> "$SUMMARY"
        late=1
        return
    fi
    t0=$(date +%s)
    echo "=== $name (np $np, MK_NODE_SIZE=$ns, limit ${limit}s): $*" >> "$LOG"
    MK_NODE_SIZE=$ns timeout -k 10 "$limit" $MPI -np "$np" "$@" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-44s %-7s %4d s (rc %d)\n" "$name" $res $(($(date +%s) - t0)) $rc >> "$SUMMARY"
    left=$(pgrep -f "^(\./)?build-gpu/[a-z]+/(test_scale|test_ag_gemm)( |$)" || true)
    if [ -n "$left" ]; then
        echo "LEFTOVER after $name: $left" >> "$SUMMARY"
        status=1
        kill -9 $left 2>/dev/null
    fi
}

mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if ! nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
    echo "scale.sh: nvidia-cuda-mps-control -d failed" | tee -a "$SUMMARY"
    exit 1
fi
step "16 ranks 2x8: collectives x$reps" 180 8 16 $RT/test_scale "$reps"
step "16 ranks 2x8: ag_gemm uneven x$reps" 90 8 16 $AGG/test_ag_gemm uneven "$reps"
step "16 ranks 4x4: collectives x$reps" 180 4 16 $RT/test_scale "$reps"
step "16 ranks 4x4: ag_gemm uneven x$reps" 90 4 16 $AGG/test_ag_gemm uneven "$reps"
for run in 1 2 3 4; do
    step "8 ranks 2x4: collectives x$reps (run $run/4)" 120 4 8 $RT/test_scale "$reps"
done
step "8 ranks 2x4: ag_gemm uneven x$reps" 90 4 8 $AGG/test_ag_gemm uneven "$reps"
echo quit | nvidia-cuda-mps-control
sleep 1
{
    echo
    grep -E "^FAIL" "$LOG" | head -20
} >> "$SUMMARY"
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3
exit $status
