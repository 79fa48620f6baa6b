/*
 * rdma.h - the RDMA protocol engine shared by ibverbs (RC) and EFA (SRD),
 * and the small NIC interface it drives.
 *
 * The engine (proto.c) holds all protocol logic: in-flight caps,
 * selective signalling, ordered data-then-signal on RC, per-signal
 * completion counting on SRD, error completions.  A NIC backend only
 * posts work requests and polls completions: ibverbs.c and efa.c over
 * libibverbs/libefa, fake_nic.c (tests only) over an in-process fabric
 * that delivers out of order and completes late.  So the tests run the
 * very code that runs on a real NIC.
 */
#ifndef MKI_RDMA_H
#define MKI_RDMA_H

#include <stddef.h>
#include <stdint.h>
#include "transports/transport.h"

enum mki_nic_opcode {
    MKI_NIC_WRITE = 0,      /* RDMA WRITE */
    MKI_NIC_WRITE_IMM = 1,  /* RDMA WRITE with immediate (consumes a recv) */
    MKI_NIC_ATOMIC_ADD = 2  /* 8-byte fetch-and-add, result to laddr */
};

struct mki_nic_wr {
    int ep;                 /* endpoint: the peer index */
    int opcode;             /* enum mki_nic_opcode */
    int signaled;           /* ask for a completion */
    uint64_t wr_id;
    uint64_t laddr;         /* local source (or atomic result) */
    uint32_t lkey;
    uint32_t len;           /* 0: no scatter entry */
    int inline_data;        /* copy laddr[0..len) at post time */
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm;           /* host order */
    uint64_t add;           /* ATOMIC_ADD operand */
};

struct mki_nic_wc {
    uint64_t wr_id;
    int status;             /* 0: success; else backend code (status_str) */
    int is_recv;            /* a write-with-immediate arrived */
    uint32_t imm;           /* host order, when is_recv */
    uint32_t vendor_err;
};

struct mki_nic_ops {
    const char *name;
    /* Register memory; *handle is passed back to dereg. */
    mkResult_t (*reg)(void *nic, void *base, size_t size,
                      enum mki_mem_kind kind, uint32_t *lkey, uint32_t *rkey,
                      void **handle);
    void (*dereg)(void *nic, void *handle);
    /* Endpoints: create one per peer index (RC) or share one (SRD), write
     * its address blob (addr_size bytes), then connect it to the peer's. */
    mkResult_t (*ep_create)(void *nic, int ep, void *blob);
    mkResult_t (*ep_connect)(void *nic, int ep, const void *remote_blob);
    /* Non-blocking; mkErrTransport only on a broken queue. */
    mkResult_t (*post)(void *nic, const struct mki_nic_wr *wr);
    mkResult_t (*post_recv)(void *nic, int ep, uint64_t wr_id);
    /* Up to max completions; <0 on a broken completion queue. */
    int (*poll)(void *nic, struct mki_nic_wc *wc, int max);
    const char *(*status_str)(int status);
    void (*close)(void *nic);
};

/* What a backend can do, filled at open. */
struct mki_nic_caps {
    size_t addr_size;       /* bytes of an endpoint blob */
    uint32_t max_msg;       /* largest single write */
    int sq_depth;           /* send work requests in flight (per endpoint
                             * for RC, per NIC for SRD) */
    int rq_depth;           /* receives kept posted (SRD) */
};

enum mki_rdma_mode { MKI_RDMA_RC = 0, MKI_RDMA_SRD = 1 };

/* Build an engine over an opened NIC (takes ownership of nic, also on
 * failure).  The returned ctx works with the mki_rdma_* ops below. */
mkResult_t mki_rdma_init(const struct mki_net_args *args,
                         enum mki_rdma_mode mode,
                         const struct mki_nic_ops *nops, void *nic,
                         const struct mki_nic_caps *caps, void **ctx);
mkResult_t mki_rdma_reg_mem(void *ctx, void *base, size_t size,
                            enum mki_mem_kind kind, int *region);
mkResult_t mki_rdma_connect(void *ctx);
mkResult_t mki_rdma_post_write(void *ctx, int peer, uint32_t region,
                               uint64_t loff, uint64_t roff, uint64_t bytes,
                               const struct mki_net_signal *sig, int *posted);
mkResult_t mki_rdma_post_signal(void *ctx, int peer,
                                const struct mki_net_signal *sig, int *posted);
mkResult_t mki_rdma_progress(void *ctx, uint64_t *completed);
void mki_rdma_close(void *ctx);

/* SRD immediate: | type:2 | slot:8 | source rank:22 | */
#define MKI_IMM_DATA 1u
#define MKI_IMM_DESC 2u
#define MKI_IMM_ACK 3u
#define MKI_SRD_SLOTS 256
#define MKI_SRD_MAX_RANKS (1 << 22)
static inline uint32_t mki_imm(uint32_t type, uint32_t slot, uint32_t src)
{
    return type << 30 | (slot & 0xffu) << 22 | (src & 0x3fffffu);
}

#endif /* MKI_RDMA_H */
