#!/bin/bash
# s30 call 4 on nvidia-h200-x2 (if lent): the 2-GPU bars never measured on H200: mkbench moe (dispatch, dgemm) and
# moe --layer, then gemm_rs and gemm_ar, the ring, the collectives (tests/gpu/all.sh parts, under one budget).
set -u
tar xJf build-gpu/s30x.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m | head -4
MK_PARTS="moe:bench gemm_rs:bench gemm_ar:bench attn:ring coll:bench" MK_GPU_BUDGET_S=${BUDGET:-540} bash tests/gpu/all.sh parts
echo "all.sh rc=$?"
