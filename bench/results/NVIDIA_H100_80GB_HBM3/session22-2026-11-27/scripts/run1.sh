#!/bin/bash
# s22 call 1 (4 GPUs): staggered two-phase all-reduce (the second half of the channels a phase behind,
# MK_COLL_STAGGER_MAX).  Same binaries, off (0) / on (1G) by the parameter.  test_coll correct / stress / graph
# with it on at 4 GPUs; traces ar 16 / 64 MB off / on; bandwidth ar 1 MB - 1 GB off / on in turns, 2 rounds at
# 4 ranks, 1 round at 2 ranks.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_COLL_STAGGER_MAX"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
export MK_COLL_STAGGER_MAX=1G
t correct64M 200 4 build-gpu/stg/test_coll correct $((64<<20))
t stress 90 4 build-gpu/stg/test_coll stress
t graph 90 4 build-gpu/stg/test_coll graph
trc() { local tag=$1; shift
  OUT=$W timeout 120 $MPIB -np 4 build-gpu/stgtr/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log >> $W/trsum-$tag.txt 2>&1; grep -E '^allreduce ' $W/tr-$tag.log >> $S; }
for o in "ar16 --op ar --min 16M --max 16M" "ar64 --op ar --min 64M --max 64M"; do
  set -- $o; n=$1; shift
  MK_COLL_STAGGER_MAX=0 trc $n-off "$@"; MK_COLL_STAGGER_MAX=1G trc $n-on "$@"
done
bw() { local tag=$1 np=$2 dev=$3; shift 3
  CUDA_VISIBLE_DEVICES=$dev OUT=$W timeout 150 $MPIB -np $np build-gpu/stg/mkbench_coll --op ar --min 1M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^allreduce ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do MK_COLL_STAGGER_MAX=0 bw off-r$r 4 0,1,2,3; MK_COLL_STAGGER_MAX=1G bw on-r$r 4 0,1,2,3; done
MK_COLL_STAGGER_MAX=0 bw off-2r 2 0,1; MK_COLL_STAGGER_MAX=1G bw on-2r 2 0,1
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
