#!/bin/bash
# compute-sanitizer on the decode kernel, 2 ranks (the two new steps of tests/gpu/sanitize.sh)
set -u
tar xJf build-gpu/grs-dec.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CUDA_MODULE_LOADING=LAZY MK_DEBUG=WARN MK_TIMEOUT_MS=120000 CUDA_VISIBLE_DEVICES=0,1
CS=/usr/local/cuda/bin/compute-sanitizer
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x CUDA_MODULE_LOADING -x MK_DEBUG -x MK_TIMEOUT_MS -x CUDA_VISIBLE_DEVICES -np 2"
SECONDS=0
timeout -k 5 150 $MPI $CS --tool memcheck --error-exitcode 99 build-gpu/grs/test_gemm_rs ar-correct 59 > $OUT/memcheck.log 2>&1
echo "memcheck ar-correct 59 rc=$? ${SECONDS}s: $(grep -c 'ERROR SUMMARY: 0 errors' $OUT/memcheck.log) clean summaries, $(grep -c 'PASS' $OUT/memcheck.log) PASS"
SECONDS=0
CUDA_MODULE_LOADING=EAGER timeout -k 5 100 $MPI $CS --tool synccheck --error-exitcode 99 build-gpu/grs/test_gemm_rs correct 59 > $OUT/synccheck.log 2>&1
echo "synccheck correct 59 rc=$? ${SECONDS}s: $(grep -c 'ERROR SUMMARY: 0 errors' $OUT/synccheck.log) clean summaries, $(grep -c 'PASS' $OUT/synccheck.log) PASS"
grep -E "========= (Invalid|Race|Barrier|ERROR|Program hit)" $OUT/*.log | sort | uniq -c | head
cd $OUT && tar cJf logs.tar.xz *.log && rm -f *.log
