/*
 * print.c - the communicator and its plans as text: what mkinfo prints and
 * what mkCommGetInfo returns (the parameters the communicator read, its
 * ranks and paths, the plan of one call: what runs).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "mem/mem.h"
#include "plan/plan.h"
#include "ops/attn.h"
#include "ops/gemm_rs.h"
#include "ops/moe.h"
#include "topology/topo.h"

/* ---- names -------------------------------------------------------- */

static const char *const mover_names[MKI_MOVER_COUNT] = {
    "none", "ce", "tma", "reg",
};
static const char *const path_names[MKI_PATH_COUNT] = {
    "self", "same-gpu", "nvlink", "pcie", "host", "net",
};
static const char *const tr_names[MKI_TR_COUNT] = {"ibverbs", "efa", "socket"};

const char *mki_mover_name(enum mki_mover m)
{ return (unsigned)m < MKI_MOVER_COUNT ? mover_names[m] : "?"; }
const char *mki_path_name(enum mki_path p)
{ return (unsigned)p < MKI_PATH_COUNT ? path_names[p] : "?"; }
const char *mki_transport_name(enum mki_transport t)
{ return (unsigned)t < MKI_TR_COUNT ? tr_names[t] : "?"; }

void mki_plan_print_comm(struct mki_strbuf *sb, const struct mkComm *comm)
{
    const struct mki_topo *t = comm->topo;
    mki_sb_printf(sb, "communicator: rank %d of %d, node %d of %d, local rank "
                  "%d of %d\n", comm->rank, comm->nranks, comm->node,
                  comm->nnodes, comm->local_rank, comm->local_size);
    if (!t) return;
    mki_sb_printf(sb, "  rank  node  local  GPU           NICs          path "
                  "from rank %d\n", comm->rank);
    for (int r = 0; r < t->nranks; r++) {
        const struct mki_rank_facts *f = &t->facts[r];
        char path[48];
        enum mki_path p = t->path[r];
        if (p == MKI_PATH_NET)
            snprintf(path, sizeof(path), "net (%s)",
                     mki_transport_name(mki_plan_transport(comm, r)));
        else if (p == MKI_PATH_NVLINK && t->path_nvlinks[r] > 0)
            snprintf(path, sizeof(path), "nvlink (NV%d)", t->path_nvlinks[r]);
        else
            snprintf(path, sizeof(path), "%s", mki_path_name(p));
        mki_sb_printf(sb, "  %4d  %4d  %5d  %-12s  %-12s  %s\n", r,
                      t->node_of[r], t->local_rank_of[r],
                      f->has_gpu ? f->gpu.busid : "none",
                      f->nnics ? f->nic_names[0] : "-", path);
    }
}

/* mkRingAttention (plan.h: one batch element, m = seq_local, n = heads x
 * head_dim, k = kv_heads x head_dim; the head_dim and mask planned for):
 * the ring's steps, what one step moves and computes, and whether the
 * copies hide under the compute. */
