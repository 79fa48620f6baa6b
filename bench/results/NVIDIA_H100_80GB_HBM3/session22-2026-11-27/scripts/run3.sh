#!/bin/bash
# s22 call 3 (4 GPUs): all-reduce and reduce-scatter peer after peer in groups of 4 chunks (lab MKI_LAB_AR_PM;
# MKL_AR_PM / MKL_RS_PM set: on).  test_coll correct (default CTAs, and 4 / 3 CTAs: many chunks per part, so
# several groups), stress, graph with both on at 4 GPUs, correct at 3; traces; bandwidth ar,rs 1 MB - 1 GB off / on
# in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22c.tar.xz
B=build-gpu/s22c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
export MKL_AR_PM=1 MKL_RS_PM=1
MPIB0="$MPIB"; MPIB="$MPIB -x MKL_AR_PM -x MKL_RS_PM"
t correct 150 4 $B/test_coll correct $((300<<20))
MK_COLL_CTAS=4 t correct-c4 150 4 -x MK_COLL_CTAS $B/test_coll correct $((300<<20))
MK_COLL_CTAS=3 t correct-c3 150 4 -x MK_COLL_CTAS $B/test_coll correct $((20<<20))
t stress 90 4 $B/test_coll stress
MK_COLL_CTAS=3 t stress-c3 90 4 -x MK_COLL_CTAS $B/test_coll stress
t graph 90 4 $B/test_coll graph
MK_COLL_CTAS=4 t correct3-c4 150 3 -x MK_COLL_CTAS $B/test_coll correct $((20<<20))
trc() { local tag=$1; shift
  OUT=$W timeout 120 $MPIB -np 4 $B/tr/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log >> $W/trsum-$tag.txt 2>&1; grep -E '^(allreduce|reducescatter) ' $W/tr-$tag.log >> $S; }
for o in "ar1G --op ar --min 1G --max 1G" "rs16 --op rs --min 16M --max 16M"; do
  set -- $o; n=$1; shift
  (unset MKL_AR_PM MKL_RS_PM; MPIB="$MPIB0"; trc $n-off "$@"); trc $n-on "$@"
done
bw() { local tag=$1; shift
  OUT=$W timeout 200 $MPIB -np 4 $B/mkbench_coll --op ar,rs --min 1M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do (unset MKL_AR_PM MKL_RS_PM; MPIB="$MPIB0"; bw off-r$r); bw on-r$r; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
