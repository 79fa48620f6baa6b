#!/bin/bash
# s24 call 2 (issue 21, 2 GPUs): (1) the kernel alone, test_attn_core time, base / new / noov (new's code with
# the tile's end not overlapped: the next S_0 issued after O's store) in turns, 2 rounds; (2) mkbench ring_attn
# base / new in turns, 2 rounds; (3) the attention test suite with new's build (2 GPUs, MPS, virtual nodes).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s24b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_DEBUG=WARN NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
S=$W/summary.txt; : > $S
T0=$(date +%s)
for r in 1 2; do for v in base new noov; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/xt$( [ $v = new ] || echo -$v )/test_attn_core time 20 > $W/t-$v$r.log 2>&1; echo "time $v$r rc=$?" >> $S
  awk -v t=$v$r 'NF>=7 && $1 ~ /^[0-9]+$/ {print t, $1"/"$2"/"$3"/"$4"x"$5, $NF}' $W/t-$v$r.log >> $W/core.tsv
done; done
python3 - $W/core.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, k, tf = l.split(); d[(k, t.rstrip("0123456789"))].append(float(tf))
print("%-26s %7s %7s %7s %6s %6s  (TFLOP/s, median of 2; test_attn_core time)" % ("d/mask/seq/BxH", "base", "new", "noov", "new/b", "noov/b"))
for k in sorted({a for a, _ in d}):
    m = {v: st.median(d[(k, v)]) for v in ("base", "new", "noov")}
    print("%-26s %7.1f %7.1f %7.1f %6.3f %6.3f" % (k, m["base"], m["new"], m["noov"], m["new"] / m["base"], m["noov"] / m["base"]))
PY
for r in 1 2; do for v in base new; do
  b=build-gpu/xt; [ $v = base ] && b=build-gpu/xt-base
  mkdir -p $W/r$v$r
  OUT=$W/r$v$r CUDA_VISIBLE_DEVICES=0,1 timeout 150 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x OUT -x NCCL_NVLS_ENABLE $b/mkbench_attn ring_attn --tag $v$r > $W/ring-$v$r.log 2>&1
  echo "ring $v$r rc=$? $(( $(date +%s) - T0 )) s" >> $S
done; done
for v in base new; do echo "== ring $v"; for r in 1 2; do grep -E '^[0-9]+x' $W/ring-$v$r.log; done; done | tee -a $S
echo "== before tests: $(( $(date +%s) - T0 )) s" >> $S
MK_GPU_DEADLINE=$(( T0 + 560 )) MK_GPU_ATTN=build-gpu/xt OUT=$W/tests timeout $(( 570 - ($(date +%s) - T0) )) bash tests/gpu/attn.sh test > $W/tests.log 2>&1; echo "attn.sh test rc=$?" >> $S
cat $W/tests/attn-summary.txt >> $S 2>/dev/null
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
