#!/bin/bash
set -u
tar xJf build-gpu/grs-trace.tar.xz
ls /usr/local/cuda/bin | grep -i -E "nsys|ncu" ; which nsys ncu 2>/dev/null; ls /opt/nvidia 2>/dev/null
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=10000 MK_DEBUG=WARN
export CUDA_VISIBLE_DEVICES=0,1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT"
for g in "" --graph; do
timeout 100 $MPI build-gpu/grs-trace/mkbench_gemm_rs --ar --no-nccl --rounds 3 --iters 40 $g --shapes 16x8192x8192 > $OUT/t$g.log 2>&1
echo "== $g"; awk '/^mkGemm/{on=1} on && /^results:/{on=0} on' $OUT/t$g.log
for r in 0 1; do grep "^GDCALL rank $r " $OUT/t$g.log | awk -v r=$r '{e=$5; en[e]=$7; lv[e]=$9} END{for(e=30;e<130;e++) if(e in en){d=(lv[e]-en[e])/1000; g=((e-1) in lv)?(en[e]-lv[e-1])/1000:-1; printf "r%d c%d k%.1f g%.1f | ", r, e, d, g; if(e%5==4) print ""}}'; done
done
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
