#!/bin/bash
# call 2: tests of main and the whole-tile lab (compact), then the trace of call 40 at M = 1024 (RS) for both
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/grs-whole.tar.xz; tar xJf build-gpu/grs.tar.xz; tar xJf build-gpu/trace.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for v in grs-whole grs; do for a in "" ar-; do for m in correct stress; do
  timeout 100 $MPI build-gpu/$v/test_gemm_rs $a$m > $W/$v-$a$m.log 2>&1; rc=$?
  echo "$v $a$m rc=$rc $(grep -ci 'pass' $W/$v-$a$m.log) pass-lines $(grep -ci 'fail\|error' $W/$v-$a$m.log) fail-lines"
done; done; done
timeout 100 $MPI build-gpu/grs-whole/test_gemm_rs graph > $W/whole-graph.log 2>&1; echo "whole graph rc=$?"
for v in trace-main-bin trace-whole-bin; do
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --shapes 1024x8192x8192 --rounds 1 --iters 20 > $W/$v.log 2>&1; echo "$v rc=$?"
  grep "^1024x" $W/$v.log
done
cd $W && tar cJf $OUT/logs.tar.xz *.log && cd $OUT && rm -rf $W
