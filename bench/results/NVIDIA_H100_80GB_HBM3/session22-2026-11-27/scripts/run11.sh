#!/bin/bash
# s22 call 11 (2 of 4 GPUs): the stagger again (labs/stagger.patch on HEAD 84fb0c3), at 2 ranks where call 1 saw
# 16 MB -9%: test_coll correct / stress / graph with it on; ar 4 MB - 64 MB off (MK_COLL_STAGGER_MAX=0) / on (1G) in
# turns, 3 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22i.tar.xz
B=build-gpu/s22i
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np env $ENVS "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
ENVS="MK_COLL_STAGGER_MAX=1G"
t correct 150 2 $B/test_coll correct $((300<<20))
t stress 90 2 $B/test_coll stress
t graph 90 2 $B/test_coll graph
bw() { local tag=$1; shift
  for lo in 4M 8M; do
  OUT=$W timeout 100 $MPIB -np 2 env $ENVS $B/mkbench_coll --op ar --min $lo --max 64M --iters 40 --tag $tag-$lo > $W/bw-$tag-$lo.log 2>&1; echo "== $tag $lo rc=$?" >> $S
  grep -E '^allreduce ' $W/bw-$tag-$lo.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; done; }
for r in 1 2 3; do ENVS="MK_COLL_STAGGER_MAX=0" bw off-r$r; ENVS="MK_COLL_STAGGER_MAX=1G" bw on-r$r; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
