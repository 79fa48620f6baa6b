#!/bin/bash
# mkGemmReduceScatter on the GPU machine: correctness on 2 GPUs and on 1
# GPU with 2 and 4 ranks under MPS, 200 back-to-back calls, a CUDA graph
# replayed, the timeout of a rank that never calls, virtual nodes (the
# unfused path across nodes: socket transport), and the benchmark
# (mkbench gemm_rs against cuBLAS + NCCL reduce-scatter) at 2 ranks and,
# on a host of more, at one rank per GPU (MK_GPUS=n: the first n GPUs).
#
#   bash tests/gpu/gemm_rs.sh build     here (no GPU needed): the library in
#                                       build-gpu/agg-build (shared with
#                                       ag_gemm.sh), the programs in
#                                       build-gpu/grs
#   bash tests/gpu/gemm_rs.sh [test|bench|all] [mkbench args]   there
#   bash tests/gpu/gemm_rs.sh [ar-test|ar-bench|ar-all] [mkbench args]
#                                       the same for mkGemmAllReduce
#                                       (test_gemm_rs ar-MODE, mkbench
#                                       gemm_ar)
#   bash tests/gpu/gemm_rs.sh trace-build   here: mkbench_gemm_rs on a
#                                       library built with
#                                       -DMKI_GRS_TRACE=40 (its own tree,
#                                       build-gpu/trace-build), in
#                                       build-gpu/grs-trace
#   bash tests/gpu/gemm_rs.sh trace [--ar] MxNxK   there: one shape on 2
#                                       GPUs; call 40's per-CTA stamps
#                                       and sums and per-tile timeline,
#                                       summarized by tools/grs_trace.py
#                                       (its kernels spill: their times
#                                       are not the library's)
#   bash tests/gpu/gemm_rs.sh te-build  here: mkbench_gemm_rs on a library
#                                       built with -DMKI_GRS_TE (its own
#                                       tree, build-gpu/te-build), in
#                                       build-gpu/grs-te
#   bash tests/gpu/gemm_rs.sh te MxNxK [mkbench args]   there: one shape on
#                                       2 GPUs; the last call's per-tile
#                                       timeline from kernels that are the
#                                       normal build's, by tools/grs_te.py
#
# Logs and JSON go to $OUT when set (else build-gpu/grs/out); each step
# runs under its own timeout; a summary table ends the output.
set -u
B=${MK_GPU_GRS:-build-gpu/grs}
what=${1:-all}; shift || true
if [ "$what" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B"
    $NVCC $ARCH -O2 -std=c++17 $INC tests/gpu/test_gemm_rs.cu $LIBS -o $B/test_gemm_rs
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_GEMM_RS_MAIN tools/mkbench/gemm_rs.cu \
        $BLD/mkb_common.o $LIBS -o $B/mkbench_gemm_rs
    ls -la $B
    exit 0
fi
# lab_build DEFS OUTDIR TREE: a lab build (its own library tree TREE), mkbench_gemm_rs in OUTDIR.
lab_build() {
    set -e
    . tests/gpu/build_lib.sh
    MK_BUILD_DEFS="$1" gpu_build_lib "$2" "$3"
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_GEMM_RS_MAIN tools/mkbench/gemm_rs.cu \
        $BLD/mkb_common.o $LIBS -o "$2/mkbench_gemm_rs"
    ls -la "$2"
    exit 0
}
[ "$what" = trace-build ] && lab_build -DMKI_GRS_TRACE=40 build-gpu/grs-trace build-gpu/trace-build
[ "$what" = te-build ] && lab_build -DMKI_GRS_TE build-gpu/grs-te build-gpu/te-build
# lab_run BINDIR LOG TOOL [mkbench args]: a lab build's mkbench_gemm_rs on 2
# GPUs, its table and TOOL's summary of LOG.
lab_run() {
    local bin=$1 log=$2 tool=$3
    shift 3
    mkdir -p "$(dirname "$log")"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0,1
    timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x CUDA_VISIBLE_DEVICES \
        "$bin/mkbench_gemm_rs" "$@" > "$log" 2>&1
    local rc=$?
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " "$log"
    python3 "$tool" "$log"
    exit $rc
}
if [ "$what" = te ]; then
    [ $# -ge 1 ] || { echo "usage: tests/gpu/gemm_rs.sh te MxNxK [mkbench args]" >&2; exit 2; }
    sh=$1; shift
    # the timeline is the last call's, printed at mkCommDestroy
    lab_run build-gpu/grs-te "${OUT:-build-gpu/grs-te/out}/te-$sh.log" tools/grs_te.py \
        --shapes "$sh" --rounds 2 --iters 20 "$@"
fi
if [ "$what" = trace ]; then
    ar=
    [ "${1:-}" = --ar ] && { ar=--ar; shift; }
    [ $# -eq 1 ] || { echo "usage: tests/gpu/gemm_rs.sh trace [--ar] MxNxK" >&2; exit 2; }
    # call 40: within the first round's timed calls (30 warm-up calls)
    lab_run build-gpu/grs-trace "${OUT:-build-gpu/grs-trace/out}/trace${ar}-$1.log" \
        tools/grs_trace.py $ar --shapes "$1" --rounds 1 --iters 20
fi
AR= OPN=gemm_rs BARG=
case $what in
ar-*) AR=ar- OPN=gemm_ar BARG=--ar; what=${what#ar-} ;;
esac
case $what in
test)  tests=1; bench=0 ;;
bench) tests=0; bench=1 ;;
all)   tests=1; bench=1 ;;
*) echo "usage: tests/gpu/gemm_rs.sh [build|test|bench|all|trace-build|trace|te-build|te] ..." >&2; exit 2 ;;
esac
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
unset MK_NODE_SIZE MK_TRANSPORT
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x MK_SM_SPLIT \
 -x MK_SEED -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
