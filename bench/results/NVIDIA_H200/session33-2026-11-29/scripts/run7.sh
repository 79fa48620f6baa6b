#!/bin/bash
# s33 call 7 (nvidia-h200-x4): 4b5083e (64 CTAs from 2 MiB blocks at more than 2 ranks; build-gpu/rt)
# against 7a5511f (build-gpu/rtprev) in turns, two rounds, 1-8 MB per rank at 4 ranks; then the new
# build's collective tests at 4, 3 and 2 ranks.
set -u
tar xJf build-gpu/s33e.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$W/log.txt SUMMARY=$W/summary.txt B=build-gpu
PROGS="[a-z]+/(mkbench_coll|test_coll)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
T0=$(date +%s)
export MK_GPU_DEADLINE=$(( T0 + ${BUDGET:-200} ))
export OUT=$W CUDA_VISIBLE_DEVICES=0,1,2,3
for r in 1 2; do
  for b in rtprev rt; do
    step "np4 $b r$r 1M,4M" 30 4 $B/$b/mkbench_coll --min 1M --max 4M --iters 40 --tag $b-r$r-1M
    step "np4 $b r$r 2M,8M" 30 4 $B/$b/mkbench_coll --min 2M --max 8M --iters 40 --tag $b-r$r-2M
  done
done
step "4gpu correct 256M" 90 4 $B/rt/test_coll correct $((256 << 20))
step "4gpu stress (1000 calls)" 60 4 $B/rt/test_coll stress
step "4gpu graph" 60 4 $B/rt/test_coll graph
export CUDA_VISIBLE_DEVICES=0,1,2
step "3gpu correct 64M" 60 3 $B/rt/test_coll correct $((64 << 20))
step "3gpu stress" 60 3 $B/rt/test_coll stress
export CUDA_VISIBLE_DEVICES=0,1
step "2gpu correct 64M" 60 2 $B/rt/test_coll correct $((64 << 20))
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 7: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU), $(( $(date +%s) - T0 )) s"
cat "$SUMMARY"
python3 - "$W" <<'PY'
import json, glob, sys, os, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/coll-rt*.json')):
    b = os.path.basename(f)[5:-5].split('-')[0]
    for x in json.load(open(f)):
        t[(x['op'], x['bytes'] >> 20, b)].append(x['ours_ms'] * 1e3)
        t[(x['op'], x['bytes'] >> 20, 'nccl')].append(x['baseline_ms'] * 1e3)
        t[(x['op'], x['bytes'] >> 20, b + 'how')] = ['%d %s' % (x['ctas'], x['mover'])]
print('4 ranks, us per call      7a5511f          4b5083e          nccl')
for k in sorted({k[:2] for k in t}):
    print('%-14s %2dM ' % k + ' '.join('%-16s' % '/'.join('%.1f' % v for v in t[k + (m,)]) for m in ('rtprev', 'rt', 'nccl')) + ' ' + t[k + ('rthow',)][0])
PY
