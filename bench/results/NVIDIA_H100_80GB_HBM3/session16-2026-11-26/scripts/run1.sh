#!/bin/bash
# call 1: HEAD validation (coll quick tests, test_gemm_rs both ops) + lab wip-grs-whole against main in turns + host time per call
set -u
tar xJf build-gpu/bins.tar.xz
tar xJf build-gpu/grs-whole.tar.xz; tar xJf build-gpu/grs.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
T0=$(date +%s)
for a in "" ar-; do for m in correct stress graph; do timeout 100 $MPI build-gpu/grs/test_gemm_rs $a$m > $OUT/$a$m.log 2>&1; echo "main $a$m rc=$? $(grep -c 'PASS' $OUT/$a$m.log) PASS"; done; done
for a in "" ar-; do timeout 100 $MPI build-gpu/grs-whole/test_gemm_rs ${a}correct > $OUT/whole-${a}correct.log 2>&1; echo "whole ${a}correct rc=$? $(grep -c 'PASS' $OUT/whole-${a}correct.log) PASS"; done
echo "tests took $(( $(date +%s) - T0 )) s"
SH=1024x8192x8192,8192x1024x8192,2048x8192x8192,8192x8192x8192
for r in 1 2; do for v in grs grs-whole; do
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --shapes $SH --tag $v-$r --host > $OUT/bench-$v-$r.log 2>&1; echo "== $v rs round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/bench-$v-$r.log | sed 1,2d
  timeout 100 $MPI build-gpu/$v/mkbench_gemm_rs --ar --shapes 1024x8192x8192,2048x8192x8192 --tag ar-$v-$r > $OUT/bench-ar-$v-$r.log 2>&1; echo "== $v ar round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/bench-ar-$v-$r.log | sed 1,2d
done; done
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --ar --shapes 1x64x64,16x8192x8192,128x8192x8192 --host > $OUT/bench-host.log 2>&1
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --ar --graph --shapes 1x64x64,16x8192x8192 --host > $OUT/bench-host-graph.log 2>&1
grep -h "^host\|^1x64\|^16x\|^128x" $OUT/bench-host.log $OUT/bench-host-graph.log
timeout 100 bash tests/gpu/peer_red.sh run > $OUT/peer_red.log 2>&1; echo "peer_red rc=$?"; tail -25 $OUT/peer_red.log
echo "benches done at $(( $(date +%s) - T0 )) s"
MK_GPU_DEADLINE=$(( $(date +%s) + 200 )) timeout 230 bash tests/gpu/run.sh quick tests > $OUT/runquick.log 2>&1; echo "run.sh quick tests rc=$?"
tail -40 $OUT/runquick.log | grep -E "PASS|FAIL|SKIP" | tail -30
cp build-gpu/rt/out/summary.txt $OUT/rt-summary.txt 2>/dev/null
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
