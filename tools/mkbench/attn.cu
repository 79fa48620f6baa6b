/*
 * attn.cu - mkbench for mkRingAttention (one process per rank, under
 * mpirun or alone).
 *
 *   mkbench attn [--shapes BxHxSxD,...] [--masks full,causal] [--kv-ratio R]
 *                [--dtype bf16|fp16] [--layout bshd|bhsd] [--iters N]
 *                [--rounds R] [--tag NAME]
 *       The attention core alone on one GPU: mkRingAttention on a
 *       communicator of one rank (every rank its own, mkCommSplit by rank)
 *       beside mki_attn_run, the core without the library's call path.
 *       Default shapes keep B H S = 16 x 16 x 4096 and H = 2048 / D:
 *       16x16x4096x128, 4x16x16384x128, 8x32x4096x64, 2x32x16384x64;
 *       full and causal; bf16, BSHD.  bench/attn_sdpa.py times PyTorch's
 *       SDPA (cuDNN, flash) on the same shapes.
 *
 *   mkbench ring_attn [--shapes BxHxSxD,...] [--masks full,zigzag,causal]
 *                     [the options above] [--no-nccl]
 *       S the whole sequence (seq_local = S / P).  Default 1x16x32768x128
 *       and 1x16x131072x128, full and zigzag.  Series, taking turns:
 *         ours     mkRingAttention;
 *         unfused  the ring as a framework runs it on two streams: per
 *                  step, ncclSend / ncclRecv (one group) of the next K and
 *                  V block to / from the ring neighbours on a second
 *                  stream while mki_attn_run computes the current block's
 *                  partial O and lse on the first (the key positions of
 *                  the block's source rank, so a causal step does the
 *                  block's unmasked part only), then one kernel merging
 *                  the P partials by their lse (o = sum_i exp(lse_i -
 *                  lse) o_i, lse = logsumexp_i lse_i; a block that a row
 *                  cannot see is left out);
 *         core     mki_attn_run over the local q with every rank's block as
 *                  a segment already in this GPU's memory: the same work
 *                  per GPU without communication (the limit).
 *       Before timing, ours is compared with the unfused ring and with the
 *       core on the first input set (a sanity check of the baselines, not
 *       the test: tests/gpu/test_attn.cu is).  --no-nccl: ours and core
 *       only (NCCL refuses ranks that share a GPU).
 *
 * FLOPs: 4 B H S_q S_k D per call (two GEMMs), half of it under a causal
 * mask; ring_attn reports per GPU (S_q = seq_local, S_k = S).  Method as
 * mkbench gemm_rs: R rounds (default 3) of N timed calls (default 10),
 * each block after a bootstrap barrier and warm-up calls; inputs and
 * outputs rotate over sets whose bytes pass twice the L2; random data;
 * per series the median of the R x N per-call CUDA event times, the
 * largest of the ranks' medians; the table's last column is rank 0's SM
 * clock at the end of each series' last block (tools/mkbench/clock.cuh:
 * under the power cap a short series' clock depends on what ran before
 * it).  Rank 0 prints the table and writes
 * attn.json / ring_attn.json (NAME-TAG.json with --tag) and a .tsv in
 * mkb_results_dir.  NCCL runs with NCCL_NVLS_ENABLE=0 unless the
 * environment sets it.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>

#include "mkernel.h"
#include "mki.h"
#include "attn/attn.h"
#include "common.h"
#include "multi.h"
#include "clock.cuh"

namespace {

int g_rank, g_n;
mkComm_t g_comm;
mkComm_t g_one; /* attn: this rank alone */
ncclComm_t g_nccl;
cudaStream_t g_st, g_cs; /* compute (and timing) stream; the unfused ring's transfers */

enum { OURS, UNFUSED, CORE, NSERIES };

#define ATTN_WARMUP 3

struct Shape {
    long long b, h, s, d; /* s: the whole sequence */
    int mask;             /* mkAttnMask_t */
};

struct Opts {
    int f16 = 0, layout = 0, kv_ratio = 1, iters = 10, rounds = 3, nccl = 1;
    const char *tag = nullptr;
};

/* Local row i -> global position, as mki_attn_pos: of P ranks, rank r's
 * rows are [r s, (r + 1) s), or under a zigzag chunks r and 2P - 1 - r of
 * s/2. */
mki_attn_pos pos_of(int mask, int r, int p, int64_t s)
{
    if (mask == mkAttnCausalZigzag) return mki_attn_pos{s / 2, r * (s / 2), (2 * p - 1 - r) * (s / 2)};
    return mki_attn_pos{s, r * s, 0};
}

/* ---- one shape's buffers ---------------------------------------------- */

struct set {
    void *q, *k, *v, *o;
    float *lse;
};

