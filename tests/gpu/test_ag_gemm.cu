/*
 * test_ag_gemm.cu - mkAllGatherGemm on the GPU, one process per rank
 * (mpirun; PMIx bootstrap), 2 GPUs or 1 GPU with 2 or 4 ranks under MPS.
 *
 *   test_ag_gemm correct   shapes (M_r = 1, 1000, 4096, unequal M_r with a
 *                          rank of 0 rows; N, K odd multiples of 8; both B
 *                          layouts; bf16 and fp16) against cuBLAS on the
 *                          gathered matrix, bf16/fp16 out and fp32 out;
 *                          gathered A compared byte for byte
 *   test_ag_gemm stress    200 back-to-back calls with different inputs,
 *                          no host sync between, every result checked
 *   test_ag_gemm nocall    rank 1 skips a call: the others fail with
 *                          mkErrTimeout naming rank 1 (set MK_TIMEOUT_MS)
 *   test_ag_gemm uneven [reps]  20 calls in a row with uneven rows (some
 *                          ranks with none), fresh inputs each, C and the
 *                          gathered A checked against a host reference in
 *                          double (the scale steps: many ranks, MPS,
 *                          virtual nodes)
 *   test_ag_gemm replay    3 calls captured in a CUDA graph, replayed 200
 *                          times, every C checked; per-call time of the
 *                          replays against eager calls (ratio printed)
 *
 * Inputs come from a hash of (seed, rank, call, index), so every rank
 * builds every other rank's A for its reference without communicating.
 * C is poisoned (NaN) before each call; a NaN fails the check.
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
#include <unistd.h>
#include <algorithm>
#include <vector>

#include "mkernel.h"

static int g_rank, g_n;
static mkComm_t g_comm;

#define MKT_EXIT_MK 3 /* a failed mkernel call */
#include "check.h"
#include "fill.cuh"

/* sums of (c - ref)^2, ref^2, and NaN count (c of dtype, ref fp32). */
__global__ void compare(const void *c, const float *ref, size_t n, int dt, double *acc)
{
    double d2 = 0, r2 = 0, bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = dt == 0 ? __bfloat162float(((const __nv_bfloat16 *)c)[i])
                          : __half2float(((const __half *)c)[i]);
        if (isnan(v) || isinf(v)) bad += 1;
        else d2 += (double)(v - ref[i]) * (v - ref[i]);
        r2 += (double)ref[i] * ref[i];
    }
    atomicAdd(&acc[0], d2);
    atomicAdd(&acc[1], r2);
    atomicAdd(&acc[2], bad);
}

__global__ void count_diff(const uint8_t *a, const uint8_t *b, size_t n, unsigned long long *cnt)
{
    unsigned long long k = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        k += a[i] != b[i];
    atomicAdd(cnt, k);
}

struct Shape {
    const char *name;
    std::vector<int64_t> m; /* rows of each rank (cycled over ranks) */
    int64_t n, k;
    int transb, dt, equal;
};

static cublasHandle_t g_blas;
static cudaStream_t g_st;
static double *g_acc;
static unsigned long long *g_cnt;

static uint64_t seed_of(int rank, int call, int what) /* what: 0 A, 1 B */
{
    return ((uint64_t)call << 20) ^ ((uint64_t)rank << 4) ^ (uint64_t)what ^ 0x5a5a0000ull;
}

