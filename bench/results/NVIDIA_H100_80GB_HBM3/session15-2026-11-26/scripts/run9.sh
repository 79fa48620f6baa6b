#!/bin/bash
# decode kernel, final: tests at 2 GPUs and under MPS (2, 4, 8 ranks)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
B=build-gpu/grs
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x OUT -x MK_SEED -x MK_SM_SPLIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$OUT/summary.txt; : > $S
st() { local name=$1; shift; SECONDS=0; timeout $1 "${@:2}" > $OUT/$name.log 2>&1; local rc=$?; printf "%-34s rc=%d %4ds\n" "$name" $rc $SECONDS >> $S; grep -E "FAIL|mismatch" $OUT/$name.log | head -3 >> $S; }
export CUDA_VISIBLE_DEVICES=0,1
for a in "" ar-; do
  st 2gpu-${a}correct 200 $MPI -np 2 $B/test_gemm_rs ${a}correct
  st 2gpu-${a}stress 120 $MPI -np 2 $B/test_gemm_rs ${a}stress
  st 2gpu-${a}graph 120 $MPI -np 2 $B/test_gemm_rs ${a}graph
  MK_TIMEOUT_MS=3000 st 2gpu-${a}nocall-decode 60 $MPI -np 2 $B/test_gemm_rs ${a}nocall-decode
  st 2gpu-${a}badinput 60 $MPI -np 2 $B/test_gemm_rs ${a}badinput
done
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-grs CUDA_MPS_LOG_DIRECTORY=/tmp/mps-grs-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  for a in "" ar-; do
    o=gemm_rs; [ -n "$a" ] && o=gemm_ar
    MK_SM_SPLIT=$o:fused=1 st mps-x4-${a}correct-fused 300 $MPI -np 4 $B/test_gemm_rs ${a}correct
    st mps-x4-${a}stress 120 $MPI -np 4 $B/test_gemm_rs ${a}stress
    MK_SM_SPLIT=$o:fused=1 st mps-x8-${a}correct-fused-569 300 $MPI -np 8 $B/test_gemm_rs ${a}correct 569
  done
  echo quit | nvidia-cuda-mps-control
fi
grep -h "rank 0/.*PASS\|rank 0/.*FAIL" $OUT/*.log >> $S
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
cat $S
