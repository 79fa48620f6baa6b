/*
 * attn_kernel.cuh - the attention kernel's device side: shared-memory
 * layout, the block walk, the ring's protocol waits, the TMA producer and
 * the wgmma consumers, the kernel.  Included by attn.cu (the host side:
 * tensor maps, checks, launches), once.
 *
 * One persistent CTA per SM: a producer warpgroup and kWG consumer
 * warpgroups of 64 query rows each (Cfg: 3 at head_dim 64, 512 threads;
 * 2 at 128, 384 threads):
 *
 *     WG0: producer (one thread)              WG1 .. WGkWG: consumers
 *     ----------------------------------      ----------------------------------
 *     for each tile (b, h, BM queries):       for each tile:
 *       wait q_empty; TMA Q -> smem             wait q_full
 *       for each segment, key block:            for each key block j:
 *         (ring) wait the chunk's flag            wait k_full; S = Q K^T (wgmma,
 *         wait k_empty; TMA K -> stage              64 rows of Q per warpgroup)
 *         wait v_empty; TMA V -> stage            release K; mask (causal
 *                                                   diagonal, keys past the
 *                                                   end); online softmax in
 *                                                   fp32 (base 2)
 *                                                 wait v_full; O += P V (P
 *                                                   from registers); release V
 *                                               (the last P V issued with the
 *                                                 next tile's first S)
 *                                               release Q; O /= l; store O, lse
 *
 * Q, K and V tiles arrive by 4-D TMA (dims d, seq, heads, batch: one map
 * serves both layouts; rows past the sequence are zero-filled) in 128-byte
 * swizzled boxes of BM (Q) or 128 (K, V) rows x 64 elements, the layout
 * wgmma reads K-major (Q, K) and N-major (V).  Key blocks that the causal
 * mask hides entirely are skipped by both sides alike (BlockIter); a tile
 * whose queries see no key takes one block masked whole.  Tiles
 * are dealt to CTAs in rounds, the queries of the highest positions (the
 * most keys under a causal mask) first: under a mask, those of every head
 * before the lighter ones (mki_attn_tile).
 *
 * In the ring (ops/attn.h), segment 0 is this rank's keys and segments
 * 1.. those of the next ranks in the bank, each chunk waited for by
 * the producer before its first block; CTA 0 runs the gate on a spare
 * thread of WG0; every wait has the runtime's deadline.
 */
#pragma once

#include <cuda.h> /* CUtensorMap (type only) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "attn/attn.h"
#include "attn/wgmma_attn.h"
#include "ops/attn.h"
#include "rt/num.cuh"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"
#include "rt/wgmma.cuh"

