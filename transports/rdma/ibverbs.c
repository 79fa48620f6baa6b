/*
 * ibverbs.c - the RC transport over libibverbs (InfiniBand, RoCE), and the
 * verbs helpers efa.c shares (verbs.h).
 *
 * One RC queue pair per peer on the NIC the topology chose (device and
 * port from args; GID for RoCE: the highest-numbered IPv4-mapped entry,
 * i.e. RoCE v2 where the port has it).  GPU memory is registered through a
 * dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr); where the
 * driver cannot export one, ibv_reg_mr, which needs nvidia-peermem.  The
 * protocol (ordering, caps, signalling, errors) is proto.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "mki.h"
#include "rdma.h"

#if HAVE_VERBS
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "verbs.h"

#define VB_SQ_DEPTH 512
#define VB_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
                   IBV_ACCESS_REMOTE_ATOMIC)

/* ---- shared verbs helpers (verbs.h) ------------------------------- */

static mkResult_t unsupported(const char *transport, const char *why)
{
    MKI_INFO(MKI_SUB_NET, "%s transport not used: %s", transport, why);
    mki_error_quiet(NULL, "%s transport: %s", transport, why);
    return mkErrUnsupported;
}

static int first_active_port(struct ibv_context *ctx, int nports,
                             struct ibv_port_attr *pa)
{
    for (int p = 1; p <= nports; p++)
        if (ibv_query_port(ctx, (uint8_t)p, pa) == 0 &&
            pa->state == IBV_PORT_ACTIVE)
            return p;
    return 0;
}

static void pick_gid(struct mki_vb_nic *n)
{
    n->gid_index = 0;
    ibv_query_gid(n->ctx, n->port, 0, &n->gid);
    if (n->pattr.link_layer != IBV_LINK_LAYER_ETHERNET) return;
    for (int i = n->pattr.gid_tbl_len - 1; i > 0; i--) {
        union ibv_gid g;
        static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (ibv_query_gid(n->ctx, n->port, i, &g) == 0 &&
            memcmp(g.raw, v4, 12) == 0) {
            n->gid_index = i;
            n->gid = g;
            return;
        }
    }
}

static struct ibv_device *find_device(struct ibv_device **list, int nd,
                                      const char *want,
                                      int (*keep)(const char *))
{
    for (int i = 0; i < nd; i++) {
        const char *nm = ibv_get_device_name(list[i]);
        if (want ? strcmp(nm, want) == 0 : keep(nm)) return list[i];
    }
    return NULL;
}

static mkResult_t open_port(const char *transport, int port,
                            struct mki_vb_nic *n)
{
    char why[256];
    if (ibv_query_device(n->ctx, &n->dattr) != 0)
        return mki_error(NULL, mkErrTransport, "%s: ibv_query_device(%s) "
                         "failed", transport, n->name);
    if (port == 0) port = first_active_port(n->ctx, n->dattr.phys_port_cnt,
                                            &n->pattr);
    else if (ibv_query_port(n->ctx, (uint8_t)port, &n->pattr) != 0 ||
             n->pattr.state != IBV_PORT_ACTIVE)
        port = 0;
    if (port == 0) {
        snprintf(why, sizeof(why), "no active port on %s (check "
                 "`ibv_devinfo -d %s`)", n->name, n->name);
        return unsupported(transport, why);
    }
    n->port = (uint8_t)port;
    pick_gid(n);
    return mkSuccess;
}

