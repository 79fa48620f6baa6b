#!/bin/bash
# s21 call 2 (4 GPUs): why smaller chunks slowed reduce-scatter / all-reduce (lab build ctrace2 = main + the trace
# (-DMKI_COLL_TRACE=20, a "send: start" stamp added) + the LAB-only MKL_CHUNK of session 20's labs/mkl-chunk.patch).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_CHUNK"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
L=build-gpu/ctrace2
MKL_CHUNK=65536 timeout 100 $MPIB -np 4 $L/test_coll correct $((16<<20)) > $W/t64k.log 2>&1; echo "correct chunk 64K rc=$? PASS $(grep -c PASS $W/t64k.log) FAIL $(grep -c FAIL $W/t64k.log)" | tee -a $S
bw() { # tag chunk args
  local tag=$1 ch=$2; shift 2
  MKL_CHUNK=$ch OUT=$W timeout 150 $MPIB -np 4 $L/mkbench_coll "$@" --iters 40 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/bw-$tag.log >> $S 2>&1; grep -E '^(allreduce|reducescatter|allgather) ' $W/bw-$tag.log >> $S; }
bw rs32-def 0 --op rs --min 32M --max 32M
bw rs32-64k 65536 --op rs --min 32M --max 32M
bw rs16-64k 65536 --op rs --min 16M --max 16M
bw rs16-def 0 --op rs --min 16M --max 16M
bw ar16-32k 32768 --op ar --min 16M --max 16M
bw ar64-64k 65536 --op ar --min 64M --max 64M
bw ar64-def 0 --op ar --min 64M --max 64M
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
