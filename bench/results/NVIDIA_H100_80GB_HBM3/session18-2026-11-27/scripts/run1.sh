#!/bin/bash
# s18 call 1: the socket path between 2 virtual nodes (MK_NODE_SIZE=1) against NCCL's socket transport, in turns:
# main's mkbench_coll (3f485a7's coll code) and lab sk (proxy syscall stats, -DMKI_SK_STATS; MKI_LAB_NB_MAXCH caps the net channels: bigger chunks)
# (recreated after the call from the session's transcript; the lab's patch: labs/sk-lab.patch)
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/sk1.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_NODE_SIZE=1 MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; lscpu | grep -i "model name\|numa node"
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SOCKET_NCONN -x MKI_LAB_NB_MAXCH"
run() { # tag bin nconn maxch
  export MK_SOCKET_NCONN=$3 MKI_LAB_NB_MAXCH=$4
  timeout 150 $MPI $2 --op ag,ar --min 1M --max 256M --iters 5 > $W/$1.log 2>&1; echo "== $1 (nconn $3, maxch $4) rc=$?"
  grep -E "^(allgather|allreduce) " $W/$1.log | awk '{printf "  %-10s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}'
  grep "socket stats" $W/$1.log | sed 's/^/  /'
}
run main-n2 build-gpu/rt/mkbench_coll 2 0
run sk-n2 build-gpu/sk/mkbench_coll 2 0
run sk-n1 build-gpu/sk/mkbench_coll 1 0
run sk-n4 build-gpu/sk/mkbench_coll 4 0
run sk-n8 build-gpu/sk/mkbench_coll 8 0
run sk-n2-c8 build-gpu/sk/mkbench_coll 2 8
run sk-n4-c8 build-gpu/sk/mkbench_coll 4 8
run sk-n2-c4 build-gpu/sk/mkbench_coll 2 4
run sk-n4-c4 build-gpu/sk/mkbench_coll 4 4
run main-n2b build-gpu/rt/mkbench_coll 2 0
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
