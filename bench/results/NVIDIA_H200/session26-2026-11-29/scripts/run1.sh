#!/bin/bash
# s26 call 1 (issue 21, one H200): attn.sh bench (mkbench attn, SDPA, test_attn_core time under the same
# conditions, nvidia-smi clocks), the seven labs against main's kernel (attn_lab.sh 20 3), then attn.sh profile.
set -u
T0=$(date +%s)
tar xJf build-gpu/s26a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee $OUT/gpu.txt
S=$OUT/summary.txt; : > $S
MK_GPU_DEADLINE=$(( T0 + 200 )) MK_GPU_ATTN=build-gpu/attn OUT=$OUT/bench timeout 210 bash tests/gpu/attn.sh bench > $OUT/bench.log 2>&1
echo "attn.sh bench rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -40 $OUT/bench.log >> $S
OUT=$OUT/lab timeout $(( T0 + 430 - $(date +%s) )) bash tests/gpu/attn_lab.sh 20 3 > $OUT/lab.log 2>&1
echo "attn_lab rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -40 $OUT/lab/attn_lab.txt >> $S
left=$(( T0 + 570 - $(date +%s) ))
if [ $left -gt 60 ]; then
  MK_GPU_DEADLINE=$(( T0 + 565 )) MK_GPU_ATTN=build-gpu/attn OUT=$OUT/prof timeout $left bash tests/gpu/attn.sh profile > $OUT/prof.log 2>&1
  echo "attn.sh profile rc=$? $(( $(date +%s) - T0 )) s" >> $S
  tail -30 $OUT/prof.log >> $S
fi
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
