#!/bin/bash
# s23 call 10: issues 17 and 18's sweeps (mkbench gemm_rs / gemm_ar, 2 ranks) once more on nvidia-h200-x2, in case
# the call lands on the issues' own machine (gemm_rs binaries of 1590b07; its kernels are unchanged since).
set -u
tar xJf build-gpu/s23i.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
MK_PARTS="gemm_rs:bench gemm_ar:bench" MK_GPU_BUDGET_S=200 bash tests/gpu/all.sh parts 2>&1 | tail -40
