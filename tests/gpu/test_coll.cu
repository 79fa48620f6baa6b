/*
 * test_coll.cu - GPU tests of the collectives and the device runtime.
 * Started by tests/gpu/run.sh under mpirun (one process per rank).
 *
 *   test_coll correct [maxbytes]  every op x dtype x size against a host
 *                                 reference (small sizes), a device
 *                                 reference (all sizes) and NCCL; outputs
 *                                 poisoned (NaN) first; in-place variants
 *   test_coll stress              1000 back-to-back calls of mixed ops and
 *                                 sizes, no host sync, checked at the end
 *   test_coll graph               the four ops captured in a CUDA graph,
 *                                 replayed three times, checked each time
 *   test_coll nocall              rank 1 never calls: rank 0 must get
 *                                 mkErrTimeout naming rank 1, rank 1
 *                                 mkErrRemote; nobody hangs
 *   test_coll abort               rank 1 calls mkCommAbort while rank 0
 *                                 waits: rank 0 gets mkErrRemote promptly
 *   test_coll badargs             host pointers, wrong alignment, overlap,
 *                                 refused registrations
 *
 * MKT_ZCOPY=alloc|register|mixed takes the buffers from mkMemAlloc or
 * registers them (zero copy; see dev_alloc); MK_COLL_ZCOPY_MIN=1 then
 * sends every size through it.
 *
 * Input element j of rank r is gen(r, j): a multiple of 1/64 in [-1/2,
 * 1/2), so every sum of up to 8 inputs (a multiple of 1/64 of magnitude
 * at most 4: at most 256/64) is exact in bf16, fp16 and fp32 and the
 * expected output is known bit for bit whatever the summation order.
 * Prints "PASS name" / "FAIL name: why"; exits 1 on any failure.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "mkernel.h"
#ifdef WITH_NCCL
#include <nccl.h>
#include "mki.h" /* comm->boot->bcast carries the ncclUniqueId */
#endif

static int g_rank, g_n, g_fail;
static mkComm_t g_comm;
static cudaStream_t g_st;
#ifdef WITH_NCCL
static ncclComm_t g_nccl;
#endif

#include "check.h"

static void result(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result(int ok, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!ok) g_fail++;
    if (!ok || g_rank == 0) printf("%s rank %d: %s\n", ok ? "PASS" : "FAIL", g_rank, msg);
    fflush(stdout);
}

/* ---- data --------------------------------------------------------------- */

__host__ __device__ static float gen(int r, uint64_t j)
{
    uint64_t x = (j + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r + 7) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    return (float)((int)(x & 63) - 32) / 64.0f;
}

__host__ __device__ static uint32_t to_bits(float f, int dt)
{
    if (dt == mkBfloat16) {
        __nv_bfloat16 b = __float2bfloat16_rn(f);
        return *(uint16_t *)&b;
    }
    if (dt == mkFloat16) {
        __half h = __float2half_rn(f);
        return *(uint16_t *)&h;
    }
    return *(uint32_t *)&f;
}

static int esize(int dt) { return dt == mkFloat32 ? 4 : 2; }
static const char *dname(int dt) { return dt == mkBfloat16 ? "bf16" : dt == mkFloat16 ? "fp16" : "fp32"; }
static const char *opname(int op)
{
    static const char *n[] = {"allgather", "reducescatter", "allreduce", "alltoall"};
    return n[op];
}

/* Expected element i of rank me's output of op (0 AG, 1 RS, 2 AR, 3 A2A). */
__host__ __device__ static uint32_t expect(int op, int dt, int me, int n, uint64_t count, uint64_t i)
{
    if (op == 0) return to_bits(gen((int)(i / count), i % count), dt);
    if (op == 3) return to_bits(gen((int)(i / count), (uint64_t)me * count + i % count), dt);
    uint64_t j = op == 1 ? (uint64_t)me * count + i : i;
    float s = 0;
    for (int q = 0; q < n; q++) s += gen(q, j);
    return to_bits(s, dt);
}

