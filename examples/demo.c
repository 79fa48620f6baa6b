/*
 * demo - the first program to run after building mkernel.
 *
 *   mpirun -np <number of GPUs> examples/demo   (or srun --mpi=pmix, or alone)
 *
 * It creates a communicator from the launcher and prints what each rank
 * sees.  When every rank has a GPU it ends with mkAllGatherGemm against
 * the unfused sequence on a few bf16 shapes:
 *
 *   ours:     C = mkAllGatherGemm(A_r, B)            one call
 *   unfused:  G = mkAllGather(A_r); C' = G x op(B)   cuBLAS, fp32 accumulation
 *
 * with fresh random inputs (seeded by the time and the rank; the seeds are
 * printed).  Outputs are poisoned (NaN) before every call; C is compared
 * with C' everywhere and, at sampled entries, with an fp64 dot product on
 * the host, which this rank computes from every rank's seed.  Both are
 * timed with CUDA events (warm-up, then the median of ITERS calls).  Rank
 * 0 prints one table; the exit status is non-zero when a shape fails.
 * Without a GPU it says so and stops after the communicator part.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "mkernel.h"

#define MK(call)                                                            \
    do {                                                                    \
        mkResult_t r_ = (call);                                             \
        if (r_ != mkSuccess) {                                              \
            fprintf(stderr, "demo: %s failed: %s: %s\n", #call,             \
                    mkGetErrorString(r_), mkGetLastError(comm));            \
            return 1;                                                       \
        }                                                                   \
    } while (0)

/* ---- mkAllGatherGemm against the unfused sequence ---------------------- */

enum { WARMUP = 3, ITERS = 10, SAMPLES = 64, NSHAPES = 3 };
#define TOL 2e-2 /* max|C - ref| / max|ref|: a few bf16 roundings */

/* Global M (rows split evenly), or rows per rank when m_global is 0. */
struct shape { int64_t m_global, m_local, n, k; int trans_b; };
static const struct shape shapes[NSHAPES] = {
    {4096, 0, 4096, 4096, 1},
    {8192, 0, 8192, 8192, 0},
    {0, 1000, 1032, 1048, 1},
};

/* What each rank reports to all for each shape (gathered as floats). */
enum { R_STATE, R_OURS, R_UNF, R_ERR, R_ERR64, NRES };
enum { ST_PASS = 0, ST_FAIL = 1, ST_NOTRUN = 2 };

struct ctx {
    mkComm_t comm;
    int rank, size;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t ev[2 * ITERS];
    uint64_t *seeds; /* every rank's seed */
};

struct bufs {
    struct shape s;
    int64_t m;                   /* global rows */
    uint64_t a_seed, b_seed;     /* of this rank's A and B */
    uint16_t *ha, *hb, *hc, *hr; /* host: A_r, B, ours, unfused */
    void *a, *b, *c, *r, *g;     /* device: A_r, B, ours, unfused, gathered */
};

static int g_rank;
static mkComm_t g_comm;

#define CU(call)                                                            \
    do {                                                                    \
        cudaError_t e_ = (call);                                            \
        if (e_ != cudaSuccess) {                                            \
            fprintf(stderr, "demo: rank %d: %s: %s\n", g_rank, #call,       \
                    cudaGetErrorString(e_));                                \
            return -1;                                                      \
        }                                                                   \
    } while (0)
#define CB(call)                                                            \
    do {                                                                    \
        cublasStatus_t s_ = (call);                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                  \
            fprintf(stderr, "demo: rank %d: %s: %s\n", g_rank, #call,       \
                    cublasGetStatusString(s_));                             \
            return -1;                                                      \
        }                                                                   \
    } while (0)
#define MKC(call)                                                           \
    do {                                                                    \
        mkResult_t r_ = (call);                                             \
        if (r_ != mkSuccess) {                                              \
            fprintf(stderr, "demo: rank %d: %s: %s: %s\n", g_rank, #call,   \
                    mkGetErrorString(r_), mkGetLastError(g_comm));          \
            return -1;                                                      \
        }                                                                   \
    } while (0)

