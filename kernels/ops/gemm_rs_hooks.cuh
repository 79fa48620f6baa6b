/*
 * gemm_rs_hooks.cuh - the protocol of mkGemmReduceScatter's and
 * mkGemmAllReduce's fused kernel as GEMM engine hooks (GrsHooks: tile
 * order, targets, the owner's sum, the movers, the K-slices' sum, the
 * all-reduce's broadcast and gather) and the per-CTA state they share.
 * Included by kernels/ops/gemm_rs.cu only, which holds the kernels and
 * their launch description; the protocol is described there.
 */
#ifndef MKI_OPS_GEMM_RS_HOOKS_CUH
#define MKI_OPS_GEMM_RS_HOOKS_CUH

#include <stdio.h>

#include "gemm/gemm_engine.cuh"
#include "ops/gemm_rs.h"
#include "rt/num.cuh"
#include "rt/wait.cuh"

namespace {

using namespace mki;
using namespace mki::gemm;

/* Lab builds only (-DMKI_GRS_TRACE=CALL): timestamps of one call and
 * per-CTA sums of where its tiles' time went, printed per CTA by
 * finish(); nothing otherwise.  Sums (ns, or counts): */
enum {
    GRS_S_OWN_PERIOD, /* from the previous epilogue's start to an own tile's */
    GRS_S_PEER_PERIOD, /* ... to a peer tile's */
    GRS_S_NOWN, GRS_S_NPEER,
    GRS_S_FLAGWAIT,   /* an own tile's wait for its sources' flags */
    GRS_S_COMBINE,    /* its loads and adds */
    GRS_S_OUTBOX,     /* a peer tile's wait for a free outbox tile */
    GRS_S_MV_WAIT,    /* movers: waiting for a peer tile's hand-over */
    GRS_S_MV_COPY,    /* movers: its gate, copy and flag */
    GRS_S_LAST,       /* (state) the previous epilogue's start */
    GRS_NSUM
};

#ifdef MKI_GRS_TRACE
#define GRS_TL 40 /* tiles per CTA in the lab timeline */
#endif

/* This CTA's call, the peers it may write to, the first failure it
 * noted (reported by one thread after the tiles), and the hand-over of
 * outbox tiles from its consumers to its movers. */
struct GrsCta {
    uint64_t e;
    unsigned gated; /* bit d: peer d released the previous call */
    cta_note note;
    int posted;     /* consumers: iterations < posted are in the outbox */
    int moved;      /* movers: iterations < moved are copied (or were not theirs) */
    int pf_go;      /* producer: iterations < pf_go are kPfLead k-blocks from their end */
    uint64_t cbar[4]; /* combine_tma: consumer warpgroup w's loads into its buffer x: 2 w + x */
    uint32_t cbuf[2]; /* combine_tma, warpgroup w's: its buffers (shared address), */
    int ccol[2], crow[2]; /* the tile's first column and row in a slot */
#ifdef MKI_GRS_TRACE
    uint64_t ts[10]; /* lab builds: globaltimer at the points of GRS_STAMP */
    uint64_t sum[GRS_NSUM]; /* lab builds: per-CTA sums over the call (GRS_ADD) */
    int kind;       /* 1 own sum, 2 peer partial, 3 own slice */
    /* the timeline of the CTA's first GRS_TL tiles (ns >> 10 from ts[0]):
     * each tile's epilogue entry and the end of its combine (or outbox
     * wait), its kind (1 own, 2 peer), and the engine's MKI_LAB_TS points */
    uint32_t tl_in[GRS_TL], tl_out[GRS_TL];
    uint8_t tl_k[GRS_TL];
    uint32_t tl_x[3][GRS_TL];
#endif
};
__shared__ GrsCta grs;

#ifdef MKI_GRS_TRACE
#define GRS_STAMP(i) (grs.ts[i] = globaltimer())
#define GRS_KIND(k) (grs.kind = (k))
#define GRS_NOW() globaltimer()
#define GRS_ADD(i, v) (grs.sum[i] += (v))
/* the timeline's unit: ns >> 10 from the CTA's start */
#define GRS_TL_AT(t) ((uint32_t)(((t) - grs.ts[0]) >> 10))
#define GRS_TL_IN(it, t, k) \
    ((it) < GRS_TL ? (void)(grs.tl_in[it] = GRS_TL_AT(t), grs.tl_k[it] = (k)) : (void)0)
#define GRS_TL_OUT(it, t) ((it) < GRS_TL ? (void)(grs.tl_out[it] = GRS_TL_AT(t)) : (void)0)
#else
#define GRS_STAMP(i) ((void)0)
#define GRS_KIND(k) ((void)0)
#define GRS_NOW() 0ull
#define GRS_ADD(i, v) ((void)0)
#define GRS_TL_IN(it, t, k) ((void)0)
#define GRS_TL_OUT(it, t) ((void)0)
#endif

/* Lab builds (-DMKI_GRS_TE, gemm_rs_te.cuh): each tile's kind, stored by
 * the movers (no register of the consumers' epilogue spent on it; without
 * movers, K-slices, kinds stay 0). */
#ifdef MKI_GRS_TE
#define GRS_TE_KIND(it, k) grs_te_kind(it, k)
#else
#define GRS_TE_KIND(it, k) ((void)0)
#endif

constexpr int kMovers = 96;  /* threads 32..127 of the producer warpgroup */
constexpr int kMoverBar = 4; /* named barrier of the movers (the engine's: 0-3) */

struct GrsHooks {
    static constexpr bool kWaitA = false;
    static constexpr bool kSignal = true;
    static constexpr bool kDeferSignal = true; /* flags one tile late: no stall */
    static constexpr bool kEarlySignal = true; /* ... but early in that tile (signal_kb) */
    static constexpr bool kASrc = true;
    static constexpr bool kCombine = true;
    static constexpr bool kSideWork = true; /* the movers */
    /* 48 registers for them (two loads in flight per lane spill at 40) */
    static constexpr bool kWideSideWork = true;
    static constexpr bool kDone = true;     /* mkGemmAllReduce: the gather */
    static constexpr bool kProgress = true; /* pf_go: when to warm L2 for an own tile */
    CUtensorMap tm_out;                /* the outbox: grid x ring tiles of fp32 */
    CUtensorMap tm_c;                  /* my rows of D, when TMA can store them */
    CUtensorMap tm_bank;               /* whole tiles: my bank's slots, rows stacked (the
                                        * combine's loads) */
    int m_max;                         /* rows of a slot */
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

#ifdef MKI_GRS_TRACE
    /* lab builds: the engine's MKI_LAB_TS points (gemm_rs.cu) */
    __device__ __forceinline__ void lab_ts(int it, int w) const
    {
        if (it < GRS_TL) grs.tl_x[w][it] = GRS_TL_AT(globaltimer());
    }
#endif
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
        for (int x = mki_grs_round_slot(off, c, (int)gridDim.x / p.cluster_m, lag); x > 0; --x)
            m &= m - 1;
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
        } else if (d != me) { /* without slices: whole tiles */
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

    /* One thread: every slice of own tile (b, nblk) has landed, from every
     * source (S each) and from this rank's other slices (S - 1); a group
     * of one tile is cleared for the next call here.  False when the wait
     * failed (noted). */
    __device__ __forceinline__ bool wait_tile(int b, int nblk) const
    {
        const int tiles = nb[me] * nnb, g = grp[me];
        const int id = b * nnb + nblk, gi = id / g;
        const int cnt = tiles - gi * g < g ? tiles - gi * g : g;
        bool ok = true;
        for (int j = 0; j < P - 1 && ok; ++j)
            ok = wait(&ctl[me]->flag[j][gi], (uint64_t)(cnt * S), (me + j + 1) % P, id, 0);
        if (ok && S > 1) /* my own slices 1.. */
            ok = wait(&ctl[me]->flag[P - 1][gi], (uint64_t)(cnt * (S - 1)), me, id, 4);
        if (ok && g == 1)
            for (int j = 0; j < P; ++j) ctl[me]->flag[j][gi] = 0;
        return ok;
    }

    /* mkGemmAllReduce, one thread: my reduced tile (b, nblk) is in every
     * peer's inbox (raise their agflag of its group). */
    __device__ __forceinline__ void signal_ag(int b, int nblk) const
    {
        const int gi = (b * nnb + nblk) / grp[me];
        for (int j = 1; j < P; ++j) {
            const int q = (me + j) % P;
            signal_add_release(agflag[q] + (size_t)mki_grs_slot(me, q, P) * MKI_GRS_MAXFLAGS + gi,
                               1);
        }
    }

    /* Load i of combine_tma (chunk i % 8 of the (i / 8)-th source) into
     * buffer i % 2, by one thread.  What it needs beyond i comes from
     * shared memory and the parameters, read here (volatile): nothing of
     * it stays in a register through the combine, where the accumulators
     * leave almost none free (32-bit shared addresses here: ptx.cuh's
     * mbar_expect_tx / the engine's tma_load_2d, which take pointers, made
     * ptxas spill 8-36 bytes). */
    __device__ __forceinline__ void combine_issue(int wg, int i) const
    {
        const int si = i >> 3, s = si < me ? si : si + 1;
        const uint32_t dst =
            *(volatile uint32_t *)&grs.cbuf[wg] + (uint32_t)((i & 1) * kEpiChunkBytes);
        const uint32_t bar = smem_u32(&grs.cbar[2 * wg + (i & 1)]);
        const int col = *(volatile int *)&grs.ccol[wg] + (i & 7) * 32;
        const int row = mki_grs_slot(s, me, P) * m_max + *(volatile int *)&grs.crow[wg];
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "r"((uint32_t)kEpiChunkBytes)
                     : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
                     "l"(&tm_bank), "r"(col), "r"(row), "r"(bar)
                     : "memory");
    }

