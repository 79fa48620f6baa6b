/*
 * gemm_rs.cu - the device side of mkGemmReduceScatter: the GEMM engine
 * with hooks that order the tiles by destination (kernels/ops/gemm_rs.h:
 * rounds over the peers, own rows lagged), store a peer's tiles as fp32
 * partials into its slot and raise its flag, and, for this rank's own
 * tiles, add the peers' partials (after its own, in rank order) before
 * storing C.
 *
 *   every CTA            e = calls + 1 (shared memory)
 *   a peer tile          consumers: the outbox tile it % MKI_GRS_RING is
 *                        free once the movers are past iteration
 *                        it - MKI_GRS_RING; the TMA store of the fp32
 *                        tile into it (local memory); when the consumers
 *                        begin their next tile's epilogue (the store has
 *                        completed): posted = it + 1
 *                        movers (warps 1-3 of the producer warpgroup):
 *                        once per peer, wait until it released e - 1; wait
 *                        posted > it; copy the tile into the peer's slot
 *                        (16-byte stores over NVLink); the peer's flag of
 *                        the tile's group += 1 (system scope); moved = it + 1
 *   an own tile          consumer thread 128: every source's flag of the
 *                        group reaches its tile count (then cleared to 0);
 *                        all 256 consumer threads add the sources' slots
 *                        to their accumulators (their own partial first,
 *                        then the sources in rank order); store C
 *   last CTA out         calls = e, released = e (here and in the peers'
 *                        peer_released[me])
 *
 * Communication stays out of the mainloop and out of the epilogue: the
 * epilogue's store goes to local memory, and the link is driven by warps
 * that the mainloop leaves idle (measured on 2 H100s: storing the
 * partials straight over NVLink from the epilogue cost 1.39x the GEMM at
 * 8192^3, bench/NOTES.md).  The only waits of the consumers are in the
 * epilogue of own tiles, which the schedule puts about three waves after
 * the peers computed the same tiles.  Every wait on a peer has a deadline
 * and watches the abort word (kernels/rt/wait.cuh).
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm/gemm_launch.h"
#include "ops/gemm_rs.h"
#include "rt/wait.cuh"

using namespace mki;
using namespace mki::gemm;

namespace {

/* This CTA's call, the peers it may write to, the first failure it
 * noted (reported by one thread after the tiles), and the hand-over of
 * outbox tiles from its consumers to its movers. */
struct GrsCta {
    uint64_t e;
    unsigned gated; /* bit d: peer d released the previous call */
    cta_note note;
    int posted;     /* consumers: iterations < posted are in the outbox */
    int moved;      /* movers: iterations < moved are copied (or were not theirs) */
#ifdef MKI_GRS_TRACE
    uint64_t ts[10]; /* lab builds: globaltimer at the points of GRS_STAMP */
    int kind;       /* 1 own sum, 2 peer partial, 3 own slice */
#endif
};
__shared__ GrsCta grs;

/* Lab builds only (-DMKI_GRS_TRACE=CALL): timestamps of one call, printed
 * per CTA by finish(); nothing otherwise. */
#ifdef MKI_GRS_TRACE
#define GRS_STAMP(i) (grs.ts[i] = globaltimer())
#define GRS_KIND(k) (grs.kind = (k))
#else
#define GRS_STAMP(i) ((void)0)
#define GRS_KIND(k) ((void)0)
#endif

constexpr int kMovers = 96;  /* threads 32..127 of the producer warpgroup */
constexpr int kMoverBar = 4; /* named barrier of the movers (the engine's: 0-3) */

struct GrsHooks {
    static constexpr bool kWaitA = false;
    static constexpr bool kSignal = true;
    static constexpr bool kDeferSignal = true; /* flags one tile late: no stall */
    static constexpr bool kASrc = true;
    static constexpr bool kCombine = true;
    static constexpr bool kSideWork = true; /* the movers */
    static constexpr bool kDone = true;     /* mkGemmAllReduce: the gather */
    CUtensorMap tm_out;                /* the outbox: grid x ring tiles of fp32 */
    CUtensorMap tm_c;                  /* my rows of D, when TMA can store them */
    CUtensorMap tm_slot[MKI_MAXLOCAL]; /* direct: my slots in rank d's bank (d = me: my own
                                        * slices' slots), slices stacked */
    int direct;                 /* K-slices: partials stored by the epilogue, no movers */
    float *dst[MKI_MAXLOCAL];          /* peer d's first slot for my partials; d = me: my
                                        * own slices' first slot */
    const float *outbox;
    int P, me, nnb, group_m, lag;
    int S, nkb;                 /* K-slices per tile, k-blocks of K */
    int c_type;                 /* mki_dtype_t of C (the GEMM's own: fp32) */
    int row_off[MKI_MAXLOCAL + 1];
    int nb[MKI_MAXLOCAL];       /* M-blocks of owner d */
    int vstart[MKI_MAXLOCAL + 1]; /* first virtual M-block of owner d */
    int grp[MKI_MAXLOCAL];      /* tiles per flag of owner d */
    int n;
    long long ld, slot_elems;   /* fp32 slot rows, elements per slot */
    /* where slice x of slab j starts (bank + j * sslab + x * sstep) and its
     * row stride, fp32 elements: S = 1 slot j, ld; S > 1 the slabs of
     * mki_grs_bank_bytes */
    long long sslab, sstep, sld;
    void *c;
    const float *bank;          /* mine */
    mki_grs_ctl *ctl[MKI_MAXLOCAL];
    int ar;                     /* mkGemmAllReduce */
    int es;                     /* bytes of an element of C */
    char *c_full;               /* ar: all of D here */
    char *inbox[MKI_MAXLOCAL];  /* ar: rank d's inbox (rows as in D) */
    uint64_t *agflag[MKI_MAXLOCAL]; /* ar: rank d's agflag[P - 1][MKI_GRS_MAXFLAGS] */
    mki_grs_sched sched;
    mki_rt_dev rt;

