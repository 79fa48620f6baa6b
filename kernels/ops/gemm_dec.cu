/*
 * gemm_dec.cu - the decode-sized path of mkGemmReduceScatter and
 * mkGemmAllReduce (m <= MKI_GDEC_MAXM rows of D, one node): a GEMM shaped
 * for few rows, whose partial products are reduced by a one-hop exchange
 * inside the same kernel.
 *
 * At m = 16 the product is bound by reading B (n x k per rank: 64 MiB at
 * n = 8192, k = 4096), not by the tensor cores, and the 128 x 256 tiles
 * of the GEMM engine leave most of a tile empty and most SMs idle.  Here
 * each work unit is 64 columns of D (a 64-row block of B's N dimension)
 * by all m rows, over one K-slice: wgmma with the operands swapped, B's
 * block as the 64-row A operand and the caller's m rows (rounded up to NW
 * = 16, 32, 64 or 128) as the N operand, so that no MMA work is padding
 * beyond NW and every SM streams its own part of B through a TMA ring
 * as deep as shared memory allows (16 stages at NW <= 32, 12 at 64, 7 at
 * 128).
 *
 *   CTA: warps 0-3 (one warpgroup) compute, warp 4 (one thread) loads.
 *   unit u = (column block j = u / S, K-slice s = u % S), S slices where
 *   the blocks alone would fill less than half the grid.
 *
 *   publish   the unit's fp32 partial (m x 64) goes through shared memory
 *             to every rank d that needs rows of it: into d's bank, slab
 *             (me, s), rows of d (all m for mkGemmAllReduce), 16-byte
 *             stores, over NVLink for a peer; a peer's bank is written
 *             only after d released the previous call (peer_released,
 *             local memory).  Then, in one of two ways (mki_gdec_ll):
 *             counters: d's counter of block j's group for this source
 *             (ctl->flag[slot of this rank at d][group]; this rank's
 *             own: flag[P - 1]) += 1 after one fence (release, system
 *             scope); LL lines (at most 8 rows, one slice): the stores
 *             themselves carry the call's flag beside every 4 bytes
 *             (kernels/rt/ll.cuh), in a bank of their own, and nothing
 *             follows them.  With one slice and one unit per CTA, this
 *             rank's own partial stays in the staging tile.
 *   sum       after all its units are published (so no CTA waits while
 *             it still owes partials: no cycle), the CTA of unit (j, s)
 *             waits for block j's counters (every source's S slices of
 *             every block of the group) or polls the LL lines of its
 *             share, and sums its 1/S share of the block's elements over
 *             the slabs in rank order, slice order within a rank (a
 *             fixed order: every rank that sums an element adds the same
 *             values in the same order, so mkGemmAllReduce gives the
 *             same bits everywhere), rounds once and stores C.
 *   last CTA  clears the counters and closes the call (calls, released,
 *             the peers' copies of released) as the engine path does.
 *
 * One hop: mkGemmAllReduce sends every peer the whole m x n fp32 partial
 * (4 MiB at m = 128, n = 8192) instead of a reduce-scatter then an
 * all-gather: at these sizes the link's latency, not its bytes, is the
 * cost, and each rank sums for itself.  Every wait has the runtime's
 * deadline and watches the abort word (kernels/rt/wait.cuh).
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include <type_traits>

#include "gemm/gemm_launch.h"
#include "ops/gemm_rs.h"
#include "ops/gemm_rs_close.cuh"
#include "ops/wgmma_dec.h"
#include "rt/num.cuh"
#include "rt/ptx.cuh"
#include "rt/ll.cuh"
#include "rt/wait.cuh"
#include "rt/wgmma.cuh"

using namespace mki;

namespace {

constexpr int kThreads = 160; /* one consumer warpgroup + one producer warp */
constexpr int kBN = MKI_GDEC_BN;
constexpr int kBK = 64;
constexpr int kTLd = kBN + 4; /* fp32 per row of the staging tile (no bank conflicts) */

