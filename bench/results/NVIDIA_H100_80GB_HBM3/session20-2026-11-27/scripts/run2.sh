#!/bin/bash
# s20 call 2 (4 x H100): lab20a = main + REDUCE loading every input's vectors before adding (U=2, G=4)
# + LAB-only MKL_CHUNK (chunk bytes below the slot on one node).  Correctness of the lab at 4 GPUs,
# then rs/ar main vs lab in turns (2 rounds), then the all-reduce's chunk sweep (lab).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v20a.tar.xz; tar xJf build-gpu/lab20a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_CHUNK -x MK_COLL_CTAS"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" | tee -a $S; }
nvidia-smi -L | tee -a $S
t "lab 4gpu coll correct 16M" 150 4 build-gpu/lab20a/test_coll correct $((16<<20))
MKL_CHUNK=16384 t "lab 4gpu correct 16M chunk 16K" 150 4 build-gpu/lab20a/test_coll correct $((16<<20))
MKL_CHUNK=16384 t "lab 4gpu stress chunk 16K" 90 4 build-gpu/lab20a/test_coll stress
bw() { # tag bin args
  local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll "$@" --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce|alltoall) " $W/bw-$tag.log | awk '{printf "  %-13s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}' | tee -a $S; }
for r in 1 2; do
  bw main-r$r build-gpu/rt --op rs,ar --min 1M --max 1G
  bw lab-r$r build-gpu/lab20a --op rs,ar --min 1M --max 1G
done
for c in 16384 32768 65536 131072; do
  MKL_CHUNK=$c bw ar-chunk$c build-gpu/lab20a --op ar,rs --min 4M --max 256M
done
MKL_CHUNK=32768 MK_COLL_CTAS=32 bw ar-chunk32768-ctas32 build-gpu/lab20a --op ar --min 4M --max 256M
bw main-r3 build-gpu/rt --op ar,rs --min 4M --max 256M
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
