#!/bin/bash
# mkAllGatherGemm on the GPU machine: correctness on 2 GPUs and on 1 GPU
# with 2 and 4 ranks under MPS, 200 back-to-back calls, CUDA graphs (3
# calls captured and replayed 200 times, fused, timed against eager
# calls), the timeout of a rank that never calls, and the benchmark (mkbench ag_gemm); where there
# are GPUs for them, the same at 4 and 8 ranks, and on virtual nodes
# (MK_NODE_SIZE, socket transport: across nodes fused where the plan says
# so, and forced fused with MK_SM_SPLIT=ag_gemm:fused=1).
#
#   bash tests/gpu/ag_gemm.sh build           here (no GPU needed): library
#                                             in build-gpu/agg-build, the
#                                             programs in build-gpu/agg
#   bash tests/gpu/ag_gemm.sh [test|bench|all|scale] [mkbench args]   there
#   bash tests/gpu/ag_gemm.sh plot TSV PNG [TITLE]   here: the bench plot
#
# test: 2 GPUs, MPS, 4 and 8 ranks, virtual nodes (2 GPUs as 2 nodes,
# 1 GPU x 4 ranks as 2 x 2 under MPS, N GPUs as 2 x N/2); bench: mkbench at
# 2 ranks (ag_gemm.json) and at one rank per GPU when there are more than
# 2 GPUs, on one node (ag_gemm-npN.json) and on 2 virtual nodes
# (ag_gemm-npN-2xH.json); all: both; scale: only what needs more than 2
# GPUs or virtual nodes.  Logs and JSON go to $OUT when set (else
# build-gpu/agg/out; MK_GPU_AGG names another folder than build-gpu/agg);
# each step runs under its own timeout, cut to what is left before
# MK_GPU_DEADLINE (epoch seconds, set by tests/gpu/all.sh; a step skipped
# for time makes the exit status 3 if nothing failed); a summary table
# ends the output.
set -u
B=${MK_GPU_AGG:-build-gpu/agg}
what=${1:-all}; shift || true
if [ "$what" = plot ]; then # plot TSV PNG [TITLE]: here, with gnuplot
    gnuplot -e "in='$1'; out='$2'; ttl='${3:-}'" - <<'GP'
set terminal pngcairo size 1200,700 font ",10" noenhanced
set output out
set datafile separator "\t"
set title ttl
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -25
set bmargin 7
set ylabel "ms (median per call)"
set yrange [0:*]
set y2label "ratio"
set y2range [0:2.5]
set y2tics 0.25
set ytics nomirror
set grid ytics
set key top left
plot in every ::1 using 2:xtic(1) title "mkAllGatherGemm" lc rgb "#1f77b4", \
     '' every ::1 using 3 title "NCCL all-gather + cuBLAS" lc rgb "#aaaaaa", \
     '' every ::1 using 4 title "cuBLAS GEMM alone" lc rgb "#2ca02c", \
     '' every ::1 using 5 title "NCCL all-gather alone" lc rgb "#ff7f0e", \
     '' every ::1 using 0:6 axes x1y2 with linespoints pt 7 lc rgb "#d62728" title "speed-up over unfused", \
     '' every ::1 using 0:7 axes x1y2 with linespoints pt 5 lc rgb "#9467bd" title "ours / max(GEMM, all-gather)"
GP
    exit $?
fi
if [ "$what" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B"
    $NVCC $ARCH -O2 -std=c++17 $INC tests/gpu/test_ag_gemm.cu $LIBS -o $B/test_ag_gemm
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_AG_GEMM_MAIN tools/mkbench/ag_gemm.cu \
        $BLD/mkb_common.o $LIBS -o $B/mkbench_ag_gemm
    ls -la $B
    exit 0
fi
case $what in
test)  base_tests=1; scale_tests=1; base_bench=0; scale_bench=0 ;;
bench) base_tests=0; scale_tests=0; base_bench=1; scale_bench=1 ;;
all)   base_tests=1; scale_tests=1; base_bench=1; scale_bench=1 ;;
scale) base_tests=0; scale_tests=1; base_bench=0; scale_bench=1 ;;
*) echo "usage: tests/gpu/ag_gemm.sh [build|test|bench|all|scale|plot] ..." >&2; exit 2 ;;
esac
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
# Node layout is set per step, never inherited from the caller.
unset MK_NODE_SIZE MK_TRANSPORT
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x MK_SM_SPLIT \
 -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