__global__ void fill_kernel(void *buf, uint64_t elems, int dt, int r)
{
    for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < elems;
         j += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t b = to_bits(gen(r, j), dt);
        if (dt == mkFloat32) ((uint32_t *)buf)[j] = b;
        else ((uint16_t *)buf)[j] = (uint16_t)b;
    }
}

__global__ void check_kernel(const void *buf, uint64_t elems, int op, int dt, int me, int n,
                             uint64_t count, unsigned long long *bad, unsigned long long *first)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < elems;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t got = dt == mkFloat32 ? ((const uint32_t *)buf)[i] : ((const uint16_t *)buf)[i];
        if (got != expect(op, dt, me, n, count, i)) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

static unsigned long long *g_bad; /* [0] count, [1] first index (mapped) */

/* Bytes that differ between a and b (device buffers, any size). */
__global__ void diff_kernel(const uint8_t *a, const uint8_t *b, uint64_t n,
                            unsigned long long *cnt)
{
    unsigned long long d = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        d += a[i] != b[i];
    if (d) atomicAdd(cnt, d);
}

static void fill(void *buf, uint64_t elems, int dt)
{
    fill_kernel<<<1024, 256, 0, g_st>>>(buf, elems, dt, g_rank);
    CK(cudaGetLastError());
}

static uint64_t out_elems(int op, uint64_t count)
{
    return op == 2 || op == 1 ? count : count * (uint64_t)g_n;
}
static uint64_t in_elems(int op, uint64_t count)
{
    return op == 0 || op == 2 ? count : count * (uint64_t)g_n;
}

static mkResult_t run_op(int op, const void *s, void *r, uint64_t count, int dt)
{
    mkDataType_t t = (mkDataType_t)dt;
    switch (op) {
    case 0: return mkAllGather(s, r, count, t, g_comm, g_st);
    case 1: return mkReduceScatter(s, r, count, t, g_comm, g_st);
    case 2: return mkAllReduce(s, r, count, t, g_comm, g_st);
    default: return mkAllToAll(s, r, count, t, g_comm, g_st);
    }
}

/* Device reference: number of wrong elements (and the first) of out. */
static unsigned long long dev_check(const void *out, int op, int dt, uint64_t count,
                                    unsigned long long *first)
{
    g_bad[0] = 0;
    g_bad[1] = ~0ull;
    check_kernel<<<1024, 256, 0, g_st>>>(out, out_elems(op, count), op, dt, g_rank, g_n, count,
                                         g_bad, g_bad + 1);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g_st));
    *first = g_bad[1];
    return g_bad[0];
}

/* Host reference, for outputs up to 4M elements (*ran = 0 above). */
static unsigned long long host_check(const void *out, int op, int dt, uint64_t count, int *ran)
{
    uint64_t n = out_elems(op, count);
    *ran = n <= (4u << 20);
    if (!*ran) return 0;
    size_t es = (size_t)esize(dt);
    char *h = (char *)malloc(n * es);
    CK(cudaMemcpy(h, out, n * es, cudaMemcpyDeviceToHost));
    unsigned long long bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t got = es == 4 ? ((uint32_t *)h)[i] : ((uint16_t *)h)[i];
        bad += got != expect(op, dt, g_rank, g_n, count, i);
    }
    free(h);
    return bad;
}

