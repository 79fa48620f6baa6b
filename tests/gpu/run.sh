#!/bin/bash
# Every GPU test and benchmark of the device runtime and the collectives,
# on the lent GPU machine, from the binaries tests/gpu/coll_build.sh left in
# build-gpu/rt (nothing is built here; MK_GPU_RT names another folder).
# Logs, JSON and the plot go to $OUT when set (else build-gpu/rt/out); a
# short table ends the output.
#
#   bash tests/gpu/run.sh [quick|full] [tests|bench|all|scale]
#
# quick: sizes up to 16 MB per rank; full: up to 1 GB (256 MB at 4 and 8
# ranks).  tests: correctness on 2 GPUs, on 1 GPU under MPS, and, where
# there are GPUs for them, at 4 and 8 ranks and on virtual nodes
# (MK_NODE_SIZE, socket transport); on one node also with registered buffers
# (zero copy, MKT_ZCOPY); bench: mkbench coll at 2 ranks (with
# its CTA sweep and MK_COLL_MOVER=tma, and again with --zcopy) and at one
# rank per GPU (with and without zero copy), on one
# node and on 2 virtual nodes; all: both; scale: only what needs more than
# 2 GPUs or virtual nodes (the 4- and 8-rank steps, the virtual-node
# steps, the benchmarks at one rank per GPU).
#
# Every step has its own timeout, cut to what is left before
# MK_GPU_DEADLINE (epoch seconds; tests/gpu/all.sh sets it) and skipped,
# saying so, when under 10 s is left (exit 3 then, if nothing failed).
# MPS is started for the several-ranks-per-GPU steps and stopped in this
# script; leftover test processes are reported and killed.  Output: tests.log (every step),
# bench.log (every benchmark, one section each), summary.txt (one line a
# step, then bus bandwidth ours/NCCL per run), coll*.json, coll.png.
set -u
B=${MK_GPU_RT:-build-gpu/rt}
O=${OUT:-$B/out}
mkdir -p "$O"
mode=${1:-full}
what=${2:-all}
case $mode in quick|full) ;; *) echo "usage: tests/gpu/run.sh [quick|full] [tests|bench|all|scale]" >&2; exit 2 ;; esac
case $what in tests|bench|all|scale) ;; *) echo "usage: tests/gpu/run.sh [quick|full] [tests|bench|all|scale]" >&2; exit 2 ;; esac
# Which groups run: the 2-rank steps (base) and the new ones (scale).
base_tests=0; scale_tests=0; base_bench=0; scale_bench=0
case $what in
tests) base_tests=1; scale_tests=1 ;;
bench) base_bench=1; scale_bench=1 ;;
all)   base_tests=1; scale_tests=1; base_bench=1; scale_bench=1 ;;
scale) scale_tests=1; scale_bench=1 ;;
esac
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_MODULE_LOADING=EAGER
# Node layout is set per step (MK_NODE_SIZE=k MK_TRANSPORT=socket step ...),
# never inherited from the caller.
unset MK_NODE_SIZE MK_TRANSPORT
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MKT_NO_NCCL -x MK_COLL_CTAS \
 -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SM_BUDGET \
 -x MK_TIMEOUT_MS"