struct ctx {
    Shape sh;
    const Opts *op;
    int64_t s, kvh;        /* seq_local, kv heads */
    int p, me;             /* ranks of the sequence and this one's index:
                            * ring_attn g_n and g_rank, attn 1 and 0 */
    mkComm_t comm;         /* ours: g_comm (ring_attn) or g_one (attn) */
    std::vector<set> sets;
    int what;
    /* unfused ring: two receive buffers, P partials, events */
    void *rk[2], *rv[2];
    std::vector<void *> po;
    std::vector<float *> pl;
    std::vector<cudaEvent_t> ev_recv, ev_comp;
    cudaEvent_t ev_start;
    /* core: the other ranks' blocks, in this GPU's memory */
    std::vector<void *> ck, cv;
};

size_t elems(const ctx &x, bool kv) { return (size_t)(x.sh.b * x.s * (kv ? x.kvh : x.sh.h) * x.sh.d); }
size_t lse_elems(const ctx &x) { return (size_t)(x.sh.b * x.sh.h * x.s); }

void *dalloc(size_t bytes)
{
    void *p;
    MKB_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    return p;
}

/* n random values of stream `seed` (streams 2^32 elements apart: mkb_fill_rand
 * hashes seed + i, so nearby seeds would give shifted copies). */
void *drand(size_t n, uint64_t seed, int f16)
{
    void *p = dalloc(n * 2);
    mkb_fill_rand<<<1024, 256, 0, g_st>>>((uint16_t *)p, n, seed << 32, f16);
    return p;
}

mki_attn_args core_args(const ctx &x, const set &st)
{
    mki_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = st.q;
    a.o = st.o;
    a.lse = st.lse;
    a.batch = x.sh.b;
    a.seq = x.s;
    a.heads = x.sh.h;
    a.kv_heads = x.kvh;
    a.head_dim = x.sh.d;
    a.layout = x.op->layout; /* MKI_ATTN_BSHD / BHSD: the values of mkAttnLayout_t */
    a.dtype = x.op->f16;     /* mki_dtype: the values of mkDataType_t */
    a.scale = 1.0f / sqrtf((float)x.sh.d);
    a.causal = x.sh.mask != mkAttnFull;
    a.qpos = pos_of(x.sh.mask, x.me, x.p, x.s);
    return a;
}

void run_core(const mki_attn_args &a)
{
    char msg[256];
    if (mki_attn_run(&a, g_st, msg, sizeof msg)) {
        fprintf(stderr, "rank %d: mki_attn_run: %s\n", g_rank, msg);
        exit(2);
    }
}

/* ---- the unfused ring ------------------------------------------------- */

/* The partials' merge: one thread per 8 elements of a row of o.  Part p
 * is step p's (the block of rank me - p); under a causal mask a row sees
 * it only when that block's first key position, minpos[p], is not after
 * the row's (the core leaves a row that sees no key of its block with lse
 * -inf and o undefined). */
struct merge_args {
    const void *o[MKI_ATTN_MAXSEG];
    const float *lse[MKI_ATTN_MAXSEG];
    int64_t minpos[MKI_ATTN_MAXSEG];
    int n;
    void *out;
    float *out_lse;
    int64_t batch, seq, heads, d;
    int layout, f16, causal;
    mki_attn_pos qpos;
};

__device__ __forceinline__ float to_f(uint16_t b, int f16)
{
    return f16 ? __half2float(__ushort_as_half(b)) : __bfloat162float(__ushort_as_bfloat16(b));
}

__device__ __forceinline__ uint16_t from_f(float v, int f16)
{
    return f16 ? __half_as_ushort(__float2half(v)) : __bfloat16_as_ushort(__float2bfloat16(v));
}

__global__ void merge_partials(const merge_args m)
{
    const int64_t groups = m.d / 8, rows = m.batch * m.seq * m.heads;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < rows * groups;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t / groups, g = t % groups;
        int64_t b, i, h; /* row r in memory order */
        if (m.layout == 0) { h = r % m.heads; i = (r / m.heads) % m.seq; b = r / (m.heads * m.seq); }
        else { i = r % m.seq; h = (r / m.seq) % m.heads; b = r / (m.seq * m.heads); }
        const int64_t pos = i < m.qpos.split ? m.qpos.off0 + i : m.qpos.off1 + (i - m.qpos.split);
        const int64_t li = (b * m.heads + h) * m.seq + i;
        float w[MKI_ATTN_MAXSEG], mx = -INFINITY;
        for (int p = 0; p < m.n; p++) {
            const bool seen = !m.causal || m.minpos[p] <= pos;
            w[p] = seen ? m.lse[p][li] : -INFINITY;
            mx = fmaxf(mx, w[p]);
        }
        float sum = 0.f;
        for (int p = 0; p < m.n; p++) {
            w[p] = w[p] == -INFINITY ? 0.f : __expf(w[p] - mx);
            sum += w[p];
        }
        float acc[8] = {};
        for (int p = 0; p < m.n; p++) {
            if (w[p] == 0.f) continue;
            const uint4 raw = ((const uint4 *)m.o[p])[r * groups + g];
            const uint16_t *e = (const uint16_t *)&raw;
            const float wp = w[p] / sum;
            for (int k = 0; k < 8; k++) acc[k] += wp * to_f(e[k], m.f16);
        }
        uint4 outv;
        uint16_t *e = (uint16_t *)&outv;
        for (int k = 0; k < 8; k++) e[k] = from_f(acc[k], m.f16);
        ((uint4 *)m.out)[r * groups + g] = outv;
        if (g == 0) m.out_lse[li] = mx + logf(sum);
    }
}

