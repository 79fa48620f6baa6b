#!/bin/bash
# s37 call 13 (2 x H200): lab pa (-DMKI_PRODUCER_AHEAD_LAB: the producer computes the next unit's coordinates
# inside the current mainloop, after its first load, not at the tile boundary): test_gemm_rs correct + stress;
# its te timeline at 8192^3 --no-nccl x 2; mkbench main / pa in turns x 2.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37m.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_VISIBLE_DEVICES"
for m in correct stress; do
  timeout 240 $MPI -np 2 build-gpu/grs-pa/test_gemm_rs $m > $W/test-$m.txt 2>&1
  echo "== pa test_gemm_rs $m rc=$? $(el)" >> $S; tail -2 $W/test-$m.txt >> $S
done
for r in 1 2; do
  timeout 100 $MPI -np 2 build-gpu/grs-pa-te/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 2 --iters 20 --no-nccl > $W/te-pa-$r.txt 2>&1
  echo "== te pa run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/te-pa-$r.txt | cut -c1-80 >> $S
  python3 tools/grs_te.py $W/te-pa-$r.txt | tail -n +2 >> $S
done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  timeout 150 $MPI -np 2 build-gpu/grs-pa/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-pa-$r.txt 2>&1
  echo "== mkbench pa run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-pa-$r.txt | cut -c1-90 >> $S
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
