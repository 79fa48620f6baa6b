#!/bin/bash
# s37 call 12 (2 x H200): the te build with the producer's first load per tile (tests/gpu/gemm_rs.sh te):
# 8192^3 --no-nccl x 2 and in turns, 4096 x 8192 x 8192 in turns.
set -u
tar xJf build-gpu/s37l.tar.xz || exit 1
O=${OUT:-/tmp/s37out}; export OUT=$O/w; mkdir -p $OUT
S=$O/w/summary.txt; : > $S
for a in "8192x8192x8192 --no-nccl" "8192x8192x8192 --no-nccl" 8192x8192x8192 4096x8192x8192; do
  echo "== te $a" >> $S
  bash tests/gpu/gemm_rs.sh te $a >> $S 2>&1; echo "rc=$?" >> $S
done
cat $S
cd $O/w && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $O/w
