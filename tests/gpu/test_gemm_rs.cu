/*
 * test_gemm_rs.cu - mkGemmReduceScatter and mkGemmAllReduce on the GPU,
 * one process per rank (mpirun; PMIx bootstrap): 2 GPUs, 1 GPU with 2 or
 * 4 ranks under MPS, virtual nodes.
 *
 *   test_gemm_rs ar-MODE   any mode below with mkGemmAllReduce instead:
 *                          every rank checks all of C, and every rank's C
 *                          must have the same bits (a hash of each rank's
 *                          C, all-gathered and compared)
 *
 *   test_gemm_rs correct   shapes (8192^2 x 4096 per rank; 6000 x 5000
 *                          x 2056 per rank; odd m with the
 *                          even split; uneven m_all with a rank of 0 rows;
 *                          m = 1 and 16; n not a multiple of 8 (the
 *                          unfused sequence); both B layouts; bf16 and
 *                          fp16; decode-sized m: m <= 128 with a partial
 *                          column block, a K tail, uneven K-slices, 0
 *                          rows), each 4 times with fresh inputs
 *                          ("correct 0257": only those shapes of the list;
 *                          shapes 10 and up only in a full run)
 *   test_gemm_rs stress    200 calls with different inputs, no host sync
 *                          between, every result checked (m = 1000, then
 *                          decode-sized m = 16, m = 8 (LL lines) and
 *                          m = 100 (two consumer warpgroups, two units
 *                          per CTA))
 *   test_gemm_rs graph     3 calls captured in a CUDA graph, replayed 20
 *                          times with fresh inputs, every C checked (m =
 *                          2000, then m = 64 and m = 4)
 *   test_gemm_rs nocall    rank 1 skips a call: the others fail with
 *                          mkErrTimeout naming rank 1 (set MK_TIMEOUT_MS)
 *   test_gemm_rs nocall-decode  the same at m = 16 (the decode kernel)
 *   test_gemm_rs badinput  host, misaligned and overlapping pointers: the
 *                          error, its message, C untouched, then a good call
 *   test_gemm_rs time MxNxK  ours against cuBLAS's partial product alone
 *                          (a proxy where there is one GPU; mkbench gemm_rs
 *                          is the benchmark)
 *
 * Every check: C poisoned (NaN) before the call; all of C against a
 * device reference (ref_gemm: fp32 sums of every rank's partial product,
 * computed here from every rank's inputs; not cuBLAS, see ref_gemm); 64
 * sampled elements against a host reference in double.  MKT_STAMPS=1
 * prints when each rank enters, returns from and finishes each call.  Inputs come from a hash of (seed, rank, call), so
 * every rank builds every other rank's A and B without communicating;
 * the seed is printed (MK_SEED repeats a run).
 */
#include <cublas_v2.h>
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
#include <vector>

#include "mkernel.h"
#include "gemm.h" /* our GEMM alone, on this rank's share of the SMs (time) */

static int g_rank, g_n, g_ar;
static mkComm_t g_comm;
static uint64_t g_seed;

#define MKT_EXIT_MK 3
#include "check.h"
#include "fill.cuh"

/* The value fill() writes at index i, as the GPU rounds it. */
static double host_val(uint64_t seed, size_t i, int dt)
{
    float v = hash_val(seed * 0x9e3779b97f4a7c15ull + i);
    return dt == 0 ? (double)__bfloat162float(__float2bfloat16(v))
                   : (double)__half2float(__float2half(v));
}

/* acc: sum (c - ref)^2, sum ref^2, NaN/inf count, count of |c - ref| over
 * 2^-7 |ref| + floor (bf16 rounds to 2^-9 relative; fp32 sums in another
 * order than cuBLAS's differ far less). */
__global__ void compare(const void *c, const float *ref, size_t n, int dt, float floor_abs,
                        double *acc)
{
    double d2 = 0, r2 = 0, bad = 0, far = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = dt == 0 ? __bfloat162float(((const __nv_bfloat16 *)c)[i])
                          : __half2float(((const __half *)c)[i]);
        if (isnan(v) || isinf(v)) {
            bad += 1;
        } else {
            float d = v - ref[i];
            d2 += (double)d * d;
            if (fabsf(d) > fabsf(ref[i]) * (1.0f / 128) + floor_abs) far += 1;
        }
        r2 += (double)ref[i] * ref[i];
    }
    atomicAdd(&acc[0], d2);
    atomicAdd(&acc[1], r2);
    atomicAdd(&acc[2], bad);
    atomicAdd(&acc[3], far);
}

