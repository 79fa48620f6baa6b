/*
 * ag_gemm.cu - mkbench for mkAllGatherGemm (one process per rank, under
 * mpirun): ours against the unfused NCCL all-gather + cuBLAS GEMM on one
 * stream, and against the limit max(GEMM alone, all-gather alone), in the
 * same run, on the same random data.
 *
 *   mkbench ag_gemm [--shapes MxNxK,...] [--dtype bf16|fp16] [--transb]
 *                   [--iters N] [--rounds R] [--idle-us US] [--host]
 *                   [--own-unfused] [--tag NAME]
 *
 * Shapes are global (M = sum of the ranks' rows, equal shards).  Time: the
 * series (ours, unfused, GEMM alone, all-gather alone; with --idle-us also
 * the GEMM alone after US microseconds of idle GPU; --own-unfused also our
 * own unfused sequence, mkAllGather then our GEMM, on a second
 * communicator split off with MK_SM_SPLIT's ag_gemm:fused=0 in its
 * config; --host adds the host's enqueue time per call) take turns in R rounds
 * (default 3) of N timed calls (default 20), each block after a bootstrap
 * barrier and warm-up calls; per series the median of the R x N per-call
 * CUDA event times, the largest of the ranks' medians.  Rank 0 prints the
 * table and
 * writes ag_gemm.json (ag_gemm-NAME.json with --tag) and ag_gemm.tsv (for
 * plot_ag_gemm.gp) in mkb_results_dir.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <string>
#include <vector>

#include "mkernel.h"
#include "mki.h"  /* comm->boot: barrier, bcast of the ncclUniqueId */
extern "C" {
#include "plan/plan.h" /* the SM split the plan chose (a C header) */
}
#include "common.h"
#include "multi.h"

namespace {

int g_rank, g_n;
mkComm_t g_comm;
mkComm_t g_unf; /* --own-unfused: the same ranks, the fused kernel off */
ncclComm_t g_nccl;
cudaStream_t g_st;
cublasHandle_t g_blas;



enum { OURS, UNFUSED, GEMM, AG, IDLE_GEMM, OWN_UNFUSED, NSERIES };

struct ctx {
    int what;
    const void *a, *b;
    void *c, *g;
    int64_t m_local, m, n, k;
    int transb, f16;
};

void gemm(const ctx &x)
{
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t t = x.f16 ? CUDA_R_16F : CUDA_R_16BF;
    MKB_CB(cublasGemmEx(g_blas, x.transb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)x.n,
                       (int)x.m, (int)x.k, &one, x.b, t, x.transb ? (int)x.k : (int)x.n, x.g, t,
                       (int)x.k, &zero, x.c, t, (int)x.n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT));
}

void allgather(const ctx &x)
{
    MKB_NC(ncclAllGather(x.a, x.g, (size_t)(x.m_local * x.k), x.f16 ? ncclFloat16 : ncclBfloat16,
                        g_nccl, g_st));
}

void run_fn(void *p, int rep)
{
    (void)rep;
    const ctx &x = *(const ctx *)p;
    switch (x.what) {
    case OURS:
        MKB_MK(mkAllGatherGemm(x.a, x.b, x.c, NULL, x.m_local, NULL, x.n, x.k, x.transb,
                              x.f16 ? mkFloat16 : mkBfloat16, g_comm, g_st));
        break;
    case OWN_UNFUSED:
        MKB_MK(mkAllGatherGemm(x.a, x.b, x.c, NULL, x.m_local, NULL, x.n, x.k, x.transb,
                              x.f16 ? mkFloat16 : mkBfloat16, g_unf, g_st));
        break;
    case UNFUSED: allgather(x); gemm(x); break;
    case GEMM: gemm(x); break;
    default: allgather(x); break;
    }
}

/* Warm-up calls before each block of timed fused calls.  The fused call
 * of a rank ends when its peers' rows have reached it, so after the
 * barrier that starts a block the ranks settle to the pace of the slowest
 * GPU only once the faster ones have used up their head start (up to one
 * call; 2 H200 whose GEMMs differ by 3% take ~18 calls: bench/NOTES.md);
 * timing before that flatters the fused call.  The other series need
 * only a few. */
#define AGG_WARMUP_OURS 30
#define AGG_WARMUP 5

