/*
 * test_attn.cu - mkRingAttention on the GPU, one process per rank (mpirun;
 * PMIx bootstrap): 1 or 2 GPUs, 1 GPU with 2 or 4 ranks under MPS,
 * virtual nodes (MK_NODE_SIZE).
 *
 *   test_attn correct [bshd|bhsd|both] [LIST]
 *                        the cases of g_cases (below) x bf16, fp16, each
 *                        4 times with fresh inputs ("correct bhsd 0,5,7":
 *                        only those cases); the last run of every case
 *                        passes lse = NULL (o checked, lse untouched)
 *   test_attn stress [bshd|bhsd]
 *                        200 calls with no host sync between them over 8
 *                        input sets, each into its own o and lse; every
 *                        output against its set's one-rank result, the
 *                        last also against the host
 *   test_attn graph      two calls captured in a CUDA graph after an
 *                        eager one, replayed 10 times with fresh inputs
 *                        written into the same buffers, every replay
 *                        checked
 *   test_attn badinput   head_dim 96 (mkErrUnsupported), o misaligned, o
 *                        and k in host memory, o == q, heads not a
 *                        multiple of kv_heads, a zigzag with odd
 *                        seq_local (mkErrInvalidArgument), fp32
 *                        (mkErrUnsupported): the error, nothing written
 *                        (o, lse and q keep their bits), then a good call
 *   test_attn nocall     after a first call on every rank, rank 1 skips
 *                        the second: every other rank's communicator
 *                        reports mkErrTimeout naming rank 1 (run with a
 *                        short MK_TIMEOUT_MS) and a later call returns it
 *   test_attn time [BxHxKVxSxD] [full|causal|zigzag] [bshd|bhsd] [bf16|fp16] [N]
 *                        the median of N calls (default 20; shape
 *                        1x16x16x4096x128, S = seq_local) of ours and of
 *                        the core alone on the same work (mki_attn_run:
 *                        the local q against every rank's keys, built in
 *                        this GPU's memory), per rank, with TFLOP/s
 *                        (mkbench attn / ring_attn are the benchmark)
 *
 * Inputs: the whole sequence's q, k and v come from a hash of (seed,
 * tensor, call, canonical index), the canonical index that of the
 * element in a [batch, global position, heads, head_dim] array, so every
 * rank builds every rank's data without communicating: its own slice
 * (rows at the positions the mask gives it: rank r holds [r s, (r + 1) s),
 * or under CausalZigzag chunks r and 2P - 1 - r of s/2 rows) and the
 * whole sequence.  Values in [-1, 1), rounded to the dtype.  The seed is
 * rank 0's, printed (MK_SEED repeats a run).
 *
 * Every check, on every rank: o (NaN) and lse (NaN) poisoned before the
 * call; then
 *   - vs one rank: every rank also runs mkRingAttention on a communicator
 *     of its own (mkCommSplit by rank) over the whole sequence (mask
 *     Causal for CausalZigzag: the same mask on one rank); all of this
 *     rank's o and lse against the rows at its positions, every value
 *     finite;
 *   - vs the host: 32 sampled (batch, head, row) triples (the first and
 *     last rows, the zigzag chunk edge and a tile edge among them)
 *     against softmax(scale q k^T) v and log(sum exp(scale q.k)) in
 *     double from the same rounded inputs (k and v copied from the whole
 *     sequence's tensors, which a few hashed values confirm; q hashed on
 *     the host).
 *
 * Tolerances (u: the dtype's unit roundoff, 2^-8 bf16, 2^-11 fp16).  The
 * scores are exact products of the inputs summed in fp32 over head_dim
 * (error ds <= scale sum|q_d k_d| D 2^-23, tensor cores possibly
 * truncating); the probabilities p_j = exp(s_j - m) in (0, 1] are rounded
 * to the dtype for the P V product (error u p_j, and for fp16 below its
 * normal range at most min(p_j, 2^-25)); the sum over keys is fp32 and o
 * is rounded once.  With A = sum p_j |v_j| / sum p_j (the weighted mean
 * of |v|, per element, from the host's double sums), an element of o is
 * within
 *     2 u (A + |o|) + 2 ds A + [fp16] sum min(p_j, 2^-25) |v_j| / l + 1e-6
 * of the host: u A for P's rounding, u |o| for o's, u |o| for a row sum
 * taken before P was rounded, and u A more for the fp32 accumulation
 * over up to 16k keys (about sqrt(N) 2^-24 of A in practice, N 2^-24 at
 * worst).  So bf16 about 4e-3 + 8e-3 |o| and fp16 5e-4 + 1e-3 |o| with
 * v in [-1, 1): several times tighter than 2e-2 (bf16) and 5e-3 (fp16)
 * of max |v|.  lse within 1e-3 + ds (fp32 logs and sums of exponentials
 * in base 2).  Against one rank the scores are the same bits and only
 * P's rounding (the running maximum differs with the order of the key
 * blocks), the fp32 sums and o's rounding differ: 2 u max|v| + 4 u |o|,
 * for fp16 plus 2 S 2^-25 (P's subnormals over S keys); lse 1e-3.
 * Both o bounds are relative to the scale of v, so a case whose softmax
 * is nearly flat (|o| ~ 0.01) is judged mostly through lse (a key block
 * missed or counted twice moves lse by about its share of the keys, 3%
 * for one block of 4k) and through the peaked cases (scale x 4, x 16 and
 * x 64: o near single rows of v; scores past 88 that overflow exp
 * without the running maximum).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "mkernel.h"
#include "attn/attn.h" /* the core alone (time) */

static int g_rank, g_n;
static mkComm_t g_comm, g_self; /* g_self: this rank alone (the reference) */
static uint64_t g_seed;
static cudaStream_t g_st;
static unsigned long long *g_acc;

#define MKT_EXIT_MK 3
#include "check.h"
#include "fill.cuh"
#include "attn_ref.h"

enum { Q = 0, K = 1, V = 2 };
static const int kRepeats = 4, kSamples = 32;

/* ---- shapes, positions, layouts ---------------------------------------- */

struct Pos { /* local row i -> global position (as mki_attn_pos) */
    int64_t split, off0, off1;
};