    __device__ __forceinline__ bool wait(const uint64_t *addr, uint64_t target, int d, int chunk,
                                         int phase) const
    {
        return wait_noted(rt, grs.note, addr, target, rt.glob[d], chunk, phase);
    }

    /* Virtual M-block -> owner and its block. */
    __device__ __forceinline__ int owner(int m_blk, int *b) const
    {
        int d = 0;
        while (d + 1 < P && vstart[d + 1] <= m_blk) ++d;
        *b = m_blk - vstart[d];
        return d;
    }

    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        int s = 0;
        while (s + 1 < sched.nseg && sched.pos0[s + 1] <= i) ++s;
        const unsigned mask = sched.mask[s];
        const int c = __popc(mask), off = i - sched.pos0[s];
        const int k = sched.k0[s] + off / c;
        unsigned m = mask;
        for (int x = off % c; x > 0; --x) m &= m - 1;
        const int bit = __ffs(m) - 1;
        const int d = bit == P ? me : (me + bit) % P;
        const int u = bit == P ? k - lag : k; /* (unit, slice), slice 0 last */
        TileCoord t;
        mki_gemm_unit_of(u / S, nb[d], nnb, group_m, p.cluster_m, &t.m_blk, &t.n_blk);
        t.m_blk += vstart[d];
        t.part = S - 1 - u % S;
        t.kb0 = t.part * nkb / S;
        t.kb1 = (t.part + 1) * nkb / S;
        return t;
    }

    __device__ __forceinline__ const CUtensorMap *a_src(const GemmParams &p, int m_blk,
                                                        int *row) const
    {
        int b;
        const int d = owner(m_blk, &b);
        if (b >= nb[d]) b = nb[d] - 1; /* a padding tile: any rows */
        *row = row_off[d] + b * BM;
        return &p.tm_a;
    }

    __device__ __forceinline__ EpiTarget target(const GemmParams &, TileCoord t) const
    {
        int b;
        const int d = owner(t.m_blk, &b);
        EpiTarget e;
        e.row0 = b * BM;
        e.col0 = t.n_blk * BN;
        e.ptr = nullptr;
        e.ld = 0;
        e.tmap = nullptr;
        if (b >= nb[d]) {
            e.mode = EPI_NONE;
        } else if (direct) {
            /* every slice into a slot; own slice 0 into my slab's last
             * (summed by this CTA's consumers in done) */
            e.mode = EPI_TMA_STORE;
            e.tmap = &tm_slot[d];
            e.col0 += (int)((d != me ? t.part : t.part == 0 ? S - 1 : t.part - 1) * sstep);
            e.out_type = MKI_DT_F32;
        } else if (d != me || t.part != 0) {
            e.mode = EPI_TMA_STORE;
            e.tmap = &tm_out;
            e.row0 = out_tile(t.it) * BM;
            e.col0 = 0;
            e.out_type = MKI_DT_F32;
        } else {
            e.mode = EPI_TMA_STORE;
            e.tmap = &tm_c;
            e.out_type = c_type;
        }
        return e;
    }

    /* The outbox tile of this CTA's iteration it. */
    __device__ __forceinline__ int out_tile(int it) const
    {
        return (int)blockIdx.x * MKI_GRS_RING + it % MKI_GRS_RING;
    }

    /* Peer d finished reading its slot for the previous call (one mover,
     * before the CTA's first store to d). */
    __device__ __forceinline__ void gate(int d) const
    {
        if (grs.gated & (1u << d)) return;
        const uint64_t e = grs.e;
        if (e > 1) (void)wait(&ctl[me]->peer_released[d], e - 1, d, -1, 2);
        grs.gated |= 1u << d;
    }

    __device__ __forceinline__ void combine(float (&acc)[128], const GemmParams &, TileCoord t,
                                            int wg, int th, int wrow, int q) const
    {
        int b;
        const int d = owner(t.m_blk, &b);
        if (direct) {
            /* straight into the slot: peer d must have released it */
            if (wg == 0 && th == 0) GRS_KIND(d != me ? 2 : t.part != 0 ? 3 : 1);
            if (d != me && wg == 0 && th == 0) gate(d);
            role_sync(3, 256);
            return;
        }
        if (d != me || t.part != 0) {
            /* The outbox tile must be copied out (iteration it - ring);
             * the movers get past every iteration, failed or not. */
            if (th == 0)
                while (*(volatile int *)&grs.moved < t.it - MKI_GRS_RING + 1) {
                }
            return;
        }
        const int m_me = row_off[me + 1] - row_off[me];
        const int tiles = nb[me] * nnb, g = grp[me];
        const int id = b * nnb + t.n_blk, gi = id / g;
        if (wg == 0 && th == 0) {
            GRS_STAMP(1);
            GRS_KIND(1);
            const int cnt = tiles - gi * g < g ? tiles - gi * g : g;
            bool ok = true;
            for (int j = 0; j < P - 1 && ok; ++j)
                ok = wait(&ctl[me]->flag[j][gi], (uint64_t)(cnt * S), (me + j + 1) % P, id, 0);
            if (ok && S > 1) /* my own slices 1.. */
                ok = wait(&ctl[me]->flag[P - 1][gi], (uint64_t)(cnt * (S - 1)), me, id, 4);
            if (ok && g == 1)
                for (int j = 0; j < P; ++j) ctl[me]->flag[j][gi] = 0;
        }
        role_sync(3, 256); /* every source's partial of the tile has landed */
        if (wg == 0 && th == 0) GRS_STAMP(2);
        const int r0 = b * BM + wg * 64 + wrow, c0 = t.n_blk * BN + q;
        /* My partial (its slices in order), then the sources' in rank
         * order, each's slices in order: a fixed order (the same bits call
         * after call); kJ column groups of 8 at a time, 2 kJ loads in
         * flight */
        constexpr int kJ = 8;
        const int nslots = P * S - 1;
#pragma unroll
        for (int j0 = 0; j0 < 32; j0 += kJ) {
            for (int x = 0; x < nslots; ++x) {
                /* x < S - 1: my slice x + 1; then source (me + 1 + ...)
                 * taken in rank order */
                int sj, sx;
                if (x < S - 1) {
                    sj = P - 1, sx = x;
                } else {
                    const int y = x - (S - 1), sr = y / S; /* sr-th source in rank order */
                    const int src = sr < me ? sr : sr + 1;
                    sj = mki_grs_slot(src, me, P), sx = y % S;
                }
                const float *slot = bank + sj * sslab + sx * sstep;
                float2 v[2 * kJ];
#pragma unroll
                for (int x = 0; x < 2 * kJ; ++x) {
                    const int jj = j0 + (x >> 1), h = x & 1;
                    const int r = r0 + 8 * h, cc = c0 + 8 * jj;
                    v[x] = make_float2(0.0f, 0.0f);
                    if (r < m_me && cc < n)
                        v[x] = __ldcg(reinterpret_cast<const float2 *>(slot + r * sld + cc));
                }
#pragma unroll
                for (int x = 0; x < 2 * kJ; ++x) {
                    const int e0 = 4 * (j0 + (x >> 1)) + 2 * (x & 1);
                    acc[e0] += v[x].x;
                    acc[e0 + 1] += v[x].y;
                }
            }
        }
        if (wg == 0 && th == 0) GRS_STAMP(9);
    }

    /* The tile's stores have completed (both consumer warpgroups, fenced
     * to the generic proxy): hand iteration t.it to the movers. */
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord t) const
    {
        if (direct) { /* a partial in its slot: the owner's flag */
            int b;
            const int d = owner(t.m_blk, &b);
            GRS_STAMP(3);
            if (d == me && t.part == 0) return;
            if (*(volatile int *)&grs.note.quit) return;
            __threadfence_system();
            signal_add_release(&ctl[d]->flag[d != me ? mki_grs_slot(me, d, P) : P - 1]
                                            [(b * nnb + t.n_blk) / grp[d]],
                               1);
            return;
        }
        __threadfence_block();
        *(volatile int *)&grs.posted = t.it + 1;
    }

    /* The movers: the same units as the consumers, in the same order;
     * copy each peer tile from the outbox into the peer's slot, then flag
     * it there. */
    __device__ void side_work(const GemmParams &p, int cta, int th) const
    {
        if (th < 32 || direct) return;
        const int mt = th - 32;
        const int cm = p.cluster_m;
        const int crank = cm == 1 ? 0 : cta % cm;
        const int step = (int)gridDim.x / cm;
        int it = 0;
        for (int i = cta / cm; i < p.num_units; i += step, ++it) {
            const TileCoord u = tile(p, i);
            const int m_blk = u.m_blk + crank;
            int b = 0, d = me;
            if (m_blk < p.num_m_blk) d = owner(m_blk, &b);
            if (ar && d == me && u.part == 0 && b < nb[me]) {
                bcast_tile(b, u.n_blk, it, mt);
            } else if ((d != me || u.part != 0) && b < nb[d]) {
                if (mt == 0) {
                    while (*(volatile int *)&grs.posted <= it) {
                    }
                    __threadfence_block();
                    if (d != me) gate(d);
                }
                role_sync(kMoverBar, kMovers);
                /* my slot in d's bank for this slice; my own slices' from 1 */
                const int x = d != me ? u.part : u.part - 1;
                if (!*(volatile int *)&grs.note.quit) {
                    copy_tile(dst[d] + (long long)x * sstep, d, b, u.n_blk, it, mt);
                    __threadfence_system(); /* this thread's stores, before the flag */
                }
                role_sync(kMoverBar, kMovers);
                if (mt == 0 && !*(volatile int *)&grs.note.quit)
                    signal_add_release(&ctl[d]->flag[d != me ? mki_grs_slot(me, d, P) : P - 1]
                                                    [(b * nnb + u.n_blk) / grp[d]],
                                       1);
            }
            if (mt == 0) *(volatile int *)&grs.moved = it + 1;
        }
    }

    /* mkGemmAllReduce: my reduced tile (b, nblk), stored in C at
     * iteration it, into every peer's inbox (the same place as in C),
     * then the peers' agflags.  A warp per row of up to 512 bytes, a lane
     * per 16 bytes. */
    __device__ __forceinline__ void bcast_tile(int b, int nblk, int it, int mt) const
    {
        if (mt == 0) {
            while (*(volatile int *)&grs.posted <= it) {
            }
            __threadfence_block();
            for (int j = 1; j < P; ++j) gate((me + j) % P);
        }
        role_sync(kMoverBar, kMovers);
        if (!*(volatile int *)&grs.note.quit) {
            const int m_me = row_off[me + 1] - row_off[me];
            const int r0 = b * BM, c0 = nblk * BN;
            const int rows = m_me - r0 < BM ? m_me - r0 : BM;
            const int nv = (n - c0 < BN ? n - c0 : BN) * es / 16;
            const int warp = mt >> 5, lane = mt & 31;
            if (lane < nv) {
                /* byte offsets of row r0 + warp, lane's 16 bytes */
                const long long row = (long long)n * es;
                long long off = ((long long)(row_off[me] + r0 + warp)) * row +
                                (long long)c0 * es + lane * 16;
                /* one row in flight: two spill at 40 registers */
                for (int r = warp; r < rows; r += kMovers / 32, off += (kMovers / 32) * row) {
                    const int4 v = __ldcg(reinterpret_cast<const int4 *>(c_full + off));
                    for (int j = 1; j < P; ++j)
                        *reinterpret_cast<int4 *>(inbox[(me + j) % P] + off) = v;
                }
            }
            __threadfence_system(); /* this thread's stores, before the flags */
        }
        role_sync(kMoverBar, kMovers);
        if (mt == 0 && !*(volatile int *)&grs.note.quit) {
            const int gi = (b * nnb + nblk) / grp[me];
            for (int j = 1; j < P; ++j) {
                const int q = (me + j) % P;
                signal_add_release(agflag[q] + (size_t)mki_grs_slot(me, q, P) * MKI_GRS_MAXFLAGS + gi,
                                   1);
            }
        }
    }

    /* K-slices (direct): this CTA's own tiles (those whose slice 0 it
     * computed), summed by its 256 consumer threads (th) once every slice
     * has landed: all of the tile's real rows spread over the threads, a
     * float4 of every slot in flight at once (the accumulator layout would
     * leave one warp doing all the work at m = 16), the slots in the fixed
     * order of combine (own slice 0, own 1.., then every source in rank
     * order, slice order), rounded once into C and, for mkGemmAllReduce,
     * into every peer's inbox too (then its agflag). */
    __device__ __forceinline__ void sum_own(const GemmParams &p, int th) const
    {
        const int cm = p.cluster_m;
        const int crank = cm == 1 ? 0 : (int)blockIdx.x % cm;
        const int m_me = row_off[me + 1] - row_off[me];
        for (int i = (int)blockIdx.x / cm; i < p.num_units; i += (int)gridDim.x / cm) {
            const TileCoord u = tile(p, i);
            const int m_blk = u.m_blk + crank;
            if (m_blk >= p.num_m_blk || u.part != 0) continue;
            int b;
            if (owner(m_blk, &b) != me || b >= nb[me]) continue;
            const int tiles = nb[me] * nnb, g = grp[me];
            const int id = b * nnb + u.n_blk, gi = id / g;
            if (th == 0) {
                const int cnt = tiles - gi * g < g ? tiles - gi * g : g;
                bool ok = true;
                for (int j = 0; j < P - 1 && ok; ++j)
                    ok = wait(&ctl[me]->flag[j][gi], (uint64_t)(cnt * S), (me + j + 1) % P, id, 0);
                if (ok && S > 1)
                    ok = wait(&ctl[me]->flag[P - 1][gi], (uint64_t)(cnt * (S - 1)), me, id, 4);
                if (ok && g == 1)
                    for (int j = 0; j < P; ++j) ctl[me]->flag[j][gi] = 0;
                if (ar && ok)
                    for (int j = 1; j < P; ++j) gate((me + j) % P);
            }
            __syncwarp();
            role_sync(5, 256);
            if (th == 0) GRS_STAMP(5);
            const int r0 = b * BM, c0 = u.n_blk * BN;
            const int rows = m_me - r0 < BM ? m_me - r0 : BM;
            const int w4 = ((n - c0 < BN ? n - c0 : BN) + 3) / 4; /* float4 per row */
            const bool go = !*(volatile int *)&grs.note.quit;
            for (int q = th; go && q < rows * w4; q += 256) {
                const int r = r0 + q / w4, cc = c0 + 4 * (q % w4);
                const long long at = (long long)r * sld + cc;
                /* own slice 0 (my slab's last), own 1.., sources */
                float4 a = __ldcg(reinterpret_cast<const float4 *>(
                    bank + (P - 1) * sslab + (S - 1) * sstep + at));
                float4 v[8];
                int nv = 0;
                for (int x = 0; x < P * S - 1; x += nv) {
                    nv = P * S - 1 - x < 8 ? P * S - 1 - x : 8;
#pragma unroll
                    for (int y = 0; y < 8; ++y) {
                        if (y >= nv) break;
                        const int xx = x + y;
                        int sj, sx;
                        if (xx < S - 1) {
                            sj = P - 1, sx = xx;
                        } else {
                            const int z = xx - (S - 1), sr = z / S;
                            sj = mki_grs_slot(sr < me ? sr : sr + 1, me, P), sx = z % S;
                        }
                        v[y] = __ldcg(reinterpret_cast<const float4 *>(bank + sj * sslab +
                                                                        sx * sstep + at));
                    }
#pragma unroll
                    for (int y = 0; y < 8; ++y) {
                        if (y >= nv) break;
                        a.x += v[y].x, a.y += v[y].y, a.z += v[y].z, a.w += v[y].w;
                    }
                }
                /* n is a multiple of 8 on the fused path: whole float4 */
                uint2 o;
                if (c_type == MKI_DT_F16)
                    o = make_uint2(pack2<__half>(a.x, a.y), pack2<__half>(a.z, a.w));
                else
                    o = make_uint2(pack2<__nv_bfloat16>(a.x, a.y), pack2<__nv_bfloat16>(a.z, a.w));
                const long long off = ((long long)r * n + cc) * 2; /* bytes in my rows */
                *reinterpret_cast<uint2 *>(static_cast<char *>(c) + off) = o;
                if (ar) {
                    const long long goff = off + (long long)row_off[me] * n * 2;
                    for (int j = 1; j < P; ++j)
                        *reinterpret_cast<uint2 *>(inbox[(me + j) % P] + goff) = o;
                }
            }
            if (ar) __threadfence_system();
            __syncwarp();
            role_sync(5, 256);
            if (th == 0) GRS_STAMP(6);
            if (ar && th == 0 && !*(volatile int *)&grs.note.quit)
                for (int j = 1; j < P; ++j) {
                    const int q = (me + j) % P;
                    signal_add_release(agflag[q] + (size_t)mki_grs_slot(me, q, P) *
                                                       MKI_GRS_MAXFLAGS + gi, 1);
                }
        }
    }

    /* mkGemmAllReduce, after this CTA's tiles (the engine's done hook):
     * the 256 consumer threads (th) copy this CTA's share of the peers' reduced tiles from the
     * inbox into C, each once its owner's agflag says it has landed.
     * Units go in the order their owners compute them (unit k of every
     * peer, then k + 1), CTA x taking every grid-th of them. */
    __device__ __forceinline__ void done(const GemmParams &p, int th) const
    {
        if (th == 0) GRS_STAMP(4);
        if (direct) sum_own(p, th);
        if (!ar) return;
        const int cm = p.cluster_m;
        int most = 0;
        for (int s = 0; s < P; ++s) {
            const int u = mki_gemm_num_units(nb[s], nnb, cm);
            if (s != me && u > most) most = u;
        }
        const long long row = (long long)n * es;
        const int warp = th >> 5, lane = th & 31;
        for (int f = (int)blockIdx.x; f < most * (P - 1); f += (int)gridDim.x) {
            const int k = f / (P - 1), s = (me + 1 + f % (P - 1)) % P;
            if (k >= mki_gemm_num_units(nb[s], nnb, cm)) continue;
            int mb, nbk;
            mki_gemm_unit_of(k, nb[s], nnb, group_m, cm, &mb, &nbk);
            const int tiles = nb[s] * nnb, g = grp[s];
            for (int x = 0; x < cm && mb + x < nb[s]; ++x) {
                const int b = mb + x, id = b * nnb + nbk, gi = id / g;
                if (th == 0) {
                    const int cnt = tiles - gi * g < g ? tiles - gi * g : g;
                    uint64_t *fl = agflag[me] + (size_t)mki_grs_slot(s, me, P) * MKI_GRS_MAXFLAGS + gi;
                    if (wait(fl, (uint64_t)cnt, s, id, 3) && g == 1) *fl = 0;
                }
                __syncwarp();
                role_sync(5, 256);
                const int m_s = row_off[s + 1] - row_off[s];
                const int r0 = b * BM, c0 = nbk * BN;
                const int rows = m_s - r0 < BM ? m_s - r0 : BM;
                const int nv = (n - c0 < BN ? n - c0 : BN) * es / 16;
                const long long base = ((long long)(row_off[s] + r0)) * row + (long long)c0 * es +
                                       lane * 16;
                const bool go = lane < nv && !*(volatile int *)&grs.note.quit;
                /* 8 warps, a row each; four rows in flight */
                for (int r = warp; go && r < rows; r += 32) {
                    int4 v[4];
#pragma unroll
                    for (int x4 = 0; x4 < 4; ++x4)
                        if (r + 8 * x4 < rows)
                            v[x4] = __ldcg(reinterpret_cast<const int4 *>(
                                inbox[me] + base + (r + 8 * x4) * row));
#pragma unroll
                    for (int x4 = 0; x4 < 4; ++x4)
                        if (r + 8 * x4 < rows)
                            *reinterpret_cast<int4 *>(c_full + base + (r + 8 * x4) * row) = v[x4];
                }
            }
        }
        if (th == 0) GRS_STAMP(7);
    }

    /* Tile (b, nblk) of owner d, from outbox tile it into d's slot: rows
     * and columns past the owner's, not (the slot's rows are ld wide, a
     * multiple of 4, so whole float4 stay inside them). */
    __device__ __forceinline__ void copy_tile(float *to, int d, int b, int nblk, int it,
                                              int mt) const
    {
        const int m_d = row_off[d + 1] - row_off[d];
        const int r0 = b * BM, c0 = nblk * BN;
        const int rows = m_d - r0 < BM ? m_d - r0 : BM;
        const int nv = ((n - c0 < BN ? n - c0 : BN) + 3) / 4; /* float4 per row */
        const int warp = mt >> 5, lane = mt & 31;
        const bool lo = lane < nv, hi = lane + 32 < nv;
        /* offsets, not pointers: the producer warpgroup has 40 registers */
        const int s0 = out_tile(it) * (BM * BN / 4) + lane;
        float4 *dp = reinterpret_cast<float4 *>(to + (long long)r0 * ld + c0) + lane;
        const int ld4 = (int)(ld / 4);
        const float4 *src = reinterpret_cast<const float4 *>(outbox);
        /* a warp per row, a lane per 16 bytes (more in flight does not
         * fit the 40 registers without spilling) */
        for (int r = warp; r < rows; r += kMovers / 32) {
            if (lo) dp[(long long)r * ld4] = __ldcg(src + s0 + r * (BN / 4));
            if (hi) dp[(long long)r * ld4 + 32] = __ldcg(src + s0 + r * (BN / 4) + 32);
        }
    }
};

