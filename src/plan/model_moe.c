/*
 * model_moe.c - the plan of the MoE calls (mkMoEDispatch, mkMoECombine,
 * mkMoEDispatchGemm, mkMoEDispatchFfnCombine): the CTAs and roles of
 * their kernels and what runs across nodes.  Their bytes and times are
 * the cost model's (model.c); the experts' GEMMs are modelled here when
 * the experts and the GEMM's columns are given (mki_plan_model_moe).
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "ops/moe.h"
#include "plan/plan.h"

void mki_plan_moe(const struct mki_model *md, const struct mki_plan_ctx *c,
                  const struct mki_split_ovr *o, enum mki_op op, int budget,
                  struct mki_op_plan *p)
{
    if (c->nnodes == 1 && p->intra_bytes > 0 &&
        (op == MKI_OP_MOE_DISPATCH || op == MKI_OP_MOE_COMBINE)) {
        /* their kernels' measured terms: the dispatch's rows that cross,
         * the combine's every slot's row (local or remote), each with a
         * fixed cost of its own beyond the common one */
        const double rows = (double)(int64_t)((double)p->m * (double)p->n * p->dtype_bytes *
                                              (double)p->k);
        p->t_intra_us = op == MKI_OP_MOE_DISPATCH
                            ? (double)p->intra_bytes / (md->moe_send_gbs * 1e3)
                            : rows / (md->moe_pull_gbs * 1e3);
        p->t_fused_us = p->t_unfused_us =
            p->t_intra_us + (op == MKI_OP_MOE_DISPATCH ? md->moe_dispatch_us : md->moe_combine_us) +
            md->fused_overhead_us + md->peer_latency_us * (c->local_size - 1);
    }
    /* one kernel whose CTAs take every role in turn (count, send,
     * unpack; stage, pull): all the SMs of the rank, or MK_SM_SPLIT's
     * intra count */
    memset(&p->split, 0, sizeof(p->split));
    const int ovr = o && (o->set & MKI_OVR_INTRA) && o->split.intra > 0;
    p->split.intra = ovr ? o->split.intra : budget;
    p->ctas = p->split.intra;
    if (op == MKI_OP_MOE_DISPATCH_GEMM || op == MKI_OP_MOE_LAYER) {
        /* the GEMM engine's launch on the rank's SMs, its first CTAs
         * dispatching (kernels/ops/moe.h); the layer's first kernel */
        p->split.intra = ovr ? (o->split.intra < MKI_MOE_FUSED_MAXD ? o->split.intra
                                                                    : MKI_MOE_FUSED_MAXD)
                             : mki_moe_gemm_dctas(budget);
        p->split.compute = budget > p->split.intra ? budget - p->split.intra : 0;
        p->ctas = budget;
    }
    p->mover = MKI_MOVER_REG;
    p->fused = c->nnodes == 1;
    if (c->nnodes > 1)
        snprintf(p->reason, sizeof(p->reason), "across %d nodes a sequence on the stream: "
                 "all-gathers and routing kernels%s", c->nnodes,
                 op == MKI_OP_MOE_COMBINE ? " and a reduce-scatter of fp32 sums"
                 : op == MKI_OP_MOE_LAYER ? ", the two grouped GEMMs, a reduce-scatter of "
                                            "fp32 sums"
                 : op == MKI_OP_MOE_DISPATCH_GEMM ? ", the grouped GEMM" : "");
    else
        snprintf(p->reason, sizeof(p->reason), "one persistent kernel on %d SMs%s", p->ctas,
                 op == MKI_OP_MOE_DISPATCH_GEMM ? " (the dispatch's CTAs first)"
                 : op == MKI_OP_MOE_LAYER ? " (the first of two launches, the dispatch's "
                                            "CTAs first)" : "");
}

/* One rank's grouped GEMM of the MoE calls (mki_plan_model_moe): its
 * groups' tiles at the GEMM rate times moe_gemm_eff, over budget CTAs. */
