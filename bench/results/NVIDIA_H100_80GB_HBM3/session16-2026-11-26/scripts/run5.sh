#!/bin/bash
# call 5: main 0f1d545 (early signal): lag labs (own tiles 2 / 1 waves late instead of 3) in turns, then gemm_rs.sh test and ar-test
set -u
W=$OUT/w; mkdir -p $W
T0=$(date +%s)
for t in grs lag; do tar xJf build-gpu/$t.tar.xz; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for v in grs grs-lag2 grs-lag1; do
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --shapes 1024x8192x8192,2048x8192x8192,4096x8192x8192,8192x8192x8192,16384x8192x8192,6000x5000x4104 --tag $v > $W/bench-$v.log 2>&1; echo "== $v rs rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-$v.log | sed 1,2d
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --ar --shapes 1024x8192x8192,4096x8192x8192,8192x8192x8192,16384x8192x8192 --tag ar-$v > $W/bench-ar-$v.log 2>&1; echo "== $v ar rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/bench-ar-$v.log | sed 1,2d
done
echo "bench done at $(( $(date +%s) - T0 )) s"
unset CUDA_VISIBLE_DEVICES
for m in test ar-test; do
  left=$(( 560 - ($(date +%s) - T0) ))
  [ $left -lt 60 ] && { echo "$m skipped: ${left}s left"; continue; }
  OUT=$W/$m timeout $left bash tests/gpu/gemm_rs.sh $m > $W/$m.out 2>&1; echo "== gemm_rs.sh $m rc=$?"
  grep -E "PASS|FAIL|SKIP|TIMEOUT" $W/$m/*summary.txt 2>/dev/null | sed 's/^.*summary.txt://'
done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
