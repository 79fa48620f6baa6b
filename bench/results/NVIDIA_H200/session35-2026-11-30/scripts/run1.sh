#!/bin/bash
# s35 call 1 (2 x H200): mkGemmReduceScatter with its inputs exchanged (gemm_kx): correctness (forced), then
# mkbench gemm_rs partials (mover=tma) / inputs (mover=ce) in turns, twice.
set -u
tar xJf build-gpu/s35b.tar.xz || exit 1
O=${OUT:-/tmp/s35out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES"
B=build-gpu/grs
export MK_SM_SPLIT=gemm_rs:mover=ce,fused=1
MK_DEBUG=INFO timeout 150 $MPI -np 2 $B/test_gemm_rs correct 012345 > $W/c-kx.txt 2>&1
echo "== correct kx 012345 rc=$? $(el)" >> $S
grep -c "inputs exchanged" $W/c-kx.txt >> $S
grep -E "FAIL|PASS|bad|error|rank 0 .*seed" $W/c-kx.txt | head -20 >> $S
timeout 60 $MPI -np 2 $B/test_gemm_rs stress > $W/s-kx.txt 2>&1
echo "== stress kx rc=$? $(el)" >> $S
grep -E "stress:|FAIL|error" $W/s-kx.txt | head -6 >> $S
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,6000x5000x4112,16384x4096x16384,1024x8192x8192
for r in 1 2; do
  for v in tma ce; do
    MK_SM_SPLIT=gemm_rs:mover=$v OUT=$W/j timeout 100 $MPI -np 2 $B/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 --tag $v$r > $W/b-$v$r.txt 2>&1
    echo "== bench $v round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-$v$r.txt | cut -c1-160 >> $S
  done
done
grep -m1 -E "^shape|^ *M x" $W/b-tma1.txt >> $S
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
