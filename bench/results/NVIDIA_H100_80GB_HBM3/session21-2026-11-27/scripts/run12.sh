#!/bin/bash
# s21 call 12 (4 GPUs): the sum of a chunk with few CTAs (trace ctrace7 = HEAD + trace, MK_COLL_CTAS = 1 / 8 / 64,
# all-reduce 16 MB: rounds per CTA alone against 64 beside each other), and the SASS of the bf16 reduction kernel
# (cuobjdump exists on this machine) for how REDUCE's loads are issued.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21g.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_COLL_CTAS"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
for c in 1 8 64; do
  MK_COLL_CTAS=$c OUT=$W timeout 150 $MPIB -np 4 build-gpu/ctrace7/mkbench_coll --op ar --min 16M --max 16M --iters 40 --tag c$c > $W/tr-c$c.log 2>&1; echo "== ctas $c rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-c$c.log | grep -E '^(reduce|leave).*first' >> $S
  grep -E '^allreduce ' $W/tr-c$c.log >> $S
done
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "cuobjdump: $CO" >> $S
if [ -n "$CO" ]; then
  $CO -sass build-gpu/pub/mkbench_coll > $W/all.sass 2>&1
  awk '/Function : .*mki_coll_kernel_ofILi1E13__nv_bfloat16/{p=1} p&&/Function : /&&!/mki_coll_kernel_ofILi1E13__nv_bfloat16/{p=0} p' $W/all.sass > $W/reduce_bf16.sass
  wc -l $W/reduce_bf16.sass >> $S; grep -c 'LDG' $W/reduce_bf16.sass >> $S
  xz -9 $W/reduce_bf16.sass; cp $W/reduce_bf16.sass.xz $OUT/; rm -f $W/all.sass
fi
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log summary.txt && cd $OUT && rm -rf $W
