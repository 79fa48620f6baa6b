#!/bin/bash
# s33 call 4 (nvidia-h200-x4): the plan's new mover for all-gather / all-to-all through the slots
# at more than 2 ranks (TMA for the local copies too from 4 MiB blocks; build-gpu/rtnew) against
# main 55b2f2e (build-gpu/rt), in turns, three rounds, 1 MB - 1 GB at 4 ranks; then the new
# build's collective tests at 4 ranks and 2 ranks.
set -u
tar xJf build-gpu/s33b.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$W/log.txt SUMMARY=$W/summary.txt B=build-gpu
PROGS="[a-z]+/(mkbench_coll|test_coll)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
export MK_GPU_DEADLINE=$(( $(date +%s) + ${BUDGET:-330} ))
export OUT=$W CUDA_VISIBLE_DEVICES=0,1,2,3
for r in 1 2 3; do
  for b in rt rtnew; do
    step "np4 $b r$r 1M-1G" 40 4 $B/$b/mkbench_coll --op ag,a2a --min 1M --max 1G --iters 20 --tag $b-r$r-1M
    step "np4 $b r$r 2M-128M" 40 4 $B/$b/mkbench_coll --op ag,a2a --min 2M --max 128M --iters 20 --tag $b-r$r-2M
  done
done
step "4gpu rtnew correct 256M" 120 4 $B/rtnew/test_coll correct $((256 << 20))
step "4gpu rtnew stress (1000 calls)" 60 4 $B/rtnew/test_coll stress
step "4gpu rtnew graph" 60 4 $B/rtnew/test_coll graph
MKT_ZCOPY=mixed MK_COLL_ZCOPY_MIN=1 MPI="$MPI -x MKT_ZCOPY -x MK_COLL_ZCOPY_MIN" \
  step "4gpu rtnew zero copy (odd ranks not registered)" 120 4 $B/rtnew/test_coll correct $((64 << 20))
export CUDA_VISIBLE_DEVICES=0,1,2
step "3gpu rtnew correct 64M" 90 3 $B/rtnew/test_coll correct $((64 << 20))
export CUDA_VISIBLE_DEVICES=0,1
step "2gpu rtnew correct 64M" 90 2 $B/rtnew/test_coll correct $((64 << 20))
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 4: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU)"
cat "$SUMMARY"
python3 - "$W" <<'PY'
import json, glob, sys, os, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/coll-rt*.json')):
    b, r, _ = os.path.basename(f)[5:-5].split('-')
    for x in json.load(open(f)):
        t[(x['op'], x['bytes'] >> 20, b)].append(x['ours_ms'] * 1e3)
        t[(x['op'], x['bytes'] >> 20, 'nccl')].append(x['baseline_ms'] * 1e3)
        t[(x['op'], x['bytes'] >> 20, b + 'mv')] = [x['mover']]
keys = sorted({k[:2] for k in t})
print('4 ranks, us per call, in turns   main (rt)              new (rtnew)            nccl (all runs)                  new mover')
for k in keys:
    row = [t.get(k + (m,), []) for m in ('rt', 'rtnew', 'nccl')]
    med = [sorted(v)[len(v) // 2] if v else 0 for v in row]
    print('%-10s %5dM ' % k + ' '.join('%-22s' % '/'.join('%.0f' % v for v in r) for r in row[:2]) +
          ' %-32s' % '/'.join('%.0f' % v for v in row[2]) + ' %s  new/main %.3f  nccl/new %.3f' %
          (t.get(k + ('rtnewmv',), ['?'])[0], med[1] / med[0] if med[0] else 0, med[2] / med[1] if med[1] else 0))
PY
