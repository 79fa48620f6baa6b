/*
 * test_scale.cu - every collective on many ranks, each call checked
 * against a host reference, many times in a row: the scale steps of
 * tests/gpu/scale.sh (16 ranks as 2 x 8 and 4 x 4 virtual nodes, 8 ranks
 * as 2 x 4, several ranks per GPU under MPS).
 *
 *   test_scale [reps [count,count,...]]     defaults: 20, 1,7,65537,1000003
 *   test_scale soak SECONDS [SEED]          random sequences (below)
 *
 * For each op (all-gather, reduce-scatter, all-reduce, all-to-all), dtype
 * (bf16, fp16, fp32), count and placement (out of place, and in place
 * where the op has one), `reps` calls in a row, each with fresh input:
 * element j of rank r in repetition t is q / 16 with q an integer in
 * [-Q, Q], Q = 255 / nranks, drawn from a hash of (seed of t, r, j).
 * Every partial sum is then a multiple of 1/16 below 16 in magnitude:
 * exact in bf16's 8-bit significand whatever the order of the additions,
 * so the host computes each rank's expected output bit for bit from the
 * seed alone.  The output is poisoned (all bits set: NaN in every dtype)
 * before each out-of-place call; the input is rewritten before each call.
 *
 * A failure prints the rank, op, dtype, count, placement, repetition, the
 * first wrong index with the value found and the value expected, how many
 * elements are wrong, and what they hold: the poison (never written), the
 * previous repetition's value at that index (stale data: a slot or a
 * buffer read before its new contents arrived) or something else.
 * Prints "PASS ..." / "FAIL ..." lines; exits 1 on any failure.
 *
 * Soak: batches of 1 to 12 calls drawn from a seeded generator (the same
 * on every rank; the seed is printed, and passing it replays the run):
 * each call a random collective, dtype, count (0, 1, odd, round, up to
 * 1M), in place or not, into its own slots of a buffer pool that is
 * either registered (mkCommRegister: zero copy) or plain; a batch is
 * enqueued without any host synchronization between its calls, eagerly
 * or captured into a CUDA graph and launched; then every call's output is
 * checked against the host reference.  Rank 0 decides when SECONDS are
 * up (a bootstrap broadcast before each batch).  Ends with the number of
 * calls checked.
 *
 * Three calls in four are of these older kinds, as before among them:
 * the collectives, and the fused GEMMs (about one call in six):
 * mkGemmReduceScatter and mkGemmAllReduce of a random shape (m 1 to 1024,
 * decode sizes often; n and k multiples of 8; either B layout; bf16 or
 * fp16).  Their inputs are q / 16 with |q| <= 2, so every product is a
 * multiple of 1/256 and every sum, in any order, exact in fp32: the one
 * rounding at the end gives the same bits as the host's integer sum
 * rounded once.  Up to 2048 elements of each C are checked (all of a small
 * one), at positions drawn from the call's seed.
 *
 * And mkMoEDispatch + mkMoECombine pairs (about one call in twelve; across
 * nodes their sequence of moe.h): 0 to 96 tokens per rank, top-1 to
 * top-8 of P to 8 P experts with empty slots, hidden 8 to 520, every
 * dtype, capacity exactly the rows needed or up to 3 more; the layout
 * checked exactly, sampled rows and outputs by value (exact: see
 * mcall).
 *
 * The fourth call in four is one of the other ops, in equal shares among
 * those the layout has:
 *   - mkAllGatherGemm (every layout): m_local 0 to 640 per rank, equal
 *     (m_all NULL) or per rank (m_all, a rank of 0 rows often, its A then
 *     NULL or not), n and k as the fused GEMMs, either B layout, the same
 *     B on every rank or each rank its own, gatheredA NULL or a buffer;
 *     inputs as the fused GEMMs' (exact), up to 2048 elements of C and of
 *     gatheredA checked bit for bit (see acall);
 *   - mkMoEDispatchGemm (every layout): the routing of the MoE pairs, hidden
 *     8 to 512 (multiples of 64 with transW 0), n 8 to 264, either W
 *     layout, topk_weights and recv_src passed or NULL; the layout
 *     exactly, y's rows past the last still poison, up to 2048 elements
 *     of y bit for bit (exact: see dgcall);
 *   - mkRingAttention (at most 8 ranks, on any number of nodes): bf16 or
 *     fp16, BSHD or BHSD, every mask, head_dim 64 or 128, GQA 1, 2 or 4
 *     of at most 8 heads, batch 1 or 2, seq_local 1 to 257 (odd ones
 *     except under the zigzag), lse or NULL; every o (and lse) written
 *     and finite, lse untouched when NULL, and up to 16 sampled rows
 *     against a host reference in double within test_attn.cu's
 *     tolerances (see rcheck);
 *   - mkMoEDispatchFfnCombine (every layout): the routing and weights of the
 *     MoE pairs with 0 to 300 (or 0 to 16) tokens a rank, now and then a
 *     rank of none (x, topk_idx and out then NULL or not), top-1 to
 *     top-4 of 2 to 8 experts a rank (fewer where their weights would not
 *     fit a slot), hidden and inter 8 to 512 (multiples of 64 with
 *     transW 0), either W layout, bf16 or fp16, topk_weights passed or
 *     NULL on every rank, capacity exactly the rows needed or up to 3
 *     more; every token's row of out finite (a token with no expert +0),
 *     out's next 256 bytes still poison, and every element of sampled
 *     tokens (all of them at small shapes) against a host reference in
 *     double that rounds where the call does, within test_moe's layer
 *     tolerance, plus, on the rare row with an h element that the
 *     device's fp32 silu may round the other way (the gate and up sums
 *     are exact), what that moves it by (see fcheck_host).
 * Each is made once, uncaptured, at its largest shape before the first
 * batch (the layer twice: the most experts, then the largest inter), so
 * that nothing the library sizes by the call grows inside a capture.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <vector>

static uint64_t clock_gettime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#include "mkernel.h"
#include "mki.h" /* comm->boot->bcast carries the seed */

static int g_rank, g_n, g_q;
static mkComm_t g_comm;
static cudaStream_t g_st;

#include "check.h"
#include "fill.cuh"
#include "attn_ref.h"

enum { AG, RS, AR, A2A, GRS, GAR };
static const char *const op_names[] = {"allgather", "reducescatter", "allreduce", "alltoall",
                                       "gemm_rs", "gemm_ar"};
static const char *const dt_names[] = {"bf16", "fp16", "fp32"};

/* q in [-Q, Q] for (seed, rank r, element j): one multiply-xorshift hash,
 * scaled into the range without a division. */
__host__ __device__ static inline int qval(uint64_t seed, int r, uint64_t j, int Q)
{
    uint64_t x = seed ^ (j * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(r + 1) * 0xd1b54a32d192ed03ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (int)(((x >> 32) * (uint64_t)(2 * Q + 1)) >> 32) - Q;
}

/* The bits of q / 16 in dtype dt (exact for |q| < 4096). */
__host__ __device__ static inline uint32_t bits_of(int q, int dt)
{
    const float f = (float)q / 16.0f;
    if (dt == mkBfloat16) {
        __nv_bfloat16 b = __float2bfloat16_rn(f);
        return *reinterpret_cast<uint16_t *>(&b);
    }
    if (dt == mkFloat16) {
        __half h = __float2half_rn(f);
        return *reinterpret_cast<uint16_t *>(&h);
    }
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int esize(int dt) { return dt == mkFloat32 ? 4 : 2; }

/* Elements of rank r's input [0, n) from (seed, r), written at buf. */
__global__ void fill_kernel(void *buf, uint64_t n, int dt, uint64_t seed, int r, int Q)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t b = bits_of(qval(seed, r, j, Q), dt);
        if (dt == mkFloat32) static_cast<uint32_t *>(buf)[j] = b;
        else static_cast<uint16_t *>(buf)[j] = (uint16_t)b;
    }
}

static uint64_t in_elems(int op, uint64_t count) { return op == AG || op == AR ? count : count * g_n; }
static uint64_t out_elems(int op, uint64_t count) { return op == RS || op == AR ? count : count * g_n; }

/* Expected q (times 16) of element i of rank me's output. */
static int expect_q(int op, uint64_t seed, uint64_t count, uint64_t i)
{
    switch (op) {
    case AG: return qval(seed, (int)(i / count), i % count, g_q);
    case A2A: return qval(seed, (int)(i / count), (uint64_t)g_rank * count + i % count, g_q);
    default: {
        const uint64_t j = op == RS ? (uint64_t)g_rank * count + i : i;
        int s = 0;
        for (int r = 0; r < g_n; r++) s += qval(seed, r, j, g_q);
        return s;
    }
    }
}

struct config {
    int op, dt, inplace;
    uint64_t count;
};

static uint64_t seed_of(uint64_t base, const config &c, int rep)
{
    uint64_t x = base ^ ((uint64_t)c.op << 56) ^ ((uint64_t)c.dt << 52) ^
                 ((uint64_t)c.inplace << 48) ^ (c.count << 8) ^ (uint64_t)rep;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void *g_send, *g_recv; /* device, big enough for every config */
static uint32_t g_bits[3][511]; /* bits_of(q, dt) for q in [-255, 255], on the host */

static uint32_t host_bits(int q, int dt) { return g_bits[dt][q + 255]; }
static uint8_t *g_host;       /* pinned: the output of one call */

/* Fill the input(s) of one call in the buffers send and recv, poison the
 * output; returns the call's send/recv. */
static void prepare(const config &c, uint64_t seed, char *send, char *recv, const void **s,
                    void **r)
{
    const size_t es = (size_t)esize(c.dt);
    const uint64_t ine = in_elems(c.op, c.count), oute = out_elems(c.op, c.count);
    if (!c.inplace) {
        CK(cudaMemsetAsync(recv, 0xff, oute * es, g_st));
        fill_kernel<<<512, 256, 0, g_st>>>(send, ine, c.dt, seed, g_rank, g_q);
        *s = send;
        *r = recv;
    } else if (c.op == AG) {
        /* sendbuf = recvbuf + rank * count: the rest is poisoned */
        CK(cudaMemsetAsync(recv, 0xff, oute * es, g_st));
        fill_kernel<<<512, 256, 0, g_st>>>(recv + (size_t)g_rank * c.count * es, c.count, c.dt,
                                           seed, g_rank, g_q);
        *s = recv + (size_t)g_rank * c.count * es;
        *r = recv;
    } else if (c.op == RS) {
        /* recvbuf = sendbuf + rank * count */
        fill_kernel<<<512, 256, 0, g_st>>>(send, ine, c.dt, seed, g_rank, g_q);
        *s = send;
        *r = send + (size_t)g_rank * c.count * es;
    } else { /* AR: sendbuf == recvbuf */
        fill_kernel<<<512, 256, 0, g_st>>>(send, ine, c.dt, seed, g_rank, g_q);
        *s = send;
        *r = send;
    }
    CK(cudaGetLastError());
}

static mkResult_t call(const config &c, const void *s, void *r)
{
    const mkDataType_t t = (mkDataType_t)c.dt;
    switch (c.op) {
    case AG: return mkAllGather(s, r, c.count, t, g_comm, g_st);
    case RS: return mkReduceScatter(s, r, c.count, t, g_comm, g_st);
    case AR: return mkAllReduce(s, r, c.count, t, g_comm, g_st);
    default: return mkAllToAll(s, r, c.count, t, g_comm, g_st);
    }
}

static uint32_t got_at(const config &c, const uint8_t *host, uint64_t i)
{
    return c.dt == mkFloat32 ? reinterpret_cast<const uint32_t *>(host)[i]
                             : reinterpret_cast<const uint16_t *>(host)[i];
}

/* Check the output copied to host against the host reference; 1 when
 * wrong (and one line saying how). */
static int check(const config &c, const uint8_t *host, uint64_t seed, uint64_t prev_seed, int rep)
{
    const uint64_t n = out_elems(c.op, c.count);
    const uint32_t poison = c.dt == mkFloat32 ? 0xffffffffu : 0xffffu;
    uint64_t bad = 0, first = 0, stale = 0, poisoned = 0;
    uint32_t got0 = 0, want0 = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t got = got_at(c, host, i), want = host_bits(expect_q(c.op, seed, c.count, i), c.dt);
        if (got == want) continue;
        if (bad++ == 0) {
            first = i;
            got0 = got;
            want0 = want;
        }
        if (got == poison) poisoned++;
        else if (rep > 0 && got == host_bits(expect_q(c.op, prev_seed, c.count, i), c.dt)) stale++;
    }
    if (!bad) return 0;
    printf("FAIL rank %d: %s %s count %llu %s rep %d: %llu of %llu elements wrong, first at "
           "%llu: got 0x%x, expected 0x%x; %llu poison (never written), %llu the previous "
           "repetition's value (stale), %llu other\n",
           g_rank, op_names[c.op], dt_names[c.dt], (unsigned long long)c.count,
           c.inplace ? "in place" : "out of place", rep, (unsigned long long)bad,
           (unsigned long long)n, (unsigned long long)first, got0, want0,
           (unsigned long long)poisoned, (unsigned long long)stale,
           (unsigned long long)(bad - poisoned - stale));
    fflush(stdout);
    return 1;
}

/* reps calls of one config in a row, each checked; the number wrong. */
static int run_config(const config &c, uint64_t base, int reps)
{
    int wrong = 0;
    uint64_t prev = 0;
    const size_t bytes = out_elems(c.op, c.count) * (size_t)esize(c.dt);
    for (int t = 0; t < reps; t++) {
        const uint64_t seed = seed_of(base, c, t);
        const void *s;
        void *r;
        prepare(c, seed, static_cast<char *>(g_send), static_cast<char *>(g_recv), &s, &r);
        MK(call(c, s, r));
        CK(cudaMemcpyAsync(g_host, r, bytes, cudaMemcpyDeviceToHost, g_st));
        CK(cudaStreamSynchronize(g_st));
        wrong += check(c, g_host, seed, prev, t);
        prev = seed;
    }
    return wrong;
}

/* ---- the fused GEMMs in the soak ----------------------------------------- */

