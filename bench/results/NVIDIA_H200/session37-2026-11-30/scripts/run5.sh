#!/bin/bash
# s37 call 5 (2 x H200): (a) xgpu_lab with GPU 1's CTAs spinning on a local word (acquire.sys, fence.sys,
# relaxed.sys, acquire.gpu, acquire.sys with sleeps) while GPU 0 loads; (b) lab pause
# (MKI_GRS_PAUSE=1: the gate's wait sleeps 256 ns between polls; 2: every wait of the kernel): its tx trace
# with 0 / 1 / 2 at 8192^3 (--no-nccl); (c) mkbench main / pause=1 / pause=2 in turns.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37e.tar.xz || exit 1
timeout 200 build-gpu/s37/xgpu_lab > $W/xgpu.txt 2>&1; echo "== xgpu_lab rc=$? $(el)" >> $S
grep -E "none|spin|sleep|mode" $W/xgpu.txt >> $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_PAUSE"
for r in 1 2; do for v in 0 1 2; do
  MKI_GRS_PAUSE=$v timeout 100 $MPI -np 2 build-gpu/grs-pause-tx/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/tx-pause$v-$r.txt 2>&1
  echo "== tx pause=$v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/tx-pause$v-$r.txt | cut -c1-80 >> $S
  python3 s37/tx.py $W/tx-pause$v-$r.txt > $W/tx-pause$v-$r.sum 2>&1
  grep -E "starts|summary" $W/tx-pause$v-$r.sum >> $S
done; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  for v in 1 2; do
    MKI_GRS_PAUSE=$v timeout 150 $MPI -np 2 build-gpu/grs-pause/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-pause$v-$r.txt 2>&1
    echo "== mkbench pause=$v run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-pause$v-$r.txt | cut -c1-90 >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
