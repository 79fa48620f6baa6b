/*
 * moe.c - mkMoEDispatch and mkMoECombine: validate -> plan -> launch one
 * persistent kernel (protocol and device side: kernels/ops/moe.{h,cu}).
 *
 * Resources: a control block and the ranks' count records (made with the
 * communicator: every rank alike), and two banks grown with the shape
 * (recv_capacity rows): the dispatch's inbox (rows and their metadata)
 * and the combine's stage.  A local scratch holds a record per CTA.
 * Nothing here waits for the device (the call numbers live on the
 * device), so calls may be captured in a CUDA graph.  The kernels reach
 * the peers' heaps through CUDA IPC, so they serve one node whose local
 * ranks are in communicator order.  Otherwise each call runs as a
 * sequence on the stream, in device buffers of its own, not the banks
 * (moe_net.c; moe.h, "across nodes"): the token counts exchanged through
 * the bootstrap, mkAllGather of the tokens and routing, every rank routing
 * them alike, and for the combine mkReduceScatter of each rank's fp32
 * sums.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gemm.h"
#include "mki.h"
#include "mem/mem.h"
#include "ops/moe.h"
#include "ops/moe_int.h"
#include "ops/op.h"
#include "plan/plan.h"

#define DISPATCH_FUNC "mkMoEDispatch"
#define COMBINE_FUNC "mkMoECombine"
#define DGEMM_FUNC "mkMoEDispatchGemm"
#define LAYER_FUNC "mkMoEDispatchFfnCombine"


static mkResult_t moe_create(struct mkComm *comm, void **state)
{
    if (!comm->dev) return mkSuccess;
    struct moe_state *g = calloc(1, sizeof(*g));
    if (!g) return mki_error(comm, mkErrNoMemory, "out of host memory");
    *state = g;
    MKI_CHECK(mki_heap_alloc(comm, 0, sizeof(struct mki_moe_ctl), 1,
                             "the MoE calls' control block", &g->ctl));
    return mki_heap_alloc(comm, 0,
                          (uint64_t)comm->dev->nlocal *
                              MKI_MOE_REC_WORDS_FUSED(MKI_MOE_MAXE, MKI_MOE_FUSED_MAXD) * 4u,
                          0, "the MoE calls' count records", &g->rec);
}

static void moe_destroy(struct mkComm *comm, void *state)
{
    struct moe_state *g = state;
    if (!g) return;
    if (comm->dev && !comm->dev->aborted) {
        if (g->scratch) (void)cudaFree(g->scratch);
        if (g->rows) (void)cudaFree(g->rows);
        if (g->table) (void)cudaFree(g->table);
        if (g->ready) (void)cudaFree(g->ready);
        if (g->order) (void)cudaFree(g->order);
        void *own[] = {g->hrows, g->yrows, g->table2, g->loff, g->lsend, g->lsrc, g->nx, g->nmeta,
                       g->gx, g->gmeta, g->hist, g->start, g->src_of, g->nstate, g->partial,
                       g->red};
        for (unsigned i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            if (own[i]) (void)cudaFree(own[i]);
        mki_op_bufs_free(&g->bufs);
    }
    free(g); /* its heap blocks go with the heap */
}

static int moe_preload(char *msg, size_t len) { return mki_moe_preload(msg, len); }

const struct mki_op_desc mki_op_moe = {
    "the MoE calls", NULL, moe_create, moe_destroy, moe_preload,
};

/* ---- one call --------------------------------------------------------- */


struct moe_shape {
    int32_t ok, dtype, has_w, trans_w;
    int64_t hidden, topk, experts, cap, n;
};