/* The soak's generator (splitmix64). */
static uint64_t soak_rng_fwd(uint64_t *st)
{
    uint64_t x = (*st += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* One fused call: D (m x n) = sum over ranks of A_r (m x k) op(B_r). */
struct gcall {
    int op, dt, transb;
    int64_t m, n, k;
    uint64_t seed;
};

/* Rank r's A (what 0) or B (what 1) element j: q in [-2, 2]. */
__host__ __device__ static inline int gq(uint64_t seed, int r, int what, uint64_t j)
{
    return qval(seed ^ (what ? 0x5bd1e995ull : 0), r, j, 2);
}

__global__ void gfill(void *buf, uint64_t n, int dt, uint64_t seed, int r, int what)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        static_cast<uint16_t *>(buf)[j] = (uint16_t)bits_of(gq(seed, r, what, j), dt);
}

static int64_t soak_pick(uint64_t *st, const int64_t *v, int nv);

static gcall soak_gemm(uint64_t *st, int op)
{
    static const int64_t ms[] = {1, 7, 16, 24, 64, 100, 128, 257, 640, 1024};
    static const int64_t ns[] = {8, 256, 264, 520, 1024, 1032};
    static const int64_t ks[] = {8, 64, 256, 520, 1024};
    gcall g;
    g.op = op;
    g.dt = (int)(soak_rng_fwd(st) & 1); /* bf16 or fp16 */
    g.transb = (int)(soak_rng_fwd(st) & 1);
    g.m = soak_pick(st, ms, 10);
    g.n = soak_pick(st, ns, 6);
    g.k = soak_pick(st, ks, 5);
    g.seed = soak_rng_fwd(st);
    return g;
}

/* Rows [off, off + rows) of D are this rank's C (gemm_rs: the even split
 * of the library with m_all NULL; gemm_ar: all of D). */
static void grows(const gcall &g, int64_t *off, int64_t *rows)
{
    if (g.op == GAR) {
        *off = 0;
        *rows = g.m;
        return;
    }
    *off = 0;
    for (int r = 0; r < g_rank; r++) *off += g.m / g_n + (r < g.m % g_n ? 1 : 0);
    *rows = g.m / g_n + (g_rank < g.m % g_n ? 1 : 0);
}

/* A and B of this rank into send, C (poisoned) into recv; the call. */
static mkResult_t gcall_run(const gcall &g, char *send, char *recv, void **c)
{
    const uint64_t an = (uint64_t)g.m * g.k, bn = (uint64_t)g.n * g.k;
    char *a = send, *b = send + ((an * 2 + 255) / 256) * 256;
    int64_t off, rows;
    grows(g, &off, &rows);
    gfill<<<256, 256, 0, g_st>>>(a, an, g.dt, g.seed, g_rank, 0);
    gfill<<<256, 256, 0, g_st>>>(b, bn, g.dt, g.seed, g_rank, 1);
    CK(cudaMemsetAsync(recv, 0xff, (size_t)rows * g.n * 2 + 2, g_st));
    CK(cudaGetLastError());
    *c = recv;
    const mkDataType_t t = g.dt ? mkFloat16 : mkBfloat16;
    return g.op == GAR ? mkGemmAllReduce(a, b, recv, g.m, g.n, g.k, g.transb, t, g_comm, g_st)
                       : mkGemmReduceScatter(a, b, recv, NULL, g.m, g.n, g.k, g.transb, t,
                                             g_comm, g_st);
}

/* Up to 2048 elements of C (all of a small one) against the host's exact
 * sums rounded once; 1 when wrong (and a line saying how). */
static int gcheck(const gcall &g, const uint16_t *host)
{
    int64_t off, rows;
    grows(g, &off, &rows);
    const uint64_t total = (uint64_t)rows * g.n;
    if (total == 0) return 0;
    const uint64_t nchk = total < 2048 ? total : 2048;
    uint64_t bad = 0, poisoned = 0, first = 0;
    uint32_t got0 = 0, want0 = 0;
    uint64_t h = g.seed;
    for (uint64_t x = 0; x < nchk; x++) {
        const uint64_t e = nchk == total ? x : soak_rng_fwd(&h) % total;
        const int64_t i = off + (int64_t)(e / g.n), j = (int64_t)(e % g.n);
        long s = 0; /* in units of 1/256 */
        for (int r = 0; r < g_n; r++)
            for (int64_t kk = 0; kk < g.k; kk++)
                s += (long)gq(g.seed, r, 0, (uint64_t)(i * g.k + kk)) *
                     gq(g.seed, r, 1, g.transb ? (uint64_t)(j * g.k + kk)
                                               : (uint64_t)(kk * g.n + j));
        const float f = (float)s / 256.0f;
        uint16_t want;
        if (g.dt) {
            __half v = __float2half_rn(f);
            memcpy(&want, &v, 2);
        } else {
            __nv_bfloat16 v = __float2bfloat16_rn(f);
            memcpy(&want, &v, 2);
        }
        const uint16_t got = host[e];
        if (got == want) continue;
        if (bad++ == 0) first = e, got0 = got, want0 = want;
        poisoned += got == 0xffff;
    }
    if (!bad) return 0;
    printf("FAIL rank %d: %s %s %lldx%lldx%lld transB %d: %llu of %llu checked elements wrong, "
           "first at row %lld col %lld: got 0x%x, expected 0x%x; %llu poison (never written)\n",
           g_rank, op_names[g.op], dt_names[g.dt], (long long)g.m, (long long)g.n,
           (long long)g.k, g.transb, (unsigned long long)bad, (unsigned long long)nchk,
           (long long)(off + (int64_t)(first / g.n)), (long long)(first % g.n), got0, want0,
           (unsigned long long)poisoned);
    fflush(stdout);
    return 1;
}

/* ---- the MoE calls in the soak ------------------------------------------ */

/* One mkMoEDispatch + mkMoECombine pair: every rank's
 * tokens, routing, weights and x come from (seed, rank), so every rank
 * knows the whole layout.  x is q / 16 with |q| <= 2 and the weights
 * 2^-2 .. 2; the combine gets recv itself as y, so out[t] = x[t] times the
 * sum of t's weights: exact in fp32 and in every dtype (+0 for a token
 * with no expert). */
struct mcall {
    int dt;
    int64_t hidden, topk, experts, cap;
    uint64_t seed;
    /* rank r's tokens: 0 to 96 when tmax is 0 (the pairs, mkMoEDispatchGemm),
     * 0 to tmax (even; the MoE layer), exactly -tmax when negative (the
     * warm-up); none on rank idle - 1 (0: no such rank) */
    int64_t tmax = 0;
    int idle = 0;
};

static int64_t mtokens(const mcall &m, int r)
{
    if (m.tmax < 0) return -m.tmax;
    if (m.idle && r == m.idle - 1) return 0;
    const int half = m.tmax ? (int)(m.tmax / 2) : 48;
    return (int64_t)(qval(m.seed, r, 1u << 30, half) + half);
}
/* Expert of rank r's slot i (-1: none, about one in eight). */
static int32_t mexpert(const mcall &m, int r, uint64_t i)
{
    const int v = qval(m.seed ^ 0x77ull, r, i, 64) + 64; /* 0 .. 128 */
    return v < 16 ? -1 : (int32_t)((uint64_t)v * 2654435761u % (uint64_t)m.experts);
}
static float mweight(const mcall &m, int r, uint64_t i)
{
    return ldexpf(1.0f, qval(m.seed ^ 0x99ull, r, i, 2) > 0 ? 1 : qval(m.seed ^ 0x99ull, r, i, 2));
}

__global__ void mroute(int32_t *idx, float *w, int64_t n, int64_t experts, uint64_t seed, int r)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int v = qval(seed ^ 0x77ull, r, (uint64_t)i, 64) + 64;
        idx[i] = v < 16 ? -1 : (int32_t)((uint64_t)v * 2654435761u % (uint64_t)experts);
        const int e = qval(seed ^ 0x99ull, r, (uint64_t)i, 2);
        w[i] = ldexpf(1.0f, e > 0 ? 1 : e);
    }
}

/* Rows every rank receives, and (for this rank) the source rank and slot
 * of each of its rows and the row of each of its own slots. */
struct mlayout {
    std::vector<int64_t> rows, off;
    std::vector<int32_t> src, send_rows;
};

static mlayout mlayout_of(const mcall &m)
{
    mlayout L;
    const int64_t el = m.experts / g_n;
    std::vector<int64_t> cnt((size_t)m.experts, 0), cur((size_t)m.experts, 0);
    for (int r = 0; r < g_n; r++)
        for (int64_t i = 0; i < mtokens(m, r) * m.topk; i++) {
            const int32_t e = mexpert(m, r, (uint64_t)i);
            if (e >= 0) cnt[(size_t)e]++;
        }
    L.rows.assign((size_t)g_n, 0);
    for (int d = 0; d < g_n; d++)
        for (int64_t e = 0; e < el; e++) {
            cur[(size_t)(d * el + e)] = L.rows[(size_t)d];
            L.rows[(size_t)d] += cnt[(size_t)(d * el + e)];
        }
    for (int64_t e = 0; e <= el; e++)
        L.off.push_back(e < el ? cur[(size_t)(g_rank * el + e)] : L.rows[(size_t)g_rank]);
    L.src.assign((size_t)(2 * L.rows[(size_t)g_rank]), -1);
    L.send_rows.assign((size_t)(mtokens(m, g_rank) * m.topk), -1);
    for (int r = 0; r < g_n; r++)
        for (int64_t i = 0; i < mtokens(m, r) * m.topk; i++) {
            const int32_t e = mexpert(m, r, (uint64_t)i);
            if (e < 0) continue;
            const int64_t row = cur[(size_t)e]++;
            if (r == g_rank) L.send_rows[(size_t)i] = (int32_t)row;
            if (e / el == g_rank) L.src[(size_t)(2 * row)] = r, L.src[(size_t)(2 * row + 1)] = (int32_t)i;
        }
    return L;
}

/* A receive capacity for m: the most rows any rank receives, plus 0 to 3
 * (now and then exactly enough). */
static int64_t soak_capacity(const mcall &m, uint64_t *st)
{
    int64_t most = 0;
    for (int64_t r : mlayout_of(m).rows) most = r > most ? r : most;
    return most + (int64_t)(soak_rng_fwd(st) % 4);
}

static mcall soak_moe(uint64_t *st)
{
    static const int64_t hs[] = {8, 64, 520};
    static const int64_t ks[] = {1, 2, 4, 8};
    static const int64_t es[] = {1, 2, 8};
    mcall m;
    m.dt = (int)(soak_rng_fwd(st) % 3);
    m.hidden = soak_pick(st, hs, 3);
    m.topk = soak_pick(st, ks, 4);
    m.experts = g_n * soak_pick(st, es, 3);
    m.seed = soak_rng_fwd(st);
    m.cap = soak_capacity(m, st);
    return m;
}

/* Where a pair's buffers sit: inputs in send, outputs in recv (each
 * 256-byte aligned); poisoned outputs; the two calls. */
struct mbufs {
    char *x, *recv, *out;
    int32_t *idx, *src, *rows;
    float *w, *rw;
    int64_t *off;
};

static mbufs mplace(const mcall &m, char *send, char *recv)
{
    const size_t es = (size_t)esize(m.dt), T = (size_t)mtokens(m, g_rank), K = (size_t)m.topk;
    const size_t cap = (size_t)m.cap, rb = (size_t)m.hidden * es, el = (size_t)(m.experts / g_n);
    auto up = [](size_t b) { return (b + 255) / 256 * 256; };
    mbufs b;
    b.x = send;
    b.idx = (int32_t *)(send + up(T * rb));
    b.w = (float *)((char *)b.idx + up(T * K * 4));
    b.recv = recv;
    b.rw = (float *)(recv + up(cap * rb));
    b.src = (int32_t *)((char *)b.rw + up(cap * 4));
    b.off = (int64_t *)((char *)b.src + up(cap * 8));
    b.rows = (int32_t *)((char *)b.off + up((el + 1) * 8));
    b.out = (char *)b.rows + up(T * K * 4);
    return b;
}

static mkResult_t mcall_run(const mcall &m, char *send, char *recv)
{
    const mbufs b = mplace(m, send, recv);
    const int64_t T = mtokens(m, g_rank);
    const size_t es = (size_t)esize(m.dt);
    if (T > 0) {
        fill_kernel<<<64, 256, 0, g_st>>>(b.x, (uint64_t)(T * m.hidden), m.dt, m.seed, g_rank, 2);
        mroute<<<16, 256, 0, g_st>>>(b.idx, b.w, T * m.topk, m.experts, m.seed, g_rank);
    }
    CK(cudaMemsetAsync(recv, 0xff, (size_t)(b.out - recv) + (size_t)T * m.hidden * es, g_st));
    CK(cudaGetLastError());
    const mkDataType_t t = (mkDataType_t)m.dt;
    mkResult_t r = mkMoEDispatch(b.x, b.idx, b.w, b.recv, b.rw, b.src, b.off, b.rows, T, m.hidden,
                                 m.topk, m.experts, m.cap, t, g_comm, g_st);
    if (r != mkSuccess) return r;
    /* y = recv: out[t] = x[t] * (sum of t's weights) */
    return mkMoECombine(b.recv, b.off, b.idx, b.w, b.rows, b.out, T, m.hidden, m.topk, m.experts,
                        m.cap, t, g_comm, g_st);
}

/* The layout exactly; recv_weights, up to 256 received rows and up to
 * 2048 elements of out by value; 1 when wrong (and a line saying how). */