static uint64_t hash64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t mix(uint64_t a, uint64_t b)
{
    return hash64(a ^ hash64(b + 0x9e3779b97f4a7c15ull));
}

/* Element i of a matrix seeded by seed: uniform in [-1, 1), rounded to
 * bf16 (nearest even).  A hash of (seed, i), so any rank can rebuild any
 * element of any rank's A. */
static uint16_t rnd_bf16(uint64_t seed, uint64_t i)
{
    uint64_t z = hash64(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
    union { float f; uint32_t u; } v;
    v.f = ((float)(z >> 40) - 8388608.0f) / 8388608.0f; /* exact: 24 bits */
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static double from_bf16(uint16_t h)
{
    union { float f; uint32_t u; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

/* ---- agreement among ranks, GPU or not: a split ------------------------ */

/* *all = 1 when every rank passed mine != 0.  The ranks with mine != 0
 * form a communicator (on this rank's GPU, if any, with the smallest
 * workspace: it runs nothing); its size says. */
static int all_agree(mkComm_t comm, int dev, int mine, int *all)
{
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    if (dev >= 0) cfg.cudaDev = dev;
    cfg.workspaceSize = (size_t)1 << 20;
    mkComm_t sub = NULL;
    int size, sub_size = 0;
    MKC(mkCommSize(comm, &size));
    MKC(mkCommSplit(comm, mine ? 0 : MK_SPLIT_NOCOLOR, 0, &sub, &cfg));
    if (sub) {
        MKC(mkCommSize(sub, &sub_size));
        MKC(mkCommDestroy(sub));
    }
    *all = mine && sub_size == size;
    return 0;
}

/* ---- one shape: buffers, calls, timing, checks ------------------------- */

static int alloc_shape(struct ctx *x, int si, struct bufs *b)
{
    memset(b, 0, sizeof(*b));
    b->s = shapes[si];
    if (b->s.m_global) b->s.m_local = b->s.m_global / x->size;
    b->m = b->s.m_local * x->size;
    b->a_seed = mix(x->seeds[x->rank], 2 * (uint64_t)si);
    b->b_seed = mix(x->seeds[x->rank], 2 * (uint64_t)si + 1);
    size_t na = (size_t)(b->s.m_local * b->s.k), nb = (size_t)(b->s.k * b->s.n);
    size_t nc = (size_t)(b->m * b->s.n), ng = (size_t)(b->m * b->s.k);
    b->ha = malloc(2 * na);
    b->hb = malloc(2 * nb);
    b->hc = malloc(2 * nc);
    b->hr = malloc(2 * nc);
    if (!b->ha || !b->hb || !b->hc || !b->hr) {
        fprintf(stderr, "demo: rank %d: out of host memory\n", x->rank);
        return -1;
    }
    for (size_t i = 0; i < na; i++) b->ha[i] = rnd_bf16(b->a_seed, i);
    for (size_t i = 0; i < nb; i++) b->hb[i] = rnd_bf16(b->b_seed, i);
    CU(cudaMalloc(&b->a, 2 * na));
    CU(cudaMalloc(&b->b, 2 * nb));
    CU(cudaMalloc(&b->c, 2 * nc));
    CU(cudaMalloc(&b->r, 2 * nc));
    CU(cudaMalloc(&b->g, 2 * ng));
    CU(cudaMemcpy(b->a, b->ha, 2 * na, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(b->b, b->hb, 2 * nb, cudaMemcpyHostToDevice));
    return 0;
}

static void free_shape(struct bufs *b)
{
    void *d[] = {b->a, b->b, b->c, b->r, b->g};
    for (int i = 0; i < 5; i++)
        if (d[i]) (void)cudaFree(d[i]);
    free(b->ha);
    free(b->hb);
    free(b->hc);
    free(b->hr);
}

/* The unfused sequence on one stream.  cuBLAS is column-major: a row-major
 * X is X^T to it, so C^T (n x M, ld n) = op(B)^T (n x k) x G^T (k x M, ld
 * k).  B stored k x n row-major is the n x k column-major op(B)^T itself
 * (no transpose, ld n); B stored n x k row-major (transB) is a k x n
 * column-major matrix whose transpose is op(B)^T (transpose, ld k). */
static int unfused(struct ctx *x, struct bufs *b)
{
    const struct shape *s = &b->s;
    const float one = 1.0f, zero = 0.0f;
    MKC(mkAllGather(b->a, b->g, (size_t)(s->m_local * s->k), mkBfloat16,
                    x->comm, x->stream));
    CB(cublasGemmEx(x->blas, s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                    CUBLAS_OP_N, (int)s->n, (int)b->m, (int)s->k, &one, b->b,
                    CUDA_R_16BF, s->trans_b ? (int)s->k : (int)s->n, b->g,
                    CUDA_R_16BF, (int)s->k, &zero, b->r, CUDA_R_16BF,
                    (int)s->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

static mkResult_t ours(struct ctx *x, struct bufs *b)
{
    return mkAllGatherGemm(b->a, b->b, b->c, NULL, b->s.m_local, NULL, b->s.n,
                           b->s.k, b->s.trans_b, mkBfloat16, x->comm,
                           x->stream);
}

/* NaN (0xffff in bf16) in the outputs of the next call. */
static int poison(struct ctx *x, struct bufs *b, int fused)
{
    size_t nc = (size_t)(b->m * b->s.n) * 2, ng = (size_t)(b->m * b->s.k) * 2;
    CU(cudaMemsetAsync(fused ? b->c : b->r, 0xff, nc, x->stream));
    if (!fused) CU(cudaMemsetAsync(b->g, 0xff, ng, x->stream));
    return 0;
}

static int cmp_float(const void *p, const void *q)
{
    float a = *(const float *)p, b = *(const float *)q;
    return (a > b) - (a < b);
}

static int wait_done(struct ctx *x)
{
    CU(cudaStreamSynchronize(x->stream)); /* our kernels' waits have deadlines */
    mkResult_t async;
    MKC(mkCommGetAsyncError(x->comm, &async));
    if (async != mkSuccess) {
        fprintf(stderr, "demo: rank %d: the communicator broke: %s: %s\n",
                x->rank, mkGetErrorString(async), mkGetLastError(x->comm));
        return -1;
    }
    return 0;
}

/* WARMUP + ITERS calls, each after a poison; *ms: the median of the last
 * ITERS.  Returns 0, -1 (fatal), or 1 when the first call (which checks
 * the shape with every rank) was refused: *first says why. */
static int time_calls(struct ctx *x, struct bufs *b, int fused, float *ms,
                      mkResult_t *first)
{
    for (int i = 0; i < WARMUP + ITERS; i++) {
        if (poison(x, b, fused)) return -1;
        if (i >= WARMUP) CU(cudaEventRecord(x->ev[2 * (i - WARMUP)], x->stream));
        if (!fused) {
            if (unfused(x, b)) return -1;
        } else if ((*first = ours(x, b)) != mkSuccess) {
            fprintf(stderr, "demo: rank %d: mkAllGatherGemm: %s: %s\n", x->rank,
                    mkGetErrorString(*first), mkGetLastError(x->comm));
            return i == 0 ? 1 : -1;
        }
        if (i >= WARMUP) CU(cudaEventRecord(x->ev[2 * (i - WARMUP) + 1], x->stream));
    }
    if (wait_done(x)) return -1;
    float t[ITERS];
    for (int i = 0; i < ITERS; i++)
        CU(cudaEventElapsedTime(&t[i], x->ev[2 * i], x->ev[2 * i + 1]));
    qsort(t, ITERS, sizeof(float), cmp_float);
    *ms = ITERS % 2 ? t[ITERS / 2] : (t[ITERS / 2 - 1] + t[ITERS / 2]) / 2;
    return 0;
}

/* C[i][j] in fp64 from the bf16 inputs: row i is row i % m_local of the
 * A of rank i / m_local, rebuilt from that rank's seed. */
static double exact(struct ctx *x, const struct bufs *b, int si, int64_t i,
                    int64_t j)
{
    const struct shape *s = &b->s;
    int q = (int)(i / s->m_local);
    uint64_t seed = mix(x->seeds[q], 2 * (uint64_t)si);
    uint64_t row = (uint64_t)(i % s->m_local) * (uint64_t)s->k;
    double sum = 0;
    for (int64_t t = 0; t < s->k; t++) {
        uint16_t bv = s->trans_b ? b->hb[j * s->k + t] : b->hb[t * s->n + j];
        sum += from_bf16(rnd_bf16(seed, row + (uint64_t)t)) * from_bf16(bv);
    }
    return sum;
}

/* res[R_ERR]: max|ours - unfused| / max|unfused| over all of C;
 * res[R_ERR64]: max|ours - fp64| / max|unfused| at SAMPLES entries (the
 * corners included).  A NaN left by the poison counts as infinite. */
static int verify(struct ctx *x, struct bufs *b, int si, float *res)
{
    size_t nc = (size_t)(b->m * b->s.n);
    CU(cudaMemcpy(b->hc, b->c, 2 * nc, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(b->hr, b->r, 2 * nc, cudaMemcpyDeviceToHost));
    double top = 0, diff = 0, d64 = 0, r64 = 0;
    for (size_t i = 0; i < nc; i++) {
        double o = from_bf16(b->hc[i]), r = from_bf16(b->hr[i]);
        if (isnan(o) || isnan(r)) diff = INFINITY;
        else if (fabs(o - r) > diff) diff = fabs(o - r);
        if (fabs(r) > top) top = fabs(r);
    }
    for (int s = 0; s < SAMPLES; s++) {
        int64_t i = s == SAMPLES - 1 ? b->m - 1 : s * b->m / SAMPLES + s % 7;
        if (i >= b->m) i = b->m - 1;
        int64_t j = s == SAMPLES - 1 ? b->s.n - 1 : (s * 2654435761ll) % b->s.n;
        size_t at = (size_t)(i * b->s.n + j);
        double e = exact(x, b, si, i, j);
        double o = from_bf16(b->hc[at]), r = from_bf16(b->hr[at]);
        d64 = isnan(o) ? INFINITY : fmax(d64, fabs(o - e));
        r64 = isnan(r) ? INFINITY : fmax(r64, fabs(r - e));
    }
    top = top > 0 ? top : 1e-30;
    res[R_ERR] = (float)(diff / top);
    res[R_ERR64] = (float)(d64 / top);
    if (r64 / top > TOL)
        fprintf(stderr, "demo: rank %d: shape %d: the unfused result is %.2g "
                "off the fp64 dot products (a layout error in the demo?)\n",
                x->rank, si, r64 / top);
    int ok = diff / top <= TOL && d64 / top <= TOL && r64 / top <= TOL;
    res[R_STATE] = ok ? ST_PASS : ST_FAIL;
    return 0;
}

/* Returns 0, -1 (fatal) or 1 (the first call was refused: *first). */
static int run_shape(struct ctx *x, int si, float *res, mkResult_t *first)
{
    struct bufs b;
    int rc = alloc_shape(x, si, &b);
    if (rc == 0) rc = time_calls(x, &b, 1, &res[R_OURS], first);
    if (rc == 0) rc = time_calls(x, &b, 0, &res[R_UNF], first);
    if (rc == 0) rc = verify(x, &b, si, res); /* both from the last call */
    if (rc < 0) return rc; /* fatal: freeing would wait for the device */
    (void)cudaStreamSynchronize(x->stream);
    free_shape(&b);
    return rc;
}

/* ---- the table --------------------------------------------------------- */

static void print_table(const struct ctx *x, const float *all)
{
    printf("\nmkAllGatherGemm vs the unfused sequence (mkAllGather, then a "
           "cuBLAS GEMM), bf16, %d rank(s)\nms: median of %d calls, slowest "
           "rank; err: max|C - ref| / max|ref|, worst rank (limit %.0e)\n",
           x->size, ITERS, TOL);
    printf("%-32s %-4s %9s %11s %9s %11s %10s  %s\n", "M x N x K (rows per rank)",
           "B", "ours ms", "unfused ms", "speed-up", "err unfused", "err fp64",
           "result");
    for (int si = 0; si < NSHAPES; si++) {
        struct shape s = shapes[si];
        if (s.m_global) s.m_local = s.m_global / x->size;
        float v[NRES] = {0};
        for (int q = 0; q < x->size; q++)
            for (int f = 0; f < NRES; f++)
                v[f] = fmaxf(v[f], all[q * (NSHAPES * NRES + 1) + si * NRES + f]);
        char name[64];
        snprintf(name, sizeof(name), "%lld x %lld x %lld (%lld)",
                 (long long)(s.m_local * x->size), (long long)s.n,
                 (long long)s.k, (long long)s.m_local);
        if (v[R_STATE] == ST_NOTRUN) {
            printf("%-32s %-4s %9s %11s %9s %11s %10s  %s\n", name,
                   s.trans_b ? "NxK" : "KxN", "-", "-", "-", "-", "-", "not run");
            continue;
        }
        printf("%-32s %-4s %9.3f %11.3f %8.2fx %11.1e %10.1e  %s\n", name,
               s.trans_b ? "NxK" : "KxN", v[R_OURS], v[R_UNF],
               v[R_UNF] / v[R_OURS], v[R_ERR], v[R_ERR64],
               v[R_STATE] == ST_PASS ? "PASS" : "FAIL");
    }
    printf("(B: KxN row-major, or NxK row-major with transB = 1; mkAllGatherGemm "
           "runs the unfused sequence itself where its plan predicts no gain: "
           "MK_DEBUG=INFO says when)\n");
    fflush(stdout);
}

/* Every rank's results to every rank: one mkAllGather of floats (the
 * last float: the code that refused a first call, or -1). */
static int gather_results(struct ctx *x, const float *mine, float *all)
{
    size_t count = NSHAPES * NRES + 1;
    void *d;
    CU(cudaMalloc(&d, sizeof(float) * count * (size_t)(x->size + 1)));
    float *dall = (float *)d + count;
    CU(cudaMemcpy(d, mine, sizeof(float) * count, cudaMemcpyHostToDevice));
    MKC(mkAllGather(d, dall, count, mkFloat32, x->comm, x->stream));
    if (wait_done(x)) return -1;
    CU(cudaMemcpy(all, dall, sizeof(float) * count * (size_t)x->size,
                  cudaMemcpyDeviceToHost));
    CU(cudaFree(d));
    return 0;
}

/* Every rank's seed: the time and the rank, exchanged with mkAllGather.
 * A wrong exchange would show as a failed fp64 check. */
static int exchange_seeds(struct ctx *x)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mine = mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                        (uint64_t)x->rank * 0x100000001ull + (uint64_t)getpid());
    void *d;
    size_t n = (size_t)x->size + 1;
    CU(cudaMalloc(&d, sizeof(uint64_t) * n));
    CU(cudaMemcpy(d, &mine, sizeof(mine), cudaMemcpyHostToDevice));
    MKC(mkAllGather(d, (uint64_t *)d + 1, 2, mkFloat32, x->comm, x->stream));
    if (wait_done(x)) return -1;
    CU(cudaMemcpy(x->seeds, (uint64_t *)d + 1, sizeof(uint64_t) * (size_t)x->size,
                  cudaMemcpyDeviceToHost));
    CU(cudaFree(d));
    if (x->seeds[x->rank] != mine) {
        fprintf(stderr, "demo: rank %d: mkAllGather returned a wrong seed\n",
                x->rank);
        return -1;
    }
    if (x->rank == 0) {
        printf("random inputs, seeds by rank:");
        for (int q = 0; q < x->size; q++)
            printf(" %llu", (unsigned long long)x->seeds[q]);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

static int setup(struct ctx *x, int dev)
{
    CU(cudaSetDevice(dev));
    CU(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 2 * ITERS; i++) CU(cudaEventCreate(&x->ev[i]));
    CB(cublasCreate(&x->blas));
    CB(cublasSetStream(x->blas, x->stream));
    x->seeds = calloc((size_t)x->size, sizeof(uint64_t));
    if (!x->seeds) {
        fprintf(stderr, "demo: rank %d: out of host memory\n", x->rank);
        return -1;
    }
    return exchange_seeds(x);
}

static void teardown(struct ctx *x)
{
    if (x->blas) (void)cublasDestroy(x->blas);
    for (int i = 0; i < 2 * ITERS; i++)
        if (x->ev[i]) (void)cudaEventDestroy(x->ev[i]);
    if (x->stream) (void)cudaStreamDestroy(x->stream);
    free(x->seeds);
}

/* 0 when every shape passed on every rank, or when a rank's first
 * mkAllGatherGemm call was refused as unsupported (skipped); else 1. */
static int summarize(const struct ctx *x, const float *all)
{
    int bad = 0, unsupported = -1;
    for (int q = 0; q < x->size; q++) {
        const float *v = &all[q * (NSHAPES * NRES + 1)];
        if (v[NSHAPES * NRES] == (float)mkErrUnsupported) unsupported = q;
        for (int si = 0; si < NSHAPES; si++)
            bad |= v[si * NRES + R_STATE] != ST_PASS;
    }
    if (x->rank == 0) print_table(x, all);
    if (unsupported < 0) return bad;
    if (x->rank == 0)
        printf("mkAllGatherGemm skipped: rank %d says it is not supported "
               "there (its message is above)\n", unsupported);
    return 0;
}

/* Runs every shape and prints the table on rank 0.  Returns 0, 1 (a shape
 * failed) or -1 (fatal: the caller aborts the communicator). */
static int ag_gemm_section(mkComm_t comm, int rank, int size, int dev)
{
    struct ctx x = {comm, rank, size, NULL, NULL, {NULL}, NULL};
    float mine[NSHAPES * NRES + 1] = {0}, *all;
    mkResult_t first = mkSuccess;
    int rc = setup(&x, dev);
    for (int si = 0; si < NSHAPES; si++) mine[si * NRES + R_STATE] = ST_NOTRUN;
    /* A first call refused before the shape check is refused on every
     * rank (the check is collective): all stop, and learn why below. */
    for (int si = 0; rc == 0 && si < NSHAPES; si++)
        rc = run_shape(&x, si, &mine[si * NRES], &first);
    mine[NSHAPES * NRES] = rc == 1 ? (float)first : -1.0f;
    if (rc < 0) return -1; /* no teardown: it would wait for the device */
    all = malloc(sizeof(mine) * (size_t)size);
    if (!all || gather_results(&x, mine, all)) return -1;
    rc = summarize(&x, all);
    free(all);
    teardown(&x);
    return rc;
}

int main(void)
{
    mkComm_t comm = NULL;
    int version, rank, size, lrank, lsize, nodes, dev;
    MK(mkGetVersion(&version));
    MK(mkCommInit(&comm, NULL));
    MK(mkCommRank(comm, &rank));
    MK(mkCommSize(comm, &size));
    MK(mkCommLocalRank(comm, &lrank));
    MK(mkCommLocalSize(comm, &lsize));
    MK(mkCommNodeCount(comm, &nodes));
    MK(mkCommCuDevice(comm, &dev));
    g_rank = rank;
    g_comm = comm;
    if (rank == 0)
        printf("mkernel %d.%d.%d: %d rank(s) on %d node(s)\n", version / 10000,
               version / 100 % 100, version % 100, size, nodes);
    printf("rank %d: local rank %d of %d, CUDA device %d\n", rank, lrank,
           lsize, dev);
    fflush(stdout);
    if (dev < 0)
        printf("rank %d: no GPU found: the communicator works, GPU "
               "operations are skipped on this machine\n", rank);
    int every_gpu = 0, rc = 0;
    if (all_agree(comm, dev, dev >= 0, &every_gpu)) rc = -1;
    else if (every_gpu) rc = ag_gemm_section(comm, rank, size, dev);
    else if (dev >= 0)
        printf("rank %d: not every rank has a GPU: mkAllGatherGemm is "
               "skipped\n", rank);
    fflush(stdout);
    if (rc < 0) { /* peers waiting on this rank fail now, not at a deadline */
        (void)mkCommAbort(comm);
        return 1;
    }
    MK(mkCommDestroy(comm));
    return rc;
}
