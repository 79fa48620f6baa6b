#!/bin/bash
# s26 call 4 (issue 21, one H200): main + lazy exponent base + the d = 64 partial query block first, through
# attn.sh all (tests incl. the ring under MPS and virtual nodes, mkbench attn, SDPA with our core in turns),
# test_attn_core with two more seeds, and a second SDPA-in-turns run (repeatability).
set -u
T0=$(date +%s)
tar xJf build-gpu/s26d.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
MK_GPU_DEADLINE=$(( T0 + 330 )) MK_GPU_ATTN=build-gpu/attn OUT=$W/all timeout 340 bash tests/gpu/attn.sh all > $W/all.log 2>&1
echo "attn.sh all rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -45 $W/all.log >> $S
for seed in 26001 26002; do CUDA_VISIBLE_DEVICES=0 timeout 60 build-gpu/attn/test_attn_core $seed > $W/core-$seed.txt 2>&1; echo "test_attn_core $seed rc=$? $(tail -1 $W/core-$seed.txt)" >> $S; done
CUDA_VISIBLE_DEVICES=0 timeout 120 env -u LD_LIBRARY_PATH python3 bench/attn_sdpa.py --out $W/sdpa2.json --core build-gpu/attn/libmkb_attn_core.so --iters 40 --rounds 5 > $W/sdpa2.txt 2>&1
echo "sdpa 2 rc=$?" >> $S
sed -n '/TFLOP\/s (4 B/,/^attn_sdpa: end/p' $W/sdpa2.txt >> $S
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
