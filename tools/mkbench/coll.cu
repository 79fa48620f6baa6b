/*
 * coll.cu - mkbench for the collectives: ours and NCCL in one process (one
 * process per rank, started by mpirun), the same buffers, one after the
 * other at every size.
 *
 *   mkbench coll [--op ag,rs,ar,a2a] [--dtype bf16|fp16|fp32]
 *                [--min BYTES] [--max BYTES] [--iters N] [--sweep] [--tag NAME]
 *                [--zcopy] [--lat]
 *
 * Sizes are bytes per rank (the send buffer of all-gather and all-reduce,
 * the receive buffer of reduce-scatter, one block of all-to-all).  Time:
 * median of per-call CUDA event times after warm-up; random input; each
 * call takes the next of several buffer sets of one pool, so that the sets
 * cycled through span at least 256 MB (send + receive) and a small size
 * is not served from L2 (both ours and NCCL, the same sets).  Bandwidths as
 * nccl-tests defines them: algbw = S / t with S the bytes of the larger
 * buffer (all-reduce: the buffer), busbw = algbw * (n-1)/n (all-reduce:
 * * 2(n-1)/n).  --sweep adds all-gather at 256 MB per rank for 1, 2, 4, 8,
 * 16, 32 and 64 CTAs for each mover (reg,
 * tma-send, tma), and the same all-gather on the copy engines with no CTA
 * (row allgather_ce: GPU-triggered copies, see ce_run; checked against
 * mkAllGather first).  --zcopy takes the buffers from mkMemAlloc, so that
 * all-gather and all-to-all write straight into the peers' receive
 * buffers (NCCL gets the same buffers, which it does not know as
 * registered); the JSON's zero_copy says which.  Rank 0 writes the JSON
 * (coll.json, or coll-NAME.json with --tag, in mkb_results_dir) and
 * prints a table.  --lat prints instead, for each size from --min to --max,
 * where a call's time goes (event, host and device time per call, ours
 * and NCCL's, and the ratio of the device times; see lat_of), then the
 * floor under it (lat_floor: empty kernels, our kernel with no peer), and
 * writes coll-lat.json (coll-lat-NAME.json with --tag) instead of
 * coll.json.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>
#include <algorithm>

#include "mkernel.h"
#include "mki.h" /* comm->boot->bcast carries the ncclUniqueId */
extern "C" {
#include "plan/plan.h" /* the collectives' plan; the sweep sets its knobs */
}
#include "ops/coll.h"  /* enum mki_coll_mover */
#include "common.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <time.h>

