/* mkernel GEMM engine: persistent, warp-specialized Hopper GEMM (sm_90a).
 *
 *   D[M x N] = alpha * A[M x K] * B + beta * C,  128 x 256 output tiles, BK = 64
 *
 * One CTA per SM, 384 threads = 3 warpgroups, a 4-stage shared-memory ring,
 * and (by default) clusters of 2 CTAs that compute two tiles stacked along M
 * with the same B tile ("a work unit"):
 *
 *     WG0 producer (1 thread, 40 regs)       WG1, WG2 consumers (232 regs each)
 *     ------------------------------------   -----------------------------------
 *     for each unit u of this cluster:       for each unit u of this cluster:
 *       t = my tile of u                       for kb in 0..K/64:
 *       for kb in 0..K/64:                       wait full[s]
 *         hooks.wait_a(t, kb)   <-- hook 1       4 x wgmma m64n256k16 (WG w:
 *         wait empty[s]                             rows 64w..64w+63 of the tile)
 *         expect_tx(full[s], 48 KB)              wgmma.wait 1: stage s-1 retired
 *         TMA A[128 x 64]     -> my ring[s]      arrive empty[s-1] here and in
 *         TMA my half of B[256 x 64]                the peer CTA
 *             -> ring[s] of BOTH CTAs          epilogue (hook 3): regs -> smem
 *             (multicast)                        (swizzled 64 x 128 B chunks,
 *                                                 double-buffered) -> TMA store
 *        ring: | s0 | s1 | s2 | s3 |             / TMA add / direct stores,
 *         full[s]:  48 KB landed (A + 2 halves)   then hooks.after_store(t)
 *         empty[s]: 16 consumer warps (both CTAs) done with s
 *
 *        cluster:   CTA 0: tile (2i,   n)  \  B[n] loaded once from L2,
 *                   CTA 1: tile (2i+1, n)  /   half by each CTA
 *
 * Multicast halves B's L2 traffic: with rows that are not 128-byte aligned
 * (K = 4104) single CTAs ran at 0.55 x cuBLAS, pairs at 0.98 x (NOTES.md).
 * kCM = 1 (odd grids, few M-blocks) is the same without the cluster.
 * The producer runs up to 4 k-blocks ahead, so it already loads the next
 * unit while the consumers are in the epilogue. Units come from hooks.tile(i)
 * for i = cluster, cluster + nclusters, ... (hook 2: the default is the
 * grouped L2 order of gemm_sched.h; a fused kernel can put local rows first
 * and peers' rows in arrival order).
 *
 * Hooks (a struct passed by value; see DefaultHooks for the defaults):
 *   tile(p, i)           the i-th work unit (hook 2): {first M-block, N-block},
 *                        optionally a range [kb0, kb1) of k-blocks (split-K:
 *                        the unit's accumulators hold that slice's partial
 *                        product) and a tag `part` the other hooks get back;
 *                        CTA r of the cluster computes M-block m_blk + r
 *                        (p.cluster_m tiles per unit; m_blk is a multiple of
 *                        it). Tiles past M are computed but not stored.
 *   wait_a(p, t, kb)     kWaitA hooks only: called by the producer thread
 *                        before the TMA loads of k-block kb of ITS tile t
 *                        (A rows of t, and this CTA's half of B); spin
 *                        here on a peer's arrival counter (hook 1) with the
 *                        runtime's deadline wait (kernels/rt/wait.cuh:
 *                        spin_geq; the producer has 40 registers). After it
 *                        returns the producer issues fence.proxy.async so
 *                        TMA sees what the generic proxy (a peer's or
 *                        another CTA's stores) wrote.
 *   a_src(p, m_blk, &row)  kASrc hooks only (optional member): the tensor
 *                        map that M-block m_blk's rows of A come from and
 *                        the row of that map where they start (default:
 *                        p.tm_a at m_blk * BM); the map must live in kernel
 *                        parameters or global memory, e.g. a member of a
 *                        __grid_constant__ hooks struct. A fused kernel
 *                        reads its own rows straight from the caller's A.
 *   b_row(p, u)          kBRow hooks only (optional member): rows of p.tm_b
 *                        to skip for unit u's B tile (a grouped GEMM's group
 *                        g: g x N with transB, g x K without); asked with
 *                        the unit as tile() gave it (its first M-block), so
 *                        both CTAs of a pair load the same tile.
 *   b_split(p, u)        kBSplit hooks only (optional, pairs): true when the
 *                        pair's two tiles need different B tiles; each CTA
 *                        then loads its own whole (b_row of its own tile),
 *                        no multicast.  Both CTAs must answer alike.
 *   target(p, t)         where the tile goes (hook 3): TMA store through any
 *                        tensor map (local D, a peer's buffer), TMA add into
 *                        an fp32 staging bank, or direct stores to a pointer;
 *                        the type it is stored in (fp32 partial sums for a
 *                        peer, the caller's type for the result), or
 *                        EPI_NONE: dropped (a padding tile).
 *   combine(acc, p, t, wg, t, wrow, q)  kCombine hooks only (optional
 *                        member): all 256 consumer threads, before the
 *                        tile is stored, with the accumulators of their
 *                        fragment (rows wg*64 + wrow (+8), columns
 *                        8j + q (+1) of the tile); a fused kernel adds the
 *                        partial sums that peers sent for the same tile.
 *   after_store(p, t)    kSignal hooks only: one thread, after every store of
 *                        the tile is complete and visible (hook 3, signal);
 *                        with kDeferSignal, when the consumers begin their
 *                        next tile's epilogue (or finish), so that waiting
 *                        for the stores never stalls the mainloop; with
 *                        kEarlySignal too, already after k-block
 *                        signal_kb() of the next tile where it has that
 *                        many (local stores have completed by then: the
 *                        side work that waits for them starts a mainloop
 *                        earlier).
 *   progress(p, t, kb, kb_end)  kProgress hooks only (optional member):
 *                        the producer thread, after issuing k-block kb of
 *                        its tile t (kb_end: the tile's end; every tile,
 *                        padding ones too), on the producer's few
 *                        registers (see side_work): a word in shared
 *                        memory at most, e.g. for side work timed by the
 *                        mainloop's progress.
 *   glu                  kGlu hooks only (optional member, int): a gated
 *                        linear unit in the epilogue (SwiGLU): column c of
 *                        a tile (c < BN / 2) is silu(gate) * up of the
 *                        products with B's columns n_blk * BN / 2 + c (the
 *                        gate) and glu + n_blk * BN / 2 + c (the up
 *                        projection), one output tile BN / 2 wide whose
 *                        first column is target()'s col0; p.n is the
 *                        output's columns (glu), p.num_n_blk the tiles
 *                        over them.
 *   p2, second           kTwoProblems hooks only (members): a second
 *                        problem, its GemmParams p2 and its own hooks
 *                        `second` (of type Hooks::Second, whose flags and
 *                        members apply to it as the hooks' to p), whose
 *                        units every CTA takes after its units of p.  The
 *                        ring and its barriers carry on, so the producer
 *                        loads p2's first units while the consumers finish
 *                        p's; a deferred signal of p's last tile is
 *                        flushed before p2's first.  One copy of the
 *                        roles' code per problem inside one role split
 *                        (run_cta called twice spilled registers); done()
 *                        and the role flags (side work, register split)
 *                        are the first hooks'.
 *   done(p, th)          kDone hooks only (optional member): the 256
 *                        consumer threads, with their registers, once their
 *                        last tile is stored and signalled (a last phase).
 *   side_work(p, cta, t) kSideWork hooks only (optional member): threads
 *                        t = 1..127 of the producer warpgroup, which the
 *                        mainloop leaves idle, on 40 registers (48 with
 *                        kWideSideWork, 56 with kWiderSideWork, the
 *                        consumers then on 224 instead of 232), while the
 *                        producer and consumers run
 *                        (cta: the rank given to run_cta). A fused kernel
 *                        does its control work here (a gate, flags)
 *                        without taking a CTA.
 * Roles (hook 4): run_cta(p, hooks, rank, nctas, smem) is the whole compute
 * role; a fused kernel calls it from the CTAs it gives to compute, with
 * rank/nctas counting only those, and does other work in its other CTAs.
 * All CTAs of such a launch need 384 threads and kSmemBytes of dynamic smem;
 * with kCM = 2 roles go by cluster (both CTAs of a cluster compute, or none).
 * Size a persistent grid with cudaOccupancyMaxActiveClusters (launch_cm
 * does): a spinning grid must be co-resident.
 */
