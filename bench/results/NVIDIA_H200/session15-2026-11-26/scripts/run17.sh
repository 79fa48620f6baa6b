#!/bin/bash
# H100 again: the decode shapes with the one-fence close (against call 10, same shapes)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --ar --shapes 1x8192x8192,16x8192x8192,128x8192x8192 > $OUT/bench-ar.log 2>&1
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --shapes 16x8192x8192,128x8192x8192 > $OUT/bench-rs.log 2>&1
for f in bench-ar bench-rs; do awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/$f.log; done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
