#!/bin/bash
# s27 call 4 (issue 19, one H200): the one-kernel mkMoEDispatchGemm, lab variant (GEMM producers poll their
# expert's row count with a 256 ns pause; a quarter of the CTAs dispatch instead of an eighth) against call 3's
# build and HEAD's two launches; 1 rank, then 2 ranks under MPS; dgemm series, DeepSeek-like shapes.
set -u
T0=$(date +%s)
tar xJf build-gpu/s27d.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
SH="--shapes 4096x7168x256x8,16384x7168x256x8 --routing random,skewed --series dgemm --rounds 2"
for r in 1 2; do for v in moebase moelab moe; do
  OUT=$W/b1-$v$r timeout 80 $MPI -np 1 build-gpu/$v/mkbench_moe $SH > $W/b1-$v$r.txt 2>&1
  echo "== np1 $v round $r rc=$? $(( $(date +%s) - T0 )) s" >> $S; grep -E "top-8 .* [0-9]+\.[0-9]+ " $W/b1-$v$r.txt | grep -v " - " | head -6 >> $S
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
SH2="--shapes 4096x7168x256x8 --routing random,skewed --series dgemm --rounds 2"
for r in 1 2; do for v in moebase moelab; do
  OUT=$W/b2-$v$r timeout 80 $MPI -np 2 build-gpu/$v/mkbench_moe $SH2 > $W/b2-$v$r.txt 2>&1
  echo "== np2 MPS $v round $r rc=$? $(( $(date +%s) - T0 )) s" >> $S; grep -E "top-8 .* [0-9]+\.[0-9]+ " $W/b2-$v$r.txt | grep -v " - " | head -4 >> $S
done; done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