__host__ __device__ __forceinline__ int64_t pos_at(const Pos &p, int64_t i)
{
    return i < p.split ? p.off0 + i : p.off1 + (i - p.split);
}

/* Element index of (b, i, h, 0) in a tensor of `rows` rows and `heads`
 * heads of d elements (layout 0 BSHD, 1 BHSD). */
__host__ __device__ __forceinline__ int64_t row_at(int layout, int64_t rows, int64_t heads,
                                                   int64_t d, int64_t b, int64_t i, int64_t h)
{
    return layout == 0 ? ((b * rows + i) * heads + h) * d : ((b * heads + h) * rows + i) * d;
}

/* The inverse: (b, i, h, e) of element x. */
__host__ __device__ __forceinline__ void coords(int layout, int64_t rows, int64_t heads,
                                                int64_t d, int64_t x, int64_t *b, int64_t *i,
                                                int64_t *h, int64_t *e)
{
    *e = x % d;
    int64_t r = x / d;
    if (layout == 0) {
        *h = r % heads;
        r /= heads;
        *i = r % rows;
        *b = r / rows;
    } else {
        *i = r % rows;
        r /= rows;
        *h = r % heads;
        *b = r / heads;
    }
}

struct Shape {
    const char *name;
    int64_t s, b, h, kvh, d;
    int mask;    /* mkAttnMask_t */
    float smul;  /* scale = smul / sqrt(d) */
    int layout;  /* 0 BSHD, 1 BHSD */
    int dt;      /* 0 bf16, 1 fp16 */
    int64_t tot() const { return s * g_n; }
    float scale() const { return smul / sqrtf((float)d); }
    int64_t heads_of(int t) const { return t == Q ? h : kvh; }
    size_t count(int t, int64_t rows) const { return (size_t)(b * rows * heads_of(t) * d); }
    size_t lse_count(int64_t rows) const { return (size_t)(b * h * rows); }
};

static const char *mask_name(int m)
{
    return m == mkAttnFull ? "full" : m == mkAttnCausal ? "causal" : "zigzag";
}
static const char *dt_name(int dt) { return dt ? "fp16" : "bf16"; }
static const char *layout_name(int l) { return l ? "BHSD" : "BSHD"; }

/* Rank r's rows: contiguous, or chunks r and 2P - 1 - r of s/2. */
static Pos rank_pos(const Shape &x, int r)
{
    if (x.mask == mkAttnCausalZigzag) {
        const int64_t c = x.s / 2;
        return Pos{c, r * c, (2 * (int64_t)g_n - 1 - r) * c};
    }
    return Pos{x.s, r * x.s, 0};
}

static Pos local_pos(const Shape &x) { return rank_pos(x, g_rank); }

static Pos whole_pos(const Shape &x) { return Pos{x.tot(), 0, 0}; }

static uint64_t seed_of(int call, int t)
{
    return g_seed * 1000003ull + (uint64_t)call * 131ull + (uint64_t)t * 17ull + 1;
}

/* ---- inputs ----------------------------------------------------------- */

/* A tensor of `rows` rows whose row i holds global position pos(i): the
 * value of canonical element ((b S + pos) H + h) D + e. */
__global__ void gen(void *p, int layout, int64_t batch, int64_t rows, int64_t heads, int64_t d,
                    int64_t total, Pos pos, uint64_t seed, int dt)
{
    const int64_t n = batch * rows * heads * d;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < n;
         x += (int64_t)gridDim.x * blockDim.x) {
        int64_t b, i, h, e;
        coords(layout, rows, heads, d, x, &b, &i, &h, &e);
        const int64_t c = ((b * total + pos_at(pos, i)) * heads + h) * d + e;
        const float v = hash_val(seed * 0x9e3779b97f4a7c15ull + (uint64_t)c);
        if (dt == 0) ((__nv_bfloat16 *)p)[x] = __float2bfloat16(v);
        else ((__half *)p)[x] = __float2half(v);
    }
}

/* The value gen() writes for canonical element c, as the GPU rounds it. */
static double host_val(uint64_t seed, int64_t c, int dt)
{
    const float v = hash_val(seed * 0x9e3779b97f4a7c15ull + (uint64_t)c);
    return dt == 0 ? (double)__bfloat162float(__float2bfloat16(v))
                   : (double)__half2float(__float2half(v));
}

/* One call's tensors: this rank's slice and the whole sequence. */
struct Bufs {
    void *t[3] = {}, *o = nullptr;     /* q, k, v (local), o */
    float *lse = nullptr;
    void *g[3] = {}, *go = nullptr;    /* the whole sequence's, and its o */
    float *glse = nullptr;
};

static void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes + 16));
    return p;
}

/* A copy to the host on the test's stream (not the legacy default stream,
 * which would also wait for any blocking stream of the library). */
static void d2h(void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
}

static void bufs_alloc(Bufs &f, const Shape &x)
{
    for (int t = 0; t < 3; t++) {
        f.t[t] = dalloc(x.count(t, x.s) * 2);
        f.g[t] = dalloc(x.count(t, x.tot()) * 2);
    }
    f.o = dalloc(x.count(Q, x.s) * 2);
    f.go = dalloc(x.count(Q, x.tot()) * 2);
    f.lse = (float *)dalloc(x.lse_count(x.s) * 4);
    f.glse = (float *)dalloc(x.lse_count(x.tot()) * 4);
}

static void bufs_free(Bufs &f)
{
    for (int t = 0; t < 3; t++) {
        CK(cudaFree(f.t[t]));
        CK(cudaFree(f.g[t]));
    }
    for (void *p : {f.o, f.go, (void *)f.lse, (void *)f.glse}) CK(cudaFree(p));
}

/* Call `call`'s inputs: this rank's slice and (whole) the whole sequence. */
static void inputs(const Shape &x, Bufs &f, int call, bool whole = true)
{
    for (int t = 0; t < 3; t++) {
        const int64_t hh = x.heads_of(t);
        gen<<<512, 256, 0, g_st>>>(f.t[t], x.layout, x.b, x.s, hh, x.d, x.tot(), local_pos(x),
                                   seed_of(call, t), x.dt);
        if (whole)
            gen<<<512, 256, 0, g_st>>>(f.g[t], x.layout, x.b, x.tot(), hh, x.d, x.tot(),
                                       whole_pos(x), seed_of(call, t), x.dt);
    }
    CK(cudaGetLastError());
}