template <int NW> struct Cfg {
    /* as deep as shared memory allows (8 / 8 / 6 stages measured ~1 us
     * slower per call at m = 16-128 on 2 x H200, bench/NOTES.md) */
    static constexpr int kStages = NW >= 128 ? 7 : NW >= 64 ? 12 : 16;
    static constexpr int kBBytes = kBN * kBK * 2; /* 8 KiB */
    static constexpr int kABytes = NW * kBK * 2;
    static constexpr int kStageBytes = kBBytes + kABytes;
    static constexpr int kTBytes = NW * kTLd * 4;
    /* +1024: the dynamic base is 16-byte aligned, swizzle atoms need 1 KiB */
    static constexpr int kSmem = 1024 + kStages * kStageBytes + kTBytes + 2 * kStages * 8;
    static_assert(kSmem <= 227 * 1024, "shared memory over the sm_90 limit");
};

struct GdecParams {
    CUtensorMap tm_a; /* A: {k, m}, box {64, NW} */
    CUtensorMap tm_b; /* transB: {k, n}, box {64, 64}; else {n, k}, box {64, 64} */
    float *slab[MKI_MAXLOCAL];            /* rank d's bank, where my slabs start */
    const float *mine;                    /* my bank */
    int ll;                               /* partials as LL lines (llslab, llmine) */
    char *llslab[MKI_MAXLOCAL];           /* rank d's LL bank, where my slabs start */
    const char *llmine;                   /* my LL bank */
    mki_grs_ctl *ctl[MKI_MAXLOCAL];
    void *c;                              /* RS: my rows; AR: all of D */
    long long ld;                         /* fp32 per bank row */
    int P, me, ar, m, n, nkb, nnb, S, units, grp, dtype;
    int row_off[MKI_MAXLOCAL + 1];        /* RS: rows of owner d (AR: unused) */
    mki_rt_dev rt;
};

struct GdecCta {
    uint64_t e;
    unsigned gated;
    cta_note note;
#ifdef MKI_GDEC_TRACE
    uint64_t ts[7]; /* lab builds: globaltimer at the points of GD_STAMP */
#endif
};
__shared__ GdecCta gd;

/* Lab builds only (-DMKI_GDEC_TRACE=CALL): per CTA, when it entered, ended
 * its last mainloop, published its last unit, saw its last sum's
 * partials, summed, finished, for one call; nothing otherwise. */
#ifdef MKI_GDEC_TRACE
#define GD_STAMP(i) (gd.ts[i] = globaltimer())
__device__ unsigned long long gd_calls[100][3];
#else
#define GD_STAMP(i) ((void)0)
#endif

__device__ __forceinline__ int rows_of(const GdecParams &p, int d)
{
    return p.ar ? p.m : p.row_off[d + 1] - p.row_off[d];
}
__device__ __forceinline__ int base_of(const GdecParams &p, int d)
{
    return p.ar ? 0 : p.row_off[d];
}

/* With one K-slice and at most one unit per CTA, a CTA sums the block
 * it computed: this rank's partial stays in its staging tile (not
 * stored, not counted). */
__device__ __forceinline__ bool own_in_t(const GdecParams &p)
{
    return p.S == 1 && p.units <= (int)gridDim.x;
}

__device__ __forceinline__ void unit_of(const GdecParams &p, int u, int *j, int *s, int *kb0,
                                        int *kb1)
{
    *j = u / p.S;
    *s = u % p.S;
    *kb0 = (int)((long long)*s * p.nkb / p.S);
    *kb1 = (int)((long long)(*s + 1) * p.nkb / p.S);
}

__device__ __forceinline__ bool wait_on(const GdecParams &p, const uint64_t *w, uint64_t target,
                                        int peer, int chunk, int phase)
{
    return wait_noted(p.rt, gd.note, w, target, peer, chunk, phase);
}

