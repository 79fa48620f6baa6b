#!/bin/bash
# s31 call 3 (one H200): why our grouped GEMM is slower in mkbench moe (mkgemm, 4.89 ms at 1 rank, 8192 tokens,
# 128 experts, top-4) than in bench_gemm --grouped (3.81 ms, 128 groups of ~256 random rows): ncu on one launch of
# each (the grouped kernel), clocks left alone; then both timed again.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=60000 MK_DEBUG=WARN
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
R=$(pwd); cd $OUT
G=$R/build-gpu/gemm/bench_gemm; M=$R/build-gpu/moe-main/mkbench_moe
S="--section SpeedOfLight --section LaunchStats --section MemoryWorkloadAnalysis --section Occupancy"
timeout 150 $NCU --clock-control none --kernel-name gemm_kernel --launch-skip 3 --launch-count 1 $S -f -o $OUT/g $G --grouped 128x256rx4096x7168 --reps 3 > $OUT/g.log 2>&1; echo "ncu bench_gemm rc=$?"
timeout 200 mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH -x MK_TIMEOUT_MS $NCU --clock-control none --kernel-name gemm_kernel --launch-skip 3 --launch-count 1 $S -f -o $OUT/m $M --shapes 8192x7168x128x4 --series dgemm --routing random --rounds 1 --iters 3 > $OUT/m.log 2>&1; echo "ncu mkbench rc=$?"
for f in g m; do [ -f $f.ncu-rep ] && $NCU --import $f.ncu-rep --page details --csv > $f.csv 2>/dev/null
  echo "== $f: $(head -c 0 $f.csv)"; grep -E '"(Duration|SM Frequency|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L2 Hit Rate|Grid Size|Block Size|Cluster Size|Registers Per Thread|Dynamic Shared Memory Per Block|L1/TEX Hit Rate)"' $f.csv | awk -F'","' '{ gsub(/"/, "", $NF); printf "  %-5s %-40s %s\n", "'$f'", $(NF - 2), $NF }'
  true; done
