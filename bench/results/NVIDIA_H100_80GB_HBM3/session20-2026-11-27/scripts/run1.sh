#!/bin/bash
# s20 call 1 (nvidia-h100-x4): the review commits 7bea300 / 1e1fdbb (HEAD 8fa4e61) on the GPU (2 GPUs: fused
# ag_gemm across 2 x 1 and MPS 2 x 2, collectives at 2 x 1, the kill drill's 2 x 2 steps with fused ag_gemm),
# then 4 ranks one per GPU: test_coll correct / stress, mkbench coll bandwidth 1 MB - 1 GB and --lat 8 B - 256 KB.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v20a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_SPLIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" | tee -a $S; }
nvidia-smi -L | tee -a $S
t "2gpu one node ag_gemm correct" 60 2 build-gpu/agg/test_ag_gemm correct
(
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
for m in correct stress "uneven 5" graph; do MK_SM_SPLIT=ag_gemm:fused=1 t "2x1 fused ag_gemm $m" 60 2 build-gpu/agg/test_ag_gemm $m; done
t "2x1 coll correct 16M" 120 2 build-gpu/rt/test_coll correct $((16<<20))
t "2x1 coll stress" 90 2 build-gpu/rt/test_coll stress
)
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MK_TRANSPORT=socket MKT_NO_NCCL=1 MK_NODE_SIZE=2 MK_SM_SPLIT=ag_gemm:fused=1 t "MPS 2x2 fused ag_gemm correct" 60 4 build-gpu/agg/test_ag_gemm correct
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
OUT=$W MK_SM_SPLIT=ag_gemm:fused=1 MK_KILL_ONLY="2x2" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill 2x2 (fused ag_gemm) rc=$?" | tee -a $S; grep -E "PASS|FAIL|SKIP" $W/kill-run.txt | tail -8 | tee -a $S
export CUDA_VISIBLE_DEVICES=0,1,2,3
t "4gpu coll correct 16M" 150 4 build-gpu/rt/test_coll correct $((16<<20))
t "4gpu coll stress" 90 4 build-gpu/rt/test_coll stress
timeout 240 $MPIB -np 4 build-gpu/rt/mkbench_coll --op ag,rs,ar,a2a --min 1M --max 1G --iters 20 --tag bw4 > $W/bw4.log 2>&1; echo "== bw 4 ranks rc=$?" | tee -a $S
grep -E "^(allgather|reducescatter|allreduce|alltoall) " $W/bw4.log | awk '{printf "  %-13s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}' | tee -a $S
timeout 120 $MPIB -np 4 build-gpu/rt/mkbench_coll --lat --op ag,rs,ar,a2a --min 8 --max 256K --tag lat4 > $W/lat4.log 2>&1; echo "== lat 4 ranks rc=$?" | tee -a $S
grep -E "^(allgather|reducescatter|allreduce|alltoall) " $W/lat4.log | awk '{print "  "$1,$2,"ev",$4,$5,"gpu",$10,$11,$12}' | tee -a $S
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
