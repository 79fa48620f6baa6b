#!/bin/bash
# s21 call 5 (4 GPUs): REDUCE with every input's loads in flight (lab: 2 vectors per thread and input, 4 inputs at
# once, 32-bit indices; it spills 60 bytes) in the trace build ctrace4, against ctrace (main + trace): how long REDUCE
# takes a chunk (rs 16 MB, ar 16 / 64 MB, rs 4 MB), in turns, 2 rounds; test_coll correct with it.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21a.tar.xz; tar xJf build-gpu/s21e.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
t correct16M 150 4 build-gpu/ctrace4/test_coll correct $((16<<20))
tr() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log | grep -E '^(reduce|leave).*first' >> $S; grep -E '^(allreduce|reducescatter) ' $W/tr-$tag.log >> $S; }
for r in 1 2; do
for o in "rs16 --op rs --min 16M --max 16M" "ar16 --op ar --min 16M --max 16M" "ar64 --op ar --min 64M --max 64M" "rs4 --op rs --min 4M --max 4M"; do
  set -- $o; n=$1; shift
  tr $n-main-r$r build-gpu/ctrace "$@"; tr $n-g4-r$r build-gpu/ctrace4 "$@"
done; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
