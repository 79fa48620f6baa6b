#!/bin/bash
# s17 call 2: labs kj16 (combine loads 16 column groups at a time) and nocomb (combine's loads skipped: wrong results, an upper bound) against main in turns; the engine GEMM alone (bench_gemm) at the per-rank shapes
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do timeout 100 $MPI build-gpu/kj16/test_gemm_rs ${a}correct > $W/kj16-${a}correct.log 2>&1; echo "kj16 ${a}correct rc=$? $(grep -c PASS $W/kj16-${a}correct.log) PASS"; done
CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/gemm/bench_gemm --shapes 8192x8192x4096,16384x8192x4096,4096x8192x4096,2048x8192x4096 --transb 1 > $W/bench_gemm.log 2>&1; echo "bench_gemm rc=$?"; tail -n 8 $W/bench_gemm.log
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,1024x8192x8192
for r in 1 2; do for b in grs kj16 nocomb; do for a in "" --ar; do
  timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b$r-$b$a.log 2>&1; echo "== $b $a round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
