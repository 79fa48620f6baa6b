#!/bin/bash
# s21 call 14 (1 of 4 GPUs): tests/gpu/red_bench.cu, the chunk sum alone in one CTA (lab micro-benchmark).
set -u
tar xJf build-gpu/s21l.tar.xz
export CUDA_VISIBLE_DEVICES=0
nvidia-smi -L | head -1 > $OUT/summary.txt
timeout 120 build-gpu/redb/red_bench >> $OUT/summary.txt 2>&1; echo "rc=$?" >> $OUT/summary.txt
