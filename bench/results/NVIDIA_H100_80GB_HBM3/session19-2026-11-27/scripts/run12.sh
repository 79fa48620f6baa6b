#!/bin/bash
# s19 call 12: the final build (the producers' remote waits at GPU scope with pauses; model without the 0.85):
# forced-fused correctness at 2 x 1 and MPS 2 x 2, one node, the kill drill's 2 x 2 ag_gemm and allreduce steps
# forced fused, then the plan's own choice against our unfused sequence in turns.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19h.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_SPLIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-40s rc %d %3d s  PASS lines %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -c PASS $f)" | tee -a $S; }
nvidia-smi -L | tee -a $S
t "2gpu one node correct" 60 2 build-gpu/agg/test_ag_gemm correct
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
for m in correct stress "uneven 5" graph; do MK_NODE_SIZE=1 MK_SM_SPLIT=ag_gemm:fused=1 t "2x1 fused $m" 60 2 build-gpu/agg/test_ag_gemm $m; done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MKT_NO_NCCL=1 MK_NODE_SIZE=2 MK_SM_SPLIT=ag_gemm:fused=1 t "MPS 2x2 fused correct" 60 4 build-gpu/agg/test_ag_gemm correct
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
OUT=$W MK_SM_SPLIT=ag_gemm:fused=1 MK_KILL_ONLY="2x2.*(ag_gemm|allreduce)" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill 2x2 fused rc=$?" | tee -a $S; tail -4 $W/kill-run.txt | tee -a $S
OUT=$W MK_NODE_SIZE=1 timeout 120 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x8192x8192,2048x8192x8192,8192x65536x8192 --iters 5 --rounds 2 --tag final > $W/bench.log 2>&1
echo "bench rc=$?" | tee -a $S; grep -E "^[0-9]+x[0-9]+x[0-9]+: ours|^[0-9]+x[0-9]+x[0-9]+ +[0-9]" $W/bench.log | tee -a $S
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log *.txt *.json && cd $OUT && rm -rf $W
