#!/bin/bash
# s28 call 14 (one H200): main's final MoE binaries (the combine's claim check and single poller)
# through the test_moe modes not rerun since: gemm at 1, 2, 4 ranks, graph, nocall, badinput at 2,
# correct at 8 ranks (the moe.sh subset), all under MPS.
set -u
T0=$(date +%s)
tar xJf build-gpu/s28k.tar.xz -C build-gpu
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
B=build-gpu/moe
el() { echo "$(( $(date +%s) - T0 )) s"; }
timeout 60 $MPI -np 1 $B/test_moe gemm > $W/t1-gemm.txt 2>&1; echo "np1 gemm rc=$? $(el) $(grep -c FAIL $W/t1-gemm.txt) FAIL" >> $S
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d && echo "mps up" >> $S
for t in "2 gemm" "4 gemm" "2 graph" "2 badinput" "8 correct 0,1,2,3,5,7,8,9,11,12,13"; do set -- $t
  np=$1; shift
  timeout 100 $MPI -np $np $B/test_moe "$@" > $W/mps-$np-$1.txt 2>&1; echo "MPS np$np $1 rc=$? $(el) $(grep -c PASS $W/mps-$np-$1.txt) PASS $(grep -c FAIL $W/mps-$np-$1.txt) FAIL" >> $S
done
MK_TIMEOUT_MS=3000 timeout 40 $MPI -x MK_TIMEOUT_MS -np 2 $B/test_moe nocall > $W/mps-2-nocall.txt 2>&1; echo "MPS np2 nocall rc=$? $(el) $(grep -c PASS $W/mps-2-nocall.txt) PASS $(grep -c FAIL $W/mps-2-nocall.txt) FAIL" >> $S
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
