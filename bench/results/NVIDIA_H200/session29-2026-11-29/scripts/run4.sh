#!/bin/bash
# s29 call 4 (nvidia-h200, 1 GPU): the kill drill of the MoE pair across 2 x 2 virtual nodes (and on one node, 4 ranks);
# compute-sanitizer memcheck of the MoE sequence across 2 x 1 virtual nodes, 2 ranks on one GPU without MPS (time-sliced).
set -u
tar xJf build-gpu/s29c.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
mkdir -p $OUT
OUT=$OUT/kill MK_KILL_ONLY="kill: moe" bash tests/gpu/kill.sh 2>&1 | tail -15
export CUDA_VISIBLE_DEVICES=0 MK_NODE_SIZE=1 MK_TRANSPORT=socket MK_TIMEOUT_MS=60000 MK_DEBUG=WARN CUDA_MODULE_LOADING=LAZY
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for a in "correct 7,8" "layer 0"; do
  t0=$(date +%s)
  timeout -k 5 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_DEBUG \
    -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -np 2 $CS --tool memcheck --error-exitcode 99 \
    build-gpu/moe/test_moe $a > $OUT/san-${a// /_}.log 2>&1
  echo "memcheck 2x1 nodes test_moe $a: rc $? $(( $(date +%s) - t0 )) s; $(grep -c 'ERROR SUMMARY: 0 errors' $OUT/san-${a// /_}.log) clean summaries; $(grep -h 'ERROR SUMMARY' $OUT/san-${a// /_}.log | sort | uniq -c | tr '\n' ' ')"
  pkill -9 -f build-gpu/moe/test_moe 2>/dev/null
done
