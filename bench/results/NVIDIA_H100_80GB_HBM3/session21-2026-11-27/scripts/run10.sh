#!/bin/bash
# s21 call 10 (4 GPUs): lab shp = HEAD + the all-reduce whose parts are one chunk gives SEND and SEND2 one TMA pipe
# (the whole staging: twice the bytes in flight each; SEND2 takes it over once SEND is done).  Tests first (4 / 2
# GPUs, 8 ranks under MPS, 2 x 2 flat and hierarchical), traces ctrace7 (HEAD) / ctrace10 (shp), then HEAD (pub) /
# shp in turns, 2 rounds at 4 ranks and one at 2, ar 1 MB - 1 GB.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s21g.tar.xz; tar xJf build-gpu/s21j.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_COLL_HIER_MIN"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
L=build-gpu/shp
t correct64M-a 200 4 $L/test_coll correct $((64<<20))
t correct64M-b 200 4 $L/test_coll correct $((64<<20))
t stress 90 4 $L/test_coll stress
t graph 90 4 $L/test_coll graph
CUDA_VISIBLE_DEVICES=0,1 t 2gpu-correct64M 200 2 $L/test_coll correct $((64<<20))
CUDA_VISIBLE_DEVICES=0,1 t 2gpu-stress 90 2 $L/test_coll stress
(export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_NODE_SIZE=2
 t 2x2-correct4M 150 4 $L/test_coll correct $((4<<20))
 MK_COLL_HIER_MIN=1 t 2x2-hier-correct4M 150 4 $L/test_coll correct $((4<<20)))
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if CUDA_VISIBLE_DEVICES=0,1 nvidia-cuda-mps-control -d; then
  (export CUDA_VISIBLE_DEVICES=0,1 MKT_NO_NCCL=1
   MK_SM_BUDGET=16 t mps8-correct16M 200 8 $L/test_coll correct $((16<<20)))
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
grep -q 'FAIL [1-9]\|rc=[1-9]' $S && { echo "TESTS FAILED: no benchmarks" >> $S; cp $S $OUT/; cd $W && tar cJf $OUT/logs.tar.xz * ; exit 0; }
trc() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np 4 $bin/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log | grep -E '^(send: end|reduce: chunk (arrived|written)|send2: (chunk reduced|end)|leave).*first' >> $S
  grep -E '^(allreduce|reducescatter) ' $W/tr-$tag.log >> $S; }
for o in "ar16 --op ar --min 16M --max 16M" "ar64 --op ar --min 64M --max 64M" "ar4 --op ar --min 4M --max 4M"; do
  set -- $o; n=$1; shift
  trc $n-main build-gpu/ctrace7 "$@"; trc $n-shp build-gpu/ctrace10 "$@"
done
bw() { local tag=$1 bin=$2; shift 2
  OUT=$W timeout 150 $MPIB -np ${NP:-4} $bin/mkbench_coll --op ar --min 1M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^(allreduce|reducescatter) ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do bw main-r$r build-gpu/pub; bw shp-r$r build-gpu/shp; done
export CUDA_VISIBLE_DEVICES=0,1
NP=2 bw main-2r1 build-gpu/pub; NP=2 bw shp-2r1 build-gpu/shp
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