/* cuBLAS on row-major matrices: C[M x N] = A[M x K] x op(B). */
static void ref_gemm(const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k,
                     int transb, int dt, int out32)
{
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t in = dt == 0 ? CUDA_R_16BF : CUDA_R_16F;
    cudaDataType_t out = out32 ? CUDA_R_32F : in;
    CB(cublasGemmEx(g_blas, transb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m,
                    (int)k, &one, b, in, transb ? (int)k : (int)n, a, in, (int)k, &zero, c,
                    out, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct Bufs {
    void *a, *b, *c, *ga, *gref, *cref16;
    float *cref;
};

/* Builds every rank's A of call `call` into gref (the gathered A). */
static void build_gathered(void *gref, const std::vector<int64_t> &m, int64_t k, int dt, int call)
{
    size_t off = 0;
    for (int r = 0; r < g_n; r++) {
        size_t el = (size_t)m[r] * k;
        if (el)
            fill<<<256, 256, 0, g_st>>>((char *)gref + off * 2, el, seed_of(r, call, 0), dt);
        off += el;
    }
    CK(cudaGetLastError());
}

/* Checks C of one call; returns 0 when good. */
static int check_c(const char *what, const void *c, const Bufs &bf, const std::vector<int64_t> &m,
                   int64_t M, int64_t n, int64_t k, int transb, int dt, int call, int gathered)
{
    build_gathered(bf.gref, m, k, dt, call);
    ref_gemm(bf.gref, bf.b, bf.cref, M, n, k, transb, dt, 1);
    ref_gemm(bf.gref, bf.b, bf.cref16, M, n, k, transb, dt, 0);
    CK(cudaMemsetAsync(g_acc, 0, 6 * sizeof(double), g_st));
    CK(cudaMemsetAsync(g_cnt, 0, sizeof(*g_cnt), g_st));
    size_t cn = (size_t)M * n;
    compare<<<264, 256, 0, g_st>>>(c, bf.cref, cn, dt, g_acc);
    compare<<<264, 256, 0, g_st>>>(bf.cref16, bf.cref, cn, dt, g_acc + 3);
    if (gathered && bf.ga)
        count_diff<<<264, 256, 0, g_st>>>((const uint8_t *)bf.ga, (const uint8_t *)bf.gref,
                                          (size_t)M * k * 2, g_cnt);
    CK(cudaGetLastError());
    double h[6];
    unsigned long long diff = 0;
    CK(cudaMemcpyAsync(h, g_acc, sizeof(h), cudaMemcpyDeviceToHost, g_st));
    CK(cudaMemcpyAsync(&diff, g_cnt, sizeof(diff), cudaMemcpyDeviceToHost, g_st));
    CK(cudaStreamSynchronize(g_st));
    double rel = h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
    double rel_blas = h[4] > 0 ? sqrt(h[3] / h[4]) : sqrt(h[3]);
    /* one rounding to bf16 (2^-9) or fp16 (2^-12) of the output, and the
     * same as cuBLAS's own within a margin */
    double tol = dt == 0 ? 6e-3 : 1e-3;
    int bad = h[2] > 0 || rel > tol || rel > 2 * rel_blas + 1e-4 || diff != 0;
    if (bad || call == 0)
        printf("rank %d %-34s M %6lld N %5lld K %5lld tB %d %s: rel %.2e (cuBLAS %.2e) nan %.0f "
               "gatheredA diff %llu  %s\n",
               g_rank, what, (long long)M, (long long)n, (long long)k, transb,
               dt ? "fp16" : "bf16", rel, rel_blas, h[2], diff, bad ? "FAIL" : "ok");
    return bad;
}

static void alloc_bufs(Bufs &bf, int64_t mmax_local, int64_t M, int64_t n, int64_t k)
{
    memset(&bf, 0, sizeof(bf));
    CK(cudaMalloc(&bf.a, (size_t)(mmax_local ? mmax_local : 1) * k * 2));
    CK(cudaMalloc(&bf.b, (size_t)n * k * 2));
    CK(cudaMalloc(&bf.c, (size_t)(M ? M : 1) * n * 2));
    CK(cudaMalloc(&bf.ga, (size_t)(M ? M : 1) * k * 2));
    CK(cudaMalloc(&bf.gref, (size_t)(M ? M : 1) * k * 2));
    CK(cudaMalloc(&bf.cref16, (size_t)(M ? M : 1) * n * 2));
    CK(cudaMalloc(&bf.cref, (size_t)(M ? M : 1) * n * 4));
}

static void free_bufs(Bufs &bf)
{
    cudaFree(bf.a); cudaFree(bf.b); cudaFree(bf.c); cudaFree(bf.ga);
    cudaFree(bf.gref); cudaFree(bf.cref16); cudaFree(bf.cref);
}

static int run_shape(const Shape &s)
{
    std::vector<int64_t> m(g_n);
    int64_t M = 0;
    for (int r = 0; r < g_n; r++) M += (m[r] = s.equal ? s.m[0] : s.m[r % s.m.size()]);
    Bufs bf;
    alloc_bufs(bf, m[g_rank], M, s.n, s.k);
    mkDataType_t dt = s.dt ? mkFloat16 : mkBfloat16;
    if (m[g_rank])
        fill<<<256, 256, 0, g_st>>>(bf.a, (size_t)m[g_rank] * s.k, seed_of(g_rank, 0, 0), s.dt);
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)s.n * s.k, 777, s.dt);
    poison<<<256, 256, 0, g_st>>>((uint16_t *)bf.c, (size_t)M * s.n);
    poison<<<256, 256, 0, g_st>>>((uint16_t *)bf.ga, (size_t)M * s.k);
    CK(cudaGetLastError());
    /* Without gatheredA first (the GEMM reads this rank's whole tiles
     * straight from A), then with it (every row through the arena). */
    MK(mkAllGatherGemm(bf.a, bf.b, bf.c, NULL, m[g_rank], s.equal ? NULL : m.data(), s.n, s.k,
                       s.transb, dt, g_comm, g_st));
    int bad = check_c(s.name, bf.c, bf, m, M, s.n, s.k, s.transb, s.dt, 0, 0);
    poison<<<256, 256, 0, g_st>>>((uint16_t *)bf.c, (size_t)M * s.n);
    CK(cudaGetLastError());
    MK(mkAllGatherGemm(bf.a, bf.b, bf.c, bf.ga, m[g_rank], s.equal ? NULL : m.data(), s.n, s.k,
                       s.transb, dt, g_comm, g_st));
    bad |= check_c(s.name, bf.c, bf, m, M, s.n, s.k, s.transb, s.dt, 0, 1);
    free_bufs(bf);
    return bad;
}

static int run_correct(void)
{
    std::vector<Shape> shapes = {
        {"M_r=1", {1}, 264, 136, 0, 0, 1},
        {"M_r=1 transB fp16", {1}, 264, 136, 1, 1, 1},
        {"M_r=1000", {1000}, 1032, 520, 0, 0, 1},
        {"M_r=1000 transB", {1000}, 1032, 520, 1, 0, 1},
        {"M_r=1000 fp16", {1000}, 1032, 520, 0, 1, 1},
        {"M_r=4096", {4096}, 2056, 1032, 0, 0, 1},
        {"M_r=4096 transB fp16", {4096}, 2056, 1032, 1, 1, 1},
        {"unequal {1000,0,3000,7}", {1000, 0, 3000, 7}, 776, 264, 0, 0, 0},
        {"unequal {1000,0,3000,7} transB", {1000, 0, 3000, 7}, 776, 264, 1, 1, 0},
        {"unequal {129,4096,1,383}", {129, 4096, 1, 383}, 1000, 1016, 1, 0, 0},
        {"n odd, transB (n=1001)", {300}, 1001, 264, 1, 0, 1},
    };
    int bad = 0;
    for (const Shape &s : shapes) bad += run_shape(s);
    return bad;
}

/* The inputs and outputs of `calls` calls: A_i (mr x k, call i's seed),
 * C_i (M x n; poisoned when asked), and B (777) in bf.b. */
static void alloc_calls(int calls, int64_t mr, int64_t M, int64_t n, int64_t k, bool poison_c,
                        const Bufs &bf, std::vector<void *> &as, std::vector<void *> &cs)
{
    as.assign(calls, NULL);
    cs.assign(calls, NULL);
    for (int i = 0; i < calls; i++) {
        CK(cudaMalloc(&as[i], (size_t)mr * k * 2));
        CK(cudaMalloc(&cs[i], (size_t)M * n * 2));
        fill<<<256, 256, 0, g_st>>>(as[i], (size_t)mr * k, seed_of(g_rank, i, 0), 0);
        if (poison_c) poison<<<256, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)M * n);
    }
    fill<<<256, 256, 0, g_st>>>(bf.b, (size_t)n * k, 777, 0);
    CK(cudaGetLastError());
}

