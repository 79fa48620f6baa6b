/*
 * test_attn_core.cu - the attention core alone (kernels/attn/attn.h:
 * mki_attn_run), without a communicator: against an fp64 host reference
 * on sampled (batch, head, row) triples, over several key segments with
 * piecewise (zigzag) positions as the ring gives them, both layouts, head
 * dims 64 and 128, GQA, fp16 and bf16, causal or not, odd lengths; o and
 * lse poisoned before every call; each case run 4 times.  Then, with
 * "time", TFLOP/s of the core at the issue's shapes.
 *
 *   test_attn_core [seed]            correctness
 *   test_attn_core small [seed]      the cases of at most 1000 rows, one
 *                                    repeat (compute-sanitizer)
 *   test_attn_core time [reps [only]]  timing table (and rank 0's work of
 *                                    a 2-rank zigzag ring; the SM clock
 *                                    each row's series ended at); only: the rows
 *                                    whose d/mask/seq start so (e.g.
 *                                    128/full/4096), for a profiler
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

#include <algorithm>
#include <vector>

#include "attn/attn.h"
#include "rt/rt.h"

int g_rank = 0; /* the rank in fill.cuh's messages */
#include "fill.cuh"
#include "../../tools/mkbench/clock.cuh"

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)

static uint64_t rng_state;
static double urand()
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static uint16_t to16(float f, bool f16)
{
    if (f16) {
        __half h = __float2half_rn(f);
        return *(uint16_t *)&h;
    }
    __nv_bfloat16 b = __float2bfloat16_rn(f);
    return *(uint16_t *)&b;
}
static float from16(uint16_t v, bool f16)
{
    if (f16) return __half2float(*(__half *)&v);
    return __bfloat162float(*(__nv_bfloat16 *)&v);
}

struct Case {
    int d, layout, causal, f16, nseg;
    int64_t batch, seq, heads, kvh;
    int zig; /* positions: zigzag pieces per segment */
    float sx; /* the scale times 1/sqrt(d) (0: 1): large scores, whose row
               * maxima keep rising by many units over the keys */
};

static int64_t idx(int layout, int64_t b, int64_t s, int64_t h, int64_t d, int64_t S, int64_t H,
                   int64_t D)
{
    return layout == MKI_ATTN_BSHD ? ((b * S + s) * H + h) * D + d : ((b * H + h) * S + s) * D + d;
}

static int g_reps = 4;

