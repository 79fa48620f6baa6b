#!/bin/bash
# s37 call 8 (2 x H200): lab te, a normal build (no trace; the same ptxas summary as main) that keeps each
# CTA's start, end, SM and its tiles' mainloops in global memory and prints the last call's at
# mkCommDestroy: do the last tiles crawl outside the trace builds?  8192^3 --no-nccl x 3, in turns with
# cuBLAS + NCCL x 2; 16384 and 4096 x 8192 x 8192 once each.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37h.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES"
run() { # tag args...
  local tag=$1; shift
  timeout 120 $MPI -np 2 build-gpu/grs-te/mkbench_gemm_rs "$@" > $W/te-$tag.txt 2>&1
  echo "== te $tag ($*) rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/te-$tag.txt | cut -c1-90 >> $S
  python3 s37/te.py $W/te-$tag.txt | tail -n +2 >> $S
}
for r in 1 2 3; do run nonccl-$r --shapes 8192x8192x8192 --rounds 2 --iters 20 --no-nccl; done
for r in 1 2; do run turns-$r --shapes 8192x8192x8192 --rounds 2 --iters 20; done
run 16384 --shapes 16384x8192x8192 --rounds 2 --iters 20
run 4096 --shapes 4096x8192x8192 --rounds 2 --iters 20
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
