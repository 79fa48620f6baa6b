/* GPU test of the GEMM engine (kernels/gemm): correctness at odd shapes, both
 * B layouts, all dtypes, beta, CTA subsets, and the fused-kernel hooks with
 * local stand-ins (late signals from another stream, a tile order, an
 * epilogue to another buffer with signals, an fp32 staging-bank add, and a
 * launch whose CTAs are split between compute and other work).
 *
 * Fresh random data every run (seed from the clock, printed; MK_SEED=n to
 * repeat), outputs poisoned with NaN before each call, every element checked
 * written and padding checked untouched. Reference: host fp64 for small
 * products, cuBLAS (bf16/fp16 in, fp32 out, fp32 compute) for large ones.
 * Exit status: 0 when every case passed. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "gemm_launch.h"
#include "rt/wait.cuh"

using namespace mki;
using namespace mki::gemm;

#define CK(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                    cudaGetErrorString(e_));                                                 \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)
#define CKB(call)                                                                            \
    do {                                                                                     \
        cublasStatus_t s_ = (call);                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call,      \
                    (int)s_);                                                                \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)

static unsigned long long g_seed;
static int g_fail, g_pass;
static cublasHandle_t g_blas;

/* ------------------------------------------------------------ data */

__device__ __forceinline__ float hash_uniform(unsigned long long seed, unsigned long long i)
{
    unsigned long long x = seed ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return (float)((x >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f; /* [-1, 1) */
}

/* rows x cols of dtype dt with row stride ld; padding columns stay as they are. */
__global__ void fill_kernel(void *p, int dt, long long rows, long long cols, long long ld,
                            unsigned long long seed)
{
    long long total = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols, c = i % cols;
        float v = hash_uniform(seed, i);
        long long o = r * ld + c;
        if (dt == MKI_DT_BF16) ((__nv_bfloat16 *)p)[o] = __float2bfloat16(v);
        else if (dt == MKI_DT_F16) ((__half *)p)[o] = __float2half(v);
        else ((float *)p)[o] = v;
    }
}

static void fill(void *p, mki_dtype_t dt, long long rows, long long cols, long long ld)
{
    static unsigned long long salt = 0;
    fill_kernel<<<1024, 256>>>(p, dt, rows, cols, ld, g_seed + 0x1234567ull * ++salt);
    CK(cudaGetLastError());
}

static std::vector<float> to_host(const void *d, mki_dtype_t dt, size_t count)
{
    size_t es = mki_dtype_size(dt);
    std::vector<unsigned char> raw(count * es);
    CK(cudaMemcpy(raw.data(), d, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i) {
        if (dt == MKI_DT_F32) {
            memcpy(&out[i], &raw[4 * i], 4);
        } else {
            unsigned short h;
            memcpy(&h, &raw[2 * i], 2);
            if (dt == MKI_DT_BF16) {
                unsigned int w = (unsigned int)h << 16;
                memcpy(&out[i], &w, 4);
            } else {
                __half_raw hr;
                hr.x = h;
                out[i] = __half2float(__half(hr));
            }
        }
    }
    return out;
}

/* ------------------------------------------------------------ reference */

/* P = A * op(B) in fp32 (M x N, ld N) on the device. */
static void reference_product(const void *a, const void *b, float *p, long long m, long long n,
                              long long k, long long lda, long long ldb, int trans_b,
                              mki_dtype_t it)
{
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t t = it == MKI_DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    /* Row-major D = A B  <=>  column-major D^T = B^T A^T. */
    CKB(cublasGemmEx(g_blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m,
                     (int)k, &one, b, t, (int)ldb, a, t, (int)lda, &zero, p, CUDA_R_32F, (int)n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static std::vector<double> host_product(const std::vector<float> &a, const std::vector<float> &b,
                                        long long m, long long n, long long k, long long lda,
                                        long long ldb, int trans_b)
{
    std::vector<double> p((size_t)(m * n), 0.0);
    for (long long i = 0; i < m; ++i)
        for (long long kk = 0; kk < k; ++kk) {
            double av = a[i * lda + kk];
            for (long long j = 0; j < n; ++j)
                p[i * n + j] += av * (trans_b ? b[j * ldb + kk] : b[kk * ldb + j]);
        }
    return p;
}

struct Case {
    long long m, n, k;
    int trans_b;
    mki_dtype_t it, ot;
    float alpha, beta;
    int c_mode;       /* 0 none, 1 separate C, 2 C == D */
    long long ld_pad; /* extra elements per row of A, B and D */
    int num_ctas;
};

static void report(const char *name, bool ok, double err, double tol, long long bad,
                   long long pad_bad)
{
    printf("%-58s %s  rel_err %.2e (tol %.0e)  unwritten/NaN %lld  pad touched %lld\n", name,
           ok ? "PASS" : "FAIL", err, tol, bad, pad_bad);
    ok ? ++g_pass : ++g_fail;
}

static double tolerance(mki_dtype_t ot)
{
    /* bf16 output rounding alone is ~2e-3 relative; fp16 ~3e-4; fp32 output
     * differs from the reference only by summation order. */
    return ot == MKI_DT_BF16 ? 1e-2 : ot == MKI_DT_F16 ? 2e-3 : 1e-4;
}

/* Compares D (device, rows x cols of ot, ld) with ref (+ beta * C0 already
 * folded into ref); checks NaN-free and padding untouched. */
static bool compare(const char *name, const void *d, mki_dtype_t ot, long long m, long long n,
                    long long ld, const std::vector<double> &ref, double tol)
{
    std::vector<float> h = to_host(d, ot, (size_t)(m * ld));
    double num = 0, den = 0;
    long long bad = 0, pad_bad = 0;
    for (long long i = 0; i < m; ++i) {
        for (long long j = 0; j < n; ++j) {
            float v = h[i * ld + j];
            double r = ref[i * n + j];
            if (!isfinite(v)) { ++bad; continue; }
            num += (v - r) * (v - r);
            den += r * r;
        }
        for (long long j = n; j < ld; ++j)
            if (!isnan(h[i * ld + j])) ++pad_bad;
    }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    bool ok = bad == 0 && pad_bad == 0 && err <= tol;
    report(name, ok, err, tol, bad, pad_bad);
    return ok;
}

static std::vector<double> make_ref(const void *da, const void *db, long long m, long long n,
                                    long long k, long long lda, long long ldb, int trans_b,
                                    mki_dtype_t it)
{
    if (m * n * k <= (1LL << 26)) {
        long long brows = trans_b ? n : k;
        std::vector<float> a = to_host(da, it, (size_t)(m * lda));
        std::vector<float> b = to_host(db, it, (size_t)(brows * ldb));
        return host_product(a, b, m, n, k, lda, ldb, trans_b);
    }
    float *p;
    CK(cudaMalloc(&p, sizeof(float) * m * n));
    reference_product(da, db, p, m, n, k, lda, ldb, trans_b, it);
    CK(cudaDeviceSynchronize());
    std::vector<float> hp((size_t)(m * n));
    CK(cudaMemcpy(hp.data(), p, sizeof(float) * m * n, cudaMemcpyDeviceToHost));
    CK(cudaFree(p));
    return std::vector<double>(hp.begin(), hp.end());
}

static const char *dtname(mki_dtype_t t) { return t == MKI_DT_BF16 ? "bf16" : t == MKI_DT_F16 ? "f16" : "f32"; }

static void run_case(const Case &c)
{
    char name[160], msg[512];
    snprintf(name, sizeof name, "%lldx%lldx%lld B:%s %s->%s a%.1f b%.1f%s pad%lld ctas%d", c.m,
             c.n, c.k, c.trans_b ? "NxK" : "KxN", dtname(c.it), dtname(c.ot), c.alpha, c.beta,
             c.c_mode == 2 ? " C=D" : c.c_mode == 1 ? " C" : "", c.ld_pad, c.num_ctas);
    size_t is = mki_dtype_size(c.it), os = mki_dtype_size(c.ot);
    long long lda = c.k + c.ld_pad;
    long long bcols = c.trans_b ? c.k : c.n;
    long long brows = c.trans_b ? c.n : c.k;
    long long ldb = (bcols + 7) / 8 * 8 + c.ld_pad; /* TMA needs 16-byte row strides */
    long long ldd = c.n + c.ld_pad;
    void *a, *b, *d, *cc = nullptr;
    CK(cudaMalloc(&a, is * c.m * lda));
    CK(cudaMalloc(&b, is * brows * ldb));
    CK(cudaMalloc(&d, os * c.m * ldd));
    fill(a, c.it, c.m, c.k, lda);
    fill(b, c.it, brows, bcols, ldb);
    CK(cudaMemset(d, 0xFF, os * c.m * ldd)); /* NaN in every dtype */
    if (c.c_mode == 1) {
        CK(cudaMalloc(&cc, os * c.m * ldd));
        fill(cc, c.ot, c.m, c.n, ldd);
    } else if (c.c_mode == 2) {
        fill(d, c.ot, c.m, c.n, ldd); /* padding keeps its NaN */
        cc = d;
    }
    std::vector<float> c0;
    if (cc)
        c0 = to_host(cc, c.ot, (size_t)(c.m * ldd));

    mki_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = c.m; g.n = c.n; g.k = c.k;
    g.a = a; g.lda = lda; g.b = b; g.ldb = ldb; g.d = d; g.ldd = ldd;
    g.c = cc; g.ldc = ldd;
    g.in_type = c.it; g.out_type = c.ot; g.trans_b = c.trans_b;
    g.alpha = c.alpha; g.beta = c.beta; g.num_ctas = c.num_ctas;
    int r = mki_gemm(&g, msg, sizeof msg);
    if (r != MKI_GEMM_OK) {
        printf("%-58s FAIL  mki_gemm returned %d: %s\n", name, r, msg);
        ++g_fail;
    } else {
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<double> ref = make_ref(a, b, c.m, c.n, c.k, lda, ldb, c.trans_b, c.it);
        for (long long i = 0; i < c.m; ++i)
            for (long long j = 0; j < c.n; ++j) {
                double v = c.alpha * ref[i * c.n + j];
                if (cc && c.beta != 0.0f) v += c.beta * (double)c0[i * ldd + j];
                ref[i * c.n + j] = v;
            }
        compare(name, d, c.ot, c.m, c.n, ldd, ref, tolerance(c.ot));
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(d));
    if (c.c_mode == 1) CK(cudaFree(cc));
}

/* ------------------------------------------------------------ hooks */

/* Stand-in for AllGather+GEMM: row-blocks of A with index >= local_blocks
 * "come from peers". Another agent copies each into A and then raises
 * flags[block] to `epoch`; the producer must not load them before. Tiles run
 * in a supplied order (local rows first, then peers' in arrival order). */
struct LateHooks : DefaultHooks {
    static constexpr bool kWaitA = true;
    const int *order;         /* unit index -> unit id (pm * num_n_blk + n) */
    const uint64_t *flags;    /* per M-block arrival counter */
    uint64_t epoch;
    int local_blocks;
    unsigned long long *error; /* nonzero: a wait timed out */
    __device__ TileCoord tile(const GemmParams &p, int i) const
    {
        int id = order[i];
        return TileCoord{id / p.num_n_blk * p.cluster_m, id % p.num_n_blk};
    }
    __device__ void wait_a(const GemmParams &, TileCoord t, int kb) const
    {
        if (kb != 0 || t.m_blk < local_blocks)
            return;
        uint64_t seen = 0, why = 0;
        if (spin_geq(&flags[t.m_blk], epoch, stop_words{}, nullptr, 2000000000ull, &seen, &why,
                     no_backoff()) != SPIN_OK)
            atomicExch(error, 1ull + t.m_blk);
    }
};

__device__ void spin_ns(uint64_t ns)
{
    uint64_t t0 = globaltimer();
    while (globaltimer() - t0 < ns)
        __nanosleep(1000);
}

/* The "peer": copies row-blocks of A in `arrival` order, one every `gap_ns`,
 * raising each block's flag after its copy (release at system scope).
 * Runs on CTA `agent` of `nagents`, each taking every nagents-th block. */
__device__ void raise_blocks(const __nv_bfloat16 *src, __nv_bfloat16 *dst, long long k,
                             const int *arrival, int npeer, uint64_t *flags, uint64_t epoch,
                             uint64_t gap_ns, int agent, int nagents)
{
    for (int i = agent; i < npeer; i += nagents) {
        int blk = arrival[i];
        if (threadIdx.x == 0)
            spin_ns(gap_ns);
        __syncthreads();
        const uint4 *s = (const uint4 *)(src + (long long)blk * BM * k);
        uint4 *d = (uint4 *)(dst + (long long)blk * BM * k);
        long long n16 = (long long)BM * k / 8;
        for (long long j = threadIdx.x; j < n16; j += blockDim.x)
            d[j] = s[j];
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();
            asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(&flags[blk]), "l"(epoch)
                         : "memory");
        }
    }
}

__global__ void raiser_kernel(const __nv_bfloat16 *src, __nv_bfloat16 *dst, long long k,
                              const int *arrival, int npeer, uint64_t *flags, uint64_t epoch,
                              uint64_t gap_ns)
{
    raise_blocks(src, dst, k, arrival, npeer, flags, epoch, gap_ns, 0, 1);
}

/* Hook 4: one launch, CTAs [0, nother) are the "peers", the rest compute. */
__global__ void __launch_bounds__(kThreads, 1)
    roles_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ LateHooks h,
                 int nother, const __nv_bfloat16 *src, __nv_bfloat16 *dst, const int *arrival,
                 int npeer, uint64_t *flags, uint64_t gap_ns)
{
    extern __shared__ char smem[];
    if ((int)blockIdx.x < nother)
        raise_blocks(src, dst, p.k, arrival, npeer, flags, h.epoch, gap_ns, blockIdx.x, nother);
    else
        run_cta<false, true, 2, LateHooks>(p, h, blockIdx.x - nother, gridDim.x - nother, smem);
}

/* Builds the problem for the hook tests: A (M x K, peers' rows poisoned),
 * the true A in src, B N x K; returns the reference. */
struct HookSetup {
    long long m, n, k;
    int local_blocks, npeer;
    __nv_bfloat16 *a, *src, *b;
    void *d;
    int *order, *arrival;
    uint64_t *flags;
    unsigned long long *error;
    std::vector<double> ref;
    GemmParams p;
    mki_gemm_plan plan;
};

static void hook_setup(HookSetup &s, long long m, long long n, long long k, int local_blocks,
                       mki_dtype_t ot, int cm)
{
    char msg[512];
    s.m = m; s.n = n; s.k = k; s.local_blocks = local_blocks;
    int nmb = (int)((m + BM - 1) / BM), nnb = (int)((n + BN - 1) / BN);
    s.npeer = nmb - local_blocks;
    size_t es = mki_dtype_size(ot);
    CK(cudaMalloc(&s.a, 2 * nmb * BM * k)); /* whole blocks: the raiser copies blocks */
    CK(cudaMalloc(&s.src, 2 * nmb * BM * k));
    CK(cudaMalloc(&s.b, 2 * n * k));
    CK(cudaMalloc(&s.d, es * m * n));
    fill(s.src, MKI_DT_BF16, m, k, k);
    fill(s.b, MKI_DT_BF16, n, k, k);
    CK(cudaMemset(s.a, 0xFF, 2 * nmb * BM * k)); /* peers' rows: NaN until they arrive */
    CK(cudaMemcpy(s.a, s.src, 2 * (long long)local_blocks * BM * k, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(s.d, 0xFF, es * m * n));
    /* arrival: peers' blocks in a scrambled order; work units (cm M-blocks
     * each): local ones first, then the others in the order their last block
     * arrives */
    std::vector<int> arrival, order, when(nmb, -1);
    for (int i = 0; i < s.npeer; ++i) {
        arrival.push_back(local_blocks + (int)((i * 7 + 3) % s.npeer));
        when[arrival.back()] = i;
    }
    int npm = (nmb + cm - 1) / cm;
    std::vector<std::pair<int, int>> units; /* (ready time, pm) */
    for (int pm = 0; pm < npm; ++pm) {
        int ready = -1;
        for (int r = 0; r < cm && pm * cm + r < nmb; ++r)
            ready = std::max(ready, when[pm * cm + r]);
        units.push_back({ready, pm});
    }
    std::stable_sort(units.begin(), units.end());
    for (auto &u : units)
        for (int nb = 0; nb < nnb; ++nb) order.push_back(u.second * nnb + nb);
    CK(cudaMalloc(&s.order, sizeof(int) * order.size()));
    CK(cudaMalloc(&s.arrival, sizeof(int) * (arrival.size() + 1)));
    CK(cudaMemcpy(s.order, order.data(), sizeof(int) * order.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.arrival, arrival.data(), sizeof(int) * arrival.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&s.flags, sizeof(uint64_t) * nmb));
    CK(cudaMemset(s.flags, 0, sizeof(uint64_t) * nmb));
    CK(cudaMalloc(&s.error, sizeof(unsigned long long)));
    CK(cudaMemset(s.error, 0, sizeof(unsigned long long)));
    CK(cudaDeviceSynchronize());
    s.ref = make_ref(s.src, s.b, m, n, k, k, k, 1, MKI_DT_BF16);

    mki_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = m; g.n = n; g.k = k; g.a = s.a; g.b = s.b; g.d = s.d;
    g.in_type = MKI_DT_BF16; g.out_type = ot; g.trans_b = 1; g.alpha = 1.0f;
    mki_gemm_device dev;
    if (query_device(&dev, msg, sizeof msg) || mki_gemm_validate(&g, &dev, &s.plan, msg, sizeof msg) ||
        make_params(&g, &s.plan, &s.p, msg, sizeof msg)) {
        fprintf(stderr, "hook setup: %s\n", msg);
        exit(2);
    }
    set_cluster(s.p, cm);
}

static void hook_free(HookSetup &s)
{
    CK(cudaFree(s.a)); CK(cudaFree(s.src)); CK(cudaFree(s.b)); CK(cudaFree(s.d));
    CK(cudaFree(s.order)); CK(cudaFree(s.arrival)); CK(cudaFree(s.flags)); CK(cudaFree(s.error));
}

static LateHooks late_hooks(const HookSetup &s, uint64_t epoch)
{
    LateHooks h;
    h.order = s.order; h.flags = s.flags; h.epoch = epoch;
    h.local_blocks = s.local_blocks; h.error = s.error;
    return h;
}

static unsigned long long read_error(const HookSetup &s)
{
    unsigned long long e;
    CK(cudaMemcpy(&e, s.error, sizeof e, cudaMemcpyDeviceToHost));
    return e;
}

/* Hooks 1 + 2: the flags are raised late by a kernel on another stream. */
static void test_late_signal(void)
{
    HookSetup s;
    char msg[512];
    hook_setup(s, 2000, 1000, 1024, 3, MKI_DT_BF16, 2);
    cudaStream_t peer, comp;
    CK(cudaStreamCreateWithFlags(&peer, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&comp, cudaStreamNonBlocking));
    cudaEvent_t e0, e1, r1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); CK(cudaEventCreate(&r1));
    const uint64_t gap = 200000; /* 0.2 ms between arrivals */
    CK(cudaEventRecord(e0, comp));
    raiser_kernel<<<1, 256, 0, peer>>>(s.src, s.a, s.k, s.arrival, s.npeer, s.flags, 1, gap);
    CK(cudaGetLastError());
    CK(cudaEventRecord(r1, peer));
    /* fewer CTAs than SMs, so the raiser always has an SM */
    int r = launch<false, true>(s.p, late_hooks(s, 1), 100, 2, comp, msg, sizeof msg);
    CK(cudaEventRecord(e1, comp));
    CK(cudaDeviceSynchronize());
    float ms_gemm = 0;
    CK(cudaEventElapsedTime(&ms_gemm, e0, e1));
    unsigned long long err = read_error(s);
    char name[160];
    snprintf(name, sizeof name, "hook wait+order: %d late blocks, gemm %.2f ms (>= %.2f)%s",
             s.npeer, ms_gemm, s.npeer * gap * 1e-6, err ? " TIMEOUT" : "");
    if (r || err) {
        printf("%-58s FAIL %s\n", name, r ? msg : "wait timed out");
        ++g_fail;
    } else {
        /* The GEMM cannot finish before the last block arrived. */
        bool waited = ms_gemm >= 0.9 * s.npeer * gap * 1e-6;
        bool ok = compare(name, s.d, MKI_DT_BF16, s.m, s.n, s.n, s.ref, 1e-2);
        if (ok && !waited) {
            printf("  ...but it finished before the last arrival: it did not wait\n");
            --g_pass; ++g_fail;
        }
    }
    CK(cudaStreamDestroy(peer)); CK(cudaStreamDestroy(comp));
    hook_free(s);
}

/* Hook 4 (+1, 2): the same, inside one launch with 4 non-compute CTAs. */
static void test_roles(void)
{
    HookSetup s;
    hook_setup(s, 4095, 1000, 4104, 8, MKI_DT_BF16, 2);
    auto kern = roles_kernel;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    /* clusters of 2: roles go by cluster, so nother is even */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int maxc = 0;
    cfg.gridDim = dim3(2);
    CK(cudaOccupancyMaxActiveClusters(&maxc, kern, &cfg));
    int sms = 2 * maxc; /* every CTA co-resident */
    const int nother = 4;
    cfg.gridDim = dim3(sms);
    CK(cudaLaunchKernelEx(&cfg, kern, s.p, late_hooks(s, 7), nother, (const __nv_bfloat16 *)s.src,
                          s.a, (const int *)s.arrival, s.npeer, s.flags, (uint64_t)50000));
    CK(cudaGetLastError());
    /* epoch 7 is never reached by a flag of 0: the raisers store 7 */
    CK(cudaDeviceSynchronize());
    unsigned long long err = read_error(s);
    char name[160];
    snprintf(name, sizeof name, "hook roles: %d other CTAs + %d compute, %d late blocks", nother,
             sms - nother, s.npeer);
    if (err) {
        printf("%-58s FAIL wait timed out (block %llu)\n", name, err - 1);
        ++g_fail;
    } else {
        compare(name, s.d, MKI_DT_BF16, s.m, s.n, s.n, s.ref, 1e-2);
    }
    hook_free(s);
}

/* Hook 3: store each tile through another tensor map (a "peer" buffer, at a
 * row/col offset), then signal per tile; a watcher on another stream copies
 * every tile as soon as its signal is seen: the copy must be complete. */
struct PeerStoreHooks : DefaultHooks {
    static constexpr bool kSignal = true;
    CUtensorMap peer; /* kernel parameter space: fine for TMA */
    int row_off, col_off;
    uint64_t *sig;    /* per tile */
    int direct;       /* 1: plain stores to peer_ptr instead of the tensor map */
    void *peer_ptr;
    long long peer_ld;
    __device__ EpiTarget target(const GemmParams &, TileCoord t) const
    {
        EpiTarget e;
        e.mode = direct ? EPI_DIRECT : EPI_TMA_STORE;
        e.tmap = &peer; /* starts at column col_off and is n wide: it clips there */
        e.row0 = row_off + t.m_blk * BM;
        e.col0 = (direct ? col_off : 0) + t.n_blk * BN;
        e.ptr = peer_ptr;
        e.ld = peer_ld;
        return e;
    }
    __device__ void after_store(const GemmParams &p, TileCoord t) const
    {
        signal_add_release(&sig[t.m_blk * p.num_n_blk + t.n_blk], 1);
    }
};

__global__ void watcher_kernel(const uint64_t *sig, int num_m, int num_n, const __nv_bfloat16 *src,
                               long long ld_src, int row_off, int col_off, __nv_bfloat16 *dst,
                               long long m, long long n)
{
    for (int t = blockIdx.x; t < num_m * num_n; t += gridDim.x) {
        /* watch tiles in reverse order: the last tiles computed are seen first */
        int id = num_m * num_n - 1 - t;
        int mb = id / num_n, nb = id % num_n;
        if (threadIdx.x == 0)
            while (ld_acquire_sys(&sig[id]) < 1) __nanosleep(100);
        __syncthreads();
        for (int i = threadIdx.x; i < BM * BN; i += blockDim.x) {
            long long r = (long long)mb * BM + i / BN, c = (long long)nb * BN + i % BN;
            if (r < m && c < n) {
                unsigned short v;
                const unsigned short *sp =
                    (const unsigned short *)(src + (r + row_off) * ld_src + c + col_off);
                asm volatile("ld.relaxed.sys.global.u16 %0, [%1];" : "=h"(v) : "l"(sp));
                ((unsigned short *)dst)[r * n + c] = v;
            }
        }
        __syncthreads();
    }
}

static void test_peer_store_signal(int direct)
{
    HookSetup s;
    char msg[512];
    /* n * 2 a multiple of 16: TMA clips rows at 16-byte granularity */
    long long m = 1000, n = 1304, k = 512;
    hook_setup(s, m, n, k, (int)((m + BM - 1) / BM), MKI_DT_BF16, 2); /* all rows local */
    const int row_off = 64, col_off = 24;
    long long prow = m + row_off, pld = n + col_off + 40; /* 1368: 16-byte rows */
    __nv_bfloat16 *peer, *copy;
    uint64_t *sig;
    CK(cudaMalloc(&peer, 2 * prow * pld));
    CK(cudaMalloc(&copy, 2 * m * n));
    CK(cudaMemset(peer, 0xFF, 2 * prow * pld));
    CK(cudaMemset(copy, 0xFF, 2 * m * n));
    CK(cudaMalloc(&sig, sizeof(uint64_t) * s.plan.num_tiles));
    CK(cudaMemset(sig, 0, sizeof(uint64_t) * s.plan.num_tiles));
    PeerStoreHooks h;
    /* TMA clips only at the map's edges, so the map covers exactly the
     * window's columns (its base at col_off: 48 bytes, 16-byte aligned); rows
     * start at 0 to exercise row0. */
    if (encode_out_map(&h.peer, peer + col_off, MKI_DT_BF16, prow, n, pld, msg, sizeof msg)) {
        printf("peer map: %s\n", msg);
        exit(2);
    }
    h.row_off = row_off; h.col_off = col_off; h.sig = sig;
    h.direct = direct; h.peer_ptr = peer; h.peer_ld = pld;
    cudaStream_t w, c;
    CK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    watcher_kernel<<<8, 256, 0, w>>>(sig, s.plan.num_m_blk, s.plan.num_n_blk, peer, pld, row_off,
                                     col_off, copy, m, n);
    CK(cudaGetLastError());
    int r = launch<false, true>(s.p, h, 100, 2, c, msg, sizeof msg);
    CK(cudaDeviceSynchronize());
    std::vector<uint64_t> hs(s.plan.num_tiles);
    CK(cudaMemcpy(hs.data(), sig, sizeof(uint64_t) * hs.size(), cudaMemcpyDeviceToHost));
    long long badsig = 0;
    for (uint64_t v : hs) badsig += v != 1;
    char name[128];
    snprintf(name, sizeof name, "hook peer %s + signal: copy taken at the signal",
             direct ? "direct store" : "TMA store");
    if (r || badsig) {
        printf("%-58s FAIL %s (%lld tiles signalled != 1)\n", name, r ? msg : "", badsig);
        ++g_fail;
    } else {
        compare(name, copy, MKI_DT_BF16, m, n, n, s.ref, 1e-2);
        /* the whole peer buffer: the window holds D, the rest stays NaN */
        std::vector<float> hp = to_host(peer, MKI_DT_BF16, (size_t)(prow * pld));
        long long outside = 0;
        for (long long i = 0; i < prow; ++i)
            for (long long j = 0; j < pld; ++j) {
                bool in = i >= row_off && i < row_off + m && j >= col_off && j < col_off + n;
                if (!in && !isnan(hp[i * pld + j])) ++outside;
            }
        report("hook peer store: nothing written outside the window", outside == 0, 0, 0, 0,
               outside);
    }
    CK(cudaStreamDestroy(w)); CK(cudaStreamDestroy(c));
    CK(cudaFree(peer)); CK(cudaFree(copy)); CK(cudaFree(sig));
    hook_free(s);
}

/* Hook 3: add each tile into an fp32 staging bank (TMA reduce-add). */
struct BankAddHooks : DefaultHooks {
    __device__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e;
        e.mode = EPI_TMA_ADD;
        e.tmap = &p.tm_d;
        e.row0 = t.m_blk * BM;
        e.col0 = t.n_blk * BN;
        e.ptr = nullptr;
        e.ld = 0;
        return e;
    }
};

static void test_bank_add(void)
{
    HookSetup s;
    char msg[512];
    long long m = 1000, n = 1000, k = 4104;
    hook_setup(s, m, n, k, (int)((m + BM - 1) / BM), MKI_DT_F32, 1);
    fill(s.d, MKI_DT_F32, m, n, n); /* the bank's previous contents */
    CK(cudaDeviceSynchronize());
    std::vector<float> x = to_host(s.d, MKI_DT_F32, (size_t)(m * n));
    int r = launch<false, true>(s.p, BankAddHooks{}, 132, 2, 0, msg, sizeof msg);
    r = r ? r : launch<false, true>(s.p, BankAddHooks{}, 57, 1, 0, msg, sizeof msg);
    CK(cudaDeviceSynchronize());
    if (r) {
        printf("%-58s FAIL %s\n", "hook fp32 bank add", msg);
        ++g_fail;
    } else {
        std::vector<double> ref = s.ref;
        for (size_t i = 0; i < ref.size(); ++i) ref[i] = x[i] + 2.0 * ref[i];
        compare("hook fp32 bank add (132 CTAs in pairs, then 57 single)", s.d, MKI_DT_F32, m, n, n, ref,
                1e-4);
    }
    hook_free(s);
}

/* ------------------------------------------------------------ main */

/* ------------------------------------------------------- grouped GEMM */

/* mki_gemm_grouped: groups of random rows (0, 1, 128, 256, odd), packed,
 * B stacked; every group's rows against its own reference product (a
 * group's last tile must not write into the next group: its rows are
 * checked too); the rows past the last group untouched (poison); then
 * offsets that break the rules: nothing written, table[1] = 1.  glu > 0:
 * the gated unit (SwiGLU; n = 2 glu): each group's B holds its gate
 * columns [0, glu) then its up columns, D (ld glu) must be silu(x gate) *
 * (x up) of the fp64 products, rounded once, and n != 2 glu is refused. */
static void test_grouped_case(int groups, long long n, long long k, int trans_b, mki_dtype_t it,
                              mki_dtype_t ot, int num_ctas, long long glu = 0)
{
    const long long dn = glu > 0 ? glu : n; /* D's columns */
    const long long A = 128;
    std::vector<long long> rows(groups), off(groups + 1, 0);
    unsigned long long h = g_seed ^ (0x9e37ull * (unsigned)groups) ^ (unsigned long long)n;
    for (int g = 0; g < groups; ++g) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        const int pick = (int)((h >> 33) % 6);
        rows[g] = pick == 0 ? 0 : pick == 1 ? A : pick == 2 ? 1 : pick == 3 ? 2 * A
                                                                : (long long)((h >> 40) % 700);
        off[g + 1] = off[g] + rows[g];
    }
    const long long cap = off[groups] + 77; /* spare rows: must stay poison */
    const size_t ie = mki_dtype_size(it), oe = mki_dtype_size(ot);
    void *da, *db, *dd;
    int64_t *doff;
    int32_t *tab;
    const long long brows = (trans_b ? n : k) * groups, bcols = trans_b ? k : n;
    CK(cudaMalloc(&da, (size_t)(cap * k) * ie));
    CK(cudaMalloc(&db, (size_t)(brows * bcols) * ie));
    CK(cudaMalloc(&dd, (size_t)(cap * dn) * oe));
    CK(cudaMalloc(&doff, sizeof(int64_t) * (groups + 1)));
    CK(cudaMalloc(&tab, sizeof(int32_t) * MKI_GEMM_GROUP_TABLE(cap, groups)));
    fill(da, it, cap, k, k);
    fill(db, it, brows, bcols, bcols);
    std::vector<int64_t> hoff(off.begin(), off.end());
    CK(cudaMemcpy(doff, hoff.data(), sizeof(int64_t) * (groups + 1), cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, (size_t)(cap * dn) * oe));
    mki_gemm_grouped_args g;
    memset(&g, 0, sizeof g);
    g.rows = cap;
    g.n = n;
    g.glu = glu;
    g.k = k;
    g.groups = groups;
    g.a = da;
    g.b = db;
    g.d = dd;
    g.offsets = doff;
    g.table = tab;
    g.in_type = it;
    g.out_type = ot;
    g.trans_b = trans_b;
    g.num_ctas = num_ctas;
    char msg[512];
    if (mki_gemm_grouped(&g, msg, sizeof msg) != MKI_GEMM_OK) {
        printf("grouped %d groups: FAIL: %s\n", groups, msg);
        ++g_fail;
        return;
    }
    CK(cudaDeviceSynchronize());
    bool all = true;
    for (int q = 0; q < groups; ++q) {
        if (rows[q] == 0) continue;
        const char *a = (const char *)da + (size_t)(off[q] * k) * ie;
        const char *b = (const char *)db + (size_t)(q * (trans_b ? n : k) * bcols) * ie;
        std::vector<double> ref = make_ref(a, b, rows[q], n, k, k, bcols, trans_b, it);
        if (glu > 0) {
            std::vector<double> h((size_t)(rows[q] * glu));
            for (long long r = 0; r < rows[q]; ++r)
                for (long long c = 0; c < glu; ++c) {
                    const double gt = ref[(size_t)(r * n + c)], up = ref[(size_t)(r * n + glu + c)];
                    h[(size_t)(r * glu + c)] = gt / (1.0 + exp(-gt)) * up;
                }
            ref.swap(h);
        }
        char name[160];
        snprintf(name, sizeof name, "grouped%s %d/%d: %lld x %lld x %lld tb%d %s->%s ctas %d",
                 glu > 0 ? " glu" : "", q, groups, rows[q], n, k, trans_b, dtname(it), dtname(ot),
                 num_ctas);
        all &= compare(name, (const char *)dd + (size_t)(off[q] * dn) * oe, ot, rows[q], dn, dn,
                       ref, tolerance(ot));
    }
    /* the spare block past the last group: never written */
    {
        std::vector<unsigned char> tail((size_t)(77 * dn) * oe);
        CK(cudaMemcpy(tail.data(), (const char *)dd + (size_t)(off[groups] * dn) * oe, tail.size(),
                      cudaMemcpyDeviceToHost));
        long long touched = 0;
        for (unsigned char c : tail) touched += c != 0xff;
        report("grouped: rows past the last group untouched", touched == 0, 0, 0, 0, touched);
    }
    /* offsets that decrease: nothing computed, the table says why */
    {
        hoff[groups] = -1;
        CK(cudaMemcpy(doff, hoff.data(), sizeof(int64_t) * (groups + 1), cudaMemcpyHostToDevice));
        CK(cudaMemset(dd, 0xff, (size_t)(cap * dn) * oe));
        int r = mki_gemm_grouped(&g, msg, sizeof msg);
        CK(cudaDeviceSynchronize());
        int32_t t2[2];
        CK(cudaMemcpy(t2, tab, sizeof t2, cudaMemcpyDeviceToHost));
        std::vector<unsigned char> all_d((size_t)(cap * dn) * oe);
        CK(cudaMemcpy(all_d.data(), dd, all_d.size(), cudaMemcpyDeviceToHost));
        long long touched = 0;
        for (unsigned char c : all_d) touched += c != 0xff;
        report("grouped: bad offsets compute nothing", r == MKI_GEMM_OK && t2[0] == 0 &&
               t2[1] == 1 && touched == 0, 0, 0, 0, touched);
    }
    if (glu > 0) {
        g.n = n + 8; /* not 2 glu */
        report("grouped glu: n != 2 glu refused",
               mki_gemm_grouped(&g, msg, sizeof msg) == MKI_GEMM_ERR_INVALID, 0, 0, 0, 0);
    }
    (void)all;
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dd));
    CK(cudaFree(doff));
    CK(cudaFree(tab));
}

