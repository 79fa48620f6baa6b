#!/bin/bash
# s21 call 11 (4 GPUs): the landed build (pub = HEAD's collectives) at 4 ranks for the record: mkbench coll, every op,
# 1 MB - 1 GB, 2 rounds; --lat 8 B - 256 KB; all-gather / all-to-all into registered buffers (--zcopy) at 64 MB - 1 GB.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21g.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
bw() { local tag=$1; shift
  OUT=$W timeout 200 $MPIB -np 4 build-gpu/pub/mkbench_coll "$@" --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allgather|reducescatter|allreduce|alltoall) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s %s %s\n", $1, $3, $5, $6, $7, $8, $9}' >> $S; }
for r in 1 2; do bw r$r --op ag,rs,ar,a2a --min 1M --max 1G --iters 20; done
bw zc --op ag,a2a --min 64M --max 1G --iters 20 --zcopy
OUT=$W timeout 200 $MPIB -np 4 build-gpu/pub/mkbench_coll --lat --op ag,rs,ar,a2a --min 8 --max 256K --tag lat > $W/lat.log 2>&1; echo "== lat rc=$?" >> $S
grep -E '^(allgather|reducescatter|allreduce|alltoall) ' $W/lat.log >> $S
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