__device__ __forceinline__ void begin(const GrsHooks &h)
{
    grs.note.quit = 0;
    grs.gated = 0;
    grs.posted = 0;
    grs.moved = 0;
#ifdef MKI_GRS_TRACE
    for (int i = 0; i < 10; ++i) grs.ts[i] = 0;
    grs.kind = 0;
    GRS_STAMP(0);
#endif
    grs.e = *reinterpret_cast<volatile const uint64_t *>(&h.ctl[h.me]->calls) + 1;
    if (blockIdx.x == 0) st_relaxed_sys(&h.ctl[h.me]->cur, grs.e);
}

/* One thread per CTA, after its work: report a noted failure; the last
 * CTA out closes the call. */
__device__ void finish(const GrsHooks &h)
{
    mki_grs_ctl *ctl = h.ctl[h.me];
    note_report(h.rt, grs.note, grs.e);
#ifdef MKI_GRS_TRACE
    GRS_STAMP(8);
    if (grs.e == (uint64_t)(MKI_GRS_TRACE)) {
        long long d[10];
        for (int i = 1; i < 10; ++i) d[i] = grs.ts[i] ? (long long)(grs.ts[i] - grs.ts[0]) : -1;
        printf("TRACE rank %d cta %d kind %d t0 %llu comb_in %lld comb_ok %lld stored %lld "
               "done_in %lld gated %lld bcast %lld gather %lld end %lld summed %lld\n", h.me,
               (int)blockIdx.x, grs.kind, (unsigned long long)grs.ts[0], d[1], d[2], d[3], d[4],
               d[5], d[6], d[7], d[8], d[9]);
    }
#endif
    __threadfence();
    if (atomicAdd(&ctl->exits, 1u) != gridDim.x - 1) return;
    ctl->exits = 0;
    if (h.grp[h.me] > 1) { /* groups of several tiles: cleared here */
        const int ng = (h.nb[h.me] * h.nnb + h.grp[h.me] - 1) / h.grp[h.me];
        for (int j = 0; j < h.P; ++j)
            for (int g = 0; g < ng; ++g) ctl->flag[j][g] = 0;
    }
    for (int j = 0; h.ar && j < h.P - 1; ++j) { /* the inbox's, likewise */
        const int s = (h.me + j + 1) % h.P;
        if (h.grp[s] <= 1) continue;
        const int ng = (h.nb[s] * h.nnb + h.grp[s] - 1) / h.grp[s];
        for (int g = 0; g < ng; ++g) h.agflag[h.me][(size_t)j * MKI_GRS_MAXFLAGS + g] = 0;
    }
    __threadfence_system();
    *reinterpret_cast<volatile uint64_t *>(&ctl->calls) = grs.e;
    st_release_sys(&ctl->released, grs.e);
    for (int q = 0; q < h.P; ++q) /* the gates of the peers spin on their own copy */
        if (q != h.me) st_release_sys(&h.ctl[q]->peer_released[h.me], grs.e);
}

