/*
 * moe_net.c - the MoE calls on a communicator that spans nodes: the
 * sequence of kernels/ops/moe.h ("across nodes") on the caller's stream.
 * The host exchanges the ranks' token counts through the bootstrap (the
 * collectives' sizes), makes every buffer before anything is enqueued,
 * then the library's collectives and the routing kernels of moe_net.cu
 * run in turn; nothing here waits for the device.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "mem/mem.h"
#include "ops/moe.h"
#include "ops/moe_int.h"
#include "ops/op.h"
#include "plan/plan.h"

static mkResult_t net_cuda(struct mki_call *k, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return mkSuccess;
    (void)cudaGetLastError();
    return mki_error(k->comm, mkErrCuda, "%s: %s: %s", k->func, what, cudaGetErrorString(e));
}

/* The largest token count of any rank (the bootstrap: a call across nodes
 * meets every rank here on the host). */
static mkResult_t net_tmax(struct mki_call *k, const struct moe_call *c, int64_t *tmax)
{
    struct mkComm *comm = k->comm;
    int64_t *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, "%s: out of host memory", c->func);
    all[comm->rank] = c->tokens;
    const mkResult_t r = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    *tmax = 0;
    for (int q = 0; r == mkSuccess && q < comm->nranks; q++)
        if (all[q] > *tmax) *tmax = all[q];
    free(all);
    if (r != mkSuccess) {
        /* the bootstrap's ring is out of step with the ranks that did
         * arrive: the communicator is broken, as a kernel's timeout would
         * leave it */
        mkResult_t e = mki_error(comm, r, "%s: exchanging the ranks' token counts failed "
                                 "(bootstrap allgather: %s); is every rank making this call? "
                                 "Destroy this communicator", c->func, mki_thread_error());
        mki_comm_set_async_error(comm, e);
        return e;
    }
    return mkSuccess;
}

/* The routing's chunks of S slots: at least MKI_MOE_NET_CHUNK slots each,
 * at most MKI_MOE_NET_MAXCHUNK of them (one for none); their count. */
static int64_t net_chunks(int64_t S, int64_t *chunk)
{
    *chunk = (S + MKI_MOE_NET_MAXCHUNK - 1) / MKI_MOE_NET_MAXCHUNK;
    if (*chunk < MKI_MOE_NET_CHUNK) *chunk = MKI_MOE_NET_CHUNK;
    return S > 0 ? (S + *chunk - 1) / *chunk : 1;
}

/* Every buffer of a call across nodes, before anything is enqueued (a
 * rank that fails here enqueues nothing).  The routing's blocks are sized
 * for the combine's three words per slot, the dispatch's two then fitting
 * (no second growth inside a capture); the state's first use is zeroed
 * (the combine's call count must start alike on every rank). */
static mkResult_t net_bufs(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                           int64_t tmax)
{
    struct mkComm *comm = k->comm;
    const size_t P = (size_t)comm->nranks, tk = (size_t)tmax * (size_t)c->topk;
    const size_t rb = (size_t)c->hidden * (size_t)c->es;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->nmeta, &g->nmeta_bytes, 3 * tk * 4 + 16,
                         "the MoE routing's block across nodes"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->gmeta, &g->gmeta_bytes, P * 3 * tk * 4 + 16,
                         "the MoE routing gathered across nodes"));
    const void *was = g->nstate;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->nstate, &g->nstate_bytes, (3 + P) * 8,
                         "the MoE routing's state"));
    if (g->nstate != was)
        MKI_CHECK(net_cuda(k, cudaMemsetAsync(g->nstate, 0, (3 + P) * 8, k->stream),
                           "clearing the MoE routing's state"));
    if (c->combine) {
        const size_t pstride = (size_t)tmax * (size_t)c->hidden + MKI_MOE_NET_FLAGS(P);
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->partial, &g->partial_bytes, P * pstride * 4,
                             "the MoE combine's partial sums"));
        return mki_op_buf(k, &g->bufs, &g->red, &g->red_bytes, pstride * 4,
                          "the MoE combine's sums");
    }
    const int64_t S = (int64_t)(P * tk);
    int64_t chunk;
    const int64_t nchunk = net_chunks(S, &chunk);
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->hist, &g->hist_bytes,
                         (size_t)nchunk * (size_t)(c->experts + 1) * 4, "the MoE routing's counts"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->start, &g->start_bytes, (size_t)c->experts * 4,
                         "the MoE routing's expert starts"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->src_of, &g->src_of_bytes,
                         (size_t)(c->cap > 0 ? c->cap : 1) * 8, "the MoE routing's sources"));
    if (tmax == 0) return mkSuccess;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->nx, &g->nx_bytes, (size_t)tmax * rb,
                         "the MoE tokens padded across nodes"));
    return mki_op_buf(k, &g->bufs, &g->gx, &g->gx_bytes, P * (size_t)tmax * rb,
                      "the MoE tokens gathered across nodes");
}

