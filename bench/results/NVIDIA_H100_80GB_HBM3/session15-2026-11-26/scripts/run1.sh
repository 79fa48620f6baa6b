#!/bin/bash
# decode kernel: first GPU check (tests at 2 GPUs, then the small-M bench)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=10000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
B=build-gpu/grs
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT -x MK_SEED"
S=$OUT/summary.txt; : > $S
st() { local name=$1; shift; local t0=$(date +%s.%N); timeout $1 "${@:2}" > $OUT/$name.log 2>&1; local rc=$?; printf "%-28s rc=%d %5.1fs\n" "$name" $rc $(echo "$(date +%s.%N) - $t0" | bc) >> $S; grep -E "FAIL|mismatch|error" $OUT/$name.log | head -5 >> $S; }
st rs-correct-dec 120 $MPI $B/test_gemm_rs correct 5689
st ar-correct-dec 120 $MPI $B/test_gemm_rs ar-correct 5689
st rs-correct-all 240 $MPI $B/test_gemm_rs correct
st ar-correct-all 240 $MPI $B/test_gemm_rs ar-correct
st rs-stress 120 $MPI $B/test_gemm_rs stress
st ar-stress 120 $MPI $B/test_gemm_rs ar-stress
st ar-graph 120 $MPI $B/test_gemm_rs ar-graph
MK_TIMEOUT_MS=3000 st rs-nocall-dec 60 $MPI $B/test_gemm_rs nocall-decode
st bench-ar 200 $MPI $B/mkbench_gemm_rs --ar --shapes 1x8192x8192,16x8192x8192,128x8192x8192,64x8192x8192,16x1024x8192
st bench-rs 200 $MPI $B/mkbench_gemm_rs --shapes 16x8192x8192,128x8192x8192,64x8192x8192,16x1024x8192
for f in bench-ar bench-rs; do awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/$f.log >> $S; done
grep -h "PASS\|FAIL" $OUT/*correct*.log $OUT/*stress*.log $OUT/*graph*.log | grep "rank 0" >> $S
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
cat $S