template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    grs_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ GrsHooks h)
{
    extern __shared__ char smem[];
    if (threadIdx.x == 0) begin(h); /* run_cta syncs before any use */
    run_cta<kF16, kTransB, kCM, GrsHooks>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();
    __syncthreads();
    if (threadIdx.x == 128) finish(h);
}

/* Nothing to compute: the call still counts (calls, released). */
__global__ void grs_idle_kernel(const __grid_constant__ GrsHooks h)
{
    if (threadIdx.x == 0) {
        begin(h);
        finish(h);
    }
}

__global__ void grs_convert_kernel(const float *in, void *out, int dtype, size_t count)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        if (dtype == MKI_F16) static_cast<__half *>(out)[i] = __float2half_rn(in[i]);
        else static_cast<__nv_bfloat16 *>(out)[i] = __float2bfloat16_rn(in[i]);
    }
}

const void *fused_kernel(bool f16, bool tb, int cm)
{
    return MKI_ENGINE_KERNEL(grs_kernel, f16, tb, cm);
}

int cuda_fail(char *msg, size_t len, const char *what, cudaError_t e)
{
    if (msg && len) snprintf(msg, len, "gemm_rs: %s: %s", what, cudaGetErrorString(e));
    return MKI_GEMM_ERR_CUDA;
}