void unfused_alloc(ctx &x)
{
    for (int i = 0; i < 2; i++) {
        x.rk[i] = dalloc(elems(x, true) * 2);
        x.rv[i] = dalloc(elems(x, true) * 2);
    }
    for (int i = 0; i < g_n; i++) {
        x.po.push_back(dalloc(elems(x, false) * 2));
        x.pl.push_back((float *)dalloc(lse_elems(x) * 4));
    }
    x.ev_recv.resize((size_t)g_n);
    x.ev_comp.resize((size_t)g_n);
    for (int i = 0; i < g_n; i++) {
        MKB_CHECK(cudaEventCreateWithFlags(&x.ev_recv[(size_t)i], cudaEventDisableTiming));
        MKB_CHECK(cudaEventCreateWithFlags(&x.ev_comp[(size_t)i], cudaEventDisableTiming));
    }
    MKB_CHECK(cudaEventCreateWithFlags(&x.ev_start, cudaEventDisableTiming));
}

/* Step i's transfer on g_cs: the block held now (own at step 0) to the
 * next rank, the previous rank's into receive buffer (i + 1) % 2, which
 * compute step i - 1 read last. */
void ring_transfer(ctx &x, int i, const void *k, const void *v)
{
    const int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    const size_t n = elems(x, true);
    const ncclDataType_t t = x.op->f16 ? ncclFloat16 : ncclBfloat16;
    if (i >= 2) MKB_CHECK(cudaStreamWaitEvent(g_cs, x.ev_comp[(size_t)(i - 1)], 0));
    MKB_NC(ncclGroupStart());
    MKB_NC(ncclSend(k, n, t, next, g_nccl, g_cs));
    MKB_NC(ncclSend(v, n, t, next, g_nccl, g_cs));
    MKB_NC(ncclRecv(x.rk[(i + 1) % 2], n, t, prev, g_nccl, g_cs));
    MKB_NC(ncclRecv(x.rv[(i + 1) % 2], n, t, prev, g_nccl, g_cs));
    MKB_NC(ncclGroupEnd());
    MKB_CHECK(cudaEventRecord(x.ev_recv[(size_t)i], g_cs));
}

void unfused(ctx &x, const set &st)
{
    MKB_CHECK(cudaEventRecord(x.ev_start, g_st));
    MKB_CHECK(cudaStreamWaitEvent(g_cs, x.ev_start, 0));
    merge_args m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < g_n; i++) {
        const int src = (g_rank - i + g_n) % g_n;
        const void *k = i == 0 ? st.k : x.rk[i % 2], *v = i == 0 ? st.v : x.rv[i % 2];
        if (i < g_n - 1) ring_transfer(x, i, k, v);
        if (i >= 1) MKB_CHECK(cudaStreamWaitEvent(g_st, x.ev_recv[(size_t)(i - 1)], 0));
        mki_attn_args a = core_args(x, st);
        a.o = x.po[(size_t)i];
        a.lse = x.pl[(size_t)i];
        a.nseg = 1;
        a.seg[0].k = k;
        a.seg[0].v = v;
        a.seg[0].pos = pos_of(x.sh.mask, src, x.p, x.s);
        run_core(a);
        MKB_CHECK(cudaEventRecord(x.ev_comp[(size_t)i], g_st));
        m.o[i] = x.po[(size_t)i];
        m.lse[i] = x.pl[(size_t)i];
        m.minpos[i] = a.seg[0].pos.off0; /* a zigzag's lower chunk comes first */
    }
    m.n = g_n;
    m.out = st.o;
    m.out_lse = st.lse;
    m.batch = x.sh.b;
    m.seq = x.s;
    m.heads = x.sh.h;
    m.d = x.sh.d;
    m.layout = x.op->layout;
    m.f16 = x.op->f16;
    m.causal = x.sh.mask != mkAttnFull;
    m.qpos = pos_of(x.sh.mask, x.me, x.p, x.s);
    merge_partials<<<1024, 256, 0, g_st>>>(m);
    MKB_CHECK(cudaGetLastError());
}