/* An order-free hash of n 16-bit values (mkGemmAllReduce: the same bits
 * on every rank). */
__global__ void hash_bits(const uint16_t *c, size_t n, unsigned long long *h)
{
    unsigned long long x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x += ((unsigned long long)c[i] + 1) * ((i * 0x9e3779b97f4a7c15ull) | 1);
    atomicAdd(h, x);
}

/* The reference product, ref (m x n, fp32, row-major) = A (m x k, row-major)
 * op(B) (+ ref when acc), in fp32: 64 x 64 tiles, 4 x 4 outputs a thread.
 * Not cuBLAS: a cuBLAS kernel may need many SMs at once (clusters, CTAs
 * that wait for each other), and under MPS the other ranks' persistent
 * kernels, spinning for this rank's next call, hold most of the GPU; the
 * reference then waited for their deadline (seen: 4 ranks as 2 x 2 virtual
 * nodes, a rank's check 10 s late, the others timing out).  This kernel's
 * blocks are independent and run on whatever SMs are free. */
__device__ __forceinline__ float ld_in(const void *p, int64_t i, int dt)
{
    return dt == 0 ? __bfloat162float(((const __nv_bfloat16 *)p)[i])
                   : __half2float(((const __half *)p)[i]);
}

__global__ void __launch_bounds__(256) ref_gemm(const void *a, const void *b, float *ref,
                                                int64_t m, int64_t n, int64_t k, int transb,
                                                int dt, int acc)
{
    __shared__ float sa[16][64 + 1], sb[16][64 + 1]; /* [k][row], [k][col] */
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t i0 = (int64_t)blockIdx.y * 64, j0 = (int64_t)blockIdx.x * 64;
    float c[4][4] = {};
    for (int64_t k0 = 0; k0 < k; k0 += 16) {
        for (int e = threadIdx.x; e < 16 * 64; e += 256) {
            const int kk = e % 16, r = e / 16; /* A: 16 consecutive k of a row */
            const int64_t i = i0 + r, ka = k0 + kk;
            sa[kk][r] = i < m && ka < k ? ld_in(a, i * k + ka, dt) : 0.0f;
            int jj, kb;
            if (transb) { kb = e % 16; jj = e / 16; } else { jj = e % 64; kb = e / 64; }
            const int64_t j = j0 + jj, kg = k0 + kb;
            sb[kb][jj] = j < n && kg < k ? ld_in(b, transb ? j * k + kg : kg * n + j, dt) : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < 16; kk++) {
            float av[4], bv[4];
            for (int q = 0; q < 4; q++) av[q] = sa[kk][ty + 16 * q];
            for (int q = 0; q < 4; q++) bv[q] = sb[kk][tx + 16 * q];
            for (int x = 0; x < 4; x++)
                for (int y = 0; y < 4; y++) c[x][y] = fmaf(av[x], bv[y], c[x][y]);
        }
        __syncthreads();
    }
    for (int x = 0; x < 4; x++)
        for (int y = 0; y < 4; y++) {
            const int64_t i = i0 + ty + 16 * x, j = j0 + tx + 16 * y;
            if (i < m && j < n) ref[i * n + j] = (acc ? ref[i * n + j] : 0.0f) + c[x][y];
        }
}

static cublasHandle_t g_blas;
static cudaStream_t g_st;
static double *g_acc;

static uint64_t seed_of(int rank, int call, int what) /* what: 0 A, 1 B */
{
    return g_seed * 1000003ull + (uint64_t)call * 131ull + (uint64_t)rank * 7ull + what;
}

struct Shape {
    const char *name;
    int64_t m, n, k;
    int transb, dt;
    int uneven; /* m_all with a rank of 0 rows */
};

struct Rows {
    std::vector<int64_t> m, off;
    int use_all;
};