namespace {

/* Random finite values in [-1, 1) of the benchmark's type (a hash of the
 * index and a per-run seed): never a constant pattern, which can hide
 * work or run at another speed than real data. */
__global__ void fill_random(void *p, size_t n, int es, int is_bf16,
                            unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        float v = (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
        if (es == 4) ((float *)p)[i] = v;
        else if (is_bf16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
        else ((__half *)p)[i] = __float2half(v);
    }
}


struct opdesc {
    const char *name, *key;
    int kind; /* 0 AG, 1 RS, 2 AR, 3 A2A */
};
const opdesc OPS[] = {{"allgather", "ag", 0}, {"reducescatter", "rs", 1},
                      {"allreduce", "ar", 2}, {"alltoall", "a2a", 3}};

int g_rank, g_n, g_zcopy;
mkComm_t g_comm;
ncclComm_t g_nccl;
cudaStream_t g_st;


mkDataType_t mk_type(const char *s)
{
    return !strcmp(s, "fp32") ? mkFloat32 : !strcmp(s, "fp16") ? mkFloat16 : mkBfloat16;
}
ncclDataType_t nc_type(mkDataType_t t)
{
    return t == mkFloat32 ? ncclFloat32 : t == mkFloat16 ? ncclFloat16 : ncclBfloat16;
}

struct call {
    int kind, ours;
    const void *s;
    void *r;
    size_t count;
    mkDataType_t t;
    size_t stride; /* bytes between rotated buffer sets (0: none) */
    int nrot;      /* sets cycled through, so small sizes miss in L2 */
};

/* Rotation: for a call of b bytes per rank, cycle through as many
 * buffer sets of the pool as keep send + receive >= 256 MB (L2: 50 MB). */
const size_t ROT_FOOTPRINT = (size_t)256 << 20;
void rotate(call &c, size_t set_bytes, size_t pool)
{
    c.stride = set_bytes;
    size_t want = (ROT_FOOTPRINT + 2 * set_bytes - 1) / (2 * set_bytes);
    size_t fit = pool / set_bytes;
    c.nrot = (int)std::max<size_t>(1, std::min(want, fit));
}

void run(const call &c)
{
    if (c.ours) {
        switch (c.kind) {
        case 0: MKB_MK(mkAllGather(c.s, c.r, c.count, c.t, g_comm, g_st)); break;
        case 1: MKB_MK(mkReduceScatter(c.s, c.r, c.count, c.t, g_comm, g_st)); break;
        case 2: MKB_MK(mkAllReduce(c.s, c.r, c.count, c.t, g_comm, g_st)); break;
        default: MKB_MK(mkAllToAll(c.s, c.r, c.count, c.t, g_comm, g_st)); break;
        }
        return;
    }
    ncclDataType_t t = nc_type(c.t);
    size_t es = c.t == mkFloat32 ? 4 : 2;
    switch (c.kind) {
    case 0: MKB_NC(ncclAllGather(c.s, c.r, c.count, t, g_nccl, g_st)); break;
    case 1: MKB_NC(ncclReduceScatter(c.s, c.r, c.count, t, ncclSum, g_nccl, g_st)); break;
    case 2: MKB_NC(ncclAllReduce(c.s, c.r, c.count, t, ncclSum, g_nccl, g_st)); break;
    default:
        MKB_NC(ncclGroupStart());
        for (int q = 0; q < g_n; q++) {
            MKB_NC(ncclSend((const char *)c.s + q * c.count * es, c.count, t, q, g_nccl, g_st));
            MKB_NC(ncclRecv((char *)c.r + q * c.count * es, c.count, t, q, g_nccl, g_st));
        }
        MKB_NC(ncclGroupEnd());
    }
}

void run_fn(void *ctx, int rep)
{
    call c = *(const call *)ctx;
    if (c.nrot > 1) {
        size_t off = (size_t)(rep % c.nrot) * c.stride;
        c.s = (const char *)c.s + off;
        c.r = (char *)c.r + off;
    }
    run(c);
}

double time_call(call c, int iters)
{
    int warm = iters < 5 ? 2 : 5;
    std::vector<double> ms(iters);
    mkb_time(run_fn, &c, g_st, warm, iters, ms.data());
    return mkb_median(ms.data(), iters);
}

double busbw(int kind, size_t bytes_per_rank, double ms)
{
    double n = g_n, s = kind == 2 ? (double)bytes_per_rank : (double)bytes_per_rank * n;
    double alg = s / (ms * 1e-3) / 1e9;
    return alg * (kind == 2 ? 2 * (n - 1) / n : (n - 1) / n);
}

struct row {
    const char *op, *dtype, *mover;
    size_t bytes;
    int ctas;
    double ours, base, bw, bbw;
};

/* What every JSON record of a run carries besides its figures. */
struct json_meta {
    char dev[128], commit[64], date[32], nccl[32];
};

/* path opened for writing (NULL, said, when it cannot be) and meta filled. */
FILE *json_open(const char *path, json_meta *m)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return NULL;
    }
    mkb_device_name(m->dev, sizeof m->dev, NULL, 0);
    mkb_git_commit(m->commit, sizeof m->commit);
    mkb_date_utc(m->date, sizeof m->date);
    int v = 0;
    ncclGetVersion(&v);
    snprintf(m->nccl, sizeof m->nccl, "nccl %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return f;
}

void write_json(const std::vector<row> &rows, const char *path)
{
    json_meta m;
    FILE *f = json_open(path, &m);
    if (!f) return;
    fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); i++) {
        const row &r = rows[i];
        char split[32];
        snprintf(split, sizeof split, "coll:%d", r.ctas);
        fprintf(f, "  {\"op\": \"%s\", \"dtype\": \"%s\", \"world_size\": %d, \"nodes\": %d, "
                "\"device\": \"%s\", \"bytes\": %zu, \"ours_ms\": %.6f, \"baseline\": \"%s\", "
                "\"baseline_ms\": %s, \"speedup\": %s, \"limit_ms\": null, \"ours_over_limit\": null, "
                "\"busbw_gbs\": %.2f, \"baseline_busbw_gbs\": %s, \"ctas\": %d, \"sm_split\": \"%s\", "
                "\"mover\": \"%s\", \"zero_copy\": %s, "
                "\"commit\": \"%s\", \"date\": \"%s\"}%s\n",
                r.op, r.dtype, g_n, g_comm->nnodes, m.dev, r.bytes, r.ours, m.nccl,
                r.base > 0 ? std::to_string(r.base).c_str() : "null",
                r.base > 0 ? std::to_string(r.base / r.ours).c_str() : "null", r.bw,
                r.base > 0 ? std::to_string(r.bbw).c_str() : "null", r.ctas, split, r.mover,
                g_zcopy && (!strncmp(r.op, "allgather", 9) || !strcmp(r.op, "alltoall"))
                ? "true" : "false",
                m.commit, m.date,
                i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
}

/* --lat: one record per op and size, ours and NCCL's (us per call, the
 * slowest rank); no ours_ms, so tools/model_check.py passes them by. */
struct latrow {
    const char *op;
    size_t bytes;
    double ev, ev_b, host, host_b, gpu, gpu_b;
};

void write_lat_json(const std::vector<latrow> &rows, const char *path)
{
    json_meta m;
    FILE *f = json_open(path, &m);
    if (!f) return;
    fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); i++) {
        const latrow &r = rows[i];
        fprintf(f, "  {\"series\": \"latency\", \"op\": \"%s\", \"world_size\": %d, "
                "\"nodes\": %d, \"device\": \"%s\", \"bytes\": %zu, \"baseline\": \"%s\", "
                "\"event_us\": %.2f, \"baseline_event_us\": %.2f, \"host_us\": %.2f, "
                "\"baseline_host_us\": %.2f, \"gpu_us\": %.2f, \"baseline_gpu_us\": %.2f, "
                "\"commit\": \"%s\", \"date\": \"%s\"}%s\n",
                r.op, g_n, g_comm->nnodes, m.dev, r.bytes, m.nccl, r.ev, r.ev_b, r.host,
                r.host_b, r.gpu, r.gpu_b, m.commit, m.date,
                i + 1 < rows.size() ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
}

size_t parse_bytes(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k') v *= 1 << 10;
    if (*e == 'M' || *e == 'm') v *= 1 << 20;
    if (*e == 'G' || *e == 'g') v *= 1 << 30;
    return (size_t)v;
}


/* ---- copy-engine all-gather, for the sweep's zero-SM point ------------
 * What mkAllGatherGemm's all-gather does, as a plain all-gather: a
 * one-thread kernel writes a flag; one side stream per peer waits for it
 * (cuStreamWaitValue64), copies this rank's block into the peer's receive
 * buffer through a CUDA IPC mapping (cudaMemcpyAsync: a copy engine) and
 * raises a flag in the peer's memory (cuStreamWriteValue64); the caller's
 * stream waits for every peer's flag, and for this rank's own block (on a
 * side stream too).  No SM moves a byte.  These stream waits have no
 * deadline: a benchmark only, run under the runner's timeout. */
typedef int (*cu_wait64_fn)(void *, unsigned long long, unsigned long long, unsigned);
typedef int (*cu_write64_fn)(void *, unsigned long long, unsigned long long, unsigned);

__global__ void ce_trigger(unsigned long long *flag, unsigned long long v)
{
    *(volatile unsigned long long *)flag = v;
    __threadfence_system();
}

struct ce_bench {
    size_t b;
    char *send, *recv, *peer_recv[8];
    unsigned long long *flags, *peer_flags[8]; /* [0] trigger, [1 + q] from q */
    cudaStream_t side[8], own;
    cudaEvent_t fork, join[8], own_done;
    cu_wait64_fn wait64;
    cu_write64_fn write64;
    unsigned long long seq;
};

void ce_exchange(const void *mine, size_t bytes, void *all)
{
    /* bytes per rank, a multiple of 2; through our own all-gather */
    void *d;
    MKB_CHECK(cudaMalloc(&d, bytes * (g_n + 1)));
    MKB_CHECK(cudaMemcpy(d, mine, bytes, cudaMemcpyHostToDevice));
    MKB_MK(mkAllGather(d, (char *)d + bytes, bytes / 2, mkBfloat16, g_comm, g_st));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    MKB_CHECK(cudaMemcpy(all, (char *)d + bytes, bytes * g_n, cudaMemcpyDeviceToHost));
    MKB_CHECK(cudaFree(d));
}

void ce_setup(ce_bench &e, size_t b)
{
    e.b = b;
    e.seq = 0;
    MKB_CHECK(cudaMalloc(&e.send, b));
    MKB_CHECK(cudaMalloc(&e.recv, b * g_n));
    MKB_CHECK(cudaMalloc(&e.flags, 8 * 16));
    MKB_CHECK(cudaMemset(e.flags, 0, 8 * 16));
    fill_random<<<1024, 256, 0, g_st>>>(e.send, b / 2, 2, true, 12345 + g_rank);
    MKB_CHECK(cudaGetLastError());
    cudaIpcMemHandle_t h[2], *all = (cudaIpcMemHandle_t *)malloc(sizeof(h) * g_n);
    MKB_CHECK(cudaIpcGetMemHandle(&h[0], e.recv));
    MKB_CHECK(cudaIpcGetMemHandle(&h[1], e.flags));
    ce_exchange(h, sizeof(h), all);
    for (int q = 0; q < g_n; q++) {
        e.peer_recv[q] = e.recv;
        e.peer_flags[q] = e.flags;
        if (q == g_rank) continue;
        MKB_CHECK(cudaIpcOpenMemHandle((void **)&e.peer_recv[q], all[2 * q], cudaIpcMemLazyEnablePeerAccess));
        MKB_CHECK(cudaIpcOpenMemHandle((void **)&e.peer_flags[q], all[2 * q + 1], cudaIpcMemLazyEnablePeerAccess));
    }
    free(all);
    for (int q = 0; q < g_n; q++) {
        MKB_CHECK(cudaStreamCreateWithFlags(&e.side[q], cudaStreamNonBlocking));
        MKB_CHECK(cudaEventCreateWithFlags(&e.join[q], cudaEventDisableTiming));
    }
    MKB_CHECK(cudaStreamCreateWithFlags(&e.own, cudaStreamNonBlocking));
    MKB_CHECK(cudaEventCreateWithFlags(&e.fork, cudaEventDisableTiming));
    MKB_CHECK(cudaEventCreateWithFlags(&e.own_done, cudaEventDisableTiming));
    enum cudaDriverEntryPointQueryResult qr;
    void *fn = NULL;
    MKB_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &fn, 12000, cudaEnableDefault, &qr));
    e.wait64 = (cu_wait64_fn)fn;
    MKB_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000, cudaEnableDefault, &qr));
    e.write64 = (cu_write64_fn)fn;
    if (!e.wait64 || !e.write64) { fprintf(stderr, "no stream memory operations\n"); exit(1); }
    MKB_CHECK(cudaDeviceSynchronize());
}

