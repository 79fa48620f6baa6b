#!/bin/bash
# s32 call 1 (2 x H200): the combine's sums with eight loads in flight per lane (moe-mlp: main + that; moe-pre3:
# the pre-reduced layer combine + that) against main 62d3f88: mkbench moe --layer --no-nccl in turns; the standalone
# combine (mkbench moe --series combine, NCCL in the same run) main / mlp; test_moe layer and correct on 2 GPUs.
set -u
T0=$(date +%s)
tar xJf build-gpu/s31c.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SEED"
el() { echo "$(( $(date +%s) - T0 )) s"; }
for v in moe-main moe-mlp moe-pre3 moe-main moe-mlp moe-pre3; do
  OUT=$W/b-$v timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v.txt 2>&1
  echo "== 2 GPUs layer $v rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v.txt | head -6 | cut -c1-100 >> $S
done
for v in moe-main moe-mlp; do
  OUT=$W/c-$v timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --series combine --rounds 1 --iters 10 > $W/c-$v.txt 2>&1
  echo "== 2 GPUs combine $v rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/c-$v.txt | head -6 | cut -c1-150 >> $S
done
for v in moe-pre3 moe-mlp; do for m in layer correct; do
  timeout 60 $MPI -np 2 build-gpu/$v/test_moe $m > $W/t-$v-$m.txt 2>&1; echo "$v 2 GPUs $m rc=$? $(el) $(grep -c PASS $W/t-$v-$m.txt) PASS $(grep -c FAIL $W/t-$v-$m.txt) FAIL" >> $S
done; done
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
