#!/bin/bash
# s19 call 6: where the fused path's time goes at 2 x 1 (socket): fused forced on a transfer-only shape (N = 128)
# and at 8192^3, against our unfused sequence in turns; then the same with 32 compute CTAs (fewer CTAs spinning
# beside the net CTAs) and with 2 net CTAs.
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
  OUT=$W MK_SM_SPLIT=$2 timeout 200 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x128x8192,8192x8192x8192 --iters 5 --rounds 4 --tag $1 > $W/bench-$1.log 2>&1
  echo "== $1 ($2) rc=$?" | tee -a $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+: ours" $W/bench-$1.log | tee -a $S
}
b f1 ag_gemm:fused=1
b c32 ag_gemm:fused=1,compute=32
b n2 ag_gemm:fused=1,inter_send=2
b f2 ag_gemm:fused=1
b c32b ag_gemm:fused=1,compute=32
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log *.json && cd $OUT && rm -rf $W
