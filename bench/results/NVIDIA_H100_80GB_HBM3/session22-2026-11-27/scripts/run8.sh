#!/bin/bash
# s22 call 8 (4 GPUs): the all-reduce's second phase after the first where parts have > 4 chunks (lab -DMKI_LAB_SEQ:
# MKL_SEQ = peer_major bits: 2 phase 1 peer after peer, 4 SEND2 waits for SEND's last chunk, 6 both; unset = HEAD).
# test_coll correct to 1 GB with 6 and 4, and with 6 at 4 CTAs; stress with 6; ar 64 MB - 1 GB in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22h.tar.xz
B=build-gpu/s22h
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np env $ENVS "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
ENVS="MKL_SEQ=6" t correct1G-s6 200 4 $B/test_coll correct $((1<<30))
ENVS="MKL_SEQ=4" t correct1G-s4 200 4 $B/test_coll correct $((1<<30))
ENVS="MKL_SEQ=6 MK_COLL_CTAS=4" t correct-s6-c4 150 4 $B/test_coll correct $((300<<20))
ENVS="MKL_SEQ=6" t stress-s6 90 4 $B/test_coll stress
bw() { local tag=$1; shift
  OUT=$W timeout 150 $MPIB -np 4 env $ENVS $B/mkbench_coll --op ar --min 64M --max 1G --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^allreduce ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do for m in 0 2 4 6; do if [ $m = 0 ]; then ENVS="MK_DEBUG=WARN"; else ENVS="MKL_SEQ=$m"; fi; bw s$m-r$r; done; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
