/*
 * test_moe.cu - mkMoEDispatch, mkMoECombine and mkMoEDispatchGemm on the
 * GPU, one process per rank (mpirun; PMIx bootstrap): 2 GPUs, 1 GPU with
 * 2, 4 or 8 ranks under MPS.
 *
 *   test_moe correct [LIST]  routing cases (below) x bf16, fp16, fp32, each
 *                            4 times with fresh inputs ("correct 0,3,11":
 *                            only those cases of the list)
 *   test_moe gemm [LIST]     mkMoEDispatchGemm then mkMoECombine of its y:
 *                            7 routing cases (g_gcases: uniform top-8 of
 *                            64P with hidden 1024 / transW 1 and hidden 512
 *                            / transW 0, skewed top-2, a rank with 0
 *                            tokens, experts with none, slots of -1, an
 *                            expert named twice; n 264 or 512) x bf16,
 *                            fp16, each 2 times with fresh inputs
 *   test_moe stress          100 dispatch + combine pairs of different
 *                            shapes, routings and dtypes, no host sync
 *                            between them, every result checked at the end
 *   test_moe graph           dispatch + the test's expert kernel + combine
 *                            captured in a CUDA graph, replayed 20 times
 *                            with fresh inputs (and routing) written into
 *                            the same buffers, every replay checked
 *   test_moe overflow        recv_capacity one row short on one rank, an
 *                            expert id = experts, an expert id = -2: each on
 *                            a fresh communicator (mkCommSplit), the call
 *                            returns mkSuccess, every rank's
 *                            mkCommGetAsyncError then reports
 *                            mkErrInvalidArgument, nothing written anywhere;
 *                            the first communicator still works after
 *   test_moe badinput        arguments the host refuses: the error, its
 *                            message, nothing written, then a good call;
 *                            the same for mkMoEDispatchGemm (W or y NULL,
 *                            n 0 or not a multiple of 8, transW 2, transW
 *                            0 with hidden not a multiple of 64: invalid;
 *                            fp32: mkErrUnsupported)
 *   test_moe nocall          rank 1 skips a dispatch: the others fail with
 *                            mkErrTimeout naming rank 1 (set MK_TIMEOUT_MS;
 *                            across nodes the call itself returns it, from
 *                            the exchange of the token counts)
 *   test_moe combinebad      virtual nodes: a combine whose layout one rank
 *                            cannot read (expert_offsets over the capacity,
 *                            a send_rows row past its expert's rank's rows):
 *                            out untouched on every rank, the rank that
 *                            found it mkErrInvalidArgument naming the
 *                            culprit, the others mkErrRemote naming it
 *   test_moe multinode       virtual nodes (MK_NODE_SIZE=1, or 2 at 4
 *                            ranks): the communicator spans nodes, then
 *                            correct, gemm and layer (every case: the
 *                            calls as their sequence across nodes)
 *   test_moe layer [LIST]    mkMoEDispatchFfnCombine (the whole expert
 *                            layer): 13 cases (g_lcases: hidden 136 to
 *                            1024, odd ones 200 and 264 with transW 1,
 *                            inter 64 to 328; 2 to 4 and 16 or 32 experts
 *                            per rank; top-1, 2, 4, 8; random, skewed, all
 *                            tokens to one expert, experts with no token,
 *                            slots of -1, an expert named twice, nothing
 *                            routed; tokens differing per rank with a rank
 *                            of 0; topk_weights given and NULL; capacity
 *                            with slack, exact, 0; and hidden 2048, inter
 *                            1024, 64 experts, top-8, 2048 tokens, 49 of
 *                            them checked) x bf16, fp16 x transW 1 and 0
 *                            (where hidden and inter allow it), each built
 *                            once and called 4 times, out poisoned before
 *                            each call
 *   test_moe layergraph      three such calls captured in a CUDA graph,
 *                            replayed 20 times with fresh x and routing,
 *                            every replay checked
 *   test_moe layeroverflow   as overflow, for mkMoEDispatchFfnCombine: out
 *                            untouched on every rank; then a good call on
 *                            the first communicator
 *   test_moe layerbad        its arguments the host refuses (fp32:
 *                            mkErrUnsupported; inter or hidden not a
 *                            multiple of 8, transW 0 with hidden or inter
 *                            not of 64, transW 2, W13, W2 or out NULL, out
 *                            overlapping x or W2, x or out misaligned,
 *                            topk 0, capacity -1: mkErrInvalidArgument):
 *                            nothing written, the communicator healthy,
 *                            then a good call
 *   test_moe time [TxHxExK]  dispatch and combine alone, per-call medians
 *                            (default 4096x7168x256x8: tokens per rank,
 *                            hidden, experts, top-k; mkbench moe is the
 *                            benchmark)
 *
 * Every check (on every rank): recv, recv_weights, recv_src, send_rows,
 * expert_offsets, y and out poisoned before the call (data and floats
 * 0xFF bytes: NaN in every dtype; int32/int64 arrays 0xA5 bytes, which
 * -1 is not); expert_offsets exactly; every received row bit for bit (a
 * copy) at its place (by local expert, then source rank, then (t, j) of
 * the source); recv_src and recv_weights exactly; the rows of recv past
 * off[El] still poison; send_rows exactly (the row on the expert's rank).
 * Then y = round(recv * 0.5 + c(expert)) by a kernel of this test, in
 * dtype, and mkMoECombine: out against a host sum in double of the same y
 * values (rebuilt on the host), within the dtype's one rounding (2^-7
 * bf16, 2^-10 fp16) plus fp32's products and sum ((2 topk + 2) 2^-24:
 * 1.1e-6 at top-8), relative to the sum of |terms| (fp16: plus 2^-24,
 * its subnormals' step); a token with no expert exactly 0.  Inputs come from a
 * hash of (seed, rank, call), so every rank builds every rank's x,
 * topk_idx and topk_weights and the expected layout without
 * communicating; the seed is printed (MK_SEED repeats a run).
 *
 * gemm: W (El stacked matrices, transW 1: n x hidden each, 0: hidden x n)
 * from another stream of the same hash, so every rank rebuilds any
 * expert's W; recv_capacity the largest rank's rows plus 0 to 300 rows of
 * slack.  Poisoned as above: y, out, recv_src, recv_weights, send_rows,
 * expert_offsets.  The expected layout is mkMoEDispatch's, y's rows where
 * recv's would be:
 * expert_offsets and send_rows exactly; recv_src and recv_weights exactly;
 * y's rows past off[El] still poison; y on every row (at most 512 of them,
 * spread evenly) in full against x_t op(W_e) in double from the source's
 * x, within 2^-7 (bf16) / 2^-10 (fp16) + 1e-5 of the sum of |terms|
 * (fp16: plus 2^-24); then mkMoECombine of y (hidden = n): out against the
 * host's weighted sum in double of the host's y, within the combine's
 * tolerance above (of the sum of |w| (|y| + y's tolerance)) plus the sum
 * of |w| times y's tolerance.
 *
 * layer: W13 and W2 (El experts each, in the layout transW says) from two
 * more streams of the hash, of (seed, rank, the call's number), scaled by
 * a power of two near 2 / sqrt(fan in) (x in [-1, 1)), so that every value
 * is O(1) and every rank rebuilds any expert.  The host's reference, in
 * double, rounds where the call does: h = silu(g) u to dtype, each
 * expert's output row to dtype, then the weighted sum; out against it on
 * every element of every token (at most 512 a rank; past that 49 spread
 * evenly), within a few ulps of dtype at the row's magnitude (lcheck says
 * why); every token's row free of poison, a token with no expert exactly
 * 0.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "mkernel.h"

static int g_rank, g_n;
static mkComm_t g_comm;
static uint64_t g_seed;
static cudaStream_t g_st;

#define MKT_EXIT_MK 3
#include "check.h"
#include "fill.cuh"

/* Poison bytes: data, y, out and recv_weights 0xFF (NaN in bf16, fp16
 * and fp32); recv_src, send_rows and expert_offsets 0xA5 (not -1, the
 * value of an empty slot). */
#define POISON_DATA 0xFF
#define POISON_INT 0xA5

static const char *dt_name(int dt) { return dt == 0 ? "bf16" : dt == 1 ? "fp16" : "fp32"; }
static size_t dt_bytes(int dt) { return dt == 2 ? 4 : 2; }

/* ---- values --------------------------------------------------------- */

static uint64_t seed_of(int rank, int call)
{
    return g_seed * 1000003ull + (uint64_t)call * 131ull + (uint64_t)rank * 7ull;
}

__host__ __device__ __forceinline__ float expert_const(int64_t g)
{
    return (float)((int)(g % 13) - 6) * 0.0625f; /* exact in every dtype */
}

__device__ __forceinline__ float ld_dt(const void *p, size_t i, int dt)
{
    if (dt == 0) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dt == 1) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ void st_dt(void *p, size_t i, float v, int dt)
{
    if (dt == 0) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else if (dt == 1) ((__half *)p)[i] = __float2half(v);
    else ((float *)p)[i] = v;
}

/* x: n elements of dtype dt from (seed, index), in [-1, 1). */
__global__ void fill_x(void *p, size_t n, uint64_t seed, int dt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        st_dt(p, i, hash_val(seed * 0x9e3779b97f4a7c15ull + i), dt);
}

/* The experts' outputs: y[i] = round(recv[i] * 0.5 + c(global expert of
 * row i)) for the rows [0, off[el]) of this rank (row i's expert found in
 * off); the rows past off[el] are left alone (poison). */
__global__ void make_y(const void *recv, void *y, const int64_t *off, int64_t el, int64_t cap,
                       int64_t hidden, int dt, int64_t first_expert)
{
    int64_t rows = off[el];
    if (rows < 0 || rows > cap) rows = 0; /* a wrong layout: the check says so */
    const size_t n = (size_t)rows * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int64_t r = (int64_t)(i / hidden);
        int64_t lo = 0, hi = el; /* off[lo] <= r < off[hi] */
        while (hi - lo > 1) {
            const int64_t mid = (lo + hi) / 2;
            if (off[mid] <= r) lo = mid;
            else hi = mid;
        }
        st_dt(y, i, ld_dt(recv, i, dt) * 0.5f + expert_const(first_expert + lo), dt);
    }
}

/* The host's copies of what the GPU computes. */
static float round_dt(float v, int dt)
{
    if (dt == 0) return __bfloat162float(__float2bfloat16(v));
    if (dt == 1) return __half2float(__float2half(v));
    return v;
}

