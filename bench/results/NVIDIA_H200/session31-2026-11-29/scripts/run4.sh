#!/bin/bash
# s31 call 4 (one H200): is mkbench moe's "mkgemm" (our grouped GEMM alone, back to back) slowed by the GPU's
# clocks?  mkbench dgemm series at 1 rank with 2 / 10 / 30 calls per block, nvidia-smi sampling SM clock and power.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=60000 MK_DEBUG=WARN
R=$(pwd); cd $OUT
G=$R/build-gpu/gemm/bench_gemm; M=$R/build-gpu/moe-main/mkbench_moe
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > smi.csv 2>&1 &
SP=$!
for it in 2 10 30; do
  echo "== iters $it $(date +%T.%N | cut -c1-12)"
  OUT=$OUT/m$it timeout 200 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH $M --shapes 8192x7168x128x4 --series dgemm --routing random --rounds 2 --iters $it 2>&1 | grep -E "top-4" | tail -1
done
echo "== bench_gemm $(date +%T.%N | cut -c1-12)"; $G --grouped 128x256rx4096x7168 --reps 30 | tail -2 | head -1
echo "== end $(date +%T.%N | cut -c1-12)"
kill $SP
awk -F', ' 'NR>1 { print $2, $4, $6 }' smi.csv | sort | uniq -c | sort -rn | head -12
