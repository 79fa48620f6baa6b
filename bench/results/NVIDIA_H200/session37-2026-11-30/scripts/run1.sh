#!/bin/bash
# s37 call 1 (2 x H200): (a) do sys-scope fences / release atomics of a few CTAs slow the loads of the
# others (fence_lab); (b) the engine's plain GEMM timeline (do its last tiles crawl?); (c) main's
# timeline at 8192^3 against K = 8320 (rows of B and A not a power of two apart); (d) the warm lab's
# timeline (MKI_GRS_WARM 0/1); (e) mkbench in turns: main against the warm lab.
set -u
tar xJf build-gpu/s37a.tar.xz || exit 1
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKB_LAB_SYNC -x MKI_GRS_WARM"
nvidia-smi --help-query-gpu > $W/help-query.txt 2>&1
CNT=$(grep -o "clocks_event_reasons_counters\.[a-z_]*" $W/help-query.txt | sort -u | paste -sd, -)
perf() { nvidia-smi -q -d PERFORMANCE > $W/perf-$1.txt 2>&1; [ -n "$CNT" ] && echo "counters $1: $(nvidia-smi --query-gpu=$CNT --format=csv,noheader | paste -sd'|' -)" >> $S; }
echo "counter fields: $CNT" >> $S
perf 0
# (a)
timeout 120 build-gpu/s37/fence_lab 1 > $W/fence.txt 2>&1; echo "== fence_lab rc=$? $(el)" >> $S
cat $W/fence.txt >> $S
perf a
# (b)
CUDA_VISIBLE_DEVICES=0 timeout 150 build-gpu/plain-lab/bench_gemm --shapes 8192x8192x4096,8192x8192x8192,4096x8192x4096 --transb 1 --reps 20 > $W/plain.txt 2>&1
echo "== plain GEMM timeline rc=$? $(el)" >> $S
grep -E "^LAB|^measured" $W/plain.txt >> $S
perf b
# (c)
for r in 1 2; do for sh in 8192x8192x8192 8192x8192x8320; do
  timeout 100 $MPI -np 2 build-gpu/grs-sync/mkbench_gemm_rs --shapes $sh --rounds 1 --iters 20 --no-nccl > $W/t-$sh-$r.txt 2>&1
  echo "== main trace $sh run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$sh-$r.txt | cut -c1-80 >> $S
  python3 tools/grs_trace.py $W/t-$sh-$r.txt > $W/t-$sh-$r.sum 2>&1
  grep -E "mainloop|rank [01]:|  end " $W/t-$sh-$r.sum >> $S
done; done
perf c
# (d)
for r in 1 2; do for v in 0 1; do
  MKI_GRS_WARM=$v timeout 100 $MPI -np 2 build-gpu/grs-warm-trace/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 --no-nccl > $W/w$v-$r.txt 2>&1
  echo "== warm=$v trace run $r rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/w$v-$r.txt | cut -c1-80 >> $S
  python3 tools/grs_trace.py $W/w$v-$r.txt > $W/w$v-$r.sum 2>&1
  grep -E "mainloop|rank [01]:|  end " $W/w$v-$r.sum >> $S
done; done
perf d
# (e)
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192
for r in 1 2; do
  timeout 150 $MPI -np 2 build-gpu/grs-main/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-main-$r.txt 2>&1
  echo "== mkbench main run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-main-$r.txt | cut -c1-90 >> $S
  MKI_GRS_WARM=1 timeout 150 $MPI -np 2 build-gpu/grs-warm/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 > $W/b-warm-$r.txt 2>&1
  echo "== mkbench warm=1 run $r rc=$? $(el)" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-warm-$r.txt | cut -c1-90 >> $S
done
perf e
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> $S
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
