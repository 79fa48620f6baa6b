#!/bin/bash
# s27 call 1 (issue 19, one H200): lab halftail-band (short grouped-GEMM tiles on one warpgroup, paired inside
# their groups' band).  test_gemm (two seeds), bench_gemm --grouped base (HEAD + random sizes) and lab in turns,
# 2 rounds, incl. random group sizes (MKB_SEED 27); moe.sh test (lab build; MPS steps) cut at the deadline.
set -u
T0=$(date +%s)
tar xJf build-gpu/s27a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $S
for s in 27101 27102; do MK_SEED=$s timeout 60 build-gpu/gemm/test_gemm > $W/test_gemm-$s.txt 2>&1; echo "test_gemm $s rc=$? $(tail -1 $W/test_gemm-$s.txt)" >> $S; grep FAIL $W/test_gemm-$s.txt | head -5 >> $S; done
G=128x256rx4096x7168,128x264x4096x7168,128x320x4096x7168,128x256x4096x7168,64x520x4096x7168,128x1024rx4096x7168,4x4096rx28672x4096,64x512rx4096x7168,1x32768x4096x7168
for r in 1 2; do for v in gemmbase gemm; do OUT=$W/b-$v$r timeout 90 build-gpu/$v/bench_gemm --grouped $G > $W/bench-$v$r.txt 2>&1; echo "== $v round $r rc=$?" >> $S; grep -E "^[0-9]+x|seed" $W/bench-$v$r.txt >> $S; done; done
echo "bench done $(( $(date +%s) - T0 )) s" >> $S
MK_GPU_DEADLINE=$(( T0 + 330 )) MK_GPU_MOE=build-gpu/moe OUT=$W/moe timeout 300 bash tests/gpu/moe.sh test > $W/moe.log 2>&1
echo "moe.sh test rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -25 $W/moe.log >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
