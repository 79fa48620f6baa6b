#!/bin/bash
# call 3: lab wip-grs-early (the outbox tile handed to the movers 8 (early) or 2 (early2) k-blocks into the next mainloop): tests, bench in turns with main and the whole-tile lab, trace at M = 1024
set -u
W=$OUT/w; mkdir -p $W
for t in grs early; do tar xJf build-gpu/$t.tar.xz; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do for m in correct stress graph; do
  timeout 100 $MPI build-gpu/grs-early/test_gemm_rs $a$m > $W/early-$a$m.log 2>&1; rc=$?
  echo "early $a$m rc=$rc $(grep -ci 'fail\|error' $W/early-$a$m.log) fail-lines"
done; done
SH=1024x8192x8192,8192x1024x8192,2048x8192x8192,4096x8192x8192,8192x8192x8192,6000x5000x4104
for r in 1 2; do
 for v in grs grs-early grs-early2; do
  timeout 120 $MPI build-gpu/$v/mkbench_gemm_rs --shapes $SH --tag $v-$r > $W/bench-$v-$r.log 2>&1; echo "== $v rs round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-$v-$r.log | sed 1,2d
 done
 for v in grs grs-early grs-early2; do
  timeout 120 $MPI build-gpu/$v/mkbench_gemm_rs --ar --shapes 1024x8192x8192,2048x8192x8192,4096x8192x8192,8192x8192x8192 --tag ar-$v-$r > $W/bench-ar-$v-$r.log 2>&1; echo "== $v ar round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-ar-$v-$r.log | sed 1,2d
 done
done
timeout 100 $MPI build-gpu/trace-early-bin/mkbench_gemm_rs --shapes 1024x8192x8192 --rounds 1 --iters 20 > $W/trace-early-bin.log 2>&1; echo "trace early rc=$?"
grep "^1024x" $W/trace-early-bin.log
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
