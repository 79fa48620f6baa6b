/*
 * mkinfo - what this mkernel is: version, build configuration, the MK_*
 * parameters with their current values, and this process's view of the
 * job (rank, node, device) when run under a launcher.
 *
 *   mkinfo            everything
 *   mkinfo --params   the parameter table only
 *   mkinfo --comm     create a communicator and print what it sees
 *   mkinfo --topo     this host's GPUs, links, NICs and NUMA nodes
 *   mkinfo --op OP --m M --n N [--k K] [--dtype bf16|fp16|fp32]
 *          [--ranks R] [--nodes N] [--net cx7|efa|socket]
 *          [--head-dim 64|128] [--mask full|causal|zigzag]
 *          [--experts E --gemm-n N]
 *                     the plan of one operation: for R ranks per node
 *                     (default: one per GPU) on N nodes, or, with --comm,
 *                     for the communicator of this job; --net: the NICs to
 *                     plan for across nodes (cx7: one 400 Gb/s ConnectX-7
 *                     per GPU; efa: two 200 Gb/s EFA devices per GPU, as
 *                     p5en's 16 per node; socket: TCP) instead of this
 *                     host's; --head-dim, --mask: ring_attn's (default
 *                     128, full; not with --comm, whose plan is
 *                     mkCommGetInfo's: 128, full); --experts, --gemm-n:
 *                     moe_dispatch_gemm's and moe_layer's (m tokens per
 *                     rank, n hidden, k top-k; N the first GEMM's columns,
 *                     the layer's 2 x inter): the grouped GEMMs' time
 *   mkinfo --predict [--ranks R] [--nodes N] [--net ...]
 *                     the model's time and TFLOP/s per GPU of each fused
 *                     GEMM operation at M x 8192 x 8192 (M from 8192 to
 *                     131072, bf16) for that layout, next to the original
 *                     mKernel's published figures (2 x 8 H200)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "plan/plan.h"
#include "topology/topo.h"

static void print_build(void)
{
    printf("mkernel %d.%d.%d (MK_VERSION_CODE %d)\n", MK_VERSION_MAJOR,
           MK_VERSION_MINOR, MK_VERSION_PATCH, MK_VERSION_CODE);
    printf("build configuration:\n");
    printf("  %-22s %s (nvcc %s), kernels for sm_90a\n", "CUDA", MK_CUDA_HOME,
           MK_NVCC_VERSION);
    printf("  %-22s %s\n", "PMIx launcher support", HAVE_PMIX ? "yes" : "no");
    printf("  %-22s %s\n", "hwloc topology", HAVE_HWLOC ? "yes" : "no");
    printf("  %-22s %s\n", "ibverbs transport", HAVE_VERBS ? "yes" : "no");
    printf("  %-22s %s\n", "EFA transport", HAVE_EFA ? "yes" : "no");
}

static void print_params(void)
{
    static const char *types[] = {"int", "size", "string"};
    printf("parameters (environment variables):\n");
    for (int i = 0; i < MKI_P_COUNT; i++) {
        const struct mki_param_desc *d = mki_param_desc((enum mki_param_id)i);
        int set = mki_param_is_set((enum mki_param_id)i);
        printf("  %-20s %-6s default \"%s\"%s%s%s\n      %s\n", d->name,
               types[d->type], d->def, set ? ", set to \"" : "",
               set ? mki_param_str((enum mki_param_id)i) : "", set ? "\"" : "",
               d->doc);
    }
}

static int print_comm(void)
{
    mkComm_t comm;
    mkResult_t r = mkCommInit(&comm, NULL);
    if (r != mkSuccess) {
        fprintf(stderr, "mkinfo: mkCommInit: %s: %s\n", mkGetErrorString(r),
                mkGetLastError(NULL));
        return 1;
    }
    int rank, size, lrank, lsize, nodes, dev;
    mkCommRank(comm, &rank);
    mkCommSize(comm, &size);
    mkCommLocalRank(comm, &lrank);
    mkCommLocalSize(comm, &lsize);
    mkCommNodeCount(comm, &nodes);
    mkCommCuDevice(comm, &dev);
    printf("rank %d of %d: %d node(s), local rank %d of %d, CUDA device "
           "%d%s\n", rank, size, nodes, lrank, lsize, dev,
           dev < 0 ? " (no GPU)" : "");
    mkCommDestroy(comm);
    return 0;
}

/* ---- topology and plans (topology/print.c does the formatting) ---- */

