#!/bin/bash
# s21 call 1 (4 GPUs): where a 4-rank all-reduce's time goes (lab build ctrace = main + -DMKI_COLL_TRACE=20:
# globaltimer stamps of CTAs 0, 32, 63 in calls e % 20 == 10), all-reduce 16 / 64 MB, reduce-scatter 4 / 16 MB;
# then main: the slots against zero copy (mkbench coll --zcopy) at 64 MB - 1 GB, 2 rounds in turns.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
bw() { # tag np bin args
  local tag=$1 np=$2 bin=$3; shift 3
  OUT=$W timeout 150 $MPIB -np $np $bin/mkbench_coll "$@" --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S; }
bw tr-ar16 4 build-gpu/ctrace --op ar --min 16M --max 16M --iters 40
bw tr-ar64 4 build-gpu/ctrace --op ar --min 64M --max 64M --iters 40
bw tr-rs4 4 build-gpu/ctrace --op rs --min 4M --max 4M --iters 40
bw tr-rs16 4 build-gpu/ctrace --op rs --min 16M --max 16M --iters 40
bw tr-ag16 4 build-gpu/ctrace --op ag --min 16M --max 16M --iters 40
for f in $W/bw-tr-*.log; do echo "## $(basename $f)" >> $S; python3 tools/coll_trace.py $f >> $S 2>&1; grep -E '^ *(allreduce|reducescatter|allgather|ar|rs|ag) ' $f | head -3 >> $S; done
for r in 1 2; do
  bw slots-r$r 4 build-gpu/rt --op ag,rs,ar,a2a --min 64M --max 1G --iters 20
  bw zcopy-r$r 4 build-gpu/rt --op ag,rs,ar,a2a --min 64M --max 1G --iters 20 --zcopy
done
for f in $W/bw-slots-*.log $W/bw-zcopy-*.log; do echo "## $(basename $f)" >> $S; grep -E '^ *(ag|rs|ar|a2a|allgather|reducescatter|allreduce|alltoall) ' $f >> $S; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
