#!/bin/bash
# s30 call 1 (one H200): mkMoEDispatchFfnCombine's down projection in the first kernel's launch,
# the engine on two problems (kTwoProblems, branch wip-layer2): test_moe layer / layergraph /
# layeroverflow / layerbad at 1 rank, under MPS layer at 2 and 4, layeroverflow, layergraph and
# multinode (2x1) at 2, correct + gemm at 2 (the claim check of main's last commits);
# mkbench moe --layer --no-nccl at 1 rank in turns with main 36a0bc5's three launches (base), 2 rounds.
set -u
T0=$(date +%s)
tar xJf build-gpu/s30a.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED -x MK_NODE_SIZE -x MK_TRANSPORT"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
for m in layer layergraph layeroverflow layerbad; do timeout 100 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "np1 $m rc=$? $(el) $(grep -c ' ok$' $W/t1-$m.txt) ok $(grep -c PASS $W/t1-$m.txt) PASS $(grep -c FAIL $W/t1-$m.txt) FAIL" >> $S; done
for r in 1 2; do for v in moe-base moe; do
  OUT=$W/b-$v$r timeout 80 $MPI -np 1 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== np1 layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-70 >> $S
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 layer" "2 layeroverflow" "2 layergraph" "4 layer" "2 correct" "2 gemm"; do set -- $t
  timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
export MK_NODE_SIZE=1 MK_TRANSPORT=socket
for t in "2 multinode" "2 layeroverflow"; do set -- $t
  timeout 200 $MPI -np $1 $B/test_moe $2 > $W/mps-2x1-$2.txt 2>&1; echo "MPS 2x1 nodes $2 rc=$? $(el) $(grep -c PASS $W/mps-2x1-$2.txt) PASS $(grep -c FAIL $W/mps-2x1-$2.txt) FAIL" >> $S
done
unset MK_NODE_SIZE MK_TRANSPORT
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