#pragma once

#include <cuda.h> /* CUtensorMap (type only; no libcuda link needed) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <utility>

#include "gemm.h"
#include "gemm_sched.h"
#include "rt/num.cuh"
#include "rt/ptx.cuh"
#include "rt/wgmma.cuh"
#include "wgmma_n256.h"

namespace mki {
namespace gemm {

constexpr int BM = MKI_GEMM_BM, BN = MKI_GEMM_BN, BK = MKI_GEMM_BK;
constexpr int kStages = 4;
constexpr int kThreads = 384;
constexpr int kABytes = BM * BK * 2;            /* 16 KB */
constexpr int kBBytes = BN * BK * 2;            /* 32 KB */
constexpr int kStageBytes = kABytes + kBBytes;  /* 48 KB */
constexpr int kEpiChunkBytes = 64 * 128;        /* 64 rows x 128 B, one TMA box */
constexpr int kEpiBytes = 2 /*WG*/ * 2 /*bufs*/ * kEpiChunkBytes;
constexpr int kBarBytes = 256;
/* +1024: the dynamic smem base is only 16-byte aligned; swizzle atoms need 1 KB */
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kEpiBytes + kBarBytes;
static_assert(kSmemBytes <= 227 * 1024, "shared memory over the sm_90 limit");

/* Kernel parameters (passed by value as __grid_constant__: the tensor maps must
 * live in param/const/global space for TMA). */
struct GemmParams {
    CUtensorMap tm_a;  /* dims {K, M}, box {64, 128}, 128B swizzle */
    CUtensorMap tm_b;  /* trans_b: {K, N} box {64, 128}; else {N, K} box {64, 64} */
    CUtensorMap tm_d;  /* dims {N, M}, box {128 B / elem, 64}, 128B swizzle */
    int m, n, k;
    int num_m_blk, num_n_blk, num_k_blk, num_tiles, group_m;
    int cluster_m; /* tiles per work unit along M (1 or 2: CTAs per cluster) */
    int num_units; /* work units: ceil(num_m_blk / cluster_m) * num_n_blk */
    float alpha, beta;
    const void *c;
    long long ldc;
    void *d;
    long long ldd;
    int out_type;   /* mki_dtype_t of C and D */
    int epi_direct; /* D cannot take TMA stores */
};

/* it: the consumers' iteration (0, 1, ... over this CTA's units; hooks
 * get it in target, combine and after_store, e.g. to name a per-CTA ring
 * slot); tile() and wait_a() see 0. */
struct TileCoord {
    int m_blk, n_blk;
    int it = 0;
    int kb0 = 0, kb1 = -1; /* k-blocks [kb0, kb1) of the unit (-1: to the end) */
    int part = 0;          /* the hooks' own tag (e.g. a K-slice), passed through */
};

enum EpiMode { EPI_TMA_STORE = 0, EPI_TMA_ADD = 1, EPI_DIRECT = 2, EPI_NONE = 3, EPI_ROWS = 4 };

/* Where a tile's result goes. TMA modes: tmap has box {128 B / elem, 64} and
 * 128B swizzle (encode_out_map in gemm_launch.h makes one), and (row0, col0)
 * is where the tile's element (0, 0) lands in it. TMA clips only at the map's
 * dims, not at the problem's M and N: encode the map over exactly the window
 * the tile may write (base at the window's origin, dims = window). Measured
 * on H100: a map whose row is not a whole number of 16-byte units (1300
 * bf16) got the rest of the last unit written too (4 elements past the
 * edge), so keep cols * elem_size a multiple of 16 or use EPI_DIRECT
 * (mki_gemm does; see epi_direct in gemm_host.c).
 * EPI_TMA_ADD adds with cp.reduce.async.bulk (use an fp32 map for an fp32
 * staging bank: one rounding, at the owner). EPI_DIRECT: ptr/ld of a
 * row-major matrix of out_type; rows >= p.m or cols >= p.n of the problem
 * are skipped, and rows of the tile from `rows` on when it is set (a
 * grouped GEMM's last tile of a group). EPI_NONE: the tile is computed and dropped
 * (a padding tile of a fused kernel's schedule; nothing is stored, no
 * hook runs). EPI_ROWS (hooks with kRowPtr only): each row of the tile
 * goes where the hooks' row_ptr(row0 + r) says (nullptr: not stored),
 * columns from col0, rows from `rows` on skipped as in EPI_DIRECT (a
 * scatter of rows, e.g. to other GPUs' memory).  out_type (mki_dtype_t; -1: p.out_type) is the type the
 * tile is stored as: a fused kernel stores some tiles as fp32 partial
 * sums and others in the caller's type. */
struct EpiTarget {
    int mode;
    const CUtensorMap *tmap;
    int row0, col0;
    void *ptr;
    long long ld;
    int out_type = -1;
    int rows = -1; /* EPI_DIRECT: rows of the tile to store (-1: up to p.m) */
};

/* ---------------------------------------------------------------- PTX */
/* The shared helpers (mbarriers, bulk groups, proxy fences, signals, named
 * barriers: kernels/rt/ptx.cuh; wgmma groups, descriptors, register
 * reallocation: kernels/rt/wgmma.cuh) are the device runtime's; here only
 * what is the engine's own: its tensor TMA. */

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1,
                                            uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
        : "memory");
}