static void free_calls(std::vector<void *> &as, std::vector<void *> &cs)
{
    for (size_t i = 0; i < as.size(); i++) { cudaFree(as[i]); cudaFree(cs[i]); }
}

/* 200 calls, each with its own A (and C), no host sync between. */
static int run_stress(void)
{
    const int calls = 200;
    const int64_t mr = 384, n = 264, k = 520;
    const int64_t M = mr * g_n;
    std::vector<int64_t> m(g_n, mr);
    Bufs bf;
    alloc_bufs(bf, mr, M, n, k);
    std::vector<void *> as, cs;
    alloc_calls(calls, mr, M, n, k, true, bf, as, cs);
    CK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < calls; i++)
        MK(mkAllGatherGemm(as[i], bf.b, cs[i], NULL, mr, NULL, n, k, 0, mkBfloat16, g_comm,
                           g_st));
    int bad = 0;
    for (int i = 0; i < calls; i++)
        bad += check_c("stress", cs[i], bf, m, M, n, k, 0, 0, i, 0);
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) bad++;
    printf("rank %d stress: %d calls, %d bad\n", g_rank, calls, bad);
    free_calls(as, cs);
    free_bufs(bf);
    return bad;
}

/* CUDA graph: one uncaptured call (fused on one node, so the capture must
 * grow the unfused sequence's scratch itself), then 3 calls with
 * their own A and C captured into a graph, launched twice with C poisoned
 * before each launch; every C checked after each.  The graph also holds
 * one call with the gathered A output, checked byte for byte. */
