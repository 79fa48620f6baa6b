#!/bin/bash
# the decode kernel's close with one system fence: trace of the close and the gap; bench; tests
set -u
tar xJf build-gpu/grs-dec.tar.xz; tar xJf build-gpu/grs-trace.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for sh in 1x64x64 16x8192x8192; do
timeout 100 $MPI build-gpu/grs-trace/mkbench_gemm_rs --ar --no-nccl --rounds 3 --iters 40 --shapes $sh > $OUT/t-$sh.log 2>&1
echo "== $sh rc=$?: $(awk '/^[0-9]+x/{print "ours", $2, "cublas", $4}' $OUT/t-$sh.log)"
for r in 0 1; do grep "^GDCALL rank $r " $OUT/t-$sh.log | awk -v r=$r '{e=$5; en[e]=$7; lv[e]=$9; dn[e]=$11} END{for(e=31;e<130;e++) if(e in en){d=(lv[e]-en[e])/1000; c=(dn[e]-lv[e])/1000; g=((e-1) in dn)?(en[e]-dn[e-1])/1000:-1; if(g>0&&g<1000){n++; sd+=d; sc+=c; sg+=g; if(g<mn||n==1)mn=g}} if(n) printf "  rank %d %d calls: kernel %.1f us, close %.1f us, gap after close %.1f us (min %.1f)\n", r, n, sd/n, sc/n, sg/n, mn}'; done
done
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --ar --shapes 1x8192x8192,16x8192x8192,128x8192x8192 > $OUT/bench-ar.log 2>&1
timeout 100 $MPI build-gpu/grs/mkbench_gemm_rs --shapes 16x8192x8192,128x8192x8192 > $OUT/bench-rs.log 2>&1
for f in bench-ar bench-rs; do awk '/^mkGemm(ReduceScatter|AllReduce) /{on=1} on && /^results:/{on=0} on' $OUT/$f.log | cut -c1-62; done
for a in "" ar-; do for m in correct stress graph; do timeout 200 $MPI build-gpu/grs/test_gemm_rs $a$m > $OUT/$a$m.log 2>&1; echo "$a$m rc=$? $(grep -c 'PASS' $OUT/$a$m.log) PASS"; done; done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
