#!/bin/bash
# s22 call 7 (4 GPUs): the plan's knobs at 256 KB - 16 MB per call for every op (HEAD's mkbench_coll, tb0 of call 6):
# default; MK_COLL_AR_ONESHOT=0 / 16M; MK_COLL_LL_MAX=0 / 64K; MK_COLL_MOVER=tma-send; MK_COLL_CTAS=16 / 32; in turns,
# 2 rounds.
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
  for rg in "256K 16M" "512K 8M"; do set -- $rg
  OUT=$W timeout 100 $MPIB -np 4 env $ENVS $B/mkbench_coll --op ar,rs,ag,a2a --min $1 --max $2 --iters 30 --tag $tag-$1 > $W/bw-$tag-$1.log 2>&1; echo "== $tag $1 rc=$?" >> $S
  grep -E '^(allreduce|reducescatter|allgather|alltoall) ' $W/bw-$tag-$1.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; done; }
for r in 1 2; do
  ENVS="MK_DEBUG=WARN" bw def-r$r
  ENVS="MK_COLL_AR_ONESHOT=0" bw os0-r$r
  ENVS="MK_COLL_AR_ONESHOT=16M" bw os16-r$r
  ENVS="MK_COLL_LL_MAX=0" bw ll0-r$r
  ENVS="MK_COLL_LL_MAX=64K" bw ll64-r$r
  ENVS="MK_COLL_MOVER=tma-send" bw tma-r$r
  ENVS="MK_COLL_CTAS=32" bw c32-r$r
  ENVS="MK_COLL_CTAS=16" bw c16-r$r
done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