static int run_case(const Case &c, int rep_seed)
{
    const bool f16 = c.f16 != 0;
    const int64_t S = c.seq, B = c.batch, H = c.heads, HK = c.kvh, D = c.d;
    const int64_t nq = B * S * H * D, nk = B * S * HK * D;
    const int P = c.nseg;
    std::vector<uint16_t> hq(nq), ho(nq);
    std::vector<std::vector<uint16_t>> hk(P, std::vector<uint16_t>(nk)), hv(P, std::vector<uint16_t>(nk));
    for (auto &x : hq) x = to16((float)(urand() * 2 - 1), f16);
    for (int s = 0; s < P; ++s)
        for (int64_t i = 0; i < nk; ++i) {
            hk[s][i] = to16((float)(urand() * 2 - 1), f16);
            hv[s][i] = to16((float)(urand() * 2 - 1), f16);
        }
    /* positions: segment s plays rank s of a ring of P; q is rank `me` */
    const int me = P > 1 ? 1 % P : 0;
    auto pos_of = [&](int r, mki_attn_pos *p) {
        if (c.zig) {
            const int64_t h2 = S / 2;
            p->split = h2;
            p->off0 = r * h2;
            p->off1 = (2 * P - 1 - r) * h2;
        } else {
            p->split = S;
            p->off0 = r * S;
            p->off1 = 0;
        }
    };
    void *dq, *dout;
    float *dlse;
    std::vector<void *> dk(P), dv(P);
    CK(cudaMalloc(&dq, nq * 2));
    CK(cudaMalloc(&dout, nq * 2));
    CK(cudaMalloc((void **)&dlse, B * H * S * 4));
    for (int s = 0; s < P; ++s) {
        CK(cudaMalloc(&dk[s], nk * 2));
        CK(cudaMalloc(&dv[s], nk * 2));
        CK(cudaMemcpy(dk[s], hk[s].data(), nk * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dv[s], hv[s].data(), nk * 2, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(dq, hq.data(), nq * 2, cudaMemcpyHostToDevice));
    mki_attn_args a;
    memset(&a, 0, sizeof(a));
    a.q = dq;
    a.o = dout;
    a.lse = dlse;
    a.batch = B;
    a.seq = S;
    a.heads = H;
    a.kv_heads = HK;
    a.head_dim = D;
    a.layout = c.layout;
    a.dtype = f16 ? MKI_F16 : MKI_BF16;
    a.scale = (c.sx > 0 ? c.sx : 1.0f) / sqrtf((float)D);
    a.causal = c.causal;
    pos_of(me, &a.qpos);
    a.nseg = P;
    for (int s = 0; s < P; ++s) {
        const int src = (me - s + P) % P; /* ring order: own first */
        a.seg[s].k = dk[src];
        a.seg[s].v = dv[src];
        pos_of(src, &a.seg[s].pos);
    }
    char msg[256];
    std::vector<float> hl(B * H * S);
    int bad = 0;
    for (int rep = 0; rep < g_reps && !bad; ++rep) {
        CK(cudaMemset(dout, 0xff, nq * 2)); /* NaN in both types */
        CK(cudaMemset(dlse, 0xff, B * H * S * 4));
        int r = mki_attn_run(&a, 0, msg, sizeof(msg));
        if (r) {
            printf("FAIL run: %s\n", msg);
            return 1;
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(ho.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hl.data(), dlse, B * H * S * 4, cudaMemcpyDeviceToHost));
        /* every output written (no NaN left) */
        for (int64_t i = 0; i < nq && !bad; ++i)
            if (isnan(from16(ho[i], f16))) {
                printf("FAIL: o[%lld] not written\n", (long long)i);
                bad = 1;
            }
        /* sampled rows against fp64 */
        double maxe = 0, maxl = 0;
        const int samples = 48;
        std::vector<double> sc(P * S);
        for (int t = 0; t < samples && !bad; ++t) {
            const int64_t b = (int64_t)(urand() * B), h = (int64_t)(urand() * H);
            int64_t i = (int64_t)(urand() * S);
            if (t == 0) i = 0;
            if (t == 1) i = S - 1;
            const int64_t hk_ = h / (H / HK);
            mki_attn_pos qp;
            pos_of(me, &qp);
            const int64_t qpos = i < qp.split ? qp.off0 + i : qp.off1 + (i - qp.split);
            double mx = -1e300;
            for (int src = 0; src < P; ++src) {
                mki_attn_pos kp;
                pos_of(src, &kp);
                for (int64_t j = 0; j < S; ++j) {
                    const int64_t kpos = j < kp.split ? kp.off0 + j : kp.off1 + (j - kp.split);
                    double v = -INFINITY;
                    if (!c.causal || kpos <= qpos) {
                        v = 0;
                        for (int64_t d = 0; d < D; ++d)
                            v += (double)from16(hq[idx(c.layout, b, i, h, d, S, H, D)], f16) *
                                 (double)from16(hk[src][idx(c.layout, b, j, hk_, d, S, HK, D)], f16);
                        v *= (double)a.scale;
                    }
                    sc[src * S + j] = v;
                    mx = std::max(mx, v);
                }
            }
            double l = 0;
            for (auto &v : sc) {
                v = std::isinf(v) ? 0 : exp(v - mx);
                l += v;
            }
            for (int64_t d = 0; d < D; ++d) {
                double acc = 0;
                for (int src = 0; src < P; ++src)
                    for (int64_t j = 0; j < S; ++j)
                        if (sc[src * S + j] != 0)
                            acc += sc[src * S + j] *
                                   (double)from16(hv[src][idx(c.layout, b, j, hk_, d, S, HK, D)], f16);
                acc /= l;
                const double got = from16(ho[idx(c.layout, b, i, h, d, S, H, D)], f16);
                maxe = std::max(maxe, fabs(got - acc));
            }
            const double lse = mx + log(l);
            maxl = std::max(maxl, fabs((double)hl[(b * H + h) * S + i] - lse));
        }
        /* o: P rounded to 16 bits before P V (relative 2^-8 bf16 / 2^-11
         * fp16 per term) and o rounded once: for values in [-1, 1] an
         * error of a few units of the output's last place */
        const double tol = f16 ? 4e-3 : 2e-2;
        if (maxe > tol || maxl > 1e-3 || isnan(maxe) || isnan(maxl)) {
            printf("FAIL d%d %s %s %s seg%d%s B%lld S%lld H%lld/%lld scale x%g rep %d: max |o err| %.3g "
                   "(tol %.g), max |lse err| %.3g\n",
                   c.d, c.layout ? "BHSD" : "BSHD", c.causal ? "causal" : "full",
                   f16 ? "f16" : "bf16", P, c.zig ? " zigzag" : "", (long long)B, (long long)S,
                   (long long)H, (long long)HK, c.sx > 0 ? c.sx : 1.0, rep, maxe, tol, maxl);
            bad = 1;
        } else if (rep == 0) {
            printf("ok   d%d %s %s %s seg%d%s B%lld S%lld H%lld/%lld scale x%g: max |o err| %.3g, |lse err| %.3g\n",
                   c.d, c.layout ? "BHSD" : "BSHD", c.causal ? "causal" : "full",
                   f16 ? "f16" : "bf16", P, c.zig ? " zigzag" : "", (long long)B, (long long)S,
                   (long long)H, (long long)HK, c.sx > 0 ? c.sx : 1.0, maxe, maxl);
        }
    }
    (void)rep_seed;
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dlse);
    for (int s = 0; s < P; ++s) {
        cudaFree(dk[s]);
        cudaFree(dv[s]);
    }
    return bad;
}

/* Which rows "time" runs: all, or those whose "d/mask/seq" starts with
 * g_only (e.g. 128/full/4096), for a profiler's single launch. */
static const char *g_only;

/* One timed shape: q, k, v (n elements each, distinct random) and o, lse
 * (nl floats, as mkbench attn passes them) allocated here and put into a
 * (q, o, lse, every segment's k and v); 3 warm-up launches, then reps
 * launches back to back, each between two events; the median; one row
 * of the table.  1 on failure. */
static int time_shape(mki_attn_args &a, int64_t n, int64_t nl, const char *mask, double flops,
                      int reps)
{
    char key[64];
    snprintf(key, sizeof key, "%lld/%s/%lld", (long long)a.head_dim, mask, (long long)a.seq);
    if (g_only && strncmp(key, g_only, strlen(g_only))) return 0;
    void *q, *k, *v, *o;
    float *lse;
    CK(cudaMalloc(&q, n * 2));
    CK(cudaMalloc(&k, n * 2));
    CK(cudaMalloc(&v, n * 2));
    CK(cudaMalloc(&o, n * 2));
    CK(cudaMalloc(&lse, nl * 4));
    void *dst[3] = {q, k, v};
    /* filled on the device (fill.cuh), so that the GPU is not left idle,
     * and cool (its clocks rise), between shapes: as mkbench fills them */
    for (int t = 0; t < 3; ++t) {
        fill<<<1024, 256>>>(dst[t], (size_t)n, ++rng_state, 0);
        CK(cudaGetLastError());
    }
    a.q = q;
    a.o = o;
    a.lse = lse;
    for (int s = 0; s < a.nseg; ++s) { /* every segment reads the same bytes */
        a.seg[s].k = k;
        a.seg[s].v = v;
    }
    char msg[256];
    std::vector<cudaEvent_t> ev(2 * (size_t)reps);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 3 + reps; ++i) {
        if (i >= 3) CK(cudaEventRecord(ev[2 * (size_t)(i - 3)]));
        if (mki_attn_run(&a, 0, msg, sizeof(msg))) {
            printf("FAIL: %s\n", msg);
            return 1;
        }
        if (i >= 3) CK(cudaEventRecord(ev[2 * (size_t)(i - 3) + 1]));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float> ms((size_t)reps);
    for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&ms[(size_t)i], ev[2 * (size_t)i], ev[2 * (size_t)i + 1]));
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double mhz = mkb_sm_mhz(0, 200); /* the clock the series ended at */
    printf("%-6lld %-7s %-6lld %5lld %4lld %4s %10.3f %10.1f %8.0f\n", (long long)a.head_dim, mask,
           (long long)a.seq, (long long)a.batch, (long long)a.heads, "", med, flops / med / 1e9,
           mhz);
    for (auto &e : ev) cudaEventDestroy(e);
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
    cudaFree(lse);
    return 0;
}