template <int NW, bool kTransB>
__device__ void producer(const GdecParams &p, char *ring, uint64_t *full, uint64_t *empty)
{
    typedef Cfg<NW> C;
    int stage = 0, phase = 0;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int j, s, kb0, kb1;
        unit_of(p, u, &j, &s, &kb0, &kb1);
        for (int kb = kb0; kb < kb1; ++kb) {
            mbar_wait(&empty[stage], phase ^ 1);
            char *sb = ring + stage * C::kStageBytes, *sa = sb + C::kBBytes;
            mbar_expect_tx(&full[stage], C::kStageBytes);
            if (kTransB) gemm::tma_load_2d(sb, &p.tm_b, kb * kBK, j * kBN, &full[stage]);
            else gemm::tma_load_2d(sb, &p.tm_b, j * kBN, kb * kBK, &full[stage]);
            gemm::tma_load_2d(sa, &p.tm_a, kb * kBK, 0, &full[stage]);
            if (++stage == C::kStages) stage = 0, phase ^= 1;
        }
    }
}

/* Rank d released the previous call: its bank may take this call's
 * partials (thread 0, once per peer). */
__device__ __forceinline__ void gate(const GdecParams &p, int d)
{
    if (gd.gated & (1u << d)) return;
    if (gd.e > 1) (void)wait_on(p, &p.ctl[p.me]->peer_released[d], gd.e - 1, d, -1, 2);
    gd.gated |= 1u << d;
}

/* The consumer warpgroup: the mainloop of each unit, its partial into
 * the staging tile, published to every rank that needs its rows. */
template <int NW, bool kF16, bool kTransB>
__device__ void consumer(const GdecParams &p, char *ring, float *T, uint64_t *full,
                         uint64_t *empty)
{
    typedef Cfg<NW> C;
    const int t = threadIdx.x, warp = t >> 5, lane = t & 31;
    const uint32_t flag = ll_flag(gd.e);
    int stage = 0, phase = 0;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int j, s, kb0, kb1;
        unit_of(p, u, &j, &s, &kb0, &kb1);
        /* no instruction but the MMAs defines acc (ptxas serializes
         * MMAs whose accumulators other instructions write): the unit's
         * first MMA overwrites it (scale-d 0); a unit without a k-block
         * (none) stages zeros */
        float acc[NW / 2];
        bool none = true;
        /* one k-block's MMAs stay in flight while the next k-block's are
         * issued, as in the engine's mainloop; a stage goes back to the
         * producer once the MMAs that read it have completed */
        int prev = -1;
        for (int kb = kb0; kb < kb1; ++kb) {
            mbar_wait(&full[stage], phase);
            const uint32_t sb = smem_u32(ring + stage * C::kStageBytes), sa = sb + C::kBBytes;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kBK / 16; ++kk) {
                const uint64_t da = kTransB ? smem_desc(sb + kk * 32, 16, 1024)
                                            : smem_desc(sb + kk * 2048, 8192, 1024);
                const uint64_t db = smem_desc(sa + kk * 32, 16, 1024);
                gdec::Wgmma<NW, kF16, kTransB ? 0 : 1>::run(acc, da, db,
                                                             none && kk == 0 ? 0 : 1);
            }
            none = false;
            wgmma_commit();
            wgmma_wait<1>(acc);
            if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
            prev = stage;
            if (++stage == C::kStages) stage = 0, phase ^= 1;
        }
        wgmma_wait<0>(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(&empty[prev]);
        if (threadIdx.x == 0) GD_STAMP(1);
        /* acc[4i + 2h + x] is D(m = 8i + q + x, column r + 8h of the block),
         * r = 16 warp + lane / 4, q = 2 (lane % 4); T is m-major */
        role_sync(1, 128); /* the previous unit's T is published */
        {
            const int r = 16 * warp + (lane >> 2), q = 2 * (lane & 3);
#pragma unroll
            for (int i = 0; i < NW / 8; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int x = 0; x < 2; ++x)
                        T[(8 * i + q + x) * kTLd + r + 8 * h] =
                            none ? 0.0f : acc[4 * i + 2 * h + x];
        }
        if (t == 0)
            for (int o = 1; o < p.P; ++o) {
                const int d = (p.me + o) % p.P;
                if (rows_of(p, d) > 0) gate(p, d);
            }
        role_sync(1, 128);
        if (gd.note.quit) continue; /* a gate failed: no bank is written */
        const int cols = p.n - j * kBN < kBN ? p.n - j * kBN : kBN, n4 = cols / 4;
        const bool keep = own_in_t(p);
        for (int o = 1; o <= p.P; ++o) { /* peers first, then this rank */
            const int d = (p.me + o) % p.P, rows = rows_of(p, d), base = base_of(p, d);
            if (rows == 0 || (d == p.me && keep)) continue;
            const size_t at0 = (size_t)s * rows * p.ld + (size_t)j * kBN;
            for (int i = t; i < rows * (kBN / 4); i += 128) {
                const int row = i / (kBN / 4), c4 = i % (kBN / 4);
                if (c4 >= n4) continue;
                const float4 v = *reinterpret_cast<const float4 *>(&T[(base + row) * kTLd + 4 * c4]);
                const size_t at = at0 + (size_t)row * p.ld + 4 * c4;
                if (p.ll) { /* two lines of two values, the flag in every word */
                    char *line = p.llslab[d] + at * 8;
                    ll_store(line, (uint64_t)__float_as_uint(v.x) |
                                       (uint64_t)__float_as_uint(v.y) << 32, flag);
                    ll_store(line + 16, (uint64_t)__float_as_uint(v.z) |
                                            (uint64_t)__float_as_uint(v.w) << 32, flag);
                } else {
                    *reinterpret_cast<float4 *>(p.slab[d] + at) = v;
                }
            }
        }
        if (p.ll) continue; /* no counters: the lines carry their flags */
        role_sync(1, 128);
        if (t == 0) GD_STAMP(6);
        if (t == 0 && !gd.note.quit) {
            /* one fence for every signal: the CTA's stores (ordered
             * before by the barrier) are visible everywhere first */
            signal_fence();
            for (int o = 1; o <= p.P; ++o) {
                const int d = (p.me + o) % p.P;
                if (rows_of(p, d) == 0 || (d == p.me && keep)) continue;
                signal_add(&p.ctl[d]->flag[d != p.me ? mki_grs_slot(p.me, d, p.P) : p.P - 1]
                                          [j / p.grp],
                           1);
            }
        }
        if (t == 0) GD_STAMP(2);
    }
}