/* Everything but the tensor maps and the schedule. */
void fill_hooks(const mki_grs_launch *l, int cm, GrsHooks *h, int *units)
{
    memset(h, 0, sizeof(*h));
    h->P = l->nlocal;
    h->me = l->rt.local;
    h->nnb = (int)((l->n + BN - 1) / BN);
    h->group_m = MKI_GEMM_GROUP_M;
    h->n = (int)l->n;
    h->c_type = l->dtype; /* enum mki_dtype and mki_dtype_t agree */
    h->ld = l->ld;
    h->S = l->slices > 1 ? l->slices : 1;
    h->direct = h->S > 1;
    h->slot_elems = (long long)l->m_max * l->ld;
    if (h->S > 1) {
        h->sstep = mki_grs_slice_cols(l->n);
        h->sld = h->S * h->sstep;
        h->sslab = (long long)l->m_max * h->sld;
    } else {
        h->sstep = 0;
        h->sld = l->ld;
        h->sslab = h->slot_elems;
    }
    h->c = l->c;
    h->bank = (const float *)l->bank[h->me];
    h->ar = l->ar;
    h->nkb = (int)((l->k + BK - 1) / BK);
    h->es = l->dtype == MKI_F32 ? 4 : 2;
    h->c_full = (char *)l->c_full;
    h->vstart[0] = 0;
    for (int d = 0; d < h->P; ++d) {
        const int64_t rows = l->row_off[d + 1] - l->row_off[d];
        h->row_off[d] = (int)l->row_off[d];
        h->nb[d] = (int)((rows + BM - 1) / BM);
        h->vstart[d + 1] = h->vstart[d] + (h->nb[d] + cm - 1) / cm * cm;
        h->grp[d] = (int)mki_grs_group((int64_t)h->nb[d] * h->nnb);
        h->ctl[d] = l->ctl[d];
        h->inbox[d] = l->inbox[d];
        h->agflag[d] = l->agctl[d] ? &l->agctl[d]->agflag[0][0] : nullptr;
        units[d] = mki_gemm_num_units(h->nb[d], h->nnb, cm) * h->S;
    }
    h->row_off[h->P] = (int)l->row_off[h->P];
    h->rt = l->rt;
}

} // namespace