static mki_attn_args timing_args(int64_t B, int64_t S, int64_t H, int64_t D, int causal)
{
    mki_attn_args a;
    memset(&a, 0, sizeof(a));
    a.batch = B;
    a.seq = S;
    a.heads = H;
    a.kv_heads = H;
    a.head_dim = D;
    a.layout = MKI_ATTN_BSHD;
    a.dtype = MKI_BF16;
    a.scale = 1.0f / sqrtf((float)D);
    a.causal = causal;
    return a;
}

static int timing(int reps)
{
    printf("%-6s %-7s %-6s %5s %4s %4s %10s %10s %8s\n", "d", "mask", "seq", "B", "H", "", "ms", "TFLOP/s",
           "SM MHz");
    const int ds[2] = {64, 128};
    const int seqs[2] = {4096, 16384};
    for (int di = 0; di < 2; ++di)
        for (int causal = 0; causal < 2; ++causal)
            for (int si = 0; si < 2; ++si) {
                const int64_t D = ds[di], S = seqs[si], H = 16;
                const int64_t B = S == 4096 ? 16 : 2;
                mki_attn_args a = timing_args(B, S, H, D, causal);
                a.qpos.split = S;
                a.nseg = 1;
                a.seg[0].pos.split = S;
                const double fl = 4.0 * B * H * S * S * D * (causal ? 0.5 : 1.0);
                if (time_shape(a, B * S * H * D, B * H * S, causal ? "causal" : "full", fl, reps))
                    return 1;
            }
    /* The work of rank 0 of a 2-rank zigzag ring (mkbench ring_attn's 32k
     * and 128k): its chunks 0 and 3 of q against its own keys and rank 1's
     * (chunks 1 and 2; the same bytes, other positions), head_dim 128, one
     * batch element, 16 heads. */
    for (int64_t S : {16384ll, 65536ll}) {
        const int64_t D = 128, H = 16, B = 1, C = S / 2;
        mki_attn_args a = timing_args(B, S, H, D, 1);
        a.qpos = {C, 0, 3 * C};
        a.nseg = 2;
        a.seg[0].pos = {C, 0, 3 * C};
        a.seg[1].pos = {C, C, 2 * C};
        const double fl = 4.0 * B * H * S * (2 * S) * D * 0.5;
        if (time_shape(a, B * S * H * D, B * H * S, "zigzag", fl, reps)) return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "time")) {
        rng_state = 12345;
        const int reps = argc > 2 ? atoi(argv[2]) : 20;
        if (reps < 1) {
            fprintf(stderr, "test_attn_core time: reps must be a positive count\n");
            return 2;
        }
        g_only = argc > 3 ? argv[3] : NULL;
        return timing(reps);
    }
    bool small = argc > 1 && !strcmp(argv[1], "small");
    if (small) {
        g_reps = 1;
        argc--;
        argv++;
    }
    uint64_t seed = argc > 1 ? strtoull(argv[1], 0, 0) : (uint64_t)time(NULL);
    printf("test_attn_core: seed %llu\n", (unsigned long long)seed);
    rng_state = seed;
    std::vector<Case> cs;
    /* d, layout, causal, f16, nseg, batch, seq, heads, kvh, zig */
    for (int d : {64, 128})
        for (int layout = 0; layout < 2; ++layout)
            for (int causal = 0; causal < 2; ++causal) {
                cs.push_back({d, layout, causal, 0, 1, 2, 1000, 4, 4, 0});
                cs.push_back({d, layout, causal, 1, 1, 1, 4097, 8, 2, 0});
            }
    cs.push_back({128, 0, 0, 0, 1, 1, 4096, 8, 1, 0});  /* GQA 8 */
    cs.push_back({128, 0, 1, 0, 3, 1, 1000, 4, 1, 0});  /* 3 segments, contiguous causal */
    cs.push_back({128, 1, 1, 1, 2, 2, 1000, 4, 4, 1});  /* zigzag over 2 */
    cs.push_back({64, 0, 1, 0, 4, 1, 4098, 4, 1, 1});   /* zigzag over 4, GQA 4 */
    cs.push_back({128, 0, 0, 0, 2, 1, 300, 2, 2, 0});   /* full over 2, short */
    cs.push_back({128, 0, 1, 0, 1, 1, 1, 2, 2, 0});     /* one row */
    /* d = 64's partial query block comes first (rows below 0 loaded as
     * zeros, never stored): one block of 100 rows, and 193 = 192 + 1 */
    cs.push_back({64, 0, 1, 0, 1, 1, 100, 2, 2, 0});
    cs.push_back({64, 1, 0, 1, 1, 2, 193, 2, 1, 0});
    /* scores 40 times larger (sd ~19 in the kernel's base-2 units): each
     * row's maximum passes the exponent base by far, many times a row */
    cs.push_back({128, 0, 0, 0, 1, 1, 4096, 2, 2, 0, 40.f});
    cs.push_back({64, 1, 1, 1, 2, 1, 1000, 2, 2, 1, 40.f}); /* zigzag over 2, fp16 */
    int fails = 0;
    int ran = 0;
    for (auto &c : cs) {
        if (small && c.seq > 1000) continue;
        fails += run_case(c, 0);
        ran++;
    }
    printf("%s: %d of %d cases failed (seed %llu)\n", fails ? "FAIL" : "PASS", fails, ran,
           (unsigned long long)seed);
    return fails ? 1 : 0;
}