static int mcheck(const mcall &m, char *send, char *recv, uint8_t *host)
{
    const mbufs b = mplace(m, send, recv);
    const mlayout L = mlayout_of(m);
    const int64_t T = mtokens(m, g_rank), rows = L.rows[(size_t)g_rank], el = m.experts / g_n;
    const size_t es = (size_t)esize(m.dt), rb = (size_t)m.hidden * es;
    const char *what = nullptr;
    long at = -1;
    std::vector<int64_t> off((size_t)el + 1);
    std::vector<int32_t> src((size_t)(2 * rows)), sr((size_t)(T * m.topk));
    std::vector<float> rw((size_t)rows);
    CK(cudaMemcpy(off.data(), b.off, off.size() * 8, cudaMemcpyDeviceToHost));
    if (rows) CK(cudaMemcpy(src.data(), b.src, src.size() * 4, cudaMemcpyDeviceToHost));
    if (rows) CK(cudaMemcpy(rw.data(), b.rw, rw.size() * 4, cudaMemcpyDeviceToHost));
    if (T) CK(cudaMemcpy(sr.data(), b.rows, sr.size() * 4, cudaMemcpyDeviceToHost));
    if (off != L.off) what = "expert_offsets";
    for (size_t i = 0; !what && i < src.size(); i++)
        if (src[i] != L.src[i]) what = "recv_src", at = (long)i / 2;
    for (size_t i = 0; !what && i < sr.size(); i++)
        if (sr[i] != L.send_rows[i]) what = "send_rows", at = (long)i;
    for (int64_t i = 0; !what && i < rows; i++)
        if (rw[(size_t)i] != mweight(m, L.src[(size_t)(2 * i)], (uint64_t)L.src[(size_t)(2 * i + 1)]))
            what = "recv_weights", at = (long)i;
    uint64_t h = m.seed;
    for (int n = 0; !what && rows && n < 256; n++) {
        const int64_t i = rows <= 256 ? n : (int64_t)(soak_rng_fwd(&h) % (uint64_t)rows);
        if (i >= rows) break;
        CK(cudaMemcpy(host, b.recv + (size_t)i * rb, rb, cudaMemcpyDeviceToHost));
        const int s = L.src[(size_t)(2 * i)];
        const int64_t t = L.src[(size_t)(2 * i + 1)] / m.topk;
        for (int64_t j = 0; j < m.hidden && !what; j++) {
            const uint32_t want = bits_of(qval(m.seed, s, (uint64_t)(t * m.hidden + j), 2), m.dt);
            uint32_t got = 0;
            memcpy(&got, host + (size_t)j * es, es);
            if (got != want) what = "recv", at = (long)i;
        }
    }
    if (!what && T) {
        CK(cudaMemcpy(host, b.out, (size_t)T * rb, cudaMemcpyDeviceToHost));
        const uint64_t total = (uint64_t)(T * m.hidden), nchk = total < 2048 ? total : 2048;
        for (uint64_t x = 0; x < nchk && !what; x++) {
            const uint64_t e = nchk == total ? x : soak_rng_fwd(&h) % total;
            const int64_t t = (int64_t)(e / (uint64_t)m.hidden);
            float ws = 0;
            for (int64_t j = 0; j < m.topk; j++)
                if (mexpert(m, g_rank, (uint64_t)(t * m.topk + j)) >= 0)
                    ws += mweight(m, g_rank, (uint64_t)(t * m.topk + j));
            /* a token with no expert: +0 (not x * 0, which is -0 for x < 0) */
            const float v = ws == 0.0f ? 0.0f : (float)qval(m.seed, g_rank, e, 2) / 16.0f * ws;
            uint32_t want = 0, got = 0;
            if (m.dt == mkFloat32) {
                memcpy(&want, &v, 4);
            } else if (m.dt == mkFloat16) { /* v has at most 8 significant bits: exact */
                const __half hv = __float2half_rn(v);
                memcpy(&want, &hv, 2);
            } else {
                const __nv_bfloat16 bv = __float2bfloat16_rn(v);
                memcpy(&want, &bv, 2);
            }
            memcpy(&got, host + e * es, es);
            if (got != want) what = "out", at = (long)t;
        }
    }
    if (!what) return 0;
    printf("FAIL rank %d: moe %s hidden %lld top-%lld of %lld experts, %lld tokens, capacity "
           "%lld: %s wrong at %ld\n", g_rank, dt_names[m.dt], (long long)m.hidden,
           (long long)m.topk, (long long)m.experts, (long long)T, (long long)m.cap, what, at);
    fflush(stdout);
    return 1;
}

/* ---- shared by the soak's newer kinds ---------------------------------- */

/* A slot of the soak's pools per rank: SOAK_MAXC (below) fp32 elements. */
static const size_t kSlotPerRank = (size_t)4 << 20;
static size_t g_soak_slot; /* the bytes of one slot: kSlotPerRank * ranks */

static size_t soak_up(size_t b) { return (b + 255) / 256 * 256; }

/* Inputs and outputs of one call must fit its slot of the send and the
 * recv pool (the shapes below are chosen so; this says so if not). */
static void soak_fit(const char *what, size_t send, size_t recv)
{
    if (send <= g_soak_slot && recv <= g_soak_slot) return;
    printf("FAIL rank %d: soak: %s needs %zu bytes of send and %zu of recv, a slot holds %zu\n",
           g_rank, what, send, recv, g_soak_slot);
    fflush(stdout);
    exit(2);
}

/* f rounded once to bf16 (dt 0) or fp16 (dt 1), and back. */
static uint16_t round16(float f, int dt)
{
    uint16_t u;
    if (dt) {
        const __half v = __float2half_rn(f);
        memcpy(&u, &v, 2);
    } else {
        const __nv_bfloat16 v = __float2bfloat16_rn(f);
        memcpy(&u, &v, 2);
    }
    return u;
}

static bool finite16(uint16_t u, int dt)
{
    return dt ? (u & 0x7c00u) != 0x7c00u : (u & 0x7f80u) != 0x7f80u;
}

/* ---- mkAllGatherGemm in the soak ------------------------------------------ */

/* One mkAllGatherGemm: C = [A_0; A_1; ...] op(B) on every rank.  Rank r
 * holds m[r] rows of A (m_all, or m_all NULL when every rank holds the
 * same), row i element kk being gq(seed, r, 0, i k + kk) as the fused
 * GEMMs' A; B is gq(seed, b, 1, .) with b = 0 on every rank (the same B)
 * or b = this rank (each rank its own B, as the man page allows: C then
 * differs between ranks, and a rank that used a peer's B is caught).
 * Exact as gcall: q / 16 with |q| <= 2, every sum exact in fp32, one
 * rounding.  gatheredA (when passed) must be the gathered A bit for bit. */
struct acall {
    int dt, transb, same_b, with_ga, equal, null_a;
    int64_t n, k;
    std::vector<int64_t> m; /* every rank's rows, in rank order */
    uint64_t seed;
};

enum { AGG_MAXM = 640, AGG_MAXN = 1032, AGG_MAXK = 1024 };
/* this rank's A and B; C and gatheredA (M <= ranks x AGG_MAXM rows) */
static_assert(256 + (size_t)AGG_MAXM * AGG_MAXK * 2 + (size_t)AGG_MAXN * AGG_MAXK * 2 <=
                  kSlotPerRank, "mkAllGatherGemm's A and B fit a slot of one rank");
static_assert(256 + (size_t)AGG_MAXM * (AGG_MAXN + AGG_MAXK) * 2 <= kSlotPerRank,
              "mkAllGatherGemm's C and gatheredA fit a slot (per rank of rows)");

static int64_t arows(const acall &a)
{
    int64_t s = 0;
    for (int64_t x : a.m) s += x;
    return s;
}

static acall soak_agg(uint64_t *st)
{
    static const int64_t ms[] = {0, 1, 7, 16, 24, 64, 100, 128, 257, AGG_MAXM};
    static const int64_t ns[] = {8, 256, 264, 520, 1024, AGG_MAXN};
    static const int64_t ks[] = {8, 64, 256, 520, AGG_MAXK};
    acall a;
    a.dt = (int)(soak_rng_fwd(st) & 1); /* bf16 or fp16 */
    a.transb = (int)(soak_rng_fwd(st) & 1);
    a.same_b = (int)(soak_rng_fwd(st) & 1);
    a.with_ga = (int)(soak_rng_fwd(st) & 1);
    a.equal = (int)(soak_rng_fwd(st) & 1);
    a.null_a = (int)(soak_rng_fwd(st) & 1); /* A = NULL on a rank of no rows */
    a.n = soak_pick(st, ns, 6);
    a.k = soak_pick(st, ks, 5);
    if (a.equal) {
        a.m.assign((size_t)g_n, soak_pick(st, ms, 10));
    } else {
        a.m.assign((size_t)g_n, 0);
        for (int r = 0; r < g_n; r++) a.m[(size_t)r] = soak_pick(st, ms, 10);
        if (soak_rng_fwd(st) & 1) a.m[(size_t)(soak_rng_fwd(st) % (uint64_t)g_n)] = 0;
    }
    a.seed = soak_rng_fwd(st);
    return a;
}

/* A and B in send; C and gatheredA in recv (each 256-byte aligned). */
struct abufs {
    char *a, *b, *c, *ga;
};

static abufs aplace(const acall &a, char *send, char *recv)
{
    const size_t ml = (size_t)a.m[(size_t)g_rank], M = (size_t)arows(a);
    const size_t n = (size_t)a.n, k = (size_t)a.k;
    abufs p;
    p.a = send;
    p.b = send + soak_up(ml * k * 2);
    p.c = recv;
    p.ga = recv + soak_up(M * n * 2);
    soak_fit("ag_gemm", (size_t)(p.b - send) + n * k * 2, (size_t)(p.ga - recv) + M * k * 2);
    return p;
}

/* Inputs, poisoned outputs, the call. */
static mkResult_t acall_run(const acall &a, char *send, char *recv)
{
    const abufs p = aplace(a, send, recv);
    const int64_t ml = a.m[(size_t)g_rank], M = arows(a);
    if (ml > 0) gfill<<<256, 256, 0, g_st>>>(p.a, (uint64_t)(ml * a.k), a.dt, a.seed, g_rank, 0);
    gfill<<<256, 256, 0, g_st>>>(p.b, (uint64_t)(a.n * a.k), a.dt, a.seed, a.same_b ? 0 : g_rank,
                                 1);
    if (M > 0) {
        CK(cudaMemsetAsync(p.c, 0xff, (size_t)(M * a.n) * 2, g_st));
        if (a.with_ga) CK(cudaMemsetAsync(p.ga, 0xff, (size_t)(M * a.k) * 2, g_st));
    }
    CK(cudaGetLastError());
    return mkAllGatherGemm(ml == 0 && a.null_a ? NULL : p.a, p.b, p.c, a.with_ga ? p.ga : NULL,
                           ml, a.equal ? NULL : a.m.data(), a.n, a.k, a.transb,
                           a.dt ? mkFloat16 : mkBfloat16, g_comm, g_st);
}