__global__ void idle_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* --idle-us: the GEMM alone, each call after that long with the GPU idle
 * (a one-thread sleeping kernel, not timed): what the GEMM of the unfused
 * sequence gets from the pause of its all-gather on a power-capped GPU. */
void time_idle_gemm(const ctx &x, int idle_us, int warmup, int reps, double *ms)
{
    std::vector<cudaEvent_t> ev(2 * (size_t)reps);
    for (auto &e : ev) MKB_CHECK(cudaEventCreate(&e));
    for (int i = 0; i < warmup + reps; ++i) {
        idle_kernel<<<1, 1, 0, g_st>>>((unsigned long long)idle_us * 1000ull);
        MKB_CHECK(cudaGetLastError());
        if (i >= warmup) MKB_CHECK(cudaEventRecord(ev[2 * (i - warmup)], g_st));
        gemm(x);
        if (i >= warmup) MKB_CHECK(cudaEventRecord(ev[2 * (i - warmup) + 1], g_st));
    }
    MKB_CHECK(cudaStreamSynchronize(g_st));
    for (int i = 0; i < reps; ++i) {
        float t;
        MKB_CHECK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
        ms[i] = t;
    }
    for (auto &e : ev) MKB_CHECK(cudaEventDestroy(e));
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --host: the host's time to enqueue one call of series `what` (calls
 * enqueued back to back, then one synchronization; the queue holds them
 * all): where it exceeds the GPU time of a call, the series is bound by
 * the host, not the GPU. */
double host_us_per_call(ctx x, int what, int calls)
{
    x.what = what;
    MKB_MK(g_comm->boot->barrier(g_comm->boot_ctx));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    double t0 = now_s();
    for (int i = 0; i < calls; ++i) run_fn(&x, i);
    double t1 = now_s();
    MKB_CHECK(cudaStreamSynchronize(g_st));
    return (t1 - t0) * 1e6 / calls;
}

/* One block of `iters` timed calls of series `what`, appended to `out`. */
void time_block(ctx x, int what, int iters, int idle_us, std::vector<double> &out)
{
    x.what = what;
    MKB_MK(g_comm->boot->barrier(g_comm->boot_ctx));
    std::vector<double> ms(iters);
    if (what == IDLE_GEMM)
        time_idle_gemm(x, idle_us, AGG_WARMUP, iters, ms.data());
    else
        mkb_time(run_fn, &x, g_st, what == OURS ? AGG_WARMUP_OURS : AGG_WARMUP, iters,
                 ms.data());
    out.insert(out.end(), ms.begin(), ms.end());
}


struct result {
    long long m, n, k;
    double ours, unfused, gemm, ag, idle_gemm, host_ours, host_unfused, own_unfused;
    char split[64];
    int ctas;
};

void plan_text(int64_t m, int64_t n, int64_t k, result *r)
{
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    if (g_n == 1 || mki_plan_op(g_comm, MKI_OP_AG_GEMM, m, n, k, 2, &p) != mkSuccess) {
        snprintf(r->split, sizeof(r->split), "unfused (one rank)");
        r->ctas = 0;
        return;
    }
    int sms = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    int compute = (p.overridden & MKI_OVR_COMPUTE) || p.mover == MKI_MOVER_CE
                  ? p.split.compute : 0;
    if (compute <= 0 || compute > sms) compute = sms;
    r->ctas = compute;
    snprintf(r->split, sizeof(r->split), "compute=%d,intra=0 (copy engine)", compute);
}


