#!/bin/bash
# on 2 x H200: both benchmarks (default AR sweep, the RS list)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
B=build-gpu/grs
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
S=$OUT/summary.txt; : > $S
timeout 280 $MPI $B/mkbench_gemm_rs --ar > $OUT/bench-ar.log 2>&1; echo "bench-ar rc=$?" >> $S
timeout 250 $MPI $B/mkbench_gemm_rs --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,1024x8192x8192,8192x1024x8192,6000x5000x4104,16x8192x8192,128x8192x8192 > $OUT/bench-rs.log 2>&1; echo "bench-rs rc=$?" >> $S
for f in bench-ar bench-rs; do awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/$f.log >> $S; done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
cat $S