__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, int c0, int c1,
                                             const void *src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     map),
                 "r"(c0), "r"(c1), "r"(smem_u32(src))
                 : "memory");
}

__device__ __forceinline__ void tma_add_2d(const CUtensorMap *map, int c0, int c1,
                                           const void *src)
{
    asm volatile(
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
        " [%0, {%1, %2}], [%3];" ::"l"(map),
        "r"(c0), "r"(c1), "r"(smem_u32(src))
        : "memory");
}

/* Lab builds (a fused kernel's trace): MKI_LAB_TS(h, it, w), defined
 * before this header as a call of the hooks, stamps point w of the
 * it-th unit of the CTA: 0 the consumers' first full stage, 1 the end of
 * their mainloop, 2 the producer's first load.  Nothing otherwise. */
#ifndef MKI_LAB_TS
#define MKI_LAB_TS(h, it, w) ((void)0)
#endif

/* ---------------------------------------------------------------- hooks */

/* The optional hooks (the list at the top says what each does):
 * Trait<H>::value is H's `static constexpr bool Member`, false when H
 * declares none. */
#define MKI_HOOK_FLAG(Trait, Member)                                                         \
    template <typename H, typename = void> struct Trait {                                    \
        static constexpr bool value = false;                                                 \
    };                                                                                       \
    template <typename H> struct Trait<H, decltype((void)H::Member)> {                        \
        static constexpr bool value = H::Member;                                             \
    };
