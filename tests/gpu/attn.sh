#!/bin/bash
# mkRingAttention on the GPU machine: correctness (test_attn: every case
# against a host reference in double and against one rank's result over
# the whole sequence, both layouts) on one rank, on 2 GPUs, on 1 GPU with
# 2 and 4 ranks under MPS (each client its share of the SMs through
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), on 2 x 1 and 2 x 2 virtual nodes
# (MK_NODE_SIZE, socket transport); 200 calls without a sync, a CUDA
# graph replayed, bad input; then the benchmark: mkbench attn (the core
# alone on one GPU) beside PyTorch's SDPA (bench/attn_sdpa.py: cuDNN and
# flash), and mkbench ring_attn on 2 ranks and, on a host of more, at one
# rank per GPU (ours against the unfused ring and against the core alone
# on the same work).
#
#   bash tests/gpu/attn.sh build     here (no GPU needed): the library in
#                                    build-gpu/agg-build (shared with
#                                    ag_gemm.sh, gemm_rs.sh and moe.sh), the
#                                    programs in build-gpu/attn
#   bash tests/gpu/attn.sh [test|bench|ring|all] [mkbench ring_attn args]   there
#                                    (ring: the ring's benchmark alone)
#   bash tests/gpu/attn.sh profile [d/mask/seq ...]                     there:
#                                    Nsight Compute on one launch of the
#                                    core per shape (test_attn_core time,
#                                    default 128/full/4096 128/full/16384
#                                    64/causal/4096): the details page
#                                    (speed of light, scheduler, warp
#                                    states, instruction mix) and the
#                                    SASS with its stall samples, as CSV
#
# The benchmark steps log the GPU's SM clock, power and throttle reasons
# every 200 ms (nvidia-smi) and print their medians per step.
# Only what the GPUs allow runs; the rest says SKIP and why.  Logs and
# JSON go to $OUT when set (else build-gpu/attn/out); each step runs under
# its own timeout, cut to MK_GPU_DEADLINE when set; a summary table ends
# the output.  Exit status: 0 all passed, 1 something failed, 3 nothing
# failed but steps were skipped for time.
set -u
B=${MK_GPU_ATTN:-build-gpu/attn}
what=${1:-all}; shift || true
if [ "$what" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B"
    # objects first, then the links: a link that fails (the library without
    # the calls yet) still shows that the sources compile
    $NVCC $ARCH -O2 -std=c++17 $INC -c tests/gpu/test_attn.cu -o $B/test_attn.o
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_ATTN_MAIN -c tools/mkbench/attn.cu -o $B/mkbench_attn.o
    # the kernel alone (kernels/attn/attn.h), over several key segments
    # with zigzag positions, as one GPU sees a ring
    $NVCC $ARCH -O2 -std=c++17 -Iinclude -Ikernels tests/gpu/test_attn_core.cu \
        kernels/attn/attn.cu -o $B/test_attn_core
    # the same with line information, for the profile mode's source page
    $NVCC $ARCH -O2 -std=c++17 -lineinfo -Iinclude -Ikernels tests/gpu/test_attn_core.cu \
        kernels/attn/attn.cu -o $B/test_attn_core_li
    # the core as a shared library, for bench/attn_sdpa.py --core (ours in
    # turns with PyTorch's backends in one process)
    $NVCC $ARCH -O2 -std=c++17 -shared -Xcompiler -fPIC -Iinclude -Ikernels -Itools/mkbench \
        tools/mkbench/attn_core_shim.cu kernels/attn/attn.cu -o $B/libmkb_attn_core.so
    $NVCC $ARCH $B/test_attn.o $LIBS -o $B/test_attn
    $NVCC $ARCH $B/mkbench_attn.o $BLD/mkb_common.o $LIBS -o $B/mkbench_attn
    rm -f $B/test_attn.o $B/mkbench_attn.o
    ls -la $B
    exit 0
fi
case $what in
test)  tests=1; bench=0 ;;
bench) tests=0; bench=1 ;;
ring)  tests=0; bench=1 ;; # the ring's benchmark only (not the core against cuDNN)
all)   tests=1; bench=1 ;;
profile) tests=0; bench=0 ;;
*) echo "usage: tests/gpu/attn.sh [build|test|bench|ring|all|profile] ..." >&2; exit 2 ;;
esac
O=${OUT:-$B/out}
mkdir -p "$O"
export OUT=$O # mkbench's JSON beside the logs, where attn_sdpa.py reads it
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
# Node layout and MPS shares are set per step, never inherited from the caller.
unset MK_NODE_SIZE MK_TRANSPORT CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x MK_SM_SPLIT \
 -x MK_SEED -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
 -x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