static uint32_t bits_dt(float v, int dt)
{
    if (dt == 0) {
        __nv_bfloat16 b = __float2bfloat16(v);
        uint16_t u;
        memcpy(&u, &b, 2);
        return u;
    }
    if (dt == 1) {
        __half h = __float2half(v);
        uint16_t u;
        memcpy(&u, &h, 2);
        return u;
    }
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

static float x_val(int q, int call, size_t i)
{
    return hash_val(seed_of(q, call) * 0x9e3779b97f4a7c15ull + i);
}

static double bits_to_double(const unsigned char *p, int dt)
{
    if (dt == 2) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t u;
    memcpy(&u, p, 2);
    return half_bits_val(u, dt);
}

/* ---- routing -------------------------------------------------------- */

struct Rng {
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    uint32_t below(uint64_t n) { return (uint32_t)(next() % n); }
    double unit() { return (double)(next() >> 11) / 9007199254740992.0; }
};

enum Kind {
    UNIFORM, /* top-k of distinct random experts */
    SKEW,    /* the hot expert in min(1, 0.3 topk) of the tokens: ~30% of
                the slots where top-k allows it (topk <= 3) */
    ONE,     /* every token's slot 0 names the hot expert */
    SPARSE,  /* only experts g % 3 == 0, none of rank 1's: experts and a
                rank with no rows */
    HOLES,   /* uniform, then slots of -1 (30%) and every 5th token with no
                expert at all */
    DUP,     /* slots drawn with replacement: a token names an expert twice */
    NONE,    /* every slot -1 */
    NKINDS
};
static const char *kind_name[] = {"uniform", "skewed", "one expert", "sparse",
                                  "slots of -1", "repeated", "none"};

struct Route {
    int64_t tokens = 0;
    std::vector<int32_t> idx; /* tokens * topk */
    std::vector<float> w;     /* tokens * topk */
};

/* Token t of route r names at least one expert in [0, experts). */
static bool has_expert(const Route &r, int64_t t, int64_t topk, int64_t experts)
{
    for (int64_t j = 0; j < topk; j++) {
        const int32_t gx = r.idx[(size_t)(t * topk + j)];
        if (gx >= 0 && gx < experts) return true;
    }
    return false;
}

/* Rank q's routing of call `call`: the same on every rank. */
static Route make_route(int kind, int q, int call, int64_t tokens, int64_t topk, int64_t experts,
                        int64_t hot)
{
    Route r;
    r.tokens = tokens;
    r.idx.assign((size_t)(tokens * topk), -1);
    r.w.assign((size_t)(tokens * topk), 0.0f);
    Rng g{seed_of(q, call) ^ 0x5bd1e995ull * (uint64_t)(kind + 1)};
    const int64_t el = experts / g_n;
    std::vector<int32_t> allow;
    if (kind == SPARSE)
        for (int64_t e = 0; e < experts; e++)
            if (e % 3 == 0 && (g_n == 1 || e / el != 1)) allow.push_back((int32_t)e);
    const int64_t pool = kind == SPARSE ? (int64_t)allow.size() : experts;
    auto draw = [&](int32_t *slots, int64_t avoid) -> int32_t {
        for (int tries = 0; tries < 10000; tries++) {
            const int32_t e = kind == SPARSE ? allow[g.below(allow.size())]
                                             : (int32_t)g.below((uint64_t)experts);
            if (e == avoid) continue;
            bool seen = false;
            for (int64_t j = 0; j < topk; j++) seen |= slots[j] == e;
            if (!seen) return e;
        }
        return -1; /* the pool is used up: an empty slot */
    };
    const double p_hot = std::min(1.0, 0.3 * (double)topk);
    for (int64_t t = 0; t < tokens; t++) {
        int32_t *s = &r.idx[(size_t)(t * topk)];
        for (int64_t j = 0; j < topk; j++)
            r.w[(size_t)(t * topk + j)] = (float)((g.next() >> 40) + (1u << 22)) / (float)(1u << 24);
        switch (kind) {
        case UNIFORM:
        case SPARSE:
        case HOLES:
            for (int64_t j = 0; j < std::min(topk, pool); j++) s[j] = draw(s, -1);
            if (kind == HOLES) {
                for (int64_t j = 0; j < topk; j++)
                    if (t % 5 == 0 || g.unit() < 0.3) s[j] = -1;
            }
            break;
        case SKEW: {
            const bool with_hot = g.unit() < p_hot;
            const int64_t jh = with_hot ? (int64_t)g.below((uint64_t)topk) : -1;
            if (with_hot) s[jh] = (int32_t)hot;
            for (int64_t j = 0; j < std::min(topk, experts - 1); j++)
                if (j != jh) s[j] = draw(s, hot);
            break;
        }
        case ONE:
            s[0] = (int32_t)hot;
            for (int64_t j = 1; j < std::min(topk, experts); j++) s[j] = draw(s, hot);
            break;
        case DUP:
            for (int64_t j = 0; j < topk; j++) s[j] = (int32_t)g.below((uint64_t)experts);
            break;
        default: break; /* NONE */
        }
    }
    return r;
}

/* What every rank's call must give this rank: the layout of recv (by
 * local expert, then source rank, then (t, j) of the source) and this
 * rank's send_rows. */
struct Expect {
    std::vector<int64_t> rows; /* per rank */
    int64_t max_rows = 0, rows_me = 0;
    std::vector<int64_t> off;       /* El + 1 */
    std::vector<int32_t> src;       /* 2 per row */
    std::vector<float> rw;          /* per row */
    std::vector<int32_t> send_rows; /* this rank's tokens * topk */
    int64_t cross_rows = 0;         /* unique (t, rank != me) rows this rank sends */
};

static Expect expect_of(const std::vector<Route> &rt, int64_t topk, int64_t experts)
{
    Expect ex;
    const int64_t el = experts / g_n;
    std::vector<int64_t> cnt((size_t)experts, 0), cur((size_t)experts, 0);
    for (int q = 0; q < g_n; q++)
        for (int32_t g : rt[q].idx)
            if (g >= 0 && g < experts) cnt[(size_t)g]++;
    ex.rows.assign((size_t)g_n, 0);
    for (int d = 0; d < g_n; d++) {
        int64_t acc = 0;
        for (int64_t e = 0; e < el; e++) {
            cur[(size_t)(d * el + e)] = acc;
            acc += cnt[(size_t)(d * el + e)];
        }
        ex.rows[(size_t)d] = acc;
        ex.max_rows = std::max(ex.max_rows, acc);
    }
    ex.rows_me = ex.rows[(size_t)g_rank];
    ex.off.resize((size_t)el + 1);
    for (int64_t e = 0; e < el; e++) ex.off[(size_t)e] = cur[(size_t)(g_rank * el + e)];
    ex.off[(size_t)el] = ex.rows_me;
    ex.src.assign((size_t)(2 * ex.rows_me), -1);
    ex.rw.assign((size_t)ex.rows_me, 0.0f);
    ex.send_rows.assign(rt[(size_t)g_rank].idx.size(), -1);
    for (int q = 0; q < g_n; q++) {
        const Route &r = rt[(size_t)q];
        for (size_t i = 0; i < r.idx.size(); i++) {
            const int32_t g = r.idx[i];
            if (g < 0 || g >= experts) continue;
            const int64_t row = cur[(size_t)g]++;
            if (q == g_rank) ex.send_rows[i] = (int32_t)row;
            if (g / el == g_rank) {
                ex.src[(size_t)(2 * row)] = q;
                ex.src[(size_t)(2 * row + 1)] = (int32_t)i;
                ex.rw[(size_t)row] = r.w[i];
            }
        }
    }
    const Route &me = rt[(size_t)g_rank];
    for (int64_t t = 0; t < me.tokens; t++) {
        std::vector<char> to((size_t)g_n, 0);
        for (int64_t j = 0; j < topk; j++) {
            const int32_t g = me.idx[(size_t)(t * topk + j)];
            if (g >= 0 && g < experts) to[(size_t)(g / el)] = 1;
        }
        for (int d = 0; d < g_n; d++) ex.cross_rows += d != g_rank && to[(size_t)d];
    }
    return ex;
}

/* ---- one dispatch + combine ------------------------------------------ */

struct Call {
    std::string name;
    int dt = 0, call = 0;
    int64_t hidden = 0, topk = 0, experts = 0, cap = 0;
    int use_w = 1, use_src = 1, recv_null = 0;
    int64_t n = 0;  /* mkMoEDispatchGemm: y's columns (0: a dispatch + combine call) */
    int transW = 1; /* mkMoEDispatchGemm, mkMoEDispatchFfnCombine: the weights' layout */
    int64_t inter = 0; /* mkMoEDispatchFfnCombine: the experts' intermediate size */
    int wcall = 0;     /* mkMoEDispatchFfnCombine: the call number its weights come from */
    std::vector<Route> rt; /* every rank's */
    Expect ex;
    void *x = nullptr, *recv = nullptr, *y = nullptr, *out = nullptr;
    void *W = nullptr; /* mkMoEDispatchGemm: this rank's El stacked weights (and
                          mkMoEDispatchFfnCombine's W13) */
    void *W2 = nullptr; /* mkMoEDispatchFfnCombine: this rank's El down projections */
    int32_t *idx = nullptr, *rsrc = nullptr, *send_rows = nullptr;
    float *w = nullptr, *rw = nullptr;
    int64_t *off = nullptr;
    int64_t tokens() const { return rt[(size_t)g_rank].tokens; }
    int64_t el() const { return experts / g_n; }
    size_t x_bytes() const { return (size_t)(tokens() * hidden) * dt_bytes(dt); }
    size_t recv_bytes() const { return (size_t)(cap * hidden) * dt_bytes(dt); }
    size_t slot_count() const { return (size_t)(tokens() * topk); }
};

static void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    return p;
}

/* The routing in (topk_idx, topk_weights) and the layout out (send_rows,
 * recv weights and sources, expert offsets): every MoE call has them. */
static void layout_alloc(Call &c)
{
    c.idx = (int32_t *)dalloc(c.slot_count() * 4);
    c.w = (float *)dalloc(c.slot_count() * 4);
    c.send_rows = (int32_t *)dalloc(c.slot_count() * 4);
    c.rw = (float *)dalloc((size_t)c.cap * 4);
    c.rsrc = (int32_t *)dalloc((size_t)c.cap * 8);
    c.off = (int64_t *)dalloc((size_t)(c.el() + 1) * 8);
}

static void layout_poison(Call &c)
{
    CK(cudaMemsetAsync(c.rw, POISON_DATA, (size_t)c.cap * 4, g_st));
    CK(cudaMemsetAsync(c.rsrc, POISON_INT, (size_t)c.cap * 8, g_st));
    CK(cudaMemsetAsync(c.send_rows, POISON_INT, c.slot_count() * 4, g_st));
    CK(cudaMemsetAsync(c.off, POISON_INT, (size_t)(c.el() + 1) * 8, g_st));
}

static void call_alloc(Call &c)
{
    c.x = dalloc(c.x_bytes());
    c.recv = c.recv_null ? nullptr : dalloc(c.recv_bytes());
    c.y = dalloc(c.recv_bytes());
    c.out = dalloc(c.x_bytes());
    layout_alloc(c);
}

static void call_free(Call &c)
{
    for (void *p : {c.x, c.recv, c.y, c.out, c.W, c.W2, (void *)c.idx, (void *)c.w,
                    (void *)c.send_rows, (void *)c.rw, (void *)c.rsrc, (void *)c.off})
        if (p) CK(cudaFree(p));
    c.x = c.recv = c.y = c.out = c.W = c.W2 = nullptr;
    c.idx = c.send_rows = c.rsrc = nullptr;
    c.w = c.rw = nullptr;
    c.off = nullptr;
}

/* This rank's x, topk_idx and topk_weights of the call, on g_st. */
static void call_inputs(Call &c)
{
    const Route &r = c.rt[(size_t)g_rank];
    if (c.tokens() > 0) {
        fill_x<<<256, 256, 0, g_st>>>(c.x, (size_t)(c.tokens() * c.hidden), seed_of(g_rank, c.call),
                                      c.dt);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(c.idx, r.idx.data(), r.idx.size() * 4, cudaMemcpyHostToDevice, g_st));
        CK(cudaMemcpyAsync(c.w, r.w.data(), r.w.size() * 4, cudaMemcpyHostToDevice, g_st));
    }
}

static void call_poison(Call &c)
{
    if (c.recv) CK(cudaMemsetAsync(c.recv, POISON_DATA, c.recv_bytes(), g_st));
    CK(cudaMemsetAsync(c.y, POISON_DATA, c.recv_bytes(), g_st));
    CK(cudaMemsetAsync(c.out, POISON_DATA, c.x_bytes(), g_st));
    layout_poison(c);
}

static mkResult_t call_dispatch(Call &c, mkComm_t comm)
{
    return mkMoEDispatch(c.x, c.idx, c.use_w ? c.w : NULL, c.recv, c.use_w ? c.rw : NULL,
                         c.use_src ? c.rsrc : NULL, c.off, c.send_rows, c.tokens(), c.hidden,
                         c.topk, c.experts, c.cap, (mkDataType_t)c.dt, comm, g_st);
}

static void call_y(Call &c)
{
    if (!c.recv) return;
    make_y<<<256, 256, 0, g_st>>>(c.recv, c.y, c.off, c.el(), c.cap, c.hidden, c.dt,
                                  (int64_t)g_rank * c.el());
    CK(cudaGetLastError());
}

static mkResult_t call_combine(Call &c, mkComm_t comm)
{
    return mkMoECombine(c.y, c.off, c.idx, c.use_w ? c.w : NULL, c.send_rows, c.out, c.tokens(),
                        c.hidden, c.topk, c.experts, c.cap, (mkDataType_t)c.dt, comm, g_st);
}

/* A route's numbers for call c (its dtype, shape, capacity slack). */
static void call_route(Call &c, int kind, const std::vector<int64_t> &tokens, int64_t hot,
                       int64_t slack)
{
    c.rt.clear();
    for (int q = 0; q < g_n; q++)
        c.rt.push_back(make_route(kind, q, c.call, tokens[(size_t)q], c.topk, c.experts, hot));
    c.ex = expect_of(c.rt, c.topk, c.experts);
    c.cap = slack < 0 ? 0 : c.ex.max_rows + slack;
}

/* Host copies of the outputs. */
struct Got {
    std::vector<int64_t> off;
    std::vector<int32_t> send_rows, rsrc;
    std::vector<float> rw;
    std::vector<unsigned char> recv, out;
};

/* The layout, `rows` (rows_bytes: recv, or mkMoEDispatchGemm's y) into
 * g.recv and out (out_bytes) into g.out. */
static Got fetch_rows(const Call &c, const void *rows, size_t rows_bytes, size_t out_bytes)
{
    Got g;
    g.off.resize((size_t)c.el() + 1);
    g.send_rows.resize(c.slot_count());
    g.rsrc.resize((size_t)c.cap * 2);
    g.rw.resize((size_t)c.cap);
    g.recv.resize(rows_bytes);
    g.out.resize(out_bytes);
    CK(cudaMemcpyAsync(g.off.data(), c.off, g.off.size() * 8, cudaMemcpyDeviceToHost, g_st));
    if (!g.send_rows.empty())
        CK(cudaMemcpyAsync(g.send_rows.data(), c.send_rows, g.send_rows.size() * 4,
                           cudaMemcpyDeviceToHost, g_st));
    if (!g.rsrc.empty())
        CK(cudaMemcpyAsync(g.rsrc.data(), c.rsrc, g.rsrc.size() * 4, cudaMemcpyDeviceToHost, g_st));
    if (!g.rw.empty())
        CK(cudaMemcpyAsync(g.rw.data(), c.rw, g.rw.size() * 4, cudaMemcpyDeviceToHost, g_st));
    if (!g.recv.empty())
        CK(cudaMemcpyAsync(g.recv.data(), rows, g.recv.size(), cudaMemcpyDeviceToHost, g_st));
    if (!g.out.empty())
        CK(cudaMemcpyAsync(g.out.data(), c.out, g.out.size(), cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    return g;
}

static Got fetch(const Call &c)
{
    return fetch_rows(c, c.recv, c.recv ? c.recv_bytes() : 0, c.x_bytes());
}

static bool all_bytes(const void *p, size_t n, int byte)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)byte) return false;
    return true;
}

/* The first few differences of a check, each on its own line. */
__attribute__((format(printf, 3, 4))) static void note(int &shown, const char *what,
                                                       const char *fmt, ...)
{
    if (shown++ >= 6) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("rank %d %s: %s\n", g_rank, what, line);
}

/* expert_offsets and send_rows exactly: the differences counted, the
 * first few noted. */
static void check_offsets_rows(const Call &c, const Got &g, const char *what, int &shown,
                               int64_t *bad_off, int64_t *bad_send)
{
    const Expect &ex = c.ex;
    for (int64_t e = 0; e <= c.el(); e++)
        if (g.off[(size_t)e] != ex.off[(size_t)e]) {
            ++*bad_off;
            note(shown, what, "expert_offsets[%lld] = %lld, expected %lld", (long long)e,
                 (long long)g.off[(size_t)e], (long long)ex.off[(size_t)e]);
        }
    for (size_t i = 0; i < ex.send_rows.size(); i++)
        if (g.send_rows[i] != ex.send_rows[i]) {
            ++*bad_send;
            note(shown, what, "send_rows[%zu] (token %lld) = %d, expected %d", i,
                 (long long)(i / (size_t)c.topk), g.send_rows[i], ex.send_rows[i]);
        }
}

/* Everything of call c on this rank; a line per call, the first few
 * differences of each kind before it. */