/* mkMoEDispatchFfnCombine's own arguments (n: inter). */
static mkResult_t check_layer(struct mkComm *comm, const struct moe_call *c)
{
    const char *f = c->func;
    const int64_t T = c->tokens, el = c->experts / comm->nranks;
    if (T > 0 && (!c->x || !c->idx || !c->out))
        return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass device memory", f,
                         !c->x ? "x" : !c->idx ? "topk_idx" : "out");
    if (c->n <= 0 || c->n % 8 != 0 || c->n > (1ll << 24))
        return mki_error(comm, mkErrInvalidArgument, "%s: inter = %lld; give a positive "
                         "multiple of 8 up to 2^24 (the intermediate rows are stored in 16-byte "
                         "pieces)", f, (long long)c->n);
    if (c->trans_w != 0 && c->trans_w != 1)
        return mki_error(comm, mkErrInvalidArgument, "%s: transW = %d; give 1 (W13 holds 2 "
                         "inter x hidden and W2 hidden x inter per expert) or 0 (their "
                         "transposes)", f, c->trans_w);
    if (!c->trans_w && (c->hidden % 64 != 0 || c->n % 64 != 0))
        return mki_error(comm, mkErrInvalidArgument, "%s: hidden = %lld and inter = %lld with "
                         "transW = 0 must be multiples of 64 (pass the weights as stored "
                         "Linear weights, transW = 1)", f, (long long)c->hidden,
                         (long long)c->n);
    if (c->dtype == mkFloat32)
        return mki_error(comm, mkErrUnsupported, "%s: dtype mkFloat32: the GEMMs take "
                         "mkBfloat16 or mkFloat16", f);
    if ((double)el * 2.0 * (double)c->n * (double)c->hidden * c->es > (double)(1ull << 40) ||
        (double)c->cap * (double)(2 * c->hidden + c->n) * c->es > (double)(1ull << 40) ||
        (double)el * 2.0 * (double)(c->trans_w ? c->n : c->hidden) > 2147483647.0 ||
        (double)el * (double)(c->trans_w ? c->hidden : c->n) > 2147483647.0)
        return mki_error(comm, mkErrInvalidArgument, "%s: %lld experts of hidden %lld and "
                         "inter %lld, or %lld rows, is too large; split the call", f,
                         (long long)el, (long long)c->hidden, (long long)c->n,
                         (long long)c->cap);
    if (!c->w_mat || !c->w2)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass the local experts' "
                         "weights", f, !c->w_mat ? "W13" : "W2");
    return mkSuccess;
}

static mkResult_t check_sizes(struct mkComm *comm, struct moe_call *c)
{
    const char *f = c->func;
    c->es = mki_dtype_bytes(c->dtype);
    if (c->es == 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: dtype = %d is not a mkDataType_t; "
                         "use mkBfloat16, mkFloat16 or mkFloat32", f, (int)c->dtype);
    const int P = comm->nranks;
    if (c->tokens < 0 || c->cap < 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: tokens = %lld, recv_capacity = "
                         "%lld; neither may be negative", f, (long long)c->tokens,
                         (long long)c->cap);
    if (c->hidden <= 0 || c->hidden % 8 != 0 || c->hidden > (1ll << 24))
        return mki_error(comm, mkErrInvalidArgument, "%s: hidden = %lld; give a positive "
                         "multiple of 8 up to 2^24 (rows are moved in 16-byte pieces)", f,
                         (long long)c->hidden);
    if (c->topk < 1 || c->topk > MK_MOE_MAX_TOPK)
        return mki_error(comm, mkErrInvalidArgument, "%s: topk = %lld; give 1 to %d", f,
                         (long long)c->topk, MK_MOE_MAX_TOPK);
    if (c->experts < 1 || c->experts > MK_MOE_MAX_EXPERTS || c->experts % P != 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: experts = %lld; give a multiple of "
                         "the %d ranks, at most %d (experts are spread evenly over the ranks)",
                         f, (long long)c->experts, P, MK_MOE_MAX_EXPERTS);
    if (c->tokens > INT32_MAX / c->topk)
        return mki_error(comm, mkErrInvalidArgument, "%s: tokens x topk = %lld x %lld is "
                         "over 2^31 - 1 slots; split the call", f, (long long)c->tokens,
                         (long long)c->topk);
    if (c->cap > INT32_MAX / MKI_MAXLOCAL)
        return mki_error(comm, mkErrInvalidArgument, "%s: recv_capacity = %lld is over "
                         "%d rows; split the call", f, (long long)c->cap,
                         INT32_MAX / MKI_MAXLOCAL);
    if ((double)c->cap * (double)c->hidden * c->es > (double)(1ull << 40) ||
        (double)c->tokens * (double)c->hidden * c->es > (double)(1ull << 40))
        return mki_error(comm, mkErrInvalidArgument, "%s: %lld rows of %lld elements is over "
                         "1 TiB; split the call", f,
                         (long long)(c->cap > c->tokens ? c->cap : c->tokens),
                         (long long)c->hidden);
    const int64_t T = c->tokens;
    if (c->layer) return check_layer(comm, c);
    const struct { const char *name; const void *p; int need; } req[] = {
        {"x", c->x, !c->combine && T > 0},
        {"topk_idx", c->idx, T > 0},
        {"send_rows", c->send_rows, T > 0},
        {"expert_offsets", c->combine ? (const void *)c->off_in : (const void *)c->off, 1},
        {"recv", c->recv, !c->combine && !c->gemm && c->cap > 0},
        {"out", c->out, c->combine && T > 0}};
    for (unsigned i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (req[i].need && req[i].p == NULL)
            return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass device memory",
                             f, req[i].name);
    if (!c->combine && c->recv_w && !c->w)
        return mki_error(comm, mkErrInvalidArgument, "%s: recv_weights is given but "
                         "topk_weights is NULL; pass both or neither", f);
    if (!c->gemm) return mkSuccess;
    const int64_t el = c->experts / P;
    if (c->n <= 0 || c->n % 8 != 0 || c->n > (1ll << 24))
        return mki_error(comm, mkErrInvalidArgument, "%s: n = %lld; give a positive multiple "
                         "of 8 up to 2^24 (the output rows are stored in 16-byte pieces)", f,
                         (long long)c->n);
    if (c->trans_w != 0 && c->trans_w != 1)
        return mki_error(comm, mkErrInvalidArgument, "%s: transW = %d; give 1 (W holds n x "
                         "hidden per expert) or 0 (hidden x n)", f, c->trans_w);
    if (!c->trans_w && c->hidden % 64 != 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: hidden = %lld with transW = 0 must be "
                         "a multiple of 64 (pass the weights as n x hidden, transW = 1)", f,
                         (long long)c->hidden);
    if (c->dtype == mkFloat32)
        return mki_error(comm, mkErrUnsupported, "%s: dtype mkFloat32: the GEMM takes "
                         "mkBfloat16 or mkFloat16", f);
    if ((double)el * (double)c->n * (double)c->hidden * c->es > (double)(1ull << 40) ||
        (double)c->cap * (double)c->n * c->es > (double)(1ull << 40) ||
        (double)el * (double)(c->trans_w ? c->n : c->hidden) > 2147483647.0)
        return mki_error(comm, mkErrInvalidArgument, "%s: %lld experts of %lld x %lld weights, "
                         "or %lld rows of %lld outputs, is too large; split the call", f,
                         (long long)el, (long long)c->n, (long long)c->hidden,
                         (long long)c->cap, (long long)c->n);
    if (c->w_mat == NULL)
        return mki_error(comm, mkErrInvalidArgument, "%s: W is NULL; pass the local experts' "
                         "weights", f);
    if (c->cap > 0 && c->y == NULL)
        return mki_error(comm, mkErrInvalidArgument, "%s: y is NULL; pass device memory of "
                         "recv_capacity x n elements", f);
    return mkSuccess;
}

