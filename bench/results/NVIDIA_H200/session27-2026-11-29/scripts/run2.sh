#!/bin/bash
# s27 call 2 (issue 22 item 3, one H200 host): the socket transport's read-ahead (a small frame in one recv()).
# test_socket --lat (host path: FIFO -> proxy -> TCP -> receiving thread -> signal) base / new in turns, 3 rounds;
# test_socket --bench base / new; tests/gpu/run.sh quick tests with the new library (MPS, 2 x 2 virtual nodes on
# the socket transport).
set -u
T0=$(date +%s)
tar xJf build-gpu/s27b.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
nproc >> $S
for r in 1 2 3; do for v in base new; do
  timeout 60 build-gpu/sock/test_socket_$v --lat 20000 > $W/lat-$v$r.txt 2>&1; echo "== lat $v round $r rc=$?" >> $S; grep "^| [TF]" $W/lat-$v$r.txt >> $S
done; done
for v in base new; do timeout 100 build-gpu/sock/test_socket_$v --bench > $W/bench-$v.txt 2>&1; echo "== bench $v rc=$?" >> $S; grep "^|" $W/bench-$v.txt >> $S; done
echo "socket done $(( $(date +%s) - T0 )) s" >> $S
OUT=$W/run timeout 300 bash tests/gpu/run.sh quick tests > $W/run.log 2>&1
echo "run.sh quick tests rc=$? $(( $(date +%s) - T0 )) s" >> $S
tail -30 $W/run/summary.txt 2>/dev/null >> $S || tail -30 $W/run.log >> $S
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
