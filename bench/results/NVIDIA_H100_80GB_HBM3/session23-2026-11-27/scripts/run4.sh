#!/bin/bash
# s23 call 4: small calls across nodes (2 x 1, socket) and on one node, main (base23) against v1 (new23: one
# thread stages and pushes a small chunk, the FIFO slot reserved first, GPU-scope cached tail, one PCIe read for a
# remote credit) and v2 (rt2: v1 + spins poll relaxed and fence once on success), in turns, 4 rounds across
# nodes, 2 on one node; v2's tests at 2 x 1, MPS 2 x 2 and 2 x 8.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s23d.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export NCCL_IB_DISABLE=1
nvidia-smi --query-gpu=name --format=csv,noheader
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MKT_NO_NCCL -x MK_COLL_HIER_MIN -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
S=$W/summary.txt; : > $S
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3 t0=$(date +%s) f; shift 3
  f=$W/$(echo "$tag" | tr -c 'A-Za-z0-9\n' '_').log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; local rc=$?
  printf "%-44s rc %d %4d s\n" "$tag" $rc $(($(date +%s)-t0)) | tee -a $S
}
(export MK_NODE_SIZE=1 MK_TRANSPORT=socket
 t "v2 2x1 correct 16M" 120 2 build-gpu/rt2/test_coll correct $((16<<20))
 t "v2 2x1 stress" 90 2 build-gpu/rt2/test_coll stress
 MK_TIMEOUT_MS=3000 t "v2 2x1 nocall" 60 2 build-gpu/rt2/test_coll nocall)
t "v2 one node correct 64M" 120 2 build-gpu/rt2/test_coll correct $((64<<20))
t "v2 one node stress" 90 2 build-gpu/rt2/test_coll stress
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
  (export MKT_NO_NCCL=1 MK_TRANSPORT=socket
   MK_NODE_SIZE=2 t "v2 MPS 4 ranks 2x2 correct" 120 4 build-gpu/rt2/test_coll correct $((4<<20))
   MK_NODE_SIZE=8 t "v2 MPS 16 ranks 2x8 test_scale x3" 150 16 build-gpu/rt2/test_scale 3)
  echo quit | nvidia-cuda-mps-control; sleep 1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
lat() { # tag bin
  timeout 100 $MPIB -np 2 $2 --lat --op ag,rs,ar --min 8 --max 2K > $W/lat-$1.log 2>&1 || echo "lat $1 rc=$?" | tee -a $S
  grep -E "^(allgather|reducescatter|allreduce) " $W/lat-$1.log | awk -v t=$1 '{print t, $1, $2, $4, $5, $10, $11}' >> $W/lat.tsv; }
: > $W/lat.tsv
(export MK_NODE_SIZE=1 MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
 for r in 1 2 3 4; do lat net-base build-gpu/base23/mkbench_coll; lat net-v1 build-gpu/new23/mkbench_coll; lat net-v2 build-gpu/rt2/mkbench_coll; done)
for r in 1 2; do lat node-base build-gpu/base23/mkbench_coll; lat node-v1 build-gpu/new23/mkbench_coll; lat node-v2 build-gpu/rt2/mkbench_coll; done
# per config, op and size: the median over rounds of the event median (ours, NCCL) and the gpu per-call mean
python3 - $W/lat.tsv <<'PY' | tee -a $S
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    t, op, b, ev, evn, g, gn = l.split()
    d[(op, int(b), t)].append((float(ev), float(evn), float(g), float(gn)))
keys = sorted({(op, b) for op, b, _ in d})
print("%-14s %6s | %-34s | %-34s" % ("op", "bytes", "across nodes: base / v1 / v2 (NCCL) ev, gpu", "one node: base / v1 / v2 (NCCL) ev, gpu"))
for op, b in keys:
    row = []
    for where in ("net", "node"):
        ev = []; g = []; evn = []; gn = []
        for v in ("base", "v1", "v2"):
            x = d.get((op, b, where + "-" + v), [])
            ev.append(st.median([y[0] for y in x]) if x else 0); g.append(st.median([y[2] for y in x]) if x else 0)
            evn += [y[1] for y in x]; gn += [y[3] for y in x]
        row.append("%5.1f/%5.1f/%5.1f (%5.1f) %5.1f/%5.1f/%5.1f" % (ev[0], ev[1], ev[2], st.median(evn) if evn else 0, g[0], g[1], g[2]))
    print("%-14s %6d | %s | %s" % (op, b, row[0], row[1]))
PY
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
