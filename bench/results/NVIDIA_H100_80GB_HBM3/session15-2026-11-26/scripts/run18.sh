#!/bin/bash
# both kernels closing through grs_close (one system fence): test_gemm_rs at 2 GPUs
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do for m in correct stress graph; do timeout 100 $MPI build-gpu/grs/test_gemm_rs $a$m > $OUT/$a$m.log 2>&1; echo "$a$m rc=$? $(grep -c 'PASS' $OUT/$a$m.log) PASS $(grep -c ' ok$' $OUT/$a$m.log) ok"; done; done
timeout 60 $MPI build-gpu/grs/mkbench_gemm_rs --ar --shapes 8192x8192x8192,16x8192x8192 > $OUT/bench.log 2>&1
awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/bench.log
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
