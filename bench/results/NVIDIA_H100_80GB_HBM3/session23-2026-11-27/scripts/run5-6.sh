#!/bin/bash
# s23 call 5-6 (issue 21): causal masks of a diagonal block by one compare per element (a limit per query row)
# where the block lies in one piece of the key positions; the attention core's correctness (test_attn_core,
# test_attn at 1 rank) and mkbench attn in turns with main (attn-base), 3 rounds each, then PyTorch SDPA once.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23e.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0 MK_DEBUG=WARN
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
timeout 120 build-gpu/attn/test_attn_core > $W/core.log 2>&1; echo "test_attn_core rc=$?" | tee -a $S; tail -2 $W/core.log | tee -a $S
timeout 150 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES build-gpu/attn/test_attn correct both > $W/t1.log 2>&1; echo "test_attn 1 rank correct rc=$?" | tee -a $S; tail -1 $W/t1.log | tee -a $S
for r in 1 2 3; do
  for v in base new; do
    b=build-gpu/attn; [ $v = base ] && b=build-gpu/attn-base
    OUT=$W timeout 100 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x OUT $b/mkbench_attn attn --tag $v$r > $W/b-$v$r.log 2>&1
    awk -v t=$v$r '/^[0-9]+x[0-9]+x[0-9]+x[0-9]+ /{print t, $1, $3, $6}' $W/b-$v$r.log >> $W/attn.tsv
  done
done
cp $W/attn-new3.json $W/attn.json 2>/dev/null
env -u LD_LIBRARY_PATH timeout 120 python3 bench/attn_sdpa.py --out $W/attn_sdpa.json --ours $W/attn.json > $W/sdpa.log 2>&1
awk '/^attn_sdpa: /{on=1} on' $W/sdpa.log | tee -a $S
python3 - $W/attn.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, shape, mask, tf = l.split()
    d[(shape, mask, t.rstrip("0123456789"))].append(float(tf))
print("%-22s %-7s %-24s %-24s %s" % ("shape", "mask", "base TFLOP/s (3 runs)", "new TFLOP/s (3 runs)", "new/base (medians)"))
for shape, mask in sorted({(a, b) for a, b, _ in d}):
    b, n = d[(shape, mask, "base")], d[(shape, mask, "new")]
    print("%-22s %-7s %-24s %-24s %.3f" % (shape, mask, " ".join("%.1f" % x for x in b), " ".join("%.1f" % x for x in n), st.median(n) / st.median(b)))
PY
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
