#!/bin/bash
# s17 call 9: 4 GPUs: the commit (combine by TMA) and main in turns at 4 ranks, both ops (issue 24); test_gemm_rs correct both ops at 4 GPUs
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17h.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nvidia-smi -L | wc -l
export CUDA_VISIBLE_DEVICES=0,1,2,3
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do timeout 60 $MPI build-gpu/grs-new/test_gemm_rs ${a}correct > $W/new-${a}correct.log 2>&1; echo "new 4gpu ${a}correct rc=$? $(grep -c PASS $W/new-${a}correct.log) PASS"; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,16384x4096x16384,2048x8192x8192
for r in 1 2; do for b in grs grs-new; do for a in "" --ar; do
  timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b$r-$b$a.log 2>&1; echo "== $b $a round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
