#!/bin/bash
# mkMoEDispatch, mkMoECombine, mkMoEDispatchGemm and mkMoEDispatchFfnCombine
# on the GPU machine: correctness on 2 GPUs and on 1 GPU with 2, 4 and 8
# ranks under MPS (the dispatch + GEMM cases and the whole expert layer on
# 2 GPUs and on 1 GPU with 2 and 4 ranks; the layer's CUDA graph and
# device-found errors on 1 GPU with 2 ranks too), 100
# back-to-back pairs, a CUDA graph replayed, errors found on the device
# (capacity, expert ids) and on the host, the timeout of a rank that never
# calls, virtual nodes (mkErrUnsupported), and the benchmark (mkbench moe
# against NCCL's all-to-allv with pack and unpack kernels, and for the
# dispatch + GEMM, followed by cuBLAS's grouped GEMM; mkbench moe --layer
# for mkMoEDispatchFfnCombine).
#
#   bash tests/gpu/moe.sh build     here (no GPU needed): the library in
#                                   build-gpu/agg-build (shared with
#                                   ag_gemm.sh and gemm_rs.sh), the programs
#                                   in build-gpu/moe
#   bash tests/gpu/moe.sh [test|test-gpus|bench|all] [mkbench args]   there
#                                   (test-gpus: without the MPS steps)
#
# Logs and JSON go to $OUT when set (else build-gpu/moe/out); each step
# runs under its own timeout, cut to MK_GPU_DEADLINE when set; a summary
# table ends the output.  Exit status: 0 all passed, 1 something failed,
# 3 nothing failed but steps were skipped for time.
set -u
B=${MK_GPU_MOE:-build-gpu/moe}
what=${1:-all}; shift || true
if [ "$what" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B"
    # objects first, then the links: a link that fails (the library without
    # the calls yet) still shows that the sources compile
    $NVCC $ARCH -O2 -std=c++17 $INC -c tests/gpu/test_moe.cu -o $B/test_moe.o
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_MOE_MAIN -c tools/mkbench/moe.cu -o $B/mkbench_moe.o
    $NVCC $ARCH $B/test_moe.o $LIBS -o $B/test_moe
    $NVCC $ARCH $B/mkbench_moe.o $BLD/mkb_common.o $LIBS -o $B/mkbench_moe
    rm -f $B/test_moe.o $B/mkbench_moe.o
    ls -la $B
    exit 0
fi
case $what in
test)  tests=1; bench=0; mps=1 ;;
test-gpus) tests=1; bench=0; mps=0 ;; # the steps on 2 or more GPUs only
bench) tests=0; bench=1; mps=0 ;;
all)   tests=1; bench=1; mps=1 ;;
*) echo "usage: tests/gpu/moe.sh [build|test|test-gpus|bench|all] ..." >&2; exit 2 ;;
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
 -x MK_SEED -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
