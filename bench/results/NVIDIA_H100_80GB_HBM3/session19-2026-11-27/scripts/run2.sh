#!/bin/bash
# s19 call 2: mkAllGatherGemm fused across nodes (the net CTAs): the ag_gemm test suite on 2 GPUs (one node,
# MPS, virtual nodes incl. forced-fused steps), the soak's mix with fused ag_gemm forced (2 x 1, MPS 2 x 2),
# the kill drill's 2 x 2 ag_gemm forced fused, then mkbench ag_gemm at 2 x 1 on the socket path:
# the plan's (fused) against our unfused sequence (MK_SM_SPLIT=ag_gemm:fused=0), processes in turns, NCCL on its
# socket transport as the third series.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_SM_BUDGET -x MK_SM_SPLIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  local uf=$(grep -c "unfused sequence" $f)
  printf "%-44s rc %d %4d s  unfused-lines %s  %s\n" "$tag" $rc $(($(date +%s)-t0)) "$uf" "$(grep -h 'calls, ' $f | tail -1 | cut -c1-80)" | tee -a $S
}
nvidia-smi -L | tee -a $S
OUT=$W/agg bash tests/gpu/ag_gemm.sh test > $W/agg-test.txt 2>&1; echo "ag_gemm.sh test rc=$?" | tee -a $S
cat $W/agg/ag_gemm-summary.txt | tee -a $S
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MKT_NO_NCCL=1
MK_NODE_SIZE=1 MK_SM_SPLIT=ag_gemm:fused=1 MK_DEBUG=INFO t "2gpu 2x1 soak 40 s fused ag_gemm" 90 2 build-gpu/rt/test_scale soak 40
MK_NODE_SIZE=1 t "2gpu 2x1 test_scale x3" 90 2 build-gpu/rt/test_scale 3
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MK_NODE_SIZE=2 MK_SM_SPLIT=ag_gemm:fused=1 MK_DEBUG=INFO t "4 ranks 2x2 MPS soak 40 s fused ag_gemm" 120 4 build-gpu/rt/test_scale soak 40
  MK_NODE_SIZE=4 MK_SM_SPLIT=ag_gemm:fused=1 t "16 ranks 4x4 ag_gemm uneven x5 fused" 150 16 build-gpu/agg/test_ag_gemm uneven 5
  MK_NODE_SIZE=8 t "16 ranks 2x8 test_scale x3" 180 16 build-gpu/rt/test_scale 3
  echo quit | nvidia-cuda-mps-control
  sleep 1
fi
unset MKT_NO_NCCL
OUT=$W MK_SM_SPLIT=ag_gemm:fused=1 MK_KILL_ONLY="2x2.*(ag_gemm|allreduce)" bash tests/gpu/kill.sh > $W/kill-run.txt 2>&1; echo "kill 2x2 fused rc=$?" | tee -a $S; tail -4 $W/kill-run.txt | tee -a $S
export MK_NODE_SIZE=1
bench() { # tag split
  ( if [ -n "$2" ]; then export MK_SM_SPLIT=$2; else unset MK_SM_SPLIT; fi
    timeout 150 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --shapes 8192x8192x8192,4096x8192x8192,16384x8192x8192 --iters 5 --rounds 2 --tag $1 > $W/bench-$1.log 2>&1 )
  echo "== bench $1 ($2) rc=$?" | tee -a $S
  awk '/^mkAllGatherGemm /{on=1} on' $W/bench-$1.log | head -12 | tee -a $S
}
MK_DEBUG=INFO bench fused1 ""
bench unfused1 ag_gemm:fused=0
bench fused2 ""
bench unfused2 ag_gemm:fused=0
grep -h "unfused sequence" $W/bench-fused1.log | head -2 | tee -a $S
cp $W/*.json $OUT/ 2>/dev/null
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
