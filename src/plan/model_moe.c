/*
 * model_moe.c - the plan of the MoE calls (mkMoEDispatch, mkMoECombine,
 * mkMoEDispatchGemm, mkMoEDispatchFfnCombine): the CTAs and roles of
 * their kernels and what runs across nodes.  Their bytes and times are
 * the cost model's (model.c); the experts' GEMMs are not modelled.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "ops/moe.h"
#include "plan/plan.h"

void mki_plan_moe(const struct mki_plan_ctx *c, const struct mki_split_ovr *o, enum mki_op op,
                  int budget, struct mki_op_plan *p)
{
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
