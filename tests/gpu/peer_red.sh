#!/bin/bash
# peer_red: a lab measurement of 16-byte stores against fp32 vector
# reductions (red.global.add.v4.f32) into a peer GPU's memory over NVLink
# and into local memory (tests/gpu/peer_red.cu says why).
#
#   bash tests/gpu/peer_red.sh build    here (no GPU needed): build-gpu/lab/peer_red
#   bash tests/gpu/peer_red.sh run      there: GPUs 0 and 1; the table to
#                                       $OUT/peer_red.txt (else build-gpu/lab/out)
# Exit status: the program's (77: skipped, fewer than two GPUs).
set -u
B=build-gpu/lab
case ${1:-run} in
build)
    mkdir -p $B
    ${NVCC:-/usr/local/cuda/bin/nvcc} -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
        tests/gpu/peer_red.cu -o $B/peer_red || exit 1
    ls -la $B/peer_red ;;
run)
    O=${OUT:-$B/out}
    mkdir -p "$O"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    CUDA_VISIBLE_DEVICES=0,1 timeout 120 $B/peer_red "${@:2}" | tee "$O/peer_red.txt"
    exit "${PIPESTATUS[0]}" ;;
*)  echo "usage: bash tests/gpu/peer_red.sh build | run [--mb MB] [--iters N]" >&2; exit 2 ;;
esac
