#!/bin/bash
# s36 call 8 (2 x H200): the lab trace with stamps inside the mainloop (first full stage, mainloop end,
# producer's first load of each tile): where a CTA's slow last tile waits.  8192^3 and 4096 x 8192 x 8192.
set -u
tar xJf build-gpu/s36f.tar.xz || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES"
for sh in 8192x8192x8192 4096x8192x8192; do for r in 1 2; do
  timeout 100 $MPI -np 2 build-gpu/grs-rlx-trace/mkbench_gemm_rs --shapes $sh --rounds 1 --iters 20 > $W/t-$sh-$r.txt 2>&1
  echo "== trace $sh $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$sh-$r.txt | cut -c1-80 >> $S
done; done
timeout 100 $MPI -np 2 build-gpu/grs-rlx-trace/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/t-nonccl.txt 2>&1
echo "== trace 8192 --no-nccl rc=$? $(el)" >> $S
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