namespace mki {
namespace attn {


constexpr int BN = MKI_ATTN_BN;

/* Per head_dim: kWG consumer warpgroups of 64 query rows each, tiles of
 * BM = 64 kWG queries.  3 at d = 64, where the exponentials bound the
 * time: three softmaxes give the tensor cores more to overlap, and K and
 * V are read once for 192 queries (H100: 9-18% faster full, 0.5-8% causal);
 * 2 at 128 (the registers of O).  kRegP, kRegC: registers per thread of
 * the producer warpgroup and of each consumer one (setmaxnreg).  They can
 * only move within what the CTA gets at launch: kThreads x the launch
 * bound's count (65536 / kThreads, down to a multiple of 8: 128 at 512
 * threads, 168 at 384); asking more makes setmaxnreg.inc wait forever
 * (seen: a branch with consumers on 240 at d = 128 hung). */
template <int kD>
struct Cfg {
    static constexpr int kWG = kD == 64 ? 3 : 2;
    static constexpr int BM = 64 * kWG;
    static constexpr int kThreads = 128 * (kWG + 1);
    static constexpr int kRegP = kD == 64 ? 32 : 56;
    static constexpr int kRegC = kD == 64 ? 160 : 224;
    static_assert(128 * kRegP + 128 * kWG * kRegC <= kThreads * (65536 / kThreads / 8 * 8),
                  "setmaxnreg.inc cannot be granted");
};
constexpr int kBoxBytes = 128 * 128; /* 128 rows x 64 elements x 2 bytes */
/* O leaves through shared memory and TMA stores at head_dim 128 (4-7%
 * faster than register stores there, 1-3% slower at 64: bench/NOTES.md) */
template <int kD>
constexpr bool kStoreOByTma = kD == 128;

template <int kD>
struct Smem {
    /* K and V stages each (d = 64: 4 stages measured 6% faster than 2) */
    static constexpr int kStages = kD == 64 ? 4 : 2;
    static constexpr int kQBufs = 2; /* the next tile's Q loads during this one */
    static constexpr int kTile = (kD / 64) * kBoxBytes; /* 128 rows x kD (K, V) */
    static constexpr int kQBlk = Cfg<kD>::BM * 128;     /* BM rows x 64 elements */
    static constexpr int kQTile = (kD / 64) * kQBlk;    /* BM rows x kD */
    static constexpr int kQ = 0;                        /* kQBufs Q buffers */
    static constexpr int kK = kQ + kQBufs * kQTile;
    static constexpr int kV = kK + kStages * kTile;
    static constexpr int kBar = kV + kStages * kTile;
    static constexpr int kBytes = 1024 + kBar + 256;
};
static_assert(Smem<64>::kBytes <= 227 * 1024 && Smem<128>::kBytes <= 227 * 1024,
              "shared memory over the sm_90 limit");

/* Position map of a tensor's local rows (attn.h). */
struct Pos {
    int split, off0, off1;
    __device__ __forceinline__ int at(int i) const { return i < split ? off0 + i : off1 + (i - split); }
    /* min and max position over rows [i0, i1), i1 > i0 */
    __device__ __forceinline__ void range(int i0, int i1, int *lo, int *hi) const
    {
        if (i0 < split && split < i1) {
            const int a = at(i0), b = at(split - 1), c = at(split), d = at(i1 - 1);
            *lo = min(a, c);
            *hi = max(b, d);
        } else {
            *lo = at(i0);
            *hi = at(i1 - 1);
        }
    }
};

struct AttnParams {
    CUtensorMap tm_q;
    CUtensorMap tm_o; /* o, box {64, 64, 1, 1}: a warpgroup's rows (head_dim 128) */
    CUtensorMap tm_k[MKI_ATTN_MAXSEG];
    CUtensorMap tm_v[MKI_ATTN_MAXSEG];
    void *o;
    float *lse;
    long long o_ss, o_sh, o_sb; /* o's strides in elements: sequence, head, batch */
    int batch, seq, heads, kv_heads, group, nqb, num_tiles;
    int qshift; /* nqb BM - seq: query block qb holds rows qb BM - qshift ..
                 * + BM (the partial block is the first, whose rows have
                 * the lowest positions: under a causal mask it sees the
                 * fewest keys; rows below 0 are loaded as zeros, never
                 * stored) */
    int layout, causal, nseg;
    float scale_log2;
    Pos qpos;
    Pos kpos[MKI_ATTN_MAXSEG];
    const uint64_t *flags[MKI_ATTN_MAXSEG];
    int chunk_rows, nsc;
    uint64_t flag_target;
};

#include "attn/attn_ring.cuh" /* RingParams, the CTA's state, the ring's waits */

/* ---------------------------------------------------------------- PTX */

__device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, int c0, int c1,
                                            int c2, int c3, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(smem_u32(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
        : "memory");
}

__device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, int c0, int c1, int c2,
                                             int c3, uint32_t src)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
                 " [%0, {%1, %2, %3, %4}], [%5];" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
                 : "memory");
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* ---------------------------------------------------------------- schedule */

struct Tile {
    int b, h, qb;
};

/* Tile t in the order of mki_attn_tile (attn.h): heads of a batch
 * together (GQA groups share keys in L2), the query blocks of the highest
 * positions first; under a causal mask, in bands across the heads. */
__device__ __forceinline__ Tile tile_of(const AttnParams &p, int t)
{
    Tile x;
    int bh;
    mki_attn_tile(t, p.nqb, p.batch * p.heads, p.causal, &bh, &x.qb);
    x.h = bh % p.heads;
    x.b = bh / p.heads;
    return x;
}

enum { BLK_SKIP = 0, BLK_FULL = 1, BLK_MASK = 2 };

/* ---------------------------------------------------------------- barriers */

