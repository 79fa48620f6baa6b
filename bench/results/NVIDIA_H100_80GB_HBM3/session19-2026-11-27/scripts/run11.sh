#!/bin/bash
# s19 call 11 (lab, MKI_AGG_TRACE): the producers' waits for remote rows at GPU scope with 256 ns pauses (were
# system-scope acquires back to back): fused forced at 2 x 1 (socket) against our unfused sequence in turns, 8192^3
# and 2048 x 8192 x 8192, twice; traced calls 10 and 30 of the first shape (warm-up calls, not timed).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19lab2.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1 MK_SM_SPLIT=ag_gemm:fused=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SM_SPLIT"
nvidia-smi -L > $W/summary.txt
for i in 1 2; do
  OUT=$W timeout 200 $MPIB -np 2 build-gpu/lab19/mkbench_ag_gemm --own-unfused --shapes 8192x8192x8192,2048x8192x8192,8192x65536x8192 --iters 5 --rounds 2 --tag t$i > $W/trace$i.log 2>&1
  echo "run $i rc=$? trace lines $(grep -c AGGT $W/trace$i.log)" >> $W/summary.txt
  grep -E "^[0-9]+x[0-9]+x[0-9]+: ours|^[0-9]+x[0-9]+x[0-9]+ +[0-9]" $W/trace$i.log >> $W/summary.txt
done
cat $W/summary.txt
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz trace1.log trace2.log && cd $OUT && rm -rf $W