static void ring_attn_print(struct mki_strbuf *sb, const struct mki_plan_ctx *c,
                            const struct mki_op_plan *p)
{
    const int P = c->nranks;
    const double step_mib = 2.0 * (double)p->m * (double)p->k * p->dtype_bytes / 1048576.0;
    const double tc = p->t_compute_us;
    if (p->fused) {
        const int64_t nsc = mki_attn_nsc(p->m, p->chunk_rows);
        mki_sb_printf(sb, "  copies    %d copy-engine stream(s) per peer; chunks of %" PRId64
                      " rows of k and of v (%zu bytes each), %" PRId64 " per rank's segment\n",
                      p->ce_streams, p->chunk_rows, p->chunk_bytes, nsc);
        mki_sb_printf(sb, "  ring      %d steps: this rank's keys, then each peer's as they "
                      "land (rank r + 1 first); a step is one rank's k and v, %.1f MiB over "
                      "%s, and %.0f us of compute; every peer's copies run at once, %.0f us "
                      "in all at this rank\n", P, step_mib, mki_path_name(c->intra_path),
                      tc / P, p->t_intra_us);
        mki_sb_printf(sb, "  overlap   copies %.0f us %s compute %.0f us (%s)\n",
                      p->t_intra_us, p->t_intra_us <= tc ? "<=" : ">", tc,
                      p->t_intra_us <= tc ? "hidden" : "not hidden");
    } else if (P > 1) {
        mki_sb_printf(sb, "  sequence  mkAllGather of k and of v (%.1f MiB per rank each "
                      "call), then the core over the %d ranks' keys\n", step_mib / 2, P);
    }
    static const char *masks[] = {"mkAttnFull", "mkAttnCausal", "mkAttnCausalZigzag"};
    static const char *shares[] = {"4 x seq_local x (P x seq_local) x heads x head_dim",
                                   "the last rank's: (P - 1/2) / P of the unmasked",
                                   "half the unmasked on every rank"};
    const int mask = p->mask >= 0 && p->mask <= 2 ? p->mask : 0;
    const double rate = mki_model_attn_rate(&mki_model_default, p->head_dim, mask,
                                            (double)p->m * P);
    mki_sb_printf(sb, "  compute   %.2f TFLOP on the busiest rank per batch element (head_dim "
                  "%d, %s: %s, P = %d): %.0f us at %.0f TFLOP/s on %d of %d SMs (the model's "
                  "rate of our core at this head_dim and mask)",
                  p->flops / 1e12, p->head_dim, masks[mask],
                  mask == 1 && P == 1 ? "half the unmasked" : shares[mask], P, tc,
                  rate * p->ctas / c->sm_count, p->ctas, c->sm_count);
    mki_sb_printf(sb, "\n");
}