/* mbarriers in shared memory: Q (two buffers), then K and V stages. */
template <int kD>
struct Bars {
    uint64_t *b;
    __device__ __forceinline__ uint64_t *q_full(int i) const { return b + i; }
    __device__ __forceinline__ uint64_t *q_empty(int i) const { return b + 2 + i; }
    __device__ __forceinline__ uint64_t *k_full(int s) const { return b + 4 + s; }
    __device__ __forceinline__ uint64_t *k_empty(int s) const { return b + 4 + Smem<kD>::kStages + s; }
    __device__ __forceinline__ uint64_t *v_full(int s) const { return b + 4 + 2 * Smem<kD>::kStages + s; }
    __device__ __forceinline__ uint64_t *v_empty(int s) const { return b + 4 + 3 * Smem<kD>::kStages + s; }
};

/* The i-th tile of this CTA: rounds of gridDim.x tiles, dealt forwards
 * and backwards in turn (a CTA that got a heavy tile of a causal round
 * gets a light one in the next); -1 past the end. */
__device__ __forceinline__ int tile_index(const AttnParams &p, int i)
{
    const int g = gridDim.x;
    const int t = i * g + ((i & 1) ? g - 1 - (int)blockIdx.x : (int)blockIdx.x);
    return t < p.num_tiles ? t : -1;
}

/* The key blocks of a tile in order (segments, then blocks), skipping
 * those the causal mask hides: the producer and the consumers walk the
 * same list.  A block is skipped when its first key's position is past
 * the tile's last query's, taken whole when its last key's is not past
 * the tile's first query's (and it has no row past the end), masked
 * otherwise.  Positions grow within each piece of a segment (attn.h), so
 * after a skipped block the rest of its piece is skipped at once: the
 * walk costs the blocks it takes, not the segment's length. */
struct BlockIter {
    int s, kb, kind;
    int qlo, qhi; /* the tile's query positions */
    bool any;     /* a block was taken */
    bool forced;  /* the tile's one block, masked whole, was taken */
    __device__ __forceinline__ void start(const AttnParams &p, int qb, int bm)
    {
        s = 0;
        kb = -1;
        any = false;
        forced = false;
        if (p.causal) {
            const int q0 = qb * bm - p.qshift, q1 = min(q0 + bm, p.seq);
            p.qpos.range(max(q0, 0), q1, &qlo, &qhi);
        }
    }
    __device__ __forceinline__ bool next(const AttnParams &p)
    {
        const int nkb = (p.seq + BN - 1) / BN;
        if (forced) return false;
        for (;;) {
            if (++kb >= nkb) {
                kb = 0;
                if (++s >= p.nseg) {
                    if (any) return false;
                    /* A tile whose queries see no key at all still takes
                     * block 0 of segment 0, masked whole (every key after
                     * every query: P = 0), so that every tile has a block
                     * and the consumers' pipeline never branches around a
                     * wgmma (ptxas serializes them all otherwise). */
                    s = 0;
                    kb = 0;
                    forced = true;
                    kind = BLK_MASK;
                    return true;
                }
            }
            const int k0 = kb * BN, k1 = min(k0 + BN, p.seq);
            const bool edge = k1 - k0 < BN;
            if (!p.causal) {
                kind = edge ? BLK_MASK : BLK_FULL;
                any = true;
                return true;
            }
            int klo, khi;
            p.kpos[s].range(k0, k1, &klo, &khi);
            if (klo <= qhi) {
                kind = (khi <= qlo && !edge) ? BLK_FULL : BLK_MASK;
                any = true;
                return true;
            }
            /* skipped: so is the rest of this piece */
            const int split = p.kpos[s].split;
            const int jump = k0 < split ? split / BN : nkb; /* the block holding row split */
            if (jump - 1 > kb) kb = jump - 1;
        }
    }
};

/* ---------------------------------------------------------------- producer */