/* Device pointers, alignment, and outputs that overlap anything. */
static mkResult_t check_device(struct mkComm *comm, const struct moe_call *c)
{
    const size_t T = (size_t)c->tokens, K = (size_t)c->topk, cap = (size_t)c->cap;
    const size_t rb = (size_t)c->hidden * (size_t)c->es;
    const size_t el = (size_t)(c->experts / comm->nranks);
    struct { const char *name; const void *p; size_t bytes, align; int out; } a[] = {
        {"x", c->x, T * rb, 16, 0},
        {"topk_idx", c->idx, T * K * 4, 4, 0},
        {"topk_weights", c->w, T * K * 4, 4, 0},
        {"recv", c->recv, cap * rb, 16, 1},
        {"recv_weights", c->recv_w, cap * 4, 4, 1},
        {"recv_src", c->recv_src, cap * 8, 4, 1},
        {"expert_offsets", c->combine ? (const void *)c->off_in : (const void *)c->off,
         (el + 1) * 8, 8, !c->combine},
        {"send_rows", c->send_rows, T * K * 4, 4, !c->combine},
        {"y", c->y, c->gemm ? cap * (size_t)c->n * (size_t)c->es : 16, 16, c->gemm},
        {c->layer ? "W13" : "W", c->w_mat,
         el * (size_t)c->n * (c->layer ? 2u : 1u) * rb, 16, 0},
        {"W2", c->w2, el * (size_t)c->n * rb, 16, 0},
        {"out", c->out, T * rb, 16, 1}};
    const int n = sizeof(a) / sizeof(a[0]);
    for (int i = 0; i < n; i++)
        if (a[i].p && a[i].bytes)
            MKI_CHECK(mki_check_dev_ptr(comm, c->func, a[i].name, a[i].p, a[i].align));
    for (int i = 0; i < n; i++) {
        if (!a[i].out || !a[i].p || !a[i].bytes) continue;
        for (int j = 0; j < n; j++)
            if (j != i && mki_overlap(a[i].p, a[i].bytes, a[j].p, a[j].bytes))
                return mki_error(comm, mkErrInvalidArgument, "%s: %s overlaps %s; every "
                                 "output needs memory of its own", c->func, a[i].name,
                                 a[j].name);
    }
    return mkSuccess;
}

