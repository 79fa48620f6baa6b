#!/bin/bash
# s27 call 3 (issue 19, one H200): mkMoEDispatchGemm in one kernel (the dispatch in the GEMM engine's first CTAs,
# tiles started as their expert's rows land) against HEAD's two launches.  1 rank: test_moe gemm, then mkbench moe
# dgemm base / new in turns (2 rounds); then moe.sh test (MPS 2, 4, 8 ranks: correct, dispatch+gemm, stress, graph,
# overflow, bad input, nocall, multinode) with the new build, cut at the deadline.
set -u
T0=$(date +%s)
tar xJf build-gpu/s27c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_SEED"
timeout 150 $MPI -np 1 build-gpu/moe/test_moe gemm > $W/t1-gemm.txt 2>&1; echo "np1 test_moe gemm rc=$? $(( $(date +%s) - T0 )) s" >> $S
grep -iE "fail|bad|error" $W/t1-gemm.txt | head -8 >> $S; tail -3 $W/t1-gemm.txt >> $S
for r in 1 2; do for v in moebase moe; do
  OUT=$W/b-$v$r timeout 100 $MPI -np 1 build-gpu/$v/mkbench_moe --series dgemm --rounds 2 > $W/bench-$v$r.txt 2>&1
  echo "== bench $v round $r rc=$? $(( $(date +%s) - T0 )) s" >> $S; grep -E "top-|rc=|FAIL|rror" $W/bench-$v$r.txt | head -14 >> $S
done; done
MK_GPU_DEADLINE=$(( T0 + 540 )) MK_GPU_MOE=build-gpu/moe OUT=$W/moe timeout 400 bash tests/gpu/moe.sh test > $W/moe.log 2>&1
echo "moe.sh test rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -16 $W/moe.log >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