struct plan_args {
    const char *op;
    int64_t m, n, k;
    int elem, ranks, nodes;
    const char *net; /* NULL: this host's NICs */
    int attn_set;    /* --head-dim or --mask given */
    struct mki_plan_attn attn;
    struct mki_plan_moe_shape moe; /* --experts, --gemm-n (0: not given) */
};

/* --net: the NICs each rank plans with across nodes. */
static void apply_net(const struct plan_args *pa, struct mki_plan_ctx *c)
{
    if (!pa->net || c->nnodes < 2) return;
    if (!strcmp(pa->net, "cx7")) {
        c->nics = 1;
        c->nic_gbs = mki_model_default.ib_nic_gbs;
    } else if (!strcmp(pa->net, "efa")) {
        c->nics = 2;
        c->nic_gbs = mki_model_default.efa_nic_gbs;
    } else {
        c->nics = 0;
        c->nic_gbs = 0;
    }
}

static const char *net_name(const struct mki_plan_ctx *c)
{
    static char buf[64];
    if (c->nnodes < 2) return "one node";
    if (!c->nics) return "socket transport";
    snprintf(buf, sizeof(buf), "%d NIC(s) of %.0f GB/s per GPU", c->nics, c->nic_gbs);
    return buf;
}

static int print_text(struct mki_strbuf *sb)
{
    if (sb->oom) {
        fprintf(stderr, "mkinfo: out of memory\n");
        return 1;
    }
    fputs(sb->buf ? sb->buf : "", stdout);
    free(sb->buf);
    return 0;
}

static int print_topo(const struct plan_args *pa)
{
    struct mki_topo_opts o;
    static struct mki_host_topo h;
    struct mki_strbuf sb = {0};
    mki_topo_opts_env(&o);
    mkResult_t r = mki_topo_discover(&o, &h);
    if (r != mkSuccess) {
        fprintf(stderr, "mkinfo: %s: %s\n", mkGetErrorString(r),
                mki_thread_error());
        return 1;
    }
    mki_topo_print_host(&sb, &h);
    if (pa && pa->op) {
        struct mki_plan_ctx c;
        struct mki_op_plan p;
        struct mki_split_ovr ovr[MKI_OP_COUNT];
        int op = mki_op_from_name(pa->op);
        mki_plan_ctx_from_host(&h, pa->ranks, pa->nodes, &c);
        apply_net(pa, &c);
        if (h.ngpus == 0)
            mki_sb_printf(&sb, "no GPU found: planning for %d-SM GPUs joined "
                          "by NV%d (REFERENCE.md's H200s)\n", c.sm_count,
                          c.nvlinks);
        struct mki_params pr;
        int mover = -1;
        r = mki_params_read(&pr);
        if (r == mkSuccess) c.hier_min = (uint64_t)mki_params_int(&pr, MKI_P_COLL_HIER_MIN);
        if (r == mkSuccess)
            r = mki_split_parse(mki_params_str(&pr, MKI_P_SM_SPLIT), "MK_SM_SPLIT", ovr);
        if (r == mkSuccess)
            r = mki_plan_coll_mover_param(mki_params_str(&pr, MKI_P_COLL_MOVER),
                                          mki_params_is_set(&pr, MKI_P_COLL_MOVER), &mover);
        if (r == mkSuccess && pa->moe.experts)
            r = mki_plan_model_moe(&mki_model_default, &c, &ovr[op], op, pa->m, pa->n, pa->k,
                                   pa->elem, &pa->moe, &p);
        else if (r == mkSuccess)
            r = mki_plan_model_attn(&mki_model_default, &c, &ovr[op], op, pa->m, pa->n,
                                    pa->k, pa->elem, pa->attn_set ? &pa->attn : NULL, &p);
        if (r == mkSuccess) r = mki_plan_runs(&c, &pr, mover, 0, &p);
        if (r != mkSuccess) {
            free(sb.buf);
            fprintf(stderr, "mkinfo: %s: %s\n", mkGetErrorString(r),
                    mki_thread_error());
            return 1;
        }
        mki_plan_print(&sb, &c, &p);
    }
    return print_text(&sb);
}