    /* The sources' partials of own tile (b, n_blk) added to acc in rank
     * order by TMA loads: 32-column chunks of each slot into the
     * warpgroup's two epilogue buffers (the 128-byte swizzle of the stores:
     * the accumulators' layout reads them without bank conflicts), one
     * chunk loading while the one before is added.  Every load is issued
     * and waited for, whatever the call's state (local memory only), so
     * that each barrier's phase stays in step: 4 (P - 1) uses per buffer
     * and tile, an even count, so each combine starts at parity 0. */
    __device__ __forceinline__ void combine_tma(float (&acc)[128], TileCoord t, int b, int wg,
                                                int th, int wrow, int q, char *bufs) const
    {
        uint64_t *bar = grs.cbar + 2 * wg;
        const uint32_t sbuf = smem_u32(bufs);
        if (th == 0) {
            grs.cbuf[wg] = sbuf;
            grs.ccol[wg] = t.n_blk * BN;
            grs.crow[wg] = b * BM + wg * 64;
            bulk_wait_read<0>(); /* the last tile's stores have read the buffers */
            combine_issue(wg, 0);
            combine_issue(wg, 1);
        }
        /* my elements' place in a chunk (write_chunk's swizzle: 16-byte
         * unit u of row r at u ^ (r % 8); rows r and r + 8 alike) */
        const int unit0 = q >> 2, swz = wrow & 7;
        uint32_t unit[4]; /* my 16-byte unit of column group jj in a row */
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) unit[jj] = (uint32_t)(((2 * jj + unit0) ^ swz) << 4);
        /* chunk ch of every source: buffer ch & 1, its (ch / 2)-th use in
         * this source, 4 per source: compile-time indices into acc */
        for (int si = 0; si < P - 1; ++si) {
#pragma unroll
            for (int ch = 0; ch < 8; ++ch) {
                const int i = 8 * si + ch;
                mbar_wait(&bar[ch & 1], (ch >> 1) & 1);
                /* the row's address made anew in each chunk (an opaque
                 * move), not 16 addresses hoisted out of the loop beside
                 * acc */
                uint32_t row;
                asm volatile("mov.b32 %0, %1;"
                             : "=r"(row)
                             : "r"(sbuf + (uint32_t)((ch & 1) * kEpiChunkBytes + wrow * 128 +
                                                     ((q * 4) & 15))));
#pragma unroll
                for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const uint32_t a = row + unit[jj] + (uint32_t)(h * 8 * 128);
                        float x, y;
                        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                                     : "=f"(x), "=f"(y)
                                     : "r"(a));
                        const int e0 = 4 * (4 * ch + jj) + 2 * h;
                        acc[e0] += x;
                        acc[e0 + 1] += y;
                    }
                }
                role_sync(1 + wg, 128); /* every thread has read this buffer */
                if (th == 0 && i + 2 < 8 * (P - 1)) combine_issue(wg, i + 2);
            }
        }
    }

    __device__ __forceinline__ void combine(float (&acc)[128], const GemmParams &, TileCoord t,
                                            int wg, int th, int wrow, int q, char *bufs) const
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
        [[maybe_unused]] const uint64_t t_in = GRS_NOW();