LOG=$O/moe.log
SUMMARY=$O/moe-summary.txt
: > "$LOG"; : > "$SUMMARY"
PROGS="test_moe|mkbench_moe"
. tests/gpu/steps.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
echo "$ngpu GPUs; moe.sh $what $*" >> "$LOG"
if [ $tests = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu correct (14 cases x 3 dtypes x 4)" 240 2 $B/test_moe correct
    step "2gpu dispatch+gemm" 240 2 $B/test_moe gemm
    step "2gpu stress 100 pairs" 120 2 $B/test_moe stress
    step "2gpu CUDA graph x20" 90 2 $B/test_moe graph
    step "2gpu overflow, bad expert ids" 60 2 $B/test_moe overflow
    step "2gpu bad input" 40 2 $B/test_moe badinput
    step "2gpu layer (13 cases x dtype x transW x 4)" 240 2 $B/test_moe layer
    step "2gpu layer CUDA graph x20" 90 2 $B/test_moe layergraph
    step "2gpu layer overflow, bad expert ids" 60 2 $B/test_moe layeroverflow
    step "2gpu layer bad input" 40 2 $B/test_moe layerbad
    MK_TIMEOUT_MS=3000 step "2gpu nocall -> timeout" 40 2 $B/test_moe nocall
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes (MK_NODE_SIZE=1) correct, gemm, layer" 300 2 $B/test_moe multinode
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes overflow, bad expert ids" 60 2 $B/test_moe overflow
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes layer CUDA graph x20" 120 2 $B/test_moe layergraph
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes stress 100 pairs" 120 2 $B/test_moe stress
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes CUDA graph x20" 120 2 $B/test_moe graph
    MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes combine, bad layout" 60 2 $B/test_moe combinebad
    MK_TIMEOUT_MS=3000 MK_NODE_SIZE=1 MK_TRANSPORT=socket \
        step "2gpu 2 nodes nocall -> timeout" 40 2 $B/test_moe nocall
    for np in 4 8; do
        [ "$ngpu" -ge $np ] || continue
        CUDA_VISIBLE_DEVICES=$(devs $np)
        export CUDA_VISIBLE_DEVICES
        step "${np}gpu correct" 240 $np $B/test_moe correct
        step "${np}gpu stress 100 pairs" 120 $np $B/test_moe stress
        step "${np}gpu layer" 240 $np $B/test_moe layer
        step "${np}gpu layer CUDA graph x20" 90 $np $B/test_moe layergraph
        MK_NODE_SIZE=$((np / 2)) MK_TRANSPORT=socket \
            step "${np}gpu 2x$((np / 2)) nodes correct, gemm, layer" 400 $np $B/test_moe multinode
    done
fi
if [ $tests = 1 ] && [ $mps = 1 ]; then
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-moe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-moe-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        step "1gpu x2 MPS correct" 240 2 $B/test_moe correct
        step "1gpu x2 MPS dispatch+gemm" 240 2 $B/test_moe gemm
        step "1gpu x4 MPS correct" 300 4 $B/test_moe correct
        step "1gpu x4 MPS dispatch+gemm" 300 4 $B/test_moe gemm
        step "1gpu x2 MPS layer" 240 2 $B/test_moe layer
        step "1gpu x4 MPS layer" 300 4 $B/test_moe layer
        # one GPU's ranks share its SMs: the layer's kernels side by side
        step "1gpu x2 MPS layer CUDA graph x20" 90 2 $B/test_moe layergraph
        step "1gpu x2 MPS layer overflow, bad ids" 60 2 $B/test_moe layeroverflow
        step "1gpu x8 MPS correct (cases 0-3,5,7-9,11-13)" 400 8 $B/test_moe correct 0,1,2,3,5,7,8,9,11,12,13
        MK_NODE_SIZE=2 MK_TRANSPORT=socket \
            step "1gpu x4 MPS 2x2 nodes (MK_NODE_SIZE=2) correct, gemm, layer" 400 4 $B/test_moe multinode
        MK_NODE_SIZE=2 MK_TRANSPORT=socket \
            step "1gpu x4 MPS 2x2 nodes combine, bad layout" 90 4 $B/test_moe combinebad
        if [ "$ngpu" -lt 2 ]; then # what the 2-GPU steps would cover
            step "1gpu x2 MPS stress 100 pairs" 120 2 $B/test_moe stress
            step "1gpu x2 MPS CUDA graph x20" 90 2 $B/test_moe graph
            step "1gpu x2 MPS overflow, bad expert ids" 60 2 $B/test_moe overflow
            step "1gpu x2 MPS bad input" 40 2 $B/test_moe badinput
            step "1gpu x2 MPS layer bad input" 40 2 $B/test_moe layerbad
            MK_TIMEOUT_MS=3000 step "1gpu x2 MPS nocall -> timeout" 40 2 $B/test_moe nocall
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes (MK_NODE_SIZE=1) correct, gemm, layer" 300 2 $B/test_moe multinode
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes overflow, bad ids" 60 2 $B/test_moe overflow
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes layer overflow, bad ids" 60 2 $B/test_moe layeroverflow
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes layer CUDA graph x20" 120 2 $B/test_moe layergraph
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes bad input" 60 2 $B/test_moe badinput
            MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes combine, bad layout" 60 2 $B/test_moe combinebad
            MK_TIMEOUT_MS=3000 MK_NODE_SIZE=1 MK_TRANSPORT=socket \
                step "1gpu x2 MPS 2 nodes nocall -> timeout" 40 2 $B/test_moe nocall
        fi
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-44s %-7s (nvidia-cuda-mps-control -d failed)\n" "1gpu MPS" SKIP >> "$SUMMARY"
    fi
    unset CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    grep -E "FAIL|nocall|stress:|graph:|overflow:|multinode" "$LOG" | head -40
fi
if [ $bench = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu bench" 300 2 $B/mkbench_moe "$@"
    step "2gpu bench layer" 400 2 $B/mkbench_moe --layer --tag layer "$@"
fi
if [ $bench = 1 ] && [ "$ngpu" -gt 2 ]; then
    CUDA_VISIBLE_DEVICES=$(devs "$ngpu")
    export CUDA_VISIBLE_DEVICES
    step "${ngpu}gpu bench" 300 "$ngpu" $B/mkbench_moe "$@" --tag np$ngpu
fi
# Each benchmark's table under the name of its step.
TABLE=$(awk '/^=== .*bench \(np / { hdr = $0; sub(/ \(np .*/, "", hdr); sub(/^=== /, "", hdr) }
    /^mkMoEDispatch / { on = 1; print "-- " hdr }
    on && /^results:/ { on = 0; next }
    on { print }' "$LOG")
[ -n "$TABLE" ] && { echo; echo "$TABLE"; } >> "$SUMMARY"
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3 # skipped for time: incomplete
exit $status
