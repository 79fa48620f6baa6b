#!/bin/bash
# s28 call 6 (one H200, lab builds of src/ops/moe.c, not landed): which launch of the layer makes its
# skewed calls at 2 ranks under MPS slow: lab 1 without the combine, 2 without the down projection,
# 3 the first kernel alone; then the whole layer.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28c.tar.xz -C build-gpu; tar xJf build-gpu/s28d.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
el() { echo "$(( $(date +%s) - T0 )) s"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
ARGS="--no-nccl --layer --shapes 4096x4096x8x2 --routing skewed,random --iters 5 --rounds 1"
for v in lab/mkbench_moe1 lab/mkbench_moe2 lab/mkbench_moe3 moe/mkbench_moe; do
  OUT=$W/o timeout 60 $MPI -np 2 build-gpu/$v $ARGS > $W/$(basename $v).txt 2>&1
  echo "== $v rc=$? $(el)" >> $S; grep -E "top-2 .*[0-9]\.[0-9]{3} " $W/$(basename $v).txt | head -2 >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
