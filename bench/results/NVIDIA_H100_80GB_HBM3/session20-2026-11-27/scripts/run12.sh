#!/bin/bash
# s20 call 12 (4 x H100): the landed build (new20 = 80579fb's binaries) repeated: test_scale soak 60 s at 4 ranks one
# per GPU, test_coll correct to 64 MB three times at 4 GPUs and twice at 2.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/new21.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 np=$2 to=$3; shift 3; timeout $to $MPIB -np $np "$@" > $W/$tag.log 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $W/$tag.log) FAIL $(grep -c FAIL $W/$tag.log) | $(tail -1 $W/$tag.log | cut -c1-150)" | tee -a $S; }
t soak4 4 100 build-gpu/new20/test_scale soak 60
for i in 1 2 3; do t t4-correct-$i 4 60 build-gpu/new20/test_coll correct $((64<<20)); done
for i in 1 2; do CUDA_VISIBLE_DEVICES=0,1 t t2-correct-$i 2 60 build-gpu/new20/test_coll correct $((64<<20)); done
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
