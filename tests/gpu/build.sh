#!/bin/sh
# Builds, on a machine with CUDA (no GPU needed), everything the GPU test
# scripts run, into build-gpu/: the collectives' tests and benchmark
# (build-gpu/rt), the GEMM engine's (build-gpu/gemm), mkAllGatherGemm's
# (build-gpu/agg), mkGemmReduceScatter's (build-gpu/grs), mkMoEDispatch
# and mkMoECombine's (build-gpu/moe), mkRingAttention's (build-gpu/attn),
# the kill drill (build-gpu/kill), the lab measurement peer_red
# (build-gpu/lab).
# Then carry build-gpu/rt, build-gpu/gemm and build-gpu/agg (or the subset
# you run), or only the archive build-gpu/bins.tar.xz, and call
# tests/gpu/all.sh there.
# Run from the repository root.
set -eu
sh tests/gpu/coll_build.sh
sh kernels/gemm/build.sh
bash tests/gpu/ag_gemm.sh build
bash tests/gpu/gemm_rs.sh build
bash tests/gpu/moe.sh build
bash tests/gpu/attn.sh build
bash tests/gpu/demo.sh build
bash tests/gpu/net.sh build
bash tests/gpu/kill.sh build
bash tests/gpu/peer_red.sh build
# One archive of every binary, which tests/gpu/all.sh unpacks: carry
# build-gpu/bins.tar.xz alone.  Each binary holds its own copy of the
# library (~22 MB), so xz's default 8 MiB window compresses them one by one
# (84 MB, more than a device call carries); a window larger than a binary
# finds the copies (7.7 MB; unpacking needs 256 MiB of memory).
XZ_OPT="--lzma2=preset=6,dict=256MiB" tar cJf build-gpu/bins.tar.xz build-gpu/rt/test_coll build-gpu/rt/test_scale build-gpu/rt/mkbench_coll \
    build-gpu/agg/test_ag_gemm build-gpu/agg/mkbench_ag_gemm build-gpu/demo/demo \
    build-gpu/grs/test_gemm_rs build-gpu/grs/mkbench_gemm_rs build-gpu/moe/test_moe build-gpu/moe/mkbench_moe \
    build-gpu/attn/test_attn build-gpu/attn/test_attn_core build-gpu/attn/mkbench_attn \
    build-gpu/kill/test_kill $(ls build-gpu/demo/gpu_f 2>/dev/null) \
    build-gpu/net/mkbench_net build-gpu/gemm/test_gemm build-gpu/gemm/bench_gemm \
    build-gpu/gemm/test_gemm_args build-gpu/gemm/gemm.o build-gpu/lab/peer_red
ls -la build-gpu/bins.tar.xz