# -x for the optional variables that are set (the virtual-node steps).
xopt() {
    local v
    for v in MK_NODE_SIZE MK_TRANSPORT MK_SOCKET_IFNAME MKT_ZCOPY MK_COLL_ZCOPY_MIN MK_COLL_MOVER MK_COLL_HIER_MIN MK_COLL_LL_MAX; do
        [ -n "${!v:-}" ] && printf ' -x %s' "$v"
    done
}
# "MK_NODE_SIZE=2 MK_TRANSPORT=socket " when set, for the logs.
layout() {
    local v s=""
    for v in MK_NODE_SIZE MK_TRANSPORT MKT_ZCOPY MK_COLL_ZCOPY_MIN MK_COLL_MOVER MK_COLL_HIER_MIN; do
        [ -n "${!v:-}" ] && s="$s$v=${!v} "
    done
    printf '%s' "$s"
}
# A device wait that never ends would cost the whole step: 20 s is plenty.
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000}
export MK_DEBUG=${MK_DEBUG:-WARN} MKT_NO_NCCL=${MKT_NO_NCCL:-} MK_COLL_CTAS=${MK_COLL_CTAS:-0}
export MK_SM_BUDGET=${MK_SM_BUDGET:-0}
# MK_COLL_MOVER stays unset unless a step (or the caller) sets it: the
# library then picks tma-send through the workspace, reg for zero copy.
[ -z "${MK_COLL_MOVER:-}" ] && unset MK_COLL_MOVER
[ "$mode" = full ] && MAXB=$((1 << 30)) || MAXB=$((16 << 20))
# 4 and 8 ranks: at most 256 MB per rank (the step stays short).
NMAXB=$MAXB
[ $NMAXB -gt $((256 << 20)) ] && NMAXB=$((256 << 20))
# Virtual nodes: the socket path moves about 6 GB/s.
VMAXB=$((16 << 20))
LOG=$O/tests.log
: > "$LOG"
BLOG=$O/bench.log
: > "$BLOG"
SUMMARY=$O/summary.txt
: > "$SUMMARY"
status=0 late=0
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"
nvidia-smi topo -m 2>/dev/null | head -10 >> "$LOG"
echo "$ngpu GPUs; run.sh $mode $what" >> "$LOG"

# limit_of WANT: WANT seconds, or what is left before MK_GPU_DEADLINE.
limit_of() {
    local want=$1 left
    if [ -n "${MK_GPU_DEADLINE:-}" ]; then
        left=$((MK_GPU_DEADLINE - $(date +%s)))
        [ "$left" -lt "$want" ] && want=$left
    fi
    echo "$want"
}
skip_late() { # NAME: the run is incomplete (exit 3 if nothing failed)
    late=1
    printf "%-42s %-7s (out of time: under 10 s left before MK_GPU_DEADLINE)\n" "$1" SKIP >> "$SUMMARY"
    echo "--- $1: SKIP (out of time)" >> "$LOG"
}

# run_step FILE OKWORD NAME LIMIT_S NP ARGS...: one mpirun under its own
# timeout, its output appended to FILE after a line "=== NAME (np ...)";
# one line of the summary (OKWORD when it exits 0).
run_step() {
    local file=$1 ok=$2 name=$3 limit np=$5 t0 rc dt res
    limit=$(limit_of "$4")
    shift 5
    if [ "$limit" -lt 10 ]; then skip_late "$name"; return; fi
    t0=$(date +%s.%N)
    echo "=== $name (np $np, limit ${limit}s, $(layout)CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}): $*" >> "$file"
    # $(xopt) unquoted: it is zero or more "-x VAR" words.
    # shellcheck disable=SC2046
    timeout -k 10 "$limit" $MPI $(xopt) -np "$np" "$@" >> "$file" 2>&1
    rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    res=$ok
    [ $rc -ne 0 ] && res=FAIL && status=1
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
    printf "%-42s %-7s %6.1f s  (rc %d)\n" "$name" $res "$dt" $rc >> "$SUMMARY"
    echo "--- $name: $res rc $rc ${dt}s" >> "$file"
    leftovers "$name"
}
# step NAME LIMIT_S NP ARGS...: a test, in tests.log.
step() { run_step "$LOG" PASS "$@"; }
# bench LABEL[ (NOTE)] LIMIT_S NP TAG ARGS...: mkbench coll, in bench.log
# under "=== bench LABEL" (LABEL names the column of the bandwidth table);
# JSON coll-TAG.json (coll.json without TAG).
bench() {
    local name=$1 limit=$2 np=$3 tag=$4
    shift 4
    OUT=$O run_step "$BLOG" DONE "bench $name" "$limit" "$np" -x OUT $B/mkbench_coll "$@" \
        ${tag:+--tag "$tag"}
}

