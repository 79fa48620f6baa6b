#!/bin/bash
# s24 call 3 (issue 21, 1 GPU): why the restructured consumer is faster.  SASS of base / new / noov (cuobjdump),
# opcode counts per attention kernel; the kernel alone (test_attn_core time) base / new / noov in turns, 3 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s24c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
for v in base new noov; do
  b=build-gpu/xt$( [ $v = new ] || echo -$v )
  cuobjdump --dump-sass $b/test_attn_core > $W/sass-$v.txt 2>&1; echo "sass $v rc=$? $(wc -l < $W/sass-$v.txt) lines" >> $S
done
for r in 1 2 3; do for v in base new noov; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/xt$( [ $v = new ] || echo -$v )/test_attn_core time 20 > $W/t-$v$r.log 2>&1; echo "time $v$r rc=$?" >> $S
  awk -v t=$v$r 'NF>=7 && $1 ~ /^[0-9]+$/ {print t, $1"/"$2"/"$3"/"$4"x"$5, $NF}' $W/t-$v$r.log >> $W/core.tsv
done; done
python3 - $W/core.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, k, tf = l.split(); d[(k, t.rstrip("0123456789"))].append(float(tf))
print("%-26s %7s %7s %7s %6s %6s  (TFLOP/s, median of 3; test_attn_core time)" % ("d/mask/seq/BxH", "base", "new", "noov", "new/b", "noov/b"))
for k in sorted({a for a, _ in d}):
    m = {v: st.median(d[(k, v)]) for v in ("base", "new", "noov")}
    print("%-26s %7.1f %7.1f %7.1f %6.3f %6.3f" % (k, m["base"], m["new"], m["noov"], m["new"] / m["base"], m["noov"] / m["base"]))
PY
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
