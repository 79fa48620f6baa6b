#!/bin/bash
# s32 call 4 (2 x H200): the layer's down projection pushing each row to its token's rank (branch wip-push, moe-push)
# against main (moe-main): test_moe layer / layergraph / correct on 2 GPUs and layer under MPS at 4 ranks;
# mkbench moe --layer --no-nccl main / push in turns, twice.
set -u
T0=$(date +%s)
for f in s31c s32c; do tar xJf build-gpu/$f.tar.xz -C build-gpu; done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
W=$OUT/w; mkdir -p $W; S=$W/summary.txt; : > $S
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x MK_SM_BUDGET"
el() { echo "$(( $(date +%s) - T0 )) s"; }
for m in layer layergraph correct; do
  timeout 60 $MPI -np 2 build-gpu/moe-push/test_moe $m > $W/t-push-$m.txt 2>&1; echo "push 2 GPUs $m rc=$? $(el) $(grep -c PASS $W/t-push-$m.txt) PASS $(grep -c FAIL $W/t-push-$m.txt) FAIL" >> $S
done
for v in moe-main moe-push moe-main moe-push; do
  timeout 60 $MPI -np 2 build-gpu/$v/mkbench_moe --no-nccl --layer --rounds 1 --iters 10 > $W/b-$v-$(el | tr -d ' ').txt 2>&1
  echo "== 2 GPUs layer $v rc=$? $(el)" >> $S; grep -hE "top-[28] .*[0-9]\.[0-9]{3} " $(ls -t $W/b-$v-*.txt | head -1) | head -6 | cut -c1-100 >> $S
done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
for np in 4 8; do
  timeout 150 $MPI -np $np build-gpu/moe-push/test_moe layer > $W/t-push-mps$np.txt 2>&1
  echo "push MPS $np ranks layer rc=$? $(el) $(grep -c PASS $W/t-push-mps$np.txt) PASS $(grep -c FAIL $W/t-push-mps$np.txt) FAIL" >> $S
done
echo quit | nvidia-cuda-mps-control
cat $S
cd $W && tar cJf $OUT/logs.tar.xz * && cp summary.txt $OUT/ && cd $OUT && rm -rf $W
