#!/bin/bash
# s34 call 6 (2 x H200): the landing build of the decode kernel (one consumer warpgroup, in-flight MMAs,
# the first MMA overwriting acc, the deep ring, the sum with 8 elements in flight): mkbench gemm_rs /
# gemm_ar base / new once each, then gemm_rs.sh test and ar-test (steps cut at the call's deadline).
set -u
tar xJf build-gpu/s34f.tar.xz || exit 1
O=${OUT:-/tmp/s34out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
for op in "" --ar; do
  for v in grs-base grs; do
    sh="16x8192x8192,64x8192x8192,128x8192x8192"; [ -n "$op" ] && sh="1x8192x8192,$sh"
    OUT=$W/j timeout 60 $MPI -np 2 build-gpu/$v/mkbench_gemm_rs $op --shapes $sh --rounds 2 --iters 20 --tag $v$op > $W/b-$v$op.txt 2>&1
    echo "== $v ${op:-rs} rc=$? $(el)" >> $S
    grep -E "^[0-9]+x8192x8192" $W/b-$v$op.txt | cut -c1-150 >> $S
  done
done
export MK_GPU_DEADLINE=$(( T0 + 290 ))
OUT=$W/t bash tests/gpu/gemm_rs.sh test > $W/t-rs.txt 2>&1; echo "gemm_rs.sh test rc=$? $(el)" >> $S
cat $W/t/gemm_rs-summary.txt >> $S
OUT=$W/t bash tests/gpu/gemm_rs.sh ar-test > $W/t-ar.txt 2>&1; echo "gemm_rs.sh ar-test rc=$? $(el)" >> $S
cat $W/t/gemm_ar-summary.txt >> $S
grep -h "stress:" $W/t/*.log | sort | uniq -c | head >> $S
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
