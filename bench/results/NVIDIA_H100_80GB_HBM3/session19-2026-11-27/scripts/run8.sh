#!/bin/bash
# s19 call 8: the plan's choice with the calibrated model (net_fused_eff 0.85; no MK_SM_SPLIT): 8192^3 unfused, N = 32768 and 65536 fused,
# against our unfused sequence in turns (mkbench ag_gemm --own-unfused), twice; the choices from the INFO lines.

set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v19f.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
b() { # tag split
  OUT=$W MK_DEBUG=INFO timeout 250 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x8192x8192,8192x32768x8192,8192x65536x8192 --iters 5 --rounds 3 --tag $1 > $W/bench-$1.log 2>&1
  echo "== $1 ($2) rc=$?" | tee -a $S
  awk '/^mkAllGatherGemm /{on=1} on' $W/bench-$1.log | grep -v "^results" | tee -a $S
  echo "plan's unfused choices (rank 0): $(grep '\[0\] MK INFO GEMM' $W/bench-$1.log | grep -v 'MK_SM_SPLIT sets' | sed 's/.*mkAllGatherGemm //; s/: unfused sequence.*//' | sort | uniq -c | tr '\n' ';')" | tee -a $S
}
b plan1 -
b plan2 -
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz *.log *.json && cd $OUT && rm -rf $W
