#!/bin/bash
# s36 call 4 (2 x H200): main's mkGemmReduceScatter with fewer compute CTAs (MK_SM_SPLIT=gemm_rs:compute=N):
# 2048 units over 128 CTAs are 16 each (132: half 16, half 15: the same longest), in turns, twice.
set -u
tar xJf build-gpu/s36b.tar.xz build-gpu/grs-main/mkbench_gemm_rs || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES"
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192
for r in 1 2; do
  for c in 132 128 124 120 112; do
    MK_SM_SPLIT=gemm_rs:compute=$c OUT=$W/j timeout 100 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 --tag c$c-$r > $W/b-$c-$r.txt 2>&1
    echo "== compute=$c round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-$c-$r.txt | cut -c1-110 >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
