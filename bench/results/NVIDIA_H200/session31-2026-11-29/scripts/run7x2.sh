#!/bin/bash
# s31 call 7 (2 x H200): the pre-reduced layer combine (moe-pre2, v3) against main 62d3f88 (moe-main):
# mkbench moe --layer --no-nccl in turns (ours and our two GEMMs alone), then test_moe layer on 2 GPUs.
set -u
T0=$(date +%s)
tar xJf build-gpu/s31b.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SEED"
el() { echo "$(( $(date +%s) - T0 )) s"; }
nvidia-smi -L >> $S
for r in 1 2; do for v in moe-main moe-pre2; do
  OUT=$W/b-$v$r timeout 100 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== 2 GPUs layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-100 >> $S
done; done
timeout 100 $MPI -np 2 build-gpu/moe-pre2/test_moe layer > $W/t2-layer.txt 2>&1; echo "pre2 2 GPUs layer rc=$? $(el) $(grep -c PASS $W/t2-layer.txt) PASS $(grep -c FAIL $W/t2-layer.txt) FAIL" >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