MKI_HOOK_FLAG(HooksHaveASrc, kASrc)
MKI_HOOK_FLAG(HooksHaveBRow, kBRow)
MKI_HOOK_FLAG(HooksHaveBSplit, kBSplit)
MKI_HOOK_FLAG(HooksHaveSideWork, kSideWork)
MKI_HOOK_FLAG(HooksDeferSignal, kDeferSignal)
MKI_HOOK_FLAG(HooksHaveCombine, kCombine)
MKI_HOOK_FLAG(HooksHaveDone, kDone)
MKI_HOOK_FLAG(HooksHaveProgress, kProgress)
MKI_HOOK_FLAG(HooksWideSideWork, kWideSideWork)
MKI_HOOK_FLAG(HooksWiderSideWork, kWiderSideWork)
MKI_HOOK_FLAG(HooksEarlySignal, kEarlySignal)
MKI_HOOK_FLAG(HooksHaveGlu, kGlu)
MKI_HOOK_FLAG(HooksTwoProblems, kTwoProblems)
MKI_HOOK_FLAG(HooksHaveRowPtr, kRowPtr)
#undef MKI_HOOK_FLAG
/* Either problem's hooks store rows by EPI_ROWS (their copies are issued
 * by more threads than the first). */
template <typename H, bool kTwo = HooksTwoProblems<H>::value>
struct HooksAnyRowPtr {
    static constexpr bool value = HooksHaveRowPtr<H>::value;
};
template <typename H>
struct HooksAnyRowPtr<H, true> {
    static constexpr bool value = HooksHaveRowPtr<H>::value || HooksHaveRowPtr<typename H::Second>::value;
};

