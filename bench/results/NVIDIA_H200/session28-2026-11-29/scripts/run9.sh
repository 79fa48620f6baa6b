#!/bin/bash
# s28 call 9 (one H200): the layer's two GEMMs by themselves against cuBLAS (bench_gemm --grouped,
# random group sizes, in turns): where the layer's 16384-token figure (22.9 ms against the per-expert
# cuBLAS loop's 20.2) loses.  GEMM1 as a plain GEMM of N = 2 I (the same FLOPs; no SwiGLU).
set -u
tar xJf build-gpu/s28g.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=$OUT/w; mkdir -p $W
OUT=$W timeout 400 build-gpu/gemm/bench_gemm --reps 20 --grouped 256x512rx4096x7168,256x512rx7168x2048,256x128rx4096x7168,256x128rx7168x2048,8x2048rx28672x4096,8x2048rx4096x14336 > $W/grouped.txt 2>&1
echo "rc=$?" >> $W/grouped.txt
cat $W/grouped.txt | tail -20
cd $W && tar cJf $OUT/logs.tar.xz * && cp grouped.txt $OUT/ && cd $OUT && rm -rf $W