LOG=$O/attn.log
SUMMARY=$O/attn-summary.txt
: > "$LOG"; : > "$SUMMARY"
PROGS="test_attn|test_attn_core|mkbench_attn"
. tests/gpu/steps.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
echo "$ngpu GPUs; attn.sh $what $*" >> "$LOG"
skip() { printf "%-44s %-7s (%s)\n" "$1" SKIP "$2" >> "$SUMMARY"; }

# A step that is not an MPI program (the PyTorch script), with the same
# log, timeout and summary line as step.
plain() { # NAME LIMIT ARGS...
    local name=$1 limit=$2; shift 2
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        skip "$name" "out of time"
        late=1
        return
    fi
    local t0 rc res=PASS
    t0=$(date +%s)
    echo "=== $name (limit ${limit}s, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}): $*" >> "$LOG"
    timeout -k 10 "$limit" "$@" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-44s %-7s %4d s (rc %d)\n" "$name" "$res" $(( $(date +%s) - t0 )) $rc >> "$SUMMARY"
}

if [ $tests = 1 ] && [ "$ngpu" -lt 1 ]; then
    skip "attn tests" "no GPU"
fi
if [ $tests = 1 ] && [ "$ngpu" -ge 1 ]; then
    # one rank: the core alone, both layouts in one step
    export CUDA_VISIBLE_DEVICES=0
    plain "1gpu kernel alone: segments, zigzag (26 cases x 4)" 120 $B/test_attn_core
    step "1 rank correct (both layouts)" 150 1 $B/test_attn correct both
    if [ "$ngpu" -lt 2 ]; then # what the 2-GPU steps would cover, at one rank
        step "1 rank CUDA graph x10" 60 1 $B/test_attn graph
        step "1 rank bad input" 40 1 $B/test_attn badinput
    fi
