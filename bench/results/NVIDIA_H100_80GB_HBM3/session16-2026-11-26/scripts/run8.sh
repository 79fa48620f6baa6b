#!/bin/bash
# call 8: 4 GPUs, main bf7c546 (early hand-over): test_gemm_rs correct (both ops) at 4 ranks, mkbench gemm_rs / gemm_ar at 4 ranks (issue 24)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/grs.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nvidia-smi -L | wc -l
export CUDA_VISIBLE_DEVICES=0,1,2,3
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do timeout 60 $MPI build-gpu/grs/test_gemm_rs ${a}correct > $W/${a}correct.log 2>&1; echo "4gpu ${a}correct rc=$? $(grep -c PASS $W/${a}correct.log) PASS"; done
timeout 90 $MPI build-gpu/grs/mkbench_gemm_rs --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,16384x4096x16384,2048x8192x8192 --tag np4 > $W/bench.log 2>&1; echo "== rs rc=$?"
awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench.log
timeout 90 $MPI build-gpu/grs/mkbench_gemm_rs --ar --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192 --tag ar-np4 > $W/bench-ar.log 2>&1; echo "== ar rc=$?"
awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-ar.log
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
