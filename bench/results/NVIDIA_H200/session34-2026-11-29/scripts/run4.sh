#!/bin/bash
# s34 call 4 (2 x H200): the decode kernel's ring deeper (lab deep: 16 stages at NW <= 32, 12 at 64, 7 at 128,
# against 8 / 8 / 6) on top of the sum of call 3 (now U = 8 only where a thread owns more than 2 elements).
# Traces (gdt = grs's code, deep) at M = 16 / 128 both ops; mkbench base / grs / deepn in turns, twice.
set -u
tar xJf build-gpu/s34d.tar.xz || exit 1
O=${OUT:-/tmp/s34out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
summ() { grep GDTRACE $1 | python3 -c "
import sys,statistics as st
d={}
for l in sys.stdin:
    w=l.split(); r=int(w[2])
    for k in ('loop','stored','pub','seen','summed','end'):
        i=w.index(k); d.setdefault((r,k),[]).append(int(w[i+1]))
for r in (0,1):
    print('  rank',r,' '.join('%s %.1f'%(k,st.median([x for x in d[(r,k)] if x>=0])/1000) for k in ('loop','stored','pub','seen','summed','end') if [x for x in d.get((r,k),[]) if x>=0]))
"; }
for v in gdt deep; do
  for op in "" --ar; do
    for m in 16 64 128; do
      OUT=$W/j timeout 60 $MPI -np 2 build-gpu/grs-$v/mkbench_gemm_rs $op --shapes ${m}x8192x8192 --rounds 1 --iters 40 --no-nccl > $W/$v$m$op.txt 2>&1
      echo "trace $v $m ${op:-rs} rc=$? $(el)" >> $S; summ $W/$v$m$op.txt >> $S
    done
  done
done
for r in 1 2; do
  for v in grs-base grs grs-deepn; do
    for op in "" --ar; do
      sh="16x8192x8192,64x8192x8192,128x8192x8192"; [ -n "$op" ] && sh="1x8192x8192,$sh"
      OUT=$W/j timeout 90 $MPI -np 2 build-gpu/$v/mkbench_gemm_rs $op --shapes $sh --rounds 2 --iters 20 --tag $v$op-$r > $W/b-$v$op-$r.txt 2>&1
      echo "== $v ${op:-rs} round $r rc=$? $(el)" >> $S
      grep -E "^[0-9]+x8192x8192" $W/b-$v$op-$r.txt | cut -c1-150 >> $S
    done
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