template <int kD>
__device__ void producer(const AttnParams &p, const RingParams &r, char *sm, Bars<kD> bar)
{
    constexpr int kTile = Smem<kD>::kTile, kS = Smem<kD>::kStages;
    int st = 0, ph = 0;
    for (int i = 0;; ++i) {
        const int t = tile_index(p, i);
        if (t < 0) break;
        const Tile x = tile_of(p, t);
        constexpr int kQB = Smem<kD>::kQBufs;
        const int hk = x.h / p.group, qbuf = i % kQB;
        mbar_wait(bar.q_empty(qbuf), ((i / kQB) & 1) ^ 1);
        mbar_expect_tx(bar.q_full(qbuf), Smem<kD>::kQTile);
#pragma unroll
        for (int c = 0; c < kD / 64; ++c)
            tma_load_4d(sm + Smem<kD>::kQ + qbuf * Smem<kD>::kQTile + c * Smem<kD>::kQBlk, &p.tm_q,
                        c * 64, x.qb * Cfg<kD>::BM - p.qshift, x.h, x.b, bar.q_full(qbuf));
        BlockIter it;
        it.start(p, x.qb, Cfg<kD>::BM);
        int last_chunk = -1, last_s = -1;
        while (it.next(p)) {
            const int s = it.s, kb = it.kb;
            if (p.flags[s]) {
                const int j = kb * BN / p.chunk_rows;
                const int c = ((x.b * (p.layout == MKI_ATTN_BHSD ? p.kv_heads : 1) +
                                (p.layout == MKI_ATTN_BHSD ? hk : 0)) * p.nsc) + j;
                if (c != last_chunk || s != last_s) {
                    last_chunk = c;
                    last_s = s;
                    if (r.on) (void)ring_wait(r, &p.flags[s][c], p.flag_target, r.seg_src[s], c, 0);
                    fence_proxy_async_global(); /* a copy engine's writes -> TMA reads */
                }
            }
            mbar_wait(bar.k_empty(st), ph ^ 1);
            mbar_expect_tx(bar.k_full(st), kTile);
#pragma unroll
            for (int c = 0; c < kD / 64; ++c)
                tma_load_4d(sm + Smem<kD>::kK + st * kTile + c * kBoxBytes, &p.tm_k[s], c * 64,
                            kb * BN, hk, x.b, bar.k_full(st));
            mbar_wait(bar.v_empty(st), ph ^ 1);
            mbar_expect_tx(bar.v_full(st), kTile);
#pragma unroll
            for (int c = 0; c < kD / 64; ++c)
                tma_load_4d(sm + Smem<kD>::kV + st * kTile + c * kBoxBytes, &p.tm_v[s], c * 64,
                            kb * BN, hk, x.b, bar.v_full(st));
            if (++st == kS) {
                st = 0;
                ph ^= 1;
            }
        }
    }
}

/* ---------------------------------------------------------------- consumers */

/* The consumers' pieces: S = Q K^T issued, O += P V issued, and the
 * masked online softmax of one block of S (base 2, two rows per thread).
 * The k-steps' descriptors are the first one plus a constant (the start
 * address field, bits 0-13, holds address / 16 of a shared memory under
 * 256 KiB: no carry out of it), so the issue needs one descriptor per
 * operand and an add per k-step, which the compiler keeps in the uniform
 * datapath (computing each from its address cost R2UR moves in front of
 * every wgmma, on the loop's critical path: bench/NOTES.md). */
template <int kD, bool kF16>
__device__ __forceinline__ void issue_s(float (&sc)[64], uint32_t q_addr, uint32_t k_addr)
{
    /* every lane holds the same Q address; taken from lane 0, the
     * compiler knows it is the warp's and keeps the Q descriptors in
     * uniform registers too (d = 128: 5 R2UR a block instead of 20) */
    q_addr = __shfl_sync(0xffffffffu, q_addr, 0);
    const uint64_t dq = smem_desc(q_addr, 16, 1024), dk = smem_desc(k_addr, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t in = (kk % 4) * 32; /* k-step within a 64-element block */
        WgmmaSS128<kF16>::run(sc, dq + (((kk / 4) * Smem<kD>::kQBlk + in) >> 4),
                              dk + (((kk / 4) * kBoxBytes + in) >> 4), kk != 0);
    }
}

template <int kD, bool kF16>
__device__ __forceinline__ void issue_pv(float (&o)[kD / 2], const uint32_t (&pa)[8][4], uint32_t v_addr)
{
    const uint64_t dv0 = smem_desc(v_addr, kBoxBytes, 1024);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
        const uint64_t dv = dv0 + ((kk * 2048) >> 4);
        if constexpr (kD == 128)
            WgmmaRS128<kF16>::run(o, pa[kk], dv);
        else
            WgmmaRS64<kF16>::run(o, pa[kk], dv);
    }
}

struct RowState {
    float m0, m1, l0, l1; /* the exponent base (base 2, scaled: the running max, moved only
                           * when passed by more than kRebase) and the lane's part of the sum */
};

