#!/bin/bash
# s28 call 7 (one H200): the combine's wait for a peer's stage by one polling thread per CTA (the
# others watch shared memory): the layer's skewed calls at 2 ranks under MPS (323 ms before); the
# MoE tests the combine is in (correct, stress, layer, layeroverflow, graph) at 1 and 2 ranks.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28e.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
timeout 100 $MPI -np 1 $B/test_moe correct > $W/t1-correct.txt 2>&1; echo "np1 correct rc=$? $(el) $(grep -c FAIL $W/t1-correct.txt) FAIL" >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
OUT=$W/bs timeout 90 $MPI -np 2 $B/mkbench_moe --no-nccl --layer --shapes 4096x4096x8x2,4096x7168x256x8 --routing skewed,random --iters 5 --rounds 1 > $W/bs.txt 2>&1
echo "== MPS np2 layer rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/bs.txt | head -4 >> $S
for t in "2 correct" "2 stress" "2 layer" "2 layeroverflow" "2 layergraph" "4 correct" "4 layer"; do set -- $t
  timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
OUT=$W/bc timeout 60 $MPI -np 2 $B/mkbench_moe --no-nccl --series combine --shapes 4096x7168x256x8,4096x4096x8x2 --routing random,skewed --iters 10 --rounds 2 > $W/bc.txt 2>&1
echo "== MPS np2 combine rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/bc.txt | head -4 >> $S
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
