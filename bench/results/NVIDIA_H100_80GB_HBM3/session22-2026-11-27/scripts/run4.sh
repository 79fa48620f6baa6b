#!/bin/bash
# s22 call 4 (4 GPUs): the landed rule (reduce-scatter with parts of one chunk and the two-phase all-reduce with
# parts of <= 4 chunks peer after peer, on one node of > 2 ranks) through the collective tests: 4 and 2 GPUs,
# 3 CTAs, 3 ranks, 2 x 2 virtual nodes flat and hierarchical, 8 ranks under MPS, test_scale 16, the kill drill's
# collective steps; then the record: base (call 3's lab binary without MKL_*: main's plan) / new in turns,
# ar,rs,ag,a2a 1 MB - 1 GB, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22d.tar.xz
L=build-gpu/s22d
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_COLL_CTAS -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_COLL_HIER_MIN"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
n=0
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3; n=$((n+1)); f=$W/t$n.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s FAIL lines %s (t%d.log)\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" "$(grep -c FAIL $f)" $n >> $S; }
for i in 1 2; do t "4gpu correct 300M #$i" 150 4 $L/test_coll correct $((300<<20)); done
t "4gpu stress" 90 4 $L/test_coll stress
t "4gpu graph" 90 4 $L/test_coll graph
t "4gpu nocall" 90 4 $L/test_coll nocall
MK_COLL_CTAS=3 t "4gpu correct 16M 3 CTAs" 150 4 $L/test_coll correct $((16<<20))
CUDA_VISIBLE_DEVICES=0,1,2 t "3gpu correct 64M" 150 3 $L/test_coll correct $((64<<20))
CUDA_VISIBLE_DEVICES=0,1 t "2gpu correct 16M" 150 2 $L/test_coll correct $((16<<20))
CUDA_VISIBLE_DEVICES=0,1 t "2gpu stress" 90 2 $L/test_coll stress
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
CUDA_VISIBLE_DEVICES=0,1 OUT=$W MK_GPU_KILL=$L/kill MK_KILL_ONLY="allreduce|reducescatter|allgather" timeout 200 bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill (collectives) rc=$?" >> $S; grep -E "PASS|FAIL|SKIP" $W/kill-run.txt | tail -14 >> $S
bw() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 200 $MPIB -np 4 $bin/mkbench_coll --op ar,rs,ag,a2a --min 1M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter|allgather|alltoall) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do bw base-r$r $L/base; bw new-r$r $L; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