/* m_all as text: "NULL (m_local each)" or the counts (the first 16). */
static void aname(const acall &a, char *buf, size_t len)
{
    if (a.equal) {
        snprintf(buf, len, "NULL, %lld each", (long long)a.m[0]);
        return;
    }
    size_t at = 0;
    for (int r = 0; r < g_n && r < 16 && at + 1 < len; r++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", r ? "," : "{",
                               (long long)a.m[(size_t)r]);
    if (at + 1 < len) snprintf(buf + at, len - at, "%s", g_n > 16 ? ",...}" : "}");
}

/* Up to 2048 elements of C (all of a small one) against the host's exact
 * sums rounded once, then up to 2048 of gatheredA (when passed) against
 * the inputs' bits; 1 when wrong (and a line saying how). */
static int acheck(const acall &a, char *send, char *recv, uint8_t *host, int captured)
{
    const abufs p = aplace(a, send, recv);
    const int64_t M = arows(a);
    std::vector<int64_t> off((size_t)g_n + 1, 0);
    for (int r = 0; r < g_n; r++) off[(size_t)r + 1] = off[(size_t)r] + a.m[(size_t)r];
    /* the rank and local row of gathered row gi */
    auto owner = [&](int64_t gi, int64_t *i) {
        int r = 0;
        while (off[(size_t)r + 1] <= gi) r++;
        *i = gi - off[(size_t)r];
        return r;
    };
    const int brank = a.same_b ? 0 : g_rank;
    const char *what = nullptr;
    uint64_t bad = 0, poisoned = 0, nchk = 0, h = a.seed ^ 0x3c6ef372fe94f82bull;
    int64_t at_i = 0, at_j = 0;
    uint32_t got0 = 0, want0 = 0;
    const uint16_t *hc = reinterpret_cast<const uint16_t *>(host);
    const uint64_t total = (uint64_t)(M * a.n);
    if (total) {
        CK(cudaMemcpy(host, p.c, total * 2, cudaMemcpyDeviceToHost));
        nchk = total < 2048 ? total : 2048;
        for (uint64_t x = 0; x < nchk; x++) {
            const uint64_t e = nchk == total ? x : soak_rng_fwd(&h) % total;
            const int64_t gi = (int64_t)(e / (uint64_t)a.n), j = (int64_t)(e % (uint64_t)a.n);
            int64_t i;
            const int r = owner(gi, &i);
            long s = 0; /* in units of 1/256 */
            for (int64_t kk = 0; kk < a.k; kk++)
                s += (long)gq(a.seed, r, 0, (uint64_t)(i * a.k + kk)) *
                     gq(a.seed, brank, 1, a.transb ? (uint64_t)(j * a.k + kk)
                                                   : (uint64_t)(kk * a.n + j));
            const uint16_t want = round16((float)s / 256.0f, a.dt), got = hc[e];
            if (got == want) continue;
            if (bad++ == 0) what = "C", at_i = gi, at_j = j, got0 = got, want0 = want;
            poisoned += got == 0xffff;
        }
    }
    const uint64_t gtotal = (uint64_t)(M * a.k);
    if (!bad && a.with_ga && gtotal) {
        CK(cudaMemcpy(host, p.ga, gtotal * 2, cudaMemcpyDeviceToHost));
        nchk = gtotal < 2048 ? gtotal : 2048;
        for (uint64_t x = 0; x < nchk; x++) {
            const uint64_t e = nchk == gtotal ? x : soak_rng_fwd(&h) % gtotal;
            const int64_t gi = (int64_t)(e / (uint64_t)a.k), kk = (int64_t)(e % (uint64_t)a.k);
            int64_t i;
            const int r = owner(gi, &i);
            const uint16_t want = (uint16_t)bits_of(gq(a.seed, r, 0, (uint64_t)(i * a.k + kk)),
                                                    a.dt),
                           got = hc[e];
            if (got == want) continue;
            if (bad++ == 0) what = "gatheredA", at_i = gi, at_j = kk, got0 = got, want0 = want;
            poisoned += got == 0xffff;
        }
    }
    if (!bad) return 0;
    char ms[160];
    aname(a, ms, sizeof ms);
    printf("FAIL rank %d: ag_gemm %s M %lld (m_all %s) x n %lld x k %lld transB %d, %s B, "
           "gatheredA %s, A %s%s: %llu of %llu checked elements of %s wrong, first at row %lld "
           "col %lld: got 0x%x, expected 0x%x; %llu poison (never written)\n",
           g_rank, dt_names[a.dt], (long long)M, ms, (long long)a.n, (long long)a.k, a.transb,
           a.same_b ? "the same" : "per-rank", a.with_ga ? "passed" : "NULL",
           a.m[(size_t)g_rank] == 0 && a.null_a ? "NULL" : "passed",
           captured ? ", captured in a CUDA graph" : ", eager", (unsigned long long)bad,
           (unsigned long long)nchk, what, (long long)at_i, (long long)at_j, got0, want0,
           (unsigned long long)poisoned);
    fflush(stdout);
    return 1;
}

/* ---- mkMoEDispatchGemm in the soak --------------------------------------- */

/* One mkMoEDispatchGemm: the routing, tokens, weights and
 * x of the dispatch + combine pairs (mcall: x q / 16 with |q| <= 2), and
 * rank d's W (El experts' n x hidden, transW 1, or hidden x n, transW 0)
 * gq(seed, d, 1, .), q / 16 with |q| <= 2: every y element an exact fp32
 * sum of products that are multiples of 1/256, rounded once.  y's rows
 * are in the layout of the dispatch's recv (mlayout_of: by local expert,
 * then source rank, then slot), so row i is x[t] of rank src[2i] times
 * op(W_e), t = src[2i + 1] / topk, e its local expert. */
struct dgcall {
    mcall m; /* dt: bf16 or fp16 only */
    int64_t n;
    int transw, with_w, with_src;
};

enum { DG_MAXH = 512, DG_MAXN = 264, DG_MAXT = 96, DG_MAXK = 8, DG_MAXEL = 8 };
/* x, idx, w and W; y (at most ranks x DG_MAXT x DG_MAXK + 3 rows) and the
 * layout arrays */
static_assert(4 * 256 + (size_t)DG_MAXT * DG_MAXH * 2 + 2 * (size_t)DG_MAXT * DG_MAXK * 4 +
                      (size_t)DG_MAXEL * DG_MAXN * DG_MAXH * 2 <=
                  kSlotPerRank, "mkMoEDispatchGemm's inputs fit a slot of one rank");
static_assert(5 * 256 + ((size_t)DG_MAXT * DG_MAXK + 3) * (DG_MAXN * 2 + 4 + 8) +
                      (DG_MAXEL + 1) * 8 + (size_t)DG_MAXT * DG_MAXK * 4 <=
                  kSlotPerRank, "mkMoEDispatchGemm's outputs fit a slot (per rank)");

static dgcall soak_dg(uint64_t *st)
{
    static const int64_t hs1[] = {8, 64, 136, DG_MAXH}; /* transW 1: multiples of 8 */
    static const int64_t hs0[] = {64, 128, DG_MAXH};    /* transW 0: multiples of 64 */
    static const int64_t ns[] = {8, 72, DG_MAXN};
    static const int64_t ks[] = {1, 2, 4, DG_MAXK};
    static const int64_t es[] = {1, 2, DG_MAXEL};
    dgcall d;
    d.m.dt = (int)(soak_rng_fwd(st) & 1);
    d.transw = (int)(soak_rng_fwd(st) & 1);
    d.m.hidden = d.transw ? soak_pick(st, hs1, 4) : soak_pick(st, hs0, 3);
    d.n = soak_pick(st, ns, 3);
    d.m.topk = soak_pick(st, ks, 4);
    d.m.experts = g_n * soak_pick(st, es, 3);
    d.with_w = (soak_rng_fwd(st) % 4) != 0;   /* topk_weights and recv_weights, or NULL */
    d.with_src = (soak_rng_fwd(st) % 4) != 0; /* recv_src, or NULL */
    d.m.seed = soak_rng_fwd(st);
    d.m.cap = soak_capacity(d.m, st);
    return d;
}

/* Inputs in send, outputs in recv (each 256-byte aligned). */
struct dgbufs {
    char *x, *W, *y;
    int32_t *idx, *src, *rows;
    float *w, *rw;
    int64_t *off;
};

static dgbufs dgplace(const dgcall &d, char *send, char *recv)
{
    const mcall &m = d.m;
    const size_t T = (size_t)mtokens(m, g_rank), K = (size_t)m.topk, cap = (size_t)m.cap;
    const size_t rb = (size_t)m.hidden * 2, el = (size_t)(m.experts / g_n), n = (size_t)d.n;
    dgbufs b;
    b.x = send;
    b.idx = (int32_t *)(send + soak_up(T * rb));
    b.w = (float *)((char *)b.idx + soak_up(T * K * 4));
    b.W = (char *)b.w + soak_up(T * K * 4);
    b.y = recv;
    b.rw = (float *)(recv + soak_up(cap * n * 2));
    b.src = (int32_t *)((char *)b.rw + soak_up(cap * 4));
    b.off = (int64_t *)((char *)b.src + soak_up(cap * 8));
    b.rows = (int32_t *)((char *)b.off + soak_up((el + 1) * 8));
    soak_fit("moe_dispatch_gemm", (size_t)(b.W - send) + el * n * rb,
             (size_t)((char *)b.rows - recv) + T * K * 4);
    return b;
}

static mkResult_t dgcall_run(const dgcall &d, char *send, char *recv)
{
    const dgbufs b = dgplace(d, send, recv);
    const mcall &m = d.m;
    const int64_t T = mtokens(m, g_rank), el = m.experts / g_n;
    if (T > 0) {
        fill_kernel<<<64, 256, 0, g_st>>>(b.x, (uint64_t)(T * m.hidden), m.dt, m.seed, g_rank, 2);
        mroute<<<16, 256, 0, g_st>>>(b.idx, b.w, T * m.topk, m.experts, m.seed, g_rank);
    }
    gfill<<<256, 256, 0, g_st>>>(b.W, (uint64_t)(el * d.n * m.hidden), m.dt, m.seed, g_rank, 1);
    /* y and recv_weights NaN; recv_src, expert_offsets, send_rows 0xa5
     * bytes (not -1, an empty slot's send_rows) */
    CK(cudaMemsetAsync(b.y, 0xff, (size_t)((char *)b.src - b.y), g_st));
    CK(cudaMemsetAsync(b.src, 0xa5, (size_t)((char *)b.rows - (char *)b.src) +
                                        (size_t)(T * m.topk) * 4, g_st));
    CK(cudaGetLastError());
    return mkMoEDispatchGemm(b.x, b.idx, d.with_w ? b.w : NULL, b.W, b.y, d.with_w ? b.rw : NULL,
                             d.with_src ? b.src : NULL, b.off, b.rows, T, m.hidden, d.n, m.topk,
                             m.experts, m.cap, d.transw, m.dt ? mkFloat16 : mkBfloat16, g_comm,
                             g_st);
}

/* The layout exactly (expert_offsets, send_rows, recv_src and
 * recv_weights where passed), y's rows past off[El] still poison, and up
 * to 2048 elements of y (all of a small one) bit for bit against the
 * host's exact sums rounded once; 1 when wrong (and a line saying how). */
static int dgcheck(const dgcall &d, char *send, char *recv, uint8_t *host, int captured)
{
    const dgbufs b = dgplace(d, send, recv);
    const mcall &m = d.m;
    const mlayout L = mlayout_of(m);
    const int64_t T = mtokens(m, g_rank), rows = L.rows[(size_t)g_rank], el = m.experts / g_n;
    const int64_t n = d.n;
    const char *what = nullptr;
    long at = -1;
    uint32_t got0 = 0, want0 = 0;
    std::vector<int64_t> off((size_t)el + 1);
    std::vector<int32_t> src((size_t)(2 * rows)), sr((size_t)(T * m.topk));
    std::vector<float> rw((size_t)rows);
    CK(cudaMemcpy(off.data(), b.off, off.size() * 8, cudaMemcpyDeviceToHost));
    if (rows && d.with_src)
        CK(cudaMemcpy(src.data(), b.src, src.size() * 4, cudaMemcpyDeviceToHost));
    if (rows && d.with_w) CK(cudaMemcpy(rw.data(), b.rw, rw.size() * 4, cudaMemcpyDeviceToHost));
    if (T) CK(cudaMemcpy(sr.data(), b.rows, sr.size() * 4, cudaMemcpyDeviceToHost));
    if (off != L.off) what = "expert_offsets";
    for (size_t i = 0; !what && d.with_src && i < src.size(); i++)
        if (src[i] != L.src[i]) what = "recv_src", at = (long)i / 2;
    for (size_t i = 0; !what && i < sr.size(); i++)
        if (sr[i] != L.send_rows[i]) what = "send_rows", at = (long)i;
    for (int64_t i = 0; !what && d.with_w && i < rows; i++)
        if (rw[(size_t)i] !=
            mweight(m, L.src[(size_t)(2 * i)], (uint64_t)L.src[(size_t)(2 * i + 1)]))
            what = "recv_weights", at = (long)i;
    const uint64_t ybytes = (uint64_t)(m.cap * n) * 2;
    if (!what && ybytes) CK(cudaMemcpy(host, b.y, ybytes, cudaMemcpyDeviceToHost));
    for (uint64_t x = (uint64_t)(rows * n) * 2; !what && x < ybytes; x++)
        if (host[x] != 0xff)
            what = "y past expert_offsets[El] (must stay poison)", at = (long)(x / 2 / (uint64_t)n);
    const uint16_t *hy = reinterpret_cast<const uint16_t *>(host);
    const uint64_t total = (uint64_t)(rows * n), nchk = total < 2048 ? total : 2048;
    uint64_t h = m.seed ^ 0xbb67ae8584caa73bull;
    for (uint64_t x = 0; !what && x < nchk; x++) {
        const uint64_t e = nchk == total ? x : soak_rng_fwd(&h) % total;
        const int64_t i = (int64_t)(e / (uint64_t)n), j = (int64_t)(e % (uint64_t)n);
        const int s = L.src[(size_t)(2 * i)];
        const int32_t slot = L.src[(size_t)(2 * i + 1)];
        const int64_t t = slot / m.topk;
        const int64_t le = mexpert(m, s, (uint64_t)slot) - (int64_t)g_rank * el; /* local expert */
        long sum = 0; /* in units of 1/256 */
        for (int64_t kk = 0; kk < m.hidden; kk++)
            sum += (long)qval(m.seed, s, (uint64_t)(t * m.hidden + kk), 2) *
                   gq(m.seed, g_rank, 1, (uint64_t)(le * n * m.hidden +
                                                    (d.transw ? j * m.hidden + kk : kk * n + j)));
        const uint16_t want = round16((float)sum / 256.0f, m.dt), got = hy[e];
        if (got != want) what = "y", at = (long)e, got0 = got, want0 = want;
    }
    if (!what) return 0;
    printf("FAIL rank %d: moe_dispatch_gemm %s hidden %lld n %lld transW %d top-%lld of %lld "
           "experts, %lld tokens, %lld rows, capacity %lld, weights %s, recv_src %s%s: %s wrong "
           "at %ld", g_rank, dt_names[m.dt], (long long)m.hidden, (long long)n, d.transw,
           (long long)m.topk, (long long)m.experts, (long long)T, (long long)rows,
           (long long)m.cap, d.with_w ? "passed" : "NULL", d.with_src ? "passed" : "NULL",
           captured ? ", captured in a CUDA graph" : ", eager", what, at);
    if (!strcmp(what, "y"))
        printf(" (row %ld col %ld): got 0x%x, expected 0x%x%s", at / (long)n, at % (long)n, got0,
               want0, got0 == 0xffff ? " (poison: never written)" : "");
    printf("\n");
    fflush(stdout);
    return 1;
}

/* ---- mkMoEDispatchFfnCombine in the soak ---------------------------------- */

/* One mkMoEDispatchFfnCombine: out[t] = sum_j w_j
 * FFN_e(x[t]), FFN_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T, with the
 * routing and weights of the MoE pairs (mcall: mexpert, mweight; 0 to 300
 * or 0 to 16 tokens a rank, now and then a rank of none).  Every element
 * of rank r's x, W13 and W2 (its El experts, in the layout transW says) is
 * fval(seed, salt, r, its index, scale): q / 64 with |q| <= 63, times
 * scale, 1 for x and for the weights a power of two within sqrt(2) of 2 /
 * sqrt(fan in) (test_moe's layer: gate and up sums of standard deviation
 * 0.5 to 1, silu well away from linear, h and the outputs O(1)).  So
 * every rank rebuilds any expert, every value is exact in both dtypes,
 * every product exact in fp32, and every sum of up to hidden = 512 of
 * them a multiple of their common step below 2^21 steps: the gate and up
 * sums are the device's bit for bit, in any order (see fref). */
struct fcall {
    mcall m; /* dt bf16 or fp16; hidden; tmax, idle */
    int64_t inter;
    int transw, with_w, null_empty; /* null_empty: x, idx, out NULL on a rank of no tokens */
};

enum { FF_MAXH = 512, FF_MAXI = 512, FF_MAXT = 300, FF_MAXK = 4, FF_MAXEL = 8, FF_GUARD = 256 };
static const uint64_t kFfX = 0x452821e638d01377ull, kFfW13 = 0xbe5466cf34e90c6cull,
                      kFfW2 = 0xc0ac29b7c97c50ddull;
/* send: x, idx, w, then W13 and W2 in what is left (FF_WBYTES: El x 3
 * hidden x inter x 2 bytes, so El is cut to fit at the larger shapes);
 * recv: out and a guard */
static const size_t FF_WBYTES = kSlotPerRank - 4 * 256 - (size_t)FF_MAXT * FF_MAXH * 2 -
                                2 * (size_t)FF_MAXT * FF_MAXK * 4;
static_assert(2 * 3 * (size_t)FF_MAXH * FF_MAXI * 2 <= FF_WBYTES,
              "the MoE layer's weights fit a slot of one rank with 2 experts at its largest");
static_assert((size_t)FF_MAXT * FF_MAXH * 2 + FF_GUARD <= kSlotPerRank,
              "the MoE layer's out fits a slot of one rank");

/* Element j of rank r's tensor of salt s: q / 64 times scale (a power of
 * two; exact in both dtypes). */
__host__ __device__ static inline float fval(uint64_t seed, uint64_t s, int r, uint64_t j,
                                             float scale)
{
    return (float)qval(seed ^ s, r, j, 63) * (scale / 64.0f);
}

__host__ __device__ static inline uint16_t fbits(float f, int dt)
{
    if (dt) {
        __half h = __float2half_rn(f);
        return *reinterpret_cast<uint16_t *>(&h);
    }
    __nv_bfloat16 b = __float2bfloat16_rn(f);
    return *reinterpret_cast<uint16_t *>(&b);
}

__global__ void ffill(void *buf, uint64_t n, int dt, uint64_t seed, uint64_t s, int r,
                      float scale)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x)
        static_cast<uint16_t *>(buf)[j] = fbits(fval(seed, s, r, j, scale), dt);
}

