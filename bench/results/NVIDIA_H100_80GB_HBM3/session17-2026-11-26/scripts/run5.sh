#!/bin/bash
# s17 call 5: breakdown labs against main in turns at 2 ranks: nomove (movers skip the copy, flags still raised: wrong sums) and nostore (peer tiles' TMA store into the outbox skipped: wrong sums)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17e.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,1024x8192x8192
for r in 1 2; do for b in grs nomove nostore; do
  timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs --shapes $SH --rounds 2 > $W/b$r-$b.log 2>&1; echo "== $b round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
