#!/bin/bash
# s18 call 2: lab sk2 = a receiving thread in the socket transport (+ the syscall stats, the MKI_LAB_NB_MAXCH knob) against main (rt):
# correctness across virtual nodes first (test_coll correct/stress at MK_NODE_SIZE=1, 2 GPUs; 4 ranks on 1 GPU under MPS as 4 x 1 and 2 x 2),
# then mkbench coll in turns against NCCL's socket transport, then --lat
set -u
W=$OUT/w; mkdir -p $W
tar xJf build-gpu/sk2.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN CUDA_VISIBLE_DEVICES=0,1
export MK_NODE_SIZE=1 MK_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 MK_SOCKET_NCONN=2 MKI_LAB_NB_MAXCH=0
MPIB="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -x MK_NODE_SIZE -x MK_TRANSPORT -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE -x MK_SOCKET_NCONN -x MKI_LAB_NB_MAXCH -x MKT_NO_NCCL -x MK_SM_BUDGET -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY"
MPI="$MPIB -np 2"
t() { # tag timeout np args...
  local tag=$1 to=$2 np=$3; shift 3
  timeout $to $MPIB -np $np "$@" > $W/$tag.log 2>&1; echo "== $tag rc=$?"; grep -iE "fail|error|mismatch|bad" $W/$tag.log | head -3
}
t correct-a 120 2 build-gpu/sk2/test_coll correct $((16<<20))
t correct-b 120 2 build-gpu/sk2/test_coll correct $((16<<20))
MKI_LAB_NB_MAXCH=4 t correct-c4 120 2 build-gpu/sk2/test_coll correct $((16<<20))
t stress 90 2 build-gpu/sk2/test_coll stress
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log MKT_NO_NCCL=1
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if CUDA_VISIBLE_DEVICES=0 nvidia-cuda-mps-control -d; then
  CUDA_VISIBLE_DEVICES=0 MK_SM_BUDGET=32 t mps4-4x1 150 4 build-gpu/sk2/test_coll correct $((4<<20))
  CUDA_VISIBLE_DEVICES=0 MK_SM_BUDGET=32 MK_NODE_SIZE=2 t mps4-2x2 150 4 build-gpu/sk2/test_coll correct $((4<<20))
  echo quit | nvidia-cuda-mps-control
fi
unset MKT_NO_NCCL
run() { # tag bin nconn maxch
  export MK_SOCKET_NCONN=$3 MKI_LAB_NB_MAXCH=$4
  timeout 150 $MPI $2 --op ag,ar --min 1M --max 256M --iters 5 > $W/$1.log 2>&1; echo "== $1 (nconn $3, maxch $4) rc=$?"
  grep -E "^(allgather|allreduce) " $W/$1.log | awk '{printf "  %-10s %10s ctas %3s ours %9s nccl %9s x %s  busbw %s / %s\n",$1,$3,$4,$5,$6,$7,$8,$9}'
  grep "socket stats" $W/$1.log | sed 's/^/  /'
}
run main build-gpu/rt/mkbench_coll 2 0
run rx-c32 build-gpu/sk2/mkbench_coll 2 0
run rx-c4 build-gpu/sk2/mkbench_coll 2 4
run rx-c8 build-gpu/sk2/mkbench_coll 2 8
run rx-n4-c4 build-gpu/sk2/mkbench_coll 4 4
run main-b build-gpu/rt/mkbench_coll 2 0
run rx-c4-b build-gpu/sk2/mkbench_coll 2 4
lat() { export MK_SOCKET_NCONN=2 MKI_LAB_NB_MAXCH=$3
  timeout 120 $MPI $2 --lat --op ag,ar --min 8 --max 64K > $W/lat-$1.log 2>&1; echo "== lat $1 rc=$?"
  grep -E "^(allgather|allreduce) " $W/lat-$1.log | awk '{print "  "$1,$2,"ev",$4,$5,"gpu",$10,$11,$12}'
}
lat main build-gpu/rt/mkbench_coll 0
lat rx-c32 build-gpu/sk2/mkbench_coll 0
lat rx-c4 build-gpu/sk2/mkbench_coll 4
cd $W && tar cJf $OUT/logs.tar.xz * && cd $OUT && rm -rf $W
