#!/bin/bash
# s33 call 3 (nvidia-h200-x4): main 55b2f2e.  The collectives' mover for blocks of 2-32 MB: the
# plan's (TMA bulk copies to the peers from 4 MiB, tma-send) against register stores
# (MK_COLL_MOVER=reg) and TMA for the local copies too (MK_COLL_MOVER=tma), in turns, three rounds
# at 4 ranks and two at 2 ranks (call 2 had one run each: reg -5 to -11% at 4 MB).
set -u
tar xJf build-gpu/s33a.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$W/log.txt SUMMARY=$W/summary.txt B=build-gpu
PROGS="[a-z]+/(mkbench_coll)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
xopt() { local v; for v in MK_COLL_MOVER; do [ -n "${!v:-}" ] && printf ' -x %s' "$v"; done; }
export MK_GPU_DEADLINE=$(( $(date +%s) + ${BUDGET:-300} ))
export OUT=$W
C=$B/rt/mkbench_coll
for np in 4 2; do
  export CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((np - 1)))
  rounds=3; [ $np = 2 ] && rounds=2
  for r in $(seq $rounds); do
    for mv in plan reg tma; do
      [ $np = 2 ] && [ $mv = tma ] && continue
      for rg in "2M 32M" "4M 16M"; do
        set -- $rg
        if [ $mv = plan ]; then unset MK_COLL_MOVER; else export MK_COLL_MOVER=$mv; fi
        step "np$np $mv r$r $1-$2" 40 $np $C --min $1 --max $2 --iters 20 --tag np$np-$mv-r$r-$1
      done
    done
  done
done
unset MK_COLL_MOVER
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 3: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU)"
grep -vc PASS "$SUMMARY"
python3 - "$W" <<'PY'
import json, glob, sys, os, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/coll-np*.json')):
    tag = os.path.basename(f)[5:-5]            # np4-reg-r1-2M
    np_, mv, r, _ = tag.split('-')
    for x in json.load(open(f)):
        t[(np_, x['op'], x['bytes'] >> 20, mv)].append(x['ours_ms'] * 1e3)
        t[(np_, x['op'], x['bytes'] >> 20, 'nccl')].append(x['baseline_ms'] * 1e3)
keys = sorted({k[:3] for k in t}, key=lambda k: (k[0], k[1], k[2]))
print('us per call (runs in turns)      plan                  reg                   tma                   nccl')
for k in keys:
    print('%s %-13s %3dM ' % k + ' '.join('%-21s' % '/'.join('%.0f' % v for v in t.get(k + (m,), [])) for m in ('plan', 'reg', 'tma', 'nccl')))
PY