static double moe_gemm_us(const struct mki_model *md, double mu, double groups, int64_t n,
                          int64_t k, int budget)
{
    if (mu <= 0 || groups <= 0 || n <= 0 || k <= 0 || budget <= 0) return 0;
    /* a group's M-blocks: its mean rows' worth and, on average, half a
     * block more for its partial last one (at least one if it has rows) */
    double per = mu / md->tile_m + 0.5;
    if (per < 1 && mu >= 1) per = 1;
    const double tiles = groups * per * (double)((n + md->tile_n - 1) / md->tile_n);
    const double tile_us = 2.0 * md->tile_m * md->tile_n * (double)k /
                           (md->gemm_tflops * md->moe_gemm_eff * 1e6 / md->sm_count);
    return tiles * tile_us / budget;
}

mkResult_t mki_plan_model_moe(const struct mki_model *md, const struct mki_plan_ctx *c,
                              const struct mki_split_ovr *o, enum mki_op op, int64_t m,
                              int64_t n, int64_t k, int e, const struct mki_plan_moe_shape *moe,
                              struct mki_op_plan *out)
{
    if (moe && op != MKI_OP_MOE_DISPATCH_GEMM && op != MKI_OP_MOE_LAYER)
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: experts and the GEMM's columns "
                         "are for moe_dispatch_gemm and moe_layer only", mki_op_name(op));
    if (moe && (moe->experts < c->nranks || moe->experts % c->nranks || moe->gemm_n < 1 ||
                (op == MKI_OP_MOE_LAYER && moe->gemm_n % 2)))
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: %lld experts, GEMM columns "
                         "%lld; give experts a multiple of the %d ranks and columns >= 1 (the "
                         "layer's: 2 x inter)", mki_op_name(op), (long long)moe->experts,
                         (long long)moe->gemm_n, c->nranks);
    MKI_CHECK(mki_plan_model(md, c, o, op, m, n, k, e, out));
    if (!moe || c->nnodes != 1) return mkSuccess;
    /* uniform routing: every rank's m tokens, k slots each, spread over
     * the experts; this rank's experts / ranks groups */
    const int budget = c->sm_budget > 0 ? c->sm_budget : c->sm_count;
    const double L = c->local_size, mu = L * (double)m * (double)k / (double)moe->experts;
    const double groups = (double)moe->experts / c->nranks;
    struct mki_op_plan d, cb;
    /* the dispatch's and the combine's own models (not the layer's overrides) */
    MKI_CHECK(mki_plan_model(md, c, NULL, MKI_OP_MOE_DISPATCH, m, n, k, e, &d));
    double gemm = moe_gemm_us(md, mu, groups, moe->gemm_n, n, budget);
    double after = 0, after_unfused = 0;
    if (op == MKI_OP_MOE_LAYER) {
        /* the down projection (hidden columns, inter deep) and the
         * combine after both: in the layer's launch a local sum of every
         * slot's row, which the down projection pushed to the token's rank
         * while it computed (kernels/ops/moe.h); unfused mkMoECombine's */
        gemm += moe_gemm_us(md, mu, groups, n, moe->gemm_n / 2, budget);
        MKI_CHECK(mki_plan_model(md, c, NULL, MKI_OP_MOE_COMBINE, m, n, k, e, &cb));
        after = (double)m * (double)k * (double)n * (double)e / (md->moe_sum_gbs * 1e3) +
                md->moe_combine_us;
        after_unfused = cb.t_fused_us;
    }
    out->flops = 2.0 * mu * groups * (double)n * (double)moe->gemm_n *
                 (op == MKI_OP_MOE_LAYER ? 1.5 : 1.0);
    out->t_compute_us = gemm;
    /* the dispatch hidden under the GEMM but for its fixed cost; unfused:
     * the dispatch, then the GEMMs */
    out->t_fused_us = gemm + md->moe_dispatch_us + md->fused_overhead_us +
                      md->peer_latency_us * (c->local_size - 1) + after;
    out->t_unfused_us = d.t_fused_us + gemm + md->launch_us + after_unfused;
    return mkSuccess;
}
