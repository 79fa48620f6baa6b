/*
 * efa.c - the SRD transport over EFA (libibverbs + efadv).
 *
 * One SRD queue pair (efadv_create_qp_ex) per rank, an address handle per
 * peer, RDMA WRITE with immediate for every write.  SRD neither orders
 * writes nor their completions; proto.c counts arrivals per signal
 * and raises a counter only when all its writes are in.  Needs an EFA
 * device with RDMA write (efadv device caps) and rdma-core's libefa.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "rdma.h"

#if HAVE_VERBS && HAVE_EFA
#include <infiniband/efadv.h>
#include "verbs.h"

/* The kernel ABI bit for RDMA write; efadv.h before rdma-core 45 does not
 * name it, but the driver reports it all the same. */
#ifndef EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
#define EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE (1 << 3)
#endif

#define EFA_QKEY 0x6d6b0001u
#define EFA_DEPTH 512

struct efa_addr {
    uint8_t gid[16];
    uint32_t qpn, qkey;
};

struct efa_nic {
    struct mki_vb_nic v;
    struct efadv_device_attr ea;
    struct ibv_qp *qp;
    struct ibv_qp_ex *qpx;
    struct ibv_ah **ah;
    uint32_t *rqpn;
    int nep, sq_depth, rq_depth;
};

static int is_efa(const char *name) { return strncmp(name, "efa", 3) == 0; }

static mkResult_t efa_reg(void *nic, void *base, size_t size,
                          enum mki_mem_kind kind, uint32_t *lkey,
                          uint32_t *rkey, void **handle)
{
    return mki_vb_reg(&((struct efa_nic *)nic)->v, base, size, kind, lkey,
                      rkey, handle);
}

static void efa_dereg(void *nic, void *handle) { mki_vb_dereg(handle); }

static mkResult_t efa_qp_ready(struct efa_nic *n)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0,
                            .port_num = n->v.port, .qkey = EFA_QKEY};
    if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                     IBV_QP_PORT | IBV_QP_QKEY))
        return mki_error(NULL, mkErrTransport, "efa: SRD QP to INIT failed");
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
    if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE))
        return mki_error(NULL, mkErrTransport, "efa: SRD QP to RTR failed");
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
    if (n->ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY) {
        a.rnr_retry = 7; /* the device retries a write that found no recv */
        mask |= IBV_QP_RNR_RETRY;
    }
    if (ibv_modify_qp(n->qp, &a, mask))
        return mki_error(NULL, mkErrTransport, "efa: SRD QP to RTS failed");
    return mkSuccess;
}

static mkResult_t efa_ep_create(void *nic, int ep, void *blob)
{
    struct efa_nic *n = nic;
    if (!n->qp) {
        struct ibv_qp_init_attr_ex ia = {
            .send_cq = n->v.cq, .recv_cq = n->v.cq, .qp_type = IBV_QPT_DRIVER,
            .cap = {.max_send_wr = (uint32_t)n->sq_depth,
                    .max_recv_wr = (uint32_t)n->rq_depth, .max_send_sge = 1,
                    .max_recv_sge = 1},
            .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            .pd = n->v.pd,
            .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
                              IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM};
        struct efadv_qp_init_attr ea = {.driver_qp_type =
                                            EFADV_QP_DRIVER_TYPE_SRD};
        n->qp = efadv_create_qp_ex(n->v.ctx, &ia, &ea, sizeof(ea));
        if (!n->qp)
            return mki_error(NULL, mkErrTransport, "efa: efadv_create_qp_ex"
                             "(SRD) on %s failed", n->v.name);
        MKI_CHECK(efa_qp_ready(n));
        n->qpx = ibv_qp_to_qp_ex(n->qp);
    }
    struct efa_addr ad = {{0}, n->qp->qp_num, EFA_QKEY};
    memcpy(ad.gid, n->v.gid.raw, 16);
    memcpy(blob, &ad, sizeof(ad));
    return mkSuccess;
}

static mkResult_t efa_ep_connect(void *nic, int ep, const void *blob)
{
    struct efa_nic *n = nic;
    struct efa_addr r;
    memcpy(&r, blob, sizeof(r));
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = n->v.port};
    memcpy(aa.grh.dgid.raw, r.gid, 16);
    n->ah[ep] = ibv_create_ah(n->v.pd, &aa);
    if (!n->ah[ep])
        return mki_error(NULL, mkErrTransport, "efa: ibv_create_ah for peer "
                         "%d failed", ep);
    n->rqpn[ep] = r.qpn;
    return mkSuccess;
}

static mkResult_t efa_post(void *nic, const struct mki_nic_wr *w)
{
    struct efa_nic *n = nic;
    if (w->opcode == MKI_NIC_ATOMIC_ADD)
        return mki_error(NULL, mkErrInternal, "efa: SRD has no atomics");
    ibv_wr_start(n->qpx);
    n->qpx->wr_id = w->wr_id;
    n->qpx->wr_flags = w->signaled ? IBV_SEND_SIGNALED : 0;
    if (w->opcode == MKI_NIC_WRITE_IMM)
        ibv_wr_rdma_write_imm(n->qpx, w->rkey, w->raddr, htobe32(w->imm));
    else
        ibv_wr_rdma_write(n->qpx, w->rkey, w->raddr);
    if (w->len) ibv_wr_set_sge(n->qpx, w->lkey, w->laddr, w->len);
    else ibv_wr_set_sge_list(n->qpx, 0, NULL);
    ibv_wr_set_ud_addr(n->qpx, n->ah[w->ep], n->rqpn[w->ep], EFA_QKEY);
    int rc = ibv_wr_complete(n->qpx);
    if (rc)
        return mki_error(NULL, mkErrTransport, "efa: posting an RDMA write on "
                         "%s failed: %s", n->v.name, strerror(rc));
    return mkSuccess;
}