static mkResult_t compare_shapes(struct mkComm *comm, const void *records, size_t rec,
                                 const void *ctx)
{
    const struct moe_shape *all = records, *me = &all[comm->rank];
    (void)rec;
    for (int r = 0; r < comm->nranks; r++) {
        const struct moe_shape *s = &all[r];
        const char *what = s->hidden != me->hidden ? "hidden" : s->topk != me->topk ? "topk"
                           : s->experts != me->experts ? "experts"
                           : s->cap != me->cap ? "recv_capacity"
                           : s->dtype != me->dtype ? "dtype"
                           : s->has_w != me->has_w ? "topk_weights (NULL on some ranks only)"
                           : s->n != me->n ? (strcmp((const char *)ctx, LAYER_FUNC) ? "n"
                                                                                   : "inter")
                           : s->trans_w != me->trans_w ? "transW"
                           : NULL;
        if (what)
            return mki_error(comm, mkErrInvalidArgument, "%s: rank %d passed hidden = %lld, "
                             "topk = %lld, experts = %lld, recv_capacity = %lld, dtype %d but "
                             "rank %d passed %lld, %lld, %lld, %lld, dtype %d: %s differs; "
                             "every rank must pass the same (tokens may differ)",
                             (const char *)ctx, r, (long long)s->hidden, (long long)s->topk,
                             (long long)s->experts, (long long)s->cap, s->dtype, comm->rank,
                             (long long)me->hidden, (long long)me->topk,
                             (long long)me->experts, (long long)me->cap, me->dtype, what);
    }
    return mkSuccess;
}

static mkResult_t agree(struct mkComm *comm, struct moe_state *g, const struct moe_call *c,
                        mkResult_t local)
{
    uint64_t h = 1469598103934665603ull;
    const int64_t v[11] = {c->hidden, c->topk, c->experts, c->cap, c->dtype, c->w != NULL,
                           c->combine, c->gemm, c->n, c->trans_w, c->layer};
    for (int i = 0; i < 11; i++) h = mki_hash64(h, (uint64_t)v[i]);
    struct moe_shape *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, "%s: out of host memory", c->func);
    all[comm->rank] = (struct moe_shape){0, (int32_t)c->dtype, c->w != NULL, c->trans_w,
                                         c->hidden, c->topk, c->experts, c->cap, c->n};
    mkResult_t r = mki_agree_shape(comm, g ? &g->shapes : NULL, c->func, h, all, sizeof(*all),
                                   local, compare_shapes, c->func);
    free(all);
    return r;
}

/* Before the stage is given back to the heap: every peer has pulled the
 * last combine from it (this rank's kernels are done: the stream was
 * synchronized; the peers' may still read). */
static mkResult_t wait_pulled(struct mki_call *k, struct moe_state *g)
{
    struct mkComm *comm = k->comm;
    if (!g->stage.bytes || k->capturing) return mkSuccess;
    cudaError_t e = cudaStreamSynchronize(k->stream);
    struct mki_moe_ctl ctl;
    const uint64_t t0 = mki_now_ns(), limit = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
    for (;;) {
        /* on the runtime's private stream: a plain cudaMemcpy would also
         * wait for the caller's other blocking streams */
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(&ctl, mki_heap_ptr(comm, &g->ctl, comm->dev->me), sizeof(ctl),
                                cudaMemcpyDeviceToHost, comm->dev->side);
        if (e == cudaSuccess) e = cudaStreamSynchronize(comm->dev->side);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return mki_error(comm, mkErrCuda, "%s: waiting for earlier calls: %s", k->func,
                             cudaGetErrorString(e));
        }
        int q = 0;
        while (q < comm->dev->nlocal &&
               (q == comm->dev->me || ctl.peer_pulled[q] >= ctl.ccalls))
            q++;
        if (q == comm->dev->nlocal) return mkSuccess;
        if (mki_now_ns() - t0 > limit)
            return mki_error(comm, mkErrTimeout, "%s: rank %d has not finished the last "
                             "mkMoECombine (it reads this rank's stage, which must grow)",
                             k->func, comm->dev->comm_rank[q]);
        const struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* The combine's stage, at least bytes (grown only once every peer has
 * pulled the last combine from it). */
static mkResult_t stage_bank(struct mki_call *k, struct moe_state *g, size_t bytes)
{
    if (g->stage.bytes < bytes) MKI_CHECK(wait_pulled(k, g));
    return mki_op_bank(k, &g->stage, bytes, &g->nretired_stage, "the MoE combine's stage");
}


/* The grouped GEMM of mkMoEDispatchGemm: every local expert's received
 * rows (the private buffer, expert_offsets) times its matrix of W into y,
 * within the rank's SMs. */
static void grouped_args(const struct mkComm *comm, const struct moe_state *g,
                         const struct moe_call *c, const struct mki_op_plan *pl,
                         mki_gemm_grouped_args *ga)
{
    memset(ga, 0, sizeof(*ga));
    ga->rows = c->cap;
    ga->n = c->n;
    ga->k = c->hidden;
    ga->glu = c->glu;
    ga->groups = c->experts / comm->nranks;
    ga->a = c->a_in ? c->a_in : g->rows;
    ga->b = c->w_mat;
    ga->d = c->y_out;
    ga->offsets = c->off;
    ga->table = c->a_in ? g->table2 : g->table;
    ga->in_type = (mki_dtype_t)c->dtype;
    ga->out_type = (mki_dtype_t)c->dtype;
    ga->trans_b = c->trans_w;
    ga->num_ctas = pl->sm_budget > 0 ? pl->sm_budget : 0;
}

