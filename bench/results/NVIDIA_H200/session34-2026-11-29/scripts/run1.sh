#!/bin/bash
# s34 call 1 (2 x H200): the decode kernel keeping one k-block's MMAs in flight (grs = HEAD + change,
# grs-base = before): tests of both ops on 2 GPUs / MPS / virtual nodes with the new build, then
# mkbench gemm_rs / gemm_ar at decode-sized M, base / new in turns, twice; the trace build at M = 16 / 128.
set -u
tar xJf build-gpu/s34a.tar.xz || exit 1
O=${OUT:-/tmp/s34out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
nvidia-smi -L >> $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
SH="--shapes 1x8192x8192,16x8192x8192,64x8192x8192,128x8192x8192 --rounds 2 --iters 20 --dtype bf16"
for r in 1 2; do
  for v in grs-base grs; do
    for op in "" --ar; do
      timeout 90 $MPI -np 2 build-gpu/$v/mkbench_gemm_rs $op $SH --tag $v$op-$r > $W/b-$v$op-$r.txt 2>&1
      echo "== $v ${op:-rs} round $r rc=$? $(el)" >> $S
      grep -E "^ *[0-9]+ x 8192 x 8192|^ *[0-9]+x8192x8192" $W/b-$v$op-$r.txt | cut -c1-150 >> $S
    done
  done
done
if [ -x build-gpu/grs-gdt/mkbench_gemm_rs ]; then
  for op in "" --ar; do
    timeout 60 $MPI -np 2 build-gpu/grs-gdt/mkbench_gemm_rs $op --shapes 16x8192x8192 --rounds 1 --iters 40 --no-nccl > $W/gdt16$op.txt 2>&1; echo "trace 16 ${op:-rs} rc=$? $(el)" >> $S
    timeout 60 $MPI -np 2 build-gpu/grs-gdt/mkbench_gemm_rs $op --shapes 128x8192x8192 --rounds 1 --iters 40 --no-nccl > $W/gdt128$op.txt 2>&1; echo "trace 128 ${op:-rs} rc=$? $(el)" >> $S
  done
fi
export MK_GPU_DEADLINE=$(( T0 + 565 ))
OUT=$W/t bash tests/gpu/gemm_rs.sh test > $W/t-rs.txt 2>&1; echo "gemm_rs.sh test rc=$? $(el)" >> $S
cat $W/t/gemm_rs-summary.txt >> $S
OUT=$W/t bash tests/gpu/gemm_rs.sh ar-test > $W/t-ar.txt 2>&1; echo "gemm_rs.sh ar-test rc=$? $(el)" >> $S
cat $W/t/gemm_ar-summary.txt >> $S
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