mkResult_t mki_vb_open(const char *transport, const char *want, int port,
                       int (*keep)(const char *name), int cqe,
                       struct mki_vb_nic *n)
{
    int nd = 0;
    char why[160];
    memset(n, 0, sizeof(*n));
    struct ibv_device **list = ibv_get_device_list(&nd);
    if (!list || nd == 0) {
        if (list) ibv_free_device_list(list);
        return unsupported(transport, "no RDMA device (ibv_get_device_list "
                           "found none; see `ibv_devinfo`)");
    }
    struct ibv_device *d = find_device(list, nd, want, keep);
    if (!d) {
        ibv_free_device_list(list);
        snprintf(why, sizeof(why), "no suitable RDMA device%s%s", want ?
                 " named " : "", want ? want : "");
        return unsupported(transport, why);
    }
    snprintf(n->name, sizeof(n->name), "%s", ibv_get_device_name(d));
    n->ctx = ibv_open_device(d);
    ibv_free_device_list(list);
    if (!n->ctx)
        return mki_error(NULL, mkErrTransport, "%s: cannot open %s", transport,
                         n->name);
    mkResult_t res = open_port(transport, port, n);
    if (cqe > n->dattr.max_cqe) cqe = n->dattr.max_cqe;
    if (res == mkSuccess && !(n->pd = ibv_alloc_pd(n->ctx)))
        res = mki_error(NULL, mkErrTransport, "%s: ibv_alloc_pd on %s failed",
                        transport, n->name);
    if (res == mkSuccess &&
        !(n->cq = ibv_create_cq(n->ctx, cqe, NULL, NULL, 0)))
        res = mki_error(NULL, mkErrTransport, "%s: ibv_create_cq(%d) on %s "
                        "failed", transport, cqe, n->name);
    if (res != mkSuccess) mki_vb_close(n);
    return res;
}

void mki_vb_close(struct mki_vb_nic *n)
{
    if (n->cq) ibv_destroy_cq(n->cq);
    if (n->pd) ibv_dealloc_pd(n->pd);
    if (n->ctx) ibv_close_device(n->ctx);
    n->cq = NULL;
    n->pd = NULL;
    n->ctx = NULL;
}

typedef CUresult (*get_handle_fn)(void *, CUdeviceptr, size_t,
                                  CUmemRangeHandleType, unsigned long long);

/* GPU memory through a dma-buf; NULL when the driver cannot export one. */
static struct ibv_mr *reg_dmabuf(struct mki_vb_nic *n, void *base,
                                 size_t size)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn,
                                         12000, cudaEnableDefault, &q) !=
            cudaSuccess || !fn)
        return NULL;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)base & ~(page - 1);
    size_t len = ((uintptr_t)base + size - lo + page - 1) & ~(page - 1);
    int fd = -1;
    if (((get_handle_fn)fn)(&fd, (CUdeviceptr)lo, len,
                            CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) !=
        CUDA_SUCCESS)
        return NULL;
    struct ibv_mr *mr = ibv_reg_dmabuf_mr(n->pd, (uintptr_t)base - lo, size,
                                          (uintptr_t)base, fd, VB_ACCESS);
    close(fd);
    return mr;
}

mkResult_t mki_vb_reg(struct mki_vb_nic *n, void *base, size_t size,
                      enum mki_mem_kind kind, uint32_t *lkey, uint32_t *rkey,
                      void **handle)
{
    struct ibv_mr *mr = kind == MKI_MEM_DEVICE ? reg_dmabuf(n, base, size)
                                               : NULL;
    if (!mr) mr = ibv_reg_mr(n->pd, base, size, VB_ACCESS);
    if (!mr)
        return mki_error(NULL, mkErrTransport, "cannot register %zu bytes of "
                         "%s memory with %s%s", size, kind == MKI_MEM_DEVICE ?
                         "GPU" : "host", n->name, kind == MKI_MEM_DEVICE ?
                         ": neither dma-buf nor nvidia-peermem works (load "
                         "nvidia-peermem or use a dma-buf capable driver)" :
                         "");
    *lkey = mr->lkey;
    *rkey = mr->rkey;
    *handle = mr;
    return mkSuccess;
}

void mki_vb_dereg(void *handle)
{
    if (handle) ibv_dereg_mr(handle);
}