/* Mask block `it` of S (kMask: a block of kind BLK_MASK), turn it into P
 * (in place), update the rows' state; returns the factors the old O must
 * be scaled by.  Instantiated with and without the mask and picked per
 * block: with the mask's code in a branch of one instance, the unmasked
 * blocks' code came out 2-6% slower at d = 64 (bench/NOTES.md). */
template <bool kMask>
__device__ __forceinline__ void softmax_block(const AttnParams &p, const BlockIter &it, float (&sc)[64],
                                              RowState &rs, int qp0, int qp1, int tq, float *a0,
                                              float *a1)
{
    const float sl2 = p.scale_log2;
    if (kMask) {
        const int k0 = it.kb * BN;
        /* Keys past the end, and under a causal mask keys after the row's
         * query.  Where the block lies in one piece of the key positions
         * (position = base + row; always, unless a ring segment's split
         * falls inside it) a key is kept when its row is at most a limit
         * per query row: one compare per element, where looking each key's
         * position up cost more (d = 64, causal 4k: 9% slower overall,
         * bench/NOTES.md). */
        int base = 0, lim = 0x7fffffff;
        if (p.causal) {
            const int split = p.kpos[it.s].split;
            if (k0 + BN <= split || k0 >= split)
                base = k0 < split ? p.kpos[it.s].off0 : p.kpos[it.s].off1 - split;
            else
                lim = -1; /* the split inside: each key's position */
        }
        if (lim >= 0) {
            const int c0 = min(p.seq - 1, p.causal ? qp0 - base : lim) - k0 - tq;
            const int c1 = min(p.seq - 1, p.causal ? qp1 - base : lim) - k0 - tq;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (8 * j + e > c0) sc[4 * j + e] = -INFINITY;
                    if (8 * j + e > c1) sc[4 * j + 2 + e] = -INFINITY;
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < 16; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int kc = k0 + 8 * j + tq + e;
                    const bool out = kc >= p.seq;
                    const int kp = p.kpos[it.s].at(kc);
                    if (out || kp > qp0) sc[4 * j + e] = -INFINITY;
                    if (out || kp > qp1) sc[4 * j + 2 + e] = -INFINITY;
                }
            }
        }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        mx0 = fmaxf(mx0, fmaxf(sc[4 * j], sc[4 * j + 1]));
        mx1 = fmaxf(mx1, fmaxf(sc[4 * j + 2], sc[4 * j + 3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    /* The exponent base moves only when the row's maximum passes it by
     * more than kRebase (P then stays below 2^kRebase, as exact in bf16 or
     * fp16 as below 1, and O and l in fp32 far from overflow): O is
     * rescaled a few times a row instead of at most blocks (at 4k most
     * blocks raise some row's maximum of a warp's 16 a little). */
    constexpr float kRebase = 8.f;
    const float x0 = mx0 * sl2, x1 = mx1 * sl2;
    const float mn0 = x0 > rs.m0 + kRebase ? x0 : rs.m0, mn1 = x1 > rs.m1 + kRebase ? x1 : rs.m1;
    /* a row that has seen no key yet keeps exponent base 0 */
    const float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
    *a0 = ex2(rs.m0 - b0);
    *a1 = ex2(rs.m1 - b1);
    rs.m0 = mn0;
    rs.m1 = mn1;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        sc[4 * j] = ex2(fmaf(sc[4 * j], sl2, -b0));
        sc[4 * j + 1] = ex2(fmaf(sc[4 * j + 1], sl2, -b0));
        sc[4 * j + 2] = ex2(fmaf(sc[4 * j + 2], sl2, -b1));
        sc[4 * j + 3] = ex2(fmaf(sc[4 * j + 3], sl2, -b1));
        s0 += sc[4 * j] + sc[4 * j + 1];
        s1 += sc[4 * j + 2] + sc[4 * j + 3];
    }
    rs.l0 = rs.l0 * *a0 + s0;
    rs.l1 = rs.l1 * *a1 + s1;
}

/* P as the 16-bit A operand: k-step kk takes S's columns 16 kk .. 16 kk +
 * 15, i.e. accumulators 8 kk .. 8 kk + 7. */
template <typename T>
__device__ __forceinline__ void pack_p(const float (&sc)[64], uint32_t (&pa)[8][4])
{
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            pa[kk][q] = pack2<T>(sc[8 * kk + 2 * q], sc[8 * kk + 2 * q + 1]);
    }
}

/* A consumer warpgroup's view of one tile: its rows, its Q buffer, the
 * walk of its key blocks. */
