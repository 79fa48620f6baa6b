/*
 * moe_int.h - what src/ops/moe.c (the MoE calls, one node) and
 * src/ops/moe_net.c (their sequence across nodes) share: the op's state
 * and one call's arguments.  Private to those two files.
 */
#ifndef MKI_OPS_MOE_INT_H
#define MKI_OPS_MOE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "mkernel.h"
#include "mem/heap.h"
#include "ops/op.h"
#include "plan/plan.h"

struct moe_state {
    struct mki_shape_cache shapes;
    struct mki_heap_blk ctl;        /* struct mki_moe_ctl */
    struct mki_heap_blk rec;        /* P records of MKI_MOE_REC_WORDS_FUSED(MAXE, MAXD) */
    struct mki_heap_blk inbox;      /* rows, then metadata */
    struct mki_heap_blk stage;      /* the combine's rows */
    int nretired_inbox, nretired_stage;
    void *scratch;                  /* local: a record per CTA */
    size_t scratch_bytes;
    void *rows;                     /* mkMoEDispatchGemm: the received rows */
    size_t rows_bytes;
    void *table;                    /* mkMoEDispatchGemm: the grouped GEMM's table */
    size_t table_bytes;
    void *table_set;                /* the table whose first words were cleared */
    void *ready;                    /* mkMoEDispatchGemm: rows in place per local expert */
    size_t ready_bytes;
    void *order;                    /* mkMoEDispatchGemm: the dispatch CTAs' sorted pairs */
    size_t order_bytes;
    /* mkMoEDispatchFfnCombine: the intermediate rows, the experts' output
     * rows, the down projection's table, and the dispatch's layout */
    void *hrows, *yrows, *table2, *loff, *lsend, *lsrc;
    size_t hrows_bytes, yrows_bytes, table2_bytes, loff_bytes, lsend_bytes, lsrc_bytes;
    /* across nodes (moe.h): this rank's padded tokens and metadata, the
     * gathered ones, the routing's counts, layout and state, the
     * combine's partial sums and this rank's reduced ones */
    void *nx, *nmeta, *gx, *gmeta, *hist, *start, *src_of, *nstate, *partial, *red;
    size_t nx_bytes, nmeta_bytes, gx_bytes, gmeta_bytes, hist_bytes, start_bytes,
        src_of_bytes, nstate_bytes, partial_bytes, red_bytes;
    uint64_t net_calls;             /* calls across nodes (error records) */
    int64_t net_tmax;               /* the last exchange's largest token count */
    struct mki_op_bufs bufs;
};

struct moe_call {
    int combine;
    int gemm;                       /* mkMoEDispatchGemm */
    int layer;                      /* mkMoEDispatchFfnCombine */
    int of_layer;                   /* a launch of it: its plan and its name in errors */
    int net;                        /* across nodes: the sequence of moe.h */
    int same_tokens;                /* the layer's combine: its dispatch's tokens, so its
                                     * largest count too (no second exchange) */
    const void *w_mat;              /* its weights (the layer's W13) */
    const void *w2;                 /* the layer's W2 */
    int64_t n;                      /* its output columns (the layer's inter) */
    int64_t glu;                    /* the GEMM's gated unit: its columns (0: none) */
    const void *a_in;               /* the GEMM's A when not the received rows */
    const struct moe_call *down;    /* the layer's first kernel: its down projection, run in
                                     * the same launch where it can (then *down_done = 1) */
    int *down_done;
    int staged;                     /* the layer: the down projection's output (y_out) is
                                     * this rank's combine stage; its combine: y is staged
                                     * and announced already */
    void *y_out;                    /* its output (y, as the caller gave it) */
    int trans_w;
    const char *func;
    const void *x, *y;
    const int32_t *idx;
    const float *w;
    void *recv, *out;
    float *recv_w;
    int32_t *recv_src, *send_rows;
    int64_t *off;
    const int64_t *off_in;          /* combine: the dispatch's expert_offsets */
    int64_t tokens, hidden, topk, experts, cap;
    mkDataType_t dtype;
    int es;
};

/* The grouped GEMM of the received rows (or c->a_in) into c->y_out, on the
 * rank's SMs (moe.c). */
mkResult_t mki_moe_run_gemm(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                            const struct mki_op_plan *pl);
/* One call on a communicator that spans nodes (moe_net.c; kernels/ops/moe.h,
 * "across nodes"). */
mkResult_t mki_moe_run_net(struct mki_call *k, struct moe_state *g, struct moe_call *c);

#endif /* MKI_OPS_MOE_INT_H */
