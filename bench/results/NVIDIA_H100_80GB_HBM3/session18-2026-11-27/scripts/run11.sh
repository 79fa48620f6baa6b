#!/bin/bash
# s18 call 11: the kill drill's 2 x 2 gemm_rs step, main 3f485a7's test_kill (build-gpu/kbase) and this session's
# (build-gpu/kill, 436a722 + the FIFO's device-side tail) in turns, 6 runs each (call 10: one illegal address in 3)
set -u
tar xJf build-gpu/sk11.tar.xz
S=$OUT/summary.txt; : > $S
for i in 1 2 3 4 5 6; do
  for b in kbase kill; do
    OUT=$OUT/$b-$i MK_GPU_KILL=build-gpu/$b MK_KILL_ONLY="2x2 kill: gemm_rs" bash tests/gpu/kill.sh > /dev/null 2>&1
    echo "$b $i rc=$? $(tail -1 $OUT/$b-$i/kill-summary.txt)" | tee -a $S
    grep -h "remote error after" $OUT/$b-$i/kill.log | sed 's/: mkGemm.*//; s/: mkRed.*//; s/: mkAll.*//' | tr '\n' ';' >> $S; echo >> $S
  done
done
cat $S | grep -v "^rank" | awk '{print $1, $3, $(NF)}' | sort | uniq -c