#ifdef WITH_NCCL
static ncclDataType_t nccl_type(int dt)
{
    return dt == mkBfloat16 ? ncclBfloat16 : dt == mkFloat16 ? ncclFloat16 : ncclFloat32;
}
/* Run NCCL's op into ref and count differing bytes against ours. */
static long long nccl_diff(int op, const void *s, void *ref, const void *ours, uint64_t count, int dt)
{
    size_t es = (size_t)esize(dt), ob = out_elems(op, count) * es;
    ncclResult_t r = ncclSuccess;
    if (op == 0) r = ncclAllGather(s, ref, count, nccl_type(dt), g_nccl, g_st);
    else if (op == 1) r = ncclReduceScatter(s, ref, count, nccl_type(dt), ncclSum, g_nccl, g_st);
    else if (op == 2) r = ncclAllReduce(s, ref, count, nccl_type(dt), ncclSum, g_nccl, g_st);
    else {
        ncclGroupStart();
        for (int q = 0; q < g_n; q++) {
            ncclSend((const char *)s + q * count * es, count, nccl_type(dt), q, g_nccl, g_st);
            ncclRecv((char *)ref + q * count * es, count, nccl_type(dt), q, g_nccl, g_st);
        }
        r = ncclGroupEnd();
    }
    if (r != ncclSuccess) {
        printf("rank %d: NCCL failed: %s\n", g_rank, ncclGetErrorString(r));
        return 1; /* counts as a difference: the step fails */
    }
    g_bad[0] = 0;
    diff_kernel<<<1024, 256, 0, g_st>>>((const uint8_t *)ref, (const uint8_t *)ours, ob, g_bad);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g_st));
    return (long long)g_bad[0];
}
#endif

/* ---- tests -------------------------------------------------------------- */

static void *g_send, *g_recv, *g_ref;

/* Buffers of the ops under test.  MKT_ZCOPY picks how (every rank makes
 * the same sequence of collective registration calls):
 *   unset     cudaMalloc, nothing registered (through the workspace)
 *   alloc     mkMemAlloc (peers write straight into recv buffers)
 *   register  cudaMalloc + mkCommRegister
 *   mixed     as register, but odd ranks register a small spare buffer
 *             in place of each recv buffer: peers of an odd rank go
 *             through its workspace, of an even rank straight in. */
static void dev_alloc(void **p, size_t bytes, int recv)
{
    const char *z = getenv("MKT_ZCOPY");
    if (z && !strcmp(z, "alloc")) {
        MK(mkMemAlloc(g_comm, bytes, p));
        return;
    }
    CK(cudaMalloc(p, bytes));
    if (!z || !*z) return;
    void *h, *spare = NULL;
    if (!strcmp(z, "mixed") && recv && g_rank % 2) CK(cudaMalloc(&spare, 4096));
    if (!strcmp(z, "register") || !strcmp(z, "mixed"))
        MK(mkCommRegister(g_comm, spare ? spare : *p, spare ? 4096 : bytes, &h));
    else {
        fprintf(stderr, "MKT_ZCOPY=%s: use alloc, register or mixed\n", z);
        exit(2);
    }
}

static void alloc_bufs(size_t maxblock)
{
    /* The fixed odd counts (up to 1000003 fp32 elements) run at any
     * maxblock: the buffers must hold them too. */
    if (maxblock < (size_t)1000003 * 4) maxblock = (size_t)1000003 * 4;
    dev_alloc(&g_send, maxblock * g_n + 256, 0);
    dev_alloc(&g_recv, maxblock * g_n + 256, 1);
#ifdef WITH_NCCL
    if (g_nccl) CK(cudaMalloc(&g_ref, maxblock * g_n + 256));
#endif
}