void write_out(const std::vector<result> &res, const char *tag, int f16, int transb,
               int calls, int idle_us)
{
    char dir[512], path[700];
    mkb_results_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ag_gemm%s%s.json", dir, tag ? "-" : "", tag ? tag : "");
    mkb_json js;
    if (mkb_json_open(&js, path)) return;
    for (const result &r : res) {
        char extra[640], idle[96] = "";
        if (r.idle_gemm > 0)
            snprintf(idle, sizeof idle, "\"gemm_after_idle_ms\": %.4f, \"idle_us\": %d, ",
                     r.idle_gemm, idle_us);
        char own[64] = "";
        if (r.own_unfused > 0)
            snprintf(own, sizeof own, "\"own_unfused_ms\": %.4f, ", r.own_unfused);
        snprintf(extra, sizeof extra,
                 "\"unfused_ms\": %.4f, \"gemm_alone_ms\": %.4f, \"allgather_alone_ms\": %.4f, "
                 "%s%s\"transb\": %d, \"calls_per_series\": %d, "
                 "\"baseline_desc\": \"ncclAllGather + cublasGemmEx, one stream\"",
                 r.unfused, r.gemm, r.ag, idle, own, transb, calls);
        mkb_add_gemm_record(&js, "ag_gemm", "nccl_allgather+cublas", f16, g_n, g_comm->nnodes, r.m, r.n, r.k,
                            r.ours, r.unfused, r.gemm > r.ag ? r.gemm : r.ag, r.split, r.ctas, extra);
    }
    mkb_json_close(&js);
    snprintf(path, sizeof path, "%s/ag_gemm%s%s.tsv", dir, tag ? "-" : "", tag ? tag : "");
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "shape\tours_ms\tunfused_ms\tgemm_ms\tag_ms\tspeedup\tover_limit\n");
    for (const result &r : res) {
        double lim = r.gemm > r.ag ? r.gemm : r.ag;
        fprintf(f, "%lldx%lldx%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", r.m, r.n, r.k, r.ours,
                r.unfused, r.gemm, r.ag, r.unfused / r.ours, r.ours / lim);
    }
    fclose(f);
    printf("results: %s (and .json)\n", path);
}

} // namespace