/* An LL poll that found a line without this call's flag: every 64th
 * round, the stop words and the deadline (ll_stop, as ll_wait_slow);
 * true when the CTA must quit (the failure reported once, here). */
__device__ __noinline__ bool ll_poll_failed(const GdecParams &p, uint32_t n, uint64_t t0,
                                            int src, uint32_t flag, uint32_t seen)
{
    if (n & 63) return false;
    if (*(volatile int *)&gd.note.quit) return true;
    uint64_t why = 0;
    const int r = ll_stop(p.rt, n, t0, &why);
    if (r == SPIN_OK) return false;
    if (atomicCAS(&gd.note.quit, 0, 1) == 0)
        fail_spin(p.rt, r, wait_site{src, (int)blockIdx.x, -1, 1}, flag, seen, why, gd.e);
    return true;
}

/* The CTA's shares of the sums, after all its units are published.
 * Each thread takes U elements (of 4 values) at a time and reads the
 * sources QB at a time: all their loads (plain, or LL lines) issued
 * before any is used, then added in source order (rank, then slice).
 * LL lines (<= 8 rows, one element per thread at most) poll with U = 2,
 * QB = 4, and so do counters where a thread has at most 2 elements; with
 * more (up to 16 at m = 128) it reads U = 8 at a time (QB = 2): with two
 * the sum was a chain of dependent round trips (all-reduce m = 128 on
 * 2 x H200: 9.3 us, with U = 8 6.2). */
