#!/bin/bash
# s37 call 3 (2 x H200): main's trace with each CTA's SM id, each tile's SM clock and what each CTA's
# exit waited for (movers / producer / consumer warpgroups): 8192^3 x 4, 4096 x 8192 x 8192 x 2
# (--no-nccl); then the same trace with both ranks on GPU 0 under MPS (no NVLink).
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37c.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
for sh in 8192x8192x8192-1 8192x8192x8192-2 8192x8192x8192-3 8192x8192x8192-4 4096x8192x8192-1 4096x8192x8192-2; do
  timeout 100 $MPI -np 2 build-gpu/grs-tx/mkbench_gemm_rs --shapes ${sh%-*} --rounds 1 --iters 20 --no-nccl > $W/tx-$sh.txt 2>&1
  echo "== tx $sh rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/tx-$sh.txt | cut -c1-80 >> $S
  python3 s37/tx.py $W/tx-$sh.txt > $W/tx-$sh.sum 2>&1
  grep -E "rank [01]:" $W/tx-$sh.sum >> $S
done
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-s37 CUDA_MPS_LOG_DIRECTORY=/tmp/mps-s37-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  for r in 1 2; do
    timeout 100 $MPI -np 2 build-gpu/grs-tx/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/mps-$r.txt 2>&1
    echo "== MPS (both ranks on GPU 0) run $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/mps-$r.txt | cut -c1-100 >> $S
    python3 s37/tx.py $W/mps-$r.txt > $W/mps-$r.sum 2>&1
    grep -E "rank [01]:" $W/mps-$r.sum >> $S
  done
  echo quit | nvidia-cuda-mps-control
fi
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