#define CU_OK(x) do { int r_ = (x); if (r_) { fprintf(stderr, "%s:%d: CUresult %d\n", __FILE__, __LINE__, r_); exit(1); } } while (0)

void ce_run(void *ctx, int)
{
    ce_bench &e = *(ce_bench *)ctx;
    const unsigned long long v = ++e.seq;
    MKB_CHECK(cudaEventRecord(e.fork, g_st));
    MKB_CHECK(cudaStreamWaitEvent(e.own, e.fork, 0));
    MKB_CHECK(cudaMemcpyAsync(e.recv + (size_t)g_rank * e.b, e.send, e.b, cudaMemcpyDeviceToDevice, e.own));
    MKB_CHECK(cudaEventRecord(e.own_done, e.own));
    ce_trigger<<<1, 1, 0, g_st>>>(e.flags, v);
    MKB_CHECK(cudaGetLastError());
    for (int j = 1; j < g_n; j++) {
        const int q = (g_rank + j) % g_n;
        MKB_CHECK(cudaStreamWaitEvent(e.side[q], e.fork, 0));
        CU_OK(e.wait64(e.side[q], (unsigned long long)(uintptr_t)e.flags, v, 0 /* GEQ */));
        MKB_CHECK(cudaMemcpyAsync(e.peer_recv[q] + (size_t)g_rank * e.b, e.send, e.b,
                                  cudaMemcpyDeviceToDevice, e.side[q]));
        CU_OK(e.write64(e.side[q], (unsigned long long)(uintptr_t)(e.peer_flags[q] + 1 + g_rank), v, 0));
        MKB_CHECK(cudaEventRecord(e.join[q], e.side[q]));
    }
    for (int j = 1; j < g_n; j++) {
        const int q = (g_rank + j) % g_n;
        CU_OK(e.wait64(g_st, (unsigned long long)(uintptr_t)(e.flags + 1 + q), v, 0));
        MKB_CHECK(cudaStreamWaitEvent(g_st, e.join[q], 0));
    }
    MKB_CHECK(cudaStreamWaitEvent(g_st, e.own_done, 0));
}