static int check_one(int op, int dt, uint64_t count, const char *what)
{
    size_t es = (size_t)esize(dt);
    CK(cudaMemsetAsync(g_recv, 0xff, out_elems(op, count) * es, g_st)); /* NaN */
    fill(g_send, in_elems(op, count), dt);
    mkResult_t r = run_op(op, g_send, g_recv, count, dt);
    if (r != mkSuccess) {
        result(0, "%s %s %s count %llu: %s: %s", what, opname(op), dname(dt),
               (unsigned long long)count, mkGetErrorString(r), mkGetLastError(g_comm));
        return 0;
    }
    CK(cudaStreamSynchronize(g_st));
    unsigned long long first, bad = dev_check(g_recv, op, dt, count, &first);
    int hran = 0;
    unsigned long long hbad = host_check(g_recv, op, dt, count, &hran);
    char hmsg[48];
    if (hran) snprintf(hmsg, sizeof(hmsg), "host ref %llu bad", hbad);
    else snprintf(hmsg, sizeof(hmsg), "host ref not run (> 4M elements)");
    long long nd = 0;
    char nmsg[48];
    snprintf(nmsg, sizeof(nmsg), "NCCL not run");
#ifdef WITH_NCCL
    if (g_nccl) {
        nd = nccl_diff(op, g_send, g_ref, g_recv, count, dt);
        snprintf(nmsg, sizeof(nmsg), "NCCL %lld bytes differ", nd);
    }
#endif
    int ok = bad == 0 && hbad == 0 && nd == 0;
    result(ok, "%s %s %s count %llu (%llu bytes/rank): device ref %llu bad (first %llu), %s, %s",
           what, opname(op), dname(dt), (unsigned long long)count,
           (unsigned long long)(count * es), bad, bad ? first : 0ull, hmsg, nmsg);
    return ok;
}

static int test_correct(size_t maxbytes)
{
    const uint64_t fixed[] = {1, 3, 1000003};
    alloc_bufs(maxbytes);
    for (int op = 0; op < 4; op++)
        for (int dt = 0; dt < 3; dt++) {
            size_t es = (size_t)esize(dt);
            for (unsigned f = 0; f < 3; f++) check_one(op, dt, fixed[f], "odd");
            for (size_t b = 4096; b <= maxbytes; b *= 16) check_one(op, dt, b / es, "pow2");
            if (maxbytes >= (1u << 30)) check_one(op, dt, (1u << 30) / es, "pow2");
        }
    /* In place, at an odd count. */
    uint64_t c = 300007;
    for (int dt = 0; dt < 3; dt++) {
        size_t es = (size_t)esize(dt);
        char *buf = (char *)g_recv;
        CK(cudaMemsetAsync(buf, 0xff, c * es * g_n, g_st));
        fill(buf + g_rank * c * es, c, dt);
        MK(mkAllGather(buf + g_rank * c * es, buf, c, (mkDataType_t)dt, g_comm, g_st));
        unsigned long long first, bad = dev_check(buf, 0, dt, c, &first);
        result(bad == 0, "in-place allgather %s: %llu bad", dname(dt), bad);
        fill(buf, c, dt);
        MK(mkAllReduce(buf, buf, c, (mkDataType_t)dt, g_comm, g_st));
        bad = dev_check(buf, 2, dt, c, &first);
        result(bad == 0, "in-place allreduce %s: %llu bad", dname(dt), bad);
        fill(buf, c * g_n, dt);
        MK(mkReduceScatter(buf, buf + g_rank * c * es, c, (mkDataType_t)dt, g_comm, g_st));
        bad = dev_check(buf + g_rank * c * es, 1, dt, c, &first);
        result(bad == 0, "in-place reducescatter %s: %llu bad", dname(dt), bad);
    }
    return 0;
}

/* 1000 calls, mixed ops and sizes, into 8 output buffers per op; only the
 * last call into each buffer is visible at the end, and it is checked. */