int mki_vb_poll(struct mki_vb_nic *n, struct mki_nic_wc *wc, int max)
{
    struct ibv_wc w[32];
    int got = ibv_poll_cq(n->cq, max < 32 ? max : 32, w);
    for (int i = 0; i < got; i++)
        wc[i] = (struct mki_nic_wc){
            w[i].wr_id, (int)w[i].status,
            w[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM,
            (w[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(w[i].imm_data) : 0,
            w[i].vendor_err};
    return got;
}

const char *mki_vb_status_str(int status)
{
    return ibv_wc_status_str((enum ibv_wc_status)status);
}

/* ---- RC backend --------------------------------------------------- */

struct rc_addr {
    uint32_t qpn, psn;
    uint16_t lid;
    uint8_t mtu, pad;
    uint8_t gid[16];
};

struct rc_nic {
    struct mki_vb_nic v;
    struct ibv_qp **qps;
    int nqp;
};

static int not_efa(const char *name) { return strncmp(name, "efa", 3) != 0; }

static mkResult_t rc_reg(void *nic, void *base, size_t size,
                         enum mki_mem_kind kind, uint32_t *lkey,
                         uint32_t *rkey, void **handle)
{
    return mki_vb_reg(&((struct rc_nic *)nic)->v, base, size, kind, lkey, rkey,
                      handle);
}

static void rc_dereg(void *nic, void *handle) { mki_vb_dereg(handle); }

static mkResult_t rc_ep_create(void *nic, int ep, void *blob)
{
    struct rc_nic *n = nic;
    struct ibv_qp_init_attr ia = {
        .send_cq = n->v.cq, .recv_cq = n->v.cq, .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = VB_SQ_DEPTH, .max_recv_wr = 1,
                .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 16}};
    struct ibv_qp *qp = ibv_create_qp(n->v.pd, &ia);
    if (!qp)
        return mki_error(NULL, mkErrTransport, "ibverbs: ibv_create_qp(RC) on "
                         "%s failed", n->v.name);
    n->qps[ep] = qp;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = n->v.port,
        .qp_access_flags = VB_ACCESS};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                  IBV_QP_ACCESS_FLAGS))
        return mki_error(NULL, mkErrTransport, "ibverbs: RC QP to INIT failed");
    struct rc_addr ad = {qp->qp_num, qp->qp_num & 0xffffff, n->v.pattr.lid,
                         (uint8_t)n->v.pattr.active_mtu, 0, {0}};
    memcpy(ad.gid, n->v.gid.raw, 16);
    memcpy(blob, &ad, sizeof(ad));
    return mkSuccess;
}

static mkResult_t rc_rtr_rts(struct rc_nic *n, struct ibv_qp *qp,
                             const struct rc_addr *r)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = r->mtu < n->v.pattr.active_mtu ? (enum ibv_mtu)r->mtu
                                                   : n->v.pattr.active_mtu,
        .dest_qp_num = r->qpn, .rq_psn = r->psn, .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr = {.dlid = r->lid, .port_num = n->v.port}};
    if (n->v.pattr.link_layer == IBV_LINK_LAYER_ETHERNET || r->lid == 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)n->v.gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER))
        return mki_error(NULL, mkErrTransport, "ibverbs: RC QP to RTR failed "
                         "(remote qpn %u)", r->qpn);
    struct ibv_qp_attr s = {
        .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
        .rnr_retry = 7, .sq_psn = qp->qp_num & 0xffffff, .max_rd_atomic = 1};
    if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT |
                                  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        return mki_error(NULL, mkErrTransport, "ibverbs: RC QP to RTS failed");
    return mkSuccess;
}

static mkResult_t rc_ep_connect(void *nic, int ep, const void *blob)
{
    struct rc_nic *n = nic;
    struct rc_addr r;
    memcpy(&r, blob, sizeof(r));
    return rc_rtr_rts(n, n->qps[ep], &r);
}