static void poison_out(const Shape &x, void *o, float *lse, int64_t rows)
{
    poison<<<256, 256, 0, g_st>>>((uint16_t *)o, x.count(Q, rows));
    CK(cudaGetLastError());
    if (lse) CK(cudaMemsetAsync(lse, 0xFF, x.lse_count(rows) * 4, g_st)); /* NaN */
}

/* ---- the calls -------------------------------------------------------- */

static mkResult_t ring(const Shape &x, const void *q, const void *k, const void *v, void *o,
                       float *lse, cudaStream_t st)
{
    return mkRingAttention(q, k, v, o, lse, x.b, x.s, x.h, x.kvh, x.d, (mkAttnLayout_t)x.layout,
                           (mkAttnMask_t)x.mask, x.scale(), x.dt ? mkFloat16 : mkBfloat16,
                           g_comm, st);
}

/* The whole sequence on this rank alone: the reference of every row. */
static void whole(const Shape &x, Bufs &f)
{
    poison_out(x, f.go, f.glse, x.tot());
    const mkAttnMask_t m = x.mask == mkAttnFull ? mkAttnFull : mkAttnCausal;
    MK(mkRingAttention(f.g[Q], f.g[K], f.g[V], f.go, f.glse, x.b, x.tot(), x.h, x.kvh, x.d,
                       (mkAttnLayout_t)x.layout, m, x.scale(), x.dt ? mkFloat16 : mkBfloat16,
                       g_self, g_st));
}

/* ---- against one rank, on the device ---------------------------------- */

__device__ __forceinline__ float ld16(const void *p, int64_t i, int dt)
{
    return dt == 0 ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
                   : __half2float(((const __half *)p)[i]);
}

/* One value against its reference: counted non-finite, counted past
 * tol_abs + tol_rel |r|, and the largest error; then a thread's counts
 * into acc (below). */
__device__ __forceinline__ void tally(float v, float r, float tol_abs, float tol_rel,
                                      unsigned long long &bad, unsigned long long &far,
                                      float &worst)
{
    if (!isfinite(v) || !isfinite(r)) {
        bad++;
        return;
    }
    const float err = fabsf(v - r);
    if (err > tol_abs + tol_rel * fabsf(r)) far++;
    worst = fmaxf(worst, err);
}
__device__ __forceinline__ void flush(unsigned long long *acc, unsigned long long bad,
                                      unsigned long long far, float worst)
{
    atomicAdd(&acc[0], bad);
    atomicAdd(&acc[1], far);
    atomicMax(&acc[2], (unsigned long long)__float_as_uint(worst));
}

/* acc: [0] non-finite values, [1] values past tol_abs + tol_rel |ref|,
 * [2] the largest |o - ref| (float bits, non-negative: ordered as
 * integers).  ref: `ref_rows` rows, ours' row i at its row pos(i). */
__global__ void cmp_o(const void *o, const void *ref, int layout, int64_t batch, int64_t rows,
                      int64_t heads, int64_t d, int64_t ref_rows, Pos pos, int dt, float tol_abs,
                      float tol_rel, unsigned long long *acc)
{
    unsigned long long bad = 0, far = 0;
    float worst = 0.f;
    const int64_t n = batch * rows * heads * d;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < n;
         x += (int64_t)gridDim.x * blockDim.x) {
        int64_t b, i, h, e;
        coords(layout, rows, heads, d, x, &b, &i, &h, &e);
        tally(ld16(o, x, dt),
              ld16(ref, row_at(layout, ref_rows, heads, d, b, pos_at(pos, i), h) + e, dt),
              tol_abs, tol_rel, bad, far, worst);
    }
    flush(acc, bad, far, worst);
}

/* The same for lse ([batch, heads, rows] floats). */
__global__ void cmp_lse(const float *l, const float *ref, int64_t batch, int64_t rows,
                        int64_t heads, int64_t ref_rows, Pos pos, float tol_abs, float tol_rel,
                        unsigned long long *acc)
{
    unsigned long long bad = 0, far = 0;
    float worst = 0.f;
    const int64_t n = batch * heads * rows;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < n;
         x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = x % rows, bh = x / rows;
        tally(l[x], ref[bh * ref_rows + pos_at(pos, i)], tol_abs, tol_rel, bad, far, worst);
    }
    flush(acc, bad, far, worst);
}

struct Cmp {
    unsigned long long bad, far;
    float worst;
    bool ok() const { return bad == 0 && far == 0; }
};

