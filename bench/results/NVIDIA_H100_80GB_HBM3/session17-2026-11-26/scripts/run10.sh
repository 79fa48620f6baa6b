#!/bin/bash
# s17 call 10: the commit as landed (combine by TMA, issue state in shared memory: no spills): test_gemm_rs correct / stress / graph both ops on 2 GPUs, correct at 4 ranks under MPS; then it and call 8's build in turns
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17h.tar.xz; tar xJf build-gpu/s17i.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for m in correct stress graph ar-correct ar-stress ar-graph; do timeout 60 $MPI -np 2 build-gpu/grs-v5/test_gemm_rs $m > $W/v5-$m.log 2>&1; echo "v5 $m rc=$? $(grep -c PASS $W/v5-$m.log) PASS $(grep -c FAIL $W/v5-$m.log) FAIL"; done
if nvidia-cuda-mps-control -d 2>/dev/null; then
  for m in correct ar-correct; do CUDA_VISIBLE_DEVICES=0 timeout 60 $MPI -np 4 build-gpu/grs-v5/test_gemm_rs $m > $W/v5-mps4-$m.log 2>&1; echo "v5 mps x4 $m rc=$? $(grep -c PASS $W/v5-mps4-$m.log) PASS"; done
  echo quit | nvidia-cuda-mps-control
fi
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192
for b in grs-new grs-v5; do for a in "" --ar; do
  timeout 60 $MPI -np 2 build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b-$b$a.log 2>&1; echo "== $b $a rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
