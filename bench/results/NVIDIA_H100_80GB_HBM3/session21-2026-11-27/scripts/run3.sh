#!/bin/bash
# s21 call 3 (4 GPUs): the plan's choices at 4 ranks for all-reduce / reduce-scatter 4 MB - 256 MB, main's binaries
# (build-gpu/rt): default, MK_COLL_MOVER=reg, MK_COLL_MOVER=tma, MK_COLL_CTAS=32, in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_COLL_MOVER -x MK_COLL_CTAS"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
bw() { local tag=$1; shift
  OUT=$W timeout 150 $MPIB -np 4 build-gpu/rt/mkbench_coll --op ar,rs --min 2M --max 256M --iters 20 "$@" --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do
  bw def-r$r
  MK_COLL_MOVER=reg bw reg-r$r
  MK_COLL_MOVER=tma bw tma-r$r
  MK_COLL_CTAS=32 bw c32-r$r
done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