static int test_stress(void)
{
    const int K = 8, N = 1000, dt = mkBfloat16;
    const uint64_t maxc = 1 << 18;
    void *in;
    void *outs[4][8];
    uint64_t last[4][8] = {{0}};
    dev_alloc(&in, maxc * 2 * g_n, 0);
    fill(in, maxc * g_n, dt);
    for (int op = 0; op < 4; op++)
        for (int k = 0; k < K; k++) dev_alloc(&outs[op][k], maxc * 2 * g_n, 1);
    uint64_t seed = 12345;
    double t0 = clock() / (double)CLOCKS_PER_SEC;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int op = (int)((seed >> 33) % 4), k = (int)((seed >> 40) % K);
        uint64_t c = 1 + (seed >> 20) % (i % 10 == 0 ? maxc : 4096);
        MK(run_op(op, in, outs[op][k], c, dt));
        last[op][k] = c;
    }
    CK(cudaStreamSynchronize(g_st));
    double t1 = clock() / (double)CLOCKS_PER_SEC;
    unsigned long long bad = 0, first;
    int checked = 0;
    for (int op = 0; op < 4; op++)
        for (int k = 0; k < K; k++)
            if (last[op][k]) {
                bad += dev_check(outs[op][k], op, dt, last[op][k], &first);
                checked++;
            }
    mkResult_t ae;
    MK(mkCommGetAsyncError(g_comm, &ae));
    result(bad == 0 && ae == mkSuccess, "stress: %d calls without sync (%.2f s cpu), %d outputs "
           "checked, %llu bad elements, async error %s", N, t1 - t0, checked, bad,
           mkGetErrorString(ae));
    return 0;
}

