#!/bin/bash
# call 7: lab wip-grs-radd (2 ranks: an own tile's fp32 partial TMA-reduce-added onto the peer's in the slot, the movers convert the sum into C): tests, bench in turns with main bf7c546
set -u
W=$OUT/w; mkdir -p $W
for t in grs radd; do tar xJf build-gpu/$t.tar.xz; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT -x MK_SM_SPLIT"
for a in "" ar-; do for m in correct stress graph; do
  timeout 60 $MPI build-gpu/grs-radd/test_gemm_rs $a$m > $W/radd-$a$m.log 2>&1; rc=$?
  echo "radd $a$m rc=$rc $(grep -c 'PASS' $W/radd-$a$m.log) PASS $(grep -ci 'fail\|error' $W/radd-$a$m.log) fail-lines"
done; done
for r in 1 2; do for v in grs grs-radd; do
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,1024x8192x8192,6000x5000x4104 --tag $v-$r > $W/bench-$v-$r.log 2>&1; echo "== $v rs $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-$v-$r.log | sed 1,2d
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --ar --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,1024x8192x8192 --tag ar-$v-$r > $W/bench-ar-$v-$r.log 2>&1; echo "== $v ar $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-ar-$v-$r.log | sed 1,2d
done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
