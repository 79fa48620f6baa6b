/*
 * setup.c - the plan of a communicator: the transport of each peer, the
 * SMs every rank may use, the slowest path inside a node, and the cache
 * of per-shape plans (mki_plan_op).
 *
 * Every rank derives the same communicator-wide facts from the same
 * allgathered records (src/topology/topo.c), so that all ranks plan
 * alike (chunk sizes and CTA counts must match across ranks) and all
 * fail alike (an error on one rank only would leave the others waiting
 * in the next collective).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "mki.h"
#include "plan/plan.h"
#include "topology/topo.h"
#include "mem/mem.h"
#include "ops/attn.h"
#include "rt/channel.h"

/* Which transports can run on a rank: socket always; the RDMA ones when
 * built and its GPU's NICs are of their kind.  The network stage confirms
 * with the transport's init. */
static unsigned usable_transports(const struct mki_rank_facts *f)
{
    unsigned mask = 1u << MKI_TR_SOCKET;
    if ((f->nic_kinds & (1u << MKI_NIC_EFA)) && HAVE_EFA) mask |= 1u << MKI_TR_EFA;
    if ((f->nic_kinds & (1u << MKI_NIC_IB)) && HAVE_VERBS) mask |= 1u << MKI_TR_IBVERBS;
    return mask;
}

/* Every rank derives the same communicator-wide facts from the same
 * allgathered records, so that all ranks plan alike (chunk sizes and CTA
 * counts must match across ranks) and all fail alike (an error on one
 * rank only would leave the others waiting in the next collective). */

static mkResult_t same_config(struct mkComm *comm)
{
    const struct mki_topo *t = comm->topo;
    for (int r = 0; r < comm->nranks; r++)
        if (t->facts[r].cfg_hash != t->facts[0].cfg_hash)
            return mki_error(comm, mkErrInvalidUsage, "rank %d and rank 0 "
                             "have different MK_TRANSPORT or MK_SM_SPLIT (or "
                             "config->transports / smSplit); give every rank "
                             "the same values", r);
    return mkSuccess;
}

/* The first transport of the list that both masks allow, or -1. */
static int first_common(const enum mki_transport *order, int n, unsigned both)
{
    for (int i = 0; i < n; i++)
        if (both & (1u << order[i])) return (int)order[i];
    return -1;
}

/* Some pair of ranks on different nodes with masks a and b exists when
 * the two masks together occur on two different nodes. */
static mkResult_t check_pairs(struct mkComm *comm, const enum mki_transport *order,
                              int n)
{
    const struct mki_topo *t = comm->topo;
    /* Per transport mask: the first two nodes that have it, and a rank on
     * each (to name a pair that cannot talk). */
    int node[8][2], rank[8][2];
    for (int m = 0; m < 8; m++)
        node[m][0] = node[m][1] = rank[m][0] = rank[m][1] = -1;
    for (int r = 0; r < comm->nranks; r++) {
        unsigned m = usable_transports(&t->facts[r]) & 7u;
        if (node[m][0] < 0) node[m][0] = t->node_of[r], rank[m][0] = r;
        else if (node[m][1] < 0 && t->node_of[r] != node[m][0])
            node[m][1] = t->node_of[r], rank[m][1] = r;
    }
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            if (node[a][0] < 0 || node[b][0] < 0) continue;
            int apart = node[a][1] >= 0 || node[b][1] >= 0 ||
                        node[a][0] != node[b][0];
            if (!apart || first_common(order, n, (unsigned)(a & b)) >= 0) continue;
            int ra = rank[a][0], rb = rank[b][0];
            if (a == b) rb = rank[a][1];
            else if (node[a][0] == node[b][0])
                rb = node[b][1] >= 0 ? rank[b][1] : rb, ra = node[b][1] >= 0 ? ra : rank[a][1];
            return mki_error(comm, mkErrTransport, "no transport of the "
                             "list \"%s\" (MK_TRANSPORT or config->transports) "
                             "works between rank %d and rank %d, on different "
                             "nodes (ibverbs needs an InfiniBand/RoCE device, "
                             "efa an EFA device, on both); add socket to the "
                             "list", comm->cfg.transports, ra, rb);
        }
    return mkSuccess;
}