template <int kD>
struct TileView {
    Tile x;
    int i, qbuf, r0, qp0, qp1;
    uint32_t q_addr;
    BlockIter it; /* at the tile's first block (every tile has one) */
    __device__ __forceinline__ void open(const AttnParams &p, int tt, int ii, uint32_t base, int wg, int row)
    {
        x = tile_of(p, tt);
        i = ii;
        qbuf = ii % Smem<kD>::kQBufs;
        q_addr = base + Smem<kD>::kQ + qbuf * Smem<kD>::kQTile + wg * (64 * 128);
        r0 = x.qb * Cfg<kD>::BM - p.qshift + wg * 64 + row; /* my rows: r0, r0 + 8 */
        qp0 = p.qpos.at(r0);
        qp1 = p.qpos.at(r0 + 8);
        it.start(p, x.qb, Cfg<kD>::BM);
        (void)it.next(p);
    }
    __device__ __forceinline__ void wait_q(Bars<kD> bar) const
    {
        mbar_wait(bar.q_full(qbuf), (i / Smem<kD>::kQBufs) & 1);
    }
};

/* A tile's end: O normalised and stored, the rows' lse; the Q buffer
 * freed (its S are all done). */
template <int kD, bool kF16>
__device__ __forceinline__ void finish_tile(const AttnParams &p, Bars<kD> bar, const TileView<kD> &v,
                                            const float (&o)[kD / 2], const RowState &rs, int wg,
                                            int t)
{
    typedef typename std::conditional<kF16, __half, __nv_bfloat16>::type T;
    constexpr int kO = kD / 2;
    constexpr bool kTmaO = kStoreOByTma<kD>;
    const int lane = t & 31, warp = t >> 5;
    const int g = lane >> 2, tq = (lane & 3) * 2;
    float l0 = rs.l0, l1 = rs.l1;
    const float m0 = rs.m0, m1 = rs.m1;
    if (!kTmaO && lane == 0) mbar_arrive(bar.q_empty(v.qbuf));
    /* the row sums over the quad */
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const int r0 = v.r0;
    if (kTmaO) {
        /* O into this warpgroup's rows of the Q buffer (its S are all
         * done), swizzled as the TMA box wants it (16-byte unit u of
         * row r at unit u ^ (r % 8)); one thread stores them by TMA
         * (rows past the sequence clipped) and frees the buffer once
         * the store has read it */
        const int lr0 = warp * 16 + g, lr1 = lr0 + 8;
#pragma unroll
        for (int j = 0; j < kO / 4; ++j) {
            const uint32_t blk = v.q_addr + (j / 8) * Smem<kD>::kQBlk;
            const uint32_t a0s = blk + lr0 * 128 + (((j % 8) ^ (lr0 & 7)) * 16) + tq * 2;
            const uint32_t a1s = blk + lr1 * 128 + (((j % 8) ^ (lr1 & 7)) * 16) + tq * 2;
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(a0s),
                         "r"(pack2<T>(o[4 * j] * i0, o[4 * j + 1] * i0))
                         : "memory");
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(a1s),
                         "r"(pack2<T>(o[4 * j + 2] * i1, o[4 * j + 3] * i1))
                         : "memory");
        }
        fence_proxy_async_smem();
        asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
        if (t == 0) {
#pragma unroll
            for (int c = 0; c < kD / 64; ++c)
                tma_store_4d(&p.tm_o, c * 64, v.x.qb * Cfg<kD>::BM - p.qshift + wg * 64, v.x.h, v.x.b,
                             v.q_addr + c * Smem<kD>::kQBlk);
            bulk_commit();
            bulk_wait_read<0>();
            mbar_arrive(bar.q_empty(v.qbuf));
        }
    } else {
        T *ob = reinterpret_cast<T *>(p.o) + (long long)v.x.b * p.o_sb + (long long)v.x.h * p.o_sh;
        if (r0 >= 0 && r0 < p.seq) {
            T *row = ob + (long long)r0 * p.o_ss;
#pragma unroll
            for (int j = 0; j < kO / 4; ++j)
                *reinterpret_cast<uint32_t *>(row + 8 * j + tq) = pack2<T>(o[4 * j] * i0, o[4 * j + 1] * i0);
        }
        if (r0 + 8 >= 0 && r0 + 8 < p.seq) {
            T *row = ob + (long long)(r0 + 8) * p.o_ss;
#pragma unroll
            for (int j = 0; j < kO / 4; ++j)
                *reinterpret_cast<uint32_t *>(row + 8 * j + tq) =
                    pack2<T>(o[4 * j + 2] * i1, o[4 * j + 3] * i1);
        }
    }
    if (p.lse && (lane & 3) == 0) {
        const float ln2 = 0.6931471805599453f;
        float *lr = p.lse + ((long long)v.x.b * p.heads + v.x.h) * p.seq;
        if (r0 >= 0 && r0 < p.seq) lr[r0] = l0 > 0.f ? (m0 + log2f(l0)) * ln2 : -INFINITY;
        if (r0 + 8 >= 0 && r0 + 8 < p.seq) lr[r0 + 8] = l1 > 0.f ? (m1 + log2f(l1)) * ln2 : -INFINITY;
    }
}

