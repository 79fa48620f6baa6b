#!/bin/bash
# s35 call 3 (2 x H200): main 3e90bcf's binaries (tests/gpu/build.sh): the GPU parts not run on 2 GPUs since the
# thirty-second session (coll = tests/gpu/run.sh quick tests, demo, gemm, kill, gpusan, soak, scale), then the
# prepared GDCALL lab of the thirty-fourth session (build-gpu/s35a.tar.xz).
set -u
O=${OUT:-/tmp/s35out}; mkdir -p "$O"
T0=$(date +%s)
MK_GPU_BUDGET_S=440 MK_PARTS="coll demo gemm:all kill gpusan soak scale" OUT=$O/all bash tests/gpu/all.sh parts > $O/all-out.txt 2>&1
echo "all.sh parts rc=$? $(( $(date +%s) - T0 )) s" > $O/head.txt
OUT=$O/gd bash bench/results/NVIDIA_H200/session34-2026-11-29/scripts/prepared-gdcall.sh > $O/gd-out.txt 2>&1
echo "gdcall rc=$? $(( $(date +%s) - T0 )) s" >> $O/head.txt
cat $O/head.txt $O/all/summary.txt $O/gd/summary.txt 2>/dev/null | tail -80
