#!/bin/bash
# s31 call 6 (one H200): v3 of the pre-reduced layer combine (the unpack copies each inbox slot's metadata for the
# combine: call 5 found the peers' next dispatch rewriting the inbox while a combine read it, 8 ranks under MPS):
# test_moe layer at 1 rank and MPS 8 (x3), 4, 2; the soak at 2 and 4.
set -u
T0=$(date +%s)
tar xJf build-gpu/s31b.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED -x MK_NODE_SIZE -x MK_TRANSPORT"
el() { echo "$(( $(date +%s) - T0 )) s"; }
res() { echo "$(grep -c PASS $1) PASS $(grep -c FAIL $1) FAIL"; }
B=build-gpu/moe-pre2
for m in layer; do timeout 100 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "pre2 np1 $m rc=$? $(el) $(res $W/t1-$m.txt)" >> $S; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
MK_SEED=965087 timeout 150 $MPI -np 8 $B/test_moe layer > $W/mps-8-seed.txt 2>&1; echo "pre2 MPS np8 layer seed 965087 rc=$? $(el) $(res $W/mps-8-seed.txt)" >> $S
for t in "8 layer" "8 layer" "8 layer" "4 layer" "2 layer" "2 layergraph" "2 layeroverflow" "2 stress"; do set -- $t
  n=$((${n:-0}+1)); timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2-$n.txt 2>&1; echo "pre2 MPS np$1 $2 rc=$? $(el) $(res $W/mps-$1-$2-$n.txt)" >> $S
done
for np in 2 4; do timeout 60 $MPI -np $np build-gpu/rt-pre2/test_scale soak 25 > $W/soak-$np.txt 2>&1; echo "pre2 MPS np$np soak 25 s rc=$? $(el) $(grep -c FAIL $W/soak-$np.txt) FAIL; $(grep -E 'calls checked' $W/soak-$np.txt | head -1 | cut -c1-120)" >> $S; done
for r in; do for v in; do
  OUT=$W/b-$v$r timeout 120 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== MPS np2 layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-80 >> $S
done; done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