static Rows rows_of(const Shape &s)
{
    Rows r;
    r.m.assign(g_n, 0);
    r.off.assign(g_n + 1, 0);
    r.use_all = s.uneven && !g_ar;
    if (g_ar) { /* every rank receives all of D: rows [0, m) everywhere */
        r.m.assign(g_n, s.m);
        return r;
    }
    if (s.uneven) {
        int64_t wsum = 0;
        for (int q = 0; q < g_n; q++) wsum += q % 3 == 1 ? 0 : q + 1;
        int64_t left = s.m;
        for (int q = 0; q < g_n; q++) {
            int64_t w = q % 3 == 1 ? 0 : q + 1;
            r.m[q] = s.m * w / wsum;
            left -= r.m[q];
        }
        r.m[g_n - 1 - (g_n - 1) % 3 % 2] += left; /* a rank with rows takes the rest */
    } else {
        for (int q = 0; q < g_n; q++) r.m[q] = s.m / g_n + (q < s.m % g_n ? 1 : 0);
    }
    for (int q = 0; q < g_n; q++) r.off[q + 1] = r.off[q] + r.m[q];
    return r;
}

static int64_t k_of(const Shape &s, int q)
{
    (void)q; /* every rank the same slice */
    return s.k;
}

/* ref (m_me x n fp32) = sum over q of A_q[my rows] op(B_q), by ref_gemm,
 * from every rank's inputs of call `call`. */
static void reference(const Shape &s, const Rows &r, int call, float *ref, void *ta, void *tb)
{
    const int64_t mme = r.m[g_rank], n = s.n;
    if (mme == 0 || n == 0) return;
    for (int q = 0; q < g_n; q++) {
        const int64_t k = k_of(s, q);
        fill<<<256, 256, 0, g_st>>>(ta, (size_t)s.m * k, seed_of(q, call, 0), s.dt);
        fill<<<256, 256, 0, g_st>>>(tb, (size_t)n * k, seed_of(q, 0, 1), s.dt);
        CK(cudaGetLastError());
        const char *a = (const char *)ta + (size_t)r.off[g_rank] * k * 2;
        const dim3 grid((unsigned)((n + 63) / 64), (unsigned)((mme + 63) / 64));
        ref_gemm<<<grid, 256, 0, g_st>>>(a, tb, ref, mme, n, k, s.transb, s.dt, q > 0);
        CK(cudaGetLastError());
    }
}

