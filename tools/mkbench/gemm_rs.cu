/*
 * gemm_rs.cu - mkbench for mkGemmReduceScatter and mkGemmAllReduce (one
 * process per rank, under mpirun): ours against the unfused cuBLAS GEMM +
 * NCCL reduce-scatter (all-reduce) on one stream, and against the limit
 * max(GEMM alone, collective alone), in the same run, on the same random
 * data.
 *
 *   mkbench gemm_rs [--shapes MxNxK,...] [--dtype bf16|fp16] [--notransb]
 *                   [--iters N] [--rounds R] [--tag NAME] [--no-nccl]
 *   mkbench gemm_ar [the same]   (mkbench_gemm_rs --ar [...] standalone)
 *   --graph: every series' call captured once per input set into a CUDA
 *   graph and the graphs timed (the GPU's time without the host's per-call
 *   work, as a decode step replays it; eager calls otherwise)
 *
 * gemm_ar: C is all of D on every rank, the baseline cuBLAS + an in-place
 * ncclAllReduce of the bf16 product, M any size; its default sweep is the
 * one of issue 18 (M = 1 ... 16384 at N = K = 8192, 6000x5000x4104).
 *
 * Shapes are global: D is M x N, K is the sum of the ranks' slices (K/P
 * each, rounded up to a multiple of 8: 4104 on 2 ranks runs as 2 x 2056,
 * reported as 4112), M split evenly (M a multiple of the ranks, for NCCL).  transB = 1
 * unless --notransb (B stored as Linear weights, N x K).  The series
 * (ours, unfused, GEMM alone, reduce-scatter alone) take turns in R
 * rounds (default 3) of N timed calls (default 20), each block after a
 * bootstrap barrier and warm-up calls; inputs and outputs rotate over
 * sets whose bytes pass twice the L2; per series the median of the R x N
 * per-call CUDA event times, the largest of the ranks' medians.  The
 * baseline's GEMM writes bf16 (NCCL sums the rounded partials: its
 * accuracy is below ours, which sums in fp32).  Rank 0 prints the table
 * and writes gemm_rs.json (gemm_rs-NAME.json with --tag) and gemm_rs.tsv
 * in mkb_results_dir.  --no-nccl times ours and cuBLAS's GEMM alone only
 * (NCCL refuses ranks that share a GPU: a run under MPS on one GPU).
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
#include <string>
#include <vector>

#include "mkernel.h"
#include "mki.h"
extern "C" {
#include "plan/plan.h"
}
#include "common.h"
#include "multi.h"

namespace {

int g_rank, g_n, g_ar, g_graph;
mkComm_t g_comm;
ncclComm_t g_nccl;
cudaStream_t g_st;
cublasHandle_t g_blas;



enum { OURS, UNFUSED, GEMM, RS, NSERIES };

struct set {
    uint16_t *a, *c, *d; /* A (M x k), C (M/P x N; gemm_ar M x N), the unfused D (M x N) */
};

struct ctx {
    int what;
    int graph;                                  /* --graph: replay execs */
    std::vector<cudaGraphExec_t> exec[NSERIES]; /* per set */
    std::vector<set> sets;
    const void *b;
    int64_t m, n, k;
    int transb, f16;
};

void gemm(const ctx &x, const set &s)
{
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t t = x.f16 ? CUDA_R_16F : CUDA_R_16BF;
    MKB_CB(cublasGemmEx(g_blas, x.transb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)x.n,
                       (int)x.m, (int)x.k, &one, x.b, t, x.transb ? (int)x.k : (int)x.n, s.a, t,
                       (int)x.k, &zero, s.d, t, (int)x.n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT));
}

void reduce_scatter(const ctx &x, const set &s)
{
    if (g_ar) {
        MKB_NC(ncclAllReduce(s.d, s.d, (size_t)(x.m * x.n), x.f16 ? ncclFloat16 : ncclBfloat16,
                             ncclSum, g_nccl, g_st));
        return;
    }
    MKB_NC(ncclReduceScatter(s.d, s.c, (size_t)(x.m / g_n * x.n),
                             x.f16 ? ncclFloat16 : ncclBfloat16, ncclSum, g_nccl, g_st));
}

void call(const ctx &x, const set &s);

void run_fn(void *p, int rep)
{
    const ctx &x = *(const ctx *)p;
    const size_t i = (size_t)rep % x.sets.size();
    if (x.graph) {
        MKB_CHECK(cudaGraphLaunch(x.exec[x.what][i], g_st));
        return;
    }
    call(x, x.sets[i]);
}

/* Capture series `what` once per input set (after an eager call: the
 * first call of a shape talks to the other ranks). */