static mkResult_t pick_transports(struct mkComm *comm, struct mki_plan *pl)
{
    const struct mki_topo *t = comm->topo;
    enum mki_transport order[MKI_TR_COUNT];
    int n;
    MKI_CHECK(mki_transport_list(comm->cfg.transports, "MK_TRANSPORT", order, &n));
    MKI_CHECK(check_pairs(comm, order, n));
    unsigned mine = usable_transports(&t->facts[comm->rank]);
    for (int r = 0; r < comm->nranks; r++) {
        int tr = first_common(order, n, mine & usable_transports(&t->facts[r]));
        pl->tr[r] = t->path[r] == MKI_PATH_NET && tr >= 0
                        ? (enum mki_transport)tr : MKI_TR_SOCKET;
    }
    /* What the model assumes: the slowest rank's inter-node rate. */
    pl->ctx.nics = 1 << 30;
    pl->ctx.nic_gbs = INFINITY;
    for (int r = 0; r < comm->nranks; r++) {
        const struct mki_rank_facts *f = &t->facts[r];
        int tr = first_common(order, n, usable_transports(f));
        int rdma = tr == MKI_TR_IBVERBS || tr == MKI_TR_EFA;
        if (!rdma || f->nnics == 0) pl->ctx.nics = 0;
        else if (f->nnics < pl->ctx.nics) pl->ctx.nics = f->nnics;
        const double gbs = mki_plan_nic_gbs(f->nic_kinds, f->nic_share);
        if (rdma && gbs < pl->ctx.nic_gbs) pl->ctx.nic_gbs = gbs;
    }
    if (pl->ctx.nics == 0 || pl->ctx.nic_gbs == INFINITY)
        pl->ctx.nics = 0, pl->ctx.nic_gbs = 0;
    return mkSuccess;
}

/* Bandwidth rank of a path, to find the slowest one. */
static double path_gbs(const struct mki_model *md, enum mki_path p, int links)
{
    switch (p) {
    case MKI_PATH_NVLINK:
        return links > 0 ? links * md->nvlink_link_gbs
                         : md->nvlink_ref_links * md->nvlink_link_gbs;
    case MKI_PATH_PCIE: return md->pcie_gbs;
    case MKI_PATH_HOST: return md->host_gbs;
    case MKI_PATH_SAME_GPU: return md->same_gpu_gbs;
    default: return INFINITY;
    }
}

static int sms_of(const struct mki_rank_facts *f)
{
    return f->has_gpu && f->gpu.sm_count > 0 ? f->gpu.sm_count
                                             : mki_model_default.sm_count;
}

/* The budget every rank plans with: the least any rank may use.  A budget
 * that lets the ranks of one GPU overfill it is refused on every rank. */
static mkResult_t global_budget(struct mkComm *comm, struct mki_plan_ctx *c)
{
    const struct mki_topo *t = comm->topo;
    c->sm_count = c->sm_budget = 1 << 30;
    c->gpu_share = 1;
    for (int r = 0; r < comm->nranks; r++) {
        const struct mki_rank_facts *f = &t->facts[r];
        int sms = sms_of(f), share = t->sharers[r] > 0 ? t->sharers[r] : 1;
        int b = f->sm_budget;
        if (b > sms)
            return mki_error(comm, mkErrInvalidArgument, "rank %d: smBudget "
                             "(MK_SM_BUDGET) = %d but its GPU has %d SMs; give "
                             "at most %d", r, b, sms, sms);
        if (b > 0 && b * share > sms)
            return mki_error(comm, mkErrInvalidArgument, "rank %d: smBudget "
                             "(MK_SM_BUDGET) = %d with %d ranks on its GPU of %d "
                             "SMs: their persistent grids cannot all be "
                             "resident; give at most %d", r, b, share, sms,
                             sms / share);
        int eff = b > 0 ? b : sms / share;
        if (eff < c->sm_budget) c->sm_budget = eff;
        if (sms < c->sm_count) c->sm_count = sms;
        if (share > c->gpu_share) c->gpu_share = share;
    }
    if (t->gpu_sharers > 1 && comm->cfg.smBudget == 0)
        MKI_INFO(MKI_SUB_PLAN, "%d ranks share this GPU: plans use %d of its "
                 "%d SMs (set MK_SM_BUDGET to choose)", t->gpu_sharers,
                 c->sm_budget, c->sm_count);
    return mkSuccess;
}

