#!/bin/bash
# s17 call 7: lab tmac (the combine's loads by TMA into the epilogue buffers) : test_gemm_rs correct/stress both ops, then against main in turns, both ops, 2 ranks
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17g.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for m in correct stress ar-correct ar-stress; do timeout 100 $MPI build-gpu/tmac/test_gemm_rs $m > $W/tmac-$m.log 2>&1; echo "tmac $m rc=$? $(grep -c PASS $W/tmac-$m.log) PASS $(grep -c FAIL $W/tmac-$m.log) FAIL"; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,1024x8192x8192,6000x5000x4112
for r in 1 2; do for b in grs tmac; do for a in "" --ar; do
  timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b$r-$b$a.log 2>&1; echo "== $b $a round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
