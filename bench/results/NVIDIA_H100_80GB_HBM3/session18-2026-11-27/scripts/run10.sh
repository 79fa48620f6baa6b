#!/bin/bash
# s18 call 10: main + the FIFO's device-side tail (call 9's build): bench in turns with main 3f485a7 twice (ag, ar),
# and the kill drill's 2 x 2 gemm_rs step three times (call 9 saw 502.6 ms there once; calls 7-8: 3.5-3.7 ms)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/sk9.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE"
S=$W/summary.txt; : > $S
for i in 1 2 3; do
  OUT=$W/k$i MK_KILL_ONLY="2x2 kill: gemm_rs" bash tests/gpu/kill.sh > $W/kill$i.txt 2>&1; echo "kill $i rc=$?" | tee -a $S; tail -1 $W/kill$i.txt | tee -a $S
done
export MK_NODE_SIZE=1
bw() { timeout 150 $MPIB -np 2 $2 --op ag,ar --min 1M --max 256M --iters 5 > $W/bw-$1.log 2>&1; echo "== bw $1 rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce) " $W/bw-$1.log | awk '{printf "  %-13s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}' | tee -a $S; }
bw base1 build-gpu/base/mkbench_coll
bw cand1 build-gpu/rt/mkbench_coll
bw base2 build-gpu/base/mkbench_coll
bw cand2 build-gpu/rt/mkbench_coll
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
