#!/bin/bash
# s28 call 2 (one H200): mkMoEDispatchFfnCombine's first version (three launches; SwiGLU in the
# grouped GEMM engine's epilogue).  test_gemm (glu cases); test_moe layer/layerbad/layergraph/
# layeroverflow at 1 rank; mkbench moe --layer --no-nccl 1 rank; under MPS: layer at 2 and 4 ranks,
# layergraph + layeroverflow at 2; the skewed-routing slowness at 2 ranks (dgemm vs layer).
set -u
T0=$(date +%s)
tar xJf build-gpu/s28b.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SEED"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
MK_SEED=28001 timeout 90 build-gpu/gemm/test_gemm > $W/test_gemm.txt 2>&1; echo "test_gemm rc=$? $(el) $(tail -1 $W/test_gemm.txt)" >> $S
grep -c "glu.*PASS\|glu.*ok" $W/test_gemm.txt >> $S; grep -i "fail" $W/test_gemm.txt | head -5 >> $S
for m in layer layerbad layergraph layeroverflow; do
  timeout 150 $MPI -np 1 $B/test_moe $m > $W/t1-$m.txt 2>&1; echo "np1 $m rc=$? $(el) $(grep -c PASS $W/t1-$m.txt) PASS $(grep -c FAIL $W/t1-$m.txt) FAIL" >> $S
done
OUT=$W/b1 timeout 150 $MPI -np 1 $B/mkbench_moe --no-nccl --layer --rounds 2 --iters 10 > $W/b1-layer.txt 2>&1
echo "== np1 layer bench rc=$? $(el)" >> $S; grep -E "top-[28] " $W/b1-layer.txt | head -8 >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 layer" "2 layergraph" "2 layeroverflow" "4 layer"; do set -- $t
  timeout 150 $MPI -np $1 $B/test_moe $2 > $W/mps-$1-$2.txt 2>&1; echo "MPS np$1 $2 rc=$? $(el) $(grep -c PASS $W/mps-$1-$2.txt) PASS $(grep -c FAIL $W/mps-$1-$2.txt) FAIL" >> $S
done
for s in dgemm layer; do
  OUT=$W/bs-$s timeout 60 $MPI -np 2 $B/mkbench_moe --no-nccl --series $s --shapes 4096x4096x8x2 --routing random,skewed --iters 5 --rounds 1 > $W/bs-$s.txt 2>&1
  echo "== MPS np2 $s 4096x4096x8x2 rc=$? $(el)" >> $S; grep -E "top-2 " $W/bs-$s.txt | head -4 >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
