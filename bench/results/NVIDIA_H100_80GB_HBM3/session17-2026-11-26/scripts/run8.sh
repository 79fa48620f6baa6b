#!/bin/bash
# s17 call 8: the combine by TMA (working tree = the commit to land): main 4dc1904 and new in turns (3 rounds, both ops), then gemm_rs.sh test and ar-test with the new binaries
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s17a.tar.xz; tar xJf build-gpu/s17h.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,1024x8192x8192,6000x5000x4112
for r in 1 2 3; do for b in grs grs-new; do for a in "" --ar; do
  CUDA_VISIBLE_DEVICES=0,1 timeout 120 $MPI build-gpu/$b/mkbench_gemm_rs $a --shapes $SH --rounds 2 > $W/b$r-$b$a.log 2>&1; echo "== $b $a round $r rc=$?"
  awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $W/b$r-$b$a.log | tail -n +3 | awk '{print $1,$2,$3,$6}'
done; done; done
mv $OUT/*.json $OUT/*.tsv $W/ 2>/dev/null
for t in test ar-test; do OUT=$W/$t MK_GPU_GRS=build-gpu/grs-new timeout 200 bash tests/gpu/gemm_rs.sh $t > $W/$t.txt 2>&1; echo "== gemm_rs.sh $t rc=$?"; tail -n 40 $W/$t.txt | grep -E 'PASS|FAIL|TIMEOUT|SKIP' | awk '{print}' | tail -n 36; done
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
