#!/bin/bash
# s22 call 9 (4 GPUs): larger slots (MK_WORKSPACE_SIZE=2049M: 1 MiB slots instead of 256 KiB), so that the 1 GB
# all-reduce's parts are 4 chunks and HEAD's plan takes peer after peer there; HEAD's mkbench_coll (call 7's), ar,rs
# 16 MB - 1 GB, default / large in turns, 2 rounds.
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
  OUT=$W timeout 150 $MPIB -np 4 env $ENVS $B/mkbench_coll --op ar,rs --min 16M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do ENVS="MK_DEBUG=WARN" bw def-r$r; ENVS="MK_WORKSPACE_SIZE=2049M" bw ws2g-r$r; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
