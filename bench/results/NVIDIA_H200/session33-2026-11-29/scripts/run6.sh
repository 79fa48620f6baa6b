#!/bin/bash
# s33 call 6 (nvidia-h200-x4): main 7a5511f at 4 ranks.  mkAllGatherGemm at small M (issue 24: 256 x 8192
# x 8192 was 0.8x NCCL + cuBLAS at 4 ranks, fused or not) with our own unfused sequence in the same
# turns, by the plan and forced fused; the collectives at 2 MB per block (all-gather, all-to-all below
# NCCL) by CTA count and mover; mkAllGatherGemm and mkGemmAllReduce tests at 4 ranks and 2 x 2.
set -u
tar xJf build-gpu/s33d.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$W/log.txt SUMMARY=$W/summary.txt B=build-gpu
PROGS="[a-z]+/(mkbench_coll|mkbench_ag_gemm|test_ag_gemm|test_gemm_rs)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
xopt() { local v; for v in MK_NODE_SIZE MK_TRANSPORT MK_COLL_MOVER MK_COLL_CTAS MK_SM_SPLIT; do [ -n "${!v:-}" ] && printf ' -x %s' "$v"; done; }
T0=$(date +%s)
export MK_GPU_DEADLINE=$(( T0 + ${BUDGET:-330} ))
export OUT=$W CUDA_VISIBLE_DEVICES=0,1,2,3
S=256x8192x8192,512x8192x8192,1024x8192x8192,2048x8192x8192
step "ag_gemm np4 small M, plan" 60 4 $B/agg/mkbench_ag_gemm --shapes $S --own-unfused --tag plan
MK_SM_SPLIT=ag_gemm:fused=1 step "ag_gemm np4 small M, fused=1" 60 4 $B/agg/mkbench_ag_gemm --shapes $S --own-unfused --tag f1
for r in 1 2; do
  step "coll 2M plan r$r" 30 4 $B/rt/mkbench_coll --min 2M --max 2M --iters 40 --tag plan-r$r
  MK_COLL_CTAS=64 step "coll 2M 64 CTAs r$r" 30 4 $B/rt/mkbench_coll --min 2M --max 2M --iters 40 --tag c64-r$r
  MK_COLL_MOVER=tma step "coll 2M tma r$r" 30 4 $B/rt/mkbench_coll --min 2M --max 2M --iters 40 --tag tma-r$r
  MK_COLL_MOVER=tma MK_COLL_CTAS=64 step "coll 2M tma 64 CTAs r$r" 30 4 $B/rt/mkbench_coll --min 2M --max 2M --iters 40 --tag tma64-r$r
done
step "4gpu test_ag_gemm correct" 60 4 $B/agg/test_ag_gemm correct
step "4gpu test_ag_gemm stress" 45 4 $B/agg/test_ag_gemm stress
MK_NODE_SIZE=2 MK_TRANSPORT=socket MK_SM_SPLIT=ag_gemm:fused=1 step "4gpu 2x2 test_ag_gemm fused correct" 90 4 $B/agg/test_ag_gemm correct
MK_NODE_SIZE=2 MK_TRANSPORT=socket step "4gpu 2x2 test_gemm_rs ar-correct" 120 4 $B/grs/test_gemm_rs ar-correct
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 6: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU), $(( $(date +%s) - T0 )) s"
cat "$SUMMARY"
grep -hE "^[0-9]+x[0-9]+x[0-9]+ |^M x N" "$LOG"
python3 - "$W" <<'PY'
import json, glob, sys, os, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/coll-*.json')):
    cfg = os.path.basename(f)[5:-5].rsplit('-', 1)[0]
    for x in json.load(open(f)):
        t[(x['op'], cfg)].append('%.1f' % (x['ours_ms'] * 1e3))
        t[(x['op'], 'nccl')].append('%.1f' % (x['baseline_ms'] * 1e3))
        t[(x['op'], cfg + ' how')] = ['%d CTAs %s' % (x['ctas'], x['mover'])]
for k in sorted(t): print('%-14s %-10s %s' % (k[0], k[1], ' / '.join(t[k])))
PY