template <typename T, int U, int QB, bool kLL>
__device__ void sum_units(const GdecParams &p, const float *Ts)
{
    const int t = threadIdx.x;
    const int rows = rows_of(p, p.me);
    if (rows == 0) return;
    const int PS = p.P * p.S, base = base_of(p, p.me);
    const bool keep = own_in_t(p);
    const uint32_t flag = ll_flag(gd.e);
    const size_t slab = (size_t)rows * p.ld;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int j, s, kb0, kb1;
        unit_of(p, u, &j, &s, &kb0, &kb1);
        if (t == 0 && !kLL) { /* every source's S slices of every block of the group */
            const int g = j / p.grp, first = g * p.grp;
            const int cnt = p.nnb - first < p.grp ? p.nnb - first : p.grp;
            for (int x = 0; x < p.P - (keep ? 1 : 0); ++x) /* slot x: source me + x + 1
                                                             * (x = P - 1: me) */
                if (!wait_on(p, &p.ctl[p.me]->flag[x][g], (uint64_t)cnt * p.S,
                             (p.me + x + 1) % p.P, j, 0))
                    break;
        }
        role_sync(1, 128);
        if (gd.note.quit) return; /* read after the barrier: every thread alike */
        if (t == 0) GD_STAMP(3);
        const int total = rows * (kBN / 4), per = (total + p.S - 1) / p.S;
        const int lo = s * per, hi = lo + per < total ? lo + per : total;
        const int cols = p.n - j * kBN < kBN ? p.n - j * kBN : kBN, n4 = cols / 4;
        for (int i0 = lo + t; i0 < hi; i0 += 128 * U) {
            float4 a[U];
            int row[U], c4[U];
            bool in[U], ok = true;
#pragma unroll
            for (int x = 0; x < U; ++x) {
                const int i = i0 + 128 * x;
                row[x] = i / (kBN / 4);
                c4[x] = i % (kBN / 4);
                in[x] = i < hi && c4[x] < n4;
                a[x] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
            for (int q0 = 0; q0 < PS && ok; q0 += QB) {
                float4 v[QB][U];
                /* LL: lines still without this call's flag, bit QB x + qq;
                 * the batch is loaded again until none is left, so that
                 * waiting costs one round trip after the last arrival */
                uint32_t want = 0;
#pragma unroll
                for (int qq = 0; qq < QB; ++qq)
#pragma unroll
                    for (int x = 0; x < U; ++x) {
                        const int q = q0 + qq;
                        v[qq][x] = make_float4(0.f, 0.f, 0.f, 0.f);
                        if (q >= PS || !in[x]) continue;
                        const size_t at = (size_t)q * slab + (size_t)row[x] * p.ld +
                                          (size_t)j * kBN + 4 * c4[x];
                        if (keep && q / p.S == p.me)
                            v[qq][x] = *reinterpret_cast<const float4 *>(
                                &Ts[(base + row[x]) * kTLd + 4 * c4[x]]);
                        else if constexpr (!kLL)
                            v[qq][x] = __ldcg(reinterpret_cast<const float4 *>(p.mine + at));
                        else
                            want |= 1u << (QB * x + qq);
                    }
                const uint64_t t0 = want ? globaltimer() : 0;
                for (uint32_t n = 1; kLL && want; ++n) {
                    uint64_t w[QB][U][4];
#pragma unroll
                    for (int qq = 0; qq < QB; ++qq)
#pragma unroll
                        for (int x = 0; x < U; ++x)
                            if (want & (1u << (QB * x + qq))) {
                                const char *line = p.llmine + ((size_t)(q0 + qq) * slab +
                                                               (size_t)row[x] * p.ld +
                                                               (size_t)j * kBN + 4 * c4[x]) * 8;
                                ll_load(line, w[qq][x][0], w[qq][x][1]);
                                ll_load(line + 16, w[qq][x][2], w[qq][x][3]);
                            }
                    int src = -1;
                    uint32_t seen = 0;
#pragma unroll
                    for (int qq = 0; qq < QB; ++qq)
#pragma unroll
                        for (int x = 0; x < U; ++x)
                            if (want & (1u << (QB * x + qq))) {
                                if (ll_ready(w[qq][x][0], w[qq][x][1], flag) &&
                                    ll_ready(w[qq][x][2], w[qq][x][3], flag)) {
                                    want &= ~(1u << (QB * x + qq));
                                    v[qq][x] = make_float4(
                                        __uint_as_float((uint32_t)w[qq][x][0]),
                                        __uint_as_float((uint32_t)w[qq][x][1]),
                                        __uint_as_float((uint32_t)w[qq][x][2]),
                                        __uint_as_float((uint32_t)w[qq][x][3]));
                                } else if (src < 0) {
                                    src = (q0 + qq) / p.S;
                                    seen = (uint32_t)(w[qq][x][0] >> 32);
                                }
                            }
                    if (want && ll_poll_failed(p, n, t0, src, flag, seen)) {
                        ok = false;
                        break;
                    }
                }
#pragma unroll
                for (int qq = 0; qq < QB; ++qq)
#pragma unroll
                    for (int x = 0; x < U; ++x) {
                        if (q0 + qq >= PS || !in[x] || !ok) continue;
                        a[x].x += v[qq][x].x, a[x].y += v[qq][x].y;
                        a[x].z += v[qq][x].z, a[x].w += v[qq][x].w;
                    }
            }
#pragma unroll
            for (int x = 0; x < U; ++x) {
                if (!ok || !in[x]) continue; /* a failed poll: reported */
                T *c = static_cast<T *>(p.c) + (size_t)row[x] * p.n + (size_t)j * kBN + 4 * c4[x];
                uint2 o;
                o.x = pack2<T>(a[x].x, a[x].y);
                o.y = pack2<T>(a[x].z, a[x].w);
                *reinterpret_cast<uint2 *>(c) = o;
            }
        }
        role_sync(1, 128);
        if (gd.note.quit) return;
    }
    if (t == 0) GD_STAMP(4);
}