void mki_plan_print(struct mki_strbuf *sb, const struct mki_plan_ctx *c,
                    const struct mki_op_plan *p)
{
    char links[16] = "";
    if (c->intra_path == MKI_PATH_NVLINK && c->nvlinks > 0)
        snprintf(links, sizeof(links), " (NV%d)", c->nvlinks);
    mki_sb_printf(sb, "plan of %s m=%" PRId64 " n=%" PRId64 " k=%" PRId64
                  ", %d-byte elements:\n", mki_op_name(p->op), p->m, p->n,
                  p->k, p->dtype_bytes);
    char net[64] = "no inter-node traffic";
    if (c->nnodes > 1 && c->nics)
        snprintf(net, sizeof(net), "%d NIC(s) of %.0f GB/s", c->nics, c->nic_gbs);
    else if (c->nnodes > 1)
        snprintf(net, sizeof(net), "socket transport");
    mki_sb_printf(sb, "  for       %d rank(s), %d per node, %d node(s); %d of "
                  "%d SMs; intra path %s%s; %s\n", c->nranks, c->local_size,
                  c->nnodes, c->sm_budget, c->sm_count,
                  mki_path_name(c->intra_path), links, net);
    mki_sb_printf(sb, "  decision  %s (%s)\n", p->fused ? "fused" : "unfused",
                  p->reason);
    mki_sb_printf(sb, "  CTAs      %d = compute %d + intra %d + inter_send %d "
                  "+ inter_reduce %d\n", p->ctas, p->split.compute,
                  p->split.intra, p->split.inter_send, p->split.inter_reduce);
    if ((p->op == MKI_OP_GEMM_RS || p->op == MKI_OP_GEMM_AR) && p->decode) {
        const int64_t kr = (p->k + c->nranks - 1) / c->nranks;
        const int64_t rows = p->op == MKI_OP_GEMM_AR ? p->m : (p->m + c->nranks - 1) / c->nranks;
        const int S = mki_gdec_slices(p->n, kr, p->split.compute);
        mki_sb_printf(sb, "  kernel    decode-sized m (<= %d): %d CTAs, each %d columns of D "
                      "by all %lld rows (wgmma N = %d) over one of %d K-slice(s); each "
                      "fp32 partial stored into the bank of every rank that needs its rows "
                      "(%s) %s, each rank sums its share in rank order\n", MKI_GDEC_MAXM,
                      p->split.compute, MKI_GDEC_BN, (long long)p->m, mki_gdec_nw(p->m),
                      S, p->op == MKI_OP_GEMM_AR ? "every rank, all rows" : "the rows' owner",
                      mki_gdec_ll(rows, S) ? "as LL lines (the call's flag in every word)"
                                        : "with a counter per column block");
    } else if (p->op == MKI_OP_GEMM_RS || p->op == MKI_OP_GEMM_AR)
        mki_sb_printf(sb, "  mover     %s (fp32 partial tiles from the epilogue into a local "
                      "outbox, copied to their owner by 3 warps of each compute CTA%s%s; one "
                      "flag per tile; across nodes: the unfused sequence)\n",
                      mki_mover_name(p->mover),
                      p->wide_movers ? " with two rows in flight (the link binds)" : "",
                      p->op == MKI_OP_GEMM_AR ? ", which also copy each reduced own tile into "
                                                "every peer's inbox" : "");
    else
        mki_sb_printf(sb, "  mover     %s\n", mki_mover_name(p->mover));
    if (p->op == MKI_OP_AG_GEMM)
        mki_sb_printf(sb, "  copies    %d copy-engine stream(s) per peer\n", p->ce_streams);
    if (p->op <= MKI_OP_ALLTOALL) {
        const struct mki_coll_plan *k = &p->coll;
        mki_sb_printf(sb, "  kernel    %d channel(s), %s%s%s%s%s%s, block %" PRIu64 " bytes; "
                      "threads per role:", k->nch,
                      k->ll ? "LL lines (the flag in every word)"
                      : k->mover == MKI_COLL_MOVER_REG ? "register stores"
                      : k->mover == MKI_COLL_MOVER_TMA ? "TMA to peers and locally" : "TMA to peers",
                      p->op != MKI_OP_ALLREDUCE ? "" : k->oneshot ? ", one phase" : ", two phases",
                      k->direct ? ", zero copy" : "",
                      k->peer_major ? ", peer after peer (one destination at a time)" : "",
                      k->pipelined ? ", chunks signalled without a drain" : "",
                      k->stagger ? ", the second half of the channels a phase behind" : "",
                      k->block);
        for (int r = 0, b = 0; r < k->roles.n; b = k->roles.end[r++])
            mki_sb_printf(sb, " %d", k->roles.end[r] - b);
        if (!k->ll) mki_sb_printf(sb, "; chunk %" PRIu64 " bytes", k->chunk);
        mki_sb_printf(sb, "\n");
        if (k->hier && p->op != MKI_OP_ALLREDUCE) {
            const int L = c->local_size, N = c->nnodes;
            if (p->op == MKI_OP_ALLGATHER)
                mki_sb_printf(sb, "  hierarchy all-gather across the %d nodes between ranks of "
                              "one local index, all-gather inside the node (%d ranks), a strided "
                              "copy into rank order", N, L);
            else
                mki_sb_printf(sb, "  hierarchy a strided copy of the blocks by local index, "
                              "reduce-scatter inside the node (%d ranks), reduce-scatter across "
                              "the %d nodes between ranks of one local index", L, N);
            mki_sb_printf(sb, "; bytes leaving the node per rank: %.3f x S, flat %.3f x S (S: "
                          "the whole buffer)\n", (double)(N - 1) / c->nranks,
                          (double)(c->nranks - L) / c->nranks);
        } else if (k->hier) {
            const int L = c->local_size, N = c->nnodes;
            mki_sb_printf(sb, "  hierarchy reduce-scatter inside the node (%d ranks), all-reduce "
                          "of each rank's 1/%d share across the %d nodes, all-gather inside the "
                          "node (three kernels; the one above only for the last count %% %d "
                          "elements); bytes leaving the node per rank: %.3f x S, flat %.3f x S\n",
                          L, L, N, L, 2.0 * (N - 1) / N / L,
                          2.0 * (c->nranks - L) / c->nranks);
        }
    }
    if ((p->op == MKI_OP_GEMM_RS || p->op == MKI_OP_GEMM_AR) && p->fused && !p->decode &&
        c->nnodes == 1 && c->nranks > 1) {
        /* what the fused call does with m split as its default (m_all
         * NULL): its K-slices at decode-sized m */
        const int64_t kr = (p->k + c->nranks - 1) / c->nranks;
        int64_t rows[MKI_MAXLOCAL];
        const int P = c->nranks < MKI_MAXLOCAL ? c->nranks : MKI_MAXLOCAL;
        for (int r = 0; r < P; r++) rows[r] = mki_grs_rows(p->m, P, r, p->op == MKI_OP_GEMM_AR);
        const int S = mki_grs_call_slices(rows, P, p->n, kr, p->split.compute);
        if (S > 1)
            mki_sb_printf(sb, "  k-slices  %d per tile (decode-sized m: each slice stored into its "
                          "slot by the epilogue, summed by the owner's CTA)\n", S);
        else
            mki_sb_printf(sb, "  k-slices  1 (whole tiles)\n");
    }
    const int moe = p->op == MKI_OP_MOE_DISPATCH || p->op == MKI_OP_MOE_COMBINE ||
                    p->op == MKI_OP_MOE_DISPATCH_GEMM || p->op == MKI_OP_MOE_LAYER;
    if (moe && c->nnodes > 1)
        mki_sb_printf(sb, "  nodes     %d: not the one-node kernels below but a sequence on "
                      "the stream: the dispatch all-gathers every rank's tokens and routing, "
                      "every rank routes them alike and copies its rows; the combine "
                      "all-gathers the routing, sums each token's rows of its own experts "
                      "in fp32, reduce-scatters the sums and rounds once (across the network "
                      "a rank's tokens go once to each other node, their sums come back once; "
                      "inside the node every rank handles every token)\n", c->nnodes);
    if (p->op == MKI_OP_MOE_DISPATCH)
        mki_sb_printf(sb, "  kernel    %d CTAs of %d threads: count slots per expert, exchange "
                      "the counts, send each token once per destination rank (16-byte register "
                      "stores into its inbox), unpack into recv by expert\n", p->ctas,
                      MKI_MOE_THREADS);
    if (p->op == MKI_OP_MOE_DISPATCH_GEMM) {
        mki_sb_printf(sb, "  kernel    one launch of the GEMM engine (up to %d CTAs of 384 "
                      "threads): the first %d dispatch (each CTA's tokens sent in the order of "
                      "their first expert on the destination), the others start each local "
                      "expert's tiles once all its rows are in place; the dispatch CTAs then "
                      "join the GEMM (two launches, the dispatch then the GEMM, where the grid "
                      "is too small to split)\n", p->ctas, p->split.intra);
    }
    if (p->op == MKI_OP_MOE_LAYER)
        mki_sb_printf(sb, "  kernels   two launches: the GEMM engine (up to %d CTAs of 384 "
                      "threads), its first %d dispatching, the others computing each local "
                      "expert's gate and up projections once its rows are in place, SwiGLU in "
                      "the epilogue, then every CTA the grouped down projection, each tile once "
                      "the rows it reads are stored, each row into its token's slot of the "
                      "token's rank's combine stage (over NVLink for a peer's token); the combine "
                      "(%d threads a CTA: a warp per token sums its top-k rows of its own stage "
                      "in fp32)\n", p->ctas,
                      p->split.intra, MKI_MOE_THREADS);
    if (p->op == MKI_OP_RING_ATTN) ring_attn_print(sb, c, p);
    if (p->op == MKI_OP_MOE_COMBINE)
        mki_sb_printf(sb, "  kernel    %d CTAs of %d threads: stage y for the peers, then a warp "
                      "per token pulls its top-k rows and sums them in fp32\n", p->ctas,
                      MKI_MOE_THREADS);
    if (p->op != MKI_OP_GEMM_RS && p->op != MKI_OP_GEMM_AR && p->op != MKI_OP_MOE_DISPATCH &&
        p->op != MKI_OP_MOE_COMBINE && p->op != MKI_OP_MOE_DISPATCH_GEMM &&
        p->op != MKI_OP_MOE_LAYER && p->op != MKI_OP_RING_ATTN)
        mki_sb_printf(sb, "  chunk     %" PRId64 " rows, %zu bytes\n",
                      p->chunk_rows, p->chunk_bytes);
    mki_sb_printf(sb, "  traffic   %.1f MiB intra, %.1f MiB inter per rank; "
                  "%.2f TFLOP per rank\n", p->intra_bytes / 1048576.0,
                  p->inter_bytes / 1048576.0, p->flops / 1e12);
    mki_sb_printf(sb, "  model     compute %.0f us, intra %.0f us, inter %.0f "
                  "us; fused %.0f us, unfused %.0f us\n", p->t_compute_us,
                  p->t_intra_us, p->t_inter_us, p->t_fused_us, p->t_unfused_us);
    /* without the experts and the GEMM's columns (mki_plan_model_moe) the
     * MoE GEMMs have no time */
    const int layer = p->op == MKI_OP_MOE_LAYER;
    if ((layer || p->op == MKI_OP_MOE_DISPATCH_GEMM) && p->t_compute_us > 0)
        mki_sb_printf(sb, "            (compute: the grouped GEMMs of uniform routing's "
                      "groups; fused: with the dispatch's fixed cost%s)\n",
                      layer ? " and the combine after them" : "");
    else if (layer)
        mki_sb_printf(sb, "            (the dispatch and the combine only: the experts' GEMMs "
                      "are not in the model, inter and the rows per expert are not part of "
                      "the plan's shape)\n");
    else if (p->op == MKI_OP_MOE_DISPATCH_GEMM)
        mki_sb_printf(sb, "            (the dispatch only: the experts' GEMM is not in the "
                      "model, its n and the rows per expert are not part of the plan's "
                      "shape)\n");
    if (p->overridden)
        mki_sb_printf(sb, "  overrides from MK_SM_SPLIT: 0x%x\n", p->overridden);
}