/* ---- the core on every block ------------------------------------------ */

/* Segment i > 0 holds rank (me - i) mod P's k and v of input set 0 (the
 * same seeds as set_seed), so that on set 0 the core computes what ours
 * does. */
uint64_t set_seed(size_t set, int rank) { return 1000 + 64 * set + 8 * (uint64_t)rank; }

void core_alloc(ctx &x)
{
    for (int i = 1; i < x.p; i++) {
        const int src = (x.me - i + x.p) % x.p;
        x.ck.push_back(drand(elems(x, true), set_seed(0, src) + 1, x.op->f16));
        x.cv.push_back(drand(elems(x, true), set_seed(0, src) + 2, x.op->f16));
    }
}

void core_all(const ctx &x, const set &st)
{
    mki_attn_args a = core_args(x, st);
    a.nseg = x.p;
    for (int i = 0; i < x.p; i++) {
        a.seg[i].k = i == 0 ? st.k : x.ck[(size_t)(i - 1)];
        a.seg[i].v = i == 0 ? st.v : x.cv[(size_t)(i - 1)];
        a.seg[i].pos = pos_of(x.sh.mask, (x.me - i + x.p) % x.p, x.p, x.s);
    }
    run_core(a);
}

/* ---- series ----------------------------------------------------------- */

void ours(const ctx &x, const set &st)
{
    MKB_MK(mkRingAttention(st.q, st.k, st.v, st.o, st.lse, x.sh.b, x.s, x.sh.h, x.kvh, x.sh.d,
                           (mkAttnLayout_t)x.op->layout, (mkAttnMask_t)x.sh.mask,
                           1.0f / sqrtf((float)x.sh.d), x.op->f16 ? mkFloat16 : mkBfloat16,
                           x.comm, g_st));
}

void run_fn(void *p, int rep)
{
    ctx &x = *(ctx *)p;
    const set &st = x.sets[(size_t)rep % x.sets.size()];
    switch (x.what) {
    case OURS: ours(x, st); break;
    case UNFUSED: unfused(x, st); break;
    default: core_all(x, st); break;
    }
}

void time_block(ctx &x, int what, int iters, std::vector<double> &out)
{
    x.what = what;
    MKB_MK(g_comm->boot->barrier(g_comm->boot_ctx));
    std::vector<double> ms((size_t)iters);
    mkb_time(run_fn, &x, g_st, ATTN_WARMUP, iters, ms.data());
    out.insert(out.end(), ms.begin(), ms.end());
}

/* Sets of random inputs (and outputs) whose bytes pass twice the L2. */
void sets_alloc(ctx &x, int l2)
{
    const size_t per = (2 * elems(x, false) + 2 * elems(x, true)) * 2 + lse_elems(x) * 4;
    size_t n = (2 * (size_t)l2 + per - 1) / per;
    n = std::min<size_t>(std::max<size_t>(n, 1), 8);
    for (size_t i = 0; i < n; i++) {
        const uint64_t seed = set_seed(i, x.me);
        set st;
        st.q = drand(elems(x, false), seed, x.op->f16);
        st.k = drand(elems(x, true), seed + 1, x.op->f16);
        st.v = drand(elems(x, true), seed + 2, x.op->f16);
        st.o = dalloc(elems(x, false) * 2);
        st.lse = (float *)dalloc(lse_elems(x) * 4);
        x.sets.push_back(st);
    }
    MKB_CHECK(cudaGetLastError());
}

void ctx_free(ctx &x)
{
    MKB_CHECK(cudaDeviceSynchronize());
    for (set &st : x.sets)
        for (void *p : {st.q, st.k, st.v, st.o, (void *)st.lse}) cudaFree(p);
    for (void *p : x.po) cudaFree(p);
    for (float *p : x.pl) cudaFree(p);
    for (void *p : x.ck) cudaFree(p);
    for (void *p : x.cv) cudaFree(p);
    if (!x.po.empty()) {
        for (int i = 0; i < 2; i++) {
            cudaFree(x.rk[i]);
            cudaFree(x.rv[i]);
        }
        for (cudaEvent_t e : x.ev_recv) cudaEventDestroy(e);
        for (cudaEvent_t e : x.ev_comp) cudaEventDestroy(e);
        cudaEventDestroy(x.ev_start);
    }
}

/* ---- sanity check of the baselines ------------------------------------ */

__global__ void max_diff(const void *a, const void *b, size_t n, int f16, unsigned int *out)
{
    float w = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float d = fabsf(to_f(((const uint16_t *)a)[i], f16) - to_f(((const uint16_t *)b)[i], f16));
        w = fmaxf(w, d == d ? d : INFINITY); /* NaN: infinitely far */
    }
    atomicMax(out, __float_as_uint(w));
}

