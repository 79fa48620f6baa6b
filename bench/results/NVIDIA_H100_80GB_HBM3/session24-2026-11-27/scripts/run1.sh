#!/bin/bash
# s24 call 1 (issue 21): the attention consumers issue a tile's last P V together with the next tile's S_0,
# whose product runs under the tile's end (O normalised and stored); every tile has a block (a tile that sees
# no key takes block 0 masked whole).  New's kernel alone (22 cases x 4, twice), then mkbench attn base / new in
# turns (3 rounds), then PyTorch SDPA (cuDNN) once beside new's last JSON.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s24a.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0 MK_DEBUG=WARN NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
for k in 1 2; do timeout 150 build-gpu/xt/test_attn_core > $W/core-new$k.log 2>&1; echo "test_attn_core new #$k rc=$?" | tee -a $S; grep -E 'seed|PASS|FAIL' $W/core-new$k.log | tail -3 | tee -a $S; done
for r in 1 2 3; do
  for v in base new; do
    b=build-gpu/xt; [ $v = base ] && b=build-gpu/xt-base
    mkdir -p $W/$v$r
    OUT=$W/$v$r timeout 150 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x OUT $b/mkbench_attn attn --tag $v$r > $W/b-$v$r.log 2>&1
    echo "bench $v$r rc=$?" >> $S
    awk -v t=$v$r '/^[0-9]+x[0-9]+x[0-9]+x[0-9]+ /{print t, $1, $3, $6}' $W/b-$v$r.log >> $W/attn.tsv
  done
done
J=$(ls $W/new3/*.json | head -1)
timeout 300 env -u LD_LIBRARY_PATH python3 bench/attn_sdpa.py --out $W/attn_sdpa.json --ours $J > $W/sdpa.log 2>&1; echo "sdpa rc=$?" >> $S
python3 - $W/attn.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, shape, mask, tf = l.split()
    d[(shape, mask, t.rstrip("0123456789"))].append(float(tf))
print("%-22s %-7s %7s %7s %6s  (median TFLOP/s of 3 runs)" % ("shape", "mask", "base", "new", "new/b"))
for shape, mask in sorted({(a, b) for a, b, _ in d}):
    m = {v: st.median(d[(shape, mask, v)]) for v in ("base", "new")}
    print("%-22s %-7s %7.1f %7.1f %6.3f  %s" % (shape, mask, m["base"], m["new"], m["new"] / m["base"], " ".join("%.1f" % x for x in d[(shape, mask, "base")] + d[(shape, mask, "new")])))
PY
sed -n '/^attn_sdpa: /,/^attn_sdpa: end/p' $W/sdpa.log | tee -a $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