/* The copy-engine all-gather's result against mkAllGather's, byte for
 * byte (the same send buffers). */
bool ce_check(ce_bench &e)
{
    ce_run(&e, 0);
    char *ref;
    MKB_CHECK(cudaMalloc(&ref, e.b * g_n));
    MKB_MK(mkAllGather(e.send, ref, e.b / 2, mkBfloat16, g_comm, g_st));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    std::vector<char> x(e.b * g_n), y(e.b * g_n);
    MKB_CHECK(cudaMemcpy(x.data(), e.recv, x.size(), cudaMemcpyDeviceToHost));
    MKB_CHECK(cudaMemcpy(y.data(), ref, y.size(), cudaMemcpyDeviceToHost));
    MKB_CHECK(cudaFree(ref));
    return memcmp(x.data(), y.data(), x.size()) == 0;
}

/* The library's plan for this call (the communicator's parameters, read
 * at its creation, and what the sweep set in them): its mover and CTAs
 * label the row. */
mki_coll_plan plan_of(int kind, size_t count, int es)
{
    static const enum mki_op ops[] = {MKI_OP_ALLGATHER, MKI_OP_REDUCESCATTER,
                                      MKI_OP_ALLREDUCE, MKI_OP_ALLTOALL};
    mki_coll_plan p;
    if (mki_plan_coll(g_comm, ops[kind], count, es, &p) != mkSuccess) {
        fprintf(stderr, "rank %d: no plan: %s\n", g_rank, mkGetLastError(g_comm));
        exit(1);
    }
    return p;
}