void mki_plan_ctx_from_host(const struct mki_host_topo *h, int rpn, int nnodes,
                            struct mki_plan_ctx *c)
{
    const struct mki_model *md = &mki_model_default;
    memset(c, 0, sizeof(*c));
    c->local_size = rpn > 0 ? rpn : (h->ngpus > 0 ? h->ngpus : 2);
    c->nnodes = nnodes > 0 ? nnodes : 1;
    c->nranks = c->local_size * c->nnodes;
    c->sm_count = h->ngpus ? h->gpu[0].sm_count : md->sm_count;
    int share = h->ngpus ? (c->local_size + h->ngpus - 1) / h->ngpus : 1;
    c->sm_budget = c->sm_count / share;
    c->gpu_share = share;
    c->workspace = mki_heap_default_bytes(0, c->local_size);
    /* Without GPUs: the GPUs of REFERENCE.md (H200, NV18). */
    c->intra_path = c->local_size > 1 ? MKI_PATH_NVLINK : MKI_PATH_SELF;
    c->nvlinks = md->nvlink_ref_links;
    if (share > 1) c->intra_path = MKI_PATH_SAME_GPU;
    for (int i = 0; i < h->ngpus && i < c->local_size && share == 1; i++)
        for (int j = 0; j < h->ngpus && j < c->local_size; j++) {
            if (i == j) continue;
            enum mki_gpulink l = h->link[i][j];
            enum mki_path p = l == MKI_GL_NVLINK ? MKI_PATH_NVLINK
                            : l == MKI_GL_PCIE ? MKI_PATH_PCIE : MKI_PATH_HOST;
            if (p > c->intra_path ||
                (p == MKI_PATH_NVLINK && h->nvlinks[i][j] > 0 &&
                 h->nvlinks[i][j] < c->nvlinks)) {
                c->intra_path = p;
                c->nvlinks = p == MKI_PATH_NVLINK ? h->nvlinks[i][j] : 0;
            }
        }
    if (c->nnodes > 1 && h->ngpus && h->gpu[0].nnics) {
        c->nics = h->gpu[0].nnics;
        c->nic_gbs = mki_plan_nic_gbs(mki_topo_nic_kinds(h, 0), mki_topo_nic_share(h, 0));
    }
}