/* mkMoEDispatchGemm's second launch: every local expert's rows (as the
 * dispatch laid them out and wrote expert_offsets) times its weights, one
 * grouped GEMM on the engine within the rank's SMs. */
mkResult_t mki_moe_run_gemm(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                            const struct mki_op_plan *pl)
{
    struct mkComm *comm = k->comm;
    const int64_t rows = c->cap;
    if (rows == 0) return mkSuccess; /* nothing can be received */
    const size_t tb = sizeof(int32_t) * (size_t)MKI_GEMM_GROUP_TABLE(rows, c->experts / comm->nranks);
    if (c->a_in)
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->table2, &g->table2_bytes, tb,
                             "the MoE down projection's table of groups"));
    else
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->table, &g->table_bytes, tb,
                             "the MoE GEMM's table of groups"));
    mki_gemm_grouped_args ga;
    grouped_args(comm, g, c, pl, &ga);
    /* this rank's abort and claim words: after a dispatch that stopped
     * (capacity, bad ids, a peer), expert_offsets are stale: no GEMM */
    ga.halt = (const uint64_t *)(comm->dev->heap.seg[0].base + MKI_CTL_ABORT);
    _Static_assert(MKI_CTL_CLAIM == MKI_CTL_ABORT + 8, "halt: the abort word, then the claim");
    struct mki_launch_desc dt, dg;
    char msg[512];
    const int rc = mki_gemm_grouped_describe(&ga, &dt, &dg, msg, sizeof(msg));
    if (rc != MKI_GEMM_OK)
        return mki_error(comm, rc == MKI_GEMM_ERR_INVALID ? mkErrInvalidArgument
                         : rc == MKI_GEMM_ERR_UNSUPPORTED ? mkErrUnsupported : mkErrCuda,
                         "%s: %s", c->func, msg);
    if (!dt.fn) return mkSuccess;
    MKI_CHECK(mki_launch(k, &dt));
    return mki_launch(k, &dg);
}

/* mkMoEDispatchGemm in one launch (moe.h): the GEMM engine's grid, its
 * first CTAs dispatching.  Returns mkSuccess with *done = 0 when the grid
 * is too small to split (the caller then makes the two launches). */
static mkResult_t run_fused(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                            const struct mki_op_plan *pl, struct mki_moe_params *p, int *done)
{
    struct mkComm *comm = k->comm;
    const int P = comm->dev->nlocal, EL = (int)(c->experts / comm->nranks);
    *done = 0;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->table, &g->table_bytes,
                         sizeof(int32_t) * (size_t)MKI_GEMM_GROUP_TABLE(c->cap, EL),
                         "the MoE GEMM's table of groups"));
    if (g->table_set != g->table) {
        /* a new table reads as no tiles until a call builds it */
        cudaError_t e = cudaMemsetAsync(g->table, 0, 2 * sizeof(int32_t), k->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return mki_error(comm, mkErrCuda, "%s: clearing the GEMM's table: %s", c->func,
                             cudaGetErrorString(e));
        }
        g->table_set = g->table;
    }
    const int ctas = pl->sm_budget > 0 ? pl->sm_budget : comm->dev->sm_count;
    const size_t tiles = (size_t)MKI_GEMM_GROUP_TABLE(c->cap, EL) / 2;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->ready, &g->ready_bytes,
                         sizeof(uint64_t) * (c->down ? mki_moe_layer_sched_words(EL, ctas, tiles)
                                                     : mki_moe_gemm_sched_words(EL, ctas)),
                         "the MoE GEMM's row counts and schedule"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->order, &g->order_bytes,
                         sizeof(int32_t) * (size_t)(c->tokens > 0 ? c->tokens : 1) * (size_t)P,
                         "the MoE dispatch's order of pairs"));
    p->ready = g->ready;
    p->order = g->order;
    p->table = g->table;
    mki_gemm_grouped_args ga;
    grouped_args(comm, g, c, pl, &ga);
    struct mki_launch_desc d;
    char msg[512];
    int dctas = 0;
    /* the plan's dispatch CTAs (a quarter of the SMs, or MK_SM_SPLIT's
     * intra count) */
    const int dmax = pl->split.intra > 0 ? pl->split.intra : 2;
    int rc = 1;
    if (c->down) {
        /* the layer: its down projection in the same launch, on the same
         * table */
        mki_gemm_grouped_args ga2;
        grouped_args(comm, g, c->down, pl, &ga2);
        ga2.table = g->table;
        p->staged = c->down->staged; /* its rows into the combine's stages (moe.h) */
        rc = mki_moe_layer_describe(p, &ga, &ga2, dmax, &d, &dctas, msg, sizeof(msg));
        if (rc == 0) *c->down_done = 1;
        else p->staged = 0;
    }
    if (rc == 1) rc = mki_moe_gemm_describe(p, &ga, dmax, &d, &dctas, msg, sizeof(msg));
    if (rc == 1) return mkSuccess;
    if (rc != 0)
        return mki_error(comm, rc == MKI_GEMM_ERR_INVALID ? mkErrInvalidArgument
                         : rc == MKI_GEMM_ERR_UNSUPPORTED ? mkErrUnsupported : mkErrCuda,
                         "%s: %s", c->func, msg);
    MKI_CHECK(mki_launch(k, &d));
    *done = 1;
    return mkSuccess;
}