/* The weights' scale: a power of two within sqrt(2) of 2 / sqrt(fan_in)
 * (test_moe's lscale). */
static float fscale(int64_t fan_in)
{
    return ldexpf(1.0f, -(int)lround(log2(sqrt((double)fan_in)) - 1.0));
}

static fcall soak_ffn(uint64_t *st)
{
    static const int64_t hs1[] = {8, 24, 64, 136, 200, 264, FF_MAXH}; /* transW 1: of 8 */
    static const int64_t is1[] = {8, 24, 64, 72, 136, 328, FF_MAXI};
    static const int64_t hs0[] = {64, 128, 192, 256, FF_MAXH};        /* transW 0: of 64 */
    static const int64_t is0[] = {64, 128, 256, FF_MAXI};
    static const int64_t ks[] = {1, 2, 3, FF_MAXK};
    static const int64_t es[] = {2, 3, 4, FF_MAXEL};
    fcall f;
    f.m.dt = (int)(soak_rng_fwd(st) & 1);
    f.transw = (int)(soak_rng_fwd(st) & 1);
    f.m.hidden = f.transw ? soak_pick(st, hs1, 7) : soak_pick(st, hs0, 5);
    f.inter = f.transw ? soak_pick(st, is1, 7) : soak_pick(st, is0, 4);
    f.m.topk = soak_pick(st, ks, 4);
    /* experts per rank, fewer where the weights would not fit the slot */
    int ei = (int)(soak_rng_fwd(st) % 4);
    while (ei > 0 && (size_t)es[ei] * 3 * (size_t)(f.m.hidden * f.inter) * 2 > FF_WBYTES) ei--;
    f.m.experts = g_n * es[ei];
    f.with_w = (soak_rng_fwd(st) % 4) != 0; /* topk_weights, or NULL (on every rank) */
    f.null_empty = (int)(soak_rng_fwd(st) & 1);
    f.m.tmax = (soak_rng_fwd(st) % 4) == 0 ? 16 : FF_MAXT;
    f.m.idle = (soak_rng_fwd(st) % 8) == 0 ? 1 + (int)(soak_rng_fwd(st) % (uint64_t)g_n) : 0;
    f.m.seed = soak_rng_fwd(st);
    f.m.cap = soak_capacity(f.m, st);
    return f;
}

/* Inputs in send, out (and its guard) in recv (each 256-byte aligned). */
struct fbufs {
    char *x, *W13, *W2, *out;
    int32_t *idx;
    float *w;
};

static fbufs fplace(const fcall &f, char *send, char *recv)
{
    const mcall &m = f.m;
    const size_t T = (size_t)mtokens(m, g_rank), K = (size_t)m.topk, H = (size_t)m.hidden;
    const size_t I = (size_t)f.inter, el = (size_t)(m.experts / g_n);
    fbufs b;
    b.x = send;
    b.idx = (int32_t *)(send + soak_up(T * H * 2));
    b.w = (float *)((char *)b.idx + soak_up(T * K * 4));
    b.W13 = (char *)b.w + soak_up(T * K * 4);
    b.W2 = b.W13 + soak_up(el * 2 * I * H * 2);
    b.out = recv;
    soak_fit("moe_layer", (size_t)(b.W2 - send) + el * H * I * 2, T * H * 2 + FF_GUARD);
    return b;
}

/* Inputs, out and its guard poisoned, the call. */
static mkResult_t fcall_run(const fcall &f, char *send, char *recv)
{
    const fbufs b = fplace(f, send, recv);
    const mcall &m = f.m;
    const int64_t T = mtokens(m, g_rank), el = m.experts / g_n, H = m.hidden, I = f.inter;
    if (T > 0) {
        ffill<<<64, 256, 0, g_st>>>(b.x, (uint64_t)(T * H), m.dt, m.seed, kFfX, g_rank, 1.0f);
        mroute<<<16, 256, 0, g_st>>>(b.idx, b.w, T * m.topk, m.experts, m.seed, g_rank);
    }
    ffill<<<256, 256, 0, g_st>>>(b.W13, (uint64_t)(el * 2 * I * H), m.dt, m.seed, kFfW13, g_rank,
                                 fscale(H));
    ffill<<<256, 256, 0, g_st>>>(b.W2, (uint64_t)(el * H * I), m.dt, m.seed, kFfW2, g_rank,
                                 fscale(I));
    CK(cudaMemsetAsync(b.out, 0xff, (size_t)(T * H) * 2 + FF_GUARD, g_st));
    CK(cudaGetLastError());
    /* topk_weights stays passed on a rank of no tokens: the ranks must
     * agree on it (NULL on every rank or on none) */
    const bool none = T == 0 && f.null_empty;
    return mkMoEDispatchFfnCombine(none ? NULL : b.x, none ? NULL : b.idx,
                                   f.with_w ? b.w : NULL, b.W13, b.W2,
                                   none ? NULL : b.out, T, H, I, m.topk, m.experts, m.cap,
                                   f.transw, m.dt ? mkFloat16 : mkBfloat16, g_comm, g_st);
}

/* Global expert e's weights as the host's floats: Wg and Wu (inter x
 * hidden each, row i the output i's) one after the other, then Wd (hidden
 * x inter), read out of rank e / El's W13 and W2 in either layout. */
static void fexpert(const fcall &f, int64_t e, std::vector<float> &M)
{
    const int64_t H = f.m.hidden, I = f.inter, el = f.m.experts / g_n;
    const int d = (int)(e / el);
    const uint64_t l = (uint64_t)(e % el);
    const uint64_t b13 = l * (uint64_t)(2 * I * H), b2 = l * (uint64_t)(H * I);
    const float s13 = fscale(H), s2 = fscale(I);
    M.resize((size_t)(3 * I * H));
    float *Wgu = M.data(), *Wd = M.data() + 2 * I * H;
    for (int64_t r = 0; r < 2 * I; r++) /* W13: 2I x H (transW 1) or H x 2I (0) */
        for (int64_t k = 0; k < H; k++)
            Wgu[r * H + k] = fval(f.m.seed, kFfW13, d,
                                  b13 + (uint64_t)(f.transw ? r * H + k : k * 2 * I + r), s13);
    for (int64_t k = 0; k < H; k++) /* W2: H x I (transW 1) or I x H (0) */
        for (int64_t i = 0; i < I; i++)
            Wd[k * I + i] = fval(f.m.seed, kFfW2, d,
                                 b2 + (uint64_t)(f.transw ? k * I + i : i * H + k), s2);
}

static float fround(double v, int dt) { return half_bits_val(fbits((float)v, dt), dt); }

/* One expert's output row as the call rounds it, and what a rounding of
 * h the other way can move it by.  The gate and up sums g, u are exact
 * (fcall): the device's fp32 sums bit for bit.  So the one difference
 * before h is rounded is the device's fp32 silu: g / (1 + __expf(-g)) u,
 * within (2 + floor(1.173 |g|)) ulps (__expf, the CUDA C Programming
 * Guide's bound) plus three roundings of the exact value; eps = (8 + 4
 * |g|) 2^-23 bounds that with a factor of 2 to spare.  h_i is the host's
 * round(v), v = silu(g) u; where round(v (1 - eps)) and round(v (1 + eps))
 * differ (about 1 element in 300 in fp16, 1 in 2000 in bf16; the
 * device's h differs from the host's for about 1 in 10^4 and 10^5), the
 * device's may be the other of the two, and amb[k] gets |their
 * difference| |Wd_ki| for every output k: the most that moves y_k before
 * y_k is rounded.  y = round(h Wd^T) (the sum in double); m the row's
 * largest |y|. */
struct fslot {
    std::vector<float> y;
    std::vector<double> amb; /* empty: no h element in doubt */
    double m = 0;
    int namb = 0;
};

static void fref(const fcall &f, const float *M, const float *x, fslot &s, std::vector<float> &h)
{
    const int64_t H = f.m.hidden, I = f.inter;
    const int dt = f.m.dt;
    const float *Wg = M, *Wu = M + I * H, *Wd = M + 2 * I * H;
    std::vector<int64_t> amb_i;
    std::vector<float> amb_d;
    for (int64_t i = 0; i < I; i++) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < H; k++) {
            g += (double)Wg[i * H + k] * x[k];
            u += (double)Wu[i * H + k] * x[k];
        }
        const double v = g / (1.0 + exp(-g)) * u, eps = (8.0 + 4.0 * fabs(g)) * ldexp(1.0, -23);
        h[(size_t)i] = fround(v, dt);
        const float lo = fround(v - eps * fabs(v), dt), hi = fround(v + eps * fabs(v), dt);
        if (lo != hi) amb_i.push_back(i), amb_d.push_back(fabsf(hi - lo));
    }
    s.y.resize((size_t)H);
    s.m = 0;
    s.namb = (int)amb_i.size();
    if (!amb_i.empty()) s.amb.assign((size_t)H, 0.0);
    for (int64_t k = 0; k < H; k++) {
        double y = 0;
        for (int64_t i = 0; i < I; i++) y += (double)h[(size_t)i] * Wd[k * I + i];
        s.y[(size_t)k] = fround(y, dt);
        s.m = std::max(s.m, fabs((double)s.y[(size_t)k]));
        for (size_t a = 0; a < amb_i.size(); a++)
            s.amb[(size_t)k] += (double)amb_d[a] * fabs((double)Wd[k * I + amb_i[a]]);
    }
}

/* The host's reference work a call may take (in multiply-adds; a weight
 * element rebuilt counts 4): about what ring attention's check takes. */
static const double FF_CHECK_WORK = 8e6;

/* out (T x hidden, then FF_GUARD bytes) of call f on this rank, on the
 * host.  Every token: a token with no expert +0 everywhere (the combine's
 * sum of nothing; mcheck's rule), every other row finite (no poison
 * left); the guard still poison.  Then tokens in an order drawn from the
 * call's seed, as many as FF_CHECK_WORK allows (at least one with an
 * expert; all of them at small shapes), every element against ref = sum_j
 * w_j y_jk in double, y_j the host's expert output rounded where the call
 * rounds (fref), within test_moe's lcheck tolerance
 *   tol = u |ref| + sum_j |w_j| (2u |y_jk| + u m_j) + (K + 2) 2^-24 S
 *         (+ (K + 1) 2^-24 in fp16),   S = sum_j |w_j| |y_jk|,
 * u the dtype's unit roundoff (2^-8 bf16, 2^-11 fp16), m_j the largest
 * |y_j| of that row, plus sum_j |w_j| amb_jk (fref: zero unless an h
 * element of the row is within the device's silu error of a rounding
 * boundary).  Why (lcheck): u |ref|, the final rounding of out; 2u
 * |y_jk|, a y element rounded the other way (one ulp of it); u m_j, the
 * fp32 sum of the down projection against the host's exact one (~sqrt(n)
 * 2^-24 of its terms); (K + 2) 2^-24 S, the weighted sum's fp32 products
 * and sum; fp16's subnormal step per term.  lcheck's u m_j also stands
 * for an h element rounded the other way, which moves y_k by up to 2u
 * |h_i Wd_ki|: under u m_j when the row's largest |y| spans many such
 * terms, as at test_moe's shapes (hidden and inter >= 64), but not
 * always: a host model of the device's arithmetic with one h of a row
 * forced the other way went over lcheck's tolerance in about one such
 * row in 10^3 at hidden 8 to 24 (err / tol up to 1.2), one in 3 10^4 at
 * hidden 64 to 136.  amb_jk is that move, exactly, where it can happen,
 * and zero elsewhere (nearly every row).  A wrong expert, weight, slot,
 * layout, missing silu or gate/up swapped is off by the row's magnitude.
 * 1 when wrong (and a line saying how). */