static int check_got(const Call &c, const Got &g, const char *what, bool combined)
{
    const Expect &ex = c.ex;
    const int64_t el = c.el(), h = c.hidden, rows = ex.rows_me;
    const size_t es = dt_bytes(c.dt), row_bytes = (size_t)h * es;
    int shown = 0;
    /* expert_offsets and send_rows (the row on the expert's rank) */
    int64_t bad_off = 0, bad_send = 0;
    check_offsets_rows(c, g, what, shown, &bad_off, &bad_send);
    /* recv: every row a copy of its source row; past off[El], poison */
    int64_t bad_rows = 0, bad_tail = 0, bad_src = 0, bad_w = 0;
    if (!c.recv_null) {
        for (int64_t r = 0; r < rows; r++) {
            const int q = ex.src[(size_t)(2 * r)];
            const int64_t t = ex.src[(size_t)(2 * r + 1)] / c.topk;
            const unsigned char *got = &g.recv[(size_t)r * row_bytes];
            for (int64_t k = 0; k < h; k++) {
                const uint32_t want = bits_dt(x_val(q, c.call, (size_t)(t * h + k)), c.dt);
                uint32_t have = 0;
                memcpy(&have, got + (size_t)k * es, es);
                if (have != want) {
                    bad_rows++;
                    note(shown, what, "recv row %lld (rank %d token %lld) element %lld differs",
                         (long long)r, q, (long long)t, (long long)k);
                    break;
                }
            }
        }
        for (int64_t r = rows; r < c.cap; r++)
            if (!all_bytes(&g.recv[(size_t)r * row_bytes], row_bytes, POISON_DATA)) {
                bad_tail++;
                note(shown, what, "recv row %lld past off[El] = %lld was written", (long long)r,
                     (long long)rows);
            }
    }
    if (c.use_src)
        for (int64_t r = 0; r < std::min(rows, c.cap); r++)
            if (g.rsrc[(size_t)(2 * r)] != ex.src[(size_t)(2 * r)] ||
                g.rsrc[(size_t)(2 * r + 1)] != ex.src[(size_t)(2 * r + 1)]) {
                bad_src++;
                note(shown, what, "recv_src of row %lld = (%d, %d), expected (%d, %d)",
                     (long long)r, g.rsrc[(size_t)(2 * r)], g.rsrc[(size_t)(2 * r + 1)],
                     ex.src[(size_t)(2 * r)], ex.src[(size_t)(2 * r + 1)]);
            }
    if (c.use_w)
        for (int64_t r = 0; r < std::min(rows, c.cap); r++)
            if (memcmp(&g.rw[(size_t)r], &ex.rw[(size_t)r], 4) != 0) {
                bad_w++;
                note(shown, what, "recv_weights[%lld] = %g, expected %g (rank %d slot %d)",
                     (long long)r, (double)g.rw[(size_t)r], (double)ex.rw[(size_t)r],
                     ex.src[(size_t)(2 * r)], ex.src[(size_t)(2 * r + 1)]);
            }
    /* out: the host's sum in double of the same y values */
    int64_t bad_out = 0, empty_tokens = 0;
    double worst = 0; /* |out - ref| / tol */
    if (combined) {
        const Route &me = c.rt[(size_t)g_rank];
        const double rel = (c.dt == 0 ? 1.0 / 128 : c.dt == 1 ? 1.0 / 1024 : 0.0) +
                           (double)(2 * c.topk + 2) * ldexp(1.0, -24);
        const double floor_abs = c.dt == 1 ? ldexp(1.0, -24) : 1e-37;
        for (int64_t t = 0; t < me.tokens; t++) {
            const bool any = has_expert(me, t, c.topk, c.experts);
            empty_tokens += !any;
            for (int64_t k = 0; k < h; k++) {
                const double o = bits_to_double(&g.out[((size_t)t * h + k) * es], c.dt);
                if (!any) {
                    if (o != 0.0) {
                        bad_out++;
                        note(shown, what, "out[%lld][%lld] = %g for a token with no expert, "
                             "expected 0", (long long)t, (long long)k, o);
                    }
                    continue;
                }
                const float xr = round_dt(x_val(g_rank, c.call, (size_t)(t * h + k)), c.dt);
                double s = 0, sa = 0;
                for (int64_t j = 0; j < c.topk; j++) {
                    const int32_t gx = me.idx[(size_t)(t * c.topk + j)];
                    if (gx < 0 || gx >= c.experts) continue;
                    const double yv = round_dt(xr * 0.5f + expert_const(gx), c.dt);
                    const double term = (c.use_w ? (double)me.w[(size_t)(t * c.topk + j)] : 1.0) * yv;
                    s += term;
                    sa += fabs(term);
                }
                const double tol = rel * sa + floor_abs, err = fabs(o - s);
                if (!(err <= tol)) {
                    bad_out++;
                    note(shown, what, "out[%lld][%lld] = %.9g, expected %.9g (tolerance %.3g)",
                         (long long)t, (long long)k, o, s, tol);
                } else if (err / tol > worst) {
                    worst = err / tol;
                }
            }
        }
    }
    const bool ok = !bad_off && !bad_send && !bad_rows && !bad_tail && !bad_src && !bad_w &&
                    !bad_out;
    printf("rank %d %-52s %s rows %lld/%lld (cap %lld) offsets %s send_rows %s recv %s%s "
           "src %s w %s out %s (worst err/tol %.2f, %lld empty tokens)  %s\n",
           g_rank, what, dt_name(c.dt), (long long)rows, (long long)ex.max_rows,
           (long long)c.cap, bad_off ? "BAD" : "ok", bad_send ? "BAD" : "ok",
           bad_rows ? "BAD" : "ok", bad_tail ? " (tail written)" : "",
           !c.use_src ? "-" : bad_src ? "BAD" : "ok", !c.use_w ? "-" : bad_w ? "BAD" : "ok",
           !combined ? "-" : bad_out ? "BAD" : "ok", worst, (long long)empty_tokens,
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

static int call_check(const Call &c, const char *what, bool combined = true)
{
    return check_got(c, fetch(c), what, combined);
}

/* ---- correct --------------------------------------------------------- */

enum { E_NRANKS, E_64, E_MAX }; /* experts = nranks, 64 * nranks, 4096 (the maximum) */

struct Case {
    const char *name;
    int64_t hidden, topk;
    int emode, kind;
    int64_t tokens;  /* per rank; -1: different on every rank, rank 1 none */
    int use_w, use_src;
    int64_t slack;   /* capacity = the largest rank's rows + slack; -1: 0 and recv NULL */
};

static const Case g_cases[] = {
    {"0 uniform top-8 of 64P, h 7168", 7168, 8, E_64, UNIFORM, 256, 1, 1, 37},
    {"1 uniform top-2 of P, h 1032", 1032, 2, E_NRANKS, UNIFORM, 300, 1, 1, 5},
    {"2 uniform top-1 of P, h 8", 8, 1, E_NRANKS, UNIFORM, 1000, 1, 1, 1},
    {"3 skewed top-8 of 64P, h 1032", 1032, 8, E_64, SKEW, 400, 1, 1, 9},
    {"4 skewed top-2 of 64P, h 4096", 4096, 2, E_64, SKEW, 300, 1, 1, 3},
    {"5 all tokens to one expert, top-1, h 1032", 1032, 1, E_64, ONE, 500, 1, 1, 2},
    {"6 one expert in every slot 0, top-4, h 520", 520, 4, E_64, ONE, 300, 1, 1, 2},
    {"7 experts (rank 1) with no tokens, top-4, h 520", 520, 4, E_64, SPARSE, 300, 1, 1, 11},
    {"8 slots of -1, tokens with none, top-8, h 1032", 1032, 8, E_64, HOLES, 400, 1, 1, 7},
    {"9 tokens differ, a rank with 0, no w/src, h 7168", 7168, 4, E_64, UNIFORM, -1, 0, 0, 5},
    {"10 a token names an expert twice, top-2 of P, h 8", 8, 2, E_NRANKS, DUP, 600, 1, 1, 3},
    {"11 capacity exact, top-8 of 64P, h 256", 256, 8, E_64, UNIFORM, 333, 1, 1, 0},
    {"12 nothing routed: capacity 0, recv NULL, h 64", 64, 4, E_64, NONE, 100, 0, 0, -1},
    {"13 top-32 of 4096 experts (the maxima), h 64", 64, 32, E_MAX, UNIFORM, 150, 1, 1, 4},
};
static const int g_ncases = (int)(sizeof(g_cases) / sizeof(g_cases[0]));

static int64_t experts_of(int emode)
{
    return emode == E_NRANKS ? g_n : emode == E_64 ? 64 * (int64_t)g_n
                                                   : MK_MOE_MAX_EXPERTS / g_n * g_n;
}

static std::vector<int64_t> tokens_of(int64_t spec)
{
    std::vector<int64_t> t((size_t)g_n, spec);
    if (spec < 0) /* different on every rank; rank 1: none, rank 2: one */
        for (int q = 0; q < g_n; q++)
            t[(size_t)q] = q == 1 ? 0 : q == 2 ? 1 : 200 + 61 * q + (q % 2) * 17;
    return t;
}

static void call_of_case(Call &c, const Case &k, int dt, int call)
{
    c.name = k.name;
    c.dt = dt;
    c.call = call;
    c.hidden = k.hidden;
    c.topk = k.topk;
    c.experts = experts_of(k.emode);
    c.use_w = k.use_w;
    c.use_src = k.use_src;
    c.recv_null = k.slack < 0;
    const int64_t hot = (int64_t)((uint64_t)call * 7919u % (uint64_t)c.experts);
    call_route(c, k.kind, tokens_of(k.tokens), hot, k.slack);
}

/* dispatch, y, combine of call c on g_st */
static void call_run(Call &c)
{
    MK(call_dispatch(c, g_comm));
    call_y(c);
    MK(call_combine(c, g_comm));
}

/* "0,3,11" -> {0, 3, 11} */
static std::vector<int> parse_list(const char *only)
{
    std::vector<int> pick;
    if (only) {
        for (const char *p = only; *p;) {
            char *e;
            const long v = strtol(p, &e, 10);
            if (e == p) break;
            pick.push_back((int)v);
            p = *e ? e + 1 : e;
        }
    }
    return pick;
}

static int run_correct(const char *only)
{
    const std::vector<int> pick = parse_list(only);
    int bad = 0;
    for (int i = 0; i < g_ncases; i++) {
        if (only && std::find(pick.begin(), pick.end(), i) == pick.end()) continue;
        for (int dt = 0; dt < 3; dt++)
            for (int rep = 0; rep < 4; rep++) {
                Call c;
                call_of_case(c, g_cases[i], dt, 1 + i * 100 + dt * 10 + rep);
                call_alloc(c);
                call_inputs(c);
                call_poison(c);
                call_run(c);
                char what[96];
                snprintf(what, sizeof what, "%s #%d", g_cases[i].name, rep + 1);
                bad += call_check(c, what);
                call_free(c);
            }
    }
    return bad;
}

/* ---- dispatch + GEMM --------------------------------------------------- */


/* Rank q's W of call `call` (its El experts' matrices one after the
 * other): from a hash of (seed, rank, call) like x, another stream. */
static uint64_t wseed_of(int q, int call)
{
    return seed_of(q, call) ^ 0xa0761d6478bd642full;
}

static size_t gc_y_bytes(const Call &c) { return (size_t)(c.cap * c.n) * dt_bytes(c.dt); }
static size_t gc_out_bytes(const Call &c) { return (size_t)(c.tokens() * c.n) * dt_bytes(c.dt); }
static size_t gc_w_count(const Call &c) { return (size_t)(c.el() * c.n * c.hidden); }

static void gcall_alloc(Call &c)
{
    c.x = dalloc(c.x_bytes());
    c.W = dalloc(gc_w_count(c) * dt_bytes(c.dt));
    c.y = dalloc(gc_y_bytes(c));
    c.out = dalloc(gc_out_bytes(c));
    layout_alloc(c);
}

/* x, topk_idx, topk_weights and this rank's W, on g_st. */
static void gcall_inputs(Call &c)
{
    call_inputs(c);
    if (gc_w_count(c) > 0) {
        fill_x<<<512, 256, 0, g_st>>>(c.W, gc_w_count(c), wseed_of(g_rank, c.call), c.dt);
        CK(cudaGetLastError());
    }
}

static void gcall_poison(Call &c)
{
    CK(cudaMemsetAsync(c.y, POISON_DATA, gc_y_bytes(c), g_st));
    CK(cudaMemsetAsync(c.out, POISON_DATA, gc_out_bytes(c), g_st));
    layout_poison(c);
}

static mkResult_t gcall_dispatch(Call &c, mkComm_t comm)
{
    return mkMoEDispatchGemm(c.x, c.idx, c.use_w ? c.w : NULL, c.W, c.y, c.use_w ? c.rw : NULL,
                             c.use_src ? c.rsrc : NULL, c.off, c.send_rows, c.tokens(), c.hidden,
                             c.n, c.topk, c.experts, c.cap, c.transW, (mkDataType_t)c.dt, comm,
                             g_st);
}

/* The experts' outputs y (n columns) back: mkMoECombine with hidden = n. */
static mkResult_t gcall_combine(Call &c, mkComm_t comm)
{
    return mkMoECombine(c.y, c.off, c.idx, c.use_w ? c.w : NULL, c.send_rows, c.out, c.tokens(),
                        c.n, c.topk, c.experts, c.cap, (mkDataType_t)c.dt, comm, g_st);
}

/* Host copies: y in g.recv (cap x n), out (tokens x n). */
static Got gfetch(const Call &c)
{
    return fetch_rows(c, c.y, gc_y_bytes(c), gc_out_bytes(c));
}

/* The host's expert outputs: op(W_g) of any global expert g (rebuilt from
 * its rank's hash, rounded to dtype, kept k-major: hidden x n) and the
 * row y = x_t op(W_g) of any rank's token in double, with the sum of
 * |terms| per column. */
struct GRef {
    const Call &c;
    std::vector<std::vector<float>> wt; /* per global expert, built when first asked */
    explicit GRef(const Call &cc) : c(cc), wt((size_t)cc.experts) {}
    const std::vector<float> &w_of(int64_t g)
    {
        std::vector<float> &m = wt[(size_t)g];
        if (m.empty()) {
            const int64_t el = c.el(), h = c.hidden, n = c.n;
            const int d = (int)(g / el);
            const size_t base = (size_t)((g % el) * n * h);
            const uint64_t s = wseed_of(d, c.call) * 0x9e3779b97f4a7c15ull;
            m.resize((size_t)(h * n));
            for (int64_t k = 0; k < h; k++)
                for (int64_t j = 0; j < n; j++) {
                    /* transW = 1: W_e is n x hidden, op(W_e)(k, j) = W_e[j][k];
                     * transW = 0: W_e is hidden x n */
                    const size_t i = base + (size_t)(c.transW ? j * h + k : k * n + j);
                    m[(size_t)(k * n + j)] = round_dt(hash_val(s + i), c.dt);
                }
        }
        return m;
    }
    void y_of(int q, int64_t t, int64_t g, std::vector<double> &s, std::vector<double> &sa)
    {
        const int64_t h = c.hidden, n = c.n;
        const std::vector<float> &m = w_of(g);
        s.assign((size_t)n, 0.0);
        sa.assign((size_t)n, 0.0);
        double *ps = s.data(), *pa = sa.data();
        for (int64_t k = 0; k < h; k++) {
            const double xv = round_dt(x_val(q, c.call, (size_t)(t * h + k)), c.dt);
            if (xv == 0) continue;
            const float *wr = &m[(size_t)(k * n)];
            for (int64_t j = 0; j < n; j++) {
                const double p = xv * (double)wr[j];
                ps[j] += p;
                pa[j] += fabs(p);
            }
        }
    }
};

/* The GEMM's tolerance relative to the sum of |terms|: the dtype's one
 * rounding of y (with a factor 2 to spare) plus the fp32 accumulation. */
static double gemm_rel(int dt) { return (dt == 0 ? 1.0 / 128 : 1.0 / 1024) + 1e-5; }
static double gemm_floor(int dt) { return dt == 1 ? ldexp(1.0, -24) : 1e-37; }

#define GEMM_SAMPLE_ROWS 512

/* Everything of a dispatch + GEMM (+ combine) call on this rank. */
static int gcheck(const Call &c, const Got &g, const char *what, bool combined)
{
    const Expect &ex = c.ex;
    const int64_t el = c.el(), n = c.n, rows = ex.rows_me;
    const size_t es = dt_bytes(c.dt), yrow = (size_t)n * es;
    const double rel = gemm_rel(c.dt), flo = gemm_floor(c.dt);
    GRef ref(c);
    std::vector<double> s, sa;
    int shown = 0;
    /* expert_offsets and send_rows (the row on the expert's rank) */
    int64_t bad_off = 0, bad_send = 0;
    check_offsets_rows(c, g, what, shown, &bad_off, &bad_send);
    /* recv_src, recv_weights: exactly on every row */
    int64_t bad_src = 0, bad_w = 0;
    for (int64_t r = 0; r < std::min(rows, c.cap); r++) {
        if (c.use_src) {
            const int32_t *got = &g.rsrc[(size_t)(2 * r)];
            if (got[0] != ex.src[(size_t)(2 * r)] || got[1] != ex.src[(size_t)(2 * r + 1)]) {
                bad_src++;
                note(shown, what, "recv_src of row %lld = (%d, %d), expected (%d, %d)",
                     (long long)r, got[0], got[1], ex.src[(size_t)(2 * r)],
                     ex.src[(size_t)(2 * r + 1)]);
            }
        }
        if (c.use_w) {
            const float *got = &g.rw[(size_t)r];
            if (memcmp(got, &ex.rw[(size_t)r], 4) != 0) {
                bad_w++;
                note(shown, what, "recv_weights[%lld] = %g, expected %g (rank %d slot %d)",
                     (long long)r, (double)*got, (double)ex.rw[(size_t)r],
                     ex.src[(size_t)(2 * r)], ex.src[(size_t)(2 * r + 1)]);
            }
        }
    }
    /* y past off[El]: poison */
    int64_t bad_tail = 0;
    for (int64_t r = rows; r < c.cap; r++)
        if (!all_bytes(&g.recv[(size_t)r * yrow], yrow, POISON_DATA)) {
            bad_tail++;
            note(shown, what, "y row %lld past off[El] = %lld was written", (long long)r,
                 (long long)rows);
        }
    /* y: every row (up to GEMM_SAMPLE_ROWS of them, evenly spread), the
     * full row against the host's x_t op(W_e) in double */
    int64_t bad_y = 0, checked_y = 0;
    double worst_y = 0;
    const size_t nrows = (size_t)std::min(rows, c.cap),
                 pick = std::min<size_t>(nrows, GEMM_SAMPLE_ROWS);
    for (size_t p = 0; p < pick; p++) {
        const int64_t r = (int64_t)(pick == nrows ? p : p * nrows / pick);
        const int q = ex.src[(size_t)(2 * r)];
        const int32_t slot = ex.src[(size_t)(2 * r + 1)];
        const int64_t t = slot / c.topk;
        const int64_t gx = c.rt[(size_t)q].idx[(size_t)slot];
        ref.y_of(q, t, gx, s, sa);
        checked_y++;
        for (int64_t j = 0; j < n; j++) {
            const double v = bits_to_double(&g.recv[(size_t)r * yrow + (size_t)j * es], c.dt);
            const double tol = rel * sa[(size_t)j] + flo, err = fabs(v - s[(size_t)j]);
            if (!(err <= tol)) {
                bad_y++;
                note(shown, what, "y[%lld][%lld] (rank %d token %lld, expert %lld) = %.9g, "
                     "expected %.9g (tolerance %.3g)", (long long)r, (long long)j, q,
                     (long long)t, (long long)gx, v, s[(size_t)j], tol);
                break; /* one per row */
            }
            if (err / tol > worst_y) worst_y = err / tol;
        }
    }
    /* out: the host's sum in double of the weighted host y, within the
     * combine's tolerance plus the GEMM's of every term */
    int64_t bad_out = 0, empty_tokens = 0;
    double worst = 0;
    if (combined) {
        const Route &me = c.rt[(size_t)g_rank];
        const double relc = (c.dt == 0 ? 1.0 / 128 : 1.0 / 1024) +
                            (double)(2 * c.topk + 2) * ldexp(1.0, -24);
        const double floor_abs = c.dt == 1 ? ldexp(1.0, -24) : 1e-37;
        std::vector<double> S((size_t)n), A((size_t)n), TT((size_t)n);
        for (int64_t t = 0; t < me.tokens; t++) {
            const bool any = has_expert(me, t, c.topk, c.experts);
            empty_tokens += !any;
            const unsigned char *orow = &g.out[(size_t)t * yrow];
            if (!any) {
                for (int64_t k = 0; k < n; k++) {
                    const double o = bits_to_double(orow + (size_t)k * es, c.dt);
                    if (o != 0.0) {
                        bad_out++;
                        note(shown, what, "out[%lld][%lld] = %g for a token with no expert, "
                             "expected 0", (long long)t, (long long)k, o);
                        break;
                    }
                }
                continue;
            }
            std::fill(S.begin(), S.end(), 0.0);
            std::fill(A.begin(), A.end(), 0.0);
            std::fill(TT.begin(), TT.end(), 0.0);
            for (int64_t j = 0; j < c.topk; j++) {
                const int32_t gx = me.idx[(size_t)(t * c.topk + j)];
                if (gx < 0 || gx >= c.experts) continue;
                const double wv = c.use_w ? (double)me.w[(size_t)(t * c.topk + j)] : 1.0;
                ref.y_of(g_rank, t, gx, s, sa);
                for (int64_t k = 0; k < n; k++) {
                    const double ty = rel * sa[(size_t)k] + flo; /* y's own error */
                    S[(size_t)k] += wv * s[(size_t)k];
                    A[(size_t)k] += fabs(wv) * (fabs(s[(size_t)k]) + ty);
                    TT[(size_t)k] += fabs(wv) * ty;
                }
            }
            for (int64_t k = 0; k < n; k++) {
                const double o = bits_to_double(orow + (size_t)k * es, c.dt);
                const double tol = relc * A[(size_t)k] + TT[(size_t)k] + floor_abs;
                const double err = fabs(o - S[(size_t)k]);
                if (!(err <= tol)) {
                    bad_out++;
                    note(shown, what, "out[%lld][%lld] = %.9g, expected %.9g (tolerance %.3g)",
                         (long long)t, (long long)k, o, S[(size_t)k], tol);
                } else if (err / tol > worst) {
                    worst = err / tol;
                }
            }
        }
    }
    const bool ok = !bad_off && !bad_send && !bad_src && !bad_w && !bad_tail && !bad_y &&
                    !bad_out;
    printf("rank %d %-52s %s n %lld transW %d rows %lld (largest %lld, cap %lld) offsets %s "
           "send_rows %s src %s w %s y %s%s (%lld rows, worst err/tol %.2f) "
           "out %s (worst err/tol %.2f, %lld empty tokens)  %s\n",
           g_rank, what, dt_name(c.dt), (long long)n, c.transW, (long long)rows,
           (long long)ex.max_rows, (long long)c.cap,
           bad_off ? "BAD" : "ok", bad_send ? "BAD" : "ok",
           !c.use_src ? "-" : bad_src ? "BAD" : "ok", !c.use_w ? "-" : bad_w ? "BAD" : "ok",
           bad_y ? "BAD" : "ok", bad_tail ? " (tail written)" : "", (long long)checked_y,
           worst_y, !combined ? "-" : bad_out ? "BAD" : "ok", worst, (long long)empty_tokens,
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

/* Everything a refused dispatch + GEMM may write still the poison? */
static int guntouched(const Call &c, const char *what)
{
    const Got g = gfetch(c);
    const bool y = all_bytes(g.recv.data(), g.recv.size(), POISON_DATA);
    const bool o = all_bytes(g.off.data(), g.off.size() * 8, POISON_INT);
    const bool s = all_bytes(g.send_rows.data(), g.send_rows.size() * 4, POISON_INT);
    const bool src = all_bytes(g.rsrc.data(), g.rsrc.size() * 4, POISON_INT);
    const bool w = all_bytes(g.rw.data(), g.rw.size() * 4, POISON_DATA);
    const bool out = all_bytes(g.out.data(), g.out.size(), POISON_DATA);
    const bool ok = y && o && s && src && w && out;
    printf("rank %d %s: y %s, expert_offsets %s, send_rows %s, recv_src %s, recv_weights %s, "
           "out %s  %s\n", g_rank, what, y ? "untouched" : "WRITTEN", o ? "untouched" : "WRITTEN",
           s ? "untouched" : "WRITTEN", src ? "untouched" : "WRITTEN",
           w ? "untouched" : "WRITTEN", out ? "untouched" : "WRITTEN", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

struct GCase {
    const char *name;
    int64_t hidden, topk;
    int emode, kind;
    int64_t tokens; /* per rank; -1: different on every rank, rank 1 none */
    int use_w, use_src;
    int64_t n;      /* y's columns */
    int transW;
};

/* capacity: the largest rank's rows + a random slack of 0 to 300 */
static const GCase g_gcases[] = {
    {"0 uniform top-8 of 64P, h 1024, n 264, transW 1", 1024, 8, E_64, UNIFORM, 256, 1, 1, 264, 1},
    {"1 uniform top-8 of 64P, h 512, n 512, transW 0", 512, 8, E_64, UNIFORM, 256, 1, 1, 512, 0},
    {"2 skewed top-2 of 64P, h 1024, n 512", 1024, 2, E_64, SKEW, 600, 1, 1, 512, 1},
    {"3 tokens differ, a rank with 0, no w/src, n 264", 512, 4, E_64, UNIFORM, -1, 0, 0, 264, 1},
    {"4 experts (rank 1) with no tokens, top-4, transW 0", 512, 4, E_64, SPARSE, 300, 1, 1, 264, 0},
    {"5 slots of -1, tokens with none, top-8, n 264", 1024, 8, E_64, HOLES, 256, 1, 1, 264, 1},
    {"6 a token names an expert twice, top-2 of P, n 512", 512, 2, E_NRANKS, DUP, 600, 1, 1, 512, 1},
};
static const int g_ngcases = (int)(sizeof(g_gcases) / sizeof(g_gcases[0]));

static void gcall_of_case(Call &c, const GCase &k, int dt, int call)
{
    c.name = k.name;
    c.dt = dt;
    c.call = call;
    c.hidden = k.hidden;
    c.topk = k.topk;
    c.experts = experts_of(k.emode);
    c.use_w = k.use_w;
    c.use_src = k.use_src;
    c.n = k.n;
    c.transW = k.transW;
    const int64_t hot = (int64_t)((uint64_t)call * 7919u % (uint64_t)c.experts);
    Rng r{seed_of(0, call) ^ 0x2545f4914f6cdd1dull}; /* the same on every rank */
    call_route(c, k.kind, tokens_of(k.tokens), hot, (int64_t)r.below(301));
}

static int run_gemm(const char *only)
{
    const std::vector<int> pick = parse_list(only);
    int bad = 0;
    for (int i = 0; i < g_ngcases; i++) {
        if (only && std::find(pick.begin(), pick.end(), i) == pick.end()) continue;
        for (int dt = 0; dt < 2; dt++)
            for (int rep = 0; rep < 2; rep++) {
                Call c;
                gcall_of_case(c, g_gcases[i], dt, 20001 + i * 100 + dt * 10 + rep);
                gcall_alloc(c);
                gcall_inputs(c);
                gcall_poison(c);
                MK(gcall_dispatch(c, g_comm));
                MK(gcall_combine(c, g_comm));
                char what[96];
                snprintf(what, sizeof what, "%s #%d", g_gcases[i].name, rep + 1);
                bad += gcheck(c, gfetch(c), what, true);
                call_free(c);
            }
    }
    return bad;
}

/* ---- stress ---------------------------------------------------------- */

static int run_stress(void)
{
    const int calls = 100;
    static const int64_t hiddens[] = {8, 520, 1032, 2048, 64, 4096};
    static const int64_t topks[] = {1, 2, 4, 8, 3};
    static const int kinds[] = {UNIFORM, SKEW, HOLES, ONE, SPARSE, DUP, UNIFORM};
    std::vector<Call> cs((size_t)calls);
    for (int i = 0; i < calls; i++) {
        Call &c = cs[(size_t)i];
        c.name = "stress";
        c.dt = i % 3;
        c.call = 5000 + i;
        c.hidden = hiddens[i % 6];
        c.topk = topks[(i / 3) % 5];
        c.experts = i % 4 == 3 ? std::max<int64_t>(g_n, c.topk / g_n * g_n + g_n) : 64 * (int64_t)g_n;
        c.use_w = i % 7 != 5;
        c.use_src = i % 5 != 4;
        std::vector<int64_t> tk = tokens_of(i % 6 == 1 ? -1 : 40 + (i * 37) % 300);
        call_route(c, kinds[i % 7], tk, (int64_t)(i * 131) % c.experts, i % 3 == 0 ? 0 : i % 17);
        call_alloc(c);
        call_inputs(c);
        call_poison(c);
    }
    CK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < calls; i++) call_run(cs[(size_t)i]);
    CK(cudaStreamSynchronize(g_st));
    int bad = 0;
    for (int i = 0; i < calls; i++) {
        char what[96];
        snprintf(what, sizeof what, "stress pair %d (h %lld top-%lld E %lld)", i,
                 (long long)cs[(size_t)i].hidden, (long long)cs[(size_t)i].topk,
                 (long long)cs[(size_t)i].experts);
        bad += call_check(cs[(size_t)i], what);
        call_free(cs[(size_t)i]);
    }
    printf("rank %d stress: %d dispatch + combine pairs without a sync, %d bad\n", g_rank, calls,
           bad);
    return bad;
}

/* ---- graph ----------------------------------------------------------- */

static int run_graph(void)
{
    const int replays = 20;
    static const int kinds[] = {UNIFORM, SKEW, HOLES, ONE};
    Call c;
    c.name = "graph";
    c.dt = 0;
    c.hidden = 1032;
    c.topk = 4;
    c.experts = 64 * (int64_t)g_n;
    const std::vector<int64_t> tk = tokens_of(-1);
    /* the capacity of every replay's routing */
    int64_t cap = 0;
    for (int rep = -1; rep < replays; rep++) {
        c.call = 9000 + rep;
        call_route(c, kinds[(rep + 4) % 4], tk, (rep + 1) * 3 % c.experts, 8);
        cap = std::max(cap, c.cap);
    }
    /* one eager call first (the first call of a shape may set things up) */
    c.call = 8999;
    call_route(c, UNIFORM, tk, 0, 8);
    c.cap = cap;
    call_alloc(c);
    call_inputs(c);
    call_poison(c);
    call_run(c);
    int bad = call_check(c, "graph: the eager call before the capture");
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    call_run(c);
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < replays; rep++) {
        c.call = 9000 + rep;
        call_route(c, kinds[(rep + 4) % 4], tk, (rep + 1) * 3 % c.experts, 8);
        c.cap = cap;
        call_inputs(c);
        call_poison(c);
        CK(cudaGraphLaunch(exec, g_st));
        char what[96];
        snprintf(what, sizeof what, "graph replay %d (%s)", rep, kind_name[kinds[(rep + 4) % 4]]);
        bad += call_check(c, what);
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    call_free(c);
    printf("rank %d graph: %d replays, %d bad\n", g_rank, replays, bad);
    return bad;
}

/* ---- errors found on the device ---------------------------------------- */

/* Everything the call may write still the poison? */
static int untouched(const Call &c, const char *what)
{
    const Got g = fetch(c);
    const bool r = all_bytes(g.recv.data(), g.recv.size(), POISON_DATA);
    const bool o = all_bytes(g.off.data(), g.off.size() * 8, POISON_INT);
    const bool s = all_bytes(g.send_rows.data(), g.send_rows.size() * 4, POISON_INT);
    const bool src = all_bytes(g.rsrc.data(), g.rsrc.size() * 4, POISON_INT);
    const bool w = all_bytes(g.rw.data(), g.rw.size() * 4, POISON_DATA);
    const bool ok = r && o && s && src && w;
    printf("rank %d %s: recv %s, expert_offsets %s, send_rows %s, recv_src %s, recv_weights %s"
           "  %s\n", g_rank, what, r ? "untouched" : "WRITTEN", o ? "untouched" : "WRITTEN",
           s ? "untouched" : "WRITTEN", src ? "untouched" : "WRITTEN",
           w ? "untouched" : "WRITTEN", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

/* Wait (up to ~5 s) for the communicator to report its asynchronous
 * error. */
static mkResult_t wait_async_error(mkComm_t comm)
{
    mkResult_t ae = mkSuccess;
    for (int i = 0; i < 100 && ae == mkSuccess; i++) {
        if (mkCommGetAsyncError(comm, &ae) != mkSuccess) return mkErrInternal;
        if (ae == mkSuccess) usleep(50000);
    }
    return ae;
}

/* After a call that every rank must refuse on the device (capacity, bad
 * expert ids; the stream synchronized): it returned mkSuccess and the
 * communicator's async error is mkErrInvalidArgument (sub 0, capacity: the
 * message names the rank and the rows it needed), a later call (again())
 * is refused, the communicator is destroyed.  The failures, counted. */
template <typename Again>
static int refused_on_device(mkComm_t comm, mkResult_t r, const char *what, int sub,
                             int hot_rank, long long needed, Again again)
{
    int bad = 0;
    const mkResult_t ae = r == mkSuccess ? wait_async_error(comm) : r;
    const char *msg = mkGetLastError(comm);
    bool ok = r == mkSuccess && ae == mkErrInvalidArgument;
    if (ok && sub == 0) { /* the message names the rank and the rows it needed */
        char rk[32], rows[32];
        snprintf(rk, sizeof rk, "rank %d", hot_rank);
        snprintf(rows, sizeof rows, "%lld", needed);
        ok = strstr(msg, rk) != NULL && strstr(msg, rows) != NULL;
    }
    printf("rank %d %s: returned %s, async error %s: \"%s\"  %s\n", g_rank, what,
           mkGetErrorString(r), mkGetErrorString(ae), msg, ok ? "ok" : "FAIL");
    bad += !ok;
    /* a later call reports the error */
    const mkResult_t later = again();
    if (later != mkErrInvalidArgument) {
        printf("rank %d %s: a later call returned %s, expected mkErrInvalidArgument  FAIL\n",
               g_rank, what, mkGetErrorString(later));
        bad++;
    }
    CK(cudaStreamSynchronize(g_st));
    const mkResult_t d = mkCommDestroy(comm);
    if (d != mkSuccess) {
        printf("rank %d %s: mkCommDestroy returned %s  FAIL\n", g_rank, what,
               mkGetErrorString(d));
        bad++;
    }
    return bad;
}

static int run_overflow(void)
{
    int bad = 0;
    for (int sub = 0; sub < 3; sub++) {
        mkComm_t comm = NULL;
        MK(mkCommSplit(g_comm, 0, g_rank, &comm, NULL));
        Call c;
        c.dt = sub;
        c.call = 7000 + sub;
        c.hidden = 1032;
        c.topk = 2;
        c.experts = 64 * (int64_t)g_n;
        const int hot_rank = g_n - 1;
        /* every token's slot 0 on the last rank: it receives the most */
        call_route(c, ONE, tokens_of(200), c.experts - 1, 0);
        char what[128];
        long long needed = (long long)c.ex.rows[(size_t)hot_rank];
        if (sub == 0) {
            c.cap = needed - 1; /* one row short on the last rank only */
            bool others_fit = true;
            for (int d = 0; d < g_n; d++)
                if (d != hot_rank && c.ex.rows[(size_t)d] > c.cap) others_fit = false;
            snprintf(what, sizeof what, "overflow: capacity %lld, rank %d needs %lld%s",
                     (long long)c.cap, hot_rank, needed, others_fit ? "" : " (others too)");
        } else {
            /* rank 0's token 5, slot 1: an expert id outside [-1, experts) */
            const int32_t badid = sub == 1 ? (int32_t)c.experts : -2;
            if (c.rt[0].tokens > 5) c.rt[0].idx[5 * 2 + 1] = badid;
            c.cap = c.ex.max_rows + 16;
            snprintf(what, sizeof what, "overflow: expert id %d on rank 0", (int)badid);
        }
        call_alloc(c);
        call_inputs(c);
        call_poison(c);
        CK(cudaStreamSynchronize(g_st));
        const mkResult_t r = call_dispatch(c, comm);
        CK(cudaStreamSynchronize(g_st));
        bad += untouched(c, what);
        bad += refused_on_device(comm, r, what, sub, hot_rank, needed,
                                 [&] { return call_dispatch(c, comm); });
        call_free(c);
    }
    /* the first communicator was not touched by its children's errors */
    Call c;
    call_of_case(c, g_cases[3], 0, 7100);
    call_alloc(c);
    call_inputs(c);
    call_poison(c);
    call_run(c);
    bad += call_check(c, "overflow: then a good call on the first communicator");
    call_free(c);
    return bad;
}

/* ---- errors found on the host ---------------------------------------- */

/* mkMoEDispatchGemm's arguments the host refuses, then a good call. */
static int run_badinput_gemm(void)
{
    Call c;
    c.dt = 0;
    c.call = 6100;
    c.hidden = 1032; /* a multiple of 8, not of 64: good with transW = 1 only */
    c.topk = 4;
    c.experts = 64 * (int64_t)g_n;
    c.n = 264;
    c.transW = 1;
    call_route(c, UNIFORM, tokens_of(64), 0, 8);
    gcall_alloc(c);
    gcall_inputs(c);
    gcall_poison(c);
    CK(cudaStreamSynchronize(g_st));
    const int64_t T = c.tokens(), H = c.hidden, N = c.n, K = c.topk, E = c.experts, C = c.cap;
    auto G = [&](const void *W, void *y, int64_t n, int64_t h, int tw, mkDataType_t d) {
        return mkMoEDispatchGemm(c.x, c.idx, c.w, W, y, c.rw, c.rsrc, c.off, c.send_rows, T, h, n,
                                 K, E, C, tw, d, g_comm, g_st);
    };
    const mkDataType_t bf = mkBfloat16;
    struct GBad {
        const char *what;
        std::function<mkResult_t()> call;
        mkResult_t want;
    };
    const std::vector<GBad> cases = {
        {"dispatch+gemm: W NULL", [&] { return G(NULL, c.y, N, H, 1, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: y NULL", [&] { return G(c.W, NULL, N, H, 1, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: n 0", [&] { return G(c.W, c.y, 0, H, 1, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: n 260 (not a multiple of 8)", [&] { return G(c.W, c.y, 260, H, 1, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: transW 2", [&] { return G(c.W, c.y, N, H, 2, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: transW 0, hidden 1032 (not 64k)", [&] { return G(c.W, c.y, N, H, 0, bf); }, mkErrInvalidArgument},
        {"dispatch+gemm: dtype fp32", [&] { return G(c.W, c.y, N, H, 1, mkFloat32); }, mkErrUnsupported},
    };
    int bad = 0;
    for (const GBad &b : cases) {
        const mkResult_t r = b.call();
        const char *msg = mkGetLastError(g_comm);
        const bool ok = r == b.want;
        printf("rank %d bad input, %-46s -> %s: \"%s\"  %s\n", g_rank, b.what,
               mkGetErrorString(r), msg, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    CK(cudaStreamSynchronize(g_st));
    bad += guntouched(c, "bad input: after every refused dispatch+gemm");
    /* and a good call */
    MK(gcall_dispatch(c, g_comm));
    MK(gcall_combine(c, g_comm));
    bad += gcheck(c, gfetch(c), "bad input, then a good dispatch+gemm", true);
    call_free(c);
    return bad;
}

static int run_badinput(void)
{
    Call c;
    c.dt = 0;
    c.call = 6000;
    c.hidden = 1032;
    c.topk = 4;
    c.experts = 64 * (int64_t)g_n;
    call_route(c, UNIFORM, tokens_of(64), 0, 8);
    call_alloc(c);
    call_inputs(c);
    call_poison(c);
    CK(cudaStreamSynchronize(g_st));
    const int64_t T = c.tokens(), H = c.hidden, K = c.topk, E = c.experts, C = c.cap;
    const mkDataType_t dt = mkBfloat16;
    std::vector<unsigned char> host_x(c.x_bytes() + 64), host_out(c.x_bytes() + 64);
    const int64_t e_big = ((int64_t)MK_MOE_MAX_EXPERTS / g_n + 1) * g_n;
    char *xc = (char *)c.x;
    struct Bad {
        const char *what;
        std::function<mkResult_t()> call;
        int unsupported_ok; /* mkErrUnsupported is right too */
    };
    auto D = [&](const void *x, const int32_t *idx, const float *w, void *recv, float *rw,
                 int32_t *src, int64_t *off, int32_t *sr, int64_t t, int64_t h, int64_t k,
                 int64_t e, int64_t cap, mkDataType_t d) {
        return mkMoEDispatch(x, idx, w, recv, rw, src, off, sr, t, h, k, e, cap, d, g_comm, g_st);
    };
    auto Cb = [&](const void *y, const int64_t *off, const int32_t *idx, const float *w,
                  const int32_t *sr, void *out, int64_t t, int64_t h, int64_t k) {
        return mkMoECombine(y, off, idx, w, sr, out, t, h, k, E, C, dt, g_comm, g_st);
    };
    std::vector<Bad> cases = {
        {"dispatch: x NULL, tokens > 0", [&] { return D(NULL, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: topk_idx NULL", [&] { return D(c.x, NULL, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: send_rows NULL", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, NULL, T, H, K, E, C, dt); }, 0},
        {"dispatch: expert_offsets NULL", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, NULL, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: recv NULL, capacity > 0", [&] { return D(c.x, c.idx, c.w, NULL, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: hidden 0", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, 0, K, E, C, dt); }, 0},
        {"dispatch: hidden 1030 (not a multiple of 8)", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, 1030, K, E, C, dt); }, 0},
        {"dispatch: topk 0", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, 0, E, C, dt); }, 0},
        {"dispatch: topk 33", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, 33, E, C, dt); }, 0},
        {"dispatch: experts 0", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, 0, C, dt); }, 0},
        {"dispatch: experts > 4096", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, e_big, C, dt); }, 0},
        {"dispatch: tokens -1", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, -1, H, K, E, C, dt); }, 0},
        {"dispatch: recv_capacity -1", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, -1, dt); }, 0},
        {"dispatch: x misaligned (x + 2 bytes)", [&] { return D(xc + 2, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: x in host memory (malloc)", [&] { return D(host_x.data(), c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: recv_weights without topk_weights", [&] { return D(c.x, c.idx, NULL, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: recv overlaps x", [&] { return D(c.x, c.idx, c.w, c.x, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, dt); }, 0},
        {"dispatch: dtype 7", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E, C, (mkDataType_t)7); }, 1},
        {"combine: out NULL, tokens > 0", [&] { return Cb(c.y, c.off, c.idx, c.w, c.send_rows, NULL, T, H, K); }, 0},
        {"combine: send_rows NULL", [&] { return Cb(c.y, c.off, c.idx, c.w, NULL, c.out, T, H, K); }, 0},
        {"combine: y misaligned (y + 2 bytes)", [&] { return Cb((char *)c.y + 2, c.off, c.idx, c.w, c.send_rows, c.out, T, H, K); }, 0},
        {"combine: out in host memory (malloc)", [&] { return Cb(c.y, c.off, c.idx, c.w, c.send_rows, host_out.data(), T, H, K); }, 0},
        {"combine: hidden 1030", [&] { return Cb(c.y, c.off, c.idx, c.w, c.send_rows, c.out, T, 1030, K); }, 0},
        {"combine: topk 0", [&] { return Cb(c.y, c.off, c.idx, c.w, c.send_rows, c.out, T, H, 0); }, 0},
    };
    if (g_n > 1) /* experts not a multiple of the ranks */
        cases.push_back({"dispatch: experts = 64 P + 1", [&] { return D(c.x, c.idx, c.w, c.recv, c.rw, c.rsrc, c.off, c.send_rows, T, H, K, E + 1, C, dt); }, 0});
    int bad = 0;
    for (const Bad &b : cases) {
        const mkResult_t r = b.call();
        const char *msg = mkGetLastError(g_comm);
        const bool ok = r == mkErrInvalidArgument || (b.unsupported_ok && r == mkErrUnsupported);
        printf("rank %d bad input, %-46s -> %s: \"%s\"  %s\n", g_rank, b.what,
               mkGetErrorString(r), msg, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    CK(cudaStreamSynchronize(g_st));
    bad += untouched(c, "bad input: after every refused call");
    {
        std::vector<unsigned char> o(c.x_bytes());
        CK(cudaMemcpy(o.data(), c.out, o.size(), cudaMemcpyDeviceToHost));
        const bool ok = all_bytes(o.data(), o.size(), POISON_DATA);
        printf("rank %d bad input: out %s  %s\n", g_rank, ok ? "untouched" : "WRITTEN",
               ok ? "ok" : "FAIL");
        bad += !ok;
    }
    /* and the communicator still works */
    call_run(c);
    bad += call_check(c, "bad input, then a good call");
    call_free(c);
    bad += run_badinput_gemm();
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) {
        printf("rank %d bad input: the communicator reports %s  FAIL\n", g_rank,
               mkGetErrorString(ae));
        bad++;
    }
    return bad;
}

/* ---- the expert layer: mkMoEDispatchFfnCombine -------------------------- */

/* The experts' weights of call number `wcall` (every rank's El experts,
 * W13 and W2 each from a stream of the hash of (seed, rank, wcall) of its
 * own), so that every rank rebuilds any expert's weights; x, topk_idx and
 * topk_weights come from the call number `call` as above. */
static uint64_t w13seed_of(int q, int wcall) { return seed_of(q, wcall) ^ 0x3c6ef372fe94f82bull; }
static uint64_t w2seed_of(int q, int wcall) { return seed_of(q, wcall) ^ 0xa54ff53a5f1d36f1ull; }

/* The weights' scale: a power of two within a factor sqrt(2) of
 * 2 / sqrt(fan_in), so that with x in [-1, 1) the gate and up sums have
 * a standard deviation of 0.5 to 1 (silu well away from linear), h = silu(g)
 * u and the outputs stay O(1) (0.1 to 1), far from fp16's overflow and
 * subnormals; a power of two so that hash * scale is exact in fp32 and the
 * host's rounding to dtype is the device's bit for bit. */
static float lscale(int64_t fan_in)
{
    return ldexpf(1.0f, -(int)lround(log2(sqrt((double)fan_in)) - 1.0));
}

/* n elements of dtype dt: round(hash(seed, i) * scale). */
__global__ void fill_w(void *p, size_t n, uint64_t seed, float scale, int dt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        st_dt(p, i, hash_val(seed * 0x9e3779b97f4a7c15ull + i) * scale, dt);
}

static size_t lc_w13_count(const Call &c) { return (size_t)(c.el() * 2 * c.inter * c.hidden); }
static size_t lc_w2_count(const Call &c) { return (size_t)(c.el() * c.hidden * c.inter); }

static void lcall_alloc(Call &c)
{
    c.x = dalloc(c.x_bytes());
    c.out = dalloc(c.x_bytes());
    c.W = dalloc(lc_w13_count(c) * dt_bytes(c.dt));
    c.W2 = dalloc(lc_w2_count(c) * dt_bytes(c.dt));
    c.idx = (int32_t *)dalloc(c.slot_count() * 4);
    c.w = (float *)dalloc(c.slot_count() * 4);
}

/* This rank's W13 and W2 (of c.wcall), on g_st. */
static void lcall_weights(Call &c)
{
    fill_w<<<512, 256, 0, g_st>>>(c.W, lc_w13_count(c), w13seed_of(g_rank, c.wcall),
                                  lscale(c.hidden), c.dt);
    CK(cudaGetLastError());
    fill_w<<<512, 256, 0, g_st>>>(c.W2, lc_w2_count(c), w2seed_of(g_rank, c.wcall),
                                  lscale(c.inter), c.dt);
    CK(cudaGetLastError());
}

static void lcall_poison(Call &c)
{
    CK(cudaMemsetAsync(c.out, POISON_DATA, c.x_bytes(), g_st));
}

static mkResult_t lcall_run(Call &c, mkComm_t comm)
{
    return mkMoEDispatchFfnCombine(c.x, c.idx, c.use_w ? c.w : NULL, c.W, c.W2, c.out,
                                   c.tokens(), c.hidden, c.inter, c.topk, c.experts, c.cap,
                                   c.transW, (mkDataType_t)c.dt, comm, g_st);
}

static std::vector<unsigned char> lfetch(const Call &c)
{
    std::vector<unsigned char> o(c.x_bytes());
    if (!o.empty())
        CK(cudaMemcpyAsync(o.data(), c.out, o.size(), cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    return o;
}

/* The host's experts: global expert g's Wg, Wu (inter x hidden each) and
 * Wd (hidden x inter), rebuilt from its rank's hash in either layout, one
 * after the other in one array.  keep: every expert asked stays (the
 * graph's replays reuse them); else only the last one asked. */
struct LWeights {
    const Call &c;
    bool keep;
    std::vector<std::vector<float>> m;
    int64_t last = -1;
    LWeights(const Call &cc, bool k) : c(cc), keep(k), m((size_t)cc.experts) {}
    const float *of(int64_t g)
    {
        std::vector<float> &M = m[(size_t)g];
        if (M.empty()) {
            if (!keep && last >= 0) std::vector<float>().swap(m[(size_t)last]);
            last = g;
            const int64_t el = c.el(), H = c.hidden, I = c.inter;
            const int d = (int)(g / el), dt = c.dt;
            const size_t l = (size_t)(g % el);
            const uint64_t s13 = w13seed_of(d, c.wcall) * 0x9e3779b97f4a7c15ull;
            const uint64_t s2 = w2seed_of(d, c.wcall) * 0x9e3779b97f4a7c15ull;
            const float f13 = lscale(H), f2 = lscale(I);
            const size_t b13 = l * (size_t)(2 * I * H), b2 = l * (size_t)(H * I);
            M.resize((size_t)(3 * I * H));
            float *Wgu = M.data(), *Wd = M.data() + 2 * I * H; /* Wu = Wg + I H */
            if (c.transW) { /* W13: 2I x H, rows [0, I) gate, [I, 2I) up; W2: H x I */
                for (int64_t r = 0; r < 2 * I; r++)
                    for (int64_t k = 0; k < H; k++)
                        Wgu[r * H + k] =
                            round_dt(hash_val(s13 + b13 + (size_t)(r * H + k)) * f13, dt);
                for (int64_t k = 0; k < H; k++)
                    for (int64_t i = 0; i < I; i++)
                        Wd[k * I + i] = round_dt(hash_val(s2 + b2 + (size_t)(k * I + i)) * f2, dt);
            } else { /* W13: H x 2I, columns [0, I) gate, [I, 2I) up; W2: I x H */
                for (int64_t k = 0; k < H; k++)
                    for (int64_t r = 0; r < 2 * I; r++)
                        Wgu[r * H + k] =
                            round_dt(hash_val(s13 + b13 + (size_t)(k * 2 * I + r)) * f13, dt);
                for (int64_t i = 0; i < I; i++)
                    for (int64_t k = 0; k < H; k++)
                        Wd[k * I + i] = round_dt(hash_val(s2 + b2 + (size_t)(i * H + k)) * f2, dt);
            }
        }
        return M.data();
    }
};

/* sum a[i] b[i] in double (four sums: the chain's latency) */
static double dot_fd(const float *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* y = FFN(x) of one expert (M: LWeights' matrices) as the call rounds it:
 * g, u in double, h = silu(g) u rounded to dtype, y = h Wd^T in double
 * rounded to dtype. */
static void ffn_row(const float *x, const float *M, int64_t H, int64_t I, int dt, float *y,
                    float *h)
{
    const float *Wg = M, *Wu = M + I * H, *Wd = M + 2 * I * H;
    for (int64_t j = 0; j < I; j++) {
        const double g = dot_fd(Wg + j * H, x, H), u = dot_fd(Wu + j * H, x, H);
        h[j] = round_dt((float)(g / (1.0 + exp(-g)) * u), dt);
    }
    for (int64_t k = 0; k < H; k++) y[k] = round_dt((float)dot_fd(Wd + k * I, h, I), dt);
}

/* The tokens of this rank the reference covers: all of them up to
 * LAYER_ALL_TOKENS, else LAYER_SAMPLE spread evenly and the last. */
#define LAYER_ALL_TOKENS 512
#define LAYER_SAMPLE 48

struct LRef {
    std::vector<int64_t> toks; /* the tokens checked */
    std::vector<float> y;      /* toks x topk x hidden: the expert of that slot's output */
    std::vector<double> m;     /* toks x topk: the largest |y| of that row */
};

static void lref_build(const Call &c, LWeights &W, LRef &r)
{
    const Route &me = c.rt[(size_t)g_rank];
    const int64_t T = me.tokens, H = c.hidden, I = c.inter, K = c.topk;
    r.toks.clear();
    if (T <= LAYER_ALL_TOKENS) {
        for (int64_t t = 0; t < T; t++) r.toks.push_back(t);
    } else {
        for (int64_t p = 0; p < LAYER_SAMPLE; p++) r.toks.push_back(p * T / LAYER_SAMPLE);
        r.toks.push_back(T - 1);
    }
    const size_t nt = r.toks.size();
    r.y.assign(nt * (size_t)(K * H), 0.0f);
    r.m.assign(nt * (size_t)K, 0.0);
    std::vector<std::vector<size_t>> by((size_t)c.experts); /* slots by expert */
    for (size_t ti = 0; ti < nt; ti++)
        for (int64_t j = 0; j < K; j++) {
            const int32_t g = me.idx[(size_t)(r.toks[ti] * K + j)];
            if (g >= 0 && g < c.experts) by[(size_t)g].push_back(ti * (size_t)K + (size_t)j);
        }
    std::vector<float> xr((size_t)H), h((size_t)I);
    for (int64_t g = 0; g < c.experts; g++) {
        if (by[(size_t)g].empty()) continue;
        const float *M = W.of(g);
        for (size_t s : by[(size_t)g]) {
            const int64_t t = r.toks[s / (size_t)K];
            for (int64_t k = 0; k < H; k++)
                xr[(size_t)k] = round_dt(x_val(g_rank, c.call, (size_t)(t * H + k)), c.dt);
            float *y = &r.y[s * (size_t)H];
            ffn_row(xr.data(), M, H, I, c.dt, y, h.data());
            double mx = 0;
            for (int64_t k = 0; k < H; k++) mx = std::max(mx, fabs((double)y[k]));
            r.m[s] = mx;
        }
    }
}

/*
 * out of call c on this rank against the reference.  Every token: a token
 * with no expert exactly 0 everywhere, every other row free of NaN (the
 * poison) and Inf.  The tokens of the reference, every element: out[t][k]
 * against ref = sum_j w_j y_jk in double, y_j the host's expert output,
 * rounded like the call's (h and y rounded to dtype), within
 *   tol = u |ref| + sum_j |w_j| (2u |y_jk| + u m_j) + (K + 2) 2^-24 S
 *         (+ (K + 1) 2^-24 in fp16),   S = sum_j |w_j| |y_jk|,
 * u the dtype's unit roundoff (2^-8 bf16, 2^-11 fp16), m_j the largest
 * |y_j| of that expert's row.  Why: the host rounds h and y where the call
 * does, so its h and y are the call's except where the call's fp32 sum
 * (or its fp32 silu) and the host's exact one fall on either side of a
 * rounding boundary: rare (the two differ by ~1e-6 relative, an ulp is
 * 2^-7 / 2^-10), and then by one ulp.  u |ref|: the final rounding of out
 * (half an ulp); 2u |y_jk|: a y element rounded the other way (one ulp of
 * it, at most 2u |y|), in every term at once; u m_j: the pre-rounding
 * difference of y_j (an h element rounded the other way moves y by
 * ulp(h_i) |Wd_ki| <= 2u |h_i| |Wd_ki|, well under half an ulp of the
 * row's largest element, ~3 sqrt(inter) |h| |Wd| typical, with inter >=
 * 64; plus the fp32 sums' error, ~sqrt(n) 2^-24 of their terms); (K + 2)
 * 2^-24 S: the weighted sum's fp32 products and sum; fp16's subnormal
 * step per term.  So the tolerance is a few ulps of dtype at the row's
 * magnitude, about twice the typical error (the final half ulp); a wrong
 * expert, weight, slot, layout, missing silu or gate/up swapped is off by
 * the row's magnitude.
 */
static int lcheck(const Call &c, const LRef &ref, const std::vector<unsigned char> &out,
                  const char *what)
{
    const Route &me = c.rt[(size_t)g_rank];
    const int64_t T = me.tokens, H = c.hidden, K = c.topk;
    const size_t es = dt_bytes(c.dt);
    const double u = c.dt == 0 ? ldexp(1.0, -8) : ldexp(1.0, -11);
    const double sub = c.dt == 1 ? (double)(K + 1) * ldexp(1.0, -24) : 0.0;
    int shown = 0;
    int64_t bad_zero = 0, bad_nan = 0, bad_val = 0, empty = 0;
    for (int64_t t = 0; t < T; t++) {
        const bool any = has_expert(me, t, K, c.experts);
        empty += !any;
        for (int64_t k = 0; k < H; k++) {
            const double o = bits_to_double(&out[((size_t)t * H + k) * es], c.dt);
            if (!any && o != 0.0) {
                bad_zero++;
                note(shown, what, "out[%lld][%lld] = %g for a token with no expert, expected 0",
                     (long long)t, (long long)k, o);
                break;
            }
            if (any && !isfinite(o)) {
                bad_nan++;
                note(shown, what, "out[%lld][%lld] = %g (not written?)", (long long)t,
                     (long long)k, o);
                break;
            }
        }
    }
    double worst = 0;
    int64_t checked = 0;
    for (size_t ti = 0; ti < ref.toks.size(); ti++) {
        const int64_t t = ref.toks[ti];
        if (!has_expert(me, t, K, c.experts)) continue; /* zeros, checked above */
        checked++;
        for (int64_t k = 0; k < H; k++) {
            double s = 0, S = 0, Y = 0, Mg = 0;
            for (int64_t j = 0; j < K; j++) {
                const int32_t g = me.idx[(size_t)(t * K + j)];
                if (g < 0 || g >= c.experts) continue;
                const size_t slot = ti * (size_t)K + (size_t)j;
                const double wv = c.use_w ? (double)me.w[(size_t)(t * K + j)] : 1.0;
                const double yv = ref.y[slot * (size_t)H + (size_t)k];
                s += wv * yv;
                S += fabs(wv * yv);
                Y += fabs(wv) * 2 * u * fabs(yv);
                Mg += fabs(wv) * u * ref.m[slot];
            }
            const double o = bits_to_double(&out[((size_t)t * H + k) * es], c.dt);
            const double tol = u * fabs(s) + Y + Mg + (double)(K + 2) * ldexp(1.0, -24) * S + sub;
            const double err = fabs(o - s);
            if (!(err <= tol)) {
                bad_val++;
                note(shown, what, "out[%lld][%lld] = %.7g, expected %.7g (tolerance %.3g)",
                     (long long)t, (long long)k, o, s, tol);
            } else if (err / tol > worst) {
                worst = err / tol;
            }
        }
    }
    const bool ok = !bad_zero && !bad_nan && !bad_val;
    printf("rank %d %-64s %s transW %d rows %lld (largest %lld, cap %lld) out %s "
           "(%lld of %lld tokens against the reference, worst err/tol %.2f, %lld empty "
           "tokens%s%s)  %s\n",
           g_rank, what, dt_name(c.dt), c.transW, (long long)c.ex.rows_me,
           (long long)c.ex.max_rows, (long long)c.cap, ok ? "ok" : "BAD", (long long)checked,
           (long long)T, worst, (long long)empty, bad_zero ? ", NOT ZERO" : "",
           bad_nan ? ", NaN/poison left" : "", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

/* out still all poison? */
static int lout_untouched(const Call &c, const char *what)
{
    const std::vector<unsigned char> o = lfetch(c);
    const bool ok = all_bytes(o.data(), o.size(), POISON_DATA);
    printf("rank %d %s: out %s  %s\n", g_rank, what, ok ? "untouched" : "WRITTEN",
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

enum { TW1 = 1, TW0 = 2 }; /* LCase.tw: the layouts run */

struct LCase {
    const char *name;
    int64_t hidden, inter, topk;
    int64_t el;     /* experts per rank; 0: etotal experts, rounded up to a multiple of P */
    int64_t etotal;
    int kind;
    int64_t tokens; /* per rank; -1: different on every rank, rank 1 none */
    int use_w;
    int tw;         /* TW1, TW0 or both */
    int dts;        /* bit 0 bf16, bit 1 fp16 */
    int64_t slack;  /* capacity = the largest rank's rows + slack; -1: a random 0 to 64 */
};

/* hidden and inter multiples of 8, of 64 where transW 0 runs too */
static const LCase g_lcases[] = {
    {"0 uniform top-2, 4 experts/rank, h 200, i 136", 200, 136, 2, 4, 0, UNIFORM, 256, 1, TW1, 3, -1},
    {"1 uniform top-8, 16 experts/rank, h 512, i 256", 512, 256, 8, 16, 0, UNIFORM, 128, 1, TW1 | TW0, 3, -1},
    {"2 skewed top-2 (one expert ~30%), 3/rank, h 264, i 328", 264, 328, 2, 3, 0, SKEW, 300, 1, TW1, 3, -1},
    {"3 skewed top-1 (~30%), 2/rank, w NULL, h 256, i 128", 256, 128, 1, 2, 0, SKEW, 400, 0, TW1 | TW0, 3, -1},
    {"4 all tokens to one expert, top-1, 4/rank, h 384, i 192", 384, 192, 1, 4, 0, ONE, 256, 1, TW1 | TW0, 3, -1},
    {"5 one expert in every slot 0, top-8, 16/rank, w NULL, h 200", 200, 136, 8, 16, 0, ONE, 128, 0, TW1, 3, -1},
    {"6 experts (rank 1) with no tokens, top-2, 4/rank, h 264, i 136", 264, 136, 2, 4, 0, SPARSE, 200, 1, TW1, 3, -1},
    {"7 slots of -1, tokens with none, top-8, 4/rank, h 512, i 320", 512, 320, 8, 4, 0, HOLES, 160, 1, TW1 | TW0, 3, -1},
    {"8 tokens differ, a rank with 0, top-2, w NULL, h 1024, i 256", 1024, 256, 2, 3, 0, UNIFORM, -1, 0, TW1 | TW0, 3, -1},
    {"9 a token names an expert twice, top-2, 2/rank, h 136, i 64", 136, 64, 2, 2, 0, DUP, 300, 1, TW1, 3, -1},
    {"10 capacity exact, top-4, 32 experts/rank, h 256, i 192", 256, 192, 4, 32, 0, UNIFORM, 128, 1, TW1 | TW0, 3, 0},
    {"11 nothing routed (every slot -1), capacity 0, h 64, i 64", 64, 64, 4, 2, 0, NONE, 100, 1, TW1 | TW0, 3, 0},
    {"12 h 2048, i 1024, 64 experts, top-8, 2048 tokens (49 checked)", 2048, 1024, 8, 0, 64, UNIFORM, 2048, 1, TW1 | TW0, 3, -1},
};
static const int g_nlcases = (int)(sizeof(g_lcases) / sizeof(g_lcases[0]));

static void lcall_of_case(Call &c, const LCase &k, int dt, int transW, int call)
{
    c.name = k.name;
    c.dt = dt;
    c.call = c.wcall = call;
    c.hidden = k.hidden;
    c.inter = k.inter;
    c.topk = k.topk;
    c.experts = k.el > 0 ? k.el * g_n : (k.etotal + g_n - 1) / g_n * g_n;
    c.use_w = k.use_w;
    c.use_src = 0;
    c.transW = transW;
    const int64_t hot = (int64_t)((uint64_t)call * 7919u % (uint64_t)c.experts);
    Rng r{seed_of(0, call) ^ 0x2545f4914f6cdd1dull}; /* the same on every rank */
    const int64_t slack = k.slack >= 0 ? k.slack : (int64_t)r.below(65);
    call_route(c, k.kind, tokens_of(k.tokens), hot, k.kind == NONE ? 0 : slack);
}

/* Each case (x dtype x layout) built once, called 4 times, out poisoned
 * before each call and checked after it. */
static int run_layer(const char *only)
{
    const std::vector<int> pick = parse_list(only);
    int bad = 0;
    for (int i = 0; i < g_nlcases; i++) {
        if (only && std::find(pick.begin(), pick.end(), i) == pick.end()) continue;
        const LCase &k = g_lcases[i];
        for (int dt = 0; dt < 2; dt++)
            for (int tw = 1; tw >= 0; tw--) {
                if (!(k.dts >> dt & 1) || !(k.tw & (tw ? TW1 : TW0))) continue;
                /* the large case: bf16 with transW 1, fp16 with 0 */
                if (k.hidden >= 2048 && tw != (dt == 0)) continue;
                Call c;
                lcall_of_case(c, k, dt, tw, 30001 + i * 100 + dt * 10 + tw);
                lcall_alloc(c);
                call_inputs(c);
                lcall_weights(c);
                LWeights W(c, false);
                LRef ref;
                for (int rep = 0; rep < 4; rep++) {
                    lcall_poison(c);
                    MK(lcall_run(c, g_comm));
                    if (rep == 0) lref_build(c, W, ref); /* while the GPU works */
                    char what[112];
                    snprintf(what, sizeof what, "layer %s #%d", k.name, rep + 1);
                    bad += lcheck(c, ref, lfetch(c), what);
                }
                call_free(c);
            }
    }
    return bad;
}

/* ---- the expert layer in a CUDA graph -------------------------------------- */

/* Three calls of different shapes, dtypes and layouts captured in one
 * graph, replayed 20 times with fresh x and routing (same tokens, same
 * capacity) written into the same buffers and out poisoned before each
 * replay; every replay's three outputs checked. */
static int run_layergraph(void)
{
    const int replays = 20;
    static const int kinds[] = {UNIFORM, SKEW, HOLES, ONE};
    static const LCase gk[3] = {
        {"graph A", 264, 136, 2, 4, 0, UNIFORM, -1, 1, TW1, 1, 0},
        {"graph B", 512, 256, 4, 8, 0, UNIFORM, 64, 1, TW0, 2, 0},
        {"graph C", 256, 192, 3, 4, 0, UNIFORM, 128, 0, TW0, 1, 0},
    };
    std::vector<Call> cs(3);
    auto setup = [&](int n, int rep) { /* call n's routing of replay rep (-1: the eager call) */
        Call &c = cs[(size_t)n];
        const LCase &k = gk[n];
        c.name = k.name;
        c.dt = k.dts == 2 ? 1 : 0;
        c.transW = k.tw == TW1 ? 1 : 0;
        c.hidden = k.hidden;
        c.inter = k.inter;
        c.topk = k.topk;
        c.experts = k.el * g_n;
        c.use_w = k.use_w;
        c.wcall = 40000 + n;
        c.call = 41000 + n * 100 + rep + 1;
        const int kind = kinds[(rep + 1 + n) % 4];
        call_route(c, kind, tokens_of(k.tokens), (int64_t)((rep + 2) * 5 + n) % c.experts, 8);
        return kind;
    };
    std::vector<int64_t> cap(3, 0);
    for (int n = 0; n < 3; n++)
        for (int rep = -1; rep < replays; rep++) {
            setup(n, rep);
            cap[(size_t)n] = std::max(cap[(size_t)n], cs[(size_t)n].cap);
        }
    std::vector<LWeights *> W(3);
    int bad = 0;
    /* one eager call of each first */
    for (int n = 0; n < 3; n++) {
        Call &c = cs[(size_t)n];
        setup(n, -1);
        c.cap = cap[(size_t)n];
        lcall_alloc(c);
        call_inputs(c);
        lcall_weights(c);
        lcall_poison(c);
        MK(lcall_run(c, g_comm));
        W[(size_t)n] = new LWeights(c, true);
    }
    for (int n = 0; n < 3; n++) {
        LRef ref;
        lref_build(cs[(size_t)n], *W[(size_t)n], ref);
        char what[112];
        snprintf(what, sizeof what, "layergraph: the eager call %s before the capture", gk[n].name);
        bad += lcheck(cs[(size_t)n], ref, lfetch(cs[(size_t)n]), what);
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    for (int n = 0; n < 3; n++) MK(lcall_run(cs[(size_t)n], g_comm));
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < replays; rep++) {
        int kind[3];
        for (int n = 0; n < 3; n++) {
            Call &c = cs[(size_t)n];
            kind[n] = setup(n, rep);
            c.cap = cap[(size_t)n];
            call_inputs(c);
            lcall_poison(c);
        }
        CK(cudaGraphLaunch(exec, g_st));
        for (int n = 0; n < 3; n++) {
            LRef ref;
            lref_build(cs[(size_t)n], *W[(size_t)n], ref);
            char what[112];
            snprintf(what, sizeof what, "layergraph replay %d, %s (%s)", rep, gk[n].name,
                     kind_name[kind[n]]);
            bad += lcheck(cs[(size_t)n], ref, lfetch(cs[(size_t)n]), what);
        }
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (int n = 0; n < 3; n++) {
        delete W[(size_t)n];
        call_free(cs[(size_t)n]);
    }
    printf("rank %d layergraph: %d replays of 3 calls, %d bad\n", g_rank, replays, bad);
    return bad;
}

/* ---- the expert layer: errors found on the device ------------------------- */

/* recv_capacity one row short on the last rank, an expert id = experts,
 * an expert id = -2: each on a fresh communicator (mkCommSplit); the call
 * returns mkSuccess, every rank's mkCommGetAsyncError then reports
 * mkErrInvalidArgument (for the capacity, naming the rank and the rows it
 * needed, as mkMoEDispatch's), out untouched on every rank, a later call
 * on that communicator refused; then the first communicator still works:
 * the first shape with room, checked. */
static void lcall_overflow_shape(Call &c, int sub, int call)
{
    c.dt = sub == 1 ? 1 : 0;
    c.transW = sub == 0 ? 1 : 0;
    c.call = c.wcall = call;
    c.hidden = sub == 0 ? 264 : 256;
    c.inter = sub == 0 ? 136 : 128;
    c.topk = 2;
    c.experts = 4 * (int64_t)g_n;
    c.use_w = 1;
    /* every token's slot 0 on the last rank: it receives the most */
    call_route(c, ONE, tokens_of(200), c.experts - 1, 0);
}

static int run_layeroverflow(void)
{
    int bad = 0;
    const int hot_rank = g_n - 1;
    for (int sub = 0; sub < 3; sub++) {
        mkComm_t comm = NULL;
        MK(mkCommSplit(g_comm, 0, g_rank, &comm, NULL));
        Call c;
        lcall_overflow_shape(c, sub, 32000 + sub);
        char what[128];
        const long long needed = (long long)c.ex.rows[(size_t)hot_rank];
        if (sub == 0) {
            c.cap = needed - 1; /* one row short on the last rank only */
            bool others_fit = true;
            for (int d = 0; d < g_n; d++)
                if (d != hot_rank && c.ex.rows[(size_t)d] > c.cap) others_fit = false;
            snprintf(what, sizeof what, "layeroverflow: capacity %lld, rank %d needs %lld%s",
                     (long long)c.cap, hot_rank, needed, others_fit ? "" : " (others too)");
        } else {
            /* rank 0's token 5, slot 1: an expert id outside [-1, experts) */
            const int32_t badid = sub == 1 ? (int32_t)c.experts : -2;
            if (c.rt[0].tokens > 5) c.rt[0].idx[5 * 2 + 1] = badid;
            c.cap = c.ex.max_rows + 16;
            snprintf(what, sizeof what, "layeroverflow: expert id %d on rank 0, %s transW %d",
                     (int)badid, dt_name(c.dt), c.transW);
        }
        lcall_alloc(c);
        call_inputs(c);
        lcall_weights(c);
        lcall_poison(c);
        CK(cudaStreamSynchronize(g_st));
        const mkResult_t r = lcall_run(c, comm);
        CK(cudaStreamSynchronize(g_st));
        bad += lout_untouched(c, what);
        bad += refused_on_device(comm, r, what, sub, hot_rank, needed,
                                 [&] { return lcall_run(c, comm); });
        call_free(c);
    }
    /* the first communicator: the capacity case's shape with the rows it
     * needs (exactly), twice */
    Call c;
    lcall_overflow_shape(c, 0, 32100);
    lcall_alloc(c);
    call_inputs(c);
    lcall_weights(c);
    LWeights W(c, false);
    LRef ref;
    for (int rep = 0; rep < 2; rep++) {
        lcall_poison(c);
        MK(lcall_run(c, g_comm));
        if (rep == 0) lref_build(c, W, ref);
        char what[112];
        snprintf(what, sizeof what, "layeroverflow: then a good call on the first comm #%d",
                 rep + 1);
        bad += lcheck(c, ref, lfetch(c), what);
    }
    call_free(c);
    return bad;
}

/* ---- the expert layer: errors found on the host ---------------------------- */

/* Arguments the host refuses: the error, its message; nothing written (out
 * still poison; x, W13, W2 and a buffer that out overlaps in one case
 * unchanged); the communicator without an error; then a good call. */
static int run_layerbad(void)
{
    Call c;
    c.dt = 0;
    c.call = c.wcall = 33000;
    c.hidden = 1032; /* multiples of 8, not of 64: good with transW = 1 only */
    c.inter = 136;
    c.topk = 4;
    c.experts = 4 * (int64_t)g_n;
    c.use_w = 1;
    c.transW = 1;
    call_route(c, UNIFORM, tokens_of(64), 0, 8);
    lcall_alloc(c);
    call_inputs(c);
    lcall_weights(c);
    lcall_poison(c);
    /* big: x's rows then as many of poison; out = its second half's start
     * - half of x's rows overlaps x */
    const size_t xb = c.x_bytes();
    char *big = (char *)dalloc(2 * xb);
    CK(cudaMemsetAsync(big, POISON_DATA, 2 * xb, g_st));
    CK(cudaMemcpyAsync(big, c.x, xb, cudaMemcpyDeviceToDevice, g_st));
    CK(cudaStreamSynchronize(g_st));
    auto snap = [&](const void *p, size_t n) {
        std::vector<unsigned char> v(n);
        if (n) CK(cudaMemcpy(v.data(), p, n, cudaMemcpyDeviceToHost));
        return v;
    };
    const size_t w13b = lc_w13_count(c) * 2, w2b = lc_w2_count(c) * 2;
    const std::vector<unsigned char> x0 = snap(c.x, xb), w130 = snap(c.W, w13b),
                                     w20 = snap(c.W2, w2b), big0 = snap(big, 2 * xb);
    const int64_t T = c.tokens(), H = c.hidden, I = c.inter, K = c.topk, E = c.experts,
                  C = c.cap;
    char *xc = (char *)c.x, *oc = (char *)c.out;
    auto L = [&](const void *x, const void *W13, const void *W2, void *out, int64_t h, int64_t i,
                 int64_t k, int64_t cap, int tw, mkDataType_t d) {
        return mkMoEDispatchFfnCombine(x, c.idx, c.w, W13, W2, out, T, h, i, k, E, cap, tw, d,
                                       g_comm, g_st);
    };
    const mkDataType_t bf = mkBfloat16;
    const mkResult_t inv = mkErrInvalidArgument;
    struct LBad {
        const char *what;
        std::function<mkResult_t()> call;
        mkResult_t want;
    };
    const size_t half = (xb / 2) & ~(size_t)15;
    const std::vector<LBad> cases = {
        {"layer: dtype fp32", [&] { return L(c.x, c.W, c.W2, c.out, H, I, K, C, 1, mkFloat32); }, mkErrUnsupported},
        {"layer: inter 132 (not a multiple of 8)", [&] { return L(c.x, c.W, c.W2, c.out, H, 132, K, C, 1, bf); }, inv},
        {"layer: hidden 1028 (not a multiple of 8)", [&] { return L(c.x, c.W, c.W2, c.out, 1028, I, K, C, 1, bf); }, inv},
        {"layer: transW 0, hidden 1032 (not 64k), inter 128", [&] { return L(c.x, c.W, c.W2, c.out, H, 128, K, C, 0, bf); }, inv},
        {"layer: transW 0, hidden 1024, inter 136 (not 64k)", [&] { return L(c.x, c.W, c.W2, c.out, 1024, I, K, C, 0, bf); }, inv},
        {"layer: transW 2", [&] { return L(c.x, c.W, c.W2, c.out, H, I, K, C, 2, bf); }, inv},
        {"layer: W13 NULL", [&] { return L(c.x, NULL, c.W2, c.out, H, I, K, C, 1, bf); }, inv},
        {"layer: W2 NULL", [&] { return L(c.x, c.W, NULL, c.out, H, I, K, C, 1, bf); }, inv},
        {"layer: out NULL, tokens > 0", [&] { return L(c.x, c.W, c.W2, NULL, H, I, K, C, 1, bf); }, inv},
        {"layer: out = x", [&] { return L(c.x, c.W, c.W2, c.x, H, I, K, C, 1, bf); }, inv},
        {"layer: out overlaps x (half of its rows)", [&] { return L(big, c.W, c.W2, big + half, H, I, K, C, 1, bf); }, inv},
        {"layer: out overlaps W2 (out = W2)", [&] { return L(c.x, c.W, c.W2, c.W2, H, I, K, C, 1, bf); }, inv},
        {"layer: x misaligned (x + 2 bytes)", [&] { return L(xc + 2, c.W, c.W2, c.out, H, I, K, C, 1, bf); }, inv},
        {"layer: out misaligned (out + 2 bytes)", [&] { return L(c.x, c.W, c.W2, oc + 2, H, I, K, C, 1, bf); }, inv},
        {"layer: topk 0", [&] { return L(c.x, c.W, c.W2, c.out, H, I, 0, C, 1, bf); }, inv},
        {"layer: recv_capacity -1", [&] { return L(c.x, c.W, c.W2, c.out, H, I, K, -1, 1, bf); }, inv},
    };
    int bad = 0;
    for (const LBad &b : cases) {
        const mkResult_t r = b.call();
        const char *msg = mkGetLastError(g_comm);
        const bool ok = r == b.want;
        printf("rank %d bad input, %-50s -> %s (want %s): \"%s\"  %s\n", g_rank, b.what,
               mkGetErrorString(r), mkGetErrorString(b.want), msg, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    CK(cudaStreamSynchronize(g_st));
    bad += lout_untouched(c, "layerbad: after every refused call");
    {
        const bool x = snap(c.x, xb) == x0, w13 = snap(c.W, w13b) == w130,
                   w2 = snap(c.W2, w2b) == w20, bg = snap(big, 2 * xb) == big0;
        const bool ok = x && w13 && w2 && bg;
        printf("rank %d layerbad: x %s, W13 %s, W2 %s, the overlapped buffer %s  %s\n", g_rank,
               x ? "unchanged" : "WRITTEN", w13 ? "unchanged" : "WRITTEN",
               w2 ? "unchanged" : "WRITTEN", bg ? "unchanged" : "WRITTEN", ok ? "ok" : "FAIL");
        bad += !ok;
    }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) {
        printf("rank %d layerbad: the communicator reports %s  FAIL\n", g_rank,
               mkGetErrorString(ae));
        bad++;
    }
    /* and a good call */
    LWeights W(c, false);
    LRef ref;
    lcall_poison(c);
    MK(lcall_run(c, g_comm));
    lref_build(c, W, ref);
    bad += lcheck(c, ref, lfetch(c), "layerbad: then a good call");
    CK(cudaFree(big));
    call_free(c);
    return bad;
}

/* ---- a rank that never calls --------------------------------------------- */

static int run_nocall(void)
{
    Call c;
    c.dt = 0;
    c.call = 4000;
    c.hidden = 2048;
    c.topk = 4;
    c.experts = 64 * (int64_t)g_n;
    call_route(c, UNIFORM, tokens_of(128), 0, 8);
    call_alloc(c);
    call_inputs(c);
    call_run(c);
    CK(cudaStreamSynchronize(g_st));
    int bad = 0;
    int nodes = 1;
    MK(mkCommNodeCount(g_comm, &nodes));
    if (g_rank != 1) {
        const mkResult_t r = call_dispatch(c, g_comm);
        if (nodes > 1) {
            /* across nodes the call meets every rank in the bootstrap's
             * exchange of the token counts first: it fails there */
            printf("rank %d nocall (%d nodes): the call returned %s  %s\n", g_rank, nodes,
                   mkGetErrorString(r), r == mkErrTimeout ? "ok" : "FAIL");
            bad = r != mkErrTimeout;
        } else {
            MK(r);
        }
        CK(cudaStreamSynchronize(g_st)); /* the kernel gives up at the deadline */
        bad |= mkt_nocall_report();
        bad |= mkt_nocall_later(call_dispatch(c, g_comm));
    } else {
        mkt_nocall_sit_out("dispatch");
    }
    return bad;
}

/* ---- ranks on several nodes ------------------------------------------- */

/* Virtual nodes: the calls run as the sequence across nodes (moe.h), and
 * every check of correct, gemm and layer holds as on one node. */
static int run_multinode(void)
{
    int nodes = 1;
    MK(mkCommNodeCount(g_comm, &nodes));
    if (nodes < 2) {
        printf("rank %d multinode: %d node; run with MK_NODE_SIZE=1  FAIL\n", g_rank, nodes);
        return 1;
    }
    printf("rank %d multinode: %d nodes\n", g_rank, nodes);
    int bad = run_correct(NULL);
    bad += run_gemm(NULL);
    bad += run_layer(NULL);
    return bad;
}

/* Across nodes (the combine's sequence): a layout one rank cannot read,
 * on a fresh communicator each time.  sub 0: rank 0's expert_offsets give
 * recv_capacity + 1 rows (rank 0 finds it); sub 1: the last rank's first
 * slot on another rank's expert names a row past that rank's rows (that
 * rank finds it).  No rank writes out; the rank that found it reports
 * mkErrInvalidArgument, every other rank mkErrRemote naming it. */
static int run_combinebad(void)
{
    int nodes = 1;
    MK(mkCommNodeCount(g_comm, &nodes));
    if (nodes < 2) {
        printf("rank %d combinebad: %d node; run with MK_NODE_SIZE=1  FAIL\n", g_rank, nodes);
        return 1;
    }
    int bad = 0;
    for (int sub = 0; sub < 2; sub++) {
        mkComm_t comm = NULL;
        MK(mkCommSplit(g_comm, 0, g_rank, &comm, NULL));
        Call c;
        call_of_case(c, g_cases[1], 0, 7200 + sub);
        call_alloc(c);
        call_inputs(c);
        call_poison(c);
        CK(cudaStreamSynchronize(g_st));
        MK(call_dispatch(c, comm));
        call_y(c);
        CK(cudaStreamSynchronize(g_st));
        /* who finds it: rank 0 (sub 0), or the owner of the culprit's slot */
        const int culprit = sub == 0 ? 0 : g_n - 1;
        int finder = 0;
        int64_t slot = -1;
        const Route &cr = c.rt[(size_t)culprit];
        for (size_t i = 0; sub == 1 && i < cr.idx.size() && slot < 0; i++)
            if (cr.idx[i] >= 0 && cr.idx[i] / c.el() != culprit) {
                slot = (int64_t)i;
                finder = (int)(cr.idx[i] / c.el());
            }
        if (sub == 1 && slot < 0) {
            printf("rank %d combinebad: the last rank has no slot on another rank  FAIL\n", g_rank);
            return bad + 1;
        }
        if (g_rank == culprit) {
            if (sub == 0) {
                const int64_t over = c.cap + 1;
                CK(cudaMemcpy(c.off + c.el(), &over, 8, cudaMemcpyHostToDevice));
            } else {
                const int32_t past = (int32_t)c.cap + 5;
                CK(cudaMemcpy(c.send_rows + slot, &past, 4, cudaMemcpyHostToDevice));
            }
        }
        const mkResult_t r = call_combine(c, comm);
        CK(cudaStreamSynchronize(g_st));
        const Got g = fetch(c);
        const bool kept = all_bytes(g.out.data(), g.out.size(), POISON_DATA);
        const mkResult_t ae = r == mkSuccess ? wait_async_error(comm) : r;
        const char *msg = mkGetLastError(comm);
        char who[32];
        snprintf(who, sizeof who, "rank %d", g_rank == finder ? culprit : finder);
        const bool right = r == mkSuccess &&
                           (g_rank == finder ? ae == mkErrInvalidArgument : ae == mkErrRemote) &&
                           strstr(msg, who) != NULL;
        printf("rank %d combinebad %s: out %s, returned %s, async error %s: \"%s\"  %s\n", g_rank,
               sub == 0 ? "(expert_offsets over the capacity on rank 0)"
                        : "(a send_rows row past its expert's rank's rows)",
               kept ? "untouched" : "WRITTEN", mkGetErrorString(r), mkGetErrorString(ae), msg,
               kept && right ? "ok" : "FAIL");
        bad += !(kept && right);
        call_free(c);
        (void)mkCommDestroy(comm);
    }
    /* the first communicator was not touched by its children's errors */
    Call c;
    call_of_case(c, g_cases[3], 0, 7300);
    call_alloc(c);
    call_inputs(c);
    call_poison(c);
    call_run(c);
    bad += call_check(c, "combinebad: then a good call on the first communicator");
    call_free(c);
    return bad;
}

/* ---- time ------------------------------------------------------------- */

static double median_ms(std::vector<float> &v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static int run_time(const char *spec)
{
    long long T = 4096, H = 7168, E = 256, K = 8;
    if (spec && sscanf(spec, "%lldx%lldx%lldx%lld", &T, &H, &E, &K) != 4) return 1;
    if (E % g_n) {
        fprintf(stderr, "test_moe time: experts %lld not a multiple of %d ranks\n", E, g_n);
        return 1;
    }
    Call c;
    c.dt = 0;
    c.call = 2000;
    c.hidden = H;
    c.topk = K;
    c.experts = E;
    call_route(c, UNIFORM, tokens_of(T), 0, 0);
    call_alloc(c);
    call_inputs(c);
    call_run(c); /* y from this call's recv; the timed combines reuse it */
    CK(cudaStreamSynchronize(g_st));
    const int iters = 20, warm = 5;
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    std::vector<float> t[2];
    for (int round = 0; round < 3; round++)
        for (int what = 0; what < 2; what++) {
            for (int i = 0; i < warm + iters; i++) {
                if (i >= warm) CK(cudaEventRecord(ev[2 * (i - warm)], g_st));
                if (what == 0) MK(call_dispatch(c, g_comm));
                else MK(call_combine(c, g_comm));
                if (i >= warm) CK(cudaEventRecord(ev[2 * (i - warm) + 1], g_st));
            }
            CK(cudaStreamSynchronize(g_st));
            for (int i = 0; i < iters; i++) {
                float ms;
                CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
                t[what].push_back(ms);
            }
        }
    const double d = median_ms(t[0]), cb = median_ms(t[1]);
    const double bytes = (double)c.ex.cross_rows * H * 2;
    printf("rank %d time %lld tokens x hidden %lld, %lld experts, top-%lld, bf16: rows here %lld "
           "(largest %lld); dispatch %.3f ms (%.1f GB/s of unique rows to other ranks), combine "
           "%.3f ms\n", g_rank, T, H, E, K, (long long)c.ex.rows_me, (long long)c.ex.max_rows, d,
           bytes / (d * 1e-3) / 1e9, cb);
    for (auto &e : ev) CK(cudaEventDestroy(e));
    call_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "correct";
    const int dev = mkt_start(&g_n, &g_st);
    g_seed = mkt_seed(g_st); /* rank 0's, on every rank */
    if (g_rank == 0)
        printf("test_moe %s: seed %llu (MK_SEED=%llu repeats it), %d ranks\n", mode,
               (unsigned long long)g_seed, (unsigned long long)g_seed, g_n);
    int bad = 0;
    if (!strcmp(mode, "correct")) bad = run_correct(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "gemm")) bad = run_gemm(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "stress")) bad = run_stress();
    else if (!strcmp(mode, "graph")) bad = run_graph();
    else if (!strcmp(mode, "overflow")) bad = run_overflow();
    else if (!strcmp(mode, "badinput")) bad = run_badinput();
    else if (!strcmp(mode, "nocall")) bad = g_n < 2 ? 1 : run_nocall();
    else if (!strcmp(mode, "multinode")) bad = run_multinode();
    else if (!strcmp(mode, "combinebad")) bad = run_combinebad();
    else if (!strcmp(mode, "time")) bad = run_time(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "layer")) bad = run_layer(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "layergraph")) bad = run_layergraph();
    else if (!strcmp(mode, "layeroverflow")) bad = run_layeroverflow();
    else if (!strcmp(mode, "layerbad")) bad = run_layerbad();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (strcmp(mode, "nocall")) { /* the communicator ends healthy */
        mkResult_t ae;
        MK(mkCommGetAsyncError(g_comm, &ae));
        if (ae != mkSuccess) {
            printf("rank %d %s: the communicator reports %s: %s  FAIL\n", g_rank, mode,
                   mkGetErrorString(ae), mkGetLastError(g_comm));
            bad++;
        }
    }
    printf("rank %d/%d on device %d: %s %s\n", g_rank, g_n, dev, mode, bad ? "FAIL" : "PASS");
    fflush(stdout);
    if (!strcmp(mode, "nocall")) {
        (void)mkCommAbort(g_comm);
        _exit(bad ? 1 : 0);
    }
    MK(mkCommDestroy(g_comm));
    return bad ? 1 : 0;
}