extern "C" int mkb_ag_gemm_main(int argc, char **argv)
{
    const char *shapes = "4096x8192x8192,8192x8192x8192,16384x8192x8192,16384x2048x8192,"
                         "32768x1024x8192";
    const char *tag = NULL;
    int f16 = 0, transb = 0, iters = 20, rounds = 3, idle_us = 0, host = 0, own_unf = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) f16 = !strcmp(argv[++i], "fp16");
        else if (!strcmp(argv[i], "--transb")) transb = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--idle-us") && i + 1 < argc) idle_us = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host")) host = 1;
        else if (!strcmp(argv[i], "--own-unfused")) own_unf = 1;
        else {
            fprintf(stderr, "usage: mkbench ag_gemm [--shapes MxNxK,...] [--dtype bf16|fp16] "
                            "[--transb] [--iters N] [--rounds R] [--idle-us US] "
                            "[--host] [--own-unfused] [--tag NAME]\n");
            return 2;
        }
    }
    std::vector<result> res;
    if (mkb_parse_shapes(shapes, res) || iters < 1 || rounds < 1 || idle_us < 0) {
        fprintf(stderr, "mkbench ag_gemm: bad --shapes, --iters, --rounds or --idle-us\n");
        return 2;
    }
    const int dev = mkb_start(&g_comm, &g_rank, &g_n, &g_st);
    g_nccl = mkb_nccl_init(g_comm, g_rank, g_n);
    if (own_unf) {
        mkConfig_t cfg = MK_CONFIG_INITIALIZER;
        cfg.smSplit = "ag_gemm:fused=0";
        MKB_MK(mkCommSplit(g_comm, 0, g_rank, &g_unf, &cfg));
    }
    MKB_CB(cublasCreate(&g_blas));
    MKB_CB(cublasSetStream(g_blas, g_st));
    for (result &r : res) {
        if (r.m % g_n) {
            fprintf(stderr, "mkbench ag_gemm: M = %lld is not a multiple of %d ranks\n", r.m, g_n);
            return 2;
        }
        ctx x;
        memset(&x, 0, sizeof(x));
        x.m = r.m;
        x.n = r.n;
        x.k = r.k;
        x.m_local = r.m / g_n;
        x.transb = transb;
        x.f16 = f16;
        uint16_t *a, *b, *c, *g;
        MKB_CHECK(cudaMalloc(&a, (size_t)x.m_local * x.k * 2));
        MKB_CHECK(cudaMalloc(&b, (size_t)x.n * x.k * 2));
        MKB_CHECK(cudaMalloc(&c, (size_t)x.m * x.n * 2));
        MKB_CHECK(cudaMalloc(&g, (size_t)x.m * x.k * 2));
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(a, (size_t)x.m_local * x.k, 1000 + g_rank, f16);
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(b, (size_t)x.n * x.k, 7, f16);
        MKB_CHECK(cudaGetLastError());
        x.a = a; x.b = b; x.c = c; x.g = g;
        /* The series take turns, `rounds` blocks each, so that all of
         * them see the same clocks and temperatures (a power-capped GPU
         * drifts over a run). */
        std::vector<double> t[NSERIES];
        for (int round = 0; round < rounds; round++)
            for (int what = OURS; what < NSERIES; what++)
                if ((what != IDLE_GEMM || idle_us > 0) && (what != OWN_UNFUSED || own_unf))
                    time_block(x, what, iters, idle_us, t[what]);
        r.ours = mkb_worst_median(g_comm, g_rank, g_n, t[OURS]);
        r.unfused = mkb_worst_median(g_comm, g_rank, g_n, t[UNFUSED]);
        r.gemm = mkb_worst_median(g_comm, g_rank, g_n, t[GEMM]);
        r.ag = mkb_worst_median(g_comm, g_rank, g_n, t[AG]);
        r.idle_gemm = idle_us > 0 ? mkb_worst_median(g_comm, g_rank, g_n, t[IDLE_GEMM]) : 0;
        r.own_unfused = own_unf ? mkb_worst_median(g_comm, g_rank, g_n, t[OWN_UNFUSED]) : 0;
        if (host) {
            r.host_ours = host_us_per_call(x, OURS, 20);
            r.host_unfused = host_us_per_call(x, UNFUSED, 20);
        }
        mkResult_t ae;
        MKB_MK(mkCommGetAsyncError(g_comm, &ae));
        if (ae != mkSuccess) {
            fprintf(stderr, "rank %d: async error %s: %s\n", g_rank, mkGetErrorString(ae),
                    mkGetLastError(g_comm));
            return 3;
        }
        plan_text(x.m, x.n, x.k, &r);
        MKB_CHECK(cudaStreamSynchronize(g_st));
        cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(g);
    }
    if (g_rank == 0) {
        char devname[128], u[128];
        mkb_device_name(devname, sizeof devname, u, sizeof u);
        printf("mkAllGatherGemm %s, %d ranks, %s, transB %d (ms: median of %d calls in %d "
               "rounds, slowest rank)\n",
               f16 ? "fp16" : "bf16", g_n, devname, transb, iters * rounds, rounds);
        printf("%-18s %8s %8s %8s %8s %8s %9s %7s  %s\n", "M x N x K", "ours", "unfused",
               "gemm", "allgath", "speedup", "ours/lim", "TFLOP/s", "SM split");
        for (const result &r : res) {
            double lim = r.gemm > r.ag ? r.gemm : r.ag;
            char sh[64];
            snprintf(sh, sizeof sh, "%lldx%lldx%lld", r.m, r.n, r.k);
            printf("%-18s %8.3f %8.3f %8.3f %8.3f %7.3fx %8.3fx %7.1f  %s\n", sh, r.ours,
                   r.unfused, r.gemm, r.ag, r.unfused / r.ours, r.ours / lim,
                   2.0 * r.m * r.n * r.k / (r.ours * 1e-3) / 1e12, r.split);
        }
        if (idle_us > 0)
            for (const result &r : res)
                printf("%lldx%lldx%lld: GEMM alone %.3f ms back to back, %.3f ms after %d us "
                       "idle; all-gather + GEMM alone %.3f, unfused %.3f\n",
                       r.m, r.n, r.k, r.gemm, r.idle_gemm, idle_us, r.ag + r.gemm, r.unfused);
        if (own_unf)
            for (const result &r : res)
                printf("%lldx%lldx%lld: ours %.3f ms, our own unfused sequence %.3f ms: "
                       "%.3fx\n", r.m, r.n, r.k, r.ours, r.own_unfused, r.own_unfused / r.ours);
        if (host)
            for (const result &r : res)
                printf("%lldx%lldx%lld: host enqueue per call (rank 0): ours %.1f us, unfused "
                       "%.1f us; GPU per call ours %.1f us, unfused %.1f us\n",
                       r.m, r.n, r.k, r.host_ours, r.host_unfused, r.ours * 1e3,
                       r.unfused * 1e3);
        write_out(res, tag, f16, transb, iters * rounds, idle_us);
    }
    ncclCommDestroy(g_nccl);
    cublasDestroy(g_blas);
    if (g_unf) MKB_MK(mkCommDestroy(g_unf));
    MKB_MK(mkCommDestroy(g_comm));
    return 0;
}

#ifdef MKB_AG_GEMM_MAIN
int main(int argc, char **argv) { return mkb_ag_gemm_main(argc, argv); }
#endif