/* ---- where a small call's time goes (--lat) ----------------------------
 * Three figures per op, size and library, each the slowest rank's:
 *   event: the median of per-call CUDA event times, as the main table;
 *   host:  wall-clock microseconds per call of enqueueing LAT_N calls back
 *          to back (the API call's own cost on the CPU);
 *   gpu:   microseconds per call of LAT_N calls enqueued behind a kernel
 *          that spins on a host flag, released together after a barrier:
 *          the stream never waits for the host, so this is the device's
 *          time per call alone.
 * event ~ gpu means the device path is the floor; event ~ host + launch
 * means the CPU is. */
const int LAT_N = 200;

__global__ void spin_on(volatile int *flag)
{
    while (*flag == 0) { }
}

double now_us()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

double worst(double v)
{
    std::vector<double> all(g_n);
    all[g_rank] = v;
    if (g_comm->boot->allgather(g_comm->boot_ctx, all.data(), sizeof(double)) != mkSuccess) {
        fprintf(stderr, "rank %d: allgather of the figures failed\n", g_rank);
        exit(2);
    }
    return *std::max_element(all.begin(), all.end());
}

void barrier()
{
    if (g_comm->boot->barrier(g_comm->boot_ctx) != mkSuccess) {
        fprintf(stderr, "rank %d: barrier failed\n", g_rank);
        exit(2);
    }
}

struct lat {
    double event, host, gpu;
};

