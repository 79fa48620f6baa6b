#!/bin/bash
# s35 call 4 (2 x H200): main's binaries (build-gpu/bins.tar.xz): sanitize.sh's 2-GPU steps with the racecheck
# filter that knows the shared-memory flag handshakes, the soak (every layout, 10 s each), scale.sh.
set -u
O=${OUT:-/tmp/s35out}; mkdir -p "$O"
T0=$(date +%s)
MK_GPU_BUDGET_S=540 MK_PARTS="gpusan:2gpu soak scale" OUT=$O/all bash tests/gpu/all.sh parts > $O/all-out.txt 2>&1
echo "all.sh parts rc=$? $(( $(date +%s) - T0 )) s" > $O/head.txt
cat $O/head.txt $O/all/summary.txt 2>/dev/null | tail -60