__global__ void max_diff_f(const float *a, const float *b, size_t n, unsigned int *out)
{
    float w = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float d = fabsf(a[i] - b[i]);
        w = fmaxf(w, d == d ? d : INFINITY);
    }
    atomicMax(out, __float_as_uint(w));
}

/* The largest |o - ours o| and |lse - ours lse| of series `what` on set 0. */
void diff_vs_ours(ctx &x, int what, void *o0, float *l0, float *dmax)
{
    x.what = what;
    run_fn(&x, 0);
    unsigned int *d;
    MKB_CHECK(cudaMalloc(&d, 8));
    MKB_CHECK(cudaMemsetAsync(d, 0, 8, g_st));
    max_diff<<<512, 256, 0, g_st>>>(x.sets[0].o, o0, elems(x, false), x.op->f16, d);
    max_diff_f<<<256, 256, 0, g_st>>>(x.sets[0].lse, l0, lse_elems(x), d + 1);
    unsigned int h[2];
    MKB_CHECK(cudaMemcpyAsync(h, d, 8, cudaMemcpyDeviceToHost, g_st));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    MKB_CHECK(cudaFree(d));
    memcpy(&dmax[0], &h[0], 4);
    memcpy(&dmax[1], &h[1], 4);
}

/* Ours on set 0, kept; then each other series on set 0 against it.  The
 * baselines round their partials or sum in another order: within a few
 * units of bf16's rounding of |v| <= 1 (0.03) and 1e-2 in lse. */
bool check_series(ctx &x, const std::vector<int> &series, float diffs[NSERIES][2])
{
    x.what = OURS;
    run_fn(&x, 0);
    void *o0 = dalloc(elems(x, false) * 2);
    float *l0 = (float *)dalloc(lse_elems(x) * 4);
    MKB_CHECK(cudaMemcpyAsync(o0, x.sets[0].o, elems(x, false) * 2, cudaMemcpyDeviceToDevice, g_st));
    MKB_CHECK(cudaMemcpyAsync(l0, x.sets[0].lse, lse_elems(x) * 4, cudaMemcpyDeviceToDevice, g_st));
    bool ok = true;
    for (int w : series) {
        if (w == OURS) continue;
        diff_vs_ours(x, w, o0, l0, diffs[w]);
        ok &= diffs[w][0] <= 0.03f && diffs[w][1] <= 1e-2f;
    }
    MKB_CHECK(cudaFree(o0));
    MKB_CHECK(cudaFree(l0));
    int all = ok;
    std::vector<int> v((size_t)g_n);
    v[(size_t)g_rank] = all;
    MKB_MK(g_comm->boot->allgather(g_comm->boot_ctx, v.data(), sizeof(int)));
    for (int q : v) all &= q;
    return all != 0;
}

/* ---- shapes, options, output ------------------------------------------ */

struct result {
    Shape sh;
    long long kvh, s;
    double t[NSERIES]; /* ms, slowest rank's median; < 0: not run */
    double flops;      /* per GPU and call */
    bool check;
    float diff[NSERIES][2];
    double mhz[NSERIES]; /* this rank's SM clock at the end of the series' last block */
};

int parse_shapes(const char *s, std::vector<Shape> &out)
{
    std::string str(s);
    size_t pos = 0;
    while (pos < str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        Shape x = {0, 0, 0, 0, mkAttnFull};
        if (sscanf(str.substr(pos, end - pos).c_str(), "%lldx%lldx%lldx%lld", &x.b, &x.h, &x.s,
                   &x.d) != 4)
            return -1;
        out.push_back(x);
        pos = end + 1;
    }
    return 0;
}

int parse_masks(const char *s, std::vector<int> &out)
{
    std::string str(s);
    size_t pos = 0;
    while (pos < str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        const std::string m = str.substr(pos, end - pos);
        if (m == "full") out.push_back(mkAttnFull);
        else if (m == "causal") out.push_back(mkAttnCausal);
        else if (m == "zigzag") out.push_back(mkAttnCausalZigzag);
        else return -1;
        pos = end + 1;
    }
    return out.empty() ? -1 : 0;
}

const char *mask_name(int m)
{
    return m == mkAttnFull ? "full" : m == mkAttnCausal ? "causal" : "zigzag";
}

double tflops(double flops, double ms) { return ms > 0 ? flops / ms * 1e-9 : -1; }

char *cell(double v, const char *fmt, char *b)
{
    if (v < 0) snprintf(b, 16, "-");
    else snprintf(b, 16, fmt, v);
    return b;
}