/* C of call `call` against ref (all of it) and the host (64 elements). */
static int check(const char *what, const Shape &s, const Rows &r, int call, const void *c,
                 const float *ref)
{
    const int64_t mme = r.m[g_rank], n = s.n;
    if (mme == 0 || n == 0) {
        printf("rank %d %-44s no rows here  ok\n", g_rank, what);
        return 0;
    }
    const size_t cnt = (size_t)mme * n;
    CK(cudaMemsetAsync(g_acc, 0, 4 * sizeof(double), g_st));
    compare<<<256, 256, 0, g_st>>>(c, ref, cnt, s.dt, 1e-3f, g_acc);
    CK(cudaGetLastError());
    double h[4];
    CK(cudaMemcpyAsync(h, g_acc, sizeof(h), cudaMemcpyDeviceToHost, g_st));
    std::vector<uint16_t> hc(cnt);
    CK(cudaMemcpyAsync(hc.data(), c, cnt * 2, cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    const double rel = sqrt(h[0] / (h[1] > 0 ? h[1] : 1));
    /* 64 elements against sums in double of the same rounded inputs */
    int host_bad = 0;
    double host_max = 0;
    for (int x = 0; x < 64; x++) {
        const int64_t i = (int64_t)((hash_val(g_seed + 977 * x + call) * 0.5 + 0.5) * mme) % mme;
        const int64_t j = (int64_t)((hash_val(g_seed * 3 + 131 * x + call) * 0.5 + 0.5) * n) % n;
        const int64_t gi = r.off[g_rank] + i;
        double sum = 0;
        for (int q = 0; q < g_n; q++) {
            const int64_t k = k_of(s, q);
            for (int64_t kk = 0; kk < k; kk++)
                sum += host_val(seed_of(q, call, 0), (size_t)(gi * k + kk), s.dt) *
                       host_val(seed_of(q, 0, 1), s.transb ? (size_t)(j * k + kk)
                                                           : (size_t)(kk * n + j), s.dt);
        }
        const uint16_t bits = hc[(size_t)i * n + j];
        float v;
        if (s.dt == 0) {
            __nv_bfloat16_raw raw;
            raw.x = bits;
            v = __bfloat162float(__nv_bfloat16(raw));
        } else {
            __half_raw raw;
            raw.x = bits;
            v = __half2float(__half(raw));
        }
        const double err = fabs((double)v - sum);
        /* one rounding of the fp32 sum: 2^-8 relative (bf16), plus fp32 */
        const double tol = fabs(sum) * (s.dt == 0 ? 1.0 / 256 : 1.0 / 2048) + 1e-3;
        if (!(err <= tol)) host_bad++;
        if (err > host_max) host_max = err;
    }
    const double lim = s.dt == 0 ? 8e-3 : 1e-3;
    int same = 1;
    if (g_ar) { /* every rank's C hashed, the hashes all-gathered */
        unsigned long long *hd;
        CK(cudaMalloc(&hd, (size_t)(g_n + 1) * 8));
        CK(cudaMemsetAsync(hd, 0, 8, g_st));
        hash_bits<<<256, 256, 0, g_st>>>((const uint16_t *)c, cnt, hd);
        CK(cudaGetLastError());
        MK(mkAllGather(hd, hd + 1, 2, mkFloat32, g_comm, g_st));
        std::vector<unsigned long long> hh(g_n + 1);
        CK(cudaMemcpyAsync(hh.data(), hd, (size_t)(g_n + 1) * 8, cudaMemcpyDeviceToHost, g_st));
        CK(cudaStreamSynchronize(g_st));
        CK(cudaFree(hd));
        for (int q = 0; q < g_n; q++) same &= hh[1 + q] == hh[0];
    }
    const bool ok = h[2] == 0 && h[3] == 0 && rel < lim && host_bad == 0 && same;
    printf("rank %d %-44s rel %.2e nan %g far %g host(64) bad %d max %.2e%s  %s\n", g_rank,
           what, rel, h[2], h[3], host_bad, host_max,
           g_ar ? (same ? " same bits" : " BITS DIFFER") : "", ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

struct Bufs {
    void *a = nullptr, *b = nullptr, *c = nullptr, *ta = nullptr, *tb = nullptr;
    float *ref = nullptr;
};

static void alloc_bufs(Bufs &bf, const Shape &s, const Rows &r)
{
    int64_t kmax = s.k, mmax = 1;
    for (int q = 0; q < g_n; q++) mmax = r.m[q] > mmax ? r.m[q] : mmax;
    CK(cudaMalloc(&bf.a, (size_t)s.m * kmax * 2 + 16));
    CK(cudaMalloc(&bf.b, (size_t)s.n * kmax * 2 + 16));
    CK(cudaMalloc(&bf.c, (size_t)mmax * s.n * 2 + 16));
    CK(cudaMalloc(&bf.ta, (size_t)s.m * kmax * 2 + 16));
    CK(cudaMalloc(&bf.tb, (size_t)s.n * kmax * 2 + 16));
    CK(cudaMalloc(&bf.ref, (size_t)mmax * s.n * 4 + 16));
}

static void free_bufs(Bufs &bf)
{
    for (void *p : {bf.a, bf.b, bf.c, bf.ta, bf.tb, (void *)bf.ref}) CK(cudaFree(p));
}

static mkResult_t call_rs(const Shape &s, const Rows &r, const void *a, const void *b, void *c,
                          cudaStream_t st)
{
    if (g_ar)
        return mkGemmAllReduce(a, b, c, s.m, s.n, k_of(s, g_rank), s.transb,
                               s.dt ? mkFloat16 : mkBfloat16, g_comm, st);
    return mkGemmReduceScatter(a, b, c, r.use_all ? r.m.data() : NULL, s.m, s.n,
                               k_of(s, g_rank), s.transb, s.dt ? mkFloat16 : mkBfloat16, g_comm,
                               st);
}

/* MKT_STAMPS=1 (a diagnostic of the test, not of the library): each rank
 * prints when it enters a call, when the call returns on the host and when
 * its stream has finished it, in ms since the first stamp, so that a rank
 * late to a call shows whether its host or its GPU held it. */
static void stamp(const char *what, int call, const char *at)
{
    static int on = -1;
    static struct timespec t0;
    if (on < 0) {
        on = getenv("MKT_STAMPS") && atoi(getenv("MKT_STAMPS")) > 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    if (!on) return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("stamp rank %d %s #%d %s %.1f ms\n", g_rank, what, call, at,
           (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6);
    fflush(stdout);
}

static int run_shape(const Shape &s, int reps)
{
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    int bad = 0;
    const int64_t k = k_of(s, g_rank);
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)s.n * k, seed_of(g_rank, 0, 1), s.dt);
    for (int rep = 0; rep < reps; rep++) {
        const int call = 1 + rep;
        fill<<<256, 256, 0, g_st>>>(bf.a, (size_t)s.m * k, seed_of(g_rank, call, 0), s.dt);
        poison<<<256, 256, 0, g_st>>>((uint16_t *)bf.c, (size_t)r.m[g_rank] * s.n);
        CK(cudaGetLastError());
        stamp(s.name, call, "enter");
        MK(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
        stamp(s.name, call, "returned");
        if (getenv("MKT_STAMPS")) {
            CK(cudaStreamSynchronize(g_st));
            stamp(s.name, call, "stream done");
        }
        reference(s, r, call, bf.ref, bf.ta, bf.tb);
        if (getenv("MKT_STAMPS")) {
            CK(cudaStreamSynchronize(g_st));
            stamp(s.name, call, "reference done");
        }
        char what[96];
        snprintf(what, sizeof what, "%s #%d", s.name, rep + 1);
        bad += check(what, s, r, call, bf.c, bf.ref);
    }
    free_bufs(bf);
    return bad;
}

static int run_correct(const char *only)
{
    static const Shape shapes[] = {
        {"8192x8192, k 4096/rank, tB bf16", 8192, 8192, 4096, 1, 0, 0},
        {"6000x5000x4112 (k 2056/rank) tB bf16", 6000, 5000, 2056, 1, 0, 0},
        {"1001x1304x520 B fp16 (odd m)", 1001, 1304, 520, 0, 1, 0},
        {"3000x2048x512 uneven, 0 rows, tB bf16", 3000, 2048, 512, 1, 0, 1},
        {"517x768x4104 uneven B bf16", 517, 768, 4104, 0, 0, 1},
        {"1x256x64 B bf16", 1, 256, 64, 0, 0, 0},
        {"16x8192x4096 tB bf16", 16, 8192, 4096, 1, 0, 0},
        {"700x1001x328 tB fp16 (n odd: unfused)", 700, 1001, 328, 1, 1, 0},
        {"24x1024x2048 B fp16 (K-slices)", 24, 1024, 2048, 0, 1, 0},
        /* decode-sized m (kernels/ops/gemm_dec.cu): a partial column
         * block and a K tail; wgmma N = 128; uneven K-slices, B k x n */
        {"100x3000x1000 uneven tB fp16 (decode)", 100, 3000, 1000, 1, 1, 1},
        {"128x8192x4096 tB bf16 (decode)", 128, 8192, 4096, 1, 0, 0},
        {"37x520x4104 B bf16 (decode, 8 K-slices)", 37, 520, 4104, 0, 0, 0},
    };
    int bad = 0, i = 0;
    for (const Shape &s : shapes) {
        char key[8];
        snprintf(key, sizeof key, "%d", i++);
        if (only && !strstr(only, key)) continue; /* "correct 236": shapes 2, 3, 6 only */
        bad += run_shape(s, 4);
    }
    return bad;
}

static int run_stress(const Shape &s)
{
    const int calls = 200;
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    std::vector<void *> as(calls), cs(calls);
    const size_t abytes = (size_t)s.m * s.k * 2, cbytes = (size_t)r.m[g_rank] * s.n * 2 + 16;
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)s.n * s.k, seed_of(g_rank, 0, 1), s.dt);
    for (int i = 0; i < calls; i++) {
        CK(cudaMalloc(&as[i], abytes));
        CK(cudaMalloc(&cs[i], cbytes));
        fill<<<64, 256, 0, g_st>>>(as[i], (size_t)s.m * s.k, seed_of(g_rank, 1 + i, 0), s.dt);
        poison<<<64, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)r.m[g_rank] * s.n);
    }
    CK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < calls; i++) MK(call_rs(s, r, as[i], bf.b, cs[i], g_st));
    int bad = 0;
    for (int i = 0; i < calls; i++) {
        reference(s, r, 1 + i, bf.ref, bf.ta, bf.tb);
        char what[64];
        snprintf(what, sizeof what, "stress call %d", i);
        int b = check(what, s, r, 1 + i, cs[i], bf.ref);
        bad += b;
        if (b && bad > 5) break;
    }
    printf("rank %d stress: %d calls without a sync, %d bad\n", g_rank, calls, bad);
    for (int i = 0; i < calls; i++) {
        CK(cudaFree(as[i]));
        CK(cudaFree(cs[i]));
    }
    free_bufs(bf);
    return bad;
}