static int run_graph(void)
{
    const int calls = 3;
    const int64_t mr = 384, n = 264, k = 520;
    const int64_t M = mr * g_n;
    std::vector<int64_t> m(g_n, mr);
    Bufs bf;
    alloc_bufs(bf, mr, M, n, k);
    std::vector<void *> as, cs;
    alloc_calls(calls, mr, M, n, k, false, bf, as, cs);
    MK(mkAllGatherGemm(as[0], bf.b, cs[0], NULL, mr, NULL, n, k, 0, mkBfloat16, g_comm, g_st));
    CK(cudaStreamSynchronize(g_st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; i++)
        MK(mkAllGatherGemm(as[i], bf.b, cs[i], i == calls - 1 ? bf.ga : NULL, mr, NULL, n, k,
                           0, mkBfloat16, g_comm, g_st));
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    int bad = 0;
    for (int launch = 0; launch < 2; launch++) {
        for (int i = 0; i < calls; i++)
            poison<<<128, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)M * n);
        poison<<<128, 256, 0, g_st>>>((uint16_t *)bf.ga, (size_t)M * k);
        CK(cudaGetLastError());
        CK(cudaGraphLaunch(exec, g_st));
        for (int i = 0; i < calls; i++)
            bad += check_c("graph", cs[i], bf, m, M, n, k, 0, 0, i, i == calls - 1);
    }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) bad++;
    printf("rank %d graph: %d calls x 2 launches, %d bad\n", g_rank, calls, bad);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    free_calls(as, cs);
    free_bufs(bf);
    return bad;
}

/* Rank 1 skips the second call: every other rank must end with
 * mkErrTimeout naming rank 1, and no process may hang. */
static int run_nocall(void)
{
    const int64_t mr = 256, n = 256, k = 256;
    Bufs bf;
    alloc_bufs(bf, mr, mr * g_n, n, k);
    fill<<<128, 256, 0, g_st>>>(bf.a, (size_t)mr * k, 1, 0);
    fill<<<128, 256, 0, g_st>>>(bf.b, (size_t)n * k, 2, 0);
    MK(mkAllGatherGemm(bf.a, bf.b, bf.c, NULL, mr, NULL, n, k, 0, mkBfloat16, g_comm, g_st));
    CK(cudaStreamSynchronize(g_st));
    int bad = 0;
    if (g_rank != 1) {
        MK(mkAllGatherGemm(bf.a, bf.b, bf.c, NULL, mr, NULL, n, k, 0, mkBfloat16, g_comm, g_st));
        CK(cudaStreamSynchronize(g_st)); /* the kernel gives up at the deadline */
        bad = mkt_nocall_report();
        /* a later call is refused */
        bad |= mkt_nocall_later(mkAllGatherGemm(bf.a, bf.b, bf.c, NULL, mr, NULL, n, k, 0,
                                                mkBfloat16, g_comm, g_st));
    } else {
        mkt_nocall_sit_out("call");
    }
    free_bufs(bf);
    return bad;
}

/* ---- uneven rows against a host reference ---------------------------- */

/* The bits and values (rounded to dt) of what fill() writes. */
static void host_fill(uint16_t *bits, float *vals, size_t n, uint64_t seed, int dt)
{
    for (size_t i = 0; i < n; i++) {
        const float v = hash_val(seed * 0x9e3779b97f4a7c15ull + i);
        if (dt == 0) {
            const __nv_bfloat16 b = __float2bfloat16(v);
            memcpy(&bits[i], &b, 2);
            vals[i] = __bfloat162float(b);
        } else {
            const __half h = __float2half(v);
            memcpy(&bits[i], &h, 2);
            vals[i] = __half2float(h);
        }
    }
}

static float to_float(uint16_t b, int dt)
{
    if (dt == 0) {
        __nv_bfloat16 x;
        memcpy(&x, &b, 2);
        return __bfloat162float(x);
    }
    __half x;
    memcpy(&x, &b, 2);
    return __half2float(x);
}

/* Rank r's rows: none on every third rank from 1, else 17 + 5 r (so M is
 * odd-sized and the ranks' blocks differ). */