void ms_or_null(char *out, size_t len, double ms)
{
    if (ms < 0) snprintf(out, len, "null");
    else snprintf(out, len, "%.4f", ms);
}

void write_out(const std::vector<result> &res, const Opts &op, bool ring, int calls)
{
    char dir[512], path[700];
    mkb_results_dir(dir, sizeof dir);
    const char *name = ring ? "ring_attn" : "attn";
    const char *tag = op.tag;
    snprintf(path, sizeof path, "%s/%s%s%s.json", dir, name, tag ? "-" : "", tag ? tag : "");
    mkb_json js;
    if (mkb_json_open(&js, path)) return;
    for (const result &r : res) {
        char extra[768], unf[32], core[32];
        ms_or_null(unf, sizeof unf, r.t[UNFUSED]);
        ms_or_null(core, sizeof core, r.t[CORE]);
        snprintf(extra, sizeof extra,
                 "\"batch\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
                 "\"seq\": %lld, \"seq_local\": %lld, \"mask\": \"%s\", \"layout\": \"%s\", "
                 "\"unfused_ms\": %s, \"core_ms\": %s, \"flops_per_gpu\": %.6g, "
                 "\"calls_per_series\": %d, \"check\": %s, \"baseline_desc\": \"%s\"",
                 r.sh.b, r.sh.h, r.kvh, r.sh.d, r.sh.s, r.s, mask_name(r.sh.mask),
                 op.layout ? "BHSD" : "BSHD", unf, core, r.flops, calls,
                 r.check ? "true" : "false",
                 ring ? "per step ncclSend/ncclRecv of the next K/V block on a second stream "
                        "while mki_attn_run computes the current block's partial O and lse; "
                        "one lse merge kernel; limit: mki_attn_run over every block in local "
                        "memory"
                      : "mki_attn_run (the core without the library's call path)");
        mkb_record rec;
        memset(&rec, 0, sizeof rec);
        rec.op = name;
        rec.dtype = op.f16 ? "fp16" : "bf16";
        rec.baseline = ring ? "nccl_ring+mki_attn" : "mki_attn_run";
        rec.world_size = ring ? g_n : 1;
        rec.nodes = ring ? g_comm->nnodes : 1;
        rec.m = r.sh.s;
        rec.n = r.sh.h;
        rec.k = r.sh.d;
        rec.ours_ms = r.t[OURS];
        rec.baseline_ms = ring ? r.t[UNFUSED] : r.t[CORE];
        rec.limit_ms = ring ? r.t[CORE] : -1;
        rec.flops = r.flops;
        snprintf(rec.sm_split, sizeof rec.sm_split, "%s", ring ? "fused ring" : "one rank");
        rec.extra = extra;
        mkb_json_add(&js, &rec);
    }
    mkb_json_close(&js);
    snprintf(path, sizeof path, "%s/%s%s%s.tsv", dir, name, tag ? "-" : "", tag ? tag : "");
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "shape\tmask\tours_ms\tunfused_ms\tcore_ms\tours_tflops\tcore_tflops\n");
    for (const result &r : res)
        fprintf(f, "%lldx%lldx%lldx%lld\t%s\t%.4f\t%.4f\t%.4f\t%.1f\t%.1f\n", r.sh.b, r.sh.h,
                r.sh.s, r.sh.d, mask_name(r.sh.mask), r.t[OURS], r.t[UNFUSED], r.t[CORE],
                tflops(r.flops, r.t[OURS]), tflops(r.flops, r.t[CORE]));
    fclose(f);
    printf("results: %s (and .json)\n", path);
}

/* "ours/core" SM clocks (MHz, rank 0) at the end of each series' last block. */
const char *mhz_cell(const result &r, char *b)
{
    snprintf(b, 16, "%.0f/%.0f", r.mhz[OURS], r.mhz[CORE]);
    return b;
}

