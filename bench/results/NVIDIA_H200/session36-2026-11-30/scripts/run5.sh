#!/bin/bash
# s36 call 5 (2 x H200): main's mkGemmReduceScatter traced (-DMKI_GRS_TRACE=40): where its time goes
# at 8192^3 and 16384x8192x8192 (per-CTA stamps and sums of call 40), twice each.
set -u
tar xJf build-gpu/s36d.tar.xz || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES"
for sh in 8192x8192x8192 16384x8192x8192 4096x8192x8192; do
  for r in 1 2; do
    timeout 100 $MPI -np 2 build-gpu/grs-trace/mkbench_gemm_rs --shapes $sh --rounds 1 --iters 20 > $W/t-$sh-$r.txt 2>&1
    echo "== trace main $sh run $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$sh-$r.txt | cut -c1-100 >> $S
    python3 tools/grs_trace.py $W/t-$sh-$r.txt > $W/t-$sh-$r.sum 2>&1; grep -E "rank|end|done_in|comb|own_period|peer_period|flagwait|combine" $W/t-$sh-$r.sum >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
