#!/bin/bash
# s24 call 5 (issue 21, 1 GPU): the S and P V descriptors as one descriptor plus a constant per k-step (desc), and
# the Q address made warp-uniform by a shuffle so the Q descriptor stays in uniform registers too (shfl): SASS of
# the steady loop 1527 -> 1456 -> 1428 instructions at d128 (R2UR 20 -> 20 -> 5).  Correctness of both, then
# test_attn_core time head / desc / shfl in turns, 3 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s24d.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
for v in desc shfl; do timeout 150 build-gpu/xt-$v/test_attn_core > $W/core-$v.log 2>&1; echo "test_attn_core $v rc=$? $(tail -1 $W/core-$v.log)" >> $S; done
for r in 1 2 3; do for v in head desc shfl; do
  timeout 120 build-gpu/xt-$v/test_attn_core time 20 > $W/t-$v$r.log 2>&1; echo "time $v$r rc=$?" >> $S
  awk -v t=$v$r 'NF>=7 && $1 ~ /^[0-9]+$/ {print t, $1"/"$2"/"$3"/"$4"x"$5, $NF}' $W/t-$v$r.log >> $W/core.tsv
done; done
python3 - $W/core.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, k, tf = l.split(); d[(k, t.rstrip("0123456789"))].append(float(tf))
print("%-26s %7s %7s %7s %6s %6s  (TFLOP/s, median of 3; test_attn_core time)" % ("d/mask/seq/BxH", "head", "desc", "shfl", "desc/h", "shfl/h"))
for k in sorted({a for a, _ in d}):
    m = {v: st.median(d[(k, v)]) for v in ("head", "desc", "shfl")}
    print("%-26s %7.1f %7.1f %7.1f %6.3f %6.3f" % (k, m["head"], m["desc"], m["shfl"], m["desc"] / m["head"], m["shfl"] / m["head"]))
PY
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
