#!/bin/bash
# s23 call 11: the credit of a small chunk across nodes claimed under the copy out of host memory (lab on 7b64a31):
# tests at 2 x 1 and MPS 2 x 2 / 2 x 8, then --lat across 2 x 1 nodes in turns with HEAD (new23), 3 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23j.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
nvidia-smi --query-gpu=name --format=csv,noheader
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_COLL_HIER_MIN -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-44s rc %d %4d s\n" "$tag" $rc $(($(date +%s)-t0)) | tee -a $S; }
export MK_NODE_SIZE=1
t "2x1 correct 16M" 120 2 build-gpu/rt3/test_coll correct $((16<<20))
t "2x1 stress" 90 2 build-gpu/rt3/test_coll stress
t "2x1 graph" 90 2 build-gpu/rt3/test_coll graph
MK_TIMEOUT_MS=3000 t "2x1 nocall" 60 2 build-gpu/rt3/test_coll nocall
t "2x1 test_scale x3" 90 2 build-gpu/rt3/test_scale 3
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  export MKT_NO_NCCL=1
  MK_NODE_SIZE=2 t "MPS 4 ranks 2x2 correct" 120 4 build-gpu/rt3/test_coll correct $((4<<20))
  MK_NODE_SIZE=2 MK_COLL_HIER_MIN=1 t "MPS 4 ranks 2x2 hierarchical correct" 120 4 build-gpu/rt3/test_coll correct $((4<<20))
  MK_NODE_SIZE=8 t "MPS 16 ranks 2x8 test_scale x3" 150 16 build-gpu/rt3/test_scale 3
  unset MKT_NO_NCCL
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
export MK_NODE_SIZE=1
: > $W/lat.tsv
lat() { timeout 100 $MPIB -np 2 $2 --lat --op ag,rs,ar --min 8 --max 2K > $W/lat-$1.log 2>&1 || echo "lat $1 rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce) " $W/lat-$1.log | awk -v t=$1 '{print t, $1, $2, $4, $5, $10, $11}' >> $W/lat.tsv; }
for r in 1 2 3; do lat head build-gpu/new23/mkbench_coll; lat claim build-gpu/rt3/mkbench_coll; done
python3 - $W/lat.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, op, b, ev, evn, g, gn = l.split()
    d[(op, int(b), t)].append((float(ev), float(evn), float(g)))
print("%-14s %6s | head ev / gpu | claim ev / gpu | NCCL ev" % ("op", "bytes"))
for op, b in sorted({(o, b) for o, b, _ in d}):
    h, c = d[(op, b, "head")], d[(op, b, "claim")]
    print("%-14s %6d | %5.1f / %5.1f | %5.1f / %5.1f | %5.1f" % (op, b, st.median(x[0] for x in h), st.median(x[2] for x in h),
          st.median(x[0] for x in c), st.median(x[2] for x in c), st.median([x[1] for x in h + c])))
PY
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
