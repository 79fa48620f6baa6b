#!/bin/bash
# s30 call 6 on nvidia-h200-x2: the soak on 2 GPUs (every op, the layer with its staged combine, random shapes,
# 75 s), then a second run of mkbench moe --layer, gemm_rs and gemm_ar (run-to-run spread of call 4's figures).
set -u
R=$(pwd)
tar xJf build-gpu/s30x.tar.xz; tar xJf build-gpu/s30y.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS"
timeout 110 $MPI -np 2 build-gpu/rt/test_scale soak 75 > $OUT/soak.txt 2>&1; echo "2gpu soak 75 s rc=$? $(grep -c FAIL $OUT/soak.txt) FAIL"; grep "calls checked" $OUT/soak.txt | cut -c1-200
cd $OUT && timeout 100 $MPI -np 2 $R/build-gpu/moe/mkbench_moe --layer --tag layer2 > layer2.txt 2>&1; echo "layer rc=$?"; cd - > /dev/null
grep -E "top-[28] " $OUT/layer2.txt | cut -c1-140
timeout 40 $MPI -np 2 build-gpu/grs/mkbench_gemm_rs > $OUT/grs2.txt 2>&1; echo "gemm_rs rc=$?"; grep -E "^[0-9]+x" $OUT/grs2.txt | cut -c1-75
timeout 40 $MPI -np 2 build-gpu/grs/mkbench_gemm_rs --ar > $OUT/gar2.txt 2>&1; echo "gemm_ar rc=$?"; grep -E "^[0-9]+x" $OUT/gar2.txt | cut -c1-75