#ifdef MKI_GRS_TRACE
        if (wg == 0 && th == 0) {
            if (grs.sum[GRS_S_LAST])
                GRS_ADD(d != me ? GRS_S_PEER_PERIOD : GRS_S_OWN_PERIOD, t_in - grs.sum[GRS_S_LAST]);
            grs.sum[GRS_S_LAST] = t_in;
            GRS_ADD(d != me ? GRS_S_NPEER : GRS_S_NOWN, 1);
            GRS_TL_IN(t.it, t_in, d != me ? 2 : 1);
        }
#endif
        if (d != me) {
            /* The outbox tile must be copied out (iteration it - ring);
             * the movers get past every iteration, failed or not. */
            if (th == 0)
                while (*(volatile int *)&grs.moved < t.it - MKI_GRS_RING + 1) {
                }
            if (wg == 0 && th == 0) {
                GRS_ADD(GRS_S_OUTBOX, GRS_NOW() - t_in);
                GRS_TL_OUT(t.it, GRS_NOW());
            }
            return;
        }
        if (wg == 0 && th == 0) {
            GRS_STAMP(1);
            GRS_KIND(1);
            (void)wait_tile(b, t.n_blk);
        }
        role_sync(3, 256); /* every source's partial of the tile has landed */
        if (wg == 0 && th == 0) {
            GRS_STAMP(2);
            GRS_ADD(GRS_S_FLAGWAIT, GRS_NOW() - t_in);
        }
        combine_tma(acc, t, b, wg, th, wrow, q, bufs);
        if (wg == 0 && th == 0) {
            GRS_STAMP(9);
            GRS_ADD(GRS_S_COMBINE, grs.ts[9] - grs.ts[2]);
            GRS_TL_OUT(t.it, grs.ts[9]);
        }
    }

    /* The outbox's tiles (local stores) are handed to the movers
     * MKI_GRS_SIGNAL_KB k-blocks into the next tile's mainloop, not at its
     * end: the copy overlaps that mainloop.  The K-slices' stores go over
     * NVLink and take longer: signalled at the next epilogue. */
    __device__ __forceinline__ int signal_kb() const { return direct ? 0 : MKI_GRS_SIGNAL_KB; }

    /* The producer, after k-block kb of its tile t: once kPfLead k-blocks
     * remain, the movers may warm L2 for the tile (prefetch_own). */
    static constexpr int kPfLead = 8;
    __device__ __forceinline__ void progress(const GemmParams &, TileCoord t, int kb,
                                             int kb_end) const
    {
        if (kb == (kb_end - kPfLead > t.kb0 ? kb_end - kPfLead : t.kb0))
            *(volatile int *)&grs.pf_go = grs.pf_go + 1;
    }

    /* The movers, for own tile (b, nblk) at iteration it: once the producer
     * is kPfLead k-blocks from its end (or the tile is done, or the call
     * failed), the rows that combine() will read from every source's slot
     * go into L2, whether or not they have landed (a peer's stores to this
     * GPU arrive in its L2: nothing stale can be read, a line warmed too
     * early is only refreshed).  A hint: nothing waits for it. */
    __device__ __forceinline__ void prefetch_own(int b, int nblk, int it, int mt) const
    {
        if (mt == 0)
            while (*(volatile int *)&grs.pf_go <= it && *(volatile int *)&grs.posted <= it &&
                   !*(volatile int *)&grs.note.quit) {
            }
        role_sync(kMoverBar, kMovers);
        if (*(volatile int *)&grs.posted > it) return; /* too late to help */
        const int m_me = row_off[me + 1] - row_off[me];
        const int c0 = nblk * BN, r = b * BM + mt;
        const uint32_t bytes = (uint32_t)((n - c0 < BN ? n - c0 : BN) * 4 + 15) & ~15u;
        for (int s = 0; s < P; ++s) {
            if (s == me) continue;
            const float *slot = bank + mki_grs_slot(s, me, P) * sslab + c0;
            for (int x = 0; x < BM; x += kMovers)
                if (mt + x < BM && r + x < m_me)
                    bulk_prefetch_l2(slot + (long long)(r + x) * sld, bytes);
        }
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

    /* The movers (without K-slices: whole tiles): the same units as the
     * consumers, in the same order; copy each peer tile from the outbox
     * into the peer's slot, then flag it there.  kTwo (GrsHooksTwo): two
     * rows in flight per warp instead of one. */
    __device__ void side_work(const GemmParams &p, int cta, int th) const
    {
        side_work_rows<false>(p, cta, th);
    }

    template <bool kTwo>
    __device__ void side_work_rows(const GemmParams &p, int cta, int th) const
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
            if (mt == 0) GRS_TE_KIND(it, d == me ? 1 : 2);
            if (d == me && b < nb[me]) {
                prefetch_own(b, u.n_blk, it, mt);
                if (ar) bcast_tile<kTwo>(b, u.n_blk, it, mt);
            } else if (d != me && b < nb[d]) {
                if (mt == 0) {
                    [[maybe_unused]] const uint64_t t0 = GRS_NOW();
                    while (*(volatile int *)&grs.posted <= it) {
                    }
                    GRS_ADD(GRS_S_MV_WAIT, GRS_NOW() - t0);
                    __threadfence_block();
                    gate(d);
                }
                [[maybe_unused]] const uint64_t t1 = GRS_NOW();
                role_sync(kMoverBar, kMovers);
                if (!*(volatile int *)&grs.note.quit) {
                    copy_tile<kTwo>(dst[d], d, b, u.n_blk, it, mt);
                    __threadfence_system(); /* this thread's stores, before the flag */
                }
                role_sync(kMoverBar, kMovers);
                if (mt == 0 && !*(volatile int *)&grs.note.quit)
                    signal_add_release(&ctl[d]->flag[mki_grs_slot(me, d, P)]
                                                    [(b * nnb + u.n_blk) / grp[d]],
                                       1);
                if (mt == 0) {
                    GRS_STAMP(6); /* lab builds: the last peer tile flagged */
                    GRS_ADD(GRS_S_MV_COPY, GRS_NOW() - t1);
                }
            }
            if (mt == 0) *(volatile int *)&grs.moved = it + 1;
        }
    }

    /* mkGemmAllReduce: my reduced tile (b, nblk), stored in C at
     * iteration it, into every peer's inbox (the same place as in C),
     * then the peers' agflags.  A warp per row of up to 512 bytes, a lane
     * per 16 bytes. */
    template <bool kTwo>
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
                constexpr int kW = kMovers / 32;
                if constexpr (!kTwo) {
                    /* one row in flight: two spill at 48 registers */
                    for (int r = warp; r < rows; r += kW, off += kW * row) {
                        const int4 v = __ldcg(reinterpret_cast<const int4 *>(c_full + off));
                        for (int j = 1; j < P; ++j)
                            *reinterpret_cast<int4 *>(inbox[(me + j) % P] + off) = v;
                    }
                } else {
                    /* two rows in flight (56 registers; written out: the
                     * same as a loop over a rows[2] array spilled) */
                    for (int r = warp; r < rows; r += 2 * kW, off += 2 * kW * row) {
                        const bool two = r + kW < rows;
                        const int4 v = __ldcg(reinterpret_cast<const int4 *>(c_full + off));
                        int4 w = v;
                        if (two) w = __ldcg(reinterpret_cast<const int4 *>(c_full + off + kW * row));
                        for (int j = 1; j < P; ++j) {
                            char *to = inbox[(me + j) % P] + off;
                            *reinterpret_cast<int4 *>(to) = v;
                            if (two) *reinterpret_cast<int4 *>(to + kW * row) = w;
                        }
                    }
                }
            }
            __threadfence_system(); /* this thread's stores, before the flags */
        }
        role_sync(kMoverBar, kMovers);
        if (mt == 0 && !*(volatile int *)&grs.note.quit) signal_ag(b, nblk);
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
            if (th == 0 && wait_tile(b, u.n_blk) && ar)
                for (int j = 1; j < P; ++j) gate((me + j) % P);
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
            if (ar && th == 0 && !*(volatile int *)&grs.note.quit) signal_ag(b, u.n_blk);
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
    template <bool kTwo>
    __device__ __forceinline__ void copy_tile(float *to, int d, int b, int nblk, int it,
                                              int mt) const
    {
        const int m_d = row_off[d + 1] - row_off[d];
        const int r0 = b * BM, c0 = nblk * BN;
        const int rows = m_d - r0 < BM ? m_d - r0 : BM;
        const int nv = ((n - c0 < BN ? n - c0 : BN) + 3) / 4; /* float4 per row */
        const int warp = mt >> 5, lane = mt & 31;
        const bool lo = lane < nv, hi = lane + 32 < nv;
        /* offsets, not pointers: the producer warpgroup has 48 (56) registers */
        const int s0 = out_tile(it) * (BM * BN / 4) + lane;
        float4 *dp = reinterpret_cast<float4 *>(to + (long long)r0 * ld + c0) + lane;
        const int ld4 = (int)(ld / 4);
        const float4 *src = reinterpret_cast<const float4 *>(outbox);
        /* a warp per row (kTwo: two rows), a lane per 16 bytes of each;
         * every load issued before any store (a store may alias a later
         * load for all the compiler knows, which kept one load in flight) */
        constexpr int kW = kMovers / 32;
        if constexpr (!kTwo) {
            for (int r = warp; r < rows; r += kW) {
                float4 v0, v1;
                if (lo) v0 = __ldcg(src + s0 + r * (BN / 4));
                if (hi) v1 = __ldcg(src + s0 + r * (BN / 4) + 32);
                if (lo) dp[(long long)r * ld4] = v0;
                if (hi) dp[(long long)r * ld4 + 32] = v1;
            }
        } else {
            for (int r = warp; r < rows; r += 2 * kW) {
                const bool two = r + kW < rows;
                float4 v0, v1, v2, v3;
                if (lo) v0 = __ldcg(src + s0 + r * (BN / 4));
                if (hi) v1 = __ldcg(src + s0 + r * (BN / 4) + 32);
                if (lo && two) v2 = __ldcg(src + s0 + (r + kW) * (BN / 4));
                if (hi && two) v3 = __ldcg(src + s0 + (r + kW) * (BN / 4) + 32);
                if (lo) dp[(long long)r * ld4] = v0;
                if (hi) dp[(long long)r * ld4 + 32] = v1;
                if (lo && two) dp[(long long)(r + kW) * ld4] = v2;
                if (hi && two) dp[(long long)(r + kW) * ld4 + 32] = v3;
            }
        }
    }
};

/* The same hooks with the movers on 56 registers and two rows in flight
 * (the plan's wide_movers: where the link binds).  No member of its own:
 * the launch passes a GrsHooks's bytes to either kernel. */
struct GrsHooksTwo : GrsHooks {
    static constexpr bool kWiderSideWork = true;
    __device__ void side_work(const GemmParams &p, int cta, int th) const
    {
        side_work_rows<true>(p, cta, th);
    }
};

} // namespace

#endif /* MKI_OPS_GEMM_RS_HOOKS_CUH */
