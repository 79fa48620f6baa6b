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
 * The soak's calls include the fused GEMMs too (about one in four):
 * mkGemmReduceScatter and mkGemmAllReduce of a random shape (m 1 to 1024,
 * decode sizes often; n and k multiples of 8; either B layout; bf16 or
 * fp16).  Their inputs are q / 16 with |q| <= 2, so every product is a
 * multiple of 1/256 and every sum, in any order, exact in fp32: the one
 * rounding at the end gives the same bits as the host's integer sum
 * rounded once.  Up to 2048 elements of each C are checked (all of a small
 * one), at positions drawn from the call's seed.
 *
 * And, where the communicator is one node, mkMoEDispatch + mkMoECombine
 * pairs (about one call in nine): 0 to 96 tokens per rank, top-1 to
 * top-8 of P to 8 P experts with empty slots, hidden 8 to 520, every
 * dtype, capacity exactly the rows needed or up to 3 more; the layout
 * checked exactly, sampled rows and outputs by value (exact: see
 * mcall).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* One mkMoEDispatch + mkMoECombine pair (one node only): every rank's
 * tokens, routing, weights and x come from (seed, rank), so every rank
 * knows the whole layout.  x is q / 16 with |q| <= 2 and the weights
 * 2^-2 .. 2; the combine gets recv itself as y, so out[t] = x[t] times the
 * sum of t's weights: exact in fp32 and in every dtype (+0 for a token
 * with no expert). */
struct mcall {
    int dt;
    int64_t hidden, topk, experts, cap;
    uint64_t seed;
};

static int64_t mtokens(const mcall &m, int r) { return (int64_t)(qval(m.seed, r, 1u << 30, 48) + 48); }
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
    int64_t most = 0;
    for (int64_t r : mlayout_of(m).rows) most = r > most ? r : most;
    m.cap = most + (int64_t)(soak_rng_fwd(st) % 4); /* now and then exactly enough */
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

/* ---- soak -------------------------------------------------------------- */

static uint64_t soak_rng(uint64_t *st) { return soak_rng_fwd(st); }

static int64_t soak_pick(uint64_t *st, const int64_t *v, int nv)
{
    return v[soak_rng(st) % (uint64_t)nv];
}

enum { SOAK_MAXC = 1u << 20, SOAK_BATCH = 12 };

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
    char *pool[2][2]; /* [registered?][send/recv] */
    void *reg[2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) CK(cudaMalloc(&pool[k][j], slot * SOAK_BATCH));
    MK(mkCommRegister(g_comm, pool[1][0], slot * SOAK_BATCH, &reg[0]));
    MK(mkCommRegister(g_comm, pool[1][1], slot * SOAK_BATCH, &reg[1]));
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
    /* the MoE calls (one node only): the largest capacity, row and top-k
     * (their heap banks) and the most experts (the per-CTA counts) */
    int nodes = 0;
    MK(mkCommNodeCount(g_comm, &nodes));
    const int moe_ok = nodes == 1;
    if (moe_ok) {
        const mcall m = {mkFloat32, 520, 8, 8 * (int64_t)g_n, (int64_t)g_n * 96 * 8 + 3, 1};
        MK(mcall_run(m, pool[0][0], pool[0][1]));
    }
    CK(cudaStreamSynchronize(g_st));
    uint64_t st = seed;
    long calls = 0, batches = 0, graphs = 0, zero = 0, wrong = 0, fusedn = 0, moen = 0;
    const double t0 = (double)clock_gettime_ns() / 1e9;
    for (;;) {
        int go = g_rank == 0 ? (double)clock_gettime_ns() / 1e9 - t0 < seconds : 0;
        if (g_comm->boot->bcast(g_comm->boot_ctx, &go, sizeof go, 0) != mkSuccess) {
            printf("FAIL rank %d: soak: bcast: %s\n", g_rank, mkGetLastError(NULL));
            return 1;
        }
        if (!go) break;
        const int n = 1 + (int)(soak_rng(&st) % SOAK_BATCH);
        const int registered = (int)(soak_rng(&st) & 1), graph = (soak_rng(&st) % 4) == 0;
        config cs[SOAK_BATCH];
        gcall gs[SOAK_BATCH];
        mcall mcs[SOAK_BATCH];
        int fused[SOAK_BATCH]; /* 1: a fused GEMM, 2: a MoE pair */
        uint64_t seeds[SOAK_BATCH];
        void *outs[SOAK_BATCH];
        cudaGraph_t g = nullptr;
        if (graph) CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < n; i++) {
            config &c = cs[i];
            const int kind = (int)(soak_rng(&st) % (moe_ok ? 9 : 8)); /* 6, 7: a fused GEMM; 8: MoE */
            fused[i] = kind == 8 ? 2 : kind >= 6;
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
            if (fused[i] == 2) {
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
           "of count 0, %ld fused GEMMs, %ld MoE dispatch + combine pairs), %ld wrong\n",
           wrong ? "FAIL" : "DONE", g_rank, seconds, calls, batches, graphs, zero, fusedn, moen,
           wrong);
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
