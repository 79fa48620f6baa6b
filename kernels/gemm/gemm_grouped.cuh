/* The grouped GEMM's pieces that a fused kernel shares with
 * mki_gemm_grouped (gemm.cu): the table of tiles over the groups, built on
 * the device from the groups' row offsets, and the engine's hooks that read
 * it.  mkMoEDispatchGemm (kernels/ops/moe.cu) builds the table in its
 * dispatch CTAs and runs the engine with these hooks plus a wait for each
 * group's rows.
 */
#pragma once

#include <stdint.h>

#include "gemm_engine.cuh"

namespace mki {
namespace gemm {

/* table[0]: the tiles in use (0 when the offsets are bad), table[1]: 1
 * when they are (2: not built, an error came first: `halted`),
 * table[2 + 2 i], table[3 + 2 i]: the group of tile i and its 128-row block
 * inside the group; tiles go group after group, in the order perm gives
 * (perm[q]: the q-th group; nullptr: 0, 1, ...).  Built by the nt threads
 * tid of one CTA (every one calls it: it synchronizes the CTA), with
 * shared memory for first[G + 1] and part[nt] and one int bad.  Inline:
 * mkMoEDispatchGemm's kernel builds it before the engine's register split,
 * where an out-of-line call makes ptxas fail. */
__device__ __forceinline__ void group_table_build(const int64_t *off, int G, int64_t rows,
                                                  int32_t *table, bool halted, int tid, int nt,
                                                  int32_t *first, int32_t *part, int *bad_,
                                                  const int32_t *perm = nullptr)
{
    volatile int &bad = *bad_;
    if (tid == 0) bad = halted ? 2 : 0;
    __syncthreads();
    for (int g = tid; g <= G && bad != 2; g += nt) {
        const int64_t o = off[g];
        if (o < 0 || o > rows || (g == 0 && o != 0) || (g > 0 && o < off[g - 1])) bad = 1;
    }
    __syncthreads();
    if (bad == 2) {
        if (tid == 0) {
            table[0] = 0;
            table[1] = 2;
        }
        return;
    }
    /* tiles per group, scanned in table order: each thread a contiguous
     * run of places q */
    const int per = (G + nt - 1) / nt, q0 = min(G, tid * per), q1 = min(G, q0 + per);
    int32_t sum = 0;
    for (int q = q0; q < q1; q++) {
        const int g = perm ? perm[q] : q;
        const int64_t r = off[g + 1] - off[g];
        first[q] = sum;
        sum += r > 0 ? (int32_t)((r + BM - 1) / BM) : 0;
    }
    part[tid] = sum;
    __syncthreads();
    if (tid == 0) {
        int32_t run = 0;
        for (int i = 0; i < nt; i++) {
            const int32_t v = part[i];
            part[i] = run;
            run += v;
        }
        first[G] = run;
    }
    __syncthreads();
    for (int q = q0; q < q1; q++) first[q] += part[tid];
    __syncthreads();
    const int b = bad;
    if (!b)
        for (int q = 0; q < G; q++) { /* groups in turn, their tiles by all threads */
            const int g = perm ? perm[q] : q;
            const int32_t n = first[q + 1] - first[q];
            for (int j = tid; j < n; j += nt) {
                table[2 + 2 * (first[q] + j)] = g;
                table[3 + 2 * (first[q] + j)] = j;
            }
        }
    if (tid == 0) {
        table[0] = b ? 0 : first[G];
        table[1] = b;
    }
    __syncthreads();
}

/* Units are the tiles in use (groups in turn), in pairs of consecutive
 * tiles when the launch has clusters of 2 (cm); the units past them cost a
 * tile() call each (an M-block past M, no k-block), and a pair's second
 * tile past the last computes rows that are never stored.  A pair whose
 * tiles are of one group shares its B tile by multicast; one whose tiles
 * straddle two groups loads each CTA's own (b_split).  A tile's A rows
 * start at its group's first row plus 128 per block, its B tile is its
 * group's, and the group's last tile is stored row by row up to the
 * group's end.  kGluT: the groups' products pass a gated linear unit
 * (SwiGLU; the engine's kGlu): B holds each group's gate columns [0, glu)
 * and up-projection columns [glu, 2 glu) (n = 2 glu), D glu columns. */
template <bool kGluT>
struct GroupedHooksT {
    static constexpr bool kGlu = kGluT;
    static constexpr bool kWaitA = false;
    static constexpr bool kSignal = false;
    static constexpr bool kBRow = true;
    static constexpr bool kBSplit = true;
    static constexpr bool kASrc = true;
    const int32_t *table;
    const int64_t *off;
    int brows; /* rows of B per group: n (transB) or k */
    int cm;    /* CTAs per cluster: 1 or 2 */
    int glu;   /* kGluT: the up projection's first column of B */
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        const int tiles = __ldg(table);
        TileCoord t;
        if (i >= (tiles + cm - 1) / cm * p.num_n_blk) {
            t.m_blk = p.num_m_blk; /* past M: never stored */
            t.n_blk = 0;
            t.kb0 = 0;
            t.kb1 = 0;
            return t;
        }
        mki_gemm_unit_of(i, tiles, p.num_n_blk, p.group_m, cm, &t.m_blk, &t.n_blk);
        return t;
    }
    __device__ __forceinline__ int group_of(int m_blk) const { return __ldg(table + 2 + 2 * m_blk); }
    __device__ __forceinline__ int64_t first_row(int m_blk) const
    {
        return __ldg(off + group_of(m_blk)) + (int64_t)__ldg(table + 3 + 2 * m_blk) * BM;
    }
    __device__ __forceinline__ const CUtensorMap *a_src(const GemmParams &p, int m_blk,
                                                         int *row) const
    {
        *row = m_blk < __ldg(table) ? (int)first_row(m_blk) : 0;
        return &p.tm_a;
    }
    __device__ __forceinline__ int b_row(const GemmParams &, TileCoord t) const
    {
        return t.m_blk < __ldg(table) ? group_of(t.m_blk) * brows : 0;
    }
    __device__ __forceinline__ bool b_split(const GemmParams &, TileCoord u) const
    {
        const int tiles = __ldg(table);
        return u.m_blk + 1 < tiles && group_of(u.m_blk) != group_of(u.m_blk + 1);
    }
    __device__ __forceinline__ void wait_a(const GemmParams &, TileCoord, int) const {}
    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e;
        e.col0 = t.n_blk * (kGluT ? BN / 2 : BN);
        e.ptr = p.d;
        e.ld = p.ldd;
        e.tmap = &p.tm_d;
        if (t.m_blk >= __ldg(table)) { /* a pair's second tile past the last */
            e.row0 = 0;
            e.mode = EPI_DIRECT;
            e.rows = 0;
            return e;
        }
        const int g = group_of(t.m_blk);
        const int64_t r0 = first_row(t.m_blk), rem = __ldg(off + g + 1) - r0;
        e.row0 = (int)r0;
        e.mode = rem >= BM ? EPI_TMA_STORE : EPI_DIRECT;
        if (rem < BM) e.rows = (int)rem;
        return e;
    }
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord) const {}
};
typedef GroupedHooksT<false> GroupedHooks;
typedef GroupedHooksT<true> GroupedGluHooks;

/* The parameters and hooks of mki_gemm_grouped for a kernel that runs the
 * engine with them (mkMoEDispatchGemm; gemm.cu): the same checks and plan;
 * *grid: the plan's co-resident CTAs (whole clusters of p->cluster_m), 0
 * when there is nothing to compute.  0 or an MKI_GEMM_ERR_* with msg set. */
int grouped_params(const mki_gemm_grouped_args *g, GemmParams *p, GroupedHooks *h, int *grid,
                   char *msg, size_t len);
int grouped_params(const mki_gemm_grouped_args *g, GemmParams *p, GroupedGluHooks *h, int *grid,
                   char *msg, size_t len);

} // namespace gemm
} // namespace mki