/* The slowest path between two ranks of one node, over every node, and
 * the largest node: members listed node by node (a counting sort), then
 * pairs inside each node, O(ranks x ranks per node). */
static mkResult_t slowest_path(struct mkComm *comm, struct mki_plan_ctx *c)
{
    const struct mki_topo *t = comm->topo;
    int n = comm->nranks, nn = comm->nnodes;
    int *start = calloc((size_t)nn + 1, sizeof(int));
    int *member = malloc(sizeof(int) * (size_t)n);
    if (!start || !member) {
        free(start), free(member);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    for (int r = 0; r < n; r++) start[t->node_of[r] + 1]++;
    for (int i = 0; i < nn; i++) start[i + 1] += start[i];
    for (int r = 0, *fill = start; r < n; r++) member[fill[t->node_of[r]]++] = r;
    /* fill advanced each start[i] to the end of node i: shift back. */
    for (int i = nn; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
    double slow = INFINITY;
    c->intra_path = MKI_PATH_SELF, c->nvlinks = 0, c->local_size = 1;
    for (int i = 0; i < nn; i++) {
        int a = start[i], b = start[i + 1];
        if (b - a > c->local_size) c->local_size = b - a;
        for (int x = a; x < b; x++)
            for (int y = x + 1; y < b; y++) {
                int nv;
                enum mki_path p = mki_topo_path(t, member[x], member[y], &nv);
                double g = path_gbs(&mki_model_default, p, nv);
                if (g < slow) slow = g, c->intra_path = p, c->nvlinks = nv;
            }
    }
    free(start), free(member);
    return mkSuccess;
}

mkResult_t mki_plan_setup(struct mkComm *comm)
{
    struct mki_plan *pl = calloc(1, sizeof(*pl));
    if (pl) pl->tr = calloc((size_t)comm->nranks, sizeof(*pl->tr));
    if (!pl || !pl->tr) {
        if (pl) free(pl);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    pthread_mutex_init(&pl->lock, NULL);
    comm->plan = pl;
    struct mki_plan_ctx *c = &pl->ctx;
    c->nranks = comm->nranks, c->nnodes = comm->nnodes;
    mkResult_t res;
    MKI_CHECK_GOTO(same_config(comm), res, fail);
    MKI_CHECK_GOTO(pick_transports(comm, pl), res, fail);
    MKI_CHECK_GOTO(global_budget(comm, c), res, fail);
    MKI_CHECK_GOTO(slowest_path(comm, c), res, fail);
    c->workspace = mki_heap_default_bytes(comm->cfg.workspaceSize, c->local_size);
    c->hier_min = (uint64_t)mki_params_int(&comm->params, MKI_P_COLL_HIER_MIN);
    res = mki_split_parse(comm->cfg.smSplit, "MK_SM_SPLIT", pl->ovr);
    for (int op = 0; res == mkSuccess && op < MKI_OP_COUNT; op++)
        res = mki_plan_check_ovr(&pl->ovr[op], (enum mki_op)op, c->sm_budget);
    if (res == mkSuccess)
        res = mki_plan_coll_mover_param(mki_params_str(&comm->params, MKI_P_COLL_MOVER),
                                        mki_params_is_set(&comm->params, MKI_P_COLL_MOVER),
                                        &pl->coll_mover);
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        goto fail;
    }
    MKI_INFO(MKI_SUB_PLAN, "plan: %d of %d SMs, %d ranks per node at most, "
             "slowest intra path %s, %d NIC(s) per rank, %d node(s)",
             c->sm_budget, c->sm_count, c->local_size,
             mki_path_name(c->intra_path), c->nics, c->nnodes);
    return mkSuccess;
fail:
    mki_plan_free(comm);
    return res;
}

void mki_plan_free(struct mkComm *comm)
{
    struct mki_plan *pl = comm->plan;
    if (!pl) return;
    pthread_mutex_destroy(&pl->lock);
    free(pl->tr);
    free(pl);
    comm->plan = NULL;
}

static int cache_find(struct mki_plan *pl, enum mki_op op, int64_t m, int64_t n,
                      int64_t k, int e, int head_dim, int mask, struct mki_op_plan *out)
{
    for (int i = 0; i < pl->ncache; i++) {
        const struct mki_op_plan *p = &pl->cache[i];
        if (p->op == op && p->m == m && p->n == n && p->k == k &&
            p->dtype_bytes == e && p->head_dim == head_dim && p->mask == mask) {
            *out = *p;
            return 1;
        }
    }
    return 0;
}

/* SMs no rank's fused GEMM takes when ranks share a GPU (MPS): the
 * driver may copy between ranks of one device with a kernel. */
#define AGG_MPS_FREE_SMS 8

/* The grid of a fused kernel whose bytes ride the copy engines: the plan's
 * compute CTAs (every SM of the budget), fewer when ranks share a GPU, so
 * that every spinning grid fits beside the others' and a few SMs stay
 * free. */
static void ce_fused_ctas(const struct mki_plan_ctx *c, struct mki_op_plan *p)
{
    int ctas = p->split.compute > 0 ? p->split.compute : c->sm_budget;
    const int share = c->gpu_share > 1 ? c->gpu_share : 1;
    if (share > 1 && ctas > (c->sm_count - AGG_MPS_FREE_SMS) / share)
        ctas = (c->sm_count - AGG_MPS_FREE_SMS) / share;
    p->split.compute = ctas < 1 ? 1 : ctas;
    p->ctas = p->split.compute;
}

/* mkAllGatherGemm's grid (above); copy-engine streams per peer: 4 with 3
 * or more ranks per node (4 H200, three runs: 32768x1024x8192 0.94-0.97x
 * -> 1.00-1.14x, 4096x8192x8192 1.05x -> 1.14x, no shape slower), 1 with 2
 * (no gain measured there). */
static void ag_gemm_runs(const struct mki_plan_ctx *c, struct mki_op_plan *p)
{
    /* Across nodes the fused kernel's first CTAs move the other nodes'
     * rows, one per net channel of the collectives (a power of two;
     * MK_SM_SPLIT's inter_send may ask fewer): the compute CTAs make room
     * for them (src/ops/ag_gemm.c). */
    int net = 0;
    if (p->fused && c->nnodes > 1 && p->split.inter_send > 0) {
        const int nbch = mki_nb_geometry(c->nranks).nbch;
        int want = (p->overridden & MKI_OVR_INTER_SEND) ? p->split.inter_send : nbch;
        if (want > nbch) want = nbch;
        net = 1;
        while (net * 2 <= want) net *= 2;
    }
    const int total = p->split.compute + p->split.inter_send;
    p->split.compute = net > 0 && total - net > 0 ? total - net : p->split.compute;
    ce_fused_ctas(c, p);
    if (net > 0) {
        const int share = c->gpu_share > 1 ? c->gpu_share : 1;
        const int cap = share > 1 ? (c->sm_count - AGG_MPS_FREE_SMS) / share : c->sm_budget;
        if (p->split.compute + net > cap) p->split.compute = cap - net > 0 ? cap - net : 1;
        p->split.inter_send = net;
        p->ctas = p->split.compute + net;
    }
    p->ce_streams = c->local_size >= 3 ? 4 : 1;
}

/* mkRingAttention's fused ring: the same grid as mkAllGatherGemm's (its k
 * and v ride the copy engines beside it), and MKI_RATT_SPLIT_MAX copy
 * streams per peer with 3 or more ranks per node (as mkAllGatherGemm's
 * measurement; not measured for attention). */
static void ring_attn_runs(const struct mki_plan_ctx *c, struct mki_op_plan *p)
{
    if (!p->fused) return;
    ce_fused_ctas(c, p);
    p->ce_streams = c->local_size >= 3 ? MKI_RATT_SPLIT_MAX : 1;
}

/* A plain collective over m x n elements (plan.h's shapes): the call's
 * count, then what its kernel runs. */
static mkResult_t coll_runs(const struct mki_plan_ctx *c, const struct mki_params *pr,
                            int mover, int registered, struct mki_op_plan *p)
{
    uint64_t total = (uint64_t)p->m * (uint64_t)p->n, count = total;
    if (p->op != MKI_OP_ALLREDUCE) count = total / (uint64_t)c->nranks;
    MKI_CHECK(mki_plan_coll_ctx(c, pr, mover, registered, p->op, count ? count : 1,
                                p->dtype_bytes, &p->coll));
    p->split = (struct mki_split){0, p->coll.nch, 0, 0};
    p->ctas = p->coll.nch;
    p->mover = p->coll.mover == MKI_COLL_MOVER_REG ? MKI_MOVER_REG : MKI_MOVER_TMA;
    p->chunk_bytes = p->coll.chunk;
    p->chunk_rows = 0;
    return mkSuccess;
}

mkResult_t mki_plan_runs(const struct mki_plan_ctx *c, const struct mki_params *pr,
                         int coll_mover, int registered, struct mki_op_plan *p)
{
    if (p->op == MKI_OP_AG_GEMM) ag_gemm_runs(c, p);
    if (p->op == MKI_OP_RING_ATTN) ring_attn_runs(c, p);
    if (p->op <= MKI_OP_ALLTOALL) MKI_CHECK(coll_runs(c, pr, coll_mover, registered, p));
    return mkSuccess;
}

mkResult_t mki_plan_op(struct mkComm *comm, enum mki_op op, int64_t m,
                       int64_t n, int64_t k, int dtype_bytes,
                       struct mki_op_plan *out)
{
    return mki_plan_op_attn(comm, op, m, n, k, dtype_bytes, NULL, out);
}

mkResult_t mki_plan_op_attn(struct mkComm *comm, enum mki_op op, int64_t m, int64_t n,
                            int64_t k, int dtype_bytes, const struct mki_plan_attn *attn,
                            struct mki_op_plan *out)
{
    struct mki_plan *pl = comm->plan;
    if (!pl)
        return mki_error(comm, mkErrInternal, "plan asked before the "
                         "communicator's plan was set up");
    if (!mki_op_has_gemm(op) && op != MKI_OP_MOE_DISPATCH && op != MKI_OP_MOE_COMBINE &&
        op != MKI_OP_MOE_DISPATCH_GEMM && op != MKI_OP_MOE_LAYER && op != MKI_OP_RING_ATTN)
        k = 1; /* k: the GEMM's; the MoE calls' top-k; a row of k (ring_attn) */
    /* the cache's key: what the model planned for (mki_plan_model_attn) */
    const int hd = op == MKI_OP_RING_ATTN ? (attn ? attn->head_dim : 128) : 0;
    const int mask = op == MKI_OP_RING_ATTN && attn ? attn->mask : 0;
    pthread_mutex_lock(&pl->lock);
    int hit = cache_find(pl, op, m, n, k, dtype_bytes, hd, mask, out);
    pthread_mutex_unlock(&pl->lock);
    if (hit) return mkSuccess;
    struct mki_op_plan p;
    mkResult_t r = mki_plan_model_attn(&mki_model_default, &pl->ctx,
                                       (unsigned)op < MKI_OP_COUNT ? &pl->ovr[op] : NULL,
                                       op, m, n, k, dtype_bytes, attn, &p);
    if (r != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        return r;
    }
    r = mki_plan_runs(&pl->ctx, &comm->params, pl->coll_mover,
                      comm->dev && comm->dev->nregs > 0, &p);
    if (r != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        return r;
    }
    pthread_mutex_lock(&pl->lock);
    pl->cache[pl->next] = p;
    pl->next = (pl->next + 1) % MKI_PLAN_CACHE;
    if (pl->ncache < MKI_PLAN_CACHE) pl->ncache++;
    pthread_mutex_unlock(&pl->lock);
    MKI_INFO(MKI_SUB_PLAN, "%s %lldx%lldx%lld: %d+%d+%d+%d CTAs, %s, %s",
             mki_op_name(op), (long long)m, (long long)n, (long long)k,
             p.split.compute, p.split.intra, p.split.inter_send,
             p.split.inter_reduce, mki_mover_name(p.mover), p.reason);
    *out = p;
    return mkSuccess;
}

enum mki_path mki_plan_path(const struct mkComm *comm, int peer)
{
    return comm->topo ? comm->topo->path[peer] : MKI_PATH_NET;
}

enum mki_transport mki_plan_transport(const struct mkComm *comm, int peer)
{
    return comm->plan ? comm->plan->tr[peer] : MKI_TR_SOCKET;
}

const struct mki_plan_ctx *mki_plan_context(const struct mkComm *comm)
{
    return comm->plan ? &comm->plan->ctx : NULL;
}

