/*
 * test_plan - the cost model and its overrides: splits move in the
 * expected direction with the shape, fusion is refused where it cannot
 * win, MK_SM_SPLIT and MK_TRANSPORT win or fail with a clear message.
 */
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "plan/plan.h"
#include "../unit/check.h"

static const struct mki_model *md = &mki_model_default;

/* REFERENCE.md's machine: 2 x H200 joined by NV18, one node. */
static struct mki_plan_ctx h200x2(void)
{
    struct mki_plan_ctx c = {2, 2, 1, 132, 132, MKI_PATH_NVLINK, 18, 0, 0.0,
                             256u << 20};
    return c;
}

/* Two DGX-like nodes: 8 GPUs each, one 50 GB/s NIC per GPU. */
static struct mki_plan_ctx dgx2(void)
{
    struct mki_plan_ctx c = {16, 8, 2, 132, 132, MKI_PATH_NVLINK, 18, 1, 50.0,
                             256u << 20};
    return c;
}

static struct mki_op_plan plan(const struct mki_plan_ctx *c,
                               const struct mki_split_ovr *o, enum mki_op op,
                               int64_t m, int64_t n, int64_t k)
{
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    CHECK_RES(mki_plan_model(md, c, o, op, m, n, k, 2, &p), mkSuccess);
    CHECK(p.ctas == p.split.compute + p.split.intra + p.split.inter_send +
                        p.split.inter_reduce);
    CHECK(p.ctas <= (c->sm_budget ? c->sm_budget : c->sm_count));
    return p;
}

static void directions(void)
{
    struct mki_plan_ctx c = h200x2();
    /* GEMM+ReduceScatter: the compute CTAs' epilogues store the partials
     * (no INTRA CTA, every SM computes) whether communication (short K)
     * or compute (long K) dominates; the copy engine cannot add. */
    struct mki_op_plan comm = plan(&c, NULL, MKI_OP_GEMM_RS, 8192, 8192, 1024);
    struct mki_op_plan comp = plan(&c, NULL, MKI_OP_GEMM_RS, 8192, 8192, 32768);
    CHECK(comm.split.intra == 0 && comp.split.intra == 0);
    CHECK(comm.split.compute == 132 && comp.split.compute == 132);
    CHECK(comp.mover == MKI_MOVER_TMA && comm.mover == MKI_MOVER_TMA);
    CHECK(comm.t_intra_us > comm.t_compute_us && comp.t_intra_us < comp.t_compute_us / 2);
    /* The shapes of the issue fuse (partials hidden behind the GEMM). */
    struct mki_op_plan mid = plan(&c, NULL, MKI_OP_GEMM_RS, 8192, 8192, 8192);
    CHECK(mid.fused == 1 && mid.intra_bytes == 8192ll * 8192 * 4 / 2);
    /* A decode-sized M: one wave, little to hide, but one launch instead
     * of three (GEMM, reduce-scatter, conversion): fused. */
    struct mki_op_plan tiny = plan(&c, NULL, MKI_OP_GEMM_RS, 16, 8192, 8192);
    CHECK(tiny.fused == 1);
    /* The big AllGather+GEMM of REFERENCE.md fuses, with every SM on the
     * GEMM and the copy engine moving A. */
    struct mki_op_plan ag = plan(&c, NULL, MKI_OP_AG_GEMM, 8192, 8192, 8192);
    CHECK(ag.fused == 1 && ag.mover == MKI_MOVER_CE && ag.split.compute == 132);
    CHECK(ag.intra_bytes == 8192ll * 8192 * 2 / 2);
    CHECK(ag.chunk_rows % md->tile_m == 0 && ag.chunk_bytes >= md->chunk_min);
    /* A tiny M: a few tiles, little to hide: the unfused sequence runs. */
    struct mki_op_plan small = plan(&c, NULL, MKI_OP_AG_GEMM, 256, 8192, 8192);
    CHECK(small.fused == 0);
    CHECK_CONTAINS(small.reason, "unfused");
    /* One rank: nothing to communicate. */
    struct mki_plan_ctx one = {1, 1, 1, 132, 132, MKI_PATH_SELF, 0, 0, 0, 0};
    struct mki_op_plan solo = plan(&one, NULL, MKI_OP_GEMM_AR, 4096, 4096, 4096);
    CHECK(solo.fused == 0 && solo.split.compute == 132 && solo.intra_bytes == 0);
    /* A collective uses few CTAs: enough to reach the link's rate. */
    struct mki_op_plan rs = plan(&c, NULL, MKI_OP_REDUCESCATTER, 16384, 8192, 0);
    CHECK(rs.split.compute == 0 && rs.split.intra >= 8 && rs.split.intra <= 32);
    CHECK(rs.fused == 1);
}

