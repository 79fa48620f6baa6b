#!/bin/bash
# s36 call 2 (2 x H200): the acc-init lab (own tiles start from the peers' partials, MKI_GRS_AINIT=1;
# the previous tile flushed before a wait that is not ready): correctness at 2 ranks and 4 under MPS,
# then mkbench gemm_rs main / lab ainit=0 / lab ainit=1 in turns; lab traces of call 40 at 8192^3.
set -u
tar xJf build-gpu/s36b.tar.xz || exit 1
O=${OUT:-/tmp/s36out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
T0=$(date +%s); el() { echo "$(( $(date +%s) - T0 )) s"; }
S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x MK_SM_SPLIT -x CUDA_VISIBLE_DEVICES -x MKI_GRS_AINIT -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
B=build-gpu/grs-ai
st() { # name timeout np args...
  local n=$1 t=$2 np=$3; shift 3
  timeout $t $MPI -np $np "$@" > $W/$n.txt 2>&1; local rc=$?
  echo "== $n rc=$rc $(el)" >> $S
  grep -E "FAIL|timed out|mismatch|passed|failed" $W/$n.txt | head -3 | cut -c1-200 >> $S
}
export MKI_GRS_AINIT=1
MK_SM_SPLIT=gemm_rs:fused=1 st c2 150 2 $B/test_gemm_rs correct
st s2 60 2 $B/test_gemm_rs stress
MK_SM_SPLIT=gemm_ar:fused=1 st arc2 150 2 $B/test_gemm_rs ar-correct
SH=8192x8192x8192,16384x8192x8192,4096x8192x8192,2048x8192x8192,6000x5000x4112,1024x8192x8192
for r in 1 2; do
  for v in main 0 1; do
    if [ $v = main ]; then BB=build-gpu/grs-main; else BB=$B; fi
    MKI_GRS_AINIT=$v OUT=$W/j timeout 100 $MPI -np 2 $BB/mkbench_gemm_rs --shapes $SH --rounds 2 --iters 20 --tag ai$v$r > $W/b-$v$r.txt 2>&1
    echo "== bench rs $v round $r rc=$? $(el)" >> $S
    grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/b-$v$r.txt | cut -c1-100 >> $S
  done
done
grep -m1 -E "^shape|^ *M x" $W/b-01.txt >> $S
for v in 0 1; do
  MKI_GRS_AINIT=$v timeout 100 $MPI -np 2 build-gpu/grs-ai-trace/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 1 --iters 20 > $W/t-$v.txt 2>&1
  echo "== trace ainit=$v rc=$? $(el)" >> $S
  grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/t-$v.txt | cut -c1-100 >> $S
  python3 tools/grs_trace.py $W/t-$v.txt > $W/t-$v.sum 2>&1; tail -25 $W/t-$v.sum >> $S
done
export CUDA_VISIBLE_DEVICES=0 CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-s36 CUDA_MPS_LOG_DIRECTORY=/tmp/mps-s36-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  MK_SM_SPLIT=gemm_rs:fused=1 st mps4 150 4 $B/test_gemm_rs correct
  MK_SM_SPLIT=gemm_ar:fused=1 st mps4ar 150 4 $B/test_gemm_rs ar-correct
  echo quit | nvidia-cuda-mps-control
fi
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
