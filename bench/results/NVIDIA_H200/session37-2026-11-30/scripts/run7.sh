#!/bin/bash
# s37 call 7 (2 x H200): lab x (MKI_GRS_XLAB bits, results wrong: 1 own tiles neither wait for nor add
# the peers' partials, 2 the movers copy nothing over NVLink but still raise the flags): the tx trace
# at 8192^3 (--no-nccl) with 0 / 1 / 2 / 3, twice.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37g.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_XLAB"
for r in 1 2; do for v in 0 1 2 3; do
  MKI_GRS_XLAB=$v timeout 100 $MPI -np 2 build-gpu/grs-x-tx/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/tx-x$v-$r.txt 2>&1
  echo "== tx xlab=$v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/tx-x$v-$r.txt | cut -c1-80 >> $S
  python3 s37/tx.py $W/tx-x$v-$r.txt > $W/tx-x$v-$r.sum 2>&1
  grep -E "starts|summary" $W/tx-x$v-$r.sum >> $S
done; done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
