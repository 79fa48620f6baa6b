#!/bin/bash
# s33 call 2 (nvidia-h200-x4): main 55b2f2e at 4 ranks.  Which of the collectives' plan choices
# binds at 1 - 256 MB (mover, CTAs, the all-reduce's one-phase limit), each run with NCCL in the
# same process; the decode-sized GEMM + all-reduce forced fused; then the MoE and ring benchmarks
# whose logs call 1 lost (the results came back by count).
set -u
tar xJf build-gpu/s33a.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
LOG=$W/log.txt SUMMARY=$W/summary.txt B=build-gpu
PROGS="[a-z]+/(mkbench_coll|mkbench_gemm_rs|mkbench_moe|mkbench_attn)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
# steps.sh passes MK_NODE_SIZE / MK_TRANSPORT only: the knobs of this call go by -x too
xopt() { local v; for v in MK_COLL_MOVER MK_COLL_CTAS MK_COLL_AR_ONESHOT MK_SM_SPLIT; do [ -n "${!v:-}" ] && printf ' -x %s' "$v"; done; }
export MK_GPU_DEADLINE=$(( $(date +%s) + ${BUDGET:-500} ))
export OUT=$W CUDA_VISIBLE_DEVICES=0,1,2,3
C="$B/rt/mkbench_coll --min 1M --max 256M --iters 20"
step "coll default a" 60 4 $C --tag a
MK_COLL_MOVER=reg step "coll MK_COLL_MOVER=reg" 60 4 $C --tag reg
MK_COLL_MOVER=tma step "coll MK_COLL_MOVER=tma" 60 4 $C --tag tma
MK_COLL_CTAS=32 step "coll MK_COLL_CTAS=32" 60 4 $C --tag c32
MK_COLL_CTAS=48 step "coll MK_COLL_CTAS=48" 60 4 $C --tag c48
step "coll default b" 60 4 $C --tag b
MK_COLL_AR_ONESHOT=0 step "ar MK_COLL_AR_ONESHOT=0" 60 4 $B/rt/mkbench_coll --op ar --min 256K --max 16M --iters 20 --tag os0
MK_COLL_AR_ONESHOT=16M step "ar MK_COLL_AR_ONESHOT=16M" 60 4 $B/rt/mkbench_coll --op ar --min 256K --max 16M --iters 20 --tag os16
step "ar default" 60 4 $B/rt/mkbench_coll --op ar --min 256K --max 16M --iters 20 --tag osd
S="16x8192x8192,128x8192x8192,1024x8192x8192"
MK_SM_SPLIT=gemm_ar:fused=1 step "gemm_ar decode fused=1" 60 4 $B/grs/mkbench_gemm_rs --ar --shapes $S --tag arf1
MK_SM_SPLIT=gemm_ar:fused=0 step "gemm_ar decode fused=0" 60 4 $B/grs/mkbench_gemm_rs --ar --shapes $S --tag arf0
step "moe layer np4" 120 4 $B/moe/mkbench_moe --layer --tag np4-layer
step "ring_attn np4" 60 4 $B/attn/mkbench_attn ring_attn --tag np4
step "moe np4" 90 4 $B/moe/mkbench_moe --tag np4
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 2: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU)"
cat "$SUMMARY"
# bus bandwidth ours/NCCL per run (mkbench coll's table rows: op bytes ... busbw ours nccl)
for t in a b reg tma c32 c48 os0 os16 osd; do
  f=$W/coll-$t.json; [ -f "$f" ] || continue
  python3 -c "
import json,sys
r=json.load(open('$f'))
print('$t', ' '.join('%s%dM:%.0f/%.0f' % (x['op'][:2], x['bytes']>>20, x['busbw_gbs'], x['baseline_busbw_gbs']) for x in r))"
done
grep -hE "^[0-9]+x[0-9]+x[0-9]+ " $W/log.txt | head -40
echo "status=$status late=$late"
