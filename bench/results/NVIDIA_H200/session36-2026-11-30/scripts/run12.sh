#!/bin/bash
# s36 call 14 (2 x H200): the timeline with each tile's M- and N-block: which tiles crawl (8192^3,
# --no-nccl, default and MKB_LAB_SYNC=1).
set -u
tar xJf build-gpu/s36i.tar.xz || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKB_LAB_SYNC"
for r in 1 2; do for v in default sync; do
  if [ $v = sync ]; then export MKB_LAB_SYNC=1; else unset MKB_LAB_SYNC; fi
  timeout 100 $MPI -np 2 build-gpu/grs-sync/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/t-$v-$r.txt 2>&1
  echo "== trace $v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$v-$r.txt | cut -c1-80 >> $S
done; done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