static int print_comm_plan(const struct plan_args *pa)
{
    mkComm_t comm;
    size_t size = 0;
    mkResult_t r = mkCommInit(&comm, NULL);
    if (r != mkSuccess) {
        fprintf(stderr, "mkinfo: mkCommInit: %s: %s\n", mkGetErrorString(r),
                mkGetLastError(NULL));
        return 1;
    }
    mkDataType_t dt = pa->elem == 4 ? mkFloat32 : mkBfloat16;
    r = mkCommGetInfo(comm, pa->op, pa->m, pa->n, pa->k, dt, NULL, &size);
    char *buf = r == mkSuccess ? malloc(size) : NULL;
    if (buf) r = mkCommGetInfo(comm, pa->op, pa->m, pa->n, pa->k, dt, buf, &size);
    if (r == mkSuccess && buf) fputs(buf, stdout);
    else fprintf(stderr, "mkinfo: mkCommGetInfo: %s: %s\n",
                 mkGetErrorString(r), mkGetLastError(comm));
    free(buf);
    mkCommDestroy(comm);
    return r == mkSuccess ? 0 : 1;
}

/* --predict: each fused GEMM operation at the shapes below, planned for
 * the layout asked; "this version" is what runs today (across nodes the
 * fused GEMM operations run their unfused sequence). */
static int print_predict(const struct plan_args *pa)
{
    static const struct {
        enum mki_op op;
        const char *name, *published;
    } ops[] = {
        {MKI_OP_AG_GEMM, "AllGather+GEMM", "448-492 (cuBLAS + NCCL 367-385)"},
        {MKI_OP_GEMM_RS, "GEMM+ReduceScatter", "464-485 (381-475; slower than cuBLAS + "
                                               "NCCL at M <= 8192)"},
        {MKI_OP_GEMM_AR, "GEMM+AllReduce", "397-409 (260-300)"},
    };
    static const int64_t ms[] = {8192, 16384, 32768, 65536, 131072};
    const int64_t N = 8192, K = 8192;
    struct mki_topo_opts o;
    static struct mki_host_topo h;
    mki_topo_opts_env(&o);
    mkResult_t r = mki_topo_discover(&o, &h);
    if (r != mkSuccess) {
        fprintf(stderr, "mkinfo: %s: %s\n", mkGetErrorString(r), mki_thread_error());
        return 1;
    }
    struct mki_plan_ctx c;
    mki_plan_ctx_from_host(&h, pa->ranks, pa->nodes, &c);
    apply_net(pa, &c);
    printf("model of %d rank(s): %d node(s) x %d, %d-SM GPUs%s, %s; bf16, M x %lld x %lld\n"
           "(M global; each rank's GEMM M x %lld x %lld: N per rank for AllGather+GEMM, K "
           "per rank for the others)\n", c.nranks, c.nnodes, c.local_size, c.sm_count,
           h.ngpus ? "" : " (no GPU here: REFERENCE.md's H200s, NV18)", net_name(&c),
           (long long)N, (long long)K, (long long)N, (long long)K);
    printf("%-20s %7s  %-8s %10s %8s %10s %8s  %s\n", "op", "M", "plan", "fused_us",
           "TF/GPU", "unfused_us", "TF/GPU", "this version TF/GPU");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        for (size_t j = 0; j < sizeof(ms) / sizeof(ms[0]); j++) {
            struct mki_op_plan p;
            /* the same GEMM on every rank of every op: K global = K x ranks
             * where K is sharded (GEMM+RS, GEMM+AR) */
            const int64_t kg = ops[i].op == MKI_OP_AG_GEMM ? K : K * c.nranks;
            r = mki_plan_model(&mki_model_default, &c, NULL, ops[i].op, ms[j], N, kg, 2, &p);
            if (r != mkSuccess) {
                fprintf(stderr, "mkinfo: %s: %s\n", mkGetErrorString(r), mki_thread_error());
                return 1;
            }
            const double gf = p.flops / 1e6; /* one rank's GEMM: TFLOP/s = gf / us */
            const double now = c.nnodes > 1 || !p.fused ? p.t_unfused_us : p.t_fused_us;
            printf("%-20s %7lld  %-8s %10.0f %8.0f %10.0f %8.0f  %.0f%s\n", ops[i].name,
                   (long long)ms[j], p.fused ? "fused" : "unfused", p.t_fused_us,
                   gf / p.t_fused_us, p.t_unfused_us, gf / p.t_unfused_us, gf / now,
                   c.nnodes > 1 ? " (unfused across nodes)" : "");
        }
        printf("%-20s %7s  published by the original mKernel, 2 x 8 H200, TFLOP/s per "
               "GPU: %s\n", "", "", ops[i].published);
    }
    printf("The model's error against measured times: tools/model_check.py, bench/NOTES.md.\n");
    return 0;
}

