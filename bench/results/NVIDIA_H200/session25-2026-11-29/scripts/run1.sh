#!/bin/bash
# s25 call 1 (issue 21, one H200): the working tree's attention descriptors (one per operand plus a constant per
# k-step; the Q address through lane 0) through tests/gpu/attn.sh all on one GPU (kernel alone, 1 rank, MPS 2 and
# 4 ranks, 2 x 2 virtual nodes under MPS; mkbench attn beside PyTorch SDPA), then test_attn_core time with
# HEAD's kernel (base) and the new one in turns, as many rounds as the time allows (at most 3).
set -u
T0=$(date +%s)
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s25a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
S=$W/summary.txt; : > $S
MK_GPU_DEADLINE=$(( T0 + 330 )) MK_GPU_ATTN=build-gpu/attn OUT=$W/all timeout 340 bash tests/gpu/attn.sh all > $W/all.log 2>&1; echo "attn.sh all rc=$? $(( $(date +%s) - T0 )) s" >> $S
sed -n '/^attn_sdpa: /,/^attn_sdpa: end/p' $W/all.log >> $S
tail -25 $W/all.log >> $S
for r in 1 2 3; do for v in base new; do
  [ $(( $(date +%s) - T0 )) -gt 500 ] && break 2
  b=build-gpu/attn; [ $v = base ] && b=build-gpu/base
  CUDA_VISIBLE_DEVICES=0 timeout 60 $b/test_attn_core time 20 > $W/t-$v$r.log 2>&1; echo "time $v$r rc=$?" >> $S
  awk -v t=$v$r 'NF>=7 && $1 ~ /^[0-9]+$/ {print t, $1"/"$2"/"$3"/"$4"x"$5, $NF}' $W/t-$v$r.log >> $W/core.tsv
done; done
python3 - $W/core.tsv <<'PY' >> $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, k, tf = l.split(); d[(k, t.rstrip("0123456789"))].append(float(tf))
print("%-26s %7s %7s %6s  (TFLOP/s, median of rounds; test_attn_core time)" % ("d/mask/seq/BxH", "base", "new", "new/b"))
for k in sorted({a for a, _ in d}):
    m = {v: st.median(d[(k, v)]) for v in ("base", "new") if d[(k, v)]}
    if len(m) == 2: print("%-26s %7.1f %7.1f %6.3f  %s" % (k, m["base"], m["new"], m["new"] / m["base"], " ".join("%.1f" % x for x in d[(k, "base")] + d[(k, "new")])))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
