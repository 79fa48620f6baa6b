#!/bin/sh
# Builds, on a machine with CUDA (no GPU needed), everything the GPU test
# scripts run, into build-gpu/: the collectives' tests and benchmark
# (build-gpu/rt), the GEMM engine's (build-gpu/gemm), mkAllGatherGemm's
# (build-gpu/agg).  Then carry build-gpu/rt, build-gpu/gemm and
# build-gpu/agg (or the subset you run) and call tests/gpu/all.sh there.
# Run from the repository root.
set -eu
sh tests/gpu/coll_build.sh
sh kernels/gemm/build.sh
bash tests/gpu/ag_gemm.sh build
