#!/bin/bash
# s29 call 1 on nvidia-h200-x2: every benchmark at 2 ranks (the issues' bars: gemm_rs, gemm_ar, ag_gemm,
# moe + moe --layer, attn ring, coll), then the MoE 2-GPU tests (never run on 2 GPUs since session 24; now with 2 x 1 virtual nodes).
set -u
tar xJf build-gpu/s29x.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m | head -4
MK_PARTS="gemm_rs:bench gemm_ar:bench ag_gemm:bench moe:bench attn:ring coll:bench moe:test-gpus" MK_GPU_BUDGET_S=565 bash tests/gpu/all.sh parts
echo "all.sh rc=$?"
