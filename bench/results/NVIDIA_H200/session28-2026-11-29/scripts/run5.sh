#!/bin/bash
# s28 call 5 (one H200): where the layer's skewed calls at 2 ranks under MPS spend 300 ms: nsys's
# kernel trace of each rank (if nsys is there), and the same run with CUDA_LAUNCH_BLOCKING=1.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28c.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x CUDA_LAUNCH_BLOCKING"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}" >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
ARGS="--no-nccl --layer --shapes 4096x4096x8x2 --routing skewed --iters 5 --rounds 1"
CUDA_LAUNCH_BLOCKING=1 OUT=$W/blk timeout 90 $MPI -np 2 $B/mkbench_moe $ARGS > $W/blk.txt 2>&1
echo "== launch blocking rc=$? $(el)" >> $S; grep -E "top-2 .*[0-9]\.[0-9]{3} " $W/blk.txt | head -2 >> $S
if [ -n "$NSYS" ]; then
  OUT=$W/ns timeout 150 $MPI -np 2 $NSYS profile -t cuda --cuda-graph-trace=node -o $W/rank%q{OMPI_COMM_WORLD_RANK} -f true $B/mkbench_moe $ARGS > $W/ns.txt 2>&1
  echo "== nsys rc=$? $(el)" >> $S
  for r in 0 1; do
    [ -f $W/rank$r.nsys-rep ] || continue
    timeout 60 $NSYS stats -r cuda_gpu_trace -f csv -o $W/trace$r $W/rank$r.nsys-rep > /dev/null 2>&1
    f=$(ls $W/trace${r}*.csv 2>/dev/null | head -1)
    [ -n "$f" ] && python3 - "$f" $r >> $S <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
# the last 12 kernels of the run, start relative to the first of them, duration, name
ks = [r for r in rows if r.get('Name') and 'memcpy' not in r['Name'].lower() and 'memset' not in r['Name'].lower()]
ks = ks[-14:]
t0 = int(ks[0]['Start (ns)'])
print("rank", sys.argv[2])
for r in ks:
    print("  %9.3f ms  %9.3f ms  %s" % ((int(r['Start (ns)']) - t0) / 1e6, int(r['Duration (ns)']) / 1e6, r['Name'][:60]))
PY
  done
  rm -f $W/*.sqlite
fi
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && rm -f *.nsys-rep && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