static mkResult_t rc_post(void *nic, const struct mki_nic_wr *w)
{
    struct rc_nic *n = nic;
    struct ibv_sge sge = {w->laddr, w->len, w->lkey};
    struct ibv_send_wr wr = {.wr_id = w->wr_id, .sg_list = &sge,
                             .num_sge = w->len ? 1 : 0}, *bad;
    wr.send_flags = (w->signaled ? IBV_SEND_SIGNALED : 0) |
                    (w->inline_data ? IBV_SEND_INLINE : 0);
    if (w->opcode == MKI_NIC_ATOMIC_ADD) {
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = w->raddr;
        wr.wr.atomic.rkey = w->rkey;
        wr.wr.atomic.compare_add = w->add;
    } else {
        wr.opcode = w->opcode == MKI_NIC_WRITE_IMM ? IBV_WR_RDMA_WRITE_WITH_IMM
                                                   : IBV_WR_RDMA_WRITE;
        wr.imm_data = htobe32(w->imm);
        wr.wr.rdma.remote_addr = w->raddr;
        wr.wr.rdma.rkey = w->rkey;
    }
    int rc = ibv_post_send(n->qps[w->ep], &wr, &bad);
    if (rc)
        return mki_error(NULL, mkErrTransport, "ibverbs: ibv_post_send on %s "
                         "failed: %s", n->v.name, strerror(rc));
    return mkSuccess;
}

static mkResult_t rc_post_recv(void *nic, int ep, uint64_t wr_id)
{
    return mki_error(NULL, mkErrInternal, "ibverbs: RC posts no receives");
}

static int rc_poll(void *nic, struct mki_nic_wc *wc, int max)
{
    return mki_vb_poll(&((struct rc_nic *)nic)->v, wc, max);
}

static void rc_close(void *nic)
{
    struct rc_nic *n = nic;
    for (int i = 0; i < n->nqp; i++)
        if (n->qps[i]) ibv_destroy_qp(n->qps[i]);
    free(n->qps);
    mki_vb_close(&n->v);
    free(n);
}

static const struct mki_nic_ops rc_ops = {
    .name = "ibverbs", .reg = rc_reg, .dereg = rc_dereg,
    .ep_create = rc_ep_create, .ep_connect = rc_ep_connect, .post = rc_post,
    .post_recv = rc_post_recv, .poll = rc_poll,
    .status_str = mki_vb_status_str, .close = rc_close,
};

static mkResult_t ib_init(const struct mki_net_args *a, void **ctx)
{
    struct rc_nic *n = calloc(1, sizeof(*n));
    if (!n) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    n->nqp = a->npeers;
    n->qps = calloc((size_t)a->npeers + 1, sizeof(*n->qps));
    int cqe = VB_SQ_DEPTH * (a->npeers + 1);
    mkResult_t res = n->qps ? mki_vb_open("ibverbs", a->device, a->port,
                                          not_efa, cqe, &n->v)
                            : mkErrNoMemory;
    if (res != mkSuccess) {
        free(n->qps);
        free(n);
        return res;
    }
    struct mki_nic_caps caps = {
        sizeof(struct rc_addr), n->v.pattr.max_msg_sz ? n->v.pattr.max_msg_sz
                                                      : (1u << 30),
        VB_SQ_DEPTH, 0};
    MKI_INFO(MKI_SUB_NET, "ibverbs: %s port %d, GID index %d, MTU %d", n->v.name,
             n->v.port, n->v.gid_index, 128 << n->v.pattr.active_mtu);
    return mki_rdma_init(a, MKI_RDMA_RC, &rc_ops, n, &caps, ctx);
}

const struct mki_transport_ops mki_transport_ibverbs = {
    .name = "ibverbs", .version = MKI_TRANSPORT_VERSION, .init = ib_init,
    .reg_mem = mki_rdma_reg_mem, .connect = mki_rdma_connect,
    .post_write = mki_rdma_post_write, .post_signal = mki_rdma_post_signal,
    .progress = mki_rdma_progress, .close = mki_rdma_close,
};

#else /* !HAVE_VERBS */

static mkResult_t ib_init(const struct mki_net_args *a, void **ctx)
{
    MKI_INFO(MKI_SUB_NET, "ibverbs transport not used: libmkernel was built "
             "without libibverbs (configure --with-verbs)");
    mki_error_quiet(NULL, "ibverbs transport: not built (configure found "
                    "no libibverbs)");
    return mkErrUnsupported;
}

const struct mki_transport_ops mki_transport_ibverbs = {
    .name = "ibverbs", .version = MKI_TRANSPORT_VERSION, .init = ib_init,
};

#endif