static int64_t uneven_rows(int r) { return r % 3 == 1 ? 0 : 17 + 5 * r; }

/* One call of rep: 1 when C or the gathered A is wrong (and lines saying
 * where: the row's owner rank tells whose chunk went wrong). */
static int uneven_check(int rep, int dt, int transb, const std::vector<int64_t> &m, int64_t M,
                        int64_t n, int64_t k, const uint16_t *c, const uint16_t *ga)
{
    std::vector<uint16_t> abits((size_t)M * k), bbits((size_t)n * k);
    std::vector<float> a((size_t)M * k), b((size_t)n * k);
    std::vector<int> owner((size_t)M);
    size_t off = 0;
    for (int r = 0; r < g_n; r++) {
        host_fill(&abits[off * k], &a[off * k], (size_t)m[r] * k, seed_of(r, rep, 0), dt);
        for (int64_t i = 0; i < m[r]; i++) owner[off + i] = r;
        off += (size_t)m[r];
    }
    host_fill(bbits.data(), b.data(), (size_t)n * k, 777 + (uint64_t)rep, dt);
    /* |c - ref| <= one rounding of the output (2^-8 bf16, 2^-11 fp16,
     * doubled) + fp32 accumulation in any order (2 k 2^-24 sum |a b|) */
    const double rel = dt == 0 ? 1.0 / 256 : 1.0 / 2048, acc = 2.0 * (double)k / 16777216.0;
    long long bad = 0, gbad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
                const double p = (double)a[i * k + q] * b[transb ? j * k + q : q * n + j];
                ref += p;
                mag += fabs(p);
            }
            const float got = to_float(c[i * n + j], dt);
            if (!(fabs((double)got - ref) <= rel * fabs(ref) + acc * mag)) {
                if (bad++ < 3)
                    printf("rank %d uneven rep %d: C[%lld][%lld] (row of rank %d) = %g, "
                           "reference %g\n", g_rank, rep, (long long)i, (long long)j,
                           owner[i], got, ref);
            }
        }
    for (size_t x = 0; x < abits.size(); x++)
        if (ga[x] != abits[x] && gbad++ < 3)
            printf("rank %d uneven rep %d: gathered A row %lld (rank %d) col %lld: 0x%04x, "
                   "expected 0x%04x\n", g_rank, rep, (long long)(x / k), owner[x / k],
                   (long long)(x % k), ga[x], abits[x]);
    if (bad || gbad)
        printf("rank %d uneven rep %d (%s, transB %d, M %lld): %lld wrong in C, %lld in the "
               "gathered A  FAIL\n", g_rank, rep, dt ? "fp16" : "bf16", transb, (long long)M,
               bad, gbad);
    return bad || gbad;
}

static int run_uneven(int reps)
{
    const int64_t n = 136, k = 264;
    std::vector<int64_t> m(g_n);
    int64_t M = 0;
    for (int r = 0; r < g_n; r++) M += (m[r] = uneven_rows(r));
    Bufs bf;
    alloc_bufs(bf, m[g_rank], M, n, k);
    std::vector<uint16_t> c((size_t)M * n), ga((size_t)M * k);
    int bad = 0;
    for (int rep = 0; rep < reps; rep++) {
        const int dt = (rep / 2) % 2, transb = rep % 2;
        if (m[g_rank])
            fill<<<128, 256, 0, g_st>>>(bf.a, (size_t)m[g_rank] * k, seed_of(g_rank, rep, 0), dt);
        fill<<<128, 256, 0, g_st>>>(bf.b, (size_t)n * k, 777 + (uint64_t)rep, dt);
        poison<<<128, 256, 0, g_st>>>((uint16_t *)bf.c, (size_t)M * n);
        poison<<<128, 256, 0, g_st>>>((uint16_t *)bf.ga, (size_t)M * k);
        CK(cudaGetLastError());
        MK(mkAllGatherGemm(bf.a, bf.b, bf.c, bf.ga, m[g_rank], m.data(), n, k, transb,
                           dt ? mkFloat16 : mkBfloat16, g_comm, g_st));
        CK(cudaMemcpyAsync(c.data(), bf.c, c.size() * 2, cudaMemcpyDeviceToHost, g_st));
        CK(cudaMemcpyAsync(ga.data(), bf.ga, ga.size() * 2, cudaMemcpyDeviceToHost, g_st));
        CK(cudaStreamSynchronize(g_st));
        bad += uneven_check(rep, dt, transb, m, M, n, k, c.data(), ga.data());
    }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) bad++;
    printf("rank %d uneven: %d calls (M %lld, %lld rows here), %d bad\n", g_rank, reps,
           (long long)M, (long long)m[g_rank], bad);
    free_bufs(bf);
    return bad;
}

