#!/bin/bash
# s28 call 10 (one H200): compute-sanitizer on mkMoEDispatchFfnCombine at one rank (memcheck of
# test_moe layer cases 0, 2, 7; synccheck of 0, 7), the steps sanitize.sh gained.
set -u
tar xJf build-gpu/s28f.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
export CUDA_VISIBLE_DEVICES=0 MK_TIMEOUT_MS=120000 MK_BOOTSTRAP=none
T0=$(date +%s)
for cs in 0 2,7; do
  CUDA_MODULE_LOADING=LAZY timeout 150 $CS --tool memcheck --error-exitcode 99 build-gpu/moe/test_moe layer $cs > $W/memcheck-$cs.txt 2>&1
  echo "memcheck layer $cs rc=$? $(( $(date +%s) - T0 )) s: $(grep -o 'ERROR SUMMARY: [0-9]* error' $W/memcheck-$cs.txt) $(grep -c ' ok' $W/memcheck-$cs.txt) ok $(grep -c FAIL $W/memcheck-$cs.txt) FAIL" >> $S
done
CUDA_MODULE_LOADING=EAGER timeout 120 $CS --tool synccheck --error-exitcode 99 build-gpu/moe/test_moe layer 0,7 > $W/synccheck.txt 2>&1
echo "synccheck layer 0,7 rc=$? $(( $(date +%s) - T0 )) s: $(grep -o 'ERROR SUMMARY: [0-9]* error' $W/synccheck.txt) $(grep -c ' ok' $W/synccheck.txt) ok $(grep -c FAIL $W/synccheck.txt) FAIL" >> $S
grep -E "========= (Invalid|Race|Barrier|ERROR|Program hit)" $W/*.txt | sort | uniq -c | head -10 >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
