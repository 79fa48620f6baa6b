#!/bin/bash
# The inter-node path between two GPUs of one host (mkbench net): two
# ranks on two virtual nodes (MK_NODE_SIZE=1) joined by the socket
# transport over loopback; GPU kernels push FIFO commands, the proxies
# carry them; plain TCP between the same processes as the baseline.
#
#   bash tests/gpu/net.sh build         here (no GPU needed): the library in
#                                       build-gpu/net-build, the program in
#                                       build-gpu/net (the folder to carry)
#   bash tests/gpu/net.sh run [args]    there: mpirun -np 2, one GPU per
#                                       rank (GPUs 0,1), or both ranks on
#                                       GPU 0 under MPS when there is one
#                                       GPU or NET_ONE_GPU=1; args go to
#                                       mkbench net (--help lists them)
#
# The log (net.log) and the JSON (net.json) go to $OUT when set, else
# build-gpu/net/out; the run has a limit of 120 s (NET_LIMIT).
set -u
B=build-gpu/net
what=${1:-run}; shift || true
if [ "$what" = build ]; then
    set -e
    . tests/gpu/build_lib.sh
    gpu_build_lib "$B" build-gpu/net-build
    $NVCC $ARCH -O2 -std=c++17 $INC -DMKB_NET_MAIN tools/mkbench/net.cu tools/mkbench/net_tcp.cu \
        $BLD/mkb_common.o $LIBS -o $B/mkbench_net
    ls -la $B
    exit 0
fi
if [ "$what" != run ]; then
    echo "usage: bash tests/gpu/net.sh build | run [mkbench net args]" >&2
    exit 2
fi
O=${OUT:-$B/out}
mkdir -p "$O"
export OUT=$O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_NODE_SIZE=1 MK_TRANSPORT=socket
export MK_TIMEOUT_MS=${MK_TIMEOUT_MS:-20000} MK_DEBUG=${MK_DEBUG:-WARN}
export MK_SOCKET_NCONN=${MK_SOCKET_NCONN:-4}  # the library's default
LOG=$O/net.log
: > "$LOG"
[ -x $B/mkbench_net ] || { echo "no $B/mkbench_net: run 'bash tests/gpu/net.sh build' first" | tee -a "$LOG"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# MK_GPUS=n: use only the first n GPUs (e.g. the 2-GPU steps on a bigger host).
case ${MK_GPUS:-} in ''|*[!0-9]*) ;; *) [ "$MK_GPUS" -lt "$ngpu" ] && ngpu=$MK_GPUS ;; esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$LOG" 2>&1
mps=0
if [ "$ngpu" -ge 2 ] && [ "${NET_ONE_GPU:-0}" != 1 ]; then
    export CUDA_VISIBLE_DEVICES=0,1
elif [ "$ngpu" -ge 1 ]; then
    # Two kernels that spin must run at once: MPS, not time slicing.
    export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-net \
           CUDA_MPS_LOG_DIRECTORY=/tmp/mps-net-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    nvidia-cuda-mps-control -d >> "$LOG" 2>&1 && mps=1 ||
        echo "nvidia-cuda-mps-control -d failed: both ranks time-slice GPU 0 (slow)" | tee -a "$LOG"
else
    echo "SKIP: no GPU (nvidia-smi lists none)" | tee -a "$LOG"
    exit 77
fi
echo "=== mkbench net, CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES (MPS $mps), MK_SOCKET_NCONN=$MK_SOCKET_NCONN: $*" | tee -a "$LOG"
t0=$(date +%s)
timeout -k 10 "${NET_LIMIT:-120}" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x CUDA_VISIBLE_DEVICES -x OUT \
    -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT \
    -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SOCKET_NCONN \
    $B/mkbench_net "$@" >> "$LOG" 2>&1
rc=$?
res=PASS
[ $rc -ne 0 ] && res=FAIL
{ [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && res=TIMEOUT
left=$(pgrep -f "^(\./)?$B/mkbench_net( |$)" || true)
if [ -n "$left" ]; then
    echo "LEFTOVER processes: $left (killed)" | tee -a "$LOG"
    for p in $left; do kill -9 "$p" 2>/dev/null; done
fi
[ $mps = 1 ] && echo quit | nvidia-cuda-mps-control
sed -n '/^mkbench net: /,$p' "$LOG"
[ $res = PASS ] || tail -40 "$LOG"
printf "%-30s %-7s %4d s (rc %d)\n" "mkbench net" "$res" $(( $(date +%s) - t0 )) $rc
exit $rc