/* This rank's routing block, mwords words: topk_idx (-1 past its tokens),
 * then topk_weights, then (combine) send_rows, tmax * topk words each;
 * gathered into g->gmeta. */
static mkResult_t net_meta(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                           int64_t tmax, int64_t mwords)
{
    const size_t tk = (size_t)tmax * (size_t)c->topk, mine = (size_t)c->tokens * (size_t)c->topk;
    if (tk == 0) return mkSuccess;
    int32_t *m = g->nmeta;
    cudaError_t e = cudaSuccess;
    if (mine) e = cudaMemcpyAsync(m, c->idx, mine * 4, cudaMemcpyDeviceToDevice, k->stream);
    if (e == cudaSuccess && tk > mine)
        e = cudaMemsetAsync(m + mine, 0xff, (tk - mine) * 4, k->stream); /* -1: no expert */
    if (e == cudaSuccess && mine && c->w)
        e = cudaMemcpyAsync(m + tk, c->w, mine * 4, cudaMemcpyDeviceToDevice, k->stream);
    if (e == cudaSuccess && mine && c->combine)
        e = cudaMemcpyAsync(m + 2 * tk, c->send_rows, mine * 4, cudaMemcpyDeviceToDevice,
                            k->stream);
    /* the rest of the block is never read, but the all-gather moves it:
     * defined bytes (compute-sanitizer's initcheck) */
    const size_t wfrom = c->w ? mine : 0, sfrom = c->combine ? mine : tk;
    if (e == cudaSuccess && tk > wfrom)
        e = cudaMemsetAsync(m + tk + wfrom, 0, (tk - wfrom) * 4, k->stream);
    if (e == cudaSuccess && c->combine && tk > sfrom)
        e = cudaMemsetAsync(m + 2 * tk + sfrom, 0xff, (tk - sfrom) * 4, k->stream);
    MKI_CHECK(net_cuda(k, e, "packing the routing"));
    return mkAllGather(g->nmeta, g->gmeta, (size_t)mwords, mkFloat32, k->comm, k->stream);
}

static void net_params(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                       int64_t tmax, int64_t mwords, struct mki_moe_net_params *p)
{
    struct mkComm *comm = k->comm;
    memset(p, 0, sizeof(*p));
    mki_rt_fill(comm, c->of_layer ? MKI_OP_MOE_LAYER
                      : c->combine ? MKI_OP_MOE_COMBINE
                      : c->gemm ? MKI_OP_MOE_DISPATCH_GEMM : MKI_OP_MOE_DISPATCH, &p->rt);
    p->gmeta = g->gmeta;
    p->tmax = tmax;
    p->tokens = c->tokens;
    p->hidden = c->hidden;
    p->cap = c->cap;
    p->row_bytes = c->hidden * c->es;
    p->mwords = mwords;
    p->epoch = ++g->net_calls;
    p->topk = (int32_t)c->topk;
    p->experts = (int32_t)c->experts;
    p->el = (int32_t)(c->experts / comm->nranks);
    p->dtype = (int32_t)c->dtype;
    p->P = comm->nranks;
    p->me = comm->rank;
    p->has_w = c->w != NULL;
}

static mkResult_t net_launch(struct mki_call *k, const struct mki_moe_net_params *p, int which)
{
    struct mki_launch_desc d;
    char msg[256];
    if (mki_moe_net_describe(p, which, k->comm->dev->sm_count, &d, msg, sizeof(msg)) != 0)
        return mki_error(k->comm, mkErrInternal, "%s: %s", k->func, msg);
    return mki_launch(k, &d);
}

/* The dispatch across nodes: every rank's tokens and routing gathered,
 * routed alike on every rank, this rank's rows copied into recv (the
 * buffers made by net_bufs). */
