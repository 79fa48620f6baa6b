#!/bin/bash
# s36 call 6 (2 x H200): the flag waits of mkGemmReduceScatter's kernel polled with relaxed loads (one
# acquire after), lab MKI_GRS_RLX=1, against ld.acquire.sys polls (main, lab RLX=0): correctness, mkbench
# in turns, then the lab trace (per-tile timeline) with RLX 0 and 1.
set -u
tar xJf build-gpu/s36e.tar.xz || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_RLX"
st() { local n=$1 t=$2 np=$3; shift 3
  timeout $t $MPI -np $np "$@" > $W/$n.txt 2>&1; local rc=$?
  echo "== $n rc=$rc $(el)" >> $S; grep -E "FAIL|timed out|passed|failed" $W/$n.txt | head -3 | cut -c1-200 >> $S; }
export MKI_GRS_RLX=1
MK_SM_SPLIT=gemm_rs:fused=1 st c2 150 2 build-gpu/grs-rlx/test_gemm_rs correct
st s2 60 2 build-gpu/grs-rlx/test_gemm_rs stress
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,6000x5000x4112,1024x8192x8192
for r in 1 2 3; do
  for v in main 0 1; do
    if [ $v = main ]; then BB=build-gpu/grs-main; else BB=build-gpu/grs-rlx; fi
    MKI_GRS_RLX=$v OUT=$W/j timeout 100 $MPI -np 2 $BB/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 --tag rlx$v$r > $W/b-$v$r.txt 2>&1
    echo "== bench rs $v round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-$v$r.txt | cut -c1-80 >> $S
  done
done
for v in 0 1; do for sh in 8192x8192x8192 4096x8192x8192; do
  MKI_GRS_RLX=$v timeout 100 $MPI -np 2 build-gpu/grs-rlx-trace/mkbench_gemm_rs --shapes $sh --rounds 1 --iters 20 > $W/t-$v-$sh.txt 2>&1
  echo "== trace rlx=$v $sh rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$v-$sh.txt | cut -c1-80 >> $S
done; done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
