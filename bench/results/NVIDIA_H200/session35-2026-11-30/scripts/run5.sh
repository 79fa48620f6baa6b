#!/bin/bash
# s35 call 5 (2 x H200): main's binaries (build-gpu/bins.tar.xz): the ag_gemm and attn test parts.
set -u
O=${OUT:-/tmp/s35out}; mkdir -p "$O"
T0=$(date +%s)
MK_GPU_BUDGET_S=300 MK_PARTS="ag_gemm attn" OUT=$O/all bash tests/gpu/all.sh parts > $O/all-out.txt 2>&1
echo "all.sh parts rc=$? $(( $(date +%s) - T0 )) s" > $O/head.txt
cat $O/head.txt $O/all/summary.txt 2>/dev/null | tail -60
