#!/bin/bash
# the gap between decode kernels: tiny shapes (lab trace build: entry/exit of calls 30-129)
set -u
tar xJf build-gpu/grs-trace.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for sh in 1x64x64 1x8192x64 16x8192x8192; do
for g in "" --graph; do
timeout 100 $MPI build-gpu/grs-trace/mkbench_gemm_rs --ar --no-nccl --rounds 3 --iters 40 $g --shapes $sh > $OUT/t-$sh$g.log 2>&1
echo "== $sh $g rc=$?: $(awk '/^[0-9]+x/{print "ours", $2, "cublas", $4}' $OUT/t-$sh$g.log)"
for r in 0 1; do grep "^GDCALL rank $r " $OUT/t-$sh$g.log | awk -v r=$r '{e=$5; en[e]=$7; lv[e]=$9} END{for(e=31;e<130;e++) if(e in en){d=(lv[e]-en[e])/1000; g=((e-1) in lv)?(en[e]-lv[e-1])/1000:-1; if(g>0&&g<1000){n++; sd+=d; sg+=g; if(g<mn||n==1)mn=g; if(g>mx)mx=g}} if(n) printf "  rank %d %d calls: kernel %.1f us, gap before %.1f us (min %.1f max %.1f)\n", r, n, sd/n, sg/n, mn, mx}'; done
done; done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