void print_table(const std::vector<result> &res, const Opts &op, bool ring)
{
    char devname[128], u[128];
    mkb_device_name(devname, sizeof devname, u, sizeof u);
    printf("%s %s %s, %d ranks, %s (ms: median of %d calls in %d rounds, slowest rank; "
           "TFLOP/s %s)\n", ring ? "mkRingAttention ring" : "mkRingAttention core alone",
           op.f16 ? "fp16" : "bf16", op.layout ? "BHSD" : "BSHD", g_n, devname,
           op.iters * op.rounds, op.rounds,
           ring ? "per GPU: 4 B H (S/P) S D, half when causal" : "4 B H S^2 D, half when causal");
    if (ring)
        printf("%-22s %-7s %8s %8s %8s %8s %8s %8s %9s %9s  %-5s %s\n", "B x H x S x D (kv)", "mask",
               "ours", "unfused", "core", "TFLOP/s", "unf TF", "core TF", "vs unf", "vs core",
               "check", "MHz");
    else
        printf("%-22s %-7s %8s %8s %8s %8s %9s  %-5s %s\n", "B x H x S x D (kv)", "mask", "ours",
               "core", "TFLOP/s", "core TF", "ours/core", "check", "MHz");
    for (const result &r : res) {
        char sh[64], b[8][16];
        snprintf(sh, sizeof sh, "%lldx%lldx%lldx%lld (%lld)", r.sh.b, r.sh.h, r.sh.s, r.sh.d, r.kvh);
        const double to = tflops(r.flops, r.t[OURS]);
        if (ring)
            printf("%-22s %-7s %8.3f %8s %8s %8.1f %8s %8s %9s %9s  %-5s %s\n", sh,
                   mask_name(r.sh.mask), r.t[OURS], cell(r.t[UNFUSED], "%.3f", b[0]),
                   cell(r.t[CORE], "%.3f", b[1]), to, cell(tflops(r.flops, r.t[UNFUSED]), "%.1f", b[2]),
                   cell(tflops(r.flops, r.t[CORE]), "%.1f", b[3]),
                   cell(r.t[UNFUSED] > 0 ? r.t[UNFUSED] / r.t[OURS] : -1, "%.3fx", b[4]),
                   cell(r.t[CORE] > 0 ? r.t[CORE] / r.t[OURS] : -1, "%.3fx", b[5]),
                   r.check ? "ok" : "FAIL", mhz_cell(r, b[6]));
        else
            printf("%-22s %-7s %8.3f %8.3f %8.1f %8.1f %8.3fx  %-5s %s\n", sh, mask_name(r.sh.mask),
                   r.t[OURS], r.t[CORE], to, tflops(r.flops, r.t[CORE]), r.t[CORE] / r.t[OURS],
                   r.check ? "ok" : "FAIL", mhz_cell(r, b[6]));
    }
}

int usage(bool ring)
{
    fprintf(stderr, "usage: mkbench %s [--shapes BxHxSxD,...] [--masks %s] [--kv-ratio R] "
                    "[--dtype bf16|fp16] [--layout bshd|bhsd] [--iters N] [--rounds R] "
                    "[--tag NAME]%s\n", ring ? "ring_attn" : "attn",
            ring ? "full,zigzag,causal" : "full,causal", ring ? " [--no-nccl]" : "");
    return 2;
}

int parse_opts(int argc, char **argv, bool ring, Opts &op, std::vector<Shape> &shapes,
               std::vector<int> &masks)
{
    const char *sh = ring ? "1x16x32768x128,1x16x131072x128"
                          : "16x16x4096x128,4x16x16384x128,8x32x4096x64,2x32x16384x64";
    const char *mk = ring ? "full,zigzag" : "full,causal";
    for (int i = 1; i < argc; i++) {
        const bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--shapes") && more) sh = argv[++i];
        else if (!strcmp(argv[i], "--masks") && more) mk = argv[++i];
        else if (!strcmp(argv[i], "--kv-ratio") && more) op.kv_ratio = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dtype") && more) op.f16 = !strcmp(argv[++i], "fp16");
        else if (!strcmp(argv[i], "--layout") && more) op.layout = !strcmp(argv[++i], "bhsd");
        else if (!strcmp(argv[i], "--iters") && more) op.iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && more) op.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tag") && more) op.tag = argv[++i];
        else if (ring && !strcmp(argv[i], "--no-nccl")) op.nccl = 0;
        else return usage(ring);
    }
    if (parse_shapes(sh, shapes) || parse_masks(mk, masks) || op.iters < 1 || op.rounds < 1 ||
        op.kv_ratio < 1) {
        fprintf(stderr, "mkbench %s: bad --shapes, --masks, --kv-ratio, --iters or --rounds\n",
                ring ? "ring_attn" : "attn");
        return 2;
    }
    return 0;
}

/* The shape fits this run: head_dim 64 or 128, heads a multiple of the
 * ratio, S a multiple of the ranks (twice that for a zigzag), at most
 * MKI_ATTN_MAXSEG ranks (the unfused ring's merge and the core's
 * segments). */
bool shape_ok(const Shape &x, const Opts &op, bool ring)
{
    const long long p = ring ? g_n : 1, div = x.mask == mkAttnCausalZigzag ? 2 * p : p;
    return (x.d == 64 || x.d == 128) && x.b >= 1 && x.h >= 1 && x.h % op.kv_ratio == 0 &&
           x.s >= div && x.s % div == 0 && (!ring || g_n <= MKI_ATTN_MAXSEG);
}

/* One shape and mask: buffers, the check, R rounds of each series in
 * turn, the slowest rank's medians. */
