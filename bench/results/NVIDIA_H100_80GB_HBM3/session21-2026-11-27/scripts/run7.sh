#!/bin/bash
# (As run.  Its function tr shadows the tr command that t() uses for log names: every test wrote $W/.log in
# turn, counted right after it ran, and each call of t() also ran a stray "tr -c" mkbench (rc 2, no effect).)
# s21 call 7 (4 GPUs): traces of main (HEAD = pub + the trace's owed-credit and round stamps: ctrace7), all-reduce 16 /
# 64 MB, reduce-scatter 16 MB; then the landed build (pub = HEAD's coll code) through the collective tests: 4 and 2
# GPUs, 2 x 2 virtual nodes flat and hierarchical, 8 ranks under MPS, test_scale 16 / 8 ranks, the kill drill's
# collective steps (kill21 = test_kill on the same library).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21g.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_COLL_CTAS -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_COLL_HIER_MIN"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
tr() { local tag=$1; shift
  OUT=$W timeout 150 $MPIB -np 4 build-gpu/ctrace7/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/tr-$tag.log >> $S; }
tr ar16 --op ar --min 16M --max 16M
tr ar64 --op ar --min 64M --max 64M
tr rs16 --op rs --min 16M --max 16M
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" >> $S; }
L=build-gpu/pub
for i in 1 2; do t "4gpu correct 16M #$i" 150 4 $L/test_coll correct $((16<<20)); done
t "4gpu stress" 90 4 $L/test_coll stress
t "4gpu nocall" 90 4 $L/test_coll nocall
MK_COLL_CTAS=3 t "4gpu correct 16M 3 CTAs" 150 4 $L/test_coll correct $((16<<20))
for i in 1 2; do CUDA_VISIBLE_DEVICES=0,1 t "2gpu correct 16M #$i" 150 2 $L/test_coll correct $((16<<20)); done
CUDA_VISIBLE_DEVICES=0,1 t "2gpu stress" 90 2 $L/test_coll stress
CUDA_VISIBLE_DEVICES=0,1 t "2gpu graph" 90 2 $L/test_coll graph
(export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=2
 t "4gpu 2x2 correct 4M" 150 4 $L/test_coll correct $((4<<20))
 MK_COLL_HIER_MIN=1 t "4gpu 2x2 hierarchical correct 4M" 150 4 $L/test_coll correct $((4<<20)))
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if CUDA_VISIBLE_DEVICES=0,1 nvidia-cuda-mps-control -d; then
  (export CUDA_VISIBLE_DEVICES=0,1 MKT_NO_NCCL=1
   MK_SM_BUDGET=16 t "8 ranks 2 GPUs MPS correct 16M" 200 8 $L/test_coll correct $((16<<20))
   MK_SM_BUDGET=16 t "8 ranks 2 GPUs MPS stress" 120 8 $L/test_coll stress
   MK_NODE_SIZE=8 t "16 ranks 2x8 test_scale x3" 180 16 $L/test_scale 3)
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
CUDA_VISIBLE_DEVICES=0,1 OUT=$W MK_GPU_KILL=build-gpu/kill21 MK_KILL_ONLY="allreduce|reducescatter|allgather" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill (collectives) rc=$?" >> $S; grep -E "PASS|FAIL|SKIP" $W/kill-run.txt | tail -12 >> $S
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
