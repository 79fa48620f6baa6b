#!/bin/bash
# Prepared (not run) for a 2-GPU call of the next session: why the decode kernel with two consumer warpgroups
# (grs-2wg-gdt, labs/gemm_dec-2wg-noa-shallow.patch) ends its CTAs earlier but measures 2-3 us longer between
# events than the landed one-warpgroup kernel (grs-gdt, 5b93b14 + -DMKI_GDEC_TRACE=30).  Both print, per rank,
# the GDCALL lines of calls 30-129 (CTA 0's entry, the last CTA's exit, the close's end) and the GDTRACE lines
# of call 30; 140 calls of ours per run (30 warm-up + 110 timed).  Carry build-gpu/s35a.tar.xz; run from the
# repository root: bash <this script>.
set -u
tar xJf build-gpu/s35a.tar.xz || exit 1
O=${OUT:-/tmp/s35out}; mkdir -p "$O/w"; W=$O/w
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 CUDA_MODULE_LOADING=EAGER MK_TIMEOUT_MS=20000 MK_DEBUG=WARN
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CUDA_MODULE_LOADING -x MK_TIMEOUT_MS -x MK_DEBUG"
for r in 1 2; do
  for v in grs-gdt grs-2wg-gdt; do
    for op in "" --ar; do
      OUT=$W/j timeout 60 $MPI -np 2 build-gpu/$v/mkbench_gemm_rs $op --shapes 128x8192x8192 --rounds 1 --iters 110 --no-nccl > $W/$v$op-$r.txt 2>&1
      echo "== $v ${op:-rs} run $r rc=$?" >> $W/summary.txt
      # GDCALL rank R call C enter E leave L done D (globaltimer ns): rank 0's 100 calls, in call order
      grep "^GDCALL rank 0 " $W/$v$op-$r.txt | sort -n -k5 | awk '{e = $7; l = $9; if (pl) { gap += e - pl; n++ }
          body += l - e; m++; pl = l }
        END { if (m) printf "  rank 0, %d calls: CTA 0 entry to last exit %.1f us, last exit to next entry %.1f us\n", m, body / m / 1000, n ? gap / n / 1000 : 0 }' >> $W/summary.txt
      grep -E "^128x8192x8192" $W/$v$op-$r.txt | cut -c1-100 >> $W/summary.txt
    done
  done
done
cat $W/summary.txt
cd $W && cp summary.txt $O/ && tar cJf $O/w.tar.xz * && rm -rf $W