struct DefaultHooks {
    static constexpr bool kWaitA = false;  /* wait_a is called at all */
    static constexpr bool kSignal = false; /* after_store is called at all */
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        TileCoord t;
        mki_gemm_unit_of(i, p.num_m_blk, p.num_n_blk, p.group_m, p.cluster_m, &t.m_blk,
                         &t.n_blk);
        return t;
    }
    __device__ __forceinline__ void wait_a(const GemmParams &, TileCoord, int) const {}
    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e;
        e.mode = p.epi_direct ? EPI_DIRECT : EPI_TMA_STORE;
        e.tmap = &p.tm_d;
        e.row0 = t.m_blk * BM;
        e.col0 = t.n_blk * BN;
        e.ptr = p.d;
        e.ld = p.ldd;
        return e;
    }
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord) const {}
};

} // namespace gemm
} // namespace mki

/* The epilogue: the tile's stores (uses the parameters, targets and hook
 * flags above). */
#include "gemm_epilogue.cuh"

namespace mki {
namespace gemm {

/* ---------------------------------------------------------------- roles */

__device__ __forceinline__ uint32_t cluster_ctarank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* All threads of both CTAs of the cluster (those that have not exited). */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* Arrive on the mbarrier at the same smem offset in CTA `cta` of the cluster.
 * Default (CTA-scope release) semantics on purpose: the arriving warps only
 * read the stage (wgmma, already retired by wgmma.wait_group), so nothing
 * needs publishing at cluster scope, and `.release.cluster` here measured
 * 1.7x slower for the whole GEMM (bench/NOTES.md, v3). */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta)
{
    asm volatile("{\n.reg .b32 ra;\n"
                 "mapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(smem_u32(bar)),
                 "r"(cta)
                 : "memory");
}

/* TMA load written to the same smem offset in every CTA of `mask`, each
 * CTA's barrier at `bar`'s offset receiving the bytes. */
__device__ __forceinline__ void tma_load_2d_mc(void *dst, const CUtensorMap *map, int c0, int c1,
                                               uint64_t *bar, uint16_t mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask)
        : "memory");
}

/* Work units: one tile (kCM = 1), or kCM tiles stacked along M that share
 * their B tile (kCM = 2: each CTA of the cluster loads half of B and
 * multicasts it to both, halving B's L2 traffic). The hook's tile() returns
 * the unit; CTA rank r of the cluster computes m_blk + r. */
template <int kCM>
__device__ __forceinline__ TileCoord my_tile(TileCoord unit, uint32_t crank)
{
    TileCoord t = unit;
    t.m_blk += (int)(kCM == 1 ? 0 : crank);
    return t;
}

/* B's column (n) of column c of tile column n_blk (c a multiple of 64):
 * with kGlu hooks the tile's halves are the gate's and the up
 * projection's columns. */
template <bool kG, typename Hooks>
__device__ __forceinline__ int b_col(const Hooks &h, int n_blk, int c)
{
    if constexpr (kG)
        return n_blk * (BN / 2) + (c & (BN / 2 - 1)) + (c >= BN / 2 ? h.glu : 0);
    else
        return n_blk * BN + c;
}

/* The whole B tile of k-block kb into this CTA's stage (no multicast). */
template <bool kG, typename Hooks>
__device__ __forceinline__ void load_b_whole(char *sb, const GemmParams &p, const Hooks &h,
                                             bool trans_b, int kb, int n_blk, int bn, int bk,
                                             uint64_t *bar)
{
    if (trans_b) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
            tma_load_2d(sb + j * (kBBytes / 2), &p.tm_b, kb * BK, bn + b_col<kG>(h, n_blk, j * (BN / 2)),
                        bar);
    } else {
#pragma unroll
        for (int j = 0; j < BN / 64; ++j)
            tma_load_2d(sb + j * 8192, &p.tm_b, b_col<kG>(h, n_blk, j * 64), bk + kb * BK, bar);
    }
}

