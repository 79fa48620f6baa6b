#!/bin/bash
# s20 call 7 (4 x H100): lab20h = owed arrive signals off peer-major (SEND of RS/AR/AG-A2A at 2 ranks, SEND2),
# released once the next copy's first piece is stored (not after the whole next copy).  Tests, then main / h in turns.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v20a.tar.xz; tar xJf build-gpu/lab20h.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_CHUNK -x MK_COLL_CTAS -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" | tee -a $S; }
nvidia-smi -L | tee -a $S
L=build-gpu/lab20h
for i in 1 2; do t "h 4gpu correct 16M #$i" 150 4 $L/test_coll correct $((16<<20)); done
t "h 4gpu stress" 90 4 $L/test_coll stress
t "h 4gpu graph" 90 4 $L/test_coll graph
MKL_CHUNK=16384 t "h 4gpu correct 16M chunk 16K" 150 4 $L/test_coll correct $((16<<20))
MK_COLL_CTAS=3 t "h 4gpu correct 16M 3 CTAs" 150 4 $L/test_coll correct $((16<<20))
CUDA_VISIBLE_DEVICES=0,1 t "h 2gpu correct 16M" 150 2 $L/test_coll correct $((16<<20))
CUDA_VISIBLE_DEVICES=0,1 t "h 2gpu stress" 90 2 $L/test_coll stress
CUDA_VISIBLE_DEVICES=0,1 t "h 2gpu graph" 90 2 $L/test_coll graph
bw() { # tag np bin args
  local tag=$1 np=$2 bin=$3; shift 3
  OUT=$W timeout 150 $MPIB -np $np $bin/mkbench_coll "$@" --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S; }
for r in 1 2; do
  bw main-r$r 4 build-gpu/rt --op ag,rs,ar,a2a --min 1M --max 1G
  bw h-r$r 4 $L --op ag,rs,ar,a2a --min 1M --max 1G
done
for r in 1 2; do
  CUDA_VISIBLE_DEVICES=0,1 bw main-2r$r 2 build-gpu/rt --op ag,rs,ar,a2a --min 1M --max 1G
  CUDA_VISIBLE_DEVICES=0,1 bw h-2r$r 2 $L --op ag,rs,ar,a2a --min 1M --max 1G
done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if CUDA_VISIBLE_DEVICES=0 nvidia-cuda-mps-control -d; then
  CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1 MK_SM_BUDGET=16 t "h 8 ranks 1 GPU MPS correct 16M" 200 8 $L/test_coll correct $((16<<20))
  CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1 MK_SM_BUDGET=16 t "h 8 ranks 1 GPU MPS stress" 120 8 $L/test_coll stress
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
