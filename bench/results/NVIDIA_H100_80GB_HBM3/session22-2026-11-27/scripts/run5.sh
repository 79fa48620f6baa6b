#!/bin/bash
# s22 call 5 (4 GPUs): which phase gains from peer after peer (lab labs/pm-phase.patch, MK_BUILD_DEFS=-DMKI_LAB_PM:
# where the plan takes it, MKL_PM = 0 none, 1 phase 0 only (SEND), 2 phase 1 only (SEND2 / RECV), 3 both = main).
# test_coll correct with 1 and 2; traces all-reduce 256 MB for 0-3; ar 16 MB - 256 MB for 0-3 in turns, 2 rounds.
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/s22e.tar.xz
B=build-gpu/s22e
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1,2,3
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MKL_PM"
S=$W/summary.txt; : > $S
nvidia-smi -L | tee -a $S
t() { local tag=$1 to=$2 np=$3; shift 3; local f=$W/t-$tag.log
  timeout -k 5 $to $MPIB -np $np "$@" > $f 2>&1; echo "$tag rc=$? PASS $(grep -c PASS $f) FAIL $(grep -c FAIL $f)" >> $S; }
for m in 1 2; do MKL_PM=$m t correct-pm$m 150 4 $B/test_coll correct $((300<<20)); done
trc() { local tag=$1; shift
  OUT=$W timeout 120 $MPIB -np 4 $B/tr/mkbench_coll "$@" --iters 40 --tag $tag > $W/tr-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  python3 tools/coll_trace.py $W/tr-$tag.log >> $W/trsum-$tag.txt 2>&1; grep -E '^allreduce ' $W/tr-$tag.log >> $S
  grep -E "^(send: start|send: end|reduce: chunk arrived|reduce: chunk summed|send2: chunk reduced|send2: end|recv: end|leave) .*first" $W/trsum-$tag.txt >> $S; }
for m in 0 1 2 3; do MKL_PM=$m trc ar256-pm$m --op ar --min 256M --max 256M; done
bw() { local tag=$1; shift
  OUT=$W timeout 150 $MPIB -np 4 $B/mkbench_coll --op ar --min 16M --max 256M --iters 20 --tag $tag > $W/bw-$tag.log 2>&1; echo "== $tag rc=$?" >> $S
  grep -E '^allreduce ' $W/bw-$tag.log | awk '{printf "%s %s %s %s %s\n", $1, $3, $5, $6, $7}' >> $S; }
for r in 1 2; do for m in 0 1 2 3; do MKL_PM=$m bw pm$m-r$r; done; done
cp $S $OUT/
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
