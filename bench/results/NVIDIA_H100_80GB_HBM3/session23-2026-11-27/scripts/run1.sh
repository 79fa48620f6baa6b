#!/bin/bash
# s23 call 1: main 1590b07, every benchmark at 2 ranks (tests/gpu/all.sh bench: coll, ag_gemm,
# gemm_rs, gemm_ar, moe, attn + PyTorch SDPA, net, gemm engine), asked on nvidia-h200-x2:
# the issues' own machine if it lands there.
set -u
tar xJf build-gpu/s23a.tar.xz
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader
nvidia-smi topo -m | head -4
MK_GPU_BUDGET_S=560 bash tests/gpu/all.sh bench
echo "all.sh rc=$?"
