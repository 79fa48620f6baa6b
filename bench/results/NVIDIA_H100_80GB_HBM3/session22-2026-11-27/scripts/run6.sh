#!/bin/bash
# s22 call 6 (4 GPUs): the TMA pipe's depth (kernels/rt/copy.cuh; lab builds with -DMKI_TMA_STAGES / _AHEAD / _PIECE):
# tb0 = HEAD (6 stages, loads 2 pieces ahead, 32 KiB split among the pipes), tb1 = 8 / 4 / 24 KiB, tb2 = 8 / 3 / 24
# KiB, tb3 = 6 / 3 / 32 KiB.  test_coll correct each; then ar,rs,ag 16 MB - 1 GB in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22f.tar.xz
B=build-gpu/s22f
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
for i in 1 2 3; do t correct-tb$i 150 4 $B/tb$i/test_coll correct $((300<<20)); done
bw() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll --op ar,rs,ag --min 16M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter|allgather) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do for i in 0 1 2 3; do bw tb$i-r$r $B/tb$i; done; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