/* The three figures of fn(ctx, i) (one call each). */
lat lat_fn(mkb_fn fn, void *ctx, volatile int *flag)
{
    lat L;
    {
        std::vector<double> ms(60);
        mkb_time(fn, ctx, g_st, 5, 60, ms.data());
        L.event = worst(mkb_median(ms.data(), 60) * 1e3); /* ms -> us */
    }
    /* host */
    barrier();
    double t0 = now_us();
    for (int i = 0; i < LAT_N; i++) fn(ctx, i);
    double t1 = now_us();
    MKB_CHECK(cudaStreamSynchronize(g_st));
    L.host = worst((t1 - t0) / LAT_N);
    /* gpu */
    cudaEvent_t a, b;
    MKB_CHECK(cudaEventCreate(&a));
    MKB_CHECK(cudaEventCreate(&b));
    *flag = 0;
    spin_on<<<1, 1, 0, g_st>>>(flag);
    MKB_CHECK(cudaGetLastError());
    MKB_CHECK(cudaEventRecord(a, g_st));
    for (int i = 0; i < LAT_N; i++) fn(ctx, i);
    MKB_CHECK(cudaEventRecord(b, g_st));
    barrier();
    *flag = 1;
    MKB_CHECK(cudaStreamSynchronize(g_st));
    float ms = 0;
    MKB_CHECK(cudaEventElapsedTime(&ms, a, b));
    L.gpu = worst(ms * 1e3 / LAT_N);
    MKB_CHECK(cudaEventDestroy(a));
    MKB_CHECK(cudaEventDestroy(b));
    return L;
}

lat lat_of(call c, volatile int *flag) { return lat_fn(run_fn, &c, flag); }

/* The floor under a small call (--lat): an empty kernel of one 512-thread
 * CTA with an 8-byte parameter and with one the size of the collectives'
 * (launch and teardown alone), and our all-gather of 8 bytes on a
 * communicator of this rank alone (our kernel's entry and exit with no
 * peer). */
struct big_param {
    char b[sizeof(mki_coll_params)];
};
__global__ void empty8(unsigned long long) {}
__global__ void empty_big(const __grid_constant__ big_param) {}

void launch_empty8(void *, int)
{
    empty8<<<1, MKI_COLL_THREADS, 0, g_st>>>(0ull);
    MKB_CHECK(cudaGetLastError());
}

void launch_empty_big(void *, int)
{
    big_param p;
    memset(&p, 0, sizeof p);
    empty_big<<<1, MKI_COLL_THREADS, 0, g_st>>>(p);
    MKB_CHECK(cudaGetLastError());
}

struct solo {
    mkComm_t comm;
    const void *s;
    void *r;
};

void run_solo(void *ctx, int)
{
    const solo &x = *(const solo *)ctx;
    MKB_MK(mkAllGather(x.s, x.r, 4, mkBfloat16, x.comm, g_st));
}

void lat_floor(volatile int *flag, const void *s, void *r)
{
    const lat e8 = lat_fn(launch_empty8, NULL, flag);
    const lat eb = lat_fn(launch_empty_big, NULL, flag);
    solo x{NULL, s, r};
    MKB_MK(mkCommSplit(g_comm, g_rank, 0, &x.comm, NULL)); /* this rank alone */
    const lat one = lat_fn(run_solo, &x, flag);
    MKB_MK(mkCommDestroy(x.comm));
    const struct {
        const char *name;
        lat l;
    } rows[] = {{"empty kernel, 8 B param", e8}, {"empty kernel, our params", eb},
                {"all-gather 8 B, 1 rank", one}};
    for (const auto &w : rows)
        if (g_rank == 0)
            printf("%-24s | %8.1f %8s | %8.1f %8s | %8.1f\n", w.name, w.l.event, "", w.l.host,
                   "", w.l.gpu);
}

const char *mover_name(int mover)
{
    return mover == MKI_COLL_MOVER_REG ? "reg" : mover == MKI_COLL_MOVER_TMA ? "tma" : "tma-send";
}

} // namespace

