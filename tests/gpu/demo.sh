#!/bin/bash
# The Quick start's demo (examples/demo.c) on the GPU machine: the
# communicator, then mkAllGatherGemm against mkAllGather + cuBLAS on a few
# bf16 shapes, verified, with rank 0's table.
#
#   bash tests/gpu/demo.sh build   here (no GPU needed): the library in
#                                  $LIBBUILD (default build-gpu/demo-build;
#                                  an existing build such as
#                                  build-gpu/agg-build works too), the demo
#                                  linked statically against its
#                                  libmkcore.a into build-gpu/demo/demo
#   bash tests/gpu/demo.sh [run]   there, from build-gpu/demo (carry it):
#                                  one rank per GPU, then 2 ranks (on 2
#                                  GPUs, or on 1 GPU under MPS); the same
#                                  for the Fortran GPU example
#                                  (examples/gpu_f.f90, build-gpu/demo/gpu_f)
#
# Logs go to $OUT when set (else build-gpu/demo/out): demo.log (all
# output) and demo-summary.txt (one line per step, printed last).
set -u
B=build-gpu/demo
what=${1:-run}
if [ "$what" = build ]; then
    set -e
    LIBBUILD=${LIBBUILD:-build-gpu/demo-build}
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
    mkdir -p "$LIBBUILD" "$B"
    top=$(pwd)
    [ -f "$LIBBUILD/Makefile" ] || (cd "$LIBBUILD" && "$top/configure" -q)
    make -C "$LIBBUILD" -j"${JOBS:-2}" libmkcore.la > "$B/build.log" 2>&1 ||
        { tail -30 "$B/build.log"; exit 1; }
    # The libraries libmkcore.a needs, as configure found them.
    deps=$(sed -n "s/^dependency_libs='\(.*\)'$/\1/p" "$LIBBUILD/libmkcore.la")
    gcc -std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -Iinclude \
        -I"$CUDA_HOME/include" -c examples/demo.c -o "$B/demo.o"
    gcc "$B/demo.o" "$LIBBUILD/.libs/libmkcore.a" -L"$CUDA_HOME/lib64" -lcublas \
        $deps -lm -o "$B/demo"
    rm -f "$B/demo.o"
    # The Fortran GPU example (examples/gpu_f.f90), where there is gfortran.
    if command -v gfortran >/dev/null; then
        gfortran -O2 -J"$B" -c src/fortran/mkernel.f90 -o "$B/mkernel_f.o"
        gfortran -O2 -I"$B" examples/gpu_f.f90 "$B/mkernel_f.o" -o "$B/gpu_f" \
            "$LIBBUILD/.libs/libmkcore.a" -L"$CUDA_HOME/lib64" $deps -lstdc++ -lm
        rm -f "$B/mkernel_f.o" "$B/mkernel.mod"
    fi
    ls -la "$B"
    exit 0
fi
if [ "$what" != run ]; then
    echo "usage: bash tests/gpu/demo.sh [build|run]" >&2
    exit 2
fi
if [ ! -x "$B/demo" ]; then
    echo "demo.sh: no $B/demo: run 'bash tests/gpu/demo.sh build' and carry $B" >&2
    exit 1
fi
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY \
 -x CUDA_MPS_LOG_DIRECTORY"
LOG=$O/demo.log
SUMMARY=$O/demo-summary.txt
: > "$LOG"; : > "$SUMMARY"
status=0
step() { # NAME NP [PROGRAM, default demo]
    local name=$1 np=$2 prog=${3:-demo} t0=$(date +%s) rc res=PASS
    echo "=== $name: mpirun -np $np $B/$prog" >> "$LOG"
    timeout -k 10 240 $MPI -np "$np" "$B/$prog" >> "$LOG" 2>&1
    rc=$?
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-28s %-7s %4d s (rc %d)\n" "$name" "$res" $(( $(date +%s) - t0 )) $rc >> "$SUMMARY"
    local left p
    left=$(pgrep -f "^(\./)?$B/(demo|gpu_f)( |$)" || true)
    for p in $left; do
        echo "LEFTOVER after $name: $p" >> "$SUMMARY"
        kill -9 "$p" 2>/dev/null
    done
}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
if [ "$ngpu" -lt 1 ]; then
    echo "demo.sh: nvidia-smi sees no GPU here" | tee -a "$SUMMARY"
    exit 1
fi
step "demo, 1 rank per GPU" "$ngpu"
[ -x "$B/gpu_f" ] && step "Fortran gpu_f, 1 rank per GPU" "$ngpu" gpu_f
if [ "$ngpu" -gt 2 ]; then
    step "demo, 2 ranks on 2 GPUs" 2
elif [ "$ngpu" -eq 1 ]; then
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-demo \
        CUDA_MPS_LOG_DIRECTORY=/tmp/mps-demo-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        step "demo, 2 ranks on 1 GPU (MPS)" 2
        [ -x "$B/gpu_f" ] && step "Fortran gpu_f, 2 ranks on 1 GPU (MPS)" 2 gpu_f
        echo quit | nvidia-cuda-mps-control
    else
        printf "%-28s SKIP    (nvidia-cuda-mps-control -d failed)\n" \
            "demo, 2 ranks on 1 GPU (MPS)" >> "$SUMMARY"
    fi
fi
grep -E -v '^(rank [0-9]+: local rank|===)' "$LOG" | tail -60
cat "$SUMMARY"
exit $status
