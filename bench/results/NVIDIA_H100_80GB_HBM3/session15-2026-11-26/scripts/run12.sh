#!/bin/bash
# cuBLAS's kernels for the decode-sized GEMM under ncu (ours unprofiled: its waits span ranks)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=60000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed
for sh in 16x8192x8192 128x8192x8192; do
timeout 200 $MPI /usr/local/cuda/bin/ncu --target-processes all -k regex:"nvjet|gemm|Kernel|splitK|reduce" --launch-skip 2 --launch-count 4 --metrics $M \
  build-gpu/grs/mkbench_gemm_rs --ar --no-nccl --rounds 1 --iters 3 --shapes $sh > $OUT/ncu-$sh.log 2>&1
echo "== $sh rc=$?"
grep -E "^\s+[a-z_]+.*\(|^  [A-Za-z_].*\(|gpu__time|dram__|launch__|sm__throughput" $OUT/ncu-$sh.log | grep -v "==PROF==" | head -40
done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