# -x for the optional variables that are set (the virtual-node steps).
xopt() {
    local v
    for v in MK_NODE_SIZE MK_TRANSPORT MK_SOCKET_IFNAME; do
        [ -n "${!v:-}" ] && printf ' -x %s' "$v"
    done
}
layout() {
    local v s=""
    for v in MK_NODE_SIZE MK_TRANSPORT; do
        [ -n "${!v:-}" ] && s="$s$v=${!v} "
    done
    printf '%s' "$s"
}
LOG=$O/ag_gemm.log
SUMMARY=$O/ag_gemm-summary.txt
: > "$LOG"; : > "$SUMMARY"
status=0 late=0
# A step that must have run fused (MK_DEBUG=INFO): a line "unfused
# sequence" in its log fails it.
fused_only() { # NAME (the step's name, or its start)
    if awk -v n="=== $1" 'index($0, n) == 1 { on = 1; next } /^=== / { on = 0 } on' "$LOG" |
        grep -q "unfused sequence"; then
        echo "$1: a call ran the unfused sequence  FAIL" >> "$SUMMARY"
        status=1
    fi
}
step() { # NAME LIMIT NP ARGS...
    local name=$1 limit=$2 np=$3; shift 3
    if [ -n "${MK_GPU_DEADLINE:-}" ] && [ $((MK_GPU_DEADLINE - $(date +%s))) -lt "$limit" ]; then
        limit=$((MK_GPU_DEADLINE - $(date +%s)))
    fi
    if [ "$limit" -lt 10 ]; then
        printf "%-42s %-7s (out of time: under 10 s left before MK_GPU_DEADLINE)\n" "$name" SKIP >> "$SUMMARY"
        echo "--- $name: SKIP (out of time)" >> "$LOG"
        late=1
        return
    fi
    local t0=$(date +%s) rc res=PASS
    echo "=== $name (np $np, limit ${limit}s, $(layout)CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}): $*" >> "$LOG"
    # shellcheck disable=SC2046 # $(xopt): zero or more "-x VAR" words
    timeout -k 10 "$limit" $MPI $(xopt) -np "$np" "$@" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-42s %-7s %4d s (rc %d)\n" "$name" "$res" $(( $(date +%s) - t0 )) $rc >> "$SUMMARY"
    local left
    left=$(pgrep -f "^(\./)?$B/(test_ag_gemm|mkbench_ag_gemm)( |$)" || true)
    if [ -n "$left" ]; then
        echo "LEFTOVER after $name: $left" >> "$SUMMARY"
        status=1
        for p in $left; do kill -9 "$p" 2>/dev/null; done
    fi
}
devs() { seq -s, 0 $(($1 - 1)); } # devs 4 -> 0,1,2,3
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
echo "$ngpu GPUs; ag_gemm.sh $what $*" >> "$LOG"
if [ $base_tests = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu correct" 60 2 $B/test_ag_gemm correct
    step "2gpu stress 200 calls" 45 2 $B/test_ag_gemm stress
    step "2gpu CUDA graph" 45 2 $B/test_ag_gemm graph
    # 3 calls captured, replayed 200 times, checked; replay vs eager time.
    # They must run fused: an INFO line "unfused sequence" fails the step.
    MK_DEBUG=INFO step "2gpu CUDA graph replay x200" 90 2 $B/test_ag_gemm replay
    fused_only "2gpu CUDA graph replay"
    grep -h "replay/eager" "$LOG" | sed 's/^/  /' >> "$SUMMARY"
    MK_TIMEOUT_MS=3000 step "2gpu nocall -> timeout" 40 2 $B/test_ag_gemm nocall
fi
if [ $scale_tests = 1 ]; then
    if [ "$ngpu" -ge 2 ]; then
        export CUDA_VISIBLE_DEVICES=0,1
        MK_NODE_SIZE=1 MK_TRANSPORT=socket \
            step "2gpu 2 nodes (MK_NODE_SIZE=1) correct" 90 2 $B/test_ag_gemm correct
        MK_NODE_SIZE=1 MK_TRANSPORT=socket \
            step "2gpu 2 nodes (MK_NODE_SIZE=1) CUDA graph" 60 2 $B/test_ag_gemm graph
        # Fused across nodes at every shape (the plan keeps small ones
        # unfused): the net CTAs beside the GEMM, the proxy's channels
        # shared with the collectives (test_scale's soak mixes them).
        for m in correct stress graph "uneven 5"; do
            MK_NODE_SIZE=1 MK_TRANSPORT=socket MK_SM_SPLIT=ag_gemm:fused=1 MK_DEBUG=INFO \
                step "2gpu 2 nodes fused $m" 90 2 $B/test_ag_gemm $m
            fused_only "2gpu 2 nodes fused $m"
        done
    fi
    for np in 4 8; do
        [ "$ngpu" -ge $np ] || continue
        CUDA_VISIBLE_DEVICES=$(devs $np)
        export CUDA_VISIBLE_DEVICES
        step "${np}gpu correct" 60 $np $B/test_ag_gemm correct
        step "${np}gpu stress 200 calls" 45 $np $B/test_ag_gemm stress
        MK_TIMEOUT_MS=3000 step "${np}gpu nocall -> timeout" 40 $np $B/test_ag_gemm nocall
        h=$((np / 2))
        MK_NODE_SIZE=$h MK_TRANSPORT=socket \
            step "${np}gpu 2x$h (MK_NODE_SIZE=$h) correct" 90 $np $B/test_ag_gemm correct
    done
fi
if [ $base_tests = 1 ] || [ $scale_tests = 1 ]; then
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-agg CUDA_MPS_LOG_DIRECTORY=/tmp/mps-agg-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        if [ $base_tests = 1 ]; then
            step "1gpu x2 MPS correct" 60 2 $B/test_ag_gemm correct
            step "1gpu x4 MPS correct" 60 4 $B/test_ag_gemm correct
            step "1gpu x4 MPS stress" 45 4 $B/test_ag_gemm stress
        fi
        if [ $scale_tests = 1 ]; then
            MK_NODE_SIZE=2 MK_TRANSPORT=socket \
                step "1gpu x4 MPS 2x2 (MK_NODE_SIZE=2) correct" 90 4 $B/test_ag_gemm correct
            for m in correct "uneven 5"; do
                MK_NODE_SIZE=2 MK_TRANSPORT=socket MK_SM_SPLIT=ag_gemm:fused=1 MK_DEBUG=INFO \
                    step "1gpu x4 MPS 2x2 fused $m" 90 4 $B/test_ag_gemm $m
                fused_only "1gpu x4 MPS 2x2 fused $m"
            done
        fi
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-42s %-7s (nvidia-cuda-mps-control -d failed)\n" "1gpu MPS" SKIP >> "$SUMMARY"
    fi
    unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    grep -E "FAIL|nocall|stress:" "$LOG" | head -30
fi
if [ $base_bench = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu bench" 120 2 $B/mkbench_ag_gemm "$@"
fi
if [ $scale_bench = 1 ] && [ "$ngpu" -gt 2 ]; then
    CUDA_VISIBLE_DEVICES=$(devs "$ngpu")
    export CUDA_VISIBLE_DEVICES
    step "${ngpu}gpu bench" 120 "$ngpu" $B/mkbench_ag_gemm "$@" --tag np$ngpu
    if [ $((ngpu % 2)) = 0 ]; then
        h=$((ngpu / 2))
        MK_NODE_SIZE=$h MK_TRANSPORT=socket step "${ngpu}gpu 2x$h (MK_NODE_SIZE=$h) bench" 120 \
            "$ngpu" $B/mkbench_ag_gemm --iters 10 "$@" --tag np$ngpu-2x$h
    fi
fi
# Each benchmark's table under the name of its step (world size, layout).
TABLE=$(awk '/^=== .*bench \(np / { hdr = $0; sub(/ \(np .*/, "", hdr); sub(/^=== /, "", hdr) }
    /^mkAllGatherGemm / { on = 1; print "-- " hdr }
    on && /^results:/ { on = 0; next }
    on { print }' "$LOG")
[ -n "$TABLE" ] && { echo; echo "$TABLE"; } >> "$SUMMARY"
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3 # skipped for time: incomplete
exit $status
