#!/bin/bash
# s17 call 11: 4 GPUs: the plan's wide movers (two rows in flight where the link binds, 3+ ranks): test_gemm_rs correct / ar-correct / stress at 4 GPUs; it and call 10's build (combine by TMA) in turns at 4 ranks
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17i.tar.xz; tar xJf build-gpu/s17j.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nvidia-smi -L | wc -l
export CUDA_VISIBLE_DEVICES=0,1,2,3
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for m in correct ar-correct stress ar-stress; do timeout 40 $MPI build-gpu/grs-two/test_gemm_rs $m > $W/two-$m.log 2>&1; echo "two 4gpu $m rc=$? $(grep -c PASS $W/two-$m.log) PASS $(grep -c FAIL $W/two-$m.log) FAIL"; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,16384x4096x16384
for b in grs-v5 grs-two; do for a in "" --ar; do
  timeout 50 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 --iters 10 > $W/b-$b$a.log 2>&1; echo "== $b $a rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6,$NF}'
done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
