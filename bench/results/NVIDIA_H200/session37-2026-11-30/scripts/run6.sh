#!/bin/bash
# s37 call 6 (2 x H200): lab alive (MKI_GRS_ALIVE=1: a CTA that has finished its tiles stays on its SM,
# sleeping, until every CTA of the call has): its tx trace with 0 / 1 at 8192^3 (--no-nccl), twice; then
# mkbench main / alive=1 in turns, twice.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37f.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_ALIVE"
for r in 1 2; do for v in 0 1; do
  MKI_GRS_ALIVE=$v timeout 100 $MPI -np 2 build-gpu/grs-alive-tx/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/tx-alive$v-$r.txt 2>&1
  echo "== tx alive=$v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/tx-alive$v-$r.txt | cut -c1-80 >> $S
  python3 s37/tx.py $W/tx-alive$v-$r.txt > $W/tx-alive$v-$r.sum 2>&1
  grep -E "starts|summary" $W/tx-alive$v-$r.sum >> $S
done; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  for v in 1; do
    MKI_GRS_ALIVE=$v timeout 150 $MPI -np 2 build-gpu/grs-alive/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-alive$v-$r.txt 2>&1
    echo "== mkbench alive=$v run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-alive$v-$r.txt | cut -c1-90 >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
