/*
 * gemm_rs_te.cuh - lab builds only (-DMKI_GRS_TE): mkGemmReduceScatter's
 * timeline kept in global memory, one record per CTA, overwritten by
 * every call: the CTA's SM, start and end, and for each of its first
 * GRS_TE_IT tiles its kind (1 own, 2 a peer's, set by the movers; 0
 * with K-slices, which have none), the consumers' first full stage and
 * mainloop end and the producer's first load (the GEMM engine's
 * MKI_LAB_TS points 0, 1 and 2).  mkCommDestroy prints the last call's
 * records (TE lines, mki_grs_te_dump; tools/grs_te.py summarizes them).
 *
 * Unlike -DMKI_GRS_TRACE (per-CTA records in shared memory, printed from
 * the kernel), nothing here adds shared memory, printf or live state to
 * the kernel: its ptxas summary is the normal build's, so its times are
 * the library's.  The trace build spills and its end phase is distorted
 * (bench/NOTES.md, thirty-seventh session).
 */
#ifndef MKI_OPS_GEMM_RS_TE_CUH
#define MKI_OPS_GEMM_RS_TE_CUH

#include <stdint.h>

#include "rt/ptx.cuh"

#define GRS_TE_CTAS 512 /* CTAs recorded */
#define GRS_TE_IT 40    /* tiles per CTA recorded */

/* [cta][tile]: first full stage, mainloop end, producer's first load
 * (globaltimer, ns) */
__device__ unsigned long long grs_te_tl[GRS_TE_CTAS][GRS_TE_IT][3];
/* [cta]: start, end, SM */
__device__ unsigned long long grs_te_cta[GRS_TE_CTAS][3];
/* [cta][tile]: kind */
__device__ unsigned char grs_te_kind_of[GRS_TE_CTAS][GRS_TE_IT];

/* The engine's point w of the CTA's it-th tile (MKI_LAB_TS). */
__device__ __forceinline__ void grs_te_ts(int it, int w)
{
    if (w < 3 && it < GRS_TE_IT && blockIdx.x < GRS_TE_CTAS)
        grs_te_tl[blockIdx.x][it][w] = mki::globaltimer();
}

__device__ __forceinline__ void grs_te_kind(int it, int k)
{
    if (it < GRS_TE_IT && blockIdx.x < GRS_TE_CTAS) grs_te_kind_of[blockIdx.x][it] = (unsigned char)k;
}

/* The CTA's start (end = false) or end. */
__device__ __forceinline__ void grs_te_cta_at(bool end)
{
    if (blockIdx.x >= GRS_TE_CTAS) return;
    grs_te_cta[blockIdx.x][end ? 1 : 0] = mki::globaltimer();
    if (!end) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        grs_te_cta[blockIdx.x][2] = sm;
    }
}

#endif /* MKI_OPS_GEMM_RS_TE_CUH */