static Cmp cmp_fetch(void)
{
    unsigned long long h[3];
    CK(cudaMemcpyAsync(h, g_acc, sizeof h, cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    Cmp c;
    c.bad = h[0];
    c.far = h[1];
    const uint32_t w = (uint32_t)h[2];
    memcpy(&c.worst, &w, 4);
    return c;
}

static double unit_roundoff(int dt) { return dt ? ldexp(1.0, -11) : ldexp(1.0, -8); }

/* o (local rows) against ref (ref_rows rows at pos), see the header. */
static Cmp cmp_out(const Shape &x, const void *o, const void *ref, int64_t ref_rows, Pos pos)
{
    const double u = unit_roundoff(x.dt);
    const double sub = x.dt ? 2.0 * (double)x.tot() * ldexp(1.0, -25) : 0.0;
    CK(cudaMemsetAsync(g_acc, 0, 3 * sizeof(unsigned long long), g_st));
    cmp_o<<<512, 256, 0, g_st>>>(o, ref, x.layout, x.b, x.s, x.h, x.d, ref_rows, pos, x.dt,
                                 (float)(2 * u * 1.0 + sub + 1e-6), (float)(4 * u), g_acc);
    CK(cudaGetLastError());
    return cmp_fetch();
}

static Cmp cmp_l(const Shape &x, const float *l, const float *ref, int64_t ref_rows, Pos pos)
{
    CK(cudaMemsetAsync(g_acc, 0, 3 * sizeof(unsigned long long), g_st));
    cmp_lse<<<256, 256, 0, g_st>>>(l, ref, x.b, x.s, x.h, ref_rows, pos, 1e-3f, 1e-6f, g_acc);
    CK(cudaGetLastError());
    return cmp_fetch();
}

/* ---- against the host ------------------------------------------------- */

/* k and v of one (batch, kv head) over the whole sequence, as floats. */
struct Slice {
    std::vector<float> k, v;
};

/* The whole sequence's k and v (bits, copied once per check: one plain
 * copy each, not a pitched copy per slice) and the slices made of them. */
struct Slices {
    std::vector<uint16_t> k, v;
    std::map<std::pair<int64_t, int64_t>, Slice> got;
};

static std::vector<float> cut(const Shape &x, const std::vector<uint16_t> &bits, int64_t b,
                              int64_t kh)
{
    const int64_t tot = x.tot();
    std::vector<float> out((size_t)(tot * x.d));
    for (int64_t j = 0; j < tot; j++) {
        const uint16_t *row = &bits[(size_t)row_at(x.layout, tot, x.kvh, x.d, b, j, kh)];
        for (int64_t e = 0; e < x.d; e++) out[(size_t)(j * x.d + e)] = half_bits_val(row[e], x.dt);
    }
    return out;
}

/* The slice of (b, kh); a few of its values against the hash (a wrong
 * copy or layout would make the reference meaningless). */
static const Slice &slice_of(Slices &cache, const Shape &x, const Bufs &f, int call, int64_t b,
                             int64_t kh, int *bad_input)
{
    auto key = std::make_pair(b, kh);
    auto it = cache.got.find(key);
    if (it != cache.got.end()) return it->second;
    const int64_t tot = x.tot();
    if (cache.k.empty()) {
        cache.k.resize(x.count(K, tot));
        cache.v.resize(x.count(V, tot));
        d2h(cache.k.data(), f.g[K], cache.k.size() * 2);
        d2h(cache.v.data(), f.g[V], cache.v.size() * 2);
    }
    Slice &s = cache.got[key];
    s.k = cut(x, cache.k, b, kh);
    s.v = cut(x, cache.v, b, kh);
    for (int z = 0; z < 4; z++) {
        const int64_t j = (z * 7919 + b * 31 + kh) % tot, e = (z * 37) % x.d;
        const int64_t c = ((b * tot + j) * x.kvh + kh) * x.d + e;
        if (s.k[(size_t)(j * x.d + e)] != (float)host_val(seed_of(call, K), c, x.dt) ||
            s.v[(size_t)(j * x.d + e)] != (float)host_val(seed_of(call, V), c, x.dt))
            (*bad_input)++;
    }
    return s;
}

/* The sampled rows: edges first (row 0, the last, the zigzag chunk edge,
 * a tile edge), then hashed ones; batch and head hashed. */
static void sample(const Shape &x, int call, int z, int64_t *b, int64_t *h, int64_t *i)
{
    const int64_t edges[6] = {0, x.s - 1, x.s / 2 - 1, x.s / 2, 127, 128};
    const uint64_t key = g_seed * 7 + (uint64_t)call * 1009 + (uint64_t)z * 13 + g_rank;
    auto pick = [&](int salt, int64_t n) {
        return (int64_t)((hash_val(key * 31 + salt) * 0.5f + 0.5f) * (float)n) % n;
    };
    *b = pick(1, x.b);
    *h = pick(2, x.h);
    *i = z < 6 && edges[z] >= 0 && edges[z] < x.s ? edges[z] : pick(3, x.s);
}

/* softmax(scale q k^T) v over the keys row `pos` sees, and the tolerance
 * of the header (attn_ref.h). */
static AttnRef host_row(const Shape &x, const Slice &sl, const std::vector<double> &q, int64_t pos)
{
    const int64_t nk = x.mask == mkAttnFull ? x.tot() : pos + 1;
    return attn_ref_row(q, sl.k.data(), sl.v.data(), nk, x.d, x.scale(), x.dt,
                        [](int64_t) { return true; });
}

struct HostRes {
    int bad_o = 0, bad_lse = 0, bad_input = 0;
    double worst = 0, worst_lse = 0; /* the largest error / tolerance */
};

/* kSamples rows of this rank's o (and lse) against host_row. */
static HostRes host_check(const Shape &x, const Bufs &f, const void *o, const float *lse,
                          int call)
{
    HostRes hr;
    std::vector<uint16_t> ho(x.count(Q, x.s));
    std::vector<float> hl(lse ? x.lse_count(x.s) : 0);
    CK(cudaStreamSynchronize(g_st));
    d2h(ho.data(), o, ho.size() * 2);
    if (lse) d2h(hl.data(), lse, hl.size() * 4);
    Slices cache;
    const Pos lp = local_pos(x);
    for (int z = 0; z < kSamples; z++) {
        int64_t b, h, i;
        sample(x, call, z, &b, &h, &i);
        const int64_t pos = pos_at(lp, i), kh = h / (x.h / x.kvh);
        std::vector<double> q((size_t)x.d);
        for (int64_t e = 0; e < x.d; e++)
            q[(size_t)e] = host_val(seed_of(call, Q), ((b * x.tot() + pos) * x.h + h) * x.d + e,
                                    x.dt);
        const AttnRef r = host_row(x, slice_of(cache, x, f, call, b, kh, &hr.bad_input), q, pos);
        const int64_t base = row_at(x.layout, x.s, x.h, x.d, b, i, h);
        for (int64_t e = 0; e < x.d; e++) {
            const double v = half_bits_val(ho[(size_t)(base + e)], x.dt);
            const double err = fabs(v - r.o[(size_t)e]);
            if (!(err <= r.tol[(size_t)e])) hr.bad_o++;
            hr.worst = std::max(hr.worst, std::isfinite(err) ? err / r.tol[(size_t)e] : 1e30);
        }
        if (lse) {
            const double err = fabs(hl[(size_t)((b * x.h + h) * x.s + i)] - r.lse);
            if (!(err <= r.tol_lse)) hr.bad_lse++;
            hr.worst_lse = std::max(hr.worst_lse, std::isfinite(err) ? err / r.tol_lse : 1e30);
        }
    }
    return hr;
}

/* lse = NULL: the buffer must still be poison (0xFF bytes). */
static int lse_untouched(const Shape &x, const float *lse)
{
    std::vector<uint32_t> h(x.lse_count(x.s));
    CK(cudaStreamSynchronize(g_st));
    d2h(h.data(), lse, h.size() * 4);
    size_t n = 0;
    for (uint32_t w : h) n += w != 0xFFFFFFFFu;
    return (int)n;
}

/* Every check of one call's output o / lse (lse NULL: not passed; then
 * lse_buf must be untouched).  f.go / f.glse hold the one-rank result. */
static int check(const char *what, const Shape &x, const Bufs &f, const void *o, const float *lse,
                 const float *lse_buf, int call)
{
    const Pos lp = local_pos(x);
    const Cmp co = cmp_out(x, o, f.go, x.tot(), lp);
    Cmp cl = {0, 0, 0.f};
    int touched = 0;
    if (lse) cl = cmp_l(x, lse, f.glse, x.tot(), lp);
    else touched = lse_untouched(x, lse_buf);
    const HostRes hr = host_check(x, f, o, lse, call);
    const bool ok = co.ok() && cl.ok() && touched == 0 && hr.bad_o == 0 && hr.bad_lse == 0 &&
                    hr.bad_input == 0;
    printf("rank %d %-52s 1 rank: o nan %llu far %llu max %.1e, lse nan %llu far %llu max %.1e%s"
           " | host(%d) o bad %d worst %.2f of tol, lse bad %d worst %.2f%s  %s\n",
           g_rank, what, co.bad, co.far, co.worst, cl.bad, cl.far, cl.worst,
           lse ? "" : (touched ? " LSE WRITTEN" : " (lse NULL, untouched)"), kSamples, hr.bad_o,
           hr.worst, hr.bad_lse, hr.worst_lse, hr.bad_input ? " INPUTS DIFFER" : "",
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

static void label(char *out, size_t len, const Shape &x, const char *tail)
{
    snprintf(out, len, "%s %s %s %s", x.name, dt_name(x.dt), layout_name(x.layout), tail);
}

/* ---- correct ---------------------------------------------------------- */

/* name (hQ/KV: heads / kv_heads; xM: scale M / sqrt(d)), seq_local, batch,
 * heads, kv_heads, head_dim, mask, M.  Odd seq_local where the mask allows it; GQA 1, 4, 8; both
 * head dims; batch 1 and 3; the peaked cases (x 4, 16, 64) make o close to
 * single rows of v, x 64 puts scores past exp's range. */
static const Shape g_cases[] = {
    {"s1000 full d128 h4/4", 1000, 1, 4, 4, 128, mkAttnFull, 1, 0, 0},
    {"s1000 causal d64 h8/2 b3", 1000, 3, 8, 2, 64, mkAttnCausal, 1, 0, 0},
    {"s1000 zigzag d128 h8/1 x4", 1000, 1, 8, 1, 128, mkAttnCausalZigzag, 4, 0, 0},
    {"s4097 full d64 h8/1 x64", 4097, 1, 8, 1, 64, mkAttnFull, 64, 0, 0},
    {"s4097 causal d128 h4/4 b3", 4097, 3, 4, 4, 128, mkAttnCausal, 1, 0, 0},
    {"s4098 zigzag d128 h8/2 b3", 4098, 3, 8, 2, 128, mkAttnCausalZigzag, 1, 0, 0},
    {"s4096 full d128 h16/4 x4", 4096, 1, 16, 4, 128, mkAttnFull, 4, 0, 0},
    {"s4096 zigzag d64 h8/8 x16", 4096, 1, 8, 8, 64, mkAttnCausalZigzag, 16, 0, 0},
    {"s4096 causal d128 h8/1 b3 x16", 4096, 3, 8, 1, 128, mkAttnCausal, 16, 0, 0},
    {"s4098 zigzag d64 h8/1 b3 x64", 4098, 3, 8, 1, 64, mkAttnCausalZigzag, 64, 0, 0},
    {"s1 full d64 h4/4", 1, 1, 4, 4, 64, mkAttnFull, 1, 0, 0},
    {"s2 zigzag d128 h8/1 b3", 2, 3, 8, 1, 128, mkAttnCausalZigzag, 1, 0, 0},
    {"s130 causal d64 h4/1", 130, 1, 4, 1, 64, mkAttnCausal, 1, 0, 0},
};
static const int g_ncases = (int)(sizeof(g_cases) / sizeof(g_cases[0]));

/* kRepeats calls of one case with fresh inputs; the last with lse NULL. */
static int run_case(const Shape &x, int idx)
{
    Bufs f;
    bufs_alloc(f, x);
    int bad = 0;
    for (int rep = 0; rep < kRepeats; rep++) {
        const int call = 1 + x.layout * 100000 + idx * 1000 + x.dt * 100 + rep;
        const bool with_lse = rep < kRepeats - 1;
        inputs(x, f, call);
        poison_out(x, f.o, f.lse, x.s);
        MK(ring(x, f.t[Q], f.t[K], f.t[V], f.o, with_lse ? f.lse : nullptr, g_st));
        whole(x, f);
        char tail[32], what[128];
        snprintf(tail, sizeof tail, "#%d", rep + 1);
        label(what, sizeof what, x, tail);
        bad += check(what, x, f, f.o, with_lse ? f.lse : nullptr, f.lse, call);
    }
    bufs_free(f);
    return bad;
}

static std::vector<int> layouts_of(const char *arg)
{
    if (arg && !strcmp(arg, "bshd")) return {0};
    if (arg && !strcmp(arg, "bhsd")) return {1};
    return {0, 1};
}

static bool listed(const char *only, int i)
{
    if (!only) return true;
    for (const char *p = only; *p;) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) return false;
        if (v == i) return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

static bool fits(const Shape &x)
{
    return x.mask != mkAttnCausalZigzag || x.s % 2 == 0;
}

static int run_correct(const char *lay, const char *only)
{
    int bad = 0;
    for (int layout : layouts_of(lay))
        for (int i = 0; i < g_ncases; i++) {
            if (!listed(only, i) || !fits(g_cases[i])) continue;
            for (int dt = 0; dt < 2; dt++) {
                Shape x = g_cases[i];
                x.layout = layout;
                x.dt = dt;
                bad += run_case(x, i);
            }
        }
    return bad;
}

/* ---- stress ----------------------------------------------------------- */

static int run_stress(const char *lay)
{
    Shape x = {"stress s1000 zigzag d128 h8/2 x2", 1000, 1, 8, 2, 128, mkAttnCausalZigzag, 2, 0, 0};
    x.layout = layouts_of(lay)[0];
    const int calls = 200, nsets = 8;
    std::vector<Bufs> sets((size_t)nsets);
    for (int i = 0; i < nsets; i++) {
        bufs_alloc(sets[(size_t)i], x);
        inputs(x, sets[(size_t)i], 5000 + i);
    }
    std::vector<void *> os((size_t)calls);
    std::vector<float *> ls((size_t)calls);
    for (int c = 0; c < calls; c++) {
        os[(size_t)c] = dalloc(x.count(Q, x.s) * 2);
        ls[(size_t)c] = (float *)dalloc(x.lse_count(x.s) * 4);
        poison_out(x, os[(size_t)c], ls[(size_t)c], x.s);
    }
    CK(cudaStreamSynchronize(g_st));
    for (int c = 0; c < calls; c++) {
        const Bufs &f = sets[(size_t)(c % nsets)];
        MK(ring(x, f.t[Q], f.t[K], f.t[V], os[(size_t)c], ls[(size_t)c], g_st));
    }
    for (Bufs &f : sets) whole(x, f);
    int bad = 0;
    for (int c = 0; c < calls; c++) {
        const Bufs &f = sets[(size_t)(c % nsets)];
        const Cmp co = cmp_out(x, os[(size_t)c], f.go, x.tot(), local_pos(x));
        const Cmp cl = cmp_l(x, ls[(size_t)c], f.glse, x.tot(), local_pos(x));
        if (!co.ok() || !cl.ok()) {
            printf("rank %d stress call %d (set %d): o nan %llu far %llu max %.1e, lse nan %llu "
                   "far %llu max %.1e  FAIL\n", g_rank, c, c % nsets, co.bad, co.far, co.worst,
                   cl.bad, cl.far, cl.worst);
            bad++;
        }
    }
    char what[128];
    label(what, sizeof what, x, "last of 200");
    bad += check(what, x, sets[(size_t)((calls - 1) % nsets)], os[(size_t)calls - 1],
                 ls[(size_t)calls - 1], nullptr, 5000 + (calls - 1) % nsets);
    printf("rank %d stress: %d calls without a sync over %d input sets, %d bad  %s\n", g_rank,
           calls, nsets, bad, bad ? "FAIL" : "ok");
    for (int c = 0; c < calls; c++) {
        CK(cudaFree(os[(size_t)c]));
        CK(cudaFree(ls[(size_t)c]));
    }
    for (Bufs &f : sets) bufs_free(f);
    return bad;
}

/* ---- graph ------------------------------------------------------------ */

static int run_graph(void)
{
    Shape x = {"graph s1000 causal d128 h8/2 x2", 1000, 1, 8, 2, 128, mkAttnCausal, 2, 0, 0};
    x.layout = 0;
    Bufs f[2]; /* the two captured calls' inputs and outputs */
    for (Bufs &b : f) bufs_alloc(b, x);
    /* one eager call first: whatever a first call sets up exists before
     * the capture */
    inputs(x, f[0], 9000, false);
    MK(ring(x, f[0].t[Q], f[0].t[K], f[0].t[V], f[0].o, f[0].lse, g_st));
    CK(cudaStreamSynchronize(g_st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    for (Bufs &b : f) MK(ring(x, b.t[Q], b.t[K], b.t[V], b.o, b.lse, g_st));
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    int bad = 0;
    const int replays = 10;
    for (int rep = 0; rep < replays; rep++) {
        for (int i = 0; i < 2; i++) {
            inputs(x, f[i], 9001 + 2 * rep + i);
            poison_out(x, f[i].o, f[i].lse, x.s);
        }
        CK(cudaGraphLaunch(exec, g_st));
        for (int i = 0; i < 2; i++) {
            whole(x, f[i]);
            char tail[48], what[128];
            snprintf(tail, sizeof tail, "replay %d call %d", rep, i);
            label(what, sizeof what, x, tail);
            bad += check(what, x, f[i], f[i].o, f[i].lse, nullptr, 9001 + 2 * rep + i);
        }
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (Bufs &b : f) bufs_free(b);
    return bad;
}

/* ---- a rank that never calls ------------------------------------------- */

static int run_nocall(void)
{
    Shape x = {"nocall s1000 zigzag d128 h8/2", 1000, 1, 8, 2, 128, mkAttnCausalZigzag, 1, 0, 0};
    x.layout = 0;
    Bufs f;
    bufs_alloc(f, x);
    inputs(x, f, 9500, false);
    /* the first call of the shape on every rank (the shape check meets
     * every rank through the bootstrap) */
    MK(ring(x, f.t[Q], f.t[K], f.t[V], f.o, f.lse, g_st));
    CK(cudaStreamSynchronize(g_st));
    int bad = 0;
    if (g_rank != 1) {
        MK(ring(x, f.t[Q], f.t[K], f.t[V], f.o, f.lse, g_st));
        CK(cudaStreamSynchronize(g_st)); /* the kernel gives up at the deadline */
        bad = mkt_nocall_report();
        bad |= mkt_nocall_later(ring(x, f.t[Q], f.t[K], f.t[V], f.o, f.lse, g_st));
    } else {
        mkt_nocall_sit_out("second call");
    }
    bufs_free(f);
    return bad;
}

/* ---- bad input -------------------------------------------------------- */

static size_t differs(const void *dev, const std::vector<uint8_t> &want)
{
    std::vector<uint8_t> h(want.size());
    CK(cudaStreamSynchronize(g_st));
    d2h(h.data(), dev, h.size());
    size_t n = 0;
    for (size_t i = 0; i < h.size(); i++) n += h[i] != want[i];
    return n;
}

static std::vector<uint8_t> snapshot(const void *dev, size_t bytes)
{
    std::vector<uint8_t> h(bytes);
    CK(cudaStreamSynchronize(g_st));
    d2h(h.data(), dev, bytes);
    return h;
}

/* Every rank makes the same bad call (a first call of a shape may be
 * checked with the other ranks), gets the error and a message, and
 * nothing is written: o and lse keep their poison, q its values. */
static int run_badinput(void)
{
    Shape x = {"bad s256 full d128 h4/2", 256, 1, 4, 2, 128, mkAttnFull, 1, 0, 0};
    x.layout = 0;
    Bufs f;
    bufs_alloc(f, x);
    inputs(x, f, 7000);
    poison_out(x, f.o, f.lse, x.s);
    const size_t ob = x.count(Q, x.s) * 2, lb = x.lse_count(x.s) * 4;
    const std::vector<uint8_t> o0 = snapshot(f.o, ob), l0 = snapshot(f.lse, lb),
                               q0 = snapshot(f.t[Q], ob);
    std::vector<uint16_t> host_o(ob / 2 + 8, 0x7fff), host_k(x.count(K, x.s) + 8, 0x3c00);
    const std::vector<uint16_t> host_o0 = host_o;
    struct Case {
        const char *what;
        mkResult_t want;
        const char *msg; /* in mkGetLastError, or NULL */
        const void *q, *k;
        void *o;
        int64_t s, h, kvh, d;
        int mask;
        mkDataType_t dt;
    } cases[] = {
        {"head_dim 96", mkErrUnsupported, NULL, f.t[Q], f.t[K], f.o, 256, 4, 2, 96,
         mkAttnFull, mkBfloat16},
        {"o misaligned (+2 bytes)", mkErrInvalidArgument, "not aligned", f.t[Q], f.t[K],
         (char *)f.o + 2, 256, 4, 2, 128, mkAttnFull, mkBfloat16},
        {"o in host memory", mkErrInvalidArgument, "not device memory", f.t[Q], f.t[K],
         host_o.data(), 256, 4, 2, 128, mkAttnFull, mkBfloat16},
        {"k in host memory", mkErrInvalidArgument, "not device memory", f.t[Q], host_k.data(),
         f.o, 256, 4, 2, 128, mkAttnFull, mkBfloat16},
        {"o == q", mkErrInvalidArgument, "overlap", f.t[Q], f.t[K], f.t[Q], 256, 4, 2, 128,
         mkAttnFull, mkBfloat16},
        {"heads 4, kv_heads 3", mkErrInvalidArgument, NULL, f.t[Q], f.t[K], f.o, 256, 4, 3, 128,
         mkAttnFull, mkBfloat16},
        {"zigzag, seq_local 255", mkErrInvalidArgument, NULL, f.t[Q], f.t[K], f.o, 255, 4, 2,
         128, mkAttnCausalZigzag, mkBfloat16},
        {"fp32", mkErrUnsupported, NULL, f.t[Q], f.t[K], f.o, 128, 4, 2, 128, mkAttnFull,
         mkFloat32},
    };
    int bad = 0;
    for (const Case &c : cases) {
        const mkResult_t r = mkRingAttention(c.q, c.k, f.t[V], c.o, f.lse, 1, c.s, c.h, c.kvh,
                                             c.d, mkAttnBSHD, (mkAttnMask_t)c.mask, 0.125f, c.dt,
                                             g_comm, g_st);
        const char *msg = mkGetLastError(g_comm);
        const bool ok = r == c.want && (!c.msg || strstr(msg, c.msg));
        printf("rank %d bad input, %-24s -> %s: \"%s\"  %s\n", g_rank, c.what,
               mkGetErrorString(r), msg, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    const size_t no = differs(f.o, o0), nl = differs(f.lse, l0), nq = differs(f.t[Q], q0);
    size_t nh = 0;
    for (size_t i = 0; i < host_o.size(); i++) nh += host_o[i] != host_o0[i];
    const bool clean = no == 0 && nl == 0 && nq == 0 && nh == 0;
    printf("rank %d bad input: bytes written: o %zu, lse %zu, q %zu, host o %zu  %s\n", g_rank,
           no, nl, nq, nh, clean ? "ok" : "FAIL");
    bad += !clean;
    /* and the communicator still works */
    MK(ring(x, f.t[Q], f.t[K], f.t[V], f.o, f.lse, g_st));
    whole(x, f);
    char what[128];
    label(what, sizeof what, x, "then a good call");
    bad += check(what, x, f, f.o, f.lse, nullptr, 7000);
    bufs_free(f);
    return bad;
}

/* ---- time ------------------------------------------------------------- */

static double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

/* n calls of fn after 5 of warm-up, one event pair each: the median. */
template <class F> static double time_calls(int n, F fn)
{
    std::vector<cudaEvent_t> ev((size_t)(2 * n));
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 5; i++) fn();
    std::vector<float> ms((size_t)n);
    for (int i = 0; i < n; i++) {
        CK(cudaEventRecord(ev[(size_t)(2 * i)], g_st));
        fn();
        CK(cudaEventRecord(ev[(size_t)(2 * i + 1)], g_st));
    }
    CK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < n; i++)
        CK(cudaEventElapsedTime(&ms[(size_t)i], ev[(size_t)(2 * i)], ev[(size_t)(2 * i + 1)]));
    for (auto &e : ev) CK(cudaEventDestroy(e));
    return median(ms);
}

/* FLOPs of one rank's share: 4 B H s S d, half of it under a causal mask. */
static double flops_of(const Shape &x, int64_t rows, int64_t keys)
{
    return 4.0 * x.b * x.h * rows * keys * x.d * (x.mask == mkAttnFull ? 1.0 : 0.5);
}

/* The core alone on this rank's work: mki_attn_run over the local q and
 * every rank's keys as segments already in this GPU's memory (built
 * here), in the fused call's order (own keys first). */
struct Core {
    std::vector<void *> k, v;
    mki_attn_args a;
};

static void core_setup(const Shape &x, const Bufs &f, Core &c)
{
    memset(&c.a, 0, sizeof c.a);
    c.a.q = f.t[Q];
    c.a.o = f.o;
    c.a.lse = f.lse;
    c.a.batch = x.b;
    c.a.seq = x.s;
    c.a.heads = x.h;
    c.a.kv_heads = x.kvh;
    c.a.head_dim = x.d;
    c.a.layout = x.layout; /* MKI_ATTN_BSHD 0, BHSD 1 */
    c.a.dtype = x.dt;      /* mki_dtype: the values of mkDataType_t */
    c.a.scale = x.scale();
    c.a.causal = x.mask != mkAttnFull;
    const Pos qp = local_pos(x);
    c.a.qpos = mki_attn_pos{qp.split, qp.off0, qp.off1};
    c.a.nseg = std::min(g_n, MKI_ATTN_MAXSEG);
    for (int i = 0; i < c.a.nseg; i++) {
        const int src = (g_rank - i + g_n) % g_n;
        const Pos kp = rank_pos(x, src);
        void *k = f.t[K], *v = f.t[V];
        if (i > 0) {
            k = dalloc(x.count(K, x.s) * 2);
            v = dalloc(x.count(V, x.s) * 2);
            gen<<<512, 256, 0, g_st>>>(k, x.layout, x.b, x.s, x.kvh, x.d, x.tot(), kp,
                                       seed_of(1, K), x.dt);
            gen<<<512, 256, 0, g_st>>>(v, x.layout, x.b, x.s, x.kvh, x.d, x.tot(), kp,
                                       seed_of(1, V), x.dt);
            c.k.push_back(k);
            c.v.push_back(v);
        }
        c.a.seg[i].k = k;
        c.a.seg[i].v = v;
        c.a.seg[i].pos = mki_attn_pos{kp.split, kp.off0, kp.off1};
    }
    CK(cudaGetLastError());
}

static void core_run(const Core &c)
{
    char msg[256];
    if (mki_attn_run(&c.a, g_st, msg, sizeof msg)) {
        fprintf(stderr, "rank %d: mki_attn_run: %s\n", g_rank, msg);
        exit(2);
    }
}

/* time [BxHxKVxSxD] [mask] [layout] [dtype] [N]: the median of N calls of
 * ours and of the core alone on the same work, per rank. */
static int run_time(int argc, char **argv)
{
    long long b = 1, h = 16, kvh = 16, s = 4096, d = 128;
    if (argc > 2 && sscanf(argv[2], "%lldx%lldx%lldx%lldx%lld", &b, &h, &kvh, &s, &d) != 5) {
        fprintf(stderr, "time: shape BxHxKVxSxD (S: seq_local)\n");
        return 1;
    }
    Shape x = {"time", s, b, h, kvh, d, mkAttnFull, 1, 0, 0};
    x.layout = argc > 4 && !strcmp(argv[4], "bhsd");
    x.dt = argc > 5 && !strcmp(argv[5], "fp16");
    if (argc > 3)
        x.mask = !strcmp(argv[3], "causal") ? mkAttnCausal
                 : !strcmp(argv[3], "zigzag") ? mkAttnCausalZigzag : mkAttnFull;
    const int n = argc > 6 ? std::max(1, atoi(argv[6])) : 20;
    if (!fits(x) || g_n > MKI_ATTN_MAXSEG) {
        fprintf(stderr, "time: a zigzag needs an even S; at most %d ranks\n", MKI_ATTN_MAXSEG);
        return 1;
    }
    Bufs f;
    for (int t = 0; t < 3; t++) f.t[t] = dalloc(x.count(t, x.s) * 2);
    f.o = dalloc(x.count(Q, x.s) * 2);
    f.lse = (float *)dalloc(x.lse_count(x.s) * 4);
    inputs(x, f, 1, false);
    Core c;
    core_setup(x, f, c);
    double ours = 0, core = 0;
    for (int round = 0; round < 2; round++) { /* taking turns; the second round counts */
        ours = time_calls(n, [&] { MK(ring(x, f.t[Q], f.t[K], f.t[V], f.o, f.lse, g_st)); });
        core = time_calls(n, [&] { core_run(c); });
    }
    const double fl = flops_of(x, x.s, x.tot());
    printf("rank %d time %lldx%lldx%lldx%lldx%lld %s %s %s, %d ranks: ours %.3f ms (%.1f TFLOP/s), "
           "core alone on the same work %.3f ms (%.1f TFLOP/s); ours/core %.3f\n", g_rank, b, h,
           kvh, s, d, mask_name(x.mask), layout_name(x.layout), dt_name(x.dt), g_n, ours,
           fl / ours * 1e-9, core, fl / core * 1e-9, core / ours);
    for (void *p : c.k) CK(cudaFree(p));
    for (void *p : c.v) CK(cudaFree(p));
    for (int t = 0; t < 3; t++) CK(cudaFree(f.t[t]));
    CK(cudaFree(f.o));
    CK(cudaFree(f.lse));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "correct";
    const int dev = mkt_start(&g_n, &g_st);
    g_seed = mkt_seed(g_st); /* rank 0's, on every rank */
    /* this rank alone: the one-rank reference of every check */
    MK(mkCommSplit(g_comm, g_rank, 0, &g_self, NULL));
    CK(cudaMalloc(&g_acc, 4 * sizeof(unsigned long long)));
    if (g_rank == 0)
        printf("test_attn %s: seed %llu (MK_SEED=%llu repeats it), %d ranks\n", mode,
               (unsigned long long)g_seed, (unsigned long long)g_seed, g_n);
    int bad = 0;
    if (!strcmp(mode, "correct")) bad = run_correct(argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL);
    else if (!strcmp(mode, "stress")) bad = run_stress(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "graph")) bad = run_graph();
    else if (!strcmp(mode, "badinput")) bad = run_badinput();
    else if (!strcmp(mode, "time")) bad = run_time(argc, argv);
    else if (!strcmp(mode, "nocall")) bad = g_n < 2 ? 1 : run_nocall();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    mkResult_t ae; /* the communicator ends healthy (nocall: broken by design) */
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess && strcmp(mode, "nocall")) {
        printf("rank %d %s: the communicator reports %s: %s  FAIL\n", g_rank, mode,
               mkGetErrorString(ae), mkGetLastError(g_comm));
        bad++;
    }
    printf("rank %d/%d on device %d: %s %s\n", g_rank, g_n, dev, mode, bad ? "FAIL" : "PASS");
    fflush(stdout);
    if (!strcmp(mode, "nocall")) { /* a broken communicator: abort, no destroy */
        (void)mkCommAbort(g_comm);
        _exit(bad ? 1 : 0);
    }
    CK(cudaFree(g_acc));
    MK(mkCommDestroy(g_self));
    MK(mkCommDestroy(g_comm));
    return bad ? 1 : 0;
}
