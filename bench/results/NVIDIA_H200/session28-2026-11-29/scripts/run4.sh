#!/bin/bash
# s28 call 4 (one H200): the layer's skewed-routing slowness at 2 ranks under MPS (call 2-3: 314-371 ms
# a call against 10 ms random): with MK_SM_BUDGET 66 (the default), 60 and 32; and a DeepSeek-like
# 4096-token shape.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28c.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SM_BUDGET -x MK_SM_SPLIT"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for bud in 66 60 32; do
  MK_SM_BUDGET=$bud OUT=$W/b$bud timeout 60 $MPI -np 2 $B/mkbench_moe --no-nccl --layer --shapes 4096x4096x8x2 --routing skewed,random --iters 5 --rounds 1 > $W/b$bud.txt 2>&1
  echo "== budget $bud rc=$? $(el)" >> $S; grep -E "top-2 .*[0-9]\.[0-9]{3} " $W/b$bud.txt | head -4 >> $S
done
OUT=$W/bd timeout 90 $MPI -np 2 $B/mkbench_moe --no-nccl --layer --shapes 4096x7168x256x8 --routing skewed,random --iters 5 --rounds 1 > $W/bd.txt 2>&1
echo "== deepseek rc=$? $(el)" >> $S; grep -E "top-8 .*[0-9]\.[0-9]{3} " $W/bd.txt | head -4 >> $S
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
