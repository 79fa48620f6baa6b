#!/bin/bash
# s17 call 1: main 4dc1904: mkbench gemm_rs / gemm_ar default sweeps (in turns with cuBLAS + NCCL); trace of call 40 at 8192^3 and 16384x8192x8192 (both ops)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for s in 8192x8192x8192 16384x8192x8192; do
  for a in "" --ar; do OUT=$W bash tests/gpu/gemm_rs.sh trace $a $s > $W/tr$a-$s.txt 2>&1; echo "trace $a $s rc=$?"; done
done
for a in "" --ar; do
  timeout 240 $MPI build-gpu/grs/mkbench_gemm_rs $a > $W/bench$a.log 2>&1; echo "== bench $a rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench$a.log
done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
