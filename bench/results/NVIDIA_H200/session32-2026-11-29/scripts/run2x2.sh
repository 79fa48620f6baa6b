#!/bin/bash
# s32 call 2 (2 x H200): every GPU test of main (tests/gpu/all.sh tests: collectives, mkAllGatherGemm,
# mkGemmReduceScatter / AllReduce, MoE, ring attention, demo, GEMM engine, kill drill, compute-sanitizer,
# soak, scale) on 2 GPUs; binaries from tests/gpu/build.sh at 16dcfd9 test programs only, no MoE ones (build-gpu/s32b.tar.xz: 84 MB of bins.tar.xz is over a call's carry), under MPS and as virtual nodes; first full 2-GPU run since the 24th session.
set -u
export MK_GPU_BUDGET_S=${MK_GPU_BUDGET_S:-560}
tar xJf build-gpu/s32b.tar.xz || { echo "cannot unpack build-gpu/s32b.tar.xz"; exit 1; }
bash tests/gpu/all.sh tests
rc=$?
echo "all.sh tests rc=$rc"
exit $rc