void capture(ctx &x, int what)
{
    x.what = what;
    for (size_t i = 0; i < x.sets.size(); i++) {
        call(x, x.sets[i]);
        MKB_CHECK(cudaStreamSynchronize(g_st));
        cudaGraph_t gr;
        cudaGraphExec_t ex;
        MKB_CHECK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
        call(x, x.sets[i]);
        MKB_CHECK(cudaStreamEndCapture(g_st, &gr));
        MKB_CHECK(cudaGraphInstantiate(&ex, gr, 0));
        MKB_CHECK(cudaGraphDestroy(gr));
        x.exec[what].push_back(ex);
    }
}

void call(const ctx &x, const set &s)
{
    switch (x.what) {
    case OURS:
        if (g_ar) {
            MKB_MK(mkGemmAllReduce(s.a, x.b, s.c, x.m, x.n, x.k, x.transb,
                                   x.f16 ? mkFloat16 : mkBfloat16, g_comm, g_st));
            break;
        }
        MKB_MK(mkGemmReduceScatter(s.a, x.b, s.c, NULL, x.m, x.n, x.k, x.transb,
                                   x.f16 ? mkFloat16 : mkBfloat16, g_comm, g_st));
        break;
    case UNFUSED: gemm(x, s); reduce_scatter(x, s); break;
    case GEMM: gemm(x, s); break;
    default: reduce_scatter(x, s); break;
    }
}

/* Warm-up: the fused call of a rank ends when its peers' partials have
 * reached it, so the ranks settle to the slowest GPU's pace only after
 * the faster ones used up their head start (as for mkAllGatherGemm). */
#define RS_WARMUP_OURS 30
#define RS_WARMUP 5

/* --host: this rank's host time per call of each series (mkb_host_us),
 * summed over the rounds */
int g_host;
double g_host_us[NSERIES];

void time_block(ctx &x, int what, int iters, std::vector<double> &out)
{
    x.what = what;
    MKB_MK(g_comm->boot->barrier(g_comm->boot_ctx));
    std::vector<double> ms(iters);
    mkb_time(run_fn, &x, g_st, what == OURS ? RS_WARMUP_OURS : RS_WARMUP, iters, ms.data());
    out.insert(out.end(), ms.begin(), ms.end());
    g_host_us[what] += mkb_host_us;
}


struct result {
    long long m, n, k;
    double ours, unfused, gemm, rs;
    char split[64];
    int ctas;
};

void plan_text(int64_t m, int64_t n, int64_t k, result *r)
{
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    if (g_n == 1 ||
        mki_plan_op(g_comm, g_ar ? MKI_OP_GEMM_AR : MKI_OP_GEMM_RS, m, n, k, 2, &p) != mkSuccess) {
        snprintf(r->split, sizeof(r->split), "unfused (one rank)");
        r->ctas = 0;
        return;
    }
    r->ctas = p.split.compute;
    if (!p.fused || g_comm->nnodes > 1)
        snprintf(r->split, sizeof(r->split), "unfused (%s)", g_comm->nnodes > 1 ? "nodes" : "plan");
    else if (p.decode)
        snprintf(r->split, sizeof(r->split), "compute=%d (decode kernel)", p.split.compute);
    else
        snprintf(r->split, sizeof(r->split), "compute=%d (outbox + movers)", p.split.compute);
}


/* A time for the JSON: null where the series did not run (--no-nccl). */
void ms_or_null(char *out, size_t len, double ms)
{
    if (ms < 0) snprintf(out, len, "null");
    else snprintf(out, len, "%.4f", ms);
}

void write_out(const std::vector<result> &res, const char *tag, int f16, int transb, int calls)
{
    char dir[512], path[700];
    mkb_results_dir(dir, sizeof dir);
    const char *op = g_ar ? "gemm_ar" : "gemm_rs";
    snprintf(path, sizeof path, "%s/%s%s%s.json", dir, op, tag ? "-" : "", tag ? tag : "");
    mkb_json js;
    if (mkb_json_open(&js, path)) return;
    for (const result &r : res) {
        char extra[512], unf[32], rsa[32];
        ms_or_null(unf, sizeof unf, r.unfused);
        ms_or_null(rsa, sizeof rsa, r.rs);
        snprintf(extra, sizeof extra,
                 "\"unfused_ms\": %s, \"gemm_alone_ms\": %.4f, "
                 "\"%s_alone_ms\": %s, \"transb\": %d, \"calls_per_series\": %d, "
                 "\"graph_replay\": %d, "
                 "\"baseline_desc\": \"cublasGemmEx (bf16 out) + %s, one "
                 "stream\"",
                 unf, r.gemm, g_ar ? "allreduce" : "reducescatter", rsa, transb, calls, g_graph,
                 g_ar ? "ncclAllReduce in place" : "ncclReduceScatter");
        mkb_add_gemm_record(&js, op, g_ar ? "cublas+nccl_allreduce" : "cublas+nccl_reducescatter",
                            f16, g_n, g_comm->nnodes, r.m, r.n, r.k,
                            r.ours, r.unfused, r.gemm > r.rs ? r.gemm : r.rs, r.split, r.ctas, extra);
    }
    mkb_json_close(&js);
    snprintf(path, sizeof path, "%s/%s%s%s.tsv", dir, op, tag ? "-" : "", tag ? tag : "");
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "shape\tours_ms\tunfused_ms\tgemm_ms\t%s_ms\tspeedup\tover_limit\n",
            g_ar ? "ar" : "rs");
    for (const result &r : res) {
        double lim = r.gemm > r.rs ? r.gemm : r.rs;
        fprintf(f, "%lldx%lldx%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", r.m, r.n, r.k, r.ours,
                r.unfused, r.gemm, r.rs, r.unfused > 0 ? r.unfused / r.ours : -1.0, r.ours / lim);
    }
    fclose(f);
    printf("results: %s (and .json)\n", path);
}

} // namespace

