#!/bin/bash
# s30 call 2 (one H200): the layer's two-problem engine (branch wip-layer2, final: the down projection's
# own hooks type), then the engine change's reach: test_gemm (new), bench_gemm base / new in turns
# (plain and grouped), test_gemm_rs (RS and AR) and test_ag_gemm correct under MPS at 2 ranks; MoE:
# test_moe layer modes at 1 rank, MPS 2 and 4, 2x1 nodes; mkbench moe --layer at 1 rank base / new.
set -u
T0=$(date +%s)
tar xJf build-gpu/s30b.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED -x MK_NODE_SIZE -x MK_TRANSPORT -x MK_SM_SPLIT"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
timeout 120 build-gpu/gemm/test_gemm > $W/test_gemm.txt 2>&1; echo "test_gemm rc=$? $(el) $(tail -1 $W/test_gemm.txt)" >> $S
for r in 1 2; do for v in gemm-base gemm; do
  timeout 100 build-gpu/$v/bench_gemm --reps 20 --shapes 8192x8192x8192,4096x4096x4096,6000x5000x4104 > $W/bg-$v$r.txt 2>&1
  echo "== bench_gemm $v round $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x" $W/bg-$v$r.txt | cut -c1-100 >> $S
  timeout 120 build-gpu/$v/bench_gemm --reps 20 --grouped 128x256x4096x7168,128x264x4096x7168,8x4096x4096x7168 > $W/bgg-$v$r.txt 2>&1
  echo "== bench_gemm --grouped $v round $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x" $W/bgg-$v$r.txt | cut -c1-100 >> $S
done; done
for m in layer layergraph layeroverflow layerbad gemm; do timeout 100 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "np1 $m rc=$? $(el) $(grep -c ' ok$' $W/t1-$m.txt) ok $(grep -c PASS $W/t1-$m.txt) PASS $(grep -c FAIL $W/t1-$m.txt) FAIL" >> $S; done
for r in 1 2; do for v in moe-base moe; do
  OUT=$W/b-$v$r timeout 80 $MPI -np 1 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v$r.txt 2>&1
  echo "== np1 layer $v round $r rc=$? $(el)" >> $S; grep -E "top-[28] .*[0-9]\.[0-9]{3} " $W/b-$v$r.txt | head -6 | cut -c1-70 >> $S
done; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 layer" "2 layeroverflow" "2 layergraph" "4 layer" "2 gemm"; do set -- $t
  timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
for m in correct ar-correct; do
  timeout 150 $MPI -np 2 build-gpu/grs/test_gemm_rs $m > $W/grs-$m.txt 2>&1; echo "MPS np2 test_gemm_rs $m rc=$? $(el) $(grep -c PASS $W/grs-$m.txt) PASS $(grep -c FAIL $W/grs-$m.txt) FAIL" >> $S
done
timeout 100 $MPI -np 2 build-gpu/agg/test_ag_gemm correct > $W/agg.txt 2>&1; echo "MPS np2 test_ag_gemm correct rc=$? $(el) $(grep -c PASS $W/agg.txt) PASS $(grep -c FAIL $W/agg.txt) FAIL" >> $S
export MK_NODE_SIZE=1 MK_TRANSPORT=socket
timeout 200 $MPI -np 2 $B/test_moe multinode > $W/mps-2x1-multinode.txt 2>&1; echo "MPS 2x1 nodes multinode rc=$? $(el) $(grep -c PASS $W/mps-2x1-multinode.txt) PASS $(grep -c FAIL $W/mps-2x1-multinode.txt) FAIL" >> $S
unset MK_NODE_SIZE MK_TRANSPORT
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
