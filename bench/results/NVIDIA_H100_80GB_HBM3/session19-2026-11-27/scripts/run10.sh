#!/bin/bash
# s19 call 10 (lab, MKI_AGG_TRACE: globaltimer stamps of calls 10, 30, 50, 70 printed by the kernel): fused forced at
# 2 x 1 (socket), 8192^3 then 8192 x 128 x 8192 (the same bytes, no GEMM to speak of): when chunks arrive, when the
# receiver's copies end, when credits come back and pushes go, when tiles start.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19lab.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1 MK_SM_SPLIT=ag_gemm:fused=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SM_SPLIT"
nvidia-smi -L > $W/summary.txt
OUT=$W timeout 200 $MPIB -np 2 build-gpu/lab19/mkbench_ag_gemm --shapes 8192x8192x8192,8192x128x8192 --iters 5 --rounds 1 --tag trace > $W/trace.log 2>&1
echo "rc=$? lines $(grep -c AGGT $W/trace.log)" >> $W/summary.txt
awk '/^mkAllGatherGemm /{on=1} on' $W/trace.log >> $W/summary.txt
cat $W/summary.txt
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz trace.log && cd $OUT && rm -rf $W
