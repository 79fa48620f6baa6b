#!/bin/bash
# s37 call 4 (2 x H200): lab nopf (MKI_GRS_NOPF=1: the movers do not warm L2 with own tiles'
# partials): its tx trace with 0 / 1 in turns at 8192^3 (--no-nccl), then mkbench main / nopf=1 in turns.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37d.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_NOPF"
for r in 1 2 3; do for v in 0 1; do
  MKI_GRS_NOPF=$v timeout 100 $MPI -np 2 build-gpu/grs-nopf-tx/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/tx-nopf$v-$r.txt 2>&1
  echo "== tx nopf=$v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/tx-nopf$v-$r.txt | cut -c1-80 >> $S
  python3 s37/tx.py $W/tx-nopf$v-$r.txt > $W/tx-nopf$v-$r.sum 2>&1
  grep -E "starts|summary" $W/tx-nopf$v-$r.sum >> $S
done; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  MKI_GRS_NOPF=1 timeout 150 $MPI -np 2 build-gpu/grs-nopf/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-nopf-$r.txt 2>&1
  echo "== mkbench nopf=1 run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-nopf-$r.txt | cut -c1-90 >> $S
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