result bench_one(const Shape &sh, const Opts &op, bool ring, int l2)
{
    result r;
    memset(&r, 0, sizeof r);
    r.sh = sh;
    ctx x;
    x.sh = sh;
    x.op = &op;
    x.p = ring ? g_n : 1;
    x.me = ring ? g_rank : 0;
    x.s = sh.s / x.p;
    x.kvh = sh.h / op.kv_ratio;
    x.comm = ring ? g_comm : g_one;
    r.kvh = x.kvh;
    r.s = x.s;
    r.flops = 4.0 * sh.b * sh.h * x.s * sh.s * sh.d * (sh.mask == mkAttnFull ? 1.0 : 0.5);
    sets_alloc(x, l2);
    std::vector<int> series = {OURS};
    if (ring && op.nccl) series.push_back(UNFUSED);
    series.push_back(CORE);
    if (ring && op.nccl) unfused_alloc(x);
    core_alloc(x);
    r.check = check_series(x, series, r.diff);
    std::vector<double> t[NSERIES];
    for (int w = 0; w < NSERIES; w++) r.mhz[w] = -1;
    for (int round = 0; round < op.rounds; round++)
        for (int w : series) {
            time_block(x, w, op.iters, t[w]);
            if (round == op.rounds - 1) r.mhz[w] = mkb_sm_mhz(g_st, 200);
        }
    for (int w = 0; w < NSERIES; w++) r.t[w] = -1;
    for (int w : series) r.t[w] = mkb_worst_median(g_comm, g_rank, g_n, t[w]);
    mkResult_t ae;
    MKB_MK(mkCommGetAsyncError(x.comm, &ae));
    if (ae != mkSuccess) {
        fprintf(stderr, "rank %d: async error %s: %s\n", g_rank, mkGetErrorString(ae),
                mkGetLastError(x.comm));
        exit(3);
    }
    if (!r.check && g_rank == 0)
        fprintf(stderr, "mkbench: %lldx%lldx%lldx%lld %s: a baseline differs from ours (max "
                "|o| diff unfused %.3g core %.3g; lse %.3g %.3g)\n", sh.b, sh.h, sh.s, sh.d,
                mask_name(sh.mask), r.diff[UNFUSED][0], r.diff[CORE][0], r.diff[UNFUSED][1],
                r.diff[CORE][1]);
    ctx_free(x);
    return r;
}

int bench_main(int argc, char **argv, bool ring)
{
    Opts op;
    std::vector<Shape> shapes;
    std::vector<int> masks;
    if (parse_opts(argc, argv, ring, op, shapes, masks)) return 2;
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const int dev = mkb_start(&g_comm, &g_rank, &g_n, &g_st);
    MKB_CHECK(cudaStreamCreateWithFlags(&g_cs, cudaStreamNonBlocking));
    if (!ring) MKB_MK(mkCommSplit(g_comm, g_rank, 0, &g_one, NULL));
    const bool nccl = ring && op.nccl && g_n > 1;
    if (nccl) g_nccl = mkb_nccl_init(g_comm, g_rank, g_n);
    int l2 = 0;
    MKB_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    std::vector<result> res;
    for (const Shape &s0 : shapes)
        for (int m : masks) {
            Shape s = s0;
            s.mask = m;
            if (!shape_ok(s, op, ring)) {
                if (g_rank == 0)
                    fprintf(stderr, "mkbench: %lldx%lldx%lldx%lld %s skipped: head_dim 64 or 128, "
                            "heads a multiple of --kv-ratio, S a multiple of %s%d ranks, at most "
                            "%d ranks\n", s.b, s.h, s.s, s.d, mask_name(m),
                            m == mkAttnCausalZigzag ? "2 x " : "", ring ? g_n : 1, MKI_ATTN_MAXSEG);
                continue;
            }
            res.push_back(bench_one(s, op, ring, l2));
        }
    bool all_ok = true;
    for (const result &r : res) all_ok &= r.check;
    if (g_rank == 0) {
        print_table(res, op, ring);
        write_out(res, op, ring, op.iters * op.rounds);
    }
    if (nccl) ncclCommDestroy(g_nccl);
    if (g_one) MKB_MK(mkCommDestroy(g_one));
    MKB_MK(mkCommDestroy(g_comm));
    return all_ok ? 0 : 3;
}

} // namespace

extern "C" int mkb_attn_main(int argc, char **argv) { return bench_main(argc, argv, false); }

extern "C" int mkb_ring_attn_main(int argc, char **argv) { return bench_main(argc, argv, true); }

#ifdef MKB_ATTN_MAIN
/* mkbench_attn [attn|ring_attn] [options] */
int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "ring_attn")) return mkb_ring_attn_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "attn")) return mkb_attn_main(argc - 1, argv + 1);
    return mkb_attn_main(argc, argv);
}
#endif
