#!/bin/bash
# s37 call 2 (2 x H200): does NVLink traffic from the other GPU slow this GPU's loads?
# (a) xgpu_lab: GPU 0's loaders alone / while GPU 1 stores into, loads from, red.adds into GPU 0's
#     memory / while GPU 0's own CTAs store into GPU 1; (b) the engine's plain GEMM on GPU 0 (timeline)
#     alone and while another process's kernel on GPU 1 stores into (or loads from) GPU 0's memory.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37b.tar.xz || exit 1
timeout 200 build-gpu/s37/xgpu_lab > $W/xgpu.txt 2>&1; echo "== xgpu_lab rc=$? $(el)" >> $S
cat $W/xgpu.txt >> $S
P="build-gpu/plain-lab/bench_gemm --shapes 8192x8192x4096,4096x8192x4096 --transb 1 --reps 20"
for r in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 100 $P > $W/plain-alone-$r.txt 2>&1; echo "== plain alone run $r rc=$? $(el)" >> $S
  grep -E "^LAB|^measured" $W/plain-alone-$r.txt >> $S
  for m in 1 2; do
    timeout 60 build-gpu/s37/xgpu_lab --writer 8 $m 132 > $W/writer-$m-$r.txt 2>&1 &
    wp=$!; sleep 2
    CUDA_VISIBLE_DEVICES=0 timeout 100 $P > $W/plain-w$m-$r.txt 2>&1; echo "== plain while GPU 1 mode $m (1 stores, 2 loads) run $r rc=$? $(el)" >> $S
    grep -E "^LAB|^measured" $W/plain-w$m-$r.txt >> $S
    wait $wp; cat $W/writer-$m-$r.txt >> $S
  done
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
