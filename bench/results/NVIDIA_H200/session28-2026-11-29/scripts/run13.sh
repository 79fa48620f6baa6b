#!/bin/bash
# s28 call 13 (one H200): the soak with mkMoEDispatchFfnCombine (a seventh kind), 2 and 4 ranks under
# MPS, 50 s each (every call checked on every rank against a host reference).
set -u
tar xJf build-gpu/s28j.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=EAGER MK_DEBUG=WARN MK_TIMEOUT_MS=20000 CUDA_VISIBLE_DEVICES=0
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-soak CUDA_MPS_LOG_DIRECTORY=/tmp/mps-soak-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
for np in 2 4; do
  timeout 110 $MPI -np $np build-gpu/rt/test_scale soak 50 0x5eed$np > $W/soak$np.txt 2>&1
  echo "np $np rc=$?" >> $S; grep -iE "summary|calls|wrong|FAIL" $W/soak$np.txt | head -6 >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
