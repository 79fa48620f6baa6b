#!/bin/bash
# s23 call 2 (issue 22 items 2-3): where an 8-byte call across nodes spends its time.
# 1. test_socket --lat: the host's one-way path alone (FIFO -> proxy -> socket -> receiving thread ->
#    signal), beside a plain TCP ping-pong of the same frame, on this host's cores;
# 2. mkbench coll --lat at 2 x 1 (socket) against NCCL's socket transport (main's build);
# 3. the same 8-byte all-gather with the collectives' trace build (-DMKI_COLL_TRACE=20): the kernel's steps;
#    and once with MK_DEBUG=TRACE (PROXY,NET) for the proxy's and the receiver's timestamps;
# 4. mkAllGatherGemm at 2 x 1, forced fused, against our unfused sequence at 8192^3 (2 runs).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=1
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_DEBUG_SUBSYS -x MK_DEBUG_FILE -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SM_SPLIT -x MK_SOCKET_NCONN"
echo "== 1. test_socket --lat"
(unset MK_TRANSPORT MK_NODE_SIZE; timeout 100 build/tests/net/test_socket --lat 20000) 2>&1 | tee $W/socket-lat.txt
echo "== 2. --lat, main's build"
for r in 1 2; do
  timeout 100 $MPIB -np 2 build-gpu/rt/mkbench_coll --lat --op ag,ar --min 8 --max 64K > $W/lat$r.log 2>&1; echo "lat$r rc=$?"
  grep -E "^(allgather|allreduce|floor|empty)" $W/lat$r.log | head -30
done
echo "== 3. trace build, 8-byte all-gather"
timeout 100 $MPIB -np 2 build-gpu/ctrace23/mkbench_coll --lat --op ag --min 8 --max 8 > $W/ctrace.log 2>&1; echo "ctrace rc=$?"
grep -E "^(allgather)" $W/ctrace.log
python3 tools/coll_trace.py $W/ctrace.log 2>&1 | head -60
mkdir -p $W/dbg
MK_DEBUG=TRACE MK_DEBUG_SUBSYS=PROXY,NET MK_DEBUG_FILE=$W/dbg/mk.%p.log timeout 100 $MPIB -np 2 build-gpu/rt/mkbench_coll --lat --op ag --min 8 --max 8 > $W/dbg.log 2>&1; echo "dbg rc=$?"
grep -E "^allgather" $W/dbg.log; ls -la $W/dbg; for f in $W/dbg/*; do grep -c "" $f; done
echo "== 4. ag_gemm 2 x 1 forced fused vs own unfused"
for r in 1 2; do
  OUT=$W MK_SM_SPLIT=ag_gemm:fused=1 timeout 150 $MPIB -np 2 build-gpu/agg/mkbench_ag_gemm --own-unfused --shapes 8192x8192x8192 --iters 5 --rounds 3 --tag agg$r > $W/agg$r.log 2>&1; echo "agg$r rc=$?"
  grep -A4 "^mkAllGatherGemm" $W/agg$r.log
done
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
