#!/bin/bash
# s34 call 2 (2 x H200): the decode kernel's lab trace (-DMKI_GDEC_TRACE=30, HEAD + the in-flight MMAs) at
# M = 16 / 128 for both ops; mkbench gemm_rs (reduce-scatter) at M = 16 / 64 / 128, base / new in turns, twice;
# then tests/gpu/moe.sh test-gpus on main's MoE build (the review's moe_sync.cuh move, never run on a GPU).
set -u
tar xJf build-gpu/s34a.tar.xz || exit 1
tar xJf build-gpu/s34b.tar.xz || exit 1
O=${OUT:-/tmp/s34out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
for op in "" --ar; do
  for m in 16 128; do
    OUT=$W timeout 60 $MPI -np 2 build-gpu/grs-gdt/mkbench_gemm_rs $op --shapes ${m}x8192x8192 --rounds 1 --iters 40 --no-nccl > $W/gdt$m$op.txt 2>&1
    echo "trace $m ${op:-rs} rc=$? $(el)" >> $S
    grep GDTRACE $W/gdt$m$op.txt | awk -v tag="$m${op:-rs}" '{for(i=1;i<=NF;i++) if($i ~ /^(loop|pub|seen|summed|end|stored)$/) v[$i]=v[$i]" "$(i+1)} END {for (k in v) {n=split(v[k],a," "); asort(a); printf "%s %s: min %s med %s max %s (n %d)\n", tag, k, a[1], a[int((n+1)/2)], a[n], n}}' | sort >> $S
  done
done
SH="--shapes 16x8192x8192,64x8192x8192,128x8192x8192 --rounds 2 --iters 20"
for r in 1 2; do
  for v in grs-base grs; do
    OUT=$W/j timeout 90 $MPI -np 2 build-gpu/$v/mkbench_gemm_rs $SH --tag $v-$r > $W/b-$v-$r.txt 2>&1
    echo "== $v rs round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x8192x8192" $W/b-$v-$r.txt | cut -c1-150 >> $S
  done
done
export MK_GPU_DEADLINE=$(( T0 + 560 ))
OUT=$W/t bash tests/gpu/moe.sh test-gpus > $W/t-moe.txt 2>&1; echo "moe.sh test-gpus rc=$? $(el)" >> $S
cat $W/t/*summary*.txt >> $S 2>/dev/null
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