static int parse_num(const char *opt, const char *v, int64_t min, int64_t *out)
{
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || end == v || *end || x < min) {
        fprintf(stderr, "mkinfo: %s needs an integer >= %lld\n", opt,
                (long long)min);
        return -1;
    }
    *out = x;
    return 0;
}

/* Options of the plan; returns 1 when argv[*i] was one, -1 on error. */
static int plan_option(int argc, char **argv, int *i, struct plan_args *pa)
{
    const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int64_t x = 0;
    if (strcmp(o, "--op") && strcmp(o, "--m") && strcmp(o, "--n") &&
        strcmp(o, "--k") && strcmp(o, "--dtype") && strcmp(o, "--ranks") &&
        strcmp(o, "--nodes") && strcmp(o, "--net") && strcmp(o, "--head-dim") &&
        strcmp(o, "--mask") && strcmp(o, "--experts") && strcmp(o, "--gemm-n"))
        return 0;
    ++*i;
    if (!strcmp(o, "--head-dim")) {
        if (!v || (strcmp(v, "64") && strcmp(v, "128"))) {
            fprintf(stderr, "mkinfo: --head-dim takes 64 or 128\n");
            return -1;
        }
        pa->attn.head_dim = atoi(v);
        pa->attn_set = 1;
        return 1;
    }
    if (!strcmp(o, "--mask")) {
        if (!v || (strcmp(v, "full") && strcmp(v, "causal") && strcmp(v, "zigzag"))) {
            fprintf(stderr, "mkinfo: --mask takes full, causal or zigzag\n");
            return -1;
        }
        pa->attn.mask = !strcmp(v, "full") ? 0 : !strcmp(v, "causal") ? 1 : 2;
        pa->attn_set = 1;
        return 1;
    }
    if (!strcmp(o, "--net")) {
        if (!v || (strcmp(v, "cx7") && strcmp(v, "efa") && strcmp(v, "socket"))) {
            fprintf(stderr, "mkinfo: --net takes cx7, efa or socket\n");
            return -1;
        }
        pa->net = v;
        return 1;
    }
    if (!strcmp(o, "--op")) {
        if (!v || mki_op_from_name(v) < 0) {
            fprintf(stderr, "mkinfo: --op takes allgather, reducescatter, "
                    "allreduce, alltoall, ag_gemm, gemm_rs, gemm_ar, moe_dispatch,\n"
                    "         moe_combine, moe_dispatch_gemm, ring_attn or moe_layer\n");
            return -1;
        }
        pa->op = v;
        return 1;
    }
    if (!strcmp(o, "--dtype")) {
        if (!v || (strcmp(v, "bf16") && strcmp(v, "fp16") && strcmp(v, "fp32"))) {
            fprintf(stderr, "mkinfo: --dtype takes bf16, fp16 or fp32\n");
            return -1;
        }
        pa->elem = strcmp(v, "fp32") ? 2 : 4;
        return 1;
    }
    if (parse_num(o, v, strcmp(o, "--k") ? 1 : 0, &x)) return -1;
    if (!strcmp(o, "--m")) pa->m = x;
    else if (!strcmp(o, "--n")) pa->n = x;
    else if (!strcmp(o, "--k")) pa->k = x;
    else if (!strcmp(o, "--experts")) pa->moe.experts = x;
    else if (!strcmp(o, "--gemm-n")) pa->moe.gemm_n = x;
    else if (!strcmp(o, "--ranks")) pa->ranks = (int)x;
    else pa->nodes = (int)x;
    return 1;
}

