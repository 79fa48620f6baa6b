#!/bin/bash
# s33 call 5 (nvidia-h200-x4): main 7a5511f (the collectives' new mover rule) at 4 ranks, one per GPU:
# the random soak of every op at 4 ranks and as 2 x 2 virtual nodes (issue 24: never run one rank per
# GPU before), then tests/gpu/run.sh full scale (the collectives' 4-rank, virtual-node and MPS 2 x 2
# steps, the 4-rank benchmarks 1 MB - 1 GB with and without zero copy, 2 x 2 against flat).
set -u
tar xJf build-gpu/s33c.tar.xz || exit 1
O=${OUT:-/tmp/s33out}; mkdir -p "$O"; W=$O/w; mkdir -p "$W"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
 -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
LOG=$W/soak.log SUMMARY=$W/summary.txt B=build-gpu
PROGS="rt/(test_scale)"
: > "$LOG"; : > "$SUMMARY"
. tests/gpu/steps.sh
T0=$(date +%s)
export MK_GPU_DEADLINE=$(( T0 + ${BUDGET:-480} ))
export CUDA_VISIBLE_DEVICES=0,1,2,3
step "4gpu soak 90s" 150 4 $B/rt/test_scale soak 90
MK_NODE_SIZE=2 MK_TRANSPORT=socket step "4gpu 2x2 soak 60s" 120 4 $B/rt/test_scale soak 60
unset CUDA_VISIBLE_DEVICES
grep -hE "soak .* calls checked" "$LOG" | sort | uniq -c | head -10 >> "$SUMMARY"
OUT=$W/coll bash tests/gpu/run.sh full scale > "$W/run.out" 2>&1
echo "run.sh rc=$?" >> "$SUMMARY"
tar cJf "$O/w.tar.xz" -C "$W" . && cp "$SUMMARY" "$O/summary.txt"
echo "== s33 call 5: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | grep -c ^GPU), $(( $(date +%s) - T0 )) s"
cat "$SUMMARY"
tail -60 "$W/run.out"
