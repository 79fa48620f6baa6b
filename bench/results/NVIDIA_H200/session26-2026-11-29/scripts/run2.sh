#!/bin/bash
# s26 call 2 (issue 21, one H200): (1) the shift lab's failing cases; (2) the harness gap: mkbench attn and SDPA
# as usual (10 x 3) and sustained (40 x 5), test_attn_core time 200, with the SM clock each series ended at and
# nvidia-smi every 100 ms; (3) labs defer, lazy, lazy+defer, tree against main at 100 launches x 3 rounds.
set -u
T0=$(date +%s)
tar xJf build-gpu/s26b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active,temperature.gpu --format=csv,noheader -lms 100 > $W/smi.csv 2>&1 &
SMI=$!
mark() { echo "$(date +%H:%M:%S.%N | cut -c1-12) $*" >> $W/marks.txt; }
mark shift; timeout 90 stdbuf -oL build-gpu/shiftlab/core_shift 777 > $W/shift.txt 2>&1; echo "shift correct rc=$?" >> $S
grep -v "^ok" $W/shift.txt | head -20 >> $S
B=build-gpu/attn
mark mkbench-std; OUT=$W timeout 60 $B/mkbench_attn attn > $W/mkb-std.txt 2>&1; echo "mkbench std rc=$?" >> $S
mark sdpa-std; timeout 90 env -u LD_LIBRARY_PATH python3 bench/attn_sdpa.py --out $W/sdpa-std.json --ours $W/attn.json > $W/sdpa-std.txt 2>&1; echo "sdpa std rc=$?" >> $S
mark core-200; timeout 90 $B/test_attn_core time 200 > $W/core200.txt 2>&1; echo "core time 200 rc=$?" >> $S
mark mkbench-long; OUT=$W timeout 90 $B/mkbench_attn attn --iters 40 --rounds 5 --tag long > $W/mkb-long.txt 2>&1; echo "mkbench long rc=$?" >> $S
mark sdpa-long; timeout 120 env -u LD_LIBRARY_PATH python3 bench/attn_sdpa.py --iters 40 --rounds 5 --out $W/sdpa-long.json --ours $W/attn-long.json > $W/sdpa-long.txt 2>&1; echo "sdpa long rc=$?" >> $S
mark end-bench
for f in mkb-std mkb-long; do sed -n '/^mkRingAttention core/,/^results/p' $W/$f.txt >> $S; done
for f in sdpa-std sdpa-long; do grep -A10 "TFLOP/s (4 B" $W/$f.txt | head -10 >> $S; done
cat $W/core200.txt >> $S
echo "bench $(( $(date +%s) - T0 )) s" >> $S
mark lab; OUT=$W/lab timeout $(( T0 + 540 - $(date +%s) )) bash tests/gpu/attn_lab.sh 100 3 > $W/lab.log 2>&1
echo "attn_lab rc=$? $(( $(date +%s) - T0 )) s" >> $S
cat $W/lab.log >> $S
mark end
kill $SMI
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