int main(int argc, char **argv)
{
    int only_params = 0, comm = 0;
    int topo = 0, predict = 0, rc;
    struct plan_args pa = {NULL, 0, 0, 0, 2, 0, 1, NULL, 0, {128, 0}, {0, 0}};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--params")) only_params = 1;
        else if (!strcmp(argv[i], "--comm")) comm = 1;
        else if (!strcmp(argv[i], "--topo")) topo = 1;
        else if (!strcmp(argv[i], "--predict")) predict = 1;
        else if ((rc = plan_option(argc, argv, &i, &pa)) != 1) {
            fprintf(stderr, "usage: mkinfo [--params] [--comm] [--topo] "
                    "[--op OP --m M --n N [--k K] [--dtype bf16|fp16|fp32] "
                    "[--ranks R] [--nodes N] [--net cx7|efa|socket]\n"
                    "        [--head-dim 64|128] [--mask full|causal|zigzag]\n"
                    "        [--experts E --gemm-n N]]\n"
                    "       mkinfo --predict [--ranks R] [--nodes N] [--net cx7|efa|socket]\n");
            return 2;
        }
    }
    if (predict) {
        if (pa.op || comm || pa.attn_set) {
            fprintf(stderr, "mkinfo: --predict takes only --ranks, --nodes and --net\n");
            return 2;
        }
        return print_predict(&pa);
    }
    if (pa.op && (pa.m < 1 || pa.n < 1 || (mki_op_from_name(pa.op) >=
                                           MKI_OP_AG_GEMM && pa.k < 1))) {
        fprintf(stderr, "mkinfo: --op %s needs --m and --n%s\n", pa.op,
                mki_op_from_name(pa.op) >= MKI_OP_AG_GEMM ? " and --k" : "");
        return 2;
    }
    if (pa.attn_set && (!pa.op || mki_op_from_name(pa.op) != MKI_OP_RING_ATTN || comm)) {
        fprintf(stderr, "mkinfo: --head-dim and --mask go with --op ring_attn, without --comm\n");
        return 2;
    }
    if ((pa.moe.experts || pa.moe.gemm_n) &&
        (!pa.op || !pa.moe.experts || !pa.moe.gemm_n || comm ||
         (mki_op_from_name(pa.op) != MKI_OP_MOE_DISPATCH_GEMM &&
          mki_op_from_name(pa.op) != MKI_OP_MOE_LAYER))) {
        fprintf(stderr, "mkinfo: --experts and --gemm-n go together with --op "
                "moe_dispatch_gemm or moe_layer, without --comm\n");
        return 2;
    }
    if (comm && pa.op) return print_comm_plan(&pa);
    if (comm) return print_comm();
    if (topo || pa.op) return print_topo(&pa);
    if (!only_params) {
        print_build();
        printf("\n");
    }
    print_params();
    printf("\n");
    return print_topo(NULL);
}
