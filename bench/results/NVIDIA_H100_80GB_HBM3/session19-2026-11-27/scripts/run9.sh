#!/bin/bash
# s19 call 9: the committed build (871f730): tests/gpu/ag_gemm.sh test (one node, MPS, 2 x 1 and MPS 2 x 2, the
# forced-fused steps), soaks of 20 s with fused mkAllGatherGemm forced beside every other op at 2 x 1 and MPS 2 x 2,
# test_coll correct at 2 x 1, the kill drill's 2 x 2 steps with fused forced.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19g.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_SPLIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-44s rc %d %4d s  %s\n" "$tag" $rc $(($(date +%s)-t0)) "$(grep -hiE 'soak.*(calls|wrong)|DONE' $f | tail -1 | cut -c1-90)" | tee -a $S
}
nvidia-smi -L | tee -a $S
MK_GPU_DEADLINE=$(( $(date +%s) + 200 )) OUT=$W/agg bash tests/gpu/ag_gemm.sh test > $W/agg-test.txt 2>&1; echo "ag_gemm.sh test rc=$?" | tee -a $S
cat $W/agg/ag_gemm-summary.txt | tee -a $S
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MKT_NO_NCCL=1
MK_NODE_SIZE=1 t "2gpu 2x1 test_coll correct" 90 2 build-gpu/rt/test_coll correct $((16<<20))
MK_NODE_SIZE=1 MK_SM_SPLIT=ag_gemm:fused=1 t "2gpu 2x1 soak 20 s fused ag_gemm" 60 2 build-gpu/rt/test_scale soak 20
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MK_NODE_SIZE=2 MK_SM_SPLIT=ag_gemm:fused=1 t "4 ranks 2x2 MPS soak 20 s fused ag_gemm" 70 4 build-gpu/rt/test_scale soak 20
  echo quit | nvidia-cuda-mps-control
  sleep 1
fi
unset MKT_NO_NCCL
OUT=$W MK_SM_SPLIT=ag_gemm:fused=1 MK_KILL_ONLY="2x2" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill 2x2 fused rc=$?" | tee -a $S; tail -7 $W/kill-run.txt | tee -a $S
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log *.txt agg && cd $OUT && rm -rf $W