static int fcheck_host(const fcall &f, const uint8_t *host, int captured)
{
    const mcall &m = f.m;
    const int64_t T = mtokens(m, g_rank), H = m.hidden, K = m.topk;
    const int dt = m.dt;
    const uint16_t *ho = reinterpret_cast<const uint16_t *>(host);
    char what[240] = "";
    auto expert = [&](int64_t t, int64_t j) { return mexpert(m, g_rank, (uint64_t)(t * K + j)); };
    auto any = [&](int64_t t) {
        for (int64_t j = 0; j < K; j++)
            if (expert(t, j) >= 0) return true;
        return false;
    };
    uint64_t nonfinite = 0, poisoned = 0, nonzero = 0, empty = 0;
    int64_t at_nz = -1, at_nf = -1;
    for (int64_t t = 0; t < T; t++) {
        const bool a = any(t);
        empty += !a;
        for (int64_t k = 0; k < H; k++) {
            const uint16_t v = ho[t * H + k];
            if (!a && v != 0) {
                if (!nonzero++) at_nz = t;
            } else if (a && !finite16(v, dt)) {
                if (!nonfinite++) at_nf = t;
                poisoned += v == 0xffff;
            }
        }
    }
    for (int g = 0; g < FF_GUARD; g++)
        if (host[(size_t)(T * H) * 2 + (size_t)g] != 0xff) {
            snprintf(what, sizeof what, "the %d bytes past out written (byte %d)", FF_GUARD, g);
            break;
        }
    if (!what[0] && nonzero)
        snprintf(what, sizeof what, "%llu elements of tokens with no expert not +0 (the first "
                 "in token %lld)", (unsigned long long)nonzero, (long long)at_nz);
    if (!what[0] && nonfinite)
        snprintf(what, sizeof what, "%llu elements not finite (the first in token %lld), %llu "
                 "of them the poison (never written)", (unsigned long long)nonfinite,
                 (long long)at_nf, (unsigned long long)poisoned);
    /* the tokens checked against the reference: a shuffle of those with an
     * expert, while the work allows */
    std::vector<int64_t> order, toks; /* none when out is wrong already */
    for (int64_t t = 0; t < T && !what[0]; t++)
        if (any(t)) order.push_back(t);
    uint64_t hs = m.seed ^ 0x510e527fade682d1ull ^ ((uint64_t)g_rank << 40);
    for (size_t i = order.size(); i > 1; i--)
        std::swap(order[i - 1], order[(size_t)(soak_rng_fwd(&hs) % i)]);
    const double hi3 = 3.0 * (double)H * (double)f.inter;
    std::vector<char> built((size_t)m.experts, 0);
    double work = 0;
    for (int64_t t : order) {
        double add = 0;
        std::vector<int64_t> fresh;
        for (int64_t j = 0; j < K; j++) {
            const int32_t e = expert(t, j);
            if (e < 0) continue;
            add += hi3;
            if (!built[(size_t)e] && std::find(fresh.begin(), fresh.end(), e) == fresh.end()) {
                fresh.push_back(e);
                add += 4 * hi3;
            }
        }
        if (!toks.empty() && work + add > FF_CHECK_WORK) break;
        for (int64_t e : fresh) built[(size_t)e] = 1;
        work += add;
        toks.push_back(t);
    }
    /* every checked slot's expert output, an expert's weights built once */
    std::vector<fslot> ref(toks.size() * (size_t)K);
    std::vector<float> M, x((size_t)H), h((size_t)f.inter);
    for (int64_t e = 0; e < m.experts; e++) {
        if (!built[(size_t)e]) continue;
        fexpert(f, e, M);
        for (size_t ti = 0; ti < toks.size(); ti++)
            for (int64_t j = 0; j < K; j++) {
                if (expert(toks[ti], j) != e) continue;
                for (int64_t k = 0; k < H; k++)
                    x[(size_t)k] = fval(m.seed, kFfX, g_rank, (uint64_t)(toks[ti] * H + k), 1.0f);
                fref(f, M.data(), x.data(), ref[ti * (size_t)K + (size_t)j], h);
            }
    }
    const double u = dt == 0 ? ldexp(1.0, -8) : ldexp(1.0, -11);
    const double sub = dt == 1 ? (double)(K + 1) * ldexp(1.0, -24) : 0.0;
    double worst = 0;
    uint64_t bad = 0;
    const bool found = what[0] != 0;
    for (size_t ti = 0; !found && ti < toks.size(); ti++) {
        const int64_t t = toks[ti];
        int namb = 0;
        for (int64_t j = 0; j < K; j++) namb += ref[ti * (size_t)K + (size_t)j].namb;
        for (int64_t k = 0; k < H; k++) {
            double s = 0, S = 0, Y = 0, Mg = 0, A = 0;
            for (int64_t j = 0; j < K; j++) {
                if (expert(t, j) < 0) continue;
                const fslot &r = ref[ti * (size_t)K + (size_t)j];
                const double wv =
                    f.with_w ? (double)mweight(m, g_rank, (uint64_t)(t * K + j)) : 1.0;
                const double yv = r.y[(size_t)k];
                s += wv * yv;
                S += fabs(wv * yv);
                Y += fabs(wv) * 2 * u * fabs(yv);
                Mg += fabs(wv) * u * r.m;
                if (!r.amb.empty()) A += fabs(wv) * r.amb[(size_t)k];
            }
            const double tol = u * fabs(s) + Y + Mg + (double)(K + 2) * ldexp(1.0, -24) * S +
                               sub + A;
            const double o = half_bits_val(ho[t * H + k], dt), err = fabs(o - s);
            if (err <= tol) {
                worst = std::max(worst, err / tol);
                continue;
            }
            if (!bad++)
                snprintf(what, sizeof what, "out of token %lld element %lld = %.7g, expected "
                         "%.7g (tolerance %.3g; %d h elements of its rows within the silu's "
                         "error of a rounding boundary)", (long long)t, (long long)k, o, s, tol,
                         namb);
        }
    }
    if (!what[0]) return 0;
    printf("FAIL rank %d: moe_layer %s hidden %lld inter %lld transW %d top-%lld of %lld "
           "experts, %lld tokens (%llu with no expert), capacity %lld, weights %s%s%s: %s",
           g_rank, dt_names[dt], (long long)H, (long long)f.inter, f.transw, (long long)K,
           (long long)m.experts, (long long)T, (unsigned long long)empty, (long long)m.cap,
           f.with_w ? "passed" : "NULL", T == 0 && f.null_empty ? ", x, idx and out NULL" : "",
           captured ? ", captured in a CUDA graph" : ", eager", what);
    if (bad)
        printf(" (%llu elements wrong in the %zu tokens checked; the largest error of the "
               "others %.2f of its tolerance)", (unsigned long long)bad, toks.size(), worst);
    printf("\n");
    fflush(stdout);
    return 1;
}

static int fcheck(const fcall &f, char *send, char *recv, uint8_t *host, int captured)
{
    const fbufs b = fplace(f, send, recv);
    const size_t bytes = (size_t)(mtokens(f.m, g_rank) * f.m.hidden) * 2 + FF_GUARD;
    CK(cudaMemcpy(host, b.out, bytes, cudaMemcpyDeviceToHost));
    return fcheck_host(f, host, captured);
}

/* ---- mkRingAttention in the soak ----------------------------------------- */

/* One mkRingAttention (at most 8 ranks): rank r's q, k, v element (b, i,
 * h, e) (local row i, head h of that tensor's heads) is q / 16 for q =
 * qval(seed ^ salt, r, ((b s + i) H + h) D + e, Q): q and k in [-2, 2],
 * v in [-1, 1], exact in both dtypes, scores of standard deviation about
 * 1.3 at scale 1 / sqrt(D) (a softmax neither flat nor one-hot).  The
 * host computes sampled rows in double, as test_attn.cu's host_row. */
struct rcall {
    int dt, layout, mask, with_lse;
    int64_t batch, seq, heads, kvh, d;
    uint64_t seed;
};

enum { RA_Q, RA_K, RA_V }; /* the tensors, each its own salt in rq */

enum { RA_MAXB = 2, RA_MAXS = 257, RA_MAXH = 8, RA_MAXD = 128 };
/* q, k, v; o and lse (kv heads <= heads) */
static_assert(3 * 256 + 3 * (size_t)RA_MAXB * RA_MAXS * RA_MAXH * RA_MAXD * 2 <= kSlotPerRank,
              "mkRingAttention's q, k and v fit a slot of one rank");
static_assert(256 + (size_t)RA_MAXB * RA_MAXS * RA_MAXH * (RA_MAXD * 2 + 4) <= kSlotPerRank,
              "mkRingAttention's o and lse fit a slot of one rank");

static float rscale(const rcall &a) { return 1.0f / sqrtf((float)a.d); }

static const char *const mask_names[] = {"full", "causal", "zigzag"};

/* The element of rank r's tensor t (heads H) at (b, i, h, e), times 16. */
__host__ __device__ static inline int rq(uint64_t seed, int t, int r, int64_t seq, int64_t H,
                                         int64_t d, int64_t b, int64_t i, int64_t h, int64_t e)
{
    return qval(seed ^ (t == RA_Q ? 0x243f6a8885a308d3ull
                        : t == RA_K ? 0x13198a2e03707344ull : 0xa4093822299f31d0ull),
                r, (uint64_t)(((b * seq + i) * H + h) * d + e), t == RA_V ? 16 : 32);
}

/* Offset of (b, i, h, 0) in a tensor of seq rows and H heads. */
__host__ __device__ static inline int64_t ra_row(int layout, int64_t seq, int64_t H, int64_t d,
                                                 int64_t b, int64_t i, int64_t h)
{
    return layout == mkAttnBSHD ? ((b * seq + i) * H + h) * d : ((b * H + h) * seq + i) * d;
}

/* The bits of element x of rank r's tensor t in its layout. */
__host__ __device__ static inline uint16_t rbits(int t, int layout, int64_t seq, int64_t H,
                                                 int64_t d, int dt, uint64_t seed, int r,
                                                 int64_t x)
{
    const int64_t e = x % d;
    int64_t rest = x / d, b, i, h;
    if (layout == mkAttnBSHD) {
        h = rest % H;
        rest /= H;
        i = rest % seq;
        b = rest / seq;
    } else {
        i = rest % seq;
        rest /= seq;
        h = rest % H;
        b = rest / H;
    }
    return (uint16_t)bits_of(rq(seed, t, r, seq, H, d, b, i, h, e), dt);
}

__global__ void rfill(void *buf, int t, int layout, int64_t batch, int64_t seq, int64_t H,
                      int64_t d, int dt, uint64_t seed, int r)
{
    const int64_t n = batch * seq * H * d;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < n;
         x += (int64_t)gridDim.x * blockDim.x)
        static_cast<uint16_t *>(buf)[x] = rbits(t, layout, seq, H, d, dt, seed, r, x);
}

/* Global position of rank r's local row i (mkRingAttention(3)). */
static int64_t rpos(const rcall &a, int r, int64_t i)
{
    if (a.mask == mkAttnCausalZigzag) { /* chunks r and 2P - 1 - r of s / 2 rows */
        const int64_t c = a.seq / 2;
        return i < c ? r * c + i : (2 * (int64_t)g_n - 1 - r) * c + (i - c);
    }
    return r * a.seq + i; /* causal: rows [r s, (r + 1) s); full: unused */
}

static rcall soak_ratt(uint64_t *st)
{
    static const int64_t ss[] = {1, 7, 64, 100, 128, 129, RA_MAXS};
    static const int64_t zs[] = {2, 8, 64, 100, 128, 130, 256}; /* zigzag: even */
    static const int64_t kvs[] = {1, 2, 4, RA_MAXH};
    rcall a;
    a.dt = (int)(soak_rng_fwd(st) & 1);
    a.layout = (int)(soak_rng_fwd(st) & 1);
    a.mask = (int)(soak_rng_fwd(st) % 3);
    a.with_lse = (soak_rng_fwd(st) % 4) != 0;
    a.d = (soak_rng_fwd(st) & 1) ? 128 : 64;
    const int64_t ratio = (int64_t)1 << (soak_rng_fwd(st) % 3); /* GQA 1, 2, 4 */
    a.kvh = kvs[soak_rng_fwd(st) % (ratio == 1 ? 4u : ratio == 2 ? 3u : 2u)];
    a.heads = a.kvh * ratio; /* at most 8 */
    a.batch = 1 + (int64_t)(soak_rng_fwd(st) % RA_MAXB);
    a.seq = a.mask == mkAttnCausalZigzag ? soak_pick(st, zs, 7) : soak_pick(st, ss, 7);
    a.seed = soak_rng_fwd(st);
    return a;
}

struct rbufs {
    char *q, *k, *v, *o;
    float *lse;
    size_t qb, kvb, lb;
};

static rbufs rplace(const rcall &a, char *send, char *recv)
{
    rbufs p;
    p.qb = (size_t)(a.batch * a.seq * a.heads * a.d) * 2;
    p.kvb = (size_t)(a.batch * a.seq * a.kvh * a.d) * 2;
    p.lb = (size_t)(a.batch * a.heads * a.seq) * 4;
    p.q = send;
    p.k = send + soak_up(p.qb);
    p.v = p.k + soak_up(p.kvb);
    p.o = recv;
    p.lse = (float *)(recv + soak_up(p.qb));
    soak_fit("ring_attn", (size_t)(p.v - send) + p.kvb, soak_up(p.qb) + p.lb);
    return p;
}

/* Inputs, o and lse poisoned (lse even when not passed: it must stay so),
 * the call. */
static mkResult_t rcall_run(const rcall &a, char *send, char *recv)
{
    const rbufs p = rplace(a, send, recv);
    rfill<<<256, 256, 0, g_st>>>(p.q, RA_Q, a.layout, a.batch, a.seq, a.heads, a.d, a.dt, a.seed,
                                 g_rank);
    rfill<<<256, 256, 0, g_st>>>(p.k, RA_K, a.layout, a.batch, a.seq, a.kvh, a.d, a.dt, a.seed,
                                 g_rank);
    rfill<<<256, 256, 0, g_st>>>(p.v, RA_V, a.layout, a.batch, a.seq, a.kvh, a.d, a.dt, a.seed,
                                 g_rank);
    CK(cudaMemsetAsync(p.o, 0xff, p.qb, g_st));
    CK(cudaMemsetAsync(p.lse, 0xff, p.lb, g_st));
    CK(cudaGetLastError());
    return mkRingAttention(p.q, p.k, p.v, p.o, a.with_lse ? p.lse : NULL, a.batch, a.seq, a.heads,
                           a.kvh, a.d, (mkAttnLayout_t)a.layout, (mkAttnMask_t)a.mask, rscale(a),
                           a.dt ? mkFloat16 : mkBfloat16, g_comm, g_st);
}

/* k and v of one (batch, kv head) over every rank's rows (rank r's row j
 * at r s + j), as floats, with each row's global position. */
struct rslice {
    int64_t b, kh;
    std::vector<float> k, v;
};

/* Every element of o written and finite; lse finite (or, not passed,
 * untouched); then up to 16 (batch, head, row) triples (4 (batch, head)
 * pairs; the first and last rows, the zigzag chunk edge and a tile edge
 * among the rows) against softmax(scale q k^T) v and log(sum exp(scale
 * q.k)) in double over the keys the row sees, within test_attn.cu's
 * tolerances (host_row there):
 *     |o - ref| <= 2 u (A + |o|) + 2 ds A + [fp16] sum min(p_j, 2^-25) |v_j| / l + 1e-6
 *     |lse - ref| <= 1e-3 + ds
 * with u the dtype's unit roundoff (2^-8 bf16, 2^-11 fp16), A = sum p_j
 * |v_j| / sum p_j, ds = max over keys of scale sum_e |q_e k_e| D 2^-23.
 * 1 when wrong (and a line saying how). */
