#!/bin/bash
# s33 call 1 (nvidia-h200-x4): main 55b2f2e at 4 ranks, one per GPU (issue 24).  The MoE layer's
# row push (session 32) has run only on 2 GPUs: its 4-rank tests come before its benchmark.
# Benchmarks: the collectives 1 MB - 1 GB and small calls, mkAllGatherGemm, mkGemmReduceScatter,
# mkGemmAllReduce, mkMoEDispatch(Gemm), the whole MoE layer, mkRingAttention, each against its
# unfused NCCL + cuBLAS sequence in the same run.  Then the 4-rank and 2 x 2 tests.
set -u
tar xJf build-gpu/s33a.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 CUDA_MODULE_LOADING=EAGER
export MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$O/log.txt SUMMARY=$O/summary.txt B=build-gpu
PROGS="[a-z]+/(test_coll|mkbench_coll|test_ag_gemm|mkbench_ag_gemm|test_gemm_rs|mkbench_gemm_rs|test_moe|mkbench_moe|mkbench_attn)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
export MK_GPU_DEADLINE=$(( $(date +%s) + ${BUDGET:-520} ))
export OUT=$O CUDA_VISIBLE_DEVICES=0,1,2,3
nvidia-smi -L | tee -a "$LOG"; nvidia-smi topo -m >> "$LOG" 2>&1
step "4gpu test_moe layer" 90 4 $B/moe/test_moe layer
step "4gpu test_moe correct" 90 4 $B/moe/test_moe correct
step "coll np4 1M-1G" 90 4 $B/rt/mkbench_coll --min 1M --max 1G --iters 20 --tag np4
step "coll np4 small calls (--lat)" 60 4 $B/rt/mkbench_coll --lat --min 8 --max 256K --tag np4
step "coll np4 zero copy ag,a2a" 60 4 $B/rt/mkbench_coll --min 1M --max 1G --iters 20 --op ag,a2a --zcopy --tag np4-zc
step "ag_gemm np4" 60 4 $B/agg/mkbench_ag_gemm --tag np4
step "gemm_rs np4" 90 4 $B/grs/mkbench_gemm_rs --tag np4
step "gemm_ar np4" 90 4 $B/grs/mkbench_gemm_rs --ar --tag np4
step "moe np4" 90 4 $B/moe/mkbench_moe --tag np4
step "moe layer np4" 120 4 $B/moe/mkbench_moe --layer --tag np4-layer
step "ring_attn np4" 90 4 $B/attn/mkbench_attn ring_attn --tag np4
step "4gpu test_moe stress" 60 4 $B/moe/test_moe stress
step "4gpu test_moe layergraph" 60 4 $B/moe/test_moe layergraph
step "4gpu test_gemm_rs correct" 120 4 $B/grs/test_gemm_rs correct
step "4gpu test_gemm_rs ar-correct" 120 4 $B/grs/test_gemm_rs ar-correct
step "4gpu test_coll correct 256M" 120 4 $B/rt/test_coll correct $((256 << 20))
step "4gpu test_coll stress" 60 4 $B/rt/test_coll stress
step "4gpu test_ag_gemm correct" 60 4 $B/agg/test_ag_gemm correct
MK_NODE_SIZE=2 MK_TRANSPORT=socket step "4gpu 2x2 test_moe multinode" 150 4 $B/moe/test_moe multinode
MK_NODE_SIZE=2 MK_TRANSPORT=socket step "4gpu 2x2 test_gemm_rs correct" 120 4 $B/grs/test_gemm_rs correct
echo "== s33 call 1: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU)"
cat "$SUMMARY"
echo "status=$status late=$late (full log: log.txt)"
