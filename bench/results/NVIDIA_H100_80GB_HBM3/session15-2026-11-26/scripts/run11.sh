#!/bin/bash
# decode kernel lab: two CTAs per SM with 2 K-slices (cps2) against main, in turns
set -u
tar xJf build-gpu/grs-dec.tar.xz; tar xJf build-gpu/grs-lab.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=5000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
S=$OUT/summary.txt; : > $S
AS=1x8192x8192,16x8192x8192,32x8192x8192,128x8192x8192
RSS=16x8192x8192,64x8192x8192,128x8192x8192
i=0
for b in build-gpu/grs build-gpu/grs-cps2 build-gpu/grs build-gpu/grs-cps2; do
  i=$((i+1))
  timeout 100 $MPI $b/mkbench_gemm_rs --ar --no-nccl --shapes $AS > $OUT/ar$i.log 2>&1; echo "ar$i $b rc=$?" >> $S
  awk '/^[0-9]+x/{print "   ", $1, $2}' $OUT/ar$i.log >> $S
  timeout 100 $MPI $b/mkbench_gemm_rs --no-nccl --shapes $RSS > $OUT/rs$i.log 2>&1; echo "rs$i $b rc=$?" >> $S
  awk '/^[0-9]+x/{print "   ", $1, $2}' $OUT/rs$i.log >> $S
done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
cat $S
