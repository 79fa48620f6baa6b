/*
 * verbs.h - what ibverbs.c (RC) and efa.c (SRD) share over libibverbs:
 * opening a device and port, protection domain and completion queue,
 * memory registration (dma-buf for GPU memory, falling back to
 * ibv_reg_mr with nvidia-peermem), polling.  Only built with HAVE_VERBS.
 */
#ifndef MKI_VERBS_H
#define MKI_VERBS_H

#include <infiniband/verbs.h>
#include "rdma.h"

struct mki_vb_nic {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    uint8_t port;
    struct ibv_port_attr pattr;
    int gid_index;
    union ibv_gid gid;
    struct ibv_device_attr dattr;
    char name[64];
};

/* Open the NIC named `want` (NULL: the first whose name passes `keep`) on
 * `port` (0: the first active one).  mkErrUnsupported, with the reason at
 * INFO, when there is none. */
mkResult_t mki_vb_open(const char *transport, const char *want, int port,
                       int (*keep)(const char *name), int cqe,
                       struct mki_vb_nic *n);
void mki_vb_close(struct mki_vb_nic *n);
mkResult_t mki_vb_reg(struct mki_vb_nic *n, void *base, size_t size,
                      enum mki_mem_kind kind, uint32_t *lkey, uint32_t *rkey,
                      void **handle);
void mki_vb_dereg(void *handle);
int mki_vb_poll(struct mki_vb_nic *n, struct mki_nic_wc *wc, int max);
const char *mki_vb_status_str(int status);

#endif /* MKI_VERBS_H */
