#!/bin/bash
# s23 call 12: issues 17 and 18's sweeps once more on nvidia-h200-x2 (as call 10), in case it lands on H200.
set -u
tar xJf build-gpu/s23i.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  MK_PARTS="gemm_rs:bench gemm_ar:bench" MK_GPU_BUDGET_S=200 bash tests/gpu/all.sh parts 2>&1 | tail -40
else
  echo "not an H200: nothing run (call 10 has these sweeps on H100)"
fi
