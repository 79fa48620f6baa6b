#!/bin/bash
# s20 call 11 (4 x H100): new21 = new20 + the pipelined all-reduce's chunk (a quarter of a CTA's part, >= 128 KiB,
# where the part holds < 4 slots).  Correctness, then new20 / new21 in turns: all-reduce 4 MB - 1 GB, 4 ranks 2 rounds,
# 2 ranks 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/new21.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 np=$2; shift 2; timeout 100 $MPIB -np $np "$@" > $W/$tag.log 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $W/$tag.log) FAIL $(grep -c FAIL $W/$tag.log)" | tee -a $S; }
t t4-correct 4 build-gpu/new21/test_coll correct $((64<<20))
t t4-stress 4 build-gpu/new21/test_coll stress
CUDA_VISIBLE_DEVICES=0,1 t t2-correct 2 build-gpu/new21/test_coll correct $((64<<20))
bw() { local tag=$1 np=$2 bin=$3; shift 3
  OUT=$W timeout 120 $MPIB -np $np $bin/mkbench_coll "$@" --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S; }
A="--op ar --min 4M --max 1G --iters 20"
for r in 1 2; do bw n20-r$r 4 build-gpu/new20 $A; bw n21-r$r 4 build-gpu/new21 $A; done
for r in 1 2; do CUDA_VISIBLE_DEVICES=0,1 bw n20-2r$r 2 build-gpu/new20 $A; CUDA_VISIBLE_DEVICES=0,1 bw n21-2r$r 2 build-gpu/new21 $A; done
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
