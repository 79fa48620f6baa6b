#!/bin/bash
# s19 call 3: mkAllGatherGemm at 2 x 1 virtual nodes on the socket path: the plan's choice (fused across nodes)
# against our own unfused sequence (a split communicator with ag_gemm:fused=0) and NCCL (socket transport) +
# cuBLAS, all series in turns in one run (mkbench ag_gemm --own-unfused), twice; the plan's choice logged (INFO).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
for i in 1 2; do
  MK_DEBUG=INFO timeout 240 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x8192x8192,4096x8192x8192,16384x8192x8192,2048x8192x8192 --iters 5 --rounds 3 --tag 2x1-$i > $W/bench-$i.log 2>&1
  echo "== bench $i rc=$?" | tee -a $S
  awk '/^mkAllGatherGemm /{on=1} on' $W/bench-$i.log | grep -v "^results" | tee -a $S
  echo "unfused-sequence lines of the plan's communicator (split off: MK_SM_SPLIT set there): $(grep 'unfused sequence' $W/bench-$i.log | grep -vc 'MK_SM_SPLIT')" | tee -a $S
done
cp $OUT/w/*.json $OUT/ 2>/dev/null; cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log && cd $OUT && rm -rf $W