template <int kCM, bool kG, typename Hooks>
__device__ __forceinline__ void producer_run(const GemmParams &p, const Hooks &h, int unit0,
                                             int nunits_step, char *ring, uint64_t *full,
                                             uint64_t *empty, bool trans_b, uint32_t crank,
                                             int &stage, int &phase)
{
    [[maybe_unused]] int pit = 0;
    for (int i = unit0; i < p.num_units; i += nunits_step, ++pit) {
        const TileCoord unit = h.tile(p, i);
        TileCoord tc = my_tile<kCM>(unit, crank);
        /* The pair's second tile may lie past M: load real rows anyway (the
         * result is discarded) so every barrier sees the same bytes. */
        const bool real = tc.m_blk < p.num_m_blk;
        const int m_load = real ? tc.m_blk : p.num_m_blk - 1;
        const CUtensorMap *amap = &p.tm_a;
        int arow = m_load * BM;
        if constexpr (HooksHaveASrc<Hooks>::value) amap = h.a_src(p, m_load, &arow);
        /* B's rows (a grouped GEMM's group): asked for the unit, so that the
         * two CTAs of a pair load halves of the same tile, or, when the
         * pair's tiles are of two groups (split), for this CTA's tile */
        bool split = false;
        if constexpr (kCM == 2 && HooksHaveBSplit<Hooks>::value) split = h.b_split(p, unit);
        int bn = 0, bk = 0;
        if constexpr (HooksHaveBRow<Hooks>::value) {
            const TileCoord bt = split ? tc : unit;
            if (bt.m_blk < p.num_m_blk) (trans_b ? bn : bk) = h.b_row(p, bt);
        }
        const int kb_end = tc.kb1 < 0 ? p.num_k_blk : tc.kb1;
        for (int kb = tc.kb0; kb < kb_end; ++kb) {
            if constexpr (Hooks::kWaitA) {
                if (real) {
                    h.wait_a(p, tc, kb);
                    fence_proxy_async_global(); /* peer's generic stores -> TMA reads */
                }
            }
            mbar_wait(&empty[stage], phase ^ 1);
            if (kb == tc.kb0) MKI_LAB_TS(h, pit, 2);
            char *sa = ring + stage * kStageBytes;
            char *sb = sa + kABytes;
            mbar_expect_tx(&full[stage], kStageBytes);
            tma_load_2d(sa, amap, kb * BK, arow, &full[stage]);
            if (kCM == 1 || split) {
                load_b_whole<kG>(sb, p, h, trans_b, kb, tc.n_blk, bn, bk, &full[stage]);
            } else {
                /* this CTA's half of B, to both CTAs */
                if (trans_b) {
                    tma_load_2d_mc(sb + crank * (kBBytes / 2), &p.tm_b, kb * BK,
                                   bn + b_col<kG>(h, tc.n_blk, crank * (BN / 2)), &full[stage], 0x3);
                } else {
#pragma unroll
                    for (int jj = 0; jj < 2; ++jj) {
                        const int j = 2 * crank + jj;
                        tma_load_2d_mc(sb + j * 8192, &p.tm_b, b_col<kG>(h, tc.n_blk, j * 64),
                                       bk + kb * BK, &full[stage], 0x3);
                    }
                }
            }
            if constexpr (HooksHaveProgress<Hooks>::value) h.progress(p, tc, kb, kb_end);
            if (++stage == kStages) {
                stage = 0;
                phase ^= 1;
            }
        }
    }
}

/* The producer thread: the units of p, then (kTwoProblems hooks) those of
 * h.p2, through one ring (its stages and phases carry on). */
template <int kCM, typename Hooks>
__device__ __forceinline__ void producer(const GemmParams &p, const Hooks &h, int unit0,
                                         int nunits_step, char *ring, uint64_t *full,
                                         uint64_t *empty, bool trans_b, uint32_t crank)
{
    int stage = 0, phase = 0;
    producer_run<kCM, HooksHaveGlu<Hooks>::value>(p, h, unit0, nunits_step, ring, full, empty,
                                                   trans_b, crank, stage, phase);
    if constexpr (HooksTwoProblems<Hooks>::value) {
        asm volatile("" : "+l"(ring), "+l"(full), "+l"(empty)); /* as in consumer() */
        asm volatile("" : "+r"(unit0), "+r"(nunits_step), "+r"(crank));
        producer_run<kCM, HooksHaveGlu<typename Hooks::Second>::value>(
            h.p2, h.second, unit0, nunits_step, ring, full, empty, trans_b, crank, stage, phase);
    }
}

/* Stage `s` is free again: in this CTA, and (kCM = 2) in the peer, whose
 * producer writes its half of B into our ring too. */
template <int kCM>
__device__ __forceinline__ void release_stage(uint64_t *empty, int s)
{
    if constexpr (kCM == 1) {
        mbar_arrive(&empty[s]);
    } else {
        mbar_arrive(&empty[s]);
        mbar_arrive_cluster(&empty[s], cluster_ctarank() ^ 1);
    }
}

