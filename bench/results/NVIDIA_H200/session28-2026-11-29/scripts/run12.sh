#!/bin/bash
# s28 call 12 (one H200): mkMoEDispatchFfnCombine's down projection in the first kernel's launch
# (run_cta twice; a count per M-block of stored first-GEMM tiles): test_moe layer / layergraph /
# layeroverflow at 1 rank, under MPS layer at 2 and 4, layeroverflow and layergraph at 2; mkbench moe
# --layer --no-nccl at 1 rank, in turns with the three-launch build (old3), 2 rounds.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28i.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
for m in layer layergraph layeroverflow; do timeout 100 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "np1 $m rc=$? $(el) $(grep -c ' ok$' $W/t1-$m.txt) ok $(grep -c FAIL $W/t1-$m.txt) FAIL" >> $S; done
for r in 1 2; do for v in old3 moe; do
  OUT=$W/b-$v$r timeout 80 $MPI -np 1 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== np1 layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-70 >> $S
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 layer" "2 layeroverflow" "2 layergraph" "4 layer"; do set -- $t
  timeout 120 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
