#!/bin/bash
# s26 call 3 (issue 21, one H200): main + the lazy exponent base (candidate to land) through attn.sh all (tests,
# mkbench attn, SDPA with our core in turns 40 x 5), then the labs: HEAD's kernel (core_base) and lazy + shift at
# d = 64 (core_lazyshift) against it, 100 launches x 3 rounds.
set -u
T0=$(date +%s)
tar xJf build-gpu/s26c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
W=$OUT/w; mkdir -p $W
S=$W/summary.txt; : > $S
MK_GPU_DEADLINE=$(( T0 + 330 )) MK_GPU_ATTN=build-gpu/attn OUT=$W/all timeout 340 bash tests/gpu/attn.sh all > $W/all.log 2>&1
echo "attn.sh all rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -45 $W/all.log >> $S
OUT=$W/lab timeout $(( T0 + 560 - $(date +%s) )) bash tests/gpu/attn_lab.sh 100 3 > $W/lab.log 2>&1
echo "attn_lab rc=$? $(( $(date +%s) - T0 )) s" >> $S
cat $W/lab.log >> $S
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
