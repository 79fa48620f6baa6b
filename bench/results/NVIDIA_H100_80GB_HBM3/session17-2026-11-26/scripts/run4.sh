#!/bin/bash
# s17 call 4: 4 GPUs, main 4dc1904 against lab m56 (session 16's wip-grs-m56.patch: producer warpgroup on 56 registers, the movers 4 x 16 B in flight per lane) in turns at 4 ranks, both ops (issue 24)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17d.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nvidia-smi -L | wc -l
export CUDA_VISIBLE_DEVICES=0,1,2,3
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for a in "" ar-; do timeout 60 $MPI build-gpu/m56s17/test_gemm_rs ${a}correct > $W/m56-${a}correct.log 2>&1; echo "m56 4gpu ${a}correct rc=$? $(grep -c PASS $W/m56-${a}correct.log) PASS"; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,16384x4096x16384,2048x8192x8192
for r in 1 2; do for b in grs m56s17; do for a in "" --ar; do
  timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b$r-$b$a.log 2>&1; echo "== $b $a round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