static int run_graph(const Shape &s)
{
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    const int ncalls = 3, replays = 20;
    void *as[ncalls], *cs[ncalls];
    for (int i = 0; i < ncalls; i++) {
        CK(cudaMalloc(&as[i], (size_t)s.m * s.k * 2));
        CK(cudaMalloc(&cs[i], (size_t)r.m[g_rank] * s.n * 2 + 16));
    }
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)s.n * s.k, seed_of(g_rank, 0, 1), s.dt);
    /* one eager call first: the slots exist before the capture */
    fill<<<256, 256, 0, g_st>>>(as[0], (size_t)s.m * s.k, seed_of(g_rank, 1, 0), s.dt);
    MK(call_rs(s, r, as[0], bf.b, cs[0], g_st));
    CK(cudaStreamSynchronize(g_st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < ncalls; i++) MK(call_rs(s, r, as[i], bf.b, cs[i], g_st));
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    int bad = 0;
    for (int rep = 0; rep < replays; rep++) {
        for (int i = 0; i < ncalls; i++) {
            const int call = 10 + rep * ncalls + i;
            fill<<<256, 256, 0, g_st>>>(as[i], (size_t)s.m * s.k, seed_of(g_rank, call, 0), s.dt);
            poison<<<256, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)r.m[g_rank] * s.n);
        }
        CK(cudaGraphLaunch(exec, g_st));
        for (int i = 0; i < ncalls; i++) {
            const int call = 10 + rep * ncalls + i;
            reference(s, r, call, bf.ref, bf.ta, bf.tb);
            char what[64];
            snprintf(what, sizeof what, "graph replay %d call %d", rep, i);
            bad += check(what, s, r, call, cs[i], bf.ref);
        }
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (int i = 0; i < ncalls; i++) {
        CK(cudaFree(as[i]));
        CK(cudaFree(cs[i]));
    }
    free_bufs(bf);
    return bad;
}