static mkResult_t run(struct mki_call *k, struct moe_state *g, struct moe_call *c)
{
    if (c->net) return mki_moe_run_net(k, g, c);
    struct mkComm *comm = k->comm;
    const struct mki_devrt *dv = comm->dev;
    const int P = dv->nlocal;
    const uint64_t rb = (uint64_t)c->hidden * (uint64_t)c->es;
    const uint64_t cap = (uint64_t)c->cap ? (uint64_t)c->cap : 1;
    struct mki_op_plan pl;
    memset(&pl, 0, sizeof(pl));
    const enum mki_op op = c->of_layer ? MKI_OP_MOE_LAYER
                           : c->combine ? MKI_OP_MOE_COMBINE
                           : c->gemm  ? MKI_OP_MOE_DISPATCH_GEMM : MKI_OP_MOE_DISPATCH;
    MKI_CHECK(mki_plan_op(comm, op, c->tokens > 0 ? c->tokens : 1, c->hidden, c->topk, c->es,
                          &pl));
    const int grid = pl.ctas > 0 ? pl.ctas : 1;
    /* what this kernel uses: the dispatch's inbox and per-CTA counts, or
     * the combine's stage; the banks the same size on every rank (the
     * shapes agree, and every rank makes the same calls) */
    const uint64_t meta_off = cap * rb;
    if (!c->combine) {
        MKI_CHECK(mki_op_bank(k, &g->inbox, meta_off + cap * MKI_MOE_META_WORDS(c->topk) * 4u,
                              &g->nretired_inbox, "the MoE dispatch's inbox"));
        /* a record per CTA: the dispatch kernel's grid, or
         * mkMoEDispatchGemm's MKI_MOE_FUSED_MAXD of the fused stride (the
         * one kernel, or the two where the grid is too small to split) */
        size_t rec = (size_t)grid * MKI_MOE_REC_WORDS(c->experts);
        const size_t fused = (size_t)MKI_MOE_FUSED_MAXD *
                             MKI_MOE_REC_WORDS_FUSED(c->experts, MKI_MOE_FUSED_MAXD);
        if (c->gemm && fused > rec) rec = fused;
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->scratch, &g->scratch_bytes, rec * 4u,
                             "the MoE dispatch's per-CTA counts"));
    } else {
        MKI_CHECK(stage_bank(k, g, cap * rb));
    }
    struct mki_moe_params p;
    memset(&p, 0, sizeof(p));
    mki_rt_fill(comm, op, &p.rt);
    /* the inbox tags' high word (moe.h): the same on every rank of the
     * communicator, top bit set */
    p.tag_hi = (uint32_t)(comm->cookie ^ (comm->cookie >> 32)) | 0x80000000u;
    p.staged = c->staged;
    for (int l = 0; l < P; l++) {
        p.ctl[l] = (struct mki_moe_ctl *)mki_heap_ptr(comm, &g->ctl, l);
        p.rec[l] = (int32_t *)mki_heap_ptr(comm, &g->rec, l);
        p.inbox[l] = mki_heap_ptr(comm, &g->inbox, l);
        p.meta[l] = (int32_t *)(p.inbox[l] + meta_off);
        p.stage[l] = mki_heap_ptr(comm, &g->stage, l);
    }
    p.scratch = g->scratch;
    p.x = c->x;
    p.idx = c->idx;
    p.w = c->w;
    p.recv = c->recv;
    p.recv_w = c->recv_w;
    p.recv_src = c->recv_src;
    p.off = c->combine ? (int64_t *)c->off_in : c->off;
    p.send_rows = c->send_rows;
    p.y = c->y;
    p.out = c->out;
    p.tokens = c->tokens;
    p.hidden = c->hidden;
    p.cap = c->cap;
    p.row_bytes = (int64_t)rb;
    p.topk = (int32_t)c->topk;
    p.experts = (int32_t)c->experts;
    p.el = (int32_t)(c->experts / comm->nranks);
    p.dtype = (int32_t)c->dtype;
    p.P = P;
    p.me = dv->me;
    if (c->gemm) {
        /* the received rows stay here: local, read by this rank's GEMM only */
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->rows, &g->rows_bytes, (size_t)(cap * rb),
                             "the MoE GEMM's received rows"));
        p.recv = g->rows;
        if (c->cap > 0) {
            int done = 0;
            MKI_CHECK(run_fused(k, g, c, &pl, &p, &done));
            if (done) return mkSuccess;
        }
    }
    struct mki_launch_desc d;
    char msg[512];
    if (mki_moe_describe(&p, c->combine, grid, &d, msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrInternal, "%s: %s", c->func, msg);
    MKI_CHECK(mki_launch(k, &d));
    if (!c->gemm) return mkSuccess;
    return mki_moe_run_gemm(k, g, c, &pl);
}