/* The parameters as the communicator read them at its creation. */
static void print_params(struct mki_strbuf *sb, const struct mki_params *pr)
{
    mki_sb_printf(sb, "parameters (read at creation; * set in the environment):\n");
    for (int i = 0; i < MKI_P_COUNT; i++) {
        const enum mki_param_id id = (enum mki_param_id)i;
        mki_sb_printf(sb, "  %c %-20s %s\n", mki_params_is_set(pr, id) ? '*' : ' ',
                      mki_param_desc(id)->name, mki_params_str(pr, id));
    }
}

/* ---- mkCommGetInfo --------------------------------------------------- */

static mkResult_t info_text(mkComm_t comm, const char *op, int64_t m, int64_t n,
                            int64_t k, int elem, struct mki_strbuf *sb)
{
    if (comm->topo) mki_topo_print_host(sb, &comm->topo->host);
    mki_plan_print_comm(sb, comm);
    print_params(sb, &comm->params);
    if (!op) return mkSuccess;
    int id = mki_op_from_name(op);
    if (id < 0)
        return mki_error(comm, mkErrInvalidArgument, "mkCommGetInfo: op \"%s\""
                         " is not one of allgather, reducescatter, allreduce, "
                         "alltoall, ag_gemm, gemm_rs, gemm_ar, moe_dispatch, moe_combine, "
                         "moe_dispatch_gemm, ring_attn, moe_layer", op);
    struct mki_op_plan p;
    MKI_CHECK(mki_plan_op(comm, (enum mki_op)id, m, n, k, elem, &p));
    mki_plan_print(sb, mki_plan_context(comm), &p);
    return mkSuccess;
}

