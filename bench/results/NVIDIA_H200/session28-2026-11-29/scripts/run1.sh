#!/bin/bash
# s28 call 1 (one H200): main 8b99301's MoE binaries (the tile() constants in shared memory, landed in
# session 27 without a GPU run): test_moe gemm at 1 rank, under MPS gemm at 2 and 4 ranks, overflow,
# graph, stress, badinput at 2; mkbench moe dgemm 1 rank one round.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28a.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED"
B=build-gpu/moe
timeout 100 $MPI -np 1 $B/test_moe gemm > $W/t1-gemm.txt 2>&1; echo "np1 test_moe gemm rc=$? $(( $(date +%s) - T0 )) s $(tail -1 $W/t1-gemm.txt)" >> $S
OUT=$W/b1 timeout 80 $MPI -np 1 $B/mkbench_moe --no-nccl --series dgemm --rounds 1 > $W/b1.txt 2>&1
echo "== np1 bench rc=$? $(( $(date +%s) - T0 )) s" >> $S; grep -E "top-[28] .* [0-9]+\.[0-9]+ " $W/b1.txt | head -8 >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 gemm" "4 gemm" "2 overflow" "2 graph" "2 stress" "2 badinput"; do set -- $t
  timeout 120 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(( $(date +%s) - T0 )) s $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