extern "C" int mkb_coll_main(int argc, char **argv)
{
    const char *ops = "ag,rs,ar,a2a", *dts = "bf16";
    size_t minb = 1 << 20, maxb = 1u << 30;
    int iters = 20, sweep = 0, latency = 0;
    const char *tag = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--op") && i + 1 < argc) ops = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dts = argv[++i];
        else if (!strcmp(argv[i], "--min") && i + 1 < argc) minb = parse_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) maxb = parse_bytes(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sweep")) sweep = 1;
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(argv[i], "--zcopy")) g_zcopy = 1;
        else if (!strcmp(argv[i], "--lat")) latency = 1;
        else {
            fprintf(stderr, "usage: mkbench coll [--op ag,rs,ar,a2a] [--dtype bf16|fp16|fp32] "
                    "[--min BYTES] [--max BYTES] [--iters N] [--sweep] [--tag NAME] "
                    "[--zcopy] [--lat]\n");
            return 2;
        }
    }
    MKB_MK(mkCommInit(&g_comm, NULL));
    MKB_MK(mkCommRank(g_comm, &g_rank));
    MKB_MK(mkCommSize(g_comm, &g_n));
    int dev;
    MKB_MK(mkCommCuDevice(g_comm, &dev));
    if (dev < 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    MKB_CHECK(cudaSetDevice(dev));
    MKB_CHECK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    ncclUniqueId id;
    if (g_rank == 0) MKB_NC(ncclGetUniqueId(&id));
    if (g_comm->boot->bcast(g_comm->boot_ctx, &id, sizeof id, 0) != mkSuccess) {
        fprintf(stderr, "bcast of the NCCL id failed\n");
        return 2;
    }
    MKB_NC(ncclCommInitRank(&g_nccl, g_n, id, g_rank));
    mkDataType_t t = mk_type(dts);
    size_t es = t == mkFloat32 ? 4 : 2;
    void *s, *r;
    const size_t pool = std::max(maxb * g_n, ROT_FOOTPRINT);
    if (g_zcopy) {
        MKB_MK(mkMemAlloc(g_comm, pool, &s));
        MKB_MK(mkMemAlloc(g_comm, pool, &r));
    } else {
        MKB_CHECK(cudaMalloc(&s, pool));
        MKB_CHECK(cudaMalloc(&r, pool));
    }
    unsigned long long seed = (unsigned long long)time(NULL) * 2654435761ull + g_rank;
    if (g_rank == 0) printf("random input, seed %llu (+ rank)\n", seed - g_rank);
    fill_random<<<1024, 256, 0, g_st>>>(s, pool / es, (int)es,
                                        t == mkBfloat16, seed);
    MKB_CHECK(cudaGetLastError());
    MKB_CHECK(cudaStreamSynchronize(g_st));
    if (latency) {
        volatile int *flag;
        MKB_CHECK(cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped));
        if (g_rank == 0)
            printf("%-14s %9s | %8s %8s | %8s %8s | %8s %8s %6s   (us per call, slowest rank; "
                   "%d calls; gpu x: ours / NCCL)\n", "op", "bytes", "ev ours", "ev nccl",
                   "hostours", "hostnccl", "gpu ours", "gpu nccl", "gpu x", LAT_N);
        std::vector<latrow> lrows;
        for (const opdesc &o : OPS) {
            if (!strstr(ops, o.key)) continue;
            for (size_t b = minb; b <= maxb; b *= 4) {
                call c{o.kind, 1, s, r, std::max<size_t>(1, b / es), t, 0, 1};
                rotate(c, b * g_n, pool);
                const lat x = lat_of(c, flag);
                c.ours = 0;
                const lat y = lat_of(c, flag);
                if (g_rank == 0)
                    printf("%-14s %9zu | %8.1f %8.1f | %8.1f %8.1f | %8.1f %8.1f %6.2f\n", o.name,
                           b, x.event, y.event, x.host, y.host, x.gpu, y.gpu,
                           y.gpu > 0 ? x.gpu / y.gpu : 0.0);
                lrows.push_back({o.name, b, x.event, y.event, x.host, y.host, x.gpu, y.gpu});
            }
        }
        lat_floor(flag, s, r);
        if (g_rank == 0 && !lrows.empty()) {
            char dir[512], path[640];
            mkb_results_dir(dir, sizeof dir);
            snprintf(path, sizeof path, "%s/coll-lat%s%s.json", dir, *tag ? "-" : "", tag);
            write_lat_json(lrows, path);
            printf("results: %s\n", path);
        }
        MKB_CHECK(cudaFreeHost((void *)flag));
        fflush(stdout);
    }
    std::vector<row> rows;
    for (const opdesc &o : OPS) {
        if (latency || !strstr(ops, o.key)) continue; /* --lat: its table only */
        for (size_t b = minb; b <= maxb; b *= 4) {
            int it = b >= (256u << 20) ? iters / 2 + 1 : iters;
            call c{o.kind, 1, s, r, b / es, t, 0, 1};
            rotate(c, b * g_n, pool);
            double ours = time_call(c, it);
            c.ours = 0;
            double base = time_call(c, it);
            const mki_coll_plan p = plan_of(o.kind, b / es, (int)es);
            rows.push_back({o.name, dts, mover_name(p.mover), b, p.nch, ours, base,
                            busbw(o.kind, b, ours), busbw(o.kind, b, base)});
        }
    }
    if (sweep && !latency) {
        const int ctas[] = {1, 2, 4, 8, 16, 32, 64};
        const int movers[] = {MKI_COLL_MOVER_REG, MKI_COLL_MOVER_TMA_SEND, MKI_COLL_MOVER_TMA};
        size_t b = std::min(maxb, (size_t)256 << 20);
        /* The library reads MK_COLL_MOVER and MK_COLL_CTAS once, at
         * communicator creation; the sweep sets the values it read (an
         * internal of this tool, never of a user).  Every rank sets the
         * same, so that the plans agree. */
        const int64_t ctas0 = g_comm->params.num[MKI_P_COLL_CTAS];
        const int mover0 = g_comm->plan->coll_mover;
        for (int m : movers) {
            g_comm->plan->coll_mover = m;
            for (int k : ctas) {
                g_comm->params.num[MKI_P_COLL_CTAS] = k;
                call c{0, 1, s, r, b / es, t, 0, 1};
                rotate(c, b * g_n, pool);
                double ours = time_call(c, iters / 2 + 1);
                const mki_coll_plan p = plan_of(0, b / es, (int)es);
                rows.push_back({m == MKI_COLL_MOVER_REG ? "allgather_ctas_reg"
                                : m == MKI_COLL_MOVER_TMA ? "allgather_ctas_tma"
                                                          : "allgather_ctas_tma_send",
                                dts, mover_name(p.mover), b, p.nch, ours, -1,
                                busbw(0, b, ours), 0});
            }
        }
        g_comm->params.num[MKI_P_COLL_CTAS] = ctas0;
        g_comm->plan->coll_mover = mover0;
        /* The same all-gather on the copy engines: 0 CTAs. */
        ce_bench e;
        ce_setup(e, b);
        if (!ce_check(e)) {
            fprintf(stderr, "rank %d: copy-engine all-gather differs from mkAllGather\n", g_rank);
            exit(1);
        }
        std::vector<double> ms(iters / 2 + 1);
        mkb_time(ce_run, &e, g_st, 5, (int)ms.size(), ms.data());
        double ce = mkb_median(ms.data(), (int)ms.size());
        rows.push_back({"allgather_ce", dts, "ce", b, 0, ce, -1, busbw(0, b, ce), 0});
    }
    if (g_rank == 0 && !latency) {
        char dir[512], path[600];
        mkb_results_dir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/coll%s%s.json", dir, *tag ? "-" : "", tag);
        write_json(rows, path);
        printf("%-20s %5s %12s %5s %10s %10s %8s %10s %10s\n", "op", "dtype", "bytes/rank",
               "ctas", "ours_ms", "nccl_ms", "speedup", "busbw", "nccl_busbw");
        for (const row &x : rows)
            printf("%-20s %5s %12zu %5d %10.4f %10.4f %8.3f %10.1f %10.1f\n", x.op, x.dtype,
                   x.bytes, x.ctas, x.ours, x.base, x.base > 0 ? x.base / x.ours : 0.0, x.bw,
                   x.bbw);
        printf("results: %s\n", path);
    }
    if (g_zcopy) {
        MKB_MK(mkMemFree(g_comm, s));
        MKB_MK(mkMemFree(g_comm, r));
    } else {
        MKB_CHECK(cudaFree(s));
        MKB_CHECK(cudaFree(r));
    }
    ncclCommDestroy(g_nccl);
    MKB_MK(mkCommDestroy(g_comm));
    return 0;
}

#ifdef MKB_COLL_MAIN
int main(int argc, char **argv) { return mkb_coll_main(argc, argv); }
#endif
