#!/bin/bash
# s26 call 8 (issue 19, one H200): the grouped GEMM's short last tiles (<= 64 rows) on one consumer warpgroup, after
# all other tiles.  test_gemm (two seeds), bench_gemm --grouped base (HEAD) and new in turns, 2 rounds; test_moe
# (MPS 2 and 4 ranks, dispatch + GEMM) through moe.sh test cut at the deadline.
set -u
T0=$(date +%s)
tar xJf build-gpu/s26h.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
for s in 26201 26202; do MK_SEED=$s timeout 60 build-gpu/gemm/test_gemm > $W/test_gemm-$s.txt 2>&1; echo "test_gemm $s rc=$? $(tail -1 $W/test_gemm-$s.txt)" >> $S; grep FAIL $W/test_gemm-$s.txt | head -5 >> $S; done
G=128x256x4096x7168,128x264x4096x7168,128x320x4096x7168,128x200x4096x7168,64x520x4096x7168,1x32768x4096x7168
for r in 1 2; do for v in gemmbase gemm; do OUT=$W/b-$v$r timeout 60 build-gpu/$v/bench_gemm --grouped $G > $W/bench-$v$r.txt 2>&1; echo "== $v round $r rc=$?" >> $S; grep -E "^[0-9]+x" $W/bench-$v$r.txt >> $S; done; done
MK_GPU_DEADLINE=$(( T0 + 200 )) MK_GPU_MOE=build-gpu/moe OUT=$W/moe timeout 210 bash tests/gpu/moe.sh test > $W/moe.log 2>&1
echo "moe.sh test rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -25 $W/moe.log >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
