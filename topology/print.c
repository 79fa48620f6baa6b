/*
 * print.c - the topology and plans as text: what mkinfo prints and what
 * mkCommGetInfo returns.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "topo.h"

void mki_sb_printf(struct mki_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    if (sb->oom) return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_start(ap, fmt);
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) { sb->oom = 1; return; }
        if ((size_t)n < room) { sb->len += (size_t)n; return; }
        size_t cap = (sb->cap ? sb->cap * 2 : 1024) + (size_t)n;
        char *b = realloc(sb->buf, cap);
        if (!b) { sb->oom = 1; return; }
        sb->buf = b, sb->cap = cap;
    }
}

static const char *loc_name(enum mki_locality l)
{
    static const char *n[] = {"same PCIe switch", "same host bridge",
                              "same NUMA node", "other NUMA node", "unknown"};
    return (unsigned)l <= MKI_LOC_UNKNOWN ? n[l] : "?";
}

static void link_cell(char *b, size_t n, enum mki_gpulink l, int nv)
{
    if (l == MKI_GL_SAME) snprintf(b, n, "X");
    else if (l == MKI_GL_NVLINK && nv > 0) snprintf(b, n, "NV%d", nv);
    else if (l == MKI_GL_NVLINK) snprintf(b, n, "NV?");
    else if (l == MKI_GL_PCIE) snprintf(b, n, "PCIe");
    else snprintf(b, n, "--");
}

static void print_links(struct mki_strbuf *sb, const struct mki_host_topo *h)
{
    char cell[16];
    mki_sb_printf(sb, "links (NVn: n NVLinks; PCIe: peer access over PCIe; "
                  "--: no peer access):\n        ");
    for (int j = 0; j < h->ngpus; j++) {
        snprintf(cell, sizeof(cell), "GPU%d", j);
        mki_sb_printf(sb, j + 1 < h->ngpus ? "%-7s" : "%s", cell);
    }
    mki_sb_printf(sb, "\n");
    for (int i = 0; i < h->ngpus; i++) {
        snprintf(cell, sizeof(cell), "GPU%d", i);
        mki_sb_printf(sb, "  %-6s", cell);
        for (int j = 0; j < h->ngpus; j++) {
            link_cell(cell, sizeof(cell), h->link[i][j], h->nvlinks[i][j]);
            mki_sb_printf(sb, j + 1 < h->ngpus ? "%-7s" : "%s", cell);
        }
        mki_sb_printf(sb, "\n");
    }
}

static void print_gpu(struct mki_strbuf *sb, const struct mki_host_topo *h, int i)
{
    const struct mki_gpu *g = &h->gpu[i];
    char nv[16] = "?", numa[16] = "?";
    if (g->nvlinks >= 0) snprintf(nv, sizeof(nv), "%d", g->nvlinks);
    if (g->numa >= 0) snprintf(numa, sizeof(numa), "%d", g->numa);
    mki_sb_printf(sb, "  GPU%d  %s  %s, %d SMs, NUMA %s, CPUs %s, %s "
                  "NVLinks\n", i, g->busid, g->name, g->sm_count, numa,
                  g->cpuset[0] ? g->cpuset : "?", nv);
    mki_sb_printf(sb, "        NICs:");
    if (!g->nnics) mki_sb_printf(sb, " none");
    for (int k = 0; k < g->nnics; k++)
        mki_sb_printf(sb, " %s", h->nic[g->nic[k]].name);
    mki_sb_printf(sb, g->nnics ? " (%s)\n" : "\n", loc_name(g->nic_loc));
}

void mki_topo_print_host(struct mki_strbuf *sb, const struct mki_host_topo *h)
{
    mki_sb_printf(sb, "topology (%s):\n", h->source);
    mki_sb_printf(sb, "  NUMA nodes: %d%s\n", h->nnuma,
                  h->have_hwloc ? "" : " (unknown without hwloc)");
    if (h->ngpus == 0) mki_sb_printf(sb, "  GPUs: none\n");
    for (int i = 0; i < h->ngpus; i++) print_gpu(sb, h, i);
    if (h->ngpus > 1) print_links(sb, h);
    mki_sb_printf(sb, "RDMA devices:%s\n", h->nnics ? "" : " none");
    for (int i = 0; i < h->nnics; i++) {
        const struct mki_nic *n = &h->nic[i];
        mki_sb_printf(sb, "  %-12s %s, port %d, PCI %s, NUMA %d\n", n->name,
                      n->kind == MKI_NIC_EFA ? "efa" : "ib", n->port,
                      n->busid[0] ? n->busid : "?", n->numa);
    }
    if (h->notes[0]) mki_sb_printf(sb, "notes: %s\n", h->notes);
}

void mki_topo_print_comm(struct mki_strbuf *sb, const struct mkComm *comm)
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
    mki_sb_printf(sb, "  mover     %s\n", mki_mover_name(p->mover));
    mki_sb_printf(sb, "  chunk     %" PRId64 " rows, %zu bytes\n",
                  p->chunk_rows, p->chunk_bytes);
    mki_sb_printf(sb, "  traffic   %.1f MiB intra, %.1f MiB inter per rank; "
                  "%.2f TFLOP per rank\n", p->intra_bytes / 1048576.0,
                  p->inter_bytes / 1048576.0, p->flops / 1e12);
    mki_sb_printf(sb, "  model     compute %.0f us, intra %.0f us, inter %.0f "
                  "us; fused %.0f us, unfused %.0f us\n", p->t_compute_us,
                  p->t_intra_us, p->t_inter_us, p->t_fused_us, p->t_unfused_us);
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
    c->workspace = 256u << 20;
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
        c->nic_gbs = mki_topo_nic_gbs(h, 0);
    }
}

/* ---- mkCommGetInfo --------------------------------------------------- */

static mkResult_t info_text(mkComm_t comm, const char *op, int64_t m, int64_t n,
                            int64_t k, int elem, struct mki_strbuf *sb)
{
    if (comm->topo) mki_topo_print_host(sb, &comm->topo->host);
    mki_topo_print_comm(sb, comm);
    if (!op) return mkSuccess;
    int id = mki_op_from_name(op);
    if (id < 0)
        return mki_error(comm, mkErrInvalidArgument, "mkCommGetInfo: op \"%s\""
                         " is not one of allgather, reducescatter, allreduce, "
                         "alltoall, ag_gemm, gemm_rs, gemm_ar", op);
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