static int test_graph(void)
{
    const uint64_t c = 777777;
    const int dt = mkFloat16;
    alloc_bufs(c * 2);
    void *outs[4];
    for (int op = 0; op < 4; op++) dev_alloc(&outs[op], c * 2 * g_n, 1);
    fill(g_send, c * g_n, dt);
    CK(cudaStreamSynchronize(g_st));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    for (int op = 0; op < 4; op++) MK(run_op(op, g_send, outs[op], c, dt));
    CK(cudaStreamEndCapture(g_st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 3; rep++) {
        for (int op = 0; op < 4; op++) CK(cudaMemsetAsync(outs[op], 0xff, c * 2 * g_n, g_st));
        CK(cudaGraphLaunch(ge, g_st));
        unsigned long long bad = 0, first;
        for (int op = 0; op < 4; op++) bad += dev_check(outs[op], op, dt, c, &first);
        result(bad == 0, "graph replay %d (4 ops, fp16, count %llu): %llu bad", rep,
               (unsigned long long)c, bad);
    }
    /* A plain call after the replays must still line up with the peers. */
    check_one(2, dt, c, "after-graph");
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Poll the async error for up to limit seconds. */
static mkResult_t wait_async(double limit)
{
    double t0 = now_s();
    mkResult_t ae = mkSuccess;
    while (now_s() - t0 < limit) {
        MK(mkCommGetAsyncError(g_comm, &ae));
        if (ae != mkSuccess) break;
        usleep(10000);
    }
    return ae;
}

static int test_nocall(void)
{
    alloc_bufs(1 << 20);
    double t0 = now_s();
    if (g_rank == 0) {
        MK(mkAllReduce(g_send, g_recv, 1 << 18, mkBfloat16, g_comm, g_st));
        cudaError_t e = cudaStreamSynchronize(g_st);
        double dt = now_s() - t0;
        mkResult_t ae = wait_async(10);
        const char *msg = mkGetLastError(g_comm);
        result(e == cudaSuccess && ae == mkErrTimeout && strstr(msg, "rank 1") != NULL,
               "nocall: kernel ended after %.2f s (%s), async error %s: %s", dt,
               cudaGetErrorString(e), mkGetErrorString(ae), msg);
        mkResult_t r = mkAllGather(g_send, g_recv, 16, mkBfloat16, g_comm, g_st);
        result(r == mkErrTimeout, "nocall: a later call returns %s", mkGetErrorString(r));
    } else {
        mkResult_t ae = wait_async(15);
        result(ae == mkErrRemote, "nocall: the rank that never called sees %s after %.2f s: %s",
               mkGetErrorString(ae), now_s() - t0, mkGetLastError(g_comm));
    }
    return 0;
}

static int test_abort(void)
{
    alloc_bufs(1 << 20);
    if (g_rank == 0) {
        double t0 = now_s();
        MK(mkAllGather(g_send, g_recv, 1 << 18, mkBfloat16, g_comm, g_st));
        cudaError_t e = cudaStreamSynchronize(g_st);
        double dt = now_s() - t0;
        mkResult_t ae = wait_async(5);
        result(e == cudaSuccess && ae == mkErrRemote && dt < 5,
               "abort: the waiting rank stopped after %.2f s with %s: %s", dt,
               mkGetErrorString(ae), mkGetLastError(g_comm));
    } else {
        usleep(500000);
        double t0 = now_s();
        mkResult_t r = mkCommAbort(g_comm);
        double dt = now_s() - t0;
        g_comm = NULL;
        result(r == mkSuccess && dt < 2, "abort: mkCommAbort returned %s in %.3f s",
               mkGetErrorString(r), dt);
    }
    return 0;
}

/* All-reduce of inputs whose sums round (random bf16 / fp32 with full
 * mantissas, fresh seed each run): every rank must hold the same bits, in
 * one phase (1 MB, each rank reduces everything itself) and in two (64
 * MB when the budget allows).  Host hash of recvbuf, compared over the
 * bootstrap. */
__global__ void fill_rand(void *p, size_t n, int dt, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        float v = (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f; /* [-1, 1) */
        if (dt == 0) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
        else if (dt == 1) ((__half *)p)[i] = __float2half_rn(v);
        else ((float *)p)[i] = v;
    }
}

static int test_bits(void)
{
    alloc_bufs(64u << 20);
    unsigned long long seed = (unsigned long long)time(NULL) * 1000003ull + (unsigned long long)g_rank * 7919ull;
    const size_t sizes[] = {1u << 20, 64u << 20};
    for (int dt = 0; dt < 3; dt++)
        for (size_t b : sizes) {
            size_t es = (size_t)esize(dt), count = b / es;
            fill_rand<<<512, 256, 0, g_st>>>(g_send, count, dt, seed + b + (size_t)dt);
            CK(cudaGetLastError());
            CK(cudaMemsetAsync(g_recv, 0xff, b, g_st));
            MK(run_op(2, g_send, g_recv, count, dt));
            std::vector<uint64_t> h(b / 8);
            CK(cudaMemcpyAsync(h.data(), g_recv, b, cudaMemcpyDeviceToHost, g_st));
            CK(cudaStreamSynchronize(g_st));
            uint64_t hash = 1469598103934665603ull;
            for (uint64_t w : h) hash = (hash ^ w) * 1099511628211ull;
            std::vector<uint64_t> all(g_n);
            all[g_rank] = hash;
            struct mkComm *c = g_comm;
            MK(c->boot->allgather(c->boot_ctx, all.data(), sizeof(uint64_t)));
            int same = 1;
            for (int r = 0; r < g_n; r++) same &= all[r] == all[0];
            const char *th = getenv("MK_COLL_AR_ONESHOT");
            result(same, "same bits on every rank: all-reduce %s %zu bytes "
                   "(MK_COLL_AR_ONESHOT=%s)", dt == 0 ? "bf16" : dt == 1 ? "fp16" : "fp32",
                   b, th ? th : "default");
        }
    return 0;
}

static int test_badargs(void)
{
    alloc_bufs(1 << 20);
    char host[64];
    mkResult_t r = mkAllGather(host, g_recv, 8, mkBfloat16, g_comm, g_st);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "sendbuf"),
           "host sendbuf: %s: %s", mkGetErrorString(r), mkGetLastError(g_comm));
    r = mkAllReduce(g_send, (char *)g_recv + 1, 8, mkFloat16, g_comm, g_st);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "aligned"),
           "misaligned recvbuf: %s: %s", mkGetErrorString(r), mkGetLastError(g_comm));
    r = mkAllToAll(g_send, (char *)g_send + 64, 64, mkFloat32, g_comm, g_st);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "overlap"),
           "overlapping all-to-all: %s: %s", mkGetErrorString(r), mkGetLastError(g_comm));
    /* Registration (collective: every rank makes the same calls). */
    void *h = NULL, *h2 = NULL;
    MK(mkCommRegister(g_comm, g_recv, 1 << 20, &h));
    r = mkCommRegister(g_comm, (char *)g_recv + 4096, 4096, &h2);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "registered already") &&
           h2 == NULL, "register inside a registered buffer: %s: %s", mkGetErrorString(r),
           mkGetLastError(g_comm));
    r = mkMemFree(g_comm, h);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "mkCommDeregister"),
           "mkMemFree of a registered buffer: %s: %s", mkGetErrorString(r), mkGetLastError(g_comm));
    MK(mkCommDeregister(g_comm, h)); /* mkMemFree dropped nothing */
    r = mkCommDeregister(g_comm, h);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), "not a handle"),
           "deregister twice: %s: %s", mkGetErrorString(r), mkGetLastError(g_comm));
    /* One rank refuses its buffer (a host pointer): every rank fails and
     * nothing stays registered. */
    char hostbuf[4096];
    void *mine = g_rank == 0 ? (void *)hostbuf : g_send;
    r = mkCommRegister(g_comm, mine, 4096, &h2);
    result(r == mkErrInvalidArgument && strstr(mkGetLastError(g_comm), g_rank == 0
           ? "not device memory" : "rank 0 refused"), "one rank refuses: %s: %s",
           mkGetErrorString(r), mkGetLastError(g_comm));
    void *m = NULL;
    MK(mkMemAlloc(g_comm, 12345, &m));
    MK(mkMemFree(g_comm, m));
    /* The communicator still works after refused calls. */
    check_one(2, mkFloat32, 1000, "after-badargs");
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "correct";
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    if (!strcmp(what, "nocall")) cfg.timeoutMs = 2000;
    if (!strcmp(what, "abort")) cfg.timeoutMs = 30000;
    MK(mkCommInit(&g_comm, &cfg));
    MK(mkCommRank(g_comm, &g_rank));
    MK(mkCommSize(g_comm, &g_n));
    int dev;
    MK(mkCommCuDevice(g_comm, &dev));
    if (dev < 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    CK(cudaHostAlloc((void **)&g_bad, 2 * sizeof(*g_bad), cudaHostAllocMapped));
#ifdef WITH_NCCL
    /* NCCL refuses several ranks on one GPU: run.sh sets MKT_NO_NCCL there. */
    if (!strcmp(what, "correct") && !getenv("MKT_NO_NCCL")) {
        ncclUniqueId id;
        if (g_rank == 0) ncclGetUniqueId(&id);
        struct mkComm *c = g_comm;
        if (c->boot->bcast(c->boot_ctx, &id, sizeof id, 0) != mkSuccess ||
            ncclCommInitRank(&g_nccl, g_n, id, g_rank) != ncclSuccess) {
            fprintf(stderr, "rank %d: NCCL init failed\n", g_rank);
            return 2;
        }
    }
#endif
    if (g_rank == 0) printf("test_coll %s: %d ranks\n", what, g_n);
    if (!strcmp(what, "correct")) test_correct(argc > 2 ? strtoull(argv[2], NULL, 0) : (1u << 30));
    else if (!strcmp(what, "stress")) test_stress();
    else if (!strcmp(what, "graph")) test_graph();
    else if (!strcmp(what, "nocall")) test_nocall();
    else if (!strcmp(what, "abort")) test_abort();
    else if (!strcmp(what, "badargs")) test_badargs();
    else if (!strcmp(what, "bits")) test_bits();
    else {
        fprintf(stderr, "unknown test %s\n", what);
        return 2;
    }
#ifdef WITH_NCCL
    if (g_nccl) ncclCommDestroy(g_nccl);
#endif
    if (g_comm) MK(mkCommDestroy(g_comm));
    printf("%s rank %d: %s (%d failures)\n", g_fail ? "FAIL" : "DONE", g_rank, what, g_fail);
    return g_fail ? 1 : 0;
}
