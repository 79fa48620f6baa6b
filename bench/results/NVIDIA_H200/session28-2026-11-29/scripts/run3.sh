#!/bin/bash
# s28 call 3 (one H200): the combine skips its sums after a recorded error (layeroverflow) and waits
# for a peer's stage once per CTA with paused polls; mkbench's layer gets "mk gemms" (our two grouped
# GEMMs alone).  layeroverflow at 1 and 2 ranks; MPS np2: the skewed slowness again (layer), combine
# A/B against main 8b99301 (s28a), test_moe correct/stress/layer; np1 layer bench with mk gemms.
set -u
T0=$(date +%s)
mkdir -p build-gpu/old && tar xJf build-gpu/s28a.tar.xz -C build-gpu/old && tar xJf build-gpu/s28c.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED -x MK_SM_BUDGET"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
timeout 100 $MPI -np 1 $B/test_moe layeroverflow > $W/t1-lo.txt 2>&1; echo "np1 layeroverflow rc=$? $(el) $(grep -c FAIL $W/t1-lo.txt) FAIL" >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 layeroverflow" "2 correct" "2 stress" "2 layer"; do set -- $t
  timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
OUT=$W/bs-layer timeout 60 $MPI -np 2 $B/mkbench_moe --no-nccl --layer --shapes 4096x4096x8x2 --routing random,skewed --iters 5 --rounds 1 > $W/bs-layer.txt 2>&1
echo "== MPS np2 layer 4096x4096x8x2 rc=$? $(el)" >> $S; grep -E "top-2 .*[0-9]\.[0-9]{3} " $W/bs-layer.txt | head -4 >> $S
for v in old/moe moe; do
  OUT=$W/bc-${v%/moe} timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --series combine --shapes 4096x7168x256x8,4096x4096x8x2 --routing random,skewed --iters 10 --rounds 2 > $W/bc-${v%/*}.txt 2>&1
  echo "== MPS np2 combine $v rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/bc-${v%/*}.txt | head -4 >> $S
done
echo quit | nvidia-cuda-mps-control
OUT=$W/b1 timeout 150 $MPI -np 1 $B/mkbench_moe --no-nccl --layer --rounds 2 --iters 10 > $W/b1-layer.txt 2>&1
echo "== np1 layer bench rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b1-layer.txt | head -8 >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
