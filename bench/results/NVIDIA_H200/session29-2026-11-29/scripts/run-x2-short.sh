#!/bin/bash
# s29 on nvidia-h200-x2 if lent late (little device time left): the issues' 2-rank bars only: gemm_rs, gemm_ar,
# ag_gemm, moe (dispatch, dispatch+GEMM, layer) and the ring's benchmark.
set -u
tar xJf build-gpu/s29x.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
MK_PARTS="gemm_rs:bench gemm_ar:bench moe:bench attn:ring ag_gemm:bench" MK_GPU_BUDGET_S=320 bash tests/gpu/all.sh parts
echo "all.sh rc=$?"