static void test_grouped(bool quick)
{
    const mki_dtype_t BF = MKI_DT_BF16, F16 = MKI_DT_F16, F32 = MKI_DT_F32;
    test_grouped_case(8, 1024, 512, 1, BF, BF, 0);
    test_grouped_case(8, 1000, 512, 0, BF, BF, 0);
    test_grouped_case(5, 264, 1032, 1, F16, F32, 0);
    test_grouped_case(3, 256, 128, 0, BF, BF, 7); /* odd grid: no pairs */
    /* 4 CTAs: each runs many pairs in turn, multicast and split (tiles of
     * two groups) mixed on the same barriers */
    test_grouped_case(16, 512, 1024, 1, BF, BF, 4);
    test_grouped_case(16, 264, 512, 0, BF, BF, 4);
    test_grouped_case(1, 512, 256, 1, BF, BF, 0);
    if (!quick) test_grouped_case(32, 2048, 2048, 1, BF, BF, 0);
    /* SwiGLU: glu a multiple of 128 and not (the gate's last block reads
     * into the up columns), both B layouts, pairs and single CTAs */
    test_grouped_case(8, 512, 512, 1, BF, BF, 0, 256);
    test_grouped_case(6, 400, 264, 1, F16, F16, 0, 200);
    test_grouped_case(5, 384, 512, 0, BF, BF, 7, 192);
    test_grouped_case(12, 272, 256, 0, BF, BF, 4, 136);
    /* rules the host checks */
    mki_gemm_grouped_args g;
    memset(&g, 0, sizeof g);
    g.rows = 300;
    g.n = 64;
    g.k = 64;
    g.groups = MKI_GEMM_MAX_GROUPS + 1; /* too many */
    g.a = g.b = (void *)16;
    g.d = (void *)4096;
    g.offsets = (const int64_t *)64;
    g.table = (int32_t *)64;
    g.trans_b = 1;
    char msg[256] = "";
    int r = mki_gemm_grouped(&g, msg, sizeof msg);
    report("grouped: too many groups refused", r == MKI_GEMM_ERR_INVALID &&
           strstr(msg, "groups") != nullptr, 0, 0, 0, 0);
    g.groups = 1;
    g.rows = 256;
    g.trans_b = 0;
    g.k = 100;
    r = mki_gemm_grouped(&g, msg, sizeof msg);
    report("grouped: k % 64 != 0 without transB refused", r == MKI_GEMM_ERR_INVALID, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0); /* a hang still leaves the log so far */
    /* The hook tests' kernels spin on stores from kernels on other streams:
     * with lazy module loading the second kernel's load waits for the
     * spinning one to finish (a hang seen on an H200 when run without
     * gemm.sh, which sets it too).  Before the first CUDA call. */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    const char *env = getenv("MK_SEED");
    g_seed = env ? strtoull(env, nullptr, 0) : (unsigned long long)time(nullptr);
    printf("test_gemm: seed %llu (MK_SEED=%llu repeats this run)\n", g_seed, g_seed);
    /* --quick: no products over 2^32 MACs; --small (for compute-sanitizer):
     * no products over 2^31 MACs and no hook tests, whose spin-waits rely on
     * kernels running side by side at full speed. */
    bool small = argc > 1 && !strcmp(argv[1], "--small");
    bool quick = small || (argc > 1 && !strcmp(argv[1], "--quick"));
    long long max_macs = small ? (1LL << 31) : (1LL << 32);
    char msg[512];
    CKB(cublasCreate(&g_blas));
    if (mki_gemm_preload(msg, sizeof msg)) {
        fprintf(stderr, "preload: %s\n", msg);
        return 2;
    }
    const mki_dtype_t BF = MKI_DT_BF16, F16 = MKI_DT_F16, F32 = MKI_DT_F32;
    std::vector<Case> cases = {
        {1024, 1024, 1024, 1, BF, BF, 1, 0, 0, 0, 0},
        {1024, 1024, 1024, 0, BF, BF, 1, 0, 0, 0, 0},
        {1, 1, 8, 1, BF, BF, 1, 0, 0, 0, 0},
        {1, 1, 8, 0, BF, BF, 1, 0, 0, 0, 0},
        {127, 129, 64, 1, BF, BF, 1, 0, 0, 0, 0},
        {129, 127, 64, 0, BF, BF, 1, 0, 0, 0, 0},
        {1000, 1000, 4104, 1, BF, BF, 1, 0, 0, 0, 0},
        {1000, 1000, 4104, 0, BF, BF, 1, 0, 0, 0, 0},
        {4095, 129, 64, 1, BF, BF, 1, 0, 0, 0, 0},
        {1, 8191, 64, 0, BF, BF, 1, 0, 0, 0, 0},
        {8191, 1, 64, 1, BF, BF, 1, 0, 0, 0, 0},
        {8191, 127, 8, 0, BF, BF, 1, 0, 0, 0, 0},
        {4095, 4095, 4104, 1, BF, BF, 1, 0, 0, 0, 0},
        {4095, 4095, 4104, 0, BF, BF, 1, 0, 0, 0, 0},
        {8191, 8191, 1000 / 8 * 8, 1, BF, BF, 1, 0, 0, 0, 0},
        {8192, 8192, 8192, 1, BF, BF, 1, 0, 0, 0, 0},
        {4096, 8192, 4096, 0, BF, BF, 1, 0, 0, 0, 0},
        /* dtypes */
        {1000, 1000, 4104, 1, F16, F16, 1, 0, 0, 0, 0},
        {1000, 1000, 4104, 0, F16, F16, 1, 0, 0, 0, 0},
        {1000, 1000, 4104, 1, BF, F32, 1, 0, 0, 0, 0},
        {1000, 1000, 4104, 0, F16, F32, 1, 0, 0, 0, 0},
        {129, 1000, 4104, 1, BF, F16, 1, 0, 0, 0, 0},
        {127, 129, 64, 1, BF, F32, 1, 0, 0, 0, 0},
        /* alpha, beta, C separate and in place, padded leading dims */
        {1000, 1000, 64, 1, BF, BF, 1.5f, 0.5f, 1, 0, 0},
        {1000, 1000, 64, 0, BF, F32, 1.0f, -1.0f, 2, 0, 0},
        {129, 127, 64, 1, BF, BF, 0.5f, 1.0f, 2, 8, 0},
        {1000, 1000, 128, 1, BF, BF, 1, 0, 0, 8, 0},
        {1000, 1000, 128, 0, F16, F32, 1, 0, 0, 16, 0},
        {1000, 1300, 128, 1, BF, BF, 1, 0, 0, 8, 0}, /* padded ld, rows not 16-byte units */
        /* CTA subsets */
        {4095, 4095, 4104, 1, BF, BF, 1, 0, 0, 0, 116},
        {1000, 1000, 4104, 0, BF, BF, 1, 0, 0, 0, 7},
        {1000, 1000, 4104, 1, BF, BF, 1, 0, 0, 0, 1},
    };
    for (const Case &c : cases) {
        if (quick && c.m * c.n * c.k > max_macs) continue;
        run_case(c);
    }
    if (!small) {
        test_late_signal();
        test_roles();
        test_peer_store_signal(0);
        test_peer_store_signal(1);
    }
    test_bank_add();
    test_grouped(quick);

    /* Errors come back with a message and launch nothing. */
    {
        mki_gemm_args g;
        memset(&g, 0, sizeof g);
        g.m = 64; g.n = 64; g.k = 100; g.a = (void *)16; g.b = (void *)16; g.d = (void *)4096;
        g.trans_b = 1; g.alpha = 1;
        int r = mki_gemm(&g, msg, sizeof msg);
        bool ok = r == MKI_GEMM_ERR_UNSUPPORTED && strstr(msg, "multiple of 8");
        printf("%-58s %s  (%d: %s)\n", "K = 100 rejected", ok ? "PASS" : "FAIL", r, msg);
        ok ? ++g_pass : ++g_fail;
        static char host_buf[1 << 16];
        g.k = 64; g.a = host_buf; g.b = host_buf + 16384; g.d = host_buf + 32768;
        r = mki_gemm(&g, msg, sizeof msg);
        ok = r == MKI_GEMM_ERR_INVALID && strstr(msg, "not device memory");
        printf("%-58s %s  (%d: %s)\n", "host pointers rejected", ok ? "PASS" : "FAIL", r, msg);
        ok ? ++g_pass : ++g_fail;
    }
    CK(cudaGetLastError());
    printf("test_gemm: %d passed, %d failed (seed %llu)\n", g_pass, g_fail, g_seed);
    cublasDestroy(g_blas);
    return g_fail ? 1 : 0;
}
