#!/bin/bash
# call 6: main bf7c546: mkbench gemm_rs and gemm_ar default sweeps (3 rounds, in turns with cuBLAS + NCCL), --host; test_gemm_rs correct both ops
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/grs.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do timeout 100 $MPI build-gpu/grs/test_gemm_rs ${a}correct > $W/${a}correct.log 2>&1; echo "${a}correct rc=$? $(grep -c PASS $W/${a}correct.log) PASS"; done
for a in "" --ar; do
  timeout 200 $MPI build-gpu/grs/mkbench_gemm_rs $a --host > $W/bench$a.log 2>&1; echo "== bench $a rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench$a.log
done
grep -h "^host" $W/bench*.log
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
