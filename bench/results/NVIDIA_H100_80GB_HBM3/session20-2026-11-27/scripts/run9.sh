#!/bin/bash
# s20 call 9 (4 x H100): the fused ops at 4 ranks, one per GPU (main 8fa4e61's binaries: these ops do not use the
# collectives' pipe that changed): mkAllGatherGemm, mkGemmReduceScatter, mkGemmAllReduce against cuBLAS + NCCL.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/v20a.tar.xz; tar xJf build-gpu/v20grs.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
b() { local tag=$1 to=$2; shift 2; OUT=$W timeout $to $MPIB -np 4 "$@" --tag $tag > $W/$tag.log 2>&1; echo "== $tag rc=$?" | tee -a $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/$tag.log | tee -a $S; }
b ag4 150 build-gpu/agg/mkbench_ag_gemm --rounds 2
b rs4 150 build-gpu/grs/mkbench_gemm_rs --rounds 2
b ar4 150 build-gpu/grs/mkbench_gemm_rs --ar --rounds 2 --shapes 8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,6000x5000x4104,128x8192x8192
cp $W/summary.txt $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