# A test must never leave a process behind: report and end each by pid.
leftovers() {
    local pids
    pids=$(pgrep -f "^(\./)?$B/(test_coll|mkbench_coll)( |$)" || true)
    if [ -n "$pids" ]; then
        echo "LEFTOVER after $1: $pids" | tee -a "$SUMMARY" >> "$LOG"
        status=1
        for p in $pids; do kill -9 "$p" 2>/dev/null; done
    fi
}
devs() { seq -s, 0 $(($1 - 1)); } # devs 4 -> 0,1,2,3

if [ $base_tests = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    step "2gpu correct" 150 2 $B/test_coll correct $MAXB
    export MK_COLL_MOVER=reg
    step "2gpu correct, register stores" 90 2 $B/test_coll correct $((16 << 20))
    export MK_COLL_MOVER=tma
    step "2gpu correct, TMA for local copies too" 90 2 $B/test_coll correct $((16 << 20))
    unset MK_COLL_MOVER
    step "2gpu stress (1000 calls)" 60 2 $B/test_coll stress
    # LL lines (small blocks) with channels that get no part of a block,
    # and the slots for every size
    MK_COLL_CTAS=64 step "2gpu LL, 64 channels (MK_COLL_CTAS) correct" 90 2 $B/test_coll correct \
        $((1 << 20))
    MK_COLL_LL_MAX=0 step "2gpu no LL (MK_COLL_LL_MAX=0) correct" 90 2 $B/test_coll correct \
        $((1 << 20))
    step "2gpu graph" 60 2 $B/test_coll graph
    step "2gpu all-reduce: same bits on every rank" 60 2 $B/test_coll bits
    step "2gpu badargs" 60 2 $B/test_coll badargs
    step "2gpu fault: rank never calls" 60 2 $B/test_coll nocall
    step "2gpu fault: mkCommAbort" 60 2 $B/test_coll abort
    # Zero copy: registered buffers, every size through it (ZCOPY_MIN=1),
    # then the default threshold (stress mixes sizes on both sides of it).
    MKT_ZCOPY=alloc MK_COLL_ZCOPY_MIN=1 \
        step "2gpu zero copy (mkMemAlloc) correct" 120 2 $B/test_coll correct $((256 << 20))
    MKT_ZCOPY=register step "2gpu zero copy (mkCommRegister) stress" 60 2 $B/test_coll stress
    MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 step "2gpu zero copy graph" 60 2 $B/test_coll graph
    # All-reduce goes zero copy only with register stores (not the default).
    MK_COLL_MOVER=reg MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 \
        step "2gpu zero copy, register stores (all-reduce too)" 90 2 $B/test_coll correct $((64 << 20))
    MK_COLL_MOVER=reg MKT_ZCOPY=alloc MK_COLL_ZCOPY_MIN=1 \
        step "2gpu zero copy all-reduce: same bits" 60 2 $B/test_coll bits
fi
if [ $scale_tests = 1 ]; then
    if [ "$ngpu" -ge 2 ]; then
        export CUDA_VISIBLE_DEVICES=0,1
        MK_NODE_SIZE=1 MK_TRANSPORT=socket \
            step "2gpu 2 nodes (MK_NODE_SIZE=1) correct" 90 2 $B/test_coll correct $VMAXB
    fi
    for np in 4 8; do
        [ "$ngpu" -ge $np ] || continue
        CUDA_VISIBLE_DEVICES=$(devs $np)
        export CUDA_VISIBLE_DEVICES
        step "${np}gpu correct" 120 $np $B/test_coll correct $NMAXB
        # all-gather / all-to-all peer after peer with TMA receiving too
        MK_COLL_MOVER=tma step "${np}gpu correct, TMA for local copies too" 120 $np \
            $B/test_coll correct $((16 << 20))
        step "${np}gpu stress (1000 calls)" 60 $np $B/test_coll stress
        step "${np}gpu graph" 60 $np $B/test_coll graph
        step "${np}gpu all-reduce: same bits on every rank" 60 $np $B/test_coll bits
        step "${np}gpu fault: rank never calls" 60 $np $B/test_coll nocall
        MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 \
            step "${np}gpu zero copy (odd ranks not registered) correct" 120 $np \
            $B/test_coll correct $((64 << 20))
        MKT_ZCOPY=alloc step "${np}gpu zero copy stress" 60 $np $B/test_coll stress
        MK_COLL_MOVER=reg MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 \
            step "${np}gpu zero copy, register stores (all-reduce too)" 90 $np \
            $B/test_coll correct $((64 << 20))
        h=$((np / 2))
        MK_NODE_SIZE=$h MK_TRANSPORT=socket \
            step "${np}gpu 2x$h (MK_NODE_SIZE=$h) correct" 90 $np $B/test_coll correct $VMAXB
        # all-reduce hierarchically at every count (>= ranks per node), and
        # flat at every count
        MK_NODE_SIZE=$h MK_TRANSPORT=socket MK_COLL_HIER_MIN=1 \
            step "${np}gpu 2x$h hierarchical (MK_COLL_HIER_MIN=1) correct" 90 $np \
            $B/test_coll correct $VMAXB
        MK_NODE_SIZE=$h MK_TRANSPORT=socket MK_COLL_HIER_MIN=0 \
            step "${np}gpu 2x$h flat (MK_COLL_HIER_MIN=0) correct" 90 $np \
            $B/test_coll correct $VMAXB
    done
fi
if [ $base_tests = 1 ] || [ $scale_tests = 1 ]; then
    # Several ranks on one GPU: MPS, started and stopped here.
    export CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    if nvidia-cuda-mps-control -d >> "$LOG" 2>&1; then
        [ "$mode" = full ] && MB2=$((256 << 20)) || MB2=$((1 << 20))
        if [ $base_tests = 1 ]; then
            step "1gpu x2 MPS correct" 90 2 $B/test_coll correct $MB2
            step "1gpu x4 MPS correct" 90 4 $B/test_coll correct $MB2
            step "1gpu x4 MPS stress" 60 4 $B/test_coll stress
            MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 \
                step "1gpu x4 MPS zero copy (mixed) correct" 90 4 $B/test_coll correct $MB2
            step "1gpu x2 MPS fault: never calls" 60 2 $B/test_coll nocall
        fi
        if [ $scale_tests = 1 ]; then
            MK_NODE_SIZE=2 MK_TRANSPORT=socket \
                step "1gpu x4 MPS 2x2 (MK_NODE_SIZE=2) correct" 90 4 $B/test_coll correct \
                $((MB2 < VMAXB ? MB2 : VMAXB))
            MK_NODE_SIZE=2 MK_TRANSPORT=socket MK_COLL_HIER_MIN=1 \
                step "1gpu x4 MPS 2x2 hierarchical (MK_COLL_HIER_MIN=1) correct" 90 4 \
                $B/test_coll correct $((MB2 < VMAXB ? MB2 : VMAXB))
            MK_NODE_SIZE=2 MK_TRANSPORT=socket MK_COLL_HIER_MIN=1 \
                step "1gpu x4 MPS 2x2 hierarchical stress" 60 4 $B/test_coll stress
        fi
        echo quit | nvidia-cuda-mps-control
        sleep 1
    else
        printf "%-42s %-7s (nvidia-cuda-mps-control -d failed)\n" "1gpu MPS" SKIP >> "$SUMMARY"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    export MKT_NO_NCCL=
fi

if [ $base_bench = 1 ] && [ "$ngpu" -ge 2 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
    if [ "$mode" = full ]; then
        BARGS="--min 1M --max 1G --iters 20"
    else
        BARGS="--min 1M --max 256M --iters 10"
    fi
    bench "np2 (with the CTA sweep)" 150 2 "" $BARGS --sweep
    bench "np2-zc (zero copy, with the CTA sweep)" 150 2 zc $BARGS --sweep --zcopy
    # The same table with TMA for the local copies too.
    MK_COLL_MOVER=tma bench "np2-tma (MK_COLL_MOVER=tma)" 100 2 tma $BARGS
    if [ -f "$O/coll.json" ]; then
        python3 tests/gpu/coll_plot.py "$O/coll.json" "$O/coll.png" >> "$LOG" 2>&1 ||
            echo "plot failed" >> "$SUMMARY"
    fi
fi
if [ $scale_bench = 1 ] && [ "$ngpu" -gt 2 ]; then
    # One rank per GPU, on one node and on 2 virtual nodes.
    CUDA_VISIBLE_DEVICES=$(devs "$ngpu")
    export CUDA_VISIBLE_DEVICES
    if [ "$mode" = full ]; then
        NBARGS="--min 1M --max 1G --iters 20"
    else
        NBARGS="--min 1M --max 256M --iters 10"
    fi
    bench "np$ngpu" 150 "$ngpu" np$ngpu $NBARGS
    bench "np$ngpu-zc (zero copy)" 150 "$ngpu" np$ngpu-zc $NBARGS --op ag,a2a --zcopy
    if [ $((ngpu % 2)) = 0 ]; then
        h=$((ngpu / 2))
        MK_NODE_SIZE=$h MK_TRANSPORT=socket bench "np$ngpu-2x$h (MK_NODE_SIZE=$h)" 120 "$ngpu" \
            np$ngpu-2x$h --min 1M --max 64M --iters 10
        # flat against hierarchical (the default from 1 MiB)
        MK_COLL_HIER_MIN=0 MK_NODE_SIZE=$h MK_TRANSPORT=socket \
            bench "np$ngpu-2x$h-flat (MK_COLL_HIER_MIN=0)" 120 "$ngpu" np$ngpu-2x$h-flat \
            --op ag,rs,ar --min 1M --max 64M --iters 10
    fi
fi

# Bus bandwidth (GB/s) ours/NCCL, one column a benchmark run of bench.log;
# the CTA sweep rows have ours only.
bench_table() {
    awk '
    function human(b) {
        if (b >= 1073741824 && b % 1073741824 == 0) return b / 1073741824 "G"
        if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 "M"
        if (b >= 1024 && b % 1024 == 0) return b / 1024 "K"
        return b
    }
    /^=== bench / { tag = $3; if (!(tag in seen)) { seen[tag] = 1; tags[++nt] = tag }; next }
    NF == 9 && $3 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ && tag != "" {
        sw = $1 ~ /_ctas_/
        key = sw ? $1 " " human($3) " " $4 "cta" : $1 " " human($3)
        if (!(key in kseen)) { kseen[key] = 1; keys[++nk] = key }
        cell[key, tag] = sw ? sprintf("%.0f", $8) : sprintf("%.0f/%.0f", $8, $9)
    }
    END {
        if (nk == 0) exit
        printf "%-36s", "busbw GB/s ours/NCCL"
        for (t = 1; t <= nt; t++) printf " %11s", tags[t]
        printf "\n"
        for (k = 1; k <= nk; k++) {
            printf "%-36s", keys[k]
            for (t = 1; t <= nt; t++) {
                c = cell[keys[k], tags[t]]
                printf " %11s", c == "" ? "-" : c
            }
            printf "\n"
        }
    }' "$BLOG"
}

echo
grep -E "^(FAIL|PASS)" "$LOG" | grep -c "^PASS" | sed 's/^/checks passed: /'
grep -E "^FAIL" "$LOG" | head -20
TABLE=$(bench_table)
if [ -n "$TABLE" ]; then
    { echo; echo "$TABLE"; } >> "$SUMMARY"
    echo "(full tables: $BLOG)"
fi
echo
cat "$SUMMARY"
[ $status = 0 ] && [ $late = 1 ] && status=3
exit $status