static int bench_main(int argc, char **argv)
{
    const char *shapes = g_ar ? "8192x8192x8192,16384x8192x8192,4096x8192x8192,1x8192x8192,"
                                "16x8192x8192,128x8192x8192,1024x8192x8192,2048x8192x8192,"
                                "6000x5000x4104"
                              : "8192x8192x8192,16384x8192x8192,4096x8192x8192,16x8192x8192,"
                                "128x8192x8192,1024x8192x8192,2048x8192x8192,6000x5000x4104,"
                                "8192x1024x8192,16384x4096x16384";
    const char *me = g_ar ? "gemm_ar" : "gemm_rs";
    g_graph = 0;
    const char *tag = NULL;
    int f16 = 0, transb = 1, iters = 20, rounds = 3, nccl = 1, graph = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) f16 = !strcmp(argv[++i], "fp16");
        else if (!strcmp(argv[i], "--notransb")) transb = 0;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(argv[i], "--no-nccl")) nccl = 0;
        else if (!strcmp(argv[i], "--graph")) graph = g_graph = 1;
        else if (!strcmp(argv[i], "--host")) g_host = 1;
        else {
            fprintf(stderr, "usage: mkbench %s [--shapes MxNxK,...] [--dtype bf16|fp16] "
                            "[--notransb] [--iters N] [--rounds R] [--tag NAME] "
                            "[--no-nccl] [--graph] [--host]\n", me);
            return 2;
        }
    }
    std::vector<result> res;
    if (mkb_parse_shapes(shapes, res) || iters < 1 || rounds < 1) {
        fprintf(stderr, "mkbench %s: bad --shapes, --iters or --rounds\n", me);
        return 2;
    }
    const int dev = mkb_start(&g_comm, &g_rank, &g_n, &g_st);
    if (nccl) g_nccl = mkb_nccl_init(g_comm, g_rank, g_n);
    MKB_CB(cublasCreate(&g_blas));
    MKB_CB(cublasSetStream(g_blas, g_st));
    int l2 = 0;
    MKB_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    for (result &r : res) {
        if ((!g_ar && r.m % g_n) || r.k < 1) {
            fprintf(stderr, "mkbench gemm_rs: M = %lld must be a multiple of %d ranks and K = "
                    "%lld positive\n", r.m, g_n, r.k);
            return 2;
        }
        ctx x;
        x.m = r.m;
        x.n = r.n;
        /* every rank the same slice, a multiple of 8: K / P rounded up
         * (zero-padded slices; the baseline multiplies the same k) */
        x.k = (r.k + 8 * g_n - 1) / (8 * g_n) * 8;
        r.k = x.k * g_n;
        x.transb = transb;
        x.f16 = f16;
        uint16_t *b;
        MKB_CHECK(cudaMalloc(&b, (size_t)x.n * x.k * 2));
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(b, (size_t)x.n * x.k, 7 + 31 * g_rank, f16);
        x.b = b;
        const size_t crows = g_ar ? (size_t)x.m : (size_t)x.m / g_n;
        const size_t per = ((size_t)x.m * x.k + crows * x.n + (size_t)x.m * x.n) * 2;
        size_t nsets = (2 * (size_t)l2 + per - 1) / per;
        if (nsets < 1) nsets = 1;
        if (nsets > 8) nsets = 8;
        for (size_t i = 0; i < nsets; i++) {
            set s;
            MKB_CHECK(cudaMalloc(&s.a, (size_t)x.m * x.k * 2));
            MKB_CHECK(cudaMalloc(&s.c, crows * x.n * 2 + 16));
            MKB_CHECK(cudaMalloc(&s.d, (size_t)x.m * x.n * 2));
            mkb_fill_rand<<<1024, 256, 0, g_st>>>(s.a, (size_t)x.m * x.k, 1000 + 17 * i + g_rank, f16);
            x.sets.push_back(s);
        }
        MKB_CHECK(cudaGetLastError());
        x.graph = graph;
        if (graph)
            for (int what = OURS; what < NSERIES; what++)
                if (nccl || what == OURS || what == GEMM) capture(x, what);
        std::vector<double> t[NSERIES];
        for (double &h : g_host_us) h = 0;
        for (int round = 0; round < rounds; round++)
            for (int what = OURS; what < NSERIES; what++)
                if (nccl || what == OURS || what == GEMM) time_block(x, what, iters, t[what]);
        r.ours = mkb_worst_median(g_comm, g_rank, g_n, t[OURS]);
        r.unfused = nccl ? mkb_worst_median(g_comm, g_rank, g_n, t[UNFUSED]) : -1;
        r.gemm = mkb_worst_median(g_comm, g_rank, g_n, t[GEMM]);
        r.rs = nccl ? mkb_worst_median(g_comm, g_rank, g_n, t[RS]) : -1;
        mkResult_t ae;
        MKB_MK(mkCommGetAsyncError(g_comm, &ae));
        if (ae != mkSuccess) {
            fprintf(stderr, "rank %d: async error %s: %s\n", g_rank, mkGetErrorString(ae),
                    mkGetLastError(g_comm));
            return 3;
        }
        plan_text(x.m, x.n, r.k, &r);
        if (g_host && g_rank == 0)
            printf("host %lldx%lldx%lld: enqueue us per call (rank 0, mean of %d rounds): "
                   "ours %.1f unfused %.1f gemm %.1f %s %.1f\n", r.m, r.n, r.k, rounds,
                   g_host_us[OURS] / rounds, g_host_us[UNFUSED] / rounds,
                   g_host_us[GEMM] / rounds, g_ar ? "all-red" : "red-sc", g_host_us[RS] / rounds);
        MKB_CHECK(cudaStreamSynchronize(g_st));
        for (int what = OURS; what < NSERIES; what++)
            for (cudaGraphExec_t ex : x.exec[what]) cudaGraphExecDestroy(ex);
        for (set &s : x.sets) {
            cudaFree(s.a);
            cudaFree(s.c);
            cudaFree(s.d);
        }
        cudaFree(b);
    }
    if (g_rank == 0) {
        char devname[128], u[128];
        mkb_device_name(devname, sizeof devname, u, sizeof u);
        printf("%s %s, %d ranks, %s, transB %d (ms: median of %d %s in %d "
               "rounds, slowest rank)\n", g_ar ? "mkGemmAllReduce" : "mkGemmReduceScatter",
               f16 ? "fp16" : "bf16", g_n, devname, transb, iters * rounds,
               graph ? "graph replays" : "calls", rounds);
        printf("%-18s %8s %8s %8s %8s %8s %9s %7s  %s\n", "M x N x K", "ours", "unfused",
               "gemm", g_ar ? "all-red" : "red-sc", "speedup", "ours/lim", "TFLOP/s", "plan");
        for (const result &r : res) {
            double lim = r.gemm > r.rs ? r.gemm : r.rs;
            char sh[64];
            snprintf(sh, sizeof sh, "%lldx%lldx%lld", r.m, r.n, r.k);
            if (r.unfused > 0)
                printf("%-18s %8.3f %8.3f %8.3f %8.3f %7.3fx %8.3fx %7.1f  %s\n", sh, r.ours,
                       r.unfused, r.gemm, r.rs, r.unfused / r.ours, r.ours / lim,
                       2.0 * r.m * r.n * r.k / (r.ours * 1e-3) / 1e12, r.split);
            else /* --no-nccl: ours and the GEMM alone */
                printf("%-18s %8.3f %8s %8.3f %8s %8s %8.3fx %7.1f  %s\n", sh, r.ours, "-",
                       r.gemm, "-", "-", r.ours / lim,
                       2.0 * r.m * r.n * r.k / (r.ours * 1e-3) / 1e12, r.split);
        }
        write_out(res, tag, f16, transb, iters * rounds);
    }
    if (nccl) ncclCommDestroy(g_nccl);
    cublasDestroy(g_blas);
    MKB_MK(mkCommDestroy(g_comm));
    return 0;
}

extern "C" int mkb_gemm_rs_main(int argc, char **argv)
{
    g_ar = 0;
    return bench_main(argc, argv);
}

extern "C" int mkb_gemm_ar_main(int argc, char **argv)
{
    g_ar = 1;
    return bench_main(argc, argv);
}

#ifdef MKB_GEMM_RS_MAIN
/* mkbench_gemm_rs [--ar] [options] */
int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--ar")) {
        argv[1] = argv[0];
        return mkb_gemm_ar_main(argc - 1, argv + 1);
    }
    return mkb_gemm_rs_main(argc, argv);
}
#endif
