#!/bin/bash
# s21 call 13 (4 GPUs): lab pf2 = HEAD + REDUCE's leader prefetches into L2 the chunk's own input (at once) and each
# peer's chunk (as soon as it has arrived), cp.async.bulk.prefetch.L2.  test_coll; traces ctrace7 (HEAD) / ctrace11
# (pf2); HEAD (pub) / pf2 in turns, 2 rounds, rs and ar 1 MB - 1 GB.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21g.tar.xz; tar xJf build-gpu/s21k.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
t correct64M 200 4 build-gpu/pf2/test_coll correct $((64<<20))
t stress 90 4 build-gpu/pf2/test_coll stress
trc() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log | grep -E '^(reduce: chunk (arrived|written)|leave).*first' >> $S
  grep -E '^(allreduce|reducescatter) ' $W/tr-$tag.log >> $S; }
for o in "ar16 --op ar --min 16M --max 16M" "ar64 --op ar --min 64M --max 64M" "rs16 --op rs --min 16M --max 16M"; do
  set -- $o; n=$1; shift
  trc $n-main build-gpu/ctrace7 "$@"; trc $n-pf2 build-gpu/ctrace11 "$@"
done
bw() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll --op rs,ar --min 1M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do bw main-r$r build-gpu/pub; bw pf2-r$r build-gpu/pf2; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