static mkResult_t net_dispatch(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                               int64_t tmax, void *recv)
{
    struct mkComm *comm = k->comm;
    const int64_t tk = tmax * c->topk, S = (int64_t)comm->nranks * tk, mwords = 2 * tk;
    const size_t rb = (size_t)c->hidden * (size_t)c->es;
    int64_t chunk;
    const int64_t nchunk = net_chunks(S, &chunk);
    struct mki_moe_net_params p;
    net_params(k, g, c, tmax, mwords, &p);
    MKI_CHECK(net_meta(k, g, c, tmax, mwords));
    if (tmax > 0) {
        /* the all-gather sends tmax rows from every rank: this rank's
         * tokens always go through the padded buffer, which then reaches
         * its largest size with the largest call (no growth in a capture
         * after an uncaptured call of the largest shape) */
        if (c->tokens > 0)
            MKI_CHECK(net_cuda(k, cudaMemcpyAsync(g->nx, c->x, (size_t)c->tokens * rb,
                                                  cudaMemcpyDeviceToDevice, k->stream),
                               "copying the tokens"));
        MKI_CHECK(mkAllGather(g->nx, g->gx, (size_t)tmax * (size_t)c->hidden, c->dtype, comm,
                              k->stream));
    }
    p.gx = g->gx;
    p.hist = g->hist;
    p.start = g->start;
    p.src_of = g->src_of;
    p.state = g->nstate;
    p.recv = recv;
    p.recv_w = c->recv_w;
    p.recv_src = c->recv_src;
    p.off = c->off;
    p.send_rows = c->send_rows;
    p.chunk = chunk;
    p.nchunk = (int32_t)nchunk;
    for (int w = MKI_MOE_NET_COUNT; w <= MKI_MOE_NET_COPY; w++) MKI_CHECK(net_launch(k, &p, w));
    return mkSuccess;
}

/* The combine across nodes: the routing gathered, each rank's fp32 sums
 * of its experts' rows for every token, reduce-scattered, rounded (the
 * buffers made by net_bufs). */
static mkResult_t net_combine(struct mki_call *k, struct moe_state *g, const struct moe_call *c,
                              int64_t tmax)
{
    struct mkComm *comm = k->comm;
    const int P = comm->nranks;
    const int64_t tk = tmax * c->topk, mwords = 3 * tk;
    const size_t fl = MKI_MOE_NET_FLAGS(P), body = (size_t)tmax * (size_t)c->hidden;
    const size_t pstride = body + fl;
    struct mki_moe_net_params p;
    net_params(k, g, c, tmax, mwords, &p);
    p.y = c->y;
    p.off_in = c->off_in;
    p.partial = g->partial;
    p.red = g->red;
    p.out = c->out;
    p.pstride = (int64_t)pstride;
    p.state = (int64_t *)g->nstate + 2 + P; /* the combine's call count */
    MKI_CHECK(net_meta(k, g, c, tmax, mwords));
    /* every rank's flags cleared; each rank writes its own column */
    MKI_CHECK(net_cuda(k, cudaMemset2DAsync((float *)g->partial + body, pstride * 4, 0, fl * 4,
                                            (size_t)P, k->stream),
                       "clearing the combine's flags"));
    MKI_CHECK(net_launch(k, &p, MKI_MOE_NET_TICK));
    MKI_CHECK(net_launch(k, &p, MKI_MOE_NET_PARTIAL));
    MKI_CHECK(mkReduceScatter(g->partial, g->red, pstride, mkFloat32, comm, k->stream));
    return net_launch(k, &p, MKI_MOE_NET_CONVERT);
}

/* One call across nodes: the token counts (the layer's combine takes its
 * dispatch's, exchanged in the same call), every buffer, then the
 * sequence; mkMoEDispatchGemm: the dispatch into the private rows, then
 * the grouped GEMM (mki_moe_run_gemm). */
mkResult_t mki_moe_run_net(struct mki_call *k, struct moe_state *g, struct moe_call *c)
{
    struct mkComm *comm = k->comm;
    int64_t tmax = g->net_tmax;
    if (!c->same_tokens) MKI_CHECK(net_tmax(k, c, &tmax));
    g->net_tmax = tmax;
    MKI_CHECK(net_bufs(k, g, c, tmax));
    if (c->combine) return net_combine(k, g, c, tmax);
    void *recv = c->recv;
    struct mki_op_plan pl;
    memset(&pl, 0, sizeof(pl));
    if (c->gemm) {
        const size_t rows = (size_t)(c->cap ? c->cap : 1) * (size_t)c->hidden * (size_t)c->es;
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->rows, &g->rows_bytes, rows,
                             "the MoE GEMM's received rows"));
        recv = g->rows;
        MKI_CHECK(mki_plan_op(comm, c->of_layer ? MKI_OP_MOE_LAYER : MKI_OP_MOE_DISPATCH_GEMM,
                              c->tokens > 0 ? c->tokens : 1, c->hidden, c->topk, c->es, &pl));
    }
    MKI_CHECK(net_dispatch(k, g, c, tmax, recv));
    if (!c->gemm) return mkSuccess;
    return mki_moe_run_gemm(k, g, c, &pl);
}