fi
if [ $tests = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu correct BSHD (13 cases x 2 dtypes x 4)" 150 2 $B/test_attn correct bshd
    step "2gpu correct BHSD" 150 2 $B/test_attn correct bhsd
    step "2gpu stress 200 calls" 90 2 $B/test_attn stress
    step "2gpu CUDA graph x10" 90 2 $B/test_attn graph
    step "2gpu bad input" 60 2 $B/test_attn badinput
    MK_TIMEOUT_MS=3000 step "2gpu nocall -> timeout" 40 2 $B/test_attn nocall
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2x1 nodes (MK_NODE_SIZE=1) correct BSHD" 180 2 $B/test_attn correct bshd
    # one rank per GPU at 4 and 8 ranks, on one node and as 2 virtual nodes
    # (issue 24)
    for np in 4 8; do
        [ "$ngpu" -ge $np ] || continue
        CUDA_VISIBLE_DEVICES=$(devs $np)
        export CUDA_VISIBLE_DEVICES
        step "${np}gpu correct BSHD" 180 $np $B/test_attn correct bshd
        step "${np}gpu correct BHSD" 180 $np $B/test_attn correct bhsd
        step "${np}gpu stress 200 calls" 90 $np $B/test_attn stress
        MK_TIMEOUT_MS=3000 step "${np}gpu nocall -> timeout" 40 $np $B/test_attn nocall
        MK_NODE_SIZE=$((np / 2)) MK_TRANSPORT=socket \
            step "${np}gpu 2x$((np / 2)) nodes correct BSHD" 240 $np $B/test_attn correct bshd
    done
    export CUDA_VISIBLE_DEVICES=0,1
elif [ $tests = 1 ] && [ "$ngpu" -ge 1 ]; then
    skip "2gpu steps" "$ngpu GPU: run at 2 ranks under MPS below"
fi
if [ $tests = 1 ] && [ "$ngpu" -ge 1 ]; then
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-attn CUDA_MPS_LOG_DIRECTORY=/tmp/mps-attn-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        # each client its share of the SMs (mkCommInit(3)): a kernel of a
        # rank late to a call then never waits for SMs the others' spinning
        # kernels hold
        export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
        step "1gpu x2 MPS correct BSHD" 180 2 $B/test_attn correct bshd
        step "1gpu x2 MPS correct BHSD" 180 2 $B/test_attn correct bhsd
        if [ "$ngpu" -lt 2 ]; then # what the 2-GPU steps would cover
            step "1gpu x2 MPS stress 200 calls" 90 2 $B/test_attn stress
            step "1gpu x2 MPS CUDA graph x10" 90 2 $B/test_attn graph
            step "1gpu x2 MPS bad input" 60 2 $B/test_attn badinput
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2x1 nodes (MK_NODE_SIZE=1) correct" 180 2 $B/test_attn correct bshd
        fi
        export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25
        step "1gpu x4 MPS correct BSHD" 240 4 $B/test_attn correct bshd
        step "1gpu x4 MPS correct BHSD" 240 4 $B/test_attn correct bhsd
        step "1gpu x4 MPS stress 200 calls" 120 4 $B/test_attn stress bhsd
        MK_NODE_SIZE=2 MK_TRANSPORT=socket \
            step "1gpu x4 MPS 2x2 nodes (MK_NODE_SIZE=2) correct" 240 4 $B/test_attn correct bshd
        unset CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        skip "1gpu MPS" "nvidia-cuda-mps-control -d failed"
    fi
    unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    grep -E "FAIL|stress:|bad input" "$LOG" | head -40
fi
# GPU 0's SM clock, power and throttle reasons every 200 ms while a
# benchmark step runs: smi_start; step ...; smi_stop NAME (one line of
# medians in the summary: under a power cap the clocks fall, and a lab
# that leaves the GPU idle between shapes runs on a cooler, faster GPU).
smi_start() {
    SMI_CSV=$O/smi-$(date +%s%N).csv
    local why=clocks_event_reasons.active # older drivers: clocks_throttle_reasons
    nvidia-smi -i 0 --query-gpu=$why --format=csv,noheader > /dev/null 2>&1 ||
        why=clocks_throttle_reasons.active
    nvidia-smi -i 0 --query-gpu=clocks.sm,power.draw,$why --format=csv,noheader,nounits \
        -lms 200 > "$SMI_CSV" 2>/dev/null &
    SMI_PID=$!
}
smi_stop() { # NAME
    kill "$SMI_PID" 2>/dev/null
    wait "$SMI_PID" 2>/dev/null
    local rows n c cmin w thr
    rows=$(grep -E '^[0-9]+,' "$SMI_CSV" | tr -d ' ')
    n=$(printf '%s' "$rows" | grep -c .)
    if [ "$n" -eq 0 ]; then
        printf "%-44s clocks: no samples\n" "$1" >> "$SUMMARY"
        return
    fi
    # medians by sort (mawk has no asort); throttled: a reason other than
    # none (0) or idle (1), e.g. the software power cap (4)
    c=$(echo "$rows" | cut -d, -f1 | sort -n)
    cmin=$(echo "$c" | head -1)
    c=$(echo "$c" | sed -n "$(( (n + 1) / 2 ))p")
    w=$(echo "$rows" | cut -d, -f2 | sort -g | sed -n "$(( (n + 1) / 2 ))p")
    thr=$(echo "$rows" | cut -d, -f3 | grep -vcE '^0x0*[01]?$')
    printf "%-44s SM clock median %s MHz (min %s), power median %s W, throttled in %s of %s samples\n" \
        "$1" "$c" "$cmin" "$w" "$thr" "$n" >> "$SUMMARY"
}
if [ $bench = 1 ] && [ "$what" != ring ] && [ "$ngpu" -ge 1 ]; then
    export CUDA_VISIBLE_DEVICES=0
    smi_start
    step "1gpu mkbench attn (core alone)" 240 1 $B/mkbench_attn attn
    smi_stop "  (mkbench attn)"
    # PyTorch brings its own cuDNN: the CUDA library path above would put
    # the system's older one first (seen: "cuDNN version incompatibility").
    smi_start
    plain "1gpu PyTorch SDPA (cuDNN, flash) and ours in turns" 300 env -u LD_LIBRARY_PATH \
        python3 bench/attn_sdpa.py --out "$O/attn_sdpa.json" --ours "$O/attn.json" \
        --core $B/libmkb_attn_core.so --iters 40 --rounds 5
    smi_stop "  (PyTorch SDPA)"
    smi_start
    plain "1gpu kernel alone: test_attn_core time" 240 $B/test_attn_core time 20
    smi_stop "  (test_attn_core time)"
elif [ $bench = 1 ] && [ "$what" != ring ] && [ "$ngpu" -lt 1 ]; then
    skip "bench" "no GPU"
fi
if [ $bench = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu mkbench ring_attn" 400 2 $B/mkbench_attn ring_attn "$@"
elif [ $bench = 1 ]; then
    skip "2gpu mkbench ring_attn" "$ngpu GPU: the ring's figures need one GPU per rank"
fi
# one rank per GPU where there are more than 2 (issue 24: the same total
# sequences over more ranks)
if [ $bench = 1 ] && [ "$ngpu" -gt 2 ]; then
    CUDA_VISIBLE_DEVICES=$(devs "$ngpu")
    export CUDA_VISIBLE_DEVICES
    step "${ngpu}gpu mkbench ring_attn" 400 "$ngpu" $B/mkbench_attn ring_attn "$@" --tag np$ngpu
fi
unset CUDA_VISIBLE_DEVICES
if [ "$what" = profile ] && [ "$ngpu" -ge 1 ]; then
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -z "$NCU" ]; then
        skip "profile" "no ncu on this machine"
    else
        export CUDA_VISIBLE_DEVICES=0
        [ $# -eq 0 ] && set -- 128/full/4096 128/full/16384 64/causal/4096
        for shape in "$@"; do
            f=$O/ncu-$(echo "$shape" | tr / -)
            # 3 warm-up launches, then the one profiled; the clocks left
            # alone (METHOD.md), the SASS's stall samples kept
            plain "ncu $shape" 300 "$NCU" --clock-control none --kernel-name regex:attn_kernel \
                --launch-skip 3 --launch-count 1 \
                --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
                --section InstructionStats --section SourceCounters --section LaunchStats \
                --section Occupancy -f -o "$f" $B/test_attn_core_li time 1 "$shape"
            if [ -f "$f.ncu-rep" ]; then
                "$NCU" --import "$f.ncu-rep" --page details --csv > "$f-details.csv" 2>> "$LOG"
                "$NCU" --import "$f.ncu-rep" --page source --csv --print-source sass > "$f-sass.csv" 2>> "$LOG" ||
                    "$NCU" --import "$f.ncu-rep" --page source --csv > "$f-sass.csv" 2>> "$LOG"
                grep -E '"(SM Busy|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Compute \(SM\) Throughput|Duration|SM Frequency|Warp Cycles Per Issued Instruction)"' \
                    "$f-details.csv" | awk -F'","' -v s="$shape" '{ gsub(/"/, "", $NF); printf "  %-16s %-40s %s\n", s, $(NF - 2), $NF }' >> "$SUMMARY"
            fi
        done
        unset CUDA_VISIBLE_DEVICES
    fi
fi
# The benchmarks' tables (mkbench's, from its title to "results:", and
# the SDPA script's comparison).
TABLE=$(awk '/^mkRingAttention (ring|core alone) / { on = 1 }
    /^attn_sdpa: / { on = 1 }
    on && /^results:/ { on = 0; next }
    on && /^attn_sdpa: end/ { on = 0; next }
    on { print }' "$LOG")
[ -n "$TABLE" ] && { echo; echo "$TABLE"; } >> "$SUMMARY"
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3 # skipped for time: incomplete
exit $status