static void multinode(void)
{
    struct mki_plan_ctx c = dgx2();
    struct mki_op_plan rs = plan(&c, NULL, MKI_OP_GEMM_RS, 16384, 8192, 8192);
    CHECK(rs.split.inter_send == 1 && rs.split.inter_reduce == 2);
    CHECK(rs.inter_bytes > 0 && rs.intra_bytes > rs.inter_bytes);
    struct mki_op_plan a2a = plan(&c, NULL, MKI_OP_ALLTOALL, 16384, 4096, 0);
    /* Alltoall does not aggregate: half of it leaves the node. */
    CHECK(a2a.inter_bytes == 16384ll * 4096 * 2 * 8 / 16);
    CHECK(a2a.split.inter_reduce == 0);
    /* All-reduce across the 2 nodes of 8: flat (MK_COLL_HIER_MIN 0 here)
     * every rank sends 2 (P - L) / P of the buffer across, S; in steps
     * (from hier_min bytes) 1/L of that. */
    const int64_t S = 16384ll * 4096 * 2;
    struct mki_op_plan ar = plan(&c, NULL, MKI_OP_ALLREDUCE, 16384, 4096, 0);
    CHECK(ar.inter_bytes == S);
    c.hier_min = 1u << 20;
    struct mki_op_plan arh = plan(&c, NULL, MKI_OP_ALLREDUCE, 16384, 4096, 0);
    CHECK(arh.inter_bytes == S / 8 && arh.t_inter_us < ar.t_inter_us / 4);
    struct mki_op_plan ars = plan(&c, NULL, MKI_OP_ALLREDUCE, 256, 1, 0); /* 512 B: flat */
    CHECK(ars.inter_bytes == 512);
    c.hier_min = 0;
    /* The MoE calls across nodes: the sequence (kernels/ops/moe.h), not
     * the one-node kernel.  The dispatch all-gathers every rank's T x H
     * tokens: T (N - 1) rows of each rank cross the network (the stepped
     * path), (L - 1) N T inside the node; the combine reduce-scatters fp32
     * sums of every token, twice the dispatch's bytes; the layer both. */
    const int64_t T = 4096, H = 7168;
    c.hier_min = 1u << 20;
    struct mki_op_plan md_ = plan(&c, NULL, MKI_OP_MOE_DISPATCH, T, H, 8);
    CHECK(md_.fused == 0 && strstr(md_.reason, "across 2 nodes") != NULL);
    CHECK(md_.inter_bytes == T * H * 2 * (2 - 1));
    CHECK(md_.intra_bytes == T * H * 2 * 7 * 2);
    struct mki_op_plan mc = plan(&c, NULL, MKI_OP_MOE_COMBINE, T, H, 8);
    CHECK(mc.fused == 0 && mc.inter_bytes == 2 * md_.inter_bytes);
    struct mki_op_plan ml = plan(&c, NULL, MKI_OP_MOE_LAYER, T, H, 8);
    CHECK(ml.inter_bytes == md_.inter_bytes + mc.inter_bytes);
    /* one node of 8: the kernel, every byte over NVLink */
    struct mki_plan_ctx one = c;
    one.nranks = one.local_size = 8;
    one.nnodes = 1;
    struct mki_op_plan m1 = plan(&one, NULL, MKI_OP_MOE_DISPATCH, T, H, 8);
    CHECK(m1.fused == 1 && m1.inter_bytes == 0 && m1.intra_bytes > 0);
    /* flat collectives (MK_COLL_HIER_MIN 0): every rank's blocks to every
     * rank, L times the bytes across */
    c.hier_min = 0;
    struct mki_op_plan mf = plan(&c, NULL, MKI_OP_MOE_DISPATCH, T, H, 8);
    CHECK(mf.inter_bytes == 8 * md_.inter_bytes);
    /* Ranks sharing a GPU: the budget bounds the grid. */
    c.sm_budget = 66;
    struct mki_op_plan half = plan(&c, NULL, MKI_OP_AG_GEMM, 16384, 8192, 8192);
    CHECK(half.ctas <= 66 && half.split.compute >= 1);
}