/* ---- graph replay ------------------------------------------------------ */

/* Median of v (sorted in place). */
static double median(std::vector<double> &v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* 3 calls (own A and C each) captured into a graph; the graph replayed 200
 * times; every C checked after the first replay and after the last.
 * Then rounds of 20 replays and of 60 eager calls take turns: the ratio
 * of the per-call medians (replay / eager) is printed. */
static int run_replay(void)
{
    const int calls = 3, replays = 200, rounds = 10, per_round = 20;
    const int64_t mr = 2048, n = 4096, k = 4096;
    const int64_t M = mr * g_n;
    std::vector<int64_t> m(g_n, mr);
    Bufs bf;
    alloc_bufs(bf, mr, M, n, k);
    std::vector<void *> as, cs;
    alloc_calls(calls, mr, M, n, k, true, bf, as, cs);
    auto eager = [&]() {
        for (int i = 0; i < calls; i++)
            MK(mkAllGatherGemm(as[i], bf.b, cs[i], NULL, mr, NULL, n, k, 1, mkBfloat16, g_comm,
                               g_st));
    };
    eager(); /* warm-up, and the eager path's resources */
    CK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < calls; i++)
        poison<<<256, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)M * n);
    CK(cudaGetLastError());
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeThreadLocal));
    eager();
    CK(cudaStreamEndCapture(g_st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphLaunch(exec, g_st));
    int bad = 0;
    for (int i = 0; i < calls; i++) bad += check_c("replay 1", cs[i], bf, m, M, n, k, 1, 0, i, 0);
    for (int i = 0; i < calls; i++)
        poison<<<256, 256, 0, g_st>>>((uint16_t *)cs[i], (size_t)M * n);
    CK(cudaGetLastError());
    for (int r = 1; r < replays; r++) CK(cudaGraphLaunch(exec, g_st));
    for (int i = 0; i < calls; i++)
        bad += check_c("replay 200", cs[i], bf, m, M, n, k, 1, 0, i, 0);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> tg, te;
    for (int r = 0; r < rounds; r++) {
        float ms;
        CK(cudaEventRecord(e0, g_st));
        for (int i = 0; i < per_round; i++) CK(cudaGraphLaunch(exec, g_st));
        CK(cudaEventRecord(e1, g_st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        tg.push_back(ms / (per_round * calls));
        CK(cudaEventRecord(e0, g_st));
        for (int i = 0; i < per_round; i++) eager();
        CK(cudaEventRecord(e1, g_st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        te.push_back(ms / (per_round * calls));
    }
    const double g = median(tg), e = median(te);
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) bad++;
    printf("rank %d replay: %d calls x %d replays, %d bad; per call %.4f ms replayed, %.4f ms "
           "eager: replay/eager %.3f\n", g_rank, calls, replays, bad, g, e, g / e);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    free_calls(as, cs);
    free_bufs(bf);
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "correct";
    const int dev = mkt_start(&g_n, &g_st);
    CB(cublasCreate(&g_blas));
    CB(cublasSetStream(g_blas, g_st));
    CK(cudaMalloc(&g_acc, 6 * sizeof(double)));
    CK(cudaMalloc(&g_cnt, sizeof(*g_cnt)));
    int bad = 0;
    if (!strcmp(mode, "correct")) bad = run_correct();
    else if (!strcmp(mode, "stress")) bad = run_stress();
    else if (!strcmp(mode, "nocall")) bad = run_nocall();
    else if (!strcmp(mode, "graph")) bad = run_graph();
    else if (!strcmp(mode, "uneven")) bad = run_uneven(argc > 2 ? atoi(argv[2]) : 20);
    else if (!strcmp(mode, "replay")) bad = run_replay();
    else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    printf("rank %d/%d on device %d: %s %s\n", g_rank, g_n, dev, mode, bad ? "FAIL" : "PASS");
    fflush(stdout);
    if (!strcmp(mode, "nocall")) {
        (void)mkCommAbort(g_comm);
        _exit(bad ? 1 : 0); /* the comm is broken: do not wait on peers */
    }
    cublasDestroy(g_blas);
    MK(mkCommDestroy(g_comm));
    return bad ? 1 : 0;
}