static int rcheck(const rcall &a, char *send, char *recv, uint8_t *host, int captured)
{
    const rbufs p = rplace(a, send, recv);
    const int64_t S = a.seq, D = a.d, H = a.heads, nkeys = (int64_t)g_n * S;
    const int64_t group = a.heads / a.kvh;
    CK(cudaMemcpy(host, p.o, p.qb, cudaMemcpyDeviceToHost));
    std::vector<uint32_t> hl(p.lb / 4);
    CK(cudaMemcpy(hl.data(), p.lse, p.lb, cudaMemcpyDeviceToHost));
    const uint16_t *ho = reinterpret_cast<const uint16_t *>(host);
    char what[200] = "";
    double worst = 0, worst_lse = 0;
    uint64_t nonfinite = 0, poisoned = 0;
    for (size_t x = 0; x < p.qb / 2; x++) {
        nonfinite += !finite16(ho[x], a.dt);
        poisoned += ho[x] == 0xffff;
    }
    if (nonfinite)
        snprintf(what, sizeof what, "%llu of %llu elements of o not finite, %llu of them the "
                 "poison (never written)", (unsigned long long)nonfinite,
                 (unsigned long long)(p.qb / 2), (unsigned long long)poisoned);
    uint64_t lbad = 0;
    for (uint32_t w : hl) {
        float f;
        memcpy(&f, &w, 4);
        lbad += a.with_lse ? !std::isfinite(f) : w != 0xffffffffu;
    }
    if (!what[0] && lbad)
        snprintf(what, sizeof what, "%llu of %llu lse values %s", (unsigned long long)lbad,
                 (unsigned long long)hl.size(),
                 a.with_lse ? "not finite (never written?)" : "written with lse NULL");
    /* the sampled rows */
    const int64_t nrows = a.batch * H * S;
    const int nsamp = nrows < 16 ? (int)nrows : 16;
    uint64_t hs = a.seed ^ 0xa54ff53a5f1d36f1ull;
    int64_t pb[4], ph[4];
    for (int z = 0; z < 4; z++) {
        pb[z] = (int64_t)(soak_rng_fwd(&hs) % (uint64_t)a.batch);
        ph[z] = (int64_t)(soak_rng_fwd(&hs) % (uint64_t)H);
    }
    const int64_t edges[6] = {0, S - 1, S / 2 - 1, S / 2, 127, 128};
    std::vector<int64_t> kpos((size_t)nkeys);
    for (int r = 0; r < g_n; r++)
        for (int64_t j = 0; j < S; j++) kpos[(size_t)(r * S + j)] = rpos(a, r, j);
    std::vector<rslice> cache;
    const double sc = (double)rscale(a);
    std::vector<double> q((size_t)D);
    for (int z = 0; !what[0] && z < nsamp; z++) {
        int64_t b, h, i;
        if (nrows <= 16) {
            b = z / (H * S);
            h = (z / S) % H;
            i = z % S;
        } else {
            b = pb[z % 4];
            h = ph[z % 4];
            i = z < 6 && edges[z] >= 0 && edges[z] < S
                    ? edges[z]
                    : (int64_t)(soak_rng_fwd(&hs) % (uint64_t)S);
        }
        const int64_t kh = h / group, qp = rpos(a, g_rank, i);
        const rslice *sl = nullptr;
        for (const rslice &c : cache)
            if (c.b == b && c.kh == kh) sl = &c;
        if (!sl) {
            cache.emplace_back();
            rslice &c = cache.back();
            c.b = b;
            c.kh = kh;
            c.k.resize((size_t)(nkeys * D));
            c.v.resize((size_t)(nkeys * D));
            for (int r = 0; r < g_n; r++)
                for (int64_t j = 0; j < S; j++)
                    for (int64_t e = 0; e < D; e++) {
                        const size_t at = (size_t)((r * S + j) * D + e);
                        c.k[at] = (float)rq(a.seed, RA_K, r, S, a.kvh, D, b, j, kh, e) / 16.0f;
                        c.v[at] = (float)rq(a.seed, RA_V, r, S, a.kvh, D, b, j, kh, e) / 16.0f;
                    }
            sl = &c;
        }
        for (int64_t e = 0; e < D; e++)
            q[(size_t)e] = (double)rq(a.seed, RA_Q, g_rank, S, H, D, b, i, h, e) / 16.0;
        /* softmax over the keys the row sees, and its tolerance (attn_ref.h) */
        const AttnRef r = attn_ref_row(q, sl->k.data(), sl->v.data(), nkeys, D, sc, a.dt,
                                       [&](int64_t j) {
                                           return a.mask == mkAttnFull || kpos[(size_t)j] <= qp;
                                       });
        const int64_t base = ra_row(a.layout, S, H, D, b, i, h);
        for (int64_t e = 0; e < D && !what[0]; e++) {
            const double ref = r.o[(size_t)e], tol = r.tol[(size_t)e];
            const double got = half_bits_val(ho[(size_t)(base + e)], a.dt), err = fabs(got - ref);
            worst = std::max(worst, err / tol);
            if (!(err <= tol))
                snprintf(what, sizeof what, "o of batch %lld head %lld row %lld (position %lld) "
                         "element %lld = %.9g, expected %.9g (tolerance %.3g)", (long long)b,
                         (long long)h, (long long)i, (long long)qp, (long long)e, got, ref, tol);
        }
        if (a.with_lse && !what[0]) {
            const double ref = r.lse, tol = r.tol_lse;
            float f;
            memcpy(&f, &hl[(size_t)((b * H + h) * S + i)], 4);
            const double err = fabs((double)f - ref);
            worst_lse = std::max(worst_lse, err / tol);
            if (!(err <= tol))
                snprintf(what, sizeof what, "lse of batch %lld head %lld row %lld (position "
                         "%lld) = %.9g, expected %.9g (tolerance %.3g)", (long long)b,
                         (long long)h, (long long)i, (long long)qp, (double)f, ref, tol);
        }
    }
    if (!what[0]) return 0;
    printf("FAIL rank %d: ring_attn %s %s %s batch %lld seq_local %lld heads %lld kv_heads %lld "
           "head_dim %lld, lse %s%s: %s (the largest o and lse errors in the rows checked: "
           "%.2f and %.2f of their tolerance)\n", g_rank, dt_names[a.dt],
           a.layout == mkAttnBSHD ? "BSHD" : "BHSD", mask_names[a.mask], (long long)a.batch,
           (long long)S, (long long)H, (long long)a.kvh, (long long)D,
           a.with_lse ? "passed" : "NULL", captured ? ", captured in a CUDA graph" : ", eager",
           what, worst, worst_lse);
    fflush(stdout);
    return 1;
}

/* ---- soak -------------------------------------------------------------- */

static uint64_t soak_rng(uint64_t *st) { return soak_rng_fwd(st); }

static int64_t soak_pick(uint64_t *st, const int64_t *v, int nv)
{
    return v[soak_rng(st) % (uint64_t)nv];
}

enum { SOAK_MAXC = 1u << 20, SOAK_BATCH = 12 };
static_assert((size_t)SOAK_MAXC * 4 == kSlotPerRank, "the newer kinds' slot per rank");

static uint64_t soak_count(uint64_t *st)
{
    static const uint64_t fixed[] = {0, 1, 2, 3, 7, 31, 64, 255, 1000, 4097, 65536, 65537};
    const uint64_t r = soak_rng(st) % 16;
    if (r < 12) return fixed[r];
    return 1 + soak_rng(st) % SOAK_MAXC; /* anything up to 1M */
}