/* The consumers' loop over the units of one problem (p: the call's, or a
 * kTwoProblems hooks' p2; kG: its gated unit); the ring's stage and phase
 * and the iteration carry on from the problem before. */
template <bool kF16, bool kTransB, int kCM, bool kG, typename Hooks>
__device__ __forceinline__ void consumer_run(const GemmParams &p, const Hooks &h, int unit0,
                                             int nunits_step, char *ring, uint64_t *full,
                                             uint64_t *empty, char *my_epi, int wg, int t,
                                             uint32_t crank, int &stage, int &phase, int &it)
{
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i)
        acc[i] = 0.0f;
    const int lane = t & 31;
    const uint32_t ring_addr = smem_u32(ring);
    constexpr bool kDefer = Hooks::kSignal && HooksDeferSignal<Hooks>::value;
    TileCoord pend{0, 0};
    bool has_pend = false;
    int skb = 0; /* k-blocks into a tile after which the previous one is signalled */
    if constexpr (kDefer && HooksEarlySignal<Hooks>::value)
        skb = h.signal_kb();
    for (int i = unit0; i < p.num_units; i += nunits_step, ++it) {
        TileCoord tc = my_tile<kCM>(h.tile(p, i), crank);
        tc.it = it;
        int prev = -1;
        const int kb_end = tc.kb1 < 0 ? p.num_k_blk : tc.kb1;
        for (int kb = tc.kb0; kb < kb_end; ++kb) {
            mbar_wait(&full[stage], phase);
            if (kb == tc.kb0 && wg == 0 && t == 0) MKI_LAB_TS(h, it, 0);
            const uint32_t a_addr = ring_addr + stage * kStageBytes + wg * (64 * 128);
            const uint32_t b_addr = ring_addr + stage * kStageBytes + kABytes;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                uint64_t da = smem_desc(a_addr + kk * 32, 16, 1024);
                uint64_t db = kTransB ? smem_desc(b_addr + kk * 32, 16, 1024)
                                      : smem_desc(b_addr + kk * 2048, 8192, 1024);
                Wgmma256<kF16, kTransB ? 0 : 1>::run(acc, da, db, kb != tc.kb0 || kk != 0);
            }
            wgmma_commit();
            wgmma_wait<1>(acc);
            if (prev >= 0 && lane == 0)
                release_stage<kCM>(empty, prev);
            prev = stage;
            if (++stage == kStages) {
                stage = 0;
                phase ^= 1;
            }
            if constexpr (kDefer && HooksEarlySignal<Hooks>::value) {
                if (has_pend && skb > 0 && kb == tc.kb0 + skb - 1) {
                    flush_signal(p, h, pend, wg, t);
                    has_pend = false;
                }
            }
        }
        wgmma_wait<0>(acc);
        if (wg == 0 && t == 0) MKI_LAB_TS(h, it, 1);
        if (prev >= 0 && lane == 0)
            release_stage<kCM>(empty, prev);
        if (tc.m_blk >= p.num_m_blk)
            continue; /* the unit's second tile lies past M */
        const EpiTarget e = h.target(p, tc);
        if (e.mode == EPI_NONE)
            continue; /* a padding tile of the hooks' schedule */
        if constexpr (kDefer) {
            if (has_pend)
                flush_signal(p, h, pend, wg, t);
            pend = tc;
            has_pend = true;
        }
        switch (e.out_type >= 0 ? e.out_type : p.out_type) {
        case MKI_DT_BF16: epilogue<MKI_DT_BF16, kG>(acc, p, h, tc, e, my_epi, wg, t); break;
        case MKI_DT_F16: epilogue<MKI_DT_F16, kG>(acc, p, h, tc, e, my_epi, wg, t); break;
        default: epilogue<MKI_DT_F32, kG>(acc, p, h, tc, e, my_epi, wg, t); break;
        }
    }
    /* the problem's last tile signalled before the next problem's (whose
     * loads may wait for it) */
    if constexpr (kDefer) {
        if (has_pend)
            flush_signal(p, h, pend, wg, t);
    }
}