/* Each tile's blocks j = 0 .. n-1 run as: S_0; then for j >= 1, S_j and
 * P_{j-1} V issued together, the softmax of S_j while P_{j-1} V runs on
 * the tensor cores; then P_{n-1} V, issued together with the next tile's
 * S_0, whose product runs under this tile's end (O's normalisation and
 * store).  (Making the two warpgroups take turns at issuing,
 * FlashAttention-3's ping-pong, measured no faster: bench/NOTES.md.) */
template <int kD, bool kF16>
__device__ void consumer(const AttnParams &p, char *sm, Bars<kD> bar, int wg, int t)
{
    typedef typename std::conditional<kF16, __half, __nv_bfloat16>::type T;
    constexpr int kTile = Smem<kD>::kTile, kS = Smem<kD>::kStages;
    constexpr int kO = kD / 2; /* O accumulators per thread */
    const int lane = t & 31, warp = t >> 5;
    const int row = warp * 16 + (lane >> 2), tq = (lane & 3) * 2;
    const uint32_t base = smem_u32(sm);
    int st = 0, ph = 0;
    const int t0 = tile_index(p, 0);
    if (t0 < 0) return;
    /* Every tile has a block (BlockIter), and every wgmma below is issued
     * on every path: a wgmma whose accumulators cross a branch makes
     * ptxas serialize them all (C7514 / C7515). */
    TileView<kD> cur;
    cur.open(p, t0, 0, base, wg, row);
    cur.wait_q(bar);
    float o[kO];
    uint32_t pa[8][4];
    float sc[64];
    float a0, a1;
    mbar_wait(bar.k_full(st), ph);
    wgmma_fence();
    issue_s<kD, kF16>(sc, cur.q_addr, base + Smem<kD>::kK + st * kTile);
    wgmma_commit();
    for (;;) {
        /* block 0: its S was issued before (with the last tile's P V, or
         * alone for the first tile); O is cleared once it is done */
        RowState rs{-INFINITY, -INFINITY, 0.f, 0.f};
        wgmma_wait<0>(sc);
#pragma unroll
        for (int k = 0; k < kO; ++k) o[k] = 0.f;
        if (lane == 0) mbar_arrive(bar.k_empty(st));
        if (cur.it.kind == BLK_MASK)
            softmax_block<true>(p, cur.it, sc, rs, cur.qp0, cur.qp1, tq, &a0, &a1);
        else
            softmax_block<false>(p, cur.it, sc, rs, cur.qp0, cur.qp1, tq, &a0, &a1);
        pack_p<T>(sc, pa);
        int pst = st, pph = ph;
        if (++st == kS) {
            st = 0;
            ph ^= 1;
        }
        while (cur.it.next(p)) {
            /* S_j and P_{j-1} V */
            mbar_wait(bar.k_full(st), ph);
            mbar_wait(bar.v_full(pst), pph);
            wgmma_fence();
            issue_s<kD, kF16>(sc, cur.q_addr, base + Smem<kD>::kK + st * kTile);
            wgmma_commit();
            issue_pv<kD, kF16>(o, pa, base + Smem<kD>::kV + pst * kTile);
            wgmma_commit();
            wgmma_wait<1>(sc);
            if (lane == 0) mbar_arrive(bar.k_empty(st));
            if (cur.it.kind == BLK_MASK)
                softmax_block<true>(p, cur.it, sc, rs, cur.qp0, cur.qp1, tq, &a0, &a1);
            else
                softmax_block<false>(p, cur.it, sc, rs, cur.qp0, cur.qp1, tq, &a0, &a1);
            wgmma_wait<0>(o);
            if (lane == 0) mbar_arrive(bar.v_empty(pst));
            /* (skipped when no row of the warp has a new max: d = 64
             * full 7-10% faster, bench/NOTES.md) */
            if (__any_sync(0xffffffffu, a0 != 1.f || a1 != 1.f))
#pragma unroll
            for (int j = 0; j < kO / 4; ++j) {
                o[4 * j] *= a0;
                o[4 * j + 1] *= a0;
                o[4 * j + 2] *= a1;
                o[4 * j + 3] *= a1;
            }
            pack_p<T>(sc, pa);
            pst = st;
            pph = ph;
            if (++st == kS) {
                st = 0;
                ph ^= 1;
            }
        }
        /* This tile's last P V, and with it the next tile's S_0, whose
         * product runs under this tile's end.  After the last tile an S
         * is issued all the same, on the idle Q buffer and the next K
         * stage, and dropped: no TMA writes either of them any more, and
         * it keeps the issue off a branch. */
        const int tn = tile_index(p, cur.i + 1);
        TileView<kD> nxt;
        uint32_t nq = base + Smem<kD>::kQ + ((cur.qbuf + 1) % Smem<kD>::kQBufs) * Smem<kD>::kQTile +
                      wg * (64 * 128);
        if (tn >= 0) {
            nxt.open(p, tn, cur.i + 1, base, wg, row);
            nxt.wait_q(bar);
            mbar_wait(bar.k_full(st), ph);
            nq = nxt.q_addr;
        }
        mbar_wait(bar.v_full(pst), pph);
        wgmma_fence();
        issue_pv<kD, kF16>(o, pa, base + Smem<kD>::kV + pst * kTile);
        wgmma_commit();
        issue_s<kD, kF16>(sc, nq, base + Smem<kD>::kK + st * kTile);
        wgmma_commit();
        wgmma_wait<1>(o);
        if (lane == 0) mbar_arrive(bar.v_empty(pst));
        finish_tile<kD, kF16>(p, bar, cur, o, rs, wg, t);
        if (tn < 0) break;
        cur = nxt;
    }
    wgmma_wait<0>(sc); /* the dropped S */
    if (kStoreOByTma<kD> && t == 0) bulk_wait_all(); /* the last O stores done before the kernel ends */
}