static int run_soak(double seconds, uint64_t seed)
{
    const size_t slot = (size_t)SOAK_MAXC * (size_t)g_n * 4;
    g_soak_slot = slot;
    /* Calls per batch, at most: the pools hold 4 x batch slots of 4 MiB x
     * ranks per rank, and 8 ranks share a GPU (32 ranks as 4 x 8 on 4
     * GPUs with 12: out of memory on 80 GB); 4 from 32 ranks. */
    const int batch_max = g_n > 16 ? 4 : SOAK_BATCH;
    char *pool[2][2]; /* [registered?][send/recv] */
    void *reg[2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) CK(cudaMalloc(&pool[k][j], slot * batch_max));
    MK(mkCommRegister(g_comm, pool[1][0], slot * batch_max, &reg[0]));
    MK(mkCommRegister(g_comm, pool[1][1], slot * batch_max, &reg[1]));
    uint8_t *host;
    CK(cudaHostAlloc((void **)&host, slot, cudaHostAllocDefault));
    /* One eager call of each op at the largest size first, so that nothing
     * the library sizes by the call has to grow inside a capture. */
    for (int op = AG; op <= A2A; op++) {
        const config c = {op, mkFloat32, 0, SOAK_MAXC};
        const void *sp;
        void *rp;
        prepare(c, 1, pool[0][0], pool[0][1], &sp, &rp);
        MK(call(c, sp, rp));
    }
    /* the fused GEMMs: every m at the largest n and k (their heap banks
     * and buffers depend on the rows per owner and on the K-slices) */
    for (int op = GRS; op <= GAR; op++)
        for (int64_t m : {1, 7, 16, 24, 64, 100, 128, 257, 640, 1024}) {
            const gcall g = {op, 0, 1, m, 1032, 1024, 1};
            void *cp;
            MK(gcall_run(g, pool[0][0], pool[0][1], &cp));
        }
    /* the MoE calls: the largest capacity, row and top-k (their heap
     * banks) and the most experts (the per-CTA counts), the most tokens on
     * every rank (across nodes: the gathered tokens and routing, the
     * combine's sums) */
    {
        const mcall m = {mkFloat32, 520, 8, 8 * (int64_t)g_n, (int64_t)g_n * 96 * 8 + 3, 1, -96};
        MK(mcall_run(m, pool[0][0], pool[0][1]));
    }
    /* mkAllGatherGemm at the largest rows, n and k: equal shards with and
     * without gatheredA (the fused call's bank; the unfused sequence's
     * gathered A), and unequal ones with the largest shard (the unfused
     * sequence's padded shards across nodes) */
    {
        acall a;
        a.dt = 0;
        a.transb = 1;
        a.same_b = 1;
        a.equal = 1;
        a.null_a = 0;
        a.n = AGG_MAXN;
        a.k = AGG_MAXK;
        a.m.assign((size_t)g_n, AGG_MAXM);
        a.seed = 1;
        for (int ga = 0; ga < 2; ga++) {
            a.with_ga = ga;
            MK(acall_run(a, pool[0][0], pool[0][1]));
        }
        if (g_n > 1) {
            a.equal = 0;
            a.m.assign((size_t)g_n, 1);
            a.m[0] = AGG_MAXM;
            MK(acall_run(a, pool[0][0], pool[0][1]));
        }
    }
    /* mkMoEDispatchGemm: the largest capacity, hidden, n, top-k, experts
     * and tokens (the inbox, the private rows and the GEMM's table; across
     * nodes the gathered tokens) */
    {
        dgcall d;
        d.m = {mkBfloat16, DG_MAXH, DG_MAXK, DG_MAXEL * (int64_t)g_n,
               (int64_t)g_n * DG_MAXT * DG_MAXK + 3, 1, -(int64_t)DG_MAXT};
        d.n = DG_MAXN;
        d.transw = 1;
        d.with_w = 1;
        d.with_src = 1;
        MK(dgcall_run(d, pool[0][0], pool[0][1]));
    }
    /* mkMoEDispatchFfnCombine: the most tokens on every
     * rank, the largest capacity, top-k and hidden (the inbox, the
     * received and the output rows, the stage, the send rows, the order),
     * with the most experts (the tables, the counts) and then with the
     * largest inter (the intermediate rows): two calls, as the weights of
     * the most experts at the largest shape do not fit a slot */
    {
        fcall f;
        f.m = {mkBfloat16, FF_MAXH, FF_MAXK, FF_MAXEL * (int64_t)g_n,
               (int64_t)g_n * FF_MAXT * FF_MAXK + 3, 1, -(int64_t)FF_MAXT, 0};
        f.inter = 64;
        f.transw = 1;
        f.with_w = 1;
        f.null_empty = 0;
        MK(fcall_run(f, pool[0][0], pool[0][1]));
        f.m.experts = 2 * (int64_t)g_n;
        f.inter = FF_MAXI;
        MK(fcall_run(f, pool[0][0], pool[0][1]));
    }
    /* mkRingAttention (at most 8 ranks: mkErrUnsupported above): the
     * largest k and v (the bank; the unfused sequence's gathered k, v) */
    const int ratt_ok = g_n <= 8;
    if (ratt_ok) {
        const rcall a = {mkBfloat16, mkAttnBSHD, mkAttnFull, 1, RA_MAXB, RA_MAXS, RA_MAXH,
                         RA_MAXH, RA_MAXD, 1};
        MK(rcall_run(a, pool[0][0], pool[0][1]));
    }
    CK(cudaStreamSynchronize(g_st));
    /* a quarter of the calls one of the newer kinds (those this layout
     * has), the rest the older kinds as before */
    int newk[4], nnew = 0;
    newk[nnew++] = 3;
    newk[nnew++] = 4;
    if (ratt_ok) newk[nnew++] = 5;
    newk[nnew++] = 6;
    uint64_t st = seed;
    long calls = 0, batches = 0, graphs = 0, zero = 0, wrong = 0, fusedn = 0, moen = 0;
    long aggn = 0, dgn = 0, rattn = 0, ffnn = 0;
    const double t0 = (double)clock_gettime_ns() / 1e9;
    double t_mark = t0;
    long calls_mark = 0, batches_mark = 0;
    for (;;) {
        int go = g_rank == 0 ? (double)clock_gettime_ns() / 1e9 - t0 < seconds : 0;
        if (g_comm->boot->bcast(g_comm->boot_ctx, &go, sizeof go, 0) != mkSuccess) {
            printf("FAIL rank %d: soak: bcast: %s\n", g_rank, mkGetLastError(NULL));
            return 1;
        }
        if (!go) break;
        const int n = 1 + (int)(soak_rng(&st) % (uint64_t)batch_max);
        const int registered = (int)(soak_rng(&st) & 1), graph = (soak_rng(&st) % 4) == 0;
        config cs[SOAK_BATCH];
        gcall gs[SOAK_BATCH];
        mcall mcs[SOAK_BATCH];
        acall as[SOAK_BATCH];
        dgcall dgs[SOAK_BATCH];
        rcall rcs[SOAK_BATCH];
        fcall fcs[SOAK_BATCH];
        /* 0: a collective, 1: a fused GEMM, 2: a MoE pair, 3: an all-gather
         * GEMM, 4: a MoE dispatch GEMM, 5: a ring attention, 6: a MoE layer */
        int fused[SOAK_BATCH];
        uint64_t seeds[SOAK_BATCH];
        void *outs[SOAK_BATCH];
        cudaGraph_t g = nullptr;
        if (graph) CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < n; i++) {
            config &c = cs[i];
            /* the older kinds: 0-5 a collective, 6, 7 a fused GEMM, 8 MoE */
            const int kind = soak_rng(&st) % 4 == 0 ? -1 : (int)(soak_rng(&st) % 9);
            fused[i] = kind < 0 ? newk[soak_rng(&st) % (uint64_t)nnew] : kind == 8 ? 2 : kind >= 6;
            char *const sp_i = pool[registered][0] + (size_t)i * slot;
            char *const rp_i = pool[registered][1] + (size_t)i * slot;
            if (fused[i] == 3) {
                as[i] = soak_agg(&st);
                const mkResult_t r = acall_run(as[i], sp_i, rp_i);
                if (r != mkSuccess) {
                    char ms[160];
                    aname(as[i], ms, sizeof ms);
                    printf("FAIL rank %d: soak batch %ld call %d (ag_gemm %s m_all %s x n %lld x "
                           "k %lld transB %d%s): %s\n", g_rank, batches, i, dt_names[as[i].dt],
                           ms, (long long)as[i].n, (long long)as[i].k, as[i].transb,
                           graph ? " captured" : "", mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            if (fused[i] == 4) {
                dgs[i] = soak_dg(&st);
                const mkResult_t r = dgcall_run(dgs[i], sp_i, rp_i);
                if (r != mkSuccess) {
                    printf("FAIL rank %d: soak batch %ld call %d (moe_dispatch_gemm %s hidden %lld "
                           "n %lld transW %d top-%lld of %lld, capacity %lld%s): %s\n", g_rank,
                           batches, i, dt_names[dgs[i].m.dt], (long long)dgs[i].m.hidden,
                           (long long)dgs[i].n, dgs[i].transw, (long long)dgs[i].m.topk,
                           (long long)dgs[i].m.experts, (long long)dgs[i].m.cap,
                           graph ? " captured" : "", mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            if (fused[i] == 5) {
                rcs[i] = soak_ratt(&st);
                const mkResult_t r = rcall_run(rcs[i], sp_i, rp_i);
                if (r != mkSuccess) {
                    const rcall &a = rcs[i];
                    printf("FAIL rank %d: soak batch %ld call %d (ring_attn %s %s %s batch %lld "
                           "seq_local %lld heads %lld/%lld head_dim %lld%s): %s\n", g_rank,
                           batches, i, dt_names[a.dt], a.layout == mkAttnBSHD ? "BSHD" : "BHSD",
                           mask_names[a.mask], (long long)a.batch, (long long)a.seq,
                           (long long)a.heads, (long long)a.kvh, (long long)a.d,
                           graph ? " captured" : "", mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            if (fused[i] == 6) {
                fcs[i] = soak_ffn(&st);
                const mkResult_t r = fcall_run(fcs[i], sp_i, rp_i);
                if (r != mkSuccess) {
                    const fcall &f = fcs[i];
                    printf("FAIL rank %d: soak batch %ld call %d (moe_layer %s hidden %lld inter "
                           "%lld transW %d top-%lld of %lld, %lld tokens, capacity %lld, weights "
                           "%s%s): %s\n", g_rank, batches, i, dt_names[f.m.dt],
                           (long long)f.m.hidden, (long long)f.inter, f.transw,
                           (long long)f.m.topk, (long long)f.m.experts,
                           (long long)mtokens(f.m, g_rank), (long long)f.m.cap,
                           f.with_w ? "passed" : "NULL", graph ? " captured" : "",
                           mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            if (fused[i] == 2) {
                mcs[i] = soak_moe(&st);
                const mkResult_t r = mcall_run(mcs[i], pool[registered][0] + (size_t)i * slot,
                                               pool[registered][1] + (size_t)i * slot);
                if (r != mkSuccess) {
                    printf("FAIL rank %d: soak batch %ld call %d (moe %s hidden %lld top-%lld of "
                           "%lld%s): %s\n", g_rank, batches, i, dt_names[mcs[i].dt],
                           (long long)mcs[i].hidden, (long long)mcs[i].topk,
                           (long long)mcs[i].experts, graph ? " captured" : "",
                           mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            if (fused[i]) {
                gs[i] = soak_gemm(&st, kind == 6 ? GRS : GAR);
                const mkResult_t r = gcall_run(gs[i], pool[registered][0] + (size_t)i * slot,
                                               pool[registered][1] + (size_t)i * slot, &outs[i]);
                if (r != mkSuccess) {
                    printf("FAIL rank %d: soak batch %ld call %d (%s %lldx%lldx%lld%s): %s\n",
                           g_rank, batches, i, op_names[gs[i].op], (long long)gs[i].m,
                           (long long)gs[i].n, (long long)gs[i].k, graph ? " captured" : "",
                           mkGetLastError(g_comm));
                    return 1;
                }
                continue;
            }
            c.op = (int)(soak_rng(&st) % 4);
            c.dt = (int)(soak_rng(&st) % 3);
            c.count = soak_count(&st);
            c.inplace = c.op != A2A && (soak_rng(&st) & 1);
            seeds[i] = soak_rng(&st);
            const void *sp;
            prepare(c, seeds[i], pool[registered][0] + (size_t)i * slot,
                       pool[registered][1] + (size_t)i * slot, &sp, &outs[i]);
            const mkResult_t r = call(c, sp, outs[i]);
            if (r != mkSuccess) {
                printf("FAIL rank %d: soak batch %ld call %d (%s %s count %llu%s%s): %s\n",
                       g_rank, batches, i, op_names[c.op], dt_names[c.dt],
                       (unsigned long long)c.count, c.inplace ? " in place" : "",
                       graph ? " captured" : "", mkGetLastError(g_comm));
                return 1;
            }
        }
        if (graph) {
            cudaGraphExec_t ge;
            CK(cudaStreamEndCapture(g_st, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            CK(cudaGraphLaunch(ge, g_st));
            CK(cudaStreamSynchronize(g_st));
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
            graphs++;
        }
        CK(cudaStreamSynchronize(g_st));
        for (int i = 0; i < n; i++) {
            const config &c = cs[i];
            int w;
            char *const sp_i = pool[registered][0] + (size_t)i * slot;
            char *const rp_i = pool[registered][1] + (size_t)i * slot;
            if (fused[i] == 3) {
                w = acheck(as[i], sp_i, rp_i, host, graph);
                aggn++;
            } else if (fused[i] == 4) {
                w = dgcheck(dgs[i], sp_i, rp_i, host, graph);
                dgn++;
            } else if (fused[i] == 5) {
                w = rcheck(rcs[i], sp_i, rp_i, host, graph);
                rattn++;
            } else if (fused[i] == 6) {
                w = fcheck(fcs[i], sp_i, rp_i, host, graph);
                ffnn++;
            } else if (fused[i] == 2) {
                w = mcheck(mcs[i], pool[registered][0] + (size_t)i * slot,
                           pool[registered][1] + (size_t)i * slot, host);
                moen++;
            } else if (fused[i]) {
                int64_t off, rows;
                grows(gs[i], &off, &rows);
                const size_t bytes = (size_t)rows * gs[i].n * 2;
                if (bytes) CK(cudaMemcpy(host, outs[i], bytes, cudaMemcpyDeviceToHost));
                w = gcheck(gs[i], reinterpret_cast<const uint16_t *>(host));
                fusedn++;
            } else {
                const size_t bytes = out_elems(c.op, c.count) * (size_t)esize(c.dt);
                zero += c.count == 0;
                if (bytes) CK(cudaMemcpy(host, outs[i], bytes, cudaMemcpyDeviceToHost));
                w = check(c, host, seeds[i], 0, 0);
            }
            if (w)
                printf("FAIL rank %d: soak batch %ld call %d of %d (%s pool%s)\n", g_rank,
                       batches, i, n, registered ? "registered" : "plain",
                       graph ? ", in a CUDA graph" : "");
            wrong += w;
        }
        calls += n;
        batches++;
        /* the rate minute by minute (rank 0): a rate that falls over a
         * long run points at something that grows */
        const double now = (double)clock_gettime_ns() / 1e9;
        if (g_rank == 0 && now - t_mark >= 60.0) {
            printf("soak rate: %.0f s: %ld calls in %ld batches in the last %.0f s\n", now - t0,
                   calls - calls_mark, batches - batches_mark, now - t_mark);
            fflush(stdout);
            t_mark = now;
            calls_mark = calls;
            batches_mark = batches;
        }
    }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) {
        printf("FAIL rank %d: soak: async error %s: %s\n", g_rank, mkGetErrorString(ae),
               mkGetLastError(g_comm));
        wrong++;
    }
    MK(mkCommDeregister(g_comm, reg[0]));
    MK(mkCommDeregister(g_comm, reg[1]));
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) CK(cudaFree(pool[k][j]));
    CK(cudaFreeHost(host));
    printf("%s rank %d: soak %.0f s: %ld calls checked in %ld batches (%ld in CUDA graphs, %ld "
           "of count 0, %ld fused GEMMs, %ld MoE dispatch + combine pairs, %ld all-gather "
           "GEMMs, %ld MoE dispatch GEMMs, %ld ring attentions, %ld MoE layers), %ld wrong\n",
           wrong ? "FAIL" : "DONE", g_rank, seconds, calls, batches, graphs, zero, fusedn, moen,
           aggn, dgn, rattn, ffnn, wrong);
    return wrong ? 1 : 0;
}

static std::vector<uint64_t> parse_counts(const char *s)
{
    std::vector<uint64_t> v;
    while (s && *s) {
        char *end;
        const unsigned long long x = strtoull(s, &end, 10);
        if (end == s || x == 0) {
            fprintf(stderr, "test_scale: bad count list near \"%s\"\n", s);
            exit(2);
        }
        v.push_back(x);
        s = *end == ',' ? end + 1 : end;
    }
    return v;
}

int main(int argc, char **argv)
{
    const bool soak = argc > 1 && !strcmp(argv[1], "soak");
    const double soak_s = soak && argc > 2 ? atof(argv[2]) : 60.0;
    const int reps = soak ? 1 : argc > 1 ? atoi(argv[1]) : 20;
    const std::vector<uint64_t> counts =
        parse_counts(!soak && argc > 2 ? argv[2] : "1,7,65537,1000003");
    if (reps < 1 || soak_s <= 0) {
        fprintf(stderr, "usage: test_scale [reps [count,count,...]] | soak SECONDS [SEED]\n");
        return 2;
    }
    MK(mkCommInit(&g_comm, NULL));
    MK(mkCommRank(g_comm, &g_rank));
    MK(mkCommSize(g_comm, &g_n));
    int dev, nodes;
    MK(mkCommCuDevice(g_comm, &dev));
    MK(mkCommNodeCount(g_comm, &nodes));
    if (dev < 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    if (g_n > 255) {
        printf("SKIP: more than 255 ranks (the exact-sum inputs need nranks * Q < 256)\n");
        return 77;
    }
    g_q = 255 / g_n;
    for (int dt = 0; dt < 3; dt++)
        for (int q = -255; q <= 255; q++) g_bits[dt][q + 255] = bits_of(q, dt);
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    uint64_t base = ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock();
    if (soak && argc > 3) base = strtoull(argv[3], NULL, 0);
    if (g_comm->boot->bcast(g_comm->boot_ctx, &base, sizeof base, 0) != mkSuccess) {
        fprintf(stderr, "rank %d: bcast of the seed failed\n", g_rank);
        return 2;
    }
    if (soak) {
        if (g_rank == 0)
            printf("test_scale soak: %d ranks on %d nodes, %.0f s, seed 0x%llx (test_scale soak "
                   "%.0f 0x%llx replays it)\n", g_n, nodes, soak_s, (unsigned long long)base,
                   soak_s, (unsigned long long)base);
        fflush(stdout);
        const int bad = run_soak(soak_s, base);
        MK(mkCommDestroy(g_comm));
        return bad;
    }
    uint64_t maxc = 0;
    for (uint64_t c : counts) maxc = c > maxc ? c : maxc;
    const size_t big = maxc * (size_t)g_n * 4;
    CK(cudaMalloc(&g_send, big));
    CK(cudaMalloc(&g_recv, big));
    CK(cudaHostAlloc((void **)&g_host, big, cudaHostAllocDefault));
    if (g_rank == 0)
        printf("test_scale: %d ranks on %d nodes, %d repetitions, inputs q/16 with |q| <= %d, "
               "seed 0x%llx\n", g_n, nodes, reps, g_q, (unsigned long long)base);
    int wrong = 0, configs = 0;
    for (int op = AG; op <= A2A; op++)
        for (int dt = mkBfloat16; dt <= mkFloat32; dt++)
            for (uint64_t count : counts)
                for (int inplace = 0; inplace < (op == A2A ? 1 : 2); inplace++) {
                    const config c = {op, dt, inplace, count};
                    const int w = run_config(c, base, reps);
                    wrong += w;
                    configs++;
                    if (g_rank == 0 && count == maxc)
                        printf("%s rank 0: %s %s count %llu %s x %d\n", w ? "FAIL" : "PASS",
                               op_names[op], dt_names[dt], (unsigned long long)count,
                               inplace ? "in place" : "out of place", reps);
                }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) {
        printf("FAIL rank %d: async error %s: %s\n", g_rank, mkGetErrorString(ae),
               mkGetLastError(g_comm));
        wrong++;
    }
    printf("%s rank %d: %d configurations x %d calls, %d wrong\n", wrong ? "FAIL" : "DONE",
           g_rank, configs, reps, wrong);
    CK(cudaFree(g_send));
    CK(cudaFree(g_recv));
    CK(cudaFreeHost(g_host));
    MK(mkCommDestroy(g_comm));
    return wrong ? 1 : 0;
}
