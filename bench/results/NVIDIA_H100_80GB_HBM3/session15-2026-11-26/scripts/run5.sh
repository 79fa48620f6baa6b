#!/bin/bash
# decode kernel: own partial kept in smem, one fence; trace + bench
set -u
tar xJf build-gpu/grs-dec.tar.xz; tar xJf build-gpu/grs-trace.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=10000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
B=build-gpu/grs
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT -x MK_SEED"
S=$OUT/summary.txt; : > $S
st() { local name=$1; shift; SECONDS=0; timeout $1 "${@:2}" > $OUT/$name.log 2>&1; local rc=$?; printf "%-28s rc=%d %4ds\n" "$name" $rc $SECONDS >> $S; grep -E "FAIL|mismatch|rror" $OUT/$name.log | head -5 >> $S; }
st rs-correct-dec 120 $MPI $B/test_gemm_rs correct
st ar-correct-dec 120 $MPI $B/test_gemm_rs ar-correct
st ar-stress 120 $MPI $B/test_gemm_rs ar-stress
st bench-ar 200 $MPI $B/mkbench_gemm_rs --ar --shapes 1x8192x8192,16x8192x8192,32x8192x8192,128x8192x8192,16x1024x8192
st bench-rs 200 $MPI $B/mkbench_gemm_rs --shapes 16x8192x8192,64x8192x8192,128x8192x8192,16x1024x8192
st trace-ar16 100 $MPI build-gpu/grs-trace/mkbench_gemm_rs --ar --no-nccl --rounds 3 --iters 40 --shapes 16x8192x8192
st trace-ar128 100 $MPI build-gpu/grs-trace/mkbench_gemm_rs --ar --no-nccl --rounds 3 --iters 40 --shapes 128x8192x8192
st ar-graph 120 $MPI $B/test_gemm_rs ar-graph
MK_TIMEOUT_MS=3000 st ar-nocall-dec 60 $MPI $B/test_gemm_rs ar-nocall-decode
st rs-stress 120 $MPI $B/test_gemm_rs stress
for f in bench-ar bench-rs; do awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/$f.log >> $S; done
for f in trace-ar16 trace-ar128; do
  echo "-- $f (us from CTA entry: min / mean / max over CTAs)" >> $S
  for r in 0 1; do
    grep "^GDTRACE rank $r " $OUT/$f.log | awk -v r=$r '{n++; t0[n]=$7; for(i=0;i<6;i++) v[i,n]=$(9+2*i)/1000}
      END{m=t0[1]; for(j=1;j<=n;j++) if(t0[j]<m) m=t0[j]; mx=0; for(j=1;j<=n;j++) if(t0[j]-m>mx) mx=t0[j]-m;
      printf "rank %d ctas %d entry spread %.1f us\n", r, n, mx/1000;
      split("loop pub seen summed end stored", nm, " ");
      for(i=0;i<6;i++){ lo=1e18; hi=-1e18; s=0; for(j=1;j<=n;j++){x=v[i,j]; s+=x; if(x<lo)lo=x; if(x>hi)hi=x}
        printf "  %-7s %7.1f %7.1f %7.1f\n", nm[i+1], lo, s/n, hi } }' >> $S
    grep "^GDCALL rank $r " $OUT/$f.log | awk -v r=$r '{e=$5; en[e]=$7; lv[e]=$9} END{for(e=31;e<130;e++) if(e in en){d=(lv[e]-en[e])/1000; g=((e-1) in lv)?(en[e]-lv[e-1])/1000:-1; if(g>0&&g<1000){n++; sd+=d; sg+=g}} if(n) printf "rank %d %d calls: kernel %.1f us, gap before %.1f us (means)\n", r, n, sd/n, sg/n}' >> $S
  done
done
grep -h "PASS\|FAIL" $OUT/*correct*.log $OUT/*stress*.log | grep "rank 0" >> $S
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
cat $S