/* ---------------------------------------------------------------- kernel */

template <int kD, bool kF16>
__global__ void __launch_bounds__(Cfg<kD>::kThreads, 1)
    attn_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ RingParams r)
{
    extern __shared__ char smem_raw[];
    char *sm = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const Bars<kD> bar{reinterpret_cast<uint64_t *>(sm + Smem<kD>::kBar)};
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        ring_begin(r);
        for (int i = 0; i < 2; ++i) {
            mbar_init(bar.q_full(i), 1);  /* the producer's expect_tx */
            /* every consumer warp, or each warpgroup's O store once read */
            mbar_init(bar.q_empty(i), kStoreOByTma<kD> ? Cfg<kD>::kWG : 4 * Cfg<kD>::kWG);
        }
        for (int s = 0; s < Smem<kD>::kStages; ++s) {
            mbar_init(bar.k_full(s), 1);
            mbar_init(bar.k_empty(s), 4 * Cfg<kD>::kWG);
            mbar_init(bar.v_full(s), 1);
            mbar_init(bar.v_empty(s), 4 * Cfg<kD>::kWG);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<Cfg<kD>::kRegP>();
        if (t == 0) producer<kD>(p, r, sm, bar);
        else if (t == 32 && r.on && blockIdx.x == 0) ring_gate(r);
    } else {
        setmaxnreg_inc<Cfg<kD>::kRegC>();
        consumer<kD, kF16>(p, sm, bar, wg - 1, t);
    }
    __syncwarp();
    __syncthreads();
    if (r.on && threadIdx.x == 128) {
        if (blockIdx.x == 0) ring_wait_all(r);
        ring_finish(r);
    }
}

/* No work: the call still takes part in the protocol. */
__global__ void ratt_idle_kernel(const __grid_constant__ RingParams r)
{
    if (threadIdx.x == 0) {
        ring_begin(r);
        ring_gate(r);
        ring_wait_all(r);
        ring_finish(r);
    }
}

} // namespace attn
} // namespace mki
