#!/bin/bash
# s27 call 6 (issue 19, one H200): call 5's one-kernel mkMoEDispatchGemm plus heavy experts (> 4x the mean rows)
# ignored by the send order and tabled last; test_gemm (the table builder now takes an order); 1 rank test_moe
# gemm; mkbench moe dgemm base / new in turns, 2 rounds; under MPS: test_moe gemm at 2 and 4 ranks, overflow.
set -u
T0=$(date +%s)
tar xJf build-gpu/s27f.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MKT_NO_NCCL"
for sd in 27601 27602; do MK_SEED=$sd timeout 60 build-gpu/gemm/test_gemm > $W/test_gemm-$sd.txt 2>&1; echo "test_gemm $sd rc=$? $(tail -1 $W/test_gemm-$sd.txt)" >> $S; done
timeout 100 $MPI -np 1 build-gpu/moedyn2/test_moe gemm > $W/t1-gemm.txt 2>&1; echo "np1 test_moe gemm rc=$? $(( $(date +%s) - T0 )) s" >> $S; tail -1 $W/t1-gemm.txt >> $S
for r in 1 2; do for v in moebase moedyn2; do
  OUT=$W/b1-$v$r timeout 80 $MPI -np 1 build-gpu/$v/mkbench_moe --series dgemm --rounds 2 > $W/b1-$v$r.txt 2>&1
  echo "== np1 $v round $r rc=$? $(( $(date +%s) - T0 )) s" >> $S; grep -E "top-[28] .* [0-9]+\.[0-9]+ " $W/b1-$v$r.txt | grep -v " - " | head -6 >> $S
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 gemm" "4 gemm" "2 overflow"; do set -- $t
  timeout 120 $MPI -np $1 build-gpu/moedyn2/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(( $(date +%s) - T0 )) s $(grep -c PASS $W/mps-$1-$2.txt) PASS" >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