static void overrides(void)
{
    struct mki_plan_ctx c = h200x2();
    struct mki_split_ovr o[MKI_OP_COUNT];
    CHECK_RES(mki_split_parse("ag_gemm:intra=16,ag_gemm:mover=ce,chunk=1M", "MK_SM_SPLIT", o),
              mkSuccess);
    struct mki_op_plan p = plan(&c, &o[MKI_OP_AG_GEMM], MKI_OP_AG_GEMM, 8192, 8192,
                                8192);
    CHECK(p.split.intra == 16 && p.split.compute == 116 && p.mover == MKI_MOVER_CE);
    /* chunk=1M is 64 rows of A: rounded up to one 128-row tile. */
    CHECK(p.chunk_rows == 128 && p.chunk_bytes == 128 * 8192 * 2);
    CHECK(p.overridden & MKI_OVR_INTRA);
    /* Unscoped keys apply to every op; scoped ones win whatever the order. */
    CHECK_RES(mki_split_parse("gemm_rs:intra=4,intra=24,fused=0", "MK_SM_SPLIT", o),
              mkSuccess);
    CHECK(o[MKI_OP_GEMM_RS].split.intra == 4 && o[MKI_OP_GEMM_AR].split.intra == 24);
    p = plan(&c, &o[MKI_OP_AG_GEMM], MKI_OP_AG_GEMM, 8192, 8192, 8192);
    CHECK(p.fused == 0 && p.split.intra == 24);
    CHECK_CONTAINS(p.reason, "fused=0");
    /* An unscoped copy-engine mover skips the ops that must add. */
    CHECK_RES(mki_split_parse("mover=ce", "MK_SM_SPLIT", o), mkSuccess);
    CHECK(o[MKI_OP_AG_GEMM].mover == MKI_MOVER_CE &&
          !(o[MKI_OP_GEMM_RS].set & MKI_OVR_MOVER));
    /* compute given: intra takes the rest. */
    CHECK_RES(mki_split_parse("gemm_rs:compute=100", "MK_SM_SPLIT", o), mkSuccess);
    p = plan(&c, &o[MKI_OP_GEMM_RS], MKI_OP_GEMM_RS, 8192, 8192, 8192);
    CHECK(p.split.compute == 100 && p.ctas <= 132);
    /* More CTAs than SMs. */
    CHECK_RES(mki_split_parse("compute=120,intra=20", "MK_SM_SPLIT", o), mkSuccess);
    struct mki_op_plan q;
    CHECK_RES(mki_plan_model(md, &c, &o[MKI_OP_AG_GEMM], MKI_OP_AG_GEMM, 8192,
                             8192, 8192, 2, &q), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "132 SMs");
}

