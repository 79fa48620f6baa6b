#!/bin/bash
# s22 call 10 (4 GPUs): CTAs of mid-sized calls (between LL's 256 KiB and 1 MiB per peer block): HEAD's plan against
# MK_COLL_CTAS=16 / 24 at 384 KB - 3 MB, every op, in turns, 2 rounds (call 7's binary).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22g.tar.xz
B=build-gpu/s22g
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
bw() { local tag=$1; shift
  for lo in 384K 512K 768K; do
  OUT=$W timeout 100 $MPIB -np 4 env $ENVS $B/mkbench_coll --op ar,rs,ag,a2a --min $lo --max 3M --iters 40 --tag $tag-$lo > $W/bw-$tag-$lo.log 2>&1; echo "== $tag $lo rc=$?" >> $S
  grep -E '^(allreduce|reducescatter|allgather|alltoall) ' $W/bw-$tag-$lo.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; done; }
for r in 1 2; do ENVS="MK_DEBUG=WARN" bw def-r$r; ENVS="MK_COLL_CTAS=16" bw c16-r$r; ENVS="MK_COLL_CTAS=24" bw c24-r$r; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
