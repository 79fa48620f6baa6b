#!/bin/bash
# s31 call 8 (one H200; 2 x H200 no longer lent): the combine's sums with eight loads in flight per lane (moe-mlp:
# main + that; moe-pre3: the pre-reduced layer combine + that) against main 62d3f88 under MPS at 2 ranks:
# mkbench moe --layer --no-nccl in turns; the standalone combine (--series combine, NCCL in the same run) main / mlp;
# test_moe layer and correct (mlp, pre3) at MPS 2 and layer at 4.
set -u
T0=$(date +%s)
tar xJf build-gpu/s31c.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SEED -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
el() { echo "$(( $(date +%s) - T0 )) s"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for v in moe-main moe-mlp moe-pre3 moe-main moe-mlp moe-pre3; do
  OUT=$W/b-$v timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v.txt 2>&1
  echo "== MPS np2 layer $v rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v.txt | head -6 | cut -c1-90 >> $S
done
for v in moe-main moe-mlp; do
  OUT=$W/c-$v timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --series combine --rounds 1 --iters 10 > $W/c-$v.txt 2>&1
  echo "== MPS np2 combine $v rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/c-$v.txt | head -6 | cut -c1-150 >> $S
done
for t in "moe-mlp 2 layer" "moe-mlp 2 correct" "moe-mlp 4 layer" "moe-pre3 2 layer" "moe-pre3 2 correct"; do set -- $t
  timeout 60 $MPI -np $2 build-gpu/$1/test_moe $3 > $W/t-$1-$2-$3.txt 2>&1; echo "$1 MPS np$2 $3 rc=$? $(el) $(grep -c PASS $W/t-$1-$2-$3.txt) PASS $(grep -c FAIL $W/t-$1-$2-$3.txt) FAIL" >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
