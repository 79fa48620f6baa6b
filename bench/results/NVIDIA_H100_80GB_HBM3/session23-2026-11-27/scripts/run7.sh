#!/bin/bash
# s23 call 7 (issue 21): the diagonal blocks' mask by limits (V-f, call 6) slowed the unmasked d = 64 shapes 2-6%
# through code generation; two ways to keep the unmasked path's code: [[unlikely]] on the mask branch (U), and
# softmax_block instantiated with and without the mask, picked per block (T).  main (base), F, U, T in turns, 3 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23f.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
for v in u t; do timeout 120 build-gpu/attn-$v/test_attn_core > $W/core-$v.log 2>&1; echo "test_attn_core $v rc=$?" | tee -a $S; tail -1 $W/core-$v.log | tee -a $S; done
for r in 1 2 3; do
  for v in base f u t; do
    b=build-gpu/attn-$v; [ $v = f ] && b=build-gpu/attn
    OUT=$W timeout 100 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x OUT $b/mkbench_attn attn --tag $v$r > $W/b-$v$r.log 2>&1
    awk -v t=$v$r '/^[0-9]+x[0-9]+x[0-9]+x[0-9]+ /{print t, $1, $3, $6}' $W/b-$v$r.log >> $W/attn.tsv
  done
done
python3 - $W/attn.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, shape, mask, tf = l.split()
    d[(shape, mask, t.rstrip("0123456789"))].append(float(tf))
print("%-22s %-7s %7s %7s %7s %7s   (median TFLOP/s of 3 runs; F/U/T over base)" % ("shape", "mask", "base", "F", "U", "T"))
for shape, mask in sorted({(a, b) for a, b, _ in d}):
    m = {v: st.median(d[(shape, mask, v)]) for v in ("base", "f", "u", "t")}
    print("%-22s %-7s %7.1f %7.1f %7.1f %7.1f   %.3f %.3f %.3f" % (shape, mask, m["base"], m["f"], m["u"], m["t"], m["f"] / m["base"], m["u"] / m["base"], m["t"] / m["base"]))
PY
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
