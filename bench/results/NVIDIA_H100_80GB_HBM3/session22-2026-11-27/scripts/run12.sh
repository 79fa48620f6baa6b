#!/bin/bash
# s22 call 12 (4 GPUs): the landed stagger (2 ranks, parts of one chunk; plan rule) through the tests: 2 GPUs correct
# x2 / stress / graph / nocall, MPS 2 ranks on one GPU, 2 x 1 virtual nodes, 4 GPUs correct / stress, the kill drill's
# all-reduce steps; then 2 ranks ar 4 MB - 64 MB, base (HEAD 84fb0c3's mkbench, call 7's) / new in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22j.tar.xz
L=build-gpu/s22j
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
n=0
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3; n=$((n+1)); f=$W/t-$(echo "$tag" | sed 's/[^A-Za-z0-9]/_/g').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" >> $S; }
for i in 1 2; do CUDA_VISIBLE_DEVICES=0,1 t "2gpu correct 300M #$i" 150 2 $L/test_coll correct $((300<<20)); done
CUDA_VISIBLE_DEVICES=0,1 t "2gpu stress" 90 2 $L/test_coll stress
CUDA_VISIBLE_DEVICES=0,1 t "2gpu graph" 90 2 $L/test_coll graph
CUDA_VISIBLE_DEVICES=0,1 t "2gpu nocall" 90 2 $L/test_coll nocall
t "4gpu correct 64M" 150 4 $L/test_coll correct $((64<<20))
t "4gpu stress" 90 4 $L/test_coll stress
(export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1 CUDA_VISIBLE_DEVICES=0,1
 t "2gpu 2x1 correct 16M" 150 2 $L/test_coll correct $((16<<20)))
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if CUDA_VISIBLE_DEVICES=0 nvidia-cuda-mps-control -d; then
  (export CUDA_VISIBLE_DEVICES=0 MKT_NO_NCCL=1
   t "2 ranks 1 GPU MPS correct 64M" 200 2 $L/test_coll correct $((64<<20))
   t "2 ranks 1 GPU MPS stress" 120 2 $L/test_coll stress)
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
CUDA_VISIBLE_DEVICES=0,1 OUT=$W MK_GPU_KILL=$L/kill MK_KILL_ONLY="allreduce" timeout 150 bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill (all-reduce) rc=$?" >> $S; grep -E "PASS|FAIL|SKIP" $W/kill-run.txt | tail -12 >> $S
bw() { local tag=$1 bin=$2; shift 2
  for lo in 4M 8M; do
  CUDA_VISIBLE_DEVICES=0,1 OUT=$W timeout 100 $MPIB -np 2 $bin/mkbench_coll --op ar --min $lo --max 64M --iters 40 --tag $tag-$lo > $W/bw-$tag-$lo.log 2>&1; echo "== $tag $lo rc=$?" >> $S
  grep -E '^allreduce ' $W/bw-$tag-$lo.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; done; }
for r in 1 2; do bw base-r$r $L/base; bw new-r$r $L; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