LOG=$O/$OPN.log
SUMMARY=$O/$OPN-summary.txt
: > "$LOG"; : > "$SUMMARY"
PROGS="test_gemm_rs|mkbench_gemm_rs"
. tests/gpu/steps.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
if [ $tests = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu correct (9 shapes x 4)" 240 2 $B/test_gemm_rs ${AR}correct
    MK_SM_SPLIT=$OPN:fused=1 step "2gpu correct, all fused" 240 2 $B/test_gemm_rs ${AR}correct
    step "2gpu stress 200 calls" 90 2 $B/test_gemm_rs ${AR}stress
    MK_DEBUG=INFO step "2gpu CUDA graph x20" 90 2 $B/test_gemm_rs ${AR}graph
    if awk '/^=== 2gpu CUDA graph/ { on = 1; next } /^=== / { on = 0 } on' "$LOG" |
        grep -q "unfused sequence"; then
        echo "2gpu CUDA graph: a call ran the unfused sequence  FAIL" >> "$SUMMARY"
        status=1
    fi
    MK_TIMEOUT_MS=3000 step "2gpu nocall -> timeout" 40 2 $B/test_gemm_rs ${AR}nocall
    MK_TIMEOUT_MS=3000 step "2gpu nocall, decode m -> timeout" 40 2 $B/test_gemm_rs ${AR}nocall-decode
    step "2gpu bad input" 40 2 $B/test_gemm_rs ${AR}badinput
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes (MK_NODE_SIZE=1) correct" 240 2 $B/test_gemm_rs ${AR}correct
    # one rank per GPU at 4 and 8 ranks, on one node and as 2 virtual nodes
    # (issue 24)
    for np in 4 8; do
        [ "$ngpu" -ge $np ] || continue
        CUDA_VISIBLE_DEVICES=$(devs $np)
        export CUDA_VISIBLE_DEVICES
        step "${np}gpu correct" 240 $np $B/test_gemm_rs ${AR}correct
        MK_SM_SPLIT=$OPN:fused=1 step "${np}gpu correct, all fused" 240 $np $B/test_gemm_rs ${AR}correct
        step "${np}gpu stress 200 calls" 90 $np $B/test_gemm_rs ${AR}stress
        MK_TIMEOUT_MS=3000 step "${np}gpu nocall -> timeout" 40 $np $B/test_gemm_rs ${AR}nocall
        MK_NODE_SIZE=$((np / 2)) MK_TRANSPORT=socket \
            step "${np}gpu 2x$((np / 2)) (MK_NODE_SIZE=$((np / 2))) correct" 240 $np $B/test_gemm_rs ${AR}correct
    done
    export CUDA_VISIBLE_DEVICES=0,1
fi
if [ $tests = 1 ]; then
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-grs CUDA_MPS_LOG_DIRECTORY=/tmp/mps-grs-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        step "1gpu x2 MPS correct" 240 2 $B/test_gemm_rs ${AR}correct
        MK_SM_SPLIT=$OPN:fused=1 step "1gpu x2 MPS correct, all fused" 240 2 $B/test_gemm_rs ${AR}correct
        MK_SM_SPLIT=$OPN:fused=0 step "1gpu x2 MPS correct, all unfused" 240 2 $B/test_gemm_rs ${AR}correct
        step "1gpu x4 MPS correct" 300 4 $B/test_gemm_rs ${AR}correct
        MK_SM_SPLIT=$OPN:fused=1 step "1gpu x4 MPS correct, all fused" 300 4 $B/test_gemm_rs ${AR}correct
        step "1gpu x4 MPS stress" 120 4 $B/test_gemm_rs ${AR}stress
        MK_SM_SPLIT=$OPN:fused=1 step "1gpu x8 MPS correct, all fused" 400 8 $B/test_gemm_rs ${AR}correct 023458
        if [ "$ngpu" -lt 2 ]; then # what the 2-GPU steps would cover
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes (MK_NODE_SIZE=1) correct" 240 2 $B/test_gemm_rs ${AR}correct
            step "1gpu x2 MPS stress 200 calls" 90 2 $B/test_gemm_rs ${AR}stress
            MK_DEBUG=INFO step "1gpu x2 MPS CUDA graph x20" 90 2 $B/test_gemm_rs ${AR}graph
            MK_TIMEOUT_MS=3000 step "1gpu x2 MPS nocall -> timeout" 40 2 $B/test_gemm_rs ${AR}nocall
            step "1gpu x2 MPS bad input" 40 2 $B/test_gemm_rs ${AR}badinput
        fi
        MK_NODE_SIZE=2 MK_TRANSPORT=socket \
            step "1gpu x4 MPS 2x2 (MK_NODE_SIZE=2) correct" 300 4 $B/test_gemm_rs ${AR}correct
        MK_NODE_SIZE=4 MK_TRANSPORT=socket \
            step "1gpu x8 MPS 2x4 (MK_NODE_SIZE=4) correct" 300 8 $B/test_gemm_rs ${AR}correct 2345
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-44s %-7s (nvidia-cuda-mps-control -d failed)\n" "1gpu MPS" SKIP >> "$SUMMARY"
    fi
    unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    grep -E "FAIL|nocall|stress:" "$LOG" | head -30
fi
if [ $bench = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu bench" 240 2 $B/mkbench_gemm_rs $BARG "$@"
fi
# one rank per GPU where there are more than 2 (issue 24: every fused op
# at 4 and 8 ranks, the same shapes)
if [ $bench = 1 ] && [ "$ngpu" -gt 2 ]; then
    CUDA_VISIBLE_DEVICES=$(devs "$ngpu")
    export CUDA_VISIBLE_DEVICES
    step "${ngpu}gpu bench" 240 "$ngpu" $B/mkbench_gemm_rs $BARG "$@" --tag np$ngpu
fi
unset CUDA_VISIBLE_DEVICES
TABLE=$(awk '/^=== .*bench \(np / { hdr = $0; sub(/ \(np .*/, "", hdr); sub(/^=== /, "", hdr) }
    /^mkGemm(ReduceScatter|AllReduce) / { on = 1; print "-- " hdr }
    on && /^results:/ { on = 0; next }
    on { print }' "$LOG")
[ -n "$TABLE" ] && { echo; echo "$TABLE"; } >> "$SUMMARY"
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3 # skipped for time: incomplete
exit $status
