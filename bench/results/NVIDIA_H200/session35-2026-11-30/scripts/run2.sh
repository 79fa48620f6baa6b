#!/bin/bash
# s35 call 2 (2 x H200): the inputs path's timeline (lab kxt: -DMKI_KX_TRACE=30 -DMKI_KX_LAB: per-CTA waits,
# chunk arrivals of call 30) at 1 and 4 copy streams per peer, then mkbench gemm_rs: partials / inputs at
# streams 1, 2, 4 and chunks 4M / 8M (lab build), in turns.
set -u
tar xJf build-gpu/s35c.tar.xz || exit 1
O=${OUT:-/tmp/s35out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_KX_LAB_SPLIT"
K=build-gpu/kxt
for sh in 8192x8192x8192 2048x8192x8192 16384x8192x8192; do
  for sp in 1 4; do
    MKI_KX_LAB_SPLIT=$sp MK_SM_SPLIT=gemm_rs:mover=ce OUT=$W/j timeout 60 $MPI -np 2 $K/mkbench_gemm_rs --shapes $sh --rounds 1 --iters 20 --tag t$sp > $W/t-$sh-$sp.txt 2>&1
    echo "== trace $sh split $sp rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$sh-$sp.txt | cut -c1-110 >> $S
    python3 s35/kxt.py $W/t-$sh-$sp.txt >> $S
  done
done
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192
for r in 1 2; do
  for v in tma:1:4M ce:1:4M ce:2:4M ce:4:4M ce:4:8M ce:2:2M; do
    IFS=: read mv sp ch <<< "$v"
    MKI_KX_LAB_SPLIT=$sp MK_SM_SPLIT=gemm_rs:mover=$mv,chunk=$ch OUT=$W/j timeout 60 $MPI -np 2 $K/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 --tag $mv$sp$ch$r > $W/b-$mv$sp$ch$r.txt 2>&1
    echo "== bench $v round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-$mv$sp$ch$r.txt | cut -c1-110 >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