static void bad_input(void)
{
    struct mki_split_ovr o[MKI_OP_COUNT];
    static const char *bad[] = {
        "intra", "intra=", "intra=x", "intra=-1", "foo=3", "gemm:intra=3",
        "gemm_rs:mover=ce", "mover=dma", "fused=2", "chunk=12", "=4",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_RES(mki_split_parse(bad[i], "MK_SM_SPLIT", o), mkErrInvalidArgument);
        CHECK_CONTAINS(mki_thread_error(), "MK_SM_SPLIT");
    }
    CHECK_RES(mki_split_parse("gemm_rs:mover=ce", "MK_SM_SPLIT", o),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "cannot");
    /* mkAllGatherGemm's fused kernel has only the copy engine. */
    CHECK_RES(mki_split_parse("ag_gemm:mover=tma", "MK_SM_SPLIT", o),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "copy engine only");
    CHECK_RES(mki_split_parse("mover=reg", "MK_SM_SPLIT", o), mkSuccess);
    CHECK(!(o[MKI_OP_AG_GEMM].set & MKI_OVR_MOVER) &&
          o[MKI_OP_ALLGATHER].mover == MKI_MOVER_REG);
    CHECK_RES(mki_split_parse("", "MK_SM_SPLIT", o), mkSuccess);

    enum mki_transport t[MKI_TR_COUNT];
    int n = 0;
    CHECK_RES(mki_transport_list("^efa", "MK_TRANSPORT", t, &n), mkSuccess);
    CHECK(n == 2 && t[0] == MKI_TR_IBVERBS && t[1] == MKI_TR_SOCKET);
    CHECK_RES(mki_transport_list("socket,IBVERBS", "MK_TRANSPORT", t, &n), mkSuccess);
    CHECK(n == 2 && t[0] == MKI_TR_SOCKET && t[1] == MKI_TR_IBVERBS);
    CHECK_RES(mki_transport_list("tcp", "MK_TRANSPORT", t, &n), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "\"tcp\"");
    CHECK_RES(mki_transport_list("^ibverbs,efa,socket", "MK_TRANSPORT", t, &n),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "leaves no transport");
    CHECK_RES(mki_transport_list("", "MK_TRANSPORT", t, &n), mkErrInvalidArgument);

    /* Bad shapes name the argument. */
    struct mki_plan_ctx c = h200x2();
    struct mki_op_plan p;
    CHECK_RES(mki_plan_model(md, &c, NULL, MKI_OP_AG_GEMM, 0, 8, 8, 2, &p),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "m = 0");
    CHECK_RES(mki_plan_model(md, &c, NULL, MKI_OP_AG_GEMM, 8, 8, 8, 3, &p),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "dtype_bytes");
    CHECK_RES(mki_plan_model(md, &c, NULL, (enum mki_op)99, 8, 8, 8, 2, &p),
              mkErrInvalidArgument);

    /* The communicator's config rejects both at mkCommInit time. */
    struct mki_config r;
    setenv("MK_SM_SPLIT", "intra=lots", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_SM_SPLIT=\"intra=lots\"");
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.smSplit = "ag_gemm:intra=8"; /* the config field wins */
    CHECK_RES(mki_config_resolve(&cfg, NULL, &r), mkSuccess);
    CHECK(!strcmp(r.smSplit, "ag_gemm:intra=8"));
    cfg.smSplit = "ag_gemm:intra";
    CHECK_RES(mki_config_resolve(&cfg, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "config->smSplit");
    unsetenv("MK_SM_SPLIT");
    setenv("MK_TRANSPORT", "ibverbs,rdma", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "unknown transport \"rdma\"");
    unsetenv("MK_TRANSPORT");
}

/* mkRingAttention's plan knows head_dim and the mask: the busiest rank's
 * FLOPs (half under zigzag, (P - 1/2) / P under plain causal) at the rate
 * of that head_dim and mask; bad ones are refused, and so is a head_dim
 * for another op. */
static void attention(void)
{
    struct mki_plan_ctx c = h200x2();
    struct mki_op_plan p[4];
    const struct mki_plan_attn a[4] = {{128, 0}, {128, 2}, {128, 1}, {64, 0}};
    for (int i = 0; i < 4; i++)
        CHECK_RES(mki_plan_model_attn(md, &c, NULL, MKI_OP_RING_ATTN, 16384, 4096, 1024, 2,
                                      &a[i], &p[i]), mkSuccess);
    struct mki_op_plan none;
    CHECK_RES(mki_plan_model(md, &c, NULL, MKI_OP_RING_ATTN, 16384, 4096, 1024, 2, &none),
              mkSuccess);
    CHECK(none.head_dim == 128 && none.mask == 0 && none.flops == p[0].flops &&
          none.t_compute_us == p[0].t_compute_us);
    CHECK(p[1].flops == p[0].flops / 2 && p[2].flops == p[0].flops * 0.75);
    CHECK(p[1].t_compute_us > p[0].t_compute_us / 2 && p[1].t_compute_us < p[0].t_compute_us);
    CHECK(p[3].flops == p[0].flops && p[3].t_compute_us > p[0].t_compute_us * 1.2);
    CHECK(p[0].fused && p[1].fused && p[3].head_dim == 64 && p[2].mask == 1);
    const struct mki_plan_attn bad[3] = {{96, 0}, {64, 3}, {128, -1}};
    for (int i = 0; i < 3; i++)
        CHECK_RES(mki_plan_model_attn(md, &c, NULL, MKI_OP_RING_ATTN, 64, 64, 64, 2, &bad[i],
                                      &none), mkErrInvalidArgument);
    CHECK_RES(mki_plan_model_attn(md, &c, NULL, MKI_OP_AG_GEMM, 64, 64, 64, 2, &a[0], &none),
              mkErrInvalidArgument);
}

static void names(void)
{
    for (int op = 0; op < MKI_OP_COUNT; op++)
        CHECK(mki_op_from_name(mki_op_name((enum mki_op)op)) == op);
    CHECK(mki_op_from_name("gemm") == -1);
}

int main(void)
{
    unsetenv("MK_SM_SPLIT");
    unsetenv("MK_TRANSPORT");
    directions();
    multinode();
    overrides();
    bad_input();
    attention();
    names();
    TEST_DONE();
}