template <bool kF16, bool kTransB, int kCM, typename Hooks>
__device__ __forceinline__ void consumer(const GemmParams &p, const Hooks &h, int unit0,
                                         int nunits_step, char *ring, uint64_t *full,
                                         uint64_t *empty, char *epi, int wg, int t, uint32_t crank)
{
    int stage = 0, phase = 0, it = 0;
    char *my_epi = epi + wg * 2 * kEpiChunkBytes;
    consumer_run<kF16, kTransB, kCM, HooksHaveGlu<Hooks>::value>(
        p, h, unit0, nunits_step, ring, full, empty, my_epi, wg, t, crank, stage, phase, it);
    if constexpr (HooksTwoProblems<Hooks>::value) {
        /* the second problem's values derived anew from opaque copies:
         * what the compiler would otherwise keep from the first problem's
         * loop stays live through its epilogue and spills */
        asm volatile("" : "+l"(ring), "+l"(full), "+l"(empty), "+l"(my_epi));
        asm volatile("" : "+r"(wg), "+r"(t), "+r"(crank), "+r"(unit0), "+r"(nunits_step));
        consumer_run<kF16, kTransB, kCM, HooksHaveGlu<typename Hooks::Second>::value>(
            h.p2, h.second, unit0, nunits_step, ring, full, empty, my_epi, wg, t, crank, stage, phase, it);
    }
    /* Stores still in flight read smem: keep the CTA alive until they have
     * (EPI_ROWS: threads 0-63 of each consumer warpgroup issue them). */
    if (t == 0 || (HooksAnyRowPtr<Hooks>::value && t < 64))
        bulk_wait_all();
    if constexpr (HooksHaveDone<Hooks>::value)
        h.done(p, wg * 128 + t);
}

/* The compute role of one CTA: units rank/kCM, rank/kCM + nctas/kCM, ... of
 * the problem. Must be called by all 384 threads of a CTA launched with
 * kSmemBytes of dynamic shared memory and __launch_bounds__(384, 1); with
 * kCM = 2 the launch has clusters of 2 CTAs, rank and nctas are even-aligned
 * (CTA rank r of cluster c has rank 2c + r) and both CTAs of a cluster take
 * this role (a fused kernel gives roles per cluster). */
template <bool kF16, bool kTransB, int kCM, typename Hooks>
__device__ __forceinline__ void run_cta(const GemmParams &p, const Hooks &h, int rank, int nctas,
                                        char *smem_raw)
{
    char *smem = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *ring = smem;
    char *epi = ring + kStages * kStageBytes;
    uint64_t *full = (uint64_t *)(epi + kEpiBytes);
    uint64_t *empty = full + kStages;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const uint32_t crank = kCM == 1 ? 0 : cluster_ctarank();

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8 * kCM); /* one arrive per consumer warp of the cluster */
        }
        mbar_init_fence();
    }
    if constexpr (kCM == 1)
        __syncthreads();
    else
        cluster_sync(); /* the peer's multicasts and arrives target our barriers */

    /* The producer warpgroup's registers (one thread issues the loads; the
     * others run the hooks' side work) and the consumers': 40 / 232, or
     * 48 / 224 for side work that keeps more in flight (kWideSideWork),
     * 56 / 224 for more still (kWiderSideWork). */
    constexpr bool wider = HooksWiderSideWork<Hooks>::value;
    constexpr bool wide = wider || HooksWideSideWork<Hooks>::value;
    if (wg == 0) {
        setmaxnreg_dec<wider ? 56 : wide ? 48 : 40>();
        if (t == 0)
            producer<kCM>(p, h, rank / kCM, nctas / kCM, ring, full, empty, kTransB, crank);
        else if constexpr (HooksHaveSideWork<Hooks>::value)
            h.side_work(p, rank, t);
    } else {
        if constexpr (wide) setmaxnreg_inc<224>();
        else setmaxnreg_inc<232>();
        consumer<kF16, kTransB, kCM>(p, h, rank / kCM, nctas / kCM, ring, full, empty, epi,
                                     wg - 1, t, crank);
    }
    if constexpr (kCM != 1) {
        __syncwarp(); /* the producer lane rejoins its warp: the barrier is .aligned */
        cluster_sync(); /* no CTA leaves while the peer may still arrive on its barriers */
    }
}

template <bool kF16, bool kTransB, int kCM, typename Hooks>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ Hooks h)
{
    extern __shared__ char smem[];
    run_cta<kF16, kTransB, kCM, Hooks>(p, h, blockIdx.x, gridDim.x, smem);
}

} // namespace gemm
} // namespace mki
