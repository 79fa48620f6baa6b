#!/bin/bash
# s20 call 6 (4 x H100): lab20f = owed signals only off peer-major (SEND of RS/AR, SEND2), stores bounded by completion (wait_group 3, not .read); lab20g = the same with .read as before.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v20a.tar.xz; tar xJf build-gpu/lab20fg.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_CHUNK -x MK_COLL_CTAS"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" | tee -a $S; }
nvidia-smi -L | tee -a $S
for L in f g; do
  t "lab$L 4gpu correct 16M" 150 4 build-gpu/lab20$L/test_coll correct $((16<<20))
  t "lab$L 4gpu stress" 90 4 build-gpu/lab20$L/test_coll stress
  CUDA_VISIBLE_DEVICES=0,1 t "lab$L 2gpu correct 16M" 150 2 build-gpu/lab20$L/test_coll correct $((16<<20))
done
bw() { # tag np bin args
  local tag=$1 np=$2 bin=$3; shift 3
  OUT=$W timeout 150 $MPIB -np $np $bin/mkbench_coll "$@" --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce|alltoall) " $W/bw-$tag.log | awk '{printf "  %-13s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}' | tee -a $S; }
for r in 1 2; do
  bw main-r$r 4 build-gpu/rt --op ag,rs,ar,a2a --min 1M --max 1G
  bw f-r$r 4 build-gpu/lab20f --op ag,rs,ar,a2a --min 1M --max 1G
  bw g-r$r 4 build-gpu/lab20g --op ag,rs,ar,a2a --min 1M --max 1G
done
export CUDA_VISIBLE_DEVICES=0,1
for r in 1 2; do bw main-2r$r 2 build-gpu/rt --op ag,rs,ar,a2a --min 1M --max 1G; bw f-2r$r 2 build-gpu/lab20f --op ag,rs,ar,a2a --min 1M --max 1G; bw g-2r$r 2 build-gpu/lab20g --op ag,rs,ar,a2a --min 1M --max 1G; done
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