MK_API mkResult_t mkCommGetInfo(mkComm_t comm, const char *op, int64_t m,
                                int64_t n, int64_t k, mkDataType_t datatype,
                                char *buf, size_t *size)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommGetInfo"));
    if (!size)
        return mki_error(comm, mkErrInvalidArgument, "mkCommGetInfo: size is "
                         "NULL; pass the address of the buffer's size");
    if (op && (unsigned)datatype >= (unsigned)mkNumDataTypes)
        return mki_error(comm, mkErrInvalidArgument, "mkCommGetInfo: datatype "
                         "%d is not an mkDataType_t", (int)datatype);
    int elem = datatype == mkFloat32 ? 4 : 2;
    struct mki_strbuf sb = {0};
    mkResult_t r = info_text(comm, op, m, n, k, elem, &sb);
    if (r == mkSuccess && sb.oom)
        r = mki_error(comm, mkErrNoMemory, "mkCommGetInfo: out of host memory");
    if (r == mkSuccess && buf && *size < sb.len + 1)
        r = mki_error(comm, mkErrInvalidArgument, "mkCommGetInfo: the text "
                      "needs %zu bytes but *size is %zu; call with buf = NULL "
                      "to learn the size", sb.len + 1, *size);
    if (r == mkSuccess) {
        if (buf) memcpy(buf, sb.buf ? sb.buf : "", sb.len + 1);
        *size = sb.len + 1;
    }
    free(sb.buf);
    return r;
}
