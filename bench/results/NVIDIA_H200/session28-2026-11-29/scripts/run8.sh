#!/bin/bash
# s28 call 8 (one H200): the review's refactors: test_gemm (the glu cases merged into the grouped
# case), test_moe overflow / layeroverflow (one verdict helper) at 1 and 2 ranks, mkbench moe --layer
# (one helper for our grouped GEMMs) at 1 rank, one round.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28f.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
for sd in 28002 28003; do MK_SEED=$sd timeout 90 build-gpu/gemm/test_gemm > $W/test_gemm-$sd.txt 2>&1; echo "test_gemm rc=$? $(el) $(tail -1 $W/test_gemm-$sd.txt) $(grep -c 'glu.*ok\|glu.*PASS' $W/test_gemm-$sd.txt) glu" >> $S; done
for m in overflow layeroverflow layer; do timeout 100 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "np1 $m rc=$? $(el) $(grep -c FAIL $W/t1-$m.txt) FAIL" >> $S; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for m in overflow layeroverflow; do timeout 100 $MPI -np 2 $B/test_moe $m > $W/mps-$m.txt 2>&1; echo "MPS np2 $m rc=$? $(el) $(grep -c PASS $W/mps-$m.txt) PASS $(grep -c FAIL $W/mps-$m.txt) FAIL" >> $S; done
echo quit | nvidia-cuda-mps-control
OUT=$W/b1 timeout 150 $MPI -np 1 $B/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b1-layer.txt 2>&1
echo "== np1 layer bench rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b1-layer.txt | head -8 >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
