#!/bin/bash
# s32 call 3 (2 x H200): where the layer's time goes beyond our two GEMMs.  moe-kt: main 16dcfd9 built with
# -DMKI_MOE_TRACE (branch lab-moetrace: per call and rank, the first/last CTA's globaltimer at the layer kernel's
# entry, after its dispatch prologue, at its end, and the combine's entry / first peer-stage wait passed / end);
# then main (moe-main, 62d3f88 = main's MoE code) and the one-launch layer (lc, branch wip-lc2) in turns;
# test_moe layer / layergraph on 2 GPUs for lc.
set -u
T0=$(date +%s)
for f in s31c s31lc s32a; do tar xJf build-gpu/$f.tar.xz -C build-gpu; done
ls build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
el() { echo "$(( $(date +%s) - T0 )) s"; }
KT=build-gpu/moe-kt/mkbench_moe
timeout 90 $MPI -np 2 $KT --no-nccl --layer --rounds 1 --iters 10 > $W/kt.txt 2>&1
echo "== trace rc=$? $(el) $(grep -c '^MKT' $W/kt.txt) MKT lines" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/kt.txt | head -6 | cut -c1-100 >> $S
for v in moe-main lc moe-main lc; do
  timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v-$(el | tr -d ' ').txt 2>&1
  echo "== 2 GPUs layer $v rc=$? $(el)" >> $S; grep -hE "top-[28] .*[0-9]\.[0-9]{3} " $(ls -t $W/b-$v-*.txt | head -1) | head -6 | cut -c1-100 >> $S
done
for m in layer layergraph; do
  timeout 60 $MPI -np 2 build-gpu/lc/test_moe $m > $W/t-lc-$m.txt 2>&1; echo "lc 2 GPUs $m rc=$? $(el) $(grep -c PASS $W/t-lc-$m.txt) PASS $(grep -c FAIL $W/t-lc-$m.txt) FAIL" >> $S
done
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
