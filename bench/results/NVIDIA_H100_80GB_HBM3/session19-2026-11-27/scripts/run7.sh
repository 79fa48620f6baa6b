#!/bin/bash
# s19 call 7: does the fused path overlap at all across nodes?  A GEMM about as long as the transfer
# (8192 x 65536 x 8192: GEMM ~11 ms, 64 MiB per rank over the socket ~16 ms) fused (forced) against our unfused
# sequence in turns, and 8192^3 again.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19e.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SM_SPLIT"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
b() { # tag split
  OUT=$W MK_SM_SPLIT=$2 timeout 250 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x65536x8192,8192x8192x8192 --iters 5 --rounds 3 --tag $1 > $W/bench-$1.log 2>&1
  echo "== $1 ($2) rc=$?" | tee -a $S
  awk '/^mkAllGatherGemm /{on=1} on' $W/bench-$1.log | grep -v "^results" | tee -a $S
}
b f1 ag_gemm:fused=1
b f2 ag_gemm:fused=1
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log *.json && cd $OUT && rm -rf $W
