#!/bin/bash
# s37 call 11 (2 x H200): the te build with the movers' hand-back time of each iteration (lab te2): is the 5 us
# after a peer tile's mainloop the consumers' wait for a free outbox tile?  8192^3 --no-nccl x 2, in turns x 1.
set -u
O=${OUT:-/tmp/s37out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
S=$W/summary.txt; : > $S
tar xJf build-gpu/s37k.tar.xz || exit 1
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_VISIBLE_DEVICES"
for a in "--no-nccl 1" "--no-nccl 2" "turns 3"; do
  set -- $a; x=; [ $1 = --no-nccl ] && x=--no-nccl
  timeout 100 $MPI -np 2 build-gpu/grs-te2/mkbench_gemm_rs --shapes 8192x8192x8192 --rounds 2 --iters 20 $x > $W/te2-$2.txt 2>&1
  echo "== te2 $a rc=$?" >> $S; grep -E "^[0-9]+x[0-9]+x[0-9]+ " $W/te2-$2.txt | cut -c1-90 >> $S
  python3 s37/te2.py $W/te2-$2.txt | tail -n +2 >> $S
done
cat $S
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