/* mkMoEDispatchFfnCombine, in this version two launches on the stream:
 * mkMoEDispatchGemm's kernel with W13 and SwiGLU in its epilogue (into the
 * intermediate rows) extended by the grouped GEMM of the intermediate rows
 * with W2 (into the experts' output rows; a launch of its own where the
 * two cannot share one), and mkMoECombine's kernel; the layout
 * (expert_offsets, send_rows) stays here. */
static mkResult_t run_layer(struct mki_call *k, struct moe_state *g, const struct moe_call *c)
{
    struct mkComm *comm = k->comm;
    const int64_t el = c->experts / comm->nranks, I = c->n, H = c->hidden;
    const size_t cap = (size_t)(c->cap ? c->cap : 1), es = (size_t)c->es;
    const size_t slots = (size_t)(c->tokens > 0 ? c->tokens : 1) * (size_t)c->topk;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->hrows, &g->hrows_bytes, cap * (size_t)I * es,
                         "the MoE layer's intermediate rows"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->yrows, &g->yrows_bytes, cap * (size_t)H * es,
                         "the MoE layer's expert outputs"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->loff, &g->loff_bytes, sizeof(int64_t) * (size_t)(el + 1),
                         "the MoE layer's expert offsets"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->lsend, &g->lsend_bytes, sizeof(int32_t) * slots,
                         "the MoE layer's send rows"));
    /* each received row's (rank, slot): where the down projection pushes
     * it on one node (moe.h) */
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->lsrc, &g->lsrc_bytes, 2 * sizeof(int32_t) * cap,
                         "the MoE layer's row sources"));
    /* 1: dispatch + gate and up projections, SwiGLU */
    struct moe_call d = *c;
    d.layer = 0;
    d.of_layer = 1;
    d.gemm = 1;
    d.n = 2 * I;
    d.glu = I;
    d.y = d.y_out = g->hrows;
    d.off = g->loff;
    d.send_rows = g->lsend;
    d.recv_w = NULL;
    d.recv_src = NULL;
    /* 2: the down projection, within the rank's SMs like the first GEMM
     * (in the first kernel's launch where it can: then on one node its
     * rows go straight into the combine's stages, moe.h) */
    struct moe_call e = d;
    e.glu = 0;
    e.n = H;
    e.hidden = I; /* the GEMM's k */
    e.a_in = g->hrows;
    e.w_mat = c->w2;
    e.y_out = g->yrows;
    void *ystage = NULL;
    if (!c->net) {
        /* the combine's stage, as the combine asks for it (run) */
        MKI_CHECK(stage_bank(k, g, cap * (size_t)H * es));
        ystage = mki_heap_ptr(comm, &g->stage, comm->dev->me);
        e.y_out = ystage;
        e.staged = 1;
        d.recv_src = g->lsrc;
    }
    int down_done = 0;
    d.down = &e;
    d.down_done = &down_done;
    MKI_CHECK(run(k, g, &d));
    if (!down_done) {
        e.y_out = g->yrows;
        e.staged = 0;
        struct mki_op_plan pl;
        memset(&pl, 0, sizeof(pl));
        MKI_CHECK(mki_plan_op(comm, MKI_OP_MOE_LAYER, c->tokens > 0 ? c->tokens : 1, H,
                              c->topk, c->es, &pl));
        MKI_CHECK(mki_moe_run_gemm(k, g, &e, &pl));
    }
    /* 3: the combine */
    struct moe_call m = *c;
    m.layer = 0;
    m.of_layer = 1;
    m.combine = 1;
    m.same_tokens = 1;
    m.y = down_done && ystage ? ystage : g->yrows;
    m.staged = down_done && ystage;
    m.off_in = g->loff;
    m.send_rows = g->lsend;
    return run(k, g, &m);
}

