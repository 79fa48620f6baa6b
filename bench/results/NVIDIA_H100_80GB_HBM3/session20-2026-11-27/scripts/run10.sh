#!/bin/bash
# s20 call 10 (4 x H100): the landed build (new20) and lab20i = the same + LAB-only MKL_CHUNK, all-reduce /
# reduce-scatter 2 MB - 256 MB with 32 / 64 / 128 KiB chunks (and 32 CTAs), in turns, 4 ranks 2 rounds, 2 ranks 1.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/lab20i.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_CHUNK -x MK_COLL_CTAS"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
bw() { local tag=$1 np=$2 bin=$3; shift 3
  OUT=$W timeout 120 $MPIB -np $np $bin/mkbench_coll "$@" --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S; }
MKL_CHUNK=32768 timeout 100 $MPIB -np 4 build-gpu/lab20i/test_coll correct $((16<<20)) > $W/t32k.log 2>&1; echo "correct chunk 32K rc=$? PASS $(grep -c PASS $W/t32k.log) FAIL $(grep -c FAIL $W/t32k.log)" | tee -a $S
A="--op ar,rs --min 2M --max 256M --iters 20"
for r in 1 2; do
  bw new-r$r 4 build-gpu/new20 $A
  for c in 32768 65536 131072; do MKL_CHUNK=$c bw c$c-r$r 4 build-gpu/lab20i $A; done
  MKL_CHUNK=65536 MK_COLL_CTAS=32 bw c65536x32-r$r 4 build-gpu/lab20i --op ar --min 2M --max 64M --iters 20
done
export CUDA_VISIBLE_DEVICES=0,1
bw new-2r1 2 build-gpu/new20 --op ar --min 2M --max 256M --iters 20
for c in 32768 65536 131072; do MKL_CHUNK=$c bw c$c-2r1 2 build-gpu/lab20i --op ar --min 2M --max 256M --iters 20; done
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