static mkResult_t efa_post_recv(void *nic, int ep, uint64_t wr_id)
{
    struct efa_nic *n = nic;
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = NULL, .num_sge = 0};
    struct ibv_recv_wr *bad;
    int rc = ibv_post_recv(n->qp, &wr, &bad);
    if (rc)
        return mki_error(NULL, mkErrTransport, "efa: ibv_post_recv on %s "
                         "failed: %s", n->v.name, strerror(rc));
    return mkSuccess;
}

static int efa_poll(void *nic, struct mki_nic_wc *wc, int max)
{
    return mki_vb_poll(&((struct efa_nic *)nic)->v, wc, max);
}

static void efa_close(void *nic)
{
    struct efa_nic *n = nic;
    for (int i = 0; i < n->nep; i++)
        if (n->ah && n->ah[i]) ibv_destroy_ah(n->ah[i]);
    if (n->qp) ibv_destroy_qp(n->qp);
    free(n->ah);
    free(n->rqpn);
    mki_vb_close(&n->v);
    free(n);
}

static const struct mki_nic_ops efa_ops = {
    .name = "efa", .reg = efa_reg, .dereg = efa_dereg,
    .ep_create = efa_ep_create, .ep_connect = efa_ep_connect,
    .post = efa_post, .post_recv = efa_post_recv, .poll = efa_poll,
    .status_str = mki_vb_status_str, .close = efa_close,
};

/* EFA specifics after the generic open: SRD with RDMA write, and sizes. */
static mkResult_t efa_caps(struct efa_nic *n, struct mki_nic_caps *caps)
{
    if (efadv_query_device(n->v.ctx, &n->ea, sizeof(n->ea)) != 0) {
        MKI_INFO(MKI_SUB_NET, "efa transport not used: %s is not an EFA "
                 "device (efadv_query_device failed)", n->v.name);
        mki_error_quiet(NULL, "efa: %s is not an EFA device", n->v.name);
        return mkErrUnsupported;
    }
    if (!(n->ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)) {
        MKI_INFO(MKI_SUB_NET, "efa transport not used: %s has no RDMA write "
                 "(needs a newer EFA device or driver)", n->v.name);
        mki_error_quiet(NULL, "efa: %s has no RDMA write", n->v.name);
        return mkErrUnsupported;
    }
    n->sq_depth = n->ea.max_sq_wr < EFA_DEPTH ? (int)n->ea.max_sq_wr : EFA_DEPTH;
    n->rq_depth = n->ea.max_rq_wr < EFA_DEPTH ? (int)n->ea.max_rq_wr : EFA_DEPTH;
    *caps = (struct mki_nic_caps){
        sizeof(struct efa_addr),
        n->ea.max_rdma_size ? n->ea.max_rdma_size : n->v.pattr.max_msg_sz,
        n->sq_depth, n->rq_depth};
    return mkSuccess;
}

static mkResult_t efa_init(const struct mki_net_args *a, void **ctx)
{
    struct efa_nic *n = calloc(1, sizeof(*n));
    if (!n) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    n->nep = a->npeers;
    n->ah = calloc((size_t)a->npeers + 1, sizeof(*n->ah));
    n->rqpn = calloc((size_t)a->npeers + 1, sizeof(*n->rqpn));
    struct mki_nic_caps caps;
    mkResult_t res = n->ah && n->rqpn ? mkSuccess : mkErrNoMemory;
    if (res == mkSuccess)
        res = mki_vb_open("efa", a->device, a->port, is_efa, 2 * EFA_DEPTH,
                          &n->v);
    if (res == mkSuccess) res = efa_caps(n, &caps);
    if (res != mkSuccess) {
        efa_close(n);
        return res;
    }
    MKI_INFO(MKI_SUB_NET, "efa: %s port %d, SRD, max write %u bytes",
             n->v.name, n->v.port, caps.max_msg);
    return mki_rdma_init(a, MKI_RDMA_SRD, &efa_ops, n, &caps, ctx);
}

const struct mki_transport_ops mki_transport_efa = {
    .name = "efa", .version = MKI_TRANSPORT_VERSION, .init = efa_init,
    .reg_mem = mki_rdma_reg_mem, .connect = mki_rdma_connect,
    .post_write = mki_rdma_post_write, .post_signal = mki_rdma_post_signal,
    .progress = mki_rdma_progress, .close = mki_rdma_close,
};

#else /* !(HAVE_VERBS && HAVE_EFA) */

static mkResult_t efa_init(const struct mki_net_args *a, void **ctx)
{
    MKI_INFO(MKI_SUB_NET, "efa transport not used: libmkernel was built "
             "without libibverbs/libefa (configure --with-efa)");
    mki_error_quiet(NULL, "efa transport: not built (configure found no "
                    "efadv.h / libefa)");
    return mkErrUnsupported;
}

const struct mki_transport_ops mki_transport_efa = {
    .name = "efa", .version = MKI_TRANSPORT_VERSION, .init = efa_init,
};

#endif