__device__ void finish(const GdecParams &p)
{
    mki_grs_ctl *ctl = p.ctl[p.me];
    note_report(p.rt, gd.note, gd.e);
#ifdef MKI_GDEC_TRACE
    GD_STAMP(5);
    if (gd.e == (uint64_t)(MKI_GDEC_TRACE)) {
        long long d[7];
        for (int i = 1; i < 7; ++i) d[i] = gd.ts[i] ? (long long)(gd.ts[i] - gd.ts[0]) : -1;
        printf("GDTRACE rank %d cta %d t0 %llu loop %lld pub %lld seen %lld summed %lld end %lld "
               "stored %lld\n", p.me, (int)blockIdx.x, (unsigned long long)gd.ts[0], d[1], d[2],
               d[3], d[4], d[5], d[6]);
    }
    /* the 100 calls after it: when CTA 0 entered and when the last CTA
     * left, kept on the device and printed by a later call */
    if (gd.e >= (uint64_t)(MKI_GDEC_TRACE) && gd.e < (uint64_t)(MKI_GDEC_TRACE) + 100 &&
        blockIdx.x == 0)
        gd_calls[gd.e - (MKI_GDEC_TRACE)][0] = gd.ts[0];
    if (gd.e == (uint64_t)(MKI_GDEC_TRACE) + 100 && blockIdx.x == 0)
        for (int i = 0; i < 100; ++i)
            printf("GDCALL rank %d call %d enter %llu leave %llu done %llu\n", p.me,
                   MKI_GDEC_TRACE + i, gd_calls[i][0], gd_calls[i][1], gd_calls[i][2]);
#endif
    __threadfence();
    if (atomicAdd(&ctl->exits, 1u) != gridDim.x - 1) return;
#ifdef MKI_GDEC_TRACE
    if (gd.e >= (uint64_t)(MKI_GDEC_TRACE) && gd.e < (uint64_t)(MKI_GDEC_TRACE) + 100)
        gd_calls[gd.e - (MKI_GDEC_TRACE)][1] = globaltimer();
#endif
    ctl->exits = 0;
    const int ng = p.ll ? 0 : (p.nnb + p.grp - 1) / p.grp; /* LL: no counters */
    for (int x = 0; x < p.P; ++x)
        for (int g = 0; g < ng; ++g) ctl->flag[x][g] = 0;
    grs_close(p.ctl, p.me, p.P, gd.e);
#ifdef MKI_GDEC_TRACE
    if (gd.e >= (uint64_t)(MKI_GDEC_TRACE) && gd.e < (uint64_t)(MKI_GDEC_TRACE) + 100)
        gd_calls[gd.e - (MKI_GDEC_TRACE)][2] = globaltimer();
#endif
}

