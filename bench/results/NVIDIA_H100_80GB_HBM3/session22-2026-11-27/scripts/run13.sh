#!/bin/bash
# s22 call 13 (4 GPUs): the review commit (send_role's stagger wait / go around both orders, no re-indented loop; the
# plan's part_chunks): test_coll correct / stress / graph at 2 and 4 GPUs; ar 8 - 32 MB at 2 ranks and 16 - 256 MB
# at 4 ranks, one round (against call 12's / call 4's figures: same behaviour expected).
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22k.tar.xz
L=build-gpu/s22k
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
export CUDA_VISIBLE_DEVICES=0,1
t 2gpu-correct 150 2 $L/test_coll correct $((300<<20)); t 2gpu-stress 90 2 $L/test_coll stress; t 2gpu-graph 90 2 $L/test_coll graph
OUT=$W timeout 100 $MPIB -np 2 $L/mkbench_coll --op ar --min 8M --max 32M --iters 40 --tag a2 > $W/bw-a2.log 2>&1; echo "== ar 2 ranks rc=$?" >> $S
grep -E '^allreduce ' $W/bw-a2.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S
export CUDA_VISIBLE_DEVICES=0,1,2,3
t 4gpu-correct 150 4 $L/test_coll correct $((300<<20)); t 4gpu-stress 90 4 $L/test_coll stress; t 4gpu-graph 90 4 $L/test_coll graph
OUT=$W timeout 100 $MPIB -np 4 $L/mkbench_coll --op ar --min 16M --max 256M --iters 20 --tag a4 > $W/bw-a4.log 2>&1; echo "== ar 4 ranks rc=$?" >> $S
grep -E '^allreduce ' $W/bw-a4.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