extern "C" int mki_grs_describe(const struct mki_grs_launch *l, struct mki_launch_desc *d,
                                char *msg, size_t len)
{
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    const bool idle = l->m == 0 || l->n == 0;
    /* CTAs in pairs (B tiles shared by multicast) when the grid is even,
     * unless the padding tiles (an owner's odd last M-block) would be
     * over an eighth of the work: a decode-sized M (one block per owner)
     * would compute twice its tiles and need two waves. */
    int cm = !idle && l->ctas >= 2 && l->ctas % 2 == 0 ? 2 : 1;
    if (cm == 2) {
        int64_t real = 0, pad = 0;
        for (int q = 0; q < l->nlocal; ++q) {
            const int64_t nb = (l->row_off[q + 1] - l->row_off[q] + BM - 1) / BM;
            real += nb;
            pad += nb % 2;
        }
        if (pad * 8 > real) cm = 1;
    }
    GrsHooks hh;
    int units[MKI_MAXLOCAL] = {0};
    fill_hooks(l, cm, &hh, units);
    if (idle) {
        d->fn = (const void *)grs_idle_kernel;
        d->grid = 1;
        d->block = 32;
        d->cluster = 1;
        d->exact = 1;
        return mki_launch_arg(d, &hh, sizeof(hh)) ? MKI_GEMM_ERR_INVALID : MKI_GEMM_OK;
    }
    /* The peers' partials of own unit k come from their round k, are
     * posted to the movers when the CTA that computed one has computed its
     * next unit too (kDeferSignal), then copied and flagged: a lag of
     * about three waves of units over the P slots of a round lets them
     * land first (gemm_rs.h; with the stores in the epilogue, one wave
     * measured 1.31x our GEMM alone at 2048x8192x4096 against 1.25x for
     * two, 2 ranks on one H100).  A
     * flag of g > 1 tiles also covers tiles of
     * units up to (g - 1) bands of columns later (grouped order: group_m
     * / cm units per column): the lag must pass them too, so that every
     * wait is on an earlier (round, slot) than its own. */
    const int wave = l->ctas / cm;
    int lag = 3 * ((wave + hh.P - 1) / hh.P) + 2;
    if (hh.grp[hh.me] > 1) lag += hh.grp[hh.me] * (MKI_GEMM_GROUP_M / cm) + 1;
    hh.lag = lag;
    mki_grs_make_sched(hh.P, hh.me, units, lag, &hh.sched);

    mki_gemm_args a;
    memset(&a, 0, sizeof(a));
    a.m = l->m;
    a.n = l->n;
    a.k = l->k;
    a.a = l->a;
    a.b = l->b;
    a.d = l->bank[hh.me]; /* a descriptor only: every tile has its own target */
    a.ldd = l->ld;
    a.in_type = (mki_dtype_t)l->dtype;
    a.out_type = MKI_DT_F32;
    a.trans_b = l->trans_b;
    a.alpha = 1.0f;
    a.num_ctas = l->ctas;
    a.cluster_m = cm;
    mki_gemm_device dev;
    mki_gemm_plan pl;
    int r = query_device(&dev, msg, len);
    if (!r) r = mki_gemm_validate(&a, &dev, &pl, msg, len);
    GemmParams p;
    if (!r) r = make_params(&a, &pl, &p, msg, len);
    if (r) return r;
    p.num_m_blk = hh.vstart[hh.P];
    p.num_tiles = p.num_m_blk * p.num_n_blk;
    p.cluster_m = cm;
    p.num_units = hh.sched.pos0[hh.sched.nseg];
    p.m = p.num_m_blk * BM;
    int grid = l->ctas;
    if (grid > p.num_units * cm) grid = p.num_units * cm;
    if (grid < cm) grid = cm;
    for (int q = 0; q < hh.P; ++q)
        hh.dst[q] = (float *)(l->bank[q] + (size_t)(q != hh.me ? mki_grs_slot(hh.me, q, hh.P)
                                                                : hh.P - 1) *
                                               (size_t)hh.sslab * 4);
    if (!l->outbox || ((uintptr_t)l->outbox % 16) != 0) {
        snprintf(msg, len, "gemm_rs: no outbox (%p) for the fp32 tiles", l->outbox);
        return MKI_GEMM_ERR_INVALID;
    }
    hh.outbox = (const float *)l->outbox;
    for (int q = 0; hh.direct && q < hh.P; ++q) {
        /* rows: the owner's (the store clips there); columns: its slices */
        const int64_t rows = l->row_off[q + 1] - l->row_off[q];
        if (rows == 0) continue; /* never a target */
        if ((r = encode_out_map(&hh.tm_slot[q], hh.dst[q], MKI_DT_F32, (uint64_t)rows,
                                (uint64_t)hh.sld, (uint64_t)hh.sld, msg, len)))
            return r;
    }
    if ((r = encode_out_map(&hh.tm_out, l->outbox, MKI_DT_F32,
                            (uint64_t)grid * MKI_GRS_RING * BM, (uint64_t)BN, (uint64_t)BN, msg,
                            len)))
        return r;
    const int64_t m_me = l->row_off[hh.me + 1] - l->row_off[hh.me];
    if (m_me > 0 && (((uintptr_t)l->c % 16) != 0 || l->n % 8 != 0)) {
        snprintf(msg, len, "gemm_rs: C (%p, rows of %lld elements) cannot take TMA stores: "
                 "16-byte aligned rows needed", l->c, (long long)l->n);
        return MKI_GEMM_ERR_INVALID;
    }
    if (m_me > 0 &&
        (r = encode_out_map(&hh.tm_c, l->c, (mki_dtype_t)l->dtype, (uint64_t)m_me,
                            (uint64_t)l->n, (uint64_t)l->n, msg, len)))
        return r;
    d->fn = fused_kernel(l->dtype == MKI_F16, l->trans_b != 0, cm);
    d->grid = (unsigned)grid;
    d->block = kThreads;
    d->cluster = (unsigned)cm;
    d->smem = kSmemBytes;
    if (mki_launch_arg(d, &p, sizeof(p)) || mki_launch_arg(d, &hh, sizeof(hh))) {
        snprintf(msg, len, "gemm_rs: kernel parameters of %zu bytes do not fit",
                 sizeof(p) + sizeof(hh));
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

extern "C" int mki_grs_convert(const float *in, void *out, int dtype, size_t count, void *stream,
                               char *msg, size_t len)
{
    if (count == 0) return MKI_GEMM_OK;
    size_t blocks = (count + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    grs_convert_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(in, out, dtype, count);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? MKI_GEMM_OK : cuda_fail(msg, len, "the conversion kernel", e);
}

extern "C" int mki_grs_preload(char *msg, size_t len)
{
    const void *engine[8];
    for (int i = 0; i < 8; i++) engine[i] = fused_kernel(i & 1, (i >> 1) & 1, (i >> 2) & 1 ? 2 : 1);
    const void *others[] = {(const void *)grs_idle_kernel, (const void *)grs_convert_kernel};
    return preload_engine(engine, others, 2, "gemm_rs", msg, len);
}