static mkResult_t call_run(struct mki_call *k, struct moe_call *c)
{
    struct mkComm *comm = k->comm;
    mkResult_t local = check_sizes(comm, c);
    if (local == mkSuccess) local = k->res;
    if (local == mkSuccess) local = check_device(comm, c);
    if (local == mkSuccess && !comm->dev)
        local = mki_error(comm, mkErrUnsupported, "%s: the communicator has no device runtime",
                          c->func);
    /* the one-node kernels reach every rank's heap, local index == rank;
     * otherwise the sequence across nodes (moe.h) */
    c->net = local == mkSuccess && (comm->nnodes != 1 || comm->dev->nlocal != comm->nranks);
    for (int l = 0; local == mkSuccess && !c->net && l < comm->nranks; l++)
        c->net = comm->dev->comm_rank[l] != l;
    struct moe_state *g = mki_op_state(comm, &mki_op_moe);
    /* Every rank takes part in the shape check, even after a local error,
     * so that no rank is left waiting in it. */
    MKI_CHECK(agree(comm, g, c, local));
    return c->layer ? run_layer(k, g, c) : run(k, g, c);
}

/* Every entry point: the handle, the call, the device back. */
static mkResult_t moe_api(mkComm_t comm, cudaStream_t stream, enum mki_op op, struct moe_call *c)
{
    struct mki_call kc;
    MKI_CHECK(mki_call_enter(comm, op, stream, &kc));
    return mki_call_leave(&kc, call_run(&kc, c));
}

MK_API mkResult_t mkMoEDispatch(const void *x, const int32_t *topk_idx,
                                const float *topk_weights, void *recv, float *recv_weights,
                                int32_t *recv_src, int64_t *expert_offsets, int32_t *send_rows,
                                int64_t tokens, int64_t hidden, int64_t topk, int64_t experts,
                                int64_t recv_capacity, mkDataType_t dtype, mkComm_t comm,
                                cudaStream_t stream)
{
    struct moe_call c = {.func = DISPATCH_FUNC, .x = x, .idx = topk_idx, .w = topk_weights,
                         .recv = recv, .recv_w = recv_weights, .recv_src = recv_src,
                         .off = expert_offsets, .send_rows = send_rows, .tokens = tokens,
                         .hidden = hidden, .topk = topk, .experts = experts,
                         .cap = recv_capacity, .dtype = dtype};
    return moe_api(comm, stream, MKI_OP_MOE_DISPATCH, &c);
}

MK_API mkResult_t mkMoECombine(const void *y, const int64_t *expert_offsets,
                               const int32_t *topk_idx, const float *topk_weights,
                               const int32_t *send_rows, void *out, int64_t tokens,
                               int64_t hidden, int64_t topk, int64_t experts,
                               int64_t recv_capacity, mkDataType_t dtype, mkComm_t comm,
                               cudaStream_t stream)
{
    struct moe_call c = {.combine = 1, .func = COMBINE_FUNC, .y = y, .off_in = expert_offsets,
                         .idx = topk_idx, .w = topk_weights, .send_rows = (int32_t *)send_rows,
                         .out = out, .tokens = tokens, .hidden = hidden, .topk = topk,
                         .experts = experts, .cap = recv_capacity, .dtype = dtype};
    return moe_api(comm, stream, MKI_OP_MOE_COMBINE, &c);
}

MK_API mkResult_t mkMoEDispatchGemm(const void *x, const int32_t *topk_idx,
                                    const float *topk_weights, const void *W, void *y,
                                    float *recv_weights, int32_t *recv_src,
                                    int64_t *expert_offsets, int32_t *send_rows, int64_t tokens,
                                    int64_t hidden, int64_t n, int64_t topk, int64_t experts,
                                    int64_t recv_capacity, int transW, mkDataType_t dtype,
                                    mkComm_t comm, cudaStream_t stream)
{
    struct moe_call c = {.gemm = 1, .func = DGEMM_FUNC, .x = x, .idx = topk_idx,
                         .w = topk_weights, .w_mat = W, .y = y, .y_out = y,
                         .recv_w = recv_weights, .recv_src = recv_src, .off = expert_offsets,
                         .send_rows = send_rows, .tokens = tokens, .hidden = hidden, .n = n,
                         .topk = topk, .experts = experts, .cap = recv_capacity,
                         .trans_w = transW, .dtype = dtype};
    return moe_api(comm, stream, MKI_OP_MOE_DISPATCH_GEMM, &c);
}

MK_API mkResult_t mkMoEDispatchFfnCombine(const void *x, const int32_t *topk_idx,
                                          const float *topk_weights, const void *W13,
                                          const void *W2, void *out, int64_t tokens,
                                          int64_t hidden, int64_t inter, int64_t topk,
                                          int64_t experts, int64_t recv_capacity, int transW,
                                          mkDataType_t dtype, mkComm_t comm,
                                          cudaStream_t stream)
{
    struct moe_call c = {.layer = 1, .func = LAYER_FUNC, .x = x, .idx = topk_idx,
                         .w = topk_weights, .w_mat = W13, .w2 = W2, .out = out,
                         .tokens = tokens, .hidden = hidden, .n = inter, .topk = topk,
                         .experts = experts, .cap = recv_capacity, .trans_w = transW,
                         .dtype = dtype};
    return moe_api(comm, stream, MKI_OP_MOE_LAYER, &c);
}