/* The CTA's sums, by the variant of sum_units that suits the call. */
template <bool kF16>
__device__ __forceinline__ void sum_all(const GdecParams &p, const float *T)
{
    typedef typename std::conditional<kF16, __half, __nv_bfloat16>::type Out;
    if (p.ll) sum_units<Out, 2, 4, true>(p, T);
    else if (rows_of(p, p.me) * (kBN / 4) > 2 * 128 * p.S) sum_units<Out, 8, 2, false>(p, T);
    else sum_units<Out, 2, 4, false>(p, T);
}

template <int NW, bool kF16, bool kTransB>
__global__ void __launch_bounds__(kThreads, 1) gdec_kernel(const __grid_constant__ GdecParams p)
{
    typedef Cfg<NW> C;
    extern __shared__ char smem_raw[];
    char *ring = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                          ~(uintptr_t)1023);
    float *T = reinterpret_cast<float *>(ring + C::kStages * C::kStageBytes);
    uint64_t *full = reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(T) + C::kTBytes);
    uint64_t *empty = full + C::kStages;
    if (threadIdx.x == 0) {
        for (int i = 0; i < C::kStages; ++i) {
            mbar_init(&full[i], 1);
            mbar_init(&empty[i], 4); /* one arrive per consumer warp */
        }
        mbar_init_fence();
        gd.e = *reinterpret_cast<volatile const uint64_t *>(&p.ctl[p.me]->calls) + 1;
        gd.gated = 0;
        gd.note.quit = 0;
#ifdef MKI_GDEC_TRACE
        for (int i = 0; i < 7; ++i) gd.ts[i] = 0;
        GD_STAMP(0);
#endif
        if (blockIdx.x == 0) st_relaxed_sys(&p.ctl[p.me]->cur, gd.e);
    }
    __syncthreads();
    if (threadIdx.x >= 128) {
        if (threadIdx.x == 128) producer<NW, kTransB>(p, ring, full, empty);
    } else {
        consumer<NW, kF16, kTransB>(p, ring, T, full, empty);
        sum_all<kF16>(p, T);
    }
    __syncthreads();
    if (threadIdx.x == 0) finish(p);
}

template <int NW>
const void *kernel_nw(bool f16, bool tb)
{
    return f16 ? (tb ? (const void *)gdec_kernel<NW, true, true>
                     : (const void *)gdec_kernel<NW, true, false>)
               : (tb ? (const void *)gdec_kernel<NW, false, true>
                     : (const void *)gdec_kernel<NW, false, false>);
}

const void *kernel_for(int nw, bool f16, bool tb, size_t *smem)
{
    switch (nw) {
    case 16: *smem = Cfg<16>::kSmem; return kernel_nw<16>(f16, tb);
    case 32: *smem = Cfg<32>::kSmem; return kernel_nw<32>(f16, tb);
    case 64: *smem = Cfg<64>::kSmem; return kernel_nw<64>(f16, tb);
    default: *smem = Cfg<128>::kSmem; return kernel_nw<128>(f16, tb);
    }
}

} // namespace

