#!/bin/bash
# s37 call 10 (2 x H200): lab regs (-DMKI_EPI_REGS_LAB, MKI_EPI_REGS=1: a peer tile's fp32 partial stored from
# the registers straight into the outbox, no staging chunks): test_gemm_rs correct + stress with it; its te
# timeline 0 / 1 at 8192^3 (--no-nccl); mkbench main / regs=1 in turns, twice.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37j.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_EPI_REGS"
export MKI_EPI_REGS=1
for m in correct stress; do
  timeout 240 $MPI -np 2 build-gpu/grs-regs/test_gemm_rs $m > $W/test-$m.txt 2>&1
  echo "== regs=1 test_gemm_rs $m rc=$? $(el)" >> $S; tail -3 $W/test-$m.txt >> $S
done
for r in 1 2; do for v in 0 1; do
  MKI_EPI_REGS=$v timeout 100 $MPI -np 2 build-gpu/grs-regs-te/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 2 --iters 20 --no-nccl > $W/te-regs$v-$r.txt 2>&1
  echo "== te regs=$v run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/te-regs$v-$r.txt | cut -c1-80 >> $S
  python3 tools/grs_te.py $W/te-regs$v-$r.txt | tail -n +2 >> $S
done; done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  MKI_EPI_REGS=0 timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  MKI_EPI_REGS=1 timeout 150 $MPI -np 2 build-gpu/grs-regs/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-regs-$r.txt 2>&1
  echo "== mkbench regs=1 run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-regs-$r.txt | cut -c1-90 >> $S
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