static int run_nocall(int64_t m)
{
    const Shape s = {"nocall", m, 512, 256, 1, 0, 0};
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    fill<<<128, 256, 0, g_st>>>(bf.a, (size_t)s.m * s.k, 1, 0);
    fill<<<128, 256, 0, g_st>>>(bf.b, (size_t)s.n * s.k, 2, 0);
    MK(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
    CK(cudaStreamSynchronize(g_st));
    int bad = 0;
    if (g_rank != 1) {
        MK(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
        CK(cudaStreamSynchronize(g_st)); /* the kernel gives up at the deadline */
        bad = mkt_nocall_report();
        bad |= mkt_nocall_later(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
    } else {
        mkt_nocall_sit_out("call");
    }
    return bad;
}

/* Bad input that only a GPU can tell: host memory, misaligned and
 * overlapping pointers. Every rank passes the same bad call (the first
 * call of a shape is checked on every rank), gets the error with a
 * message that says what to do, and C stays as it was (poison). */
static int run_badinput(void)
{
    const Shape s = {"bad", 256, 512, 128, 1, 0, 0};
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    const size_t cn = (size_t)r.m[g_rank] * s.n;
    fill<<<64, 256, 0, g_st>>>(bf.a, (size_t)s.m * s.k, seed_of(g_rank, 0, 0), 0);
    fill<<<64, 256, 0, g_st>>>(bf.b, (size_t)s.n * s.k, seed_of(g_rank, 0, 1), 0);
    poison<<<64, 256, 0, g_st>>>((uint16_t *)bf.c, cn);
    CK(cudaStreamSynchronize(g_st));
    std::vector<uint16_t> host_c(cn + 8);
    struct Case {
        const char *what, *expect;
        const void *a, *b;
        void *c;
    } cases[] = {
        {"C in host memory", "not device memory", bf.a, bf.b, host_c.data()},
        {"A misaligned", "not aligned", (const char *)bf.a + 2, bf.b, bf.c},
        {"B misaligned", "not aligned", bf.a, (const char *)bf.b + 8, bf.c},
        {"C overlaps A", "overlaps", bf.a, bf.b, bf.a},
    };
    int bad = 0;
    for (const Case &x : cases) {
        mkResult_t rr = g_ar ? mkGemmAllReduce(x.a, x.b, x.c, s.m, s.n, s.k, s.transb,
                                               mkBfloat16, g_comm, g_st)
                             : mkGemmReduceScatter(x.a, x.b, x.c, NULL, s.m, s.n, s.k,
                                                   s.transb, mkBfloat16, g_comm, g_st);
        const char *msg = mkGetLastError(g_comm);
        const bool ok = rr == mkErrInvalidArgument && strstr(msg, x.expect) != NULL;
        printf("rank %d bad input, %-18s -> %s: \"%s\"  %s\n", g_rank, x.what,
               mkGetErrorString(rr), msg, ok ? "ok" : "FAIL");
        bad += !ok;
    }
    /* nothing was written: C is still all poison */
    std::vector<uint16_t> h(cn);
    CK(cudaStreamSynchronize(g_st));
    CK(cudaMemcpy(h.data(), bf.c, cn * 2, cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (uint16_t v : h) touched += v != 0x7fff;
    printf("rank %d bad input: %zu elements of C written  %s\n", g_rank, touched,
           touched ? "FAIL" : "ok");
    bad += touched != 0;
    /* and the communicator still works */
    MK(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
    reference(s, r, 0, bf.ref, bf.ta, bf.tb);
    bad += check("bad input, then a good call", s, r, 0, bf.c, bf.ref);
    free_bufs(bf);
    return bad;
}

/* time MxNxK (K: this rank's slice): per-call medians of ours and of
 * cuBLAS's partial product alone (M x N x K, bf16 out) on this rank, in
 * turns; on one GPU under MPS this is the fused kernel's cost beside the
 * plain GEMM of the same rank (no NVLink: not the benchmark). */
static double median_ms(std::vector<float> &v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static int run_time(const char *spec)
{
    long long m = 8192, n = 8192, k = 4096;
    if (spec && sscanf(spec, "%lldx%lldx%lld", &m, &n, &k) != 3) return 1;
    const Shape s = {"time", m, n, k, 1, 0, 0};
    Rows r = rows_of(s);
    Bufs bf;
    alloc_bufs(bf, s, r);
    void *d;
    CK(cudaMalloc(&d, (size_t)m * n * 2));
    fill<<<256, 256, 0, g_st>>>(bf.a, (size_t)m * k, seed_of(g_rank, 1, 0), 0);
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)n * k, seed_of(g_rank, 0, 1), 0);
    const int iters = 30, warm = 10;
    std::vector<cudaEvent_t> ev(2 * iters);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    std::vector<float> t[3];
    /* our own GEMM on this rank's share of the SMs (what the fused
     * kernel gets), bf16 out: the fused kernel's cost beside it */
    int sms = 0, ranks_here = 1;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    MK(mkCommLocalSize(g_comm, &ranks_here));
    mki_gemm_args ga;
    memset(&ga, 0, sizeof(ga));
    ga.m = m; ga.n = n; ga.k = k; ga.a = bf.a; ga.b = bf.b; ga.d = d;
    ga.in_type = ga.out_type = MKI_DT_BF16; ga.trans_b = 1; ga.alpha = 1.0f;
    ga.num_ctas = sms / ranks_here; ga.stream = g_st;
    for (int round = 0; round < 3; round++)
        for (int what = 0; what < 3; what++) {
            for (int i = 0; i < warm + iters; i++) {
                if (i >= warm) CK(cudaEventRecord(ev[2 * (i - warm)], g_st));
                if (what == 0) {
                    MK(call_rs(s, r, bf.a, bf.b, bf.c, g_st));
                } else if (what == 2) {
                    char msg[256];
                    if (mki_gemm(&ga, msg, sizeof msg)) {
                        fprintf(stderr, "rank %d: mki_gemm: %s\n", g_rank, msg);
                        exit(2);
                    }
                } else {
                    const float one = 1.0f, zero = 0.0f;
                    CB(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                    &one, bf.b, CUDA_R_16BF, (int)k, bf.a, CUDA_R_16BF, (int)k,
                                    &zero, d, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
                }
                if (i >= warm) CK(cudaEventRecord(ev[2 * (i - warm) + 1], g_st));
            }
            CK(cudaStreamSynchronize(g_st));
            for (int i = 0; i < iters; i++) {
                float ms;
                CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
                t[what].push_back(ms);
            }
        }
    const double ours = median_ms(t[0]), gemm = median_ms(t[1]), own = median_ms(t[2]);
    printf("rank %d time %lldx%lldx%lld (k per rank): ours %.3f ms, cuBLAS partial product "
           "alone %.3f ms, our GEMM on %d SMs %.3f ms; ours/cuBLAS %.3f, ours/our GEMM %.3f\n",
           g_rank, m, n, k, ours, gemm, (int)ga.num_ctas, own, ours / gemm, ours / own);
    for (auto &e : ev) CK(cudaEventDestroy(e));
    CK(cudaFree(d));
    free_bufs(bf);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "correct";
    if (!strncmp(mode, "ar-", 3)) { /* mkGemmAllReduce */
        g_ar = 1;
        mode += 3;
    }
    const int dev = mkt_start(&g_n, &g_st);
    g_seed = mkt_seed(g_st); /* rank 0's, on every rank */
    if (g_rank == 0) printf("test_gemm_rs %s%s: seed %llu (MK_SEED=%llu repeats it), %d ranks\n",
                            g_ar ? "ar-" : "", mode, (unsigned long long)g_seed, (unsigned long long)g_seed, g_n);
    CB(cublasCreate(&g_blas));
    CB(cublasSetStream(g_blas, g_st));
    CK(cudaMalloc(&g_acc, 4 * sizeof(double)));
    int bad = 0;
    if (!strcmp(mode, "correct")) bad = run_correct(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(mode, "stress")) {
        /* the engine's kernel, then the decode-sized one */
        bad = run_stress({"stress 1000x1032x256", 1000, 1032, 256, 1, 0, 0});
        bad += run_stress({"stress 16x1032x512 (decode, 2 K-slices)", 16, 1032, 512, 1, 0, 1});
        bad += run_stress({"stress 8x8192x256 (decode, LL lines)", 8, 8192, 256, 1, 0, 0});
        /* two consumer warpgroups (m > 64); 141 column blocks: a CTA of
         * a 132-CTA grid takes two units, so the staging tile is reused */
        bad += run_stress({"stress 100x9000x520 (decode, two warpgroups)", 100, 9000, 520, 1, 0, 0});
    } else if (!strcmp(mode, "graph")) {
        bad = run_graph({"graph 2000x2048x1024", 2000, 2048, 1024, 1, 0, 1});
        bad += run_graph({"graph 64x2048x1024 (decode)", 64, 2048, 1024, 1, 0, 1});
        bad += run_graph({"graph 4x8192x512 (decode, LL lines)", 4, 8192, 512, 0, 1, 0});
    }
    else if (!strcmp(mode, "nocall")) bad = run_nocall(512);
    else if (!strcmp(mode, "nocall-decode")) bad = run_nocall(16);
    else if (!strcmp(mode, "badinput")) bad = run_badinput();
    else if (!strcmp(mode, "time")) bad = run_time(argc > 2 ? argv[2] : NULL);
    else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    printf("rank %d/%d on device %d: %s %s\n", g_rank, g_n, dev, mode, bad ? "FAIL" : "PASS");
    fflush(stdout);
    if (!strncmp(mode, "nocall", 6)) {
        (void)mkCommAbort(g_comm);
        _exit(bad ? 1 : 0);
    }
    cublasDestroy(g_blas);
    MK(mkCommDestroy(g_comm));
    return bad ? 1 : 0;
}