extern "C" int mki_gdec_describe(const struct mki_grs_launch *l, struct mki_launch_desc *d,
                                 char *msg, size_t len)
{
    using mki::gemm::encode_2d;
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    const int P = l->nlocal, me = l->rt.local;
    if (l->m < 1 || l->m > MKI_GDEC_MAXM || l->n < 1 || l->n % 8 != 0 || P < 2 ||
        P > MKI_MAXLOCAL || l->slices < 1) {
        snprintf(msg, len, "gemm_rs: the decode kernel takes 1..%d rows, n a multiple of 8 "
                 "and 2..%d ranks (m = %lld, n = %lld, %d ranks)", MKI_GDEC_MAXM, MKI_MAXLOCAL,
                 (long long)l->m, (long long)l->n, P);
        return MKI_GEMM_ERR_INVALID;
    }
    GdecParams p;
    memset(&p, 0, sizeof(p));
    const int nw = mki_gdec_nw(l->m);
    int r;
    const mki_dtype_t dt = (mki_dtype_t)l->dtype;
    if ((r = encode_2d(&p.tm_a, l->a, dt, (uint64_t)l->k, (uint64_t)l->m, (uint64_t)l->k, kBK,
                       (uint32_t)nw, msg, len)))
        return r;
    if (l->trans_b)
        r = encode_2d(&p.tm_b, l->b, dt, (uint64_t)l->k, (uint64_t)l->n, (uint64_t)l->k, kBK,
                      kBN, msg, len);
    else
        r = encode_2d(&p.tm_b, l->b, dt, (uint64_t)l->n, (uint64_t)l->k, (uint64_t)l->n, kBN,
                      kBK, msg, len);
    if (r) return r;
    p.P = P;
    p.me = me;
    p.ar = l->ar;
    p.m = (int)l->m;
    p.n = (int)l->n;
    p.nkb = (int)((l->k + kBK - 1) / kBK);
    p.nnb = (int)((l->n + kBN - 1) / kBN);
    p.S = l->slices;
    p.units = p.nnb * p.S;
    p.grp = (int)((p.nnb + MKI_GRS_MAXFLAGS - 1) / MKI_GRS_MAXFLAGS);
    p.dtype = l->dtype;
    p.ld = l->ld;
    for (int q = 0; q <= P; ++q) p.row_off[q] = (int)l->row_off[q];
    for (int q = 0; q < P; ++q) {
        const int64_t rows = l->ar ? l->m : l->row_off[q + 1] - l->row_off[q];
        p.slab[q] = (float *)l->bank[q] + (size_t)me * p.S * (size_t)rows * (size_t)p.ld;
        p.ctl[q] = l->ctl[q];
    }
    p.mine = (const float *)l->bank[me];
    p.ll = l->ll;
    if (p.ll) {
        for (int q = 0; q < P; ++q) {
            const int64_t rows = l->ar ? l->m : l->row_off[q + 1] - l->row_off[q];
            p.llslab[q] = l->llbank[q] + (size_t)me * p.S * (size_t)rows * (size_t)p.ld * 8;
        }
        p.llmine = l->llbank[me];
    }
    p.c = l->ar ? l->c_full : l->c;
    p.rt = l->rt;
    size_t smem = 0;
    d->fn = kernel_for(nw, l->dtype == MKI_F16, l->trans_b != 0, &smem);
    int grid = l->ctas < p.units ? l->ctas : p.units;
    d->grid = (unsigned)(grid < 1 ? 1 : grid);
    d->block = kThreads;
    d->cluster = 1;
    d->smem = smem;
    d->exact = 0; /* each CTA publishes all its units before it waits: any grid works */
    if (mki_launch_arg(d, &p, sizeof(p))) {
        snprintf(msg, len, "gemm_rs: decode kernel parameters of %zu bytes do not fit",
                 sizeof(p));
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

extern "C" int mki_gdec_preload(char *msg, size_t len)
{
    static const int nws[] = {16, 32, 64, 128};
    for (int i = 0; i < 16; i++) {
        size_t smem = 0;
        const void *k = kernel_for(nws[i >> 2], i & 1, (i >> 1) & 1, &smem);
        cudaFuncAttributes at;
        cudaError_t e = cudaFuncGetAttributes(&at, k);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) {
            snprintf(msg, len, "gemm_rs: loading the decode kernels: %s", cudaGetErrorString(e));
            return MKI_GEMM_ERR_CUDA;
        }
    }
    return MKI_GEMM_OK;
}
