#!/bin/bash
# s23 call 8, asked on nvidia-h200-x4 (issue 24's kind, lent late this session): HEAD bcde87d's attention
# (tests at 1, 2 and 4 GPUs, MPS, virtual nodes; core vs cuDNN; the ring at 2 and 4 ranks), then the fused
# GEMM + reduce-scatter / all-reduce, the collectives and mkAllGatherGemm at 2 and 4 ranks (tests/gpu/all.sh parts).
# Binaries: attention, collectives and mkAllGatherGemm of HEAD; gemm_rs of 1590b07 (same kernels on one node).
set -u
tar xJf build-gpu/s23g.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
MK_PARTS="attn:all gemm_rs:bench gemm_ar:bench coll:bench ag_gemm:bench" MK_GPU_BUDGET_S=540 bash tests/gpu/all.sh parts
echo "all.sh rc=$?"
