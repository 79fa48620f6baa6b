#!/bin/bash
# mkinfo.sh - on a GPU machine: what mkernel sees (topology, links, NICs,
# the plan of a fused op) and the demo on two ranks.  Runs prebuilt
# binaries from $B (default build-gpu/lead: mkinfo, demo, libmkernel.so.0).
# Logs go to $OUT when set.
set -u
B=${B:-build-gpu/lead}
O=${OUT:-$B/out}
mkdir -p "$O"
export LD_LIBRARY_PATH=$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 MK_TIMEOUT_MS=20000
status=0
nvidia-smi topo -m > "$O/nvidia-smi-topo.txt" 2>&1
{
    echo "== mkinfo"; timeout 60 "$B/mkinfo" || status=1
    echo "== mkinfo --op ag_gemm --m 8192 --n 8192 --k 8192"
    timeout 60 "$B/mkinfo" --op ag_gemm --m 8192 --n 8192 --k 8192 || status=1
    echo "== mkinfo --op gemm_rs --m 8192 --n 8192 --k 8192"
    timeout 60 "$B/mkinfo" --op gemm_rs --m 8192 --n 8192 --k 8192 || status=1
    echo "== mpirun -np 2 mkinfo --comm --op allgather --m 2 --n 33554432"
    timeout 120 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
        "$B/mkinfo" --comm --op allgather --m 2 --n 33554432 || status=1
    echo "== mpirun -np 2 demo"
    timeout 120 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH "$B/demo" || status=1
} 2>&1 | tee "$O/mkinfo.log"
echo "mkinfo.sh: status $status"
exit $status
