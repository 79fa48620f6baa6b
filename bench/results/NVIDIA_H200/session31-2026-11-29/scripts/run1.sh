#!/bin/bash
# s31 call 1 (one H200): main 62d3f88's MoE programs (moe-main: first GPU run of that commit) and the pre-reduced
# layer combine (moe-pre, branch wip-precomb): test_moe layer modes at 1 rank, MPS 2 / 4; the soak's layer at 2 (pre);
# mkbench moe --layer --no-nccl under MPS 2 ranks, main / pre (/ lc: the one-launch combine, if built) in turns.
set -u
T0=$(date +%s)
tar xJf build-gpu/s31a.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED -x MK_NODE_SIZE -x MK_TRANSPORT"
el() { echo "$(( $(date +%s) - T0 )) s"; }
res() { echo "$(grep -c PASS $1) PASS $(grep -c FAIL $1) FAIL"; }
for v in moe-main moe-pre; do for m in layer layergraph layeroverflow layerbad; do
  timeout 100 $MPI -np 1 build-gpu/$v/test_moe $m > $W/$v-t1-$m.txt 2>&1; echo "$v np1 $m rc=$? $(el) $(res $W/$v-t1-$m.txt)" >> $S; done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "moe-main 2 layer" "moe-main 4 layer" "moe-pre 2 layer" "moe-pre 2 layer" "moe-pre 2 layergraph" "moe-pre 2 layeroverflow" "moe-pre 2 layerbad" "moe-pre 4 layer" "moe-pre 4 layer" "moe-pre 2 correct" "moe-pre 8 layer"; do set -- $t
  timeout 150 $MPI -np $2 build-gpu/$1/test_moe $3 > $W/$1-mps-$2-$3.txt 2>&1; echo "$1 MPS np$2 $3 rc=$? $(el) $(res $W/$1-mps-$2-$3.txt)" >> $S
done
B="moe-main moe-pre"; [ -x build-gpu/lc/mkbench_moe ] && B="$B lc"
for r in 1 2; do for v in $B; do
  OUT=$W/b-$v$r timeout 120 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== MPS np2 layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-80 >> $S
done; done
[ -x build-gpu/rt-pre/test_scale ] && { timeout 60 $MPI -np 2 build-gpu/rt-pre/test_scale soak 30 > $W/soak-2.txt 2>&1; echo "pre MPS np2 soak 30 s rc=$? $(el) $(grep -c FAIL $W/soak-2.txt) FAIL; $(grep -E 'calls checked' $W/soak-2.txt | head -1 | cut -c1-120)" >> $S; }
if [ -x build-gpu/lc/test_moe ]; then for t in "1 layer" "2 layer" "2 layergraph" "4 layer"; do set -- $t
  timeout 120 $MPI -np $1 build-gpu/lc/test_moe $2 > $W/lc-$1-$2.txt 2>&1; echo "lc MPS np$1 $2 rc=$? $(el) $(res $W/lc-$1-$2.txt)" >> $S; done; fi
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
