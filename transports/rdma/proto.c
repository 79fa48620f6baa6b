/*
 * proto.c - the RC and SRD protocols over a NIC backend (rdma.h).
 *
 * RC (ibverbs): one QP per peer; a QP delivers in order, so a command is
 *
 *     WRITE chunk 0 .. WRITE chunk n-1, then WRITE(inline value)  (SET)
 *                                       or ATOMIC fetch-add       (ADD)
 *
 * and the signal lands after its data.  Selective signalling: one WR in
 * sig_every asks for a completion; RC completes in order, so a completion
 * of WR s retires every WR <= s and every command ending there.  When the
 * proxy posts nothing for a progress round and the tail is unsignalled, a
 * signalled zero-byte WRITE retires it (so "done" never stalls).  At most
 * sq_depth WRs are in flight per QP.
 *
 * SRD (EFA): delivery and completion are unordered.  A command takes one
 * of MKI_SRD_SLOTS slots of its peer and becomes
 *
 *     WRITE_IMM(data chunk, imm DATA|slot|me) x n
 *     WRITE_IMM(descriptor -> peer's rx table[me][slot], imm DESC|slot|me)
 *
 * with descriptor {total = n + 1, signal op, region, offset, value}.  The
 * receiver counts arrivals per (source, slot); once the descriptor is in
 * and the count equals total, every byte is there: it raises the signal
 * (once), and answers ACK|slot so the sender may reuse the slot.  A fence
 * (post_signal) waits until every slot of that peer came back.  Every SRD
 * WR is signalled: unordered completions say nothing about earlier WRs.
 *
 * Any error completion fails the context with mkErrTransport and the
 * backend's status string (ibv_wc_status_str on real NICs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "rdma.h"

#define CTRL_TX 64
#define DESC_SIZE 32

struct rp_desc {
    uint32_t total, op, region, pad;
    uint64_t offset, value;
};

struct rp_region {
    char *base;
    uint64_t size;
    enum mki_mem_kind kind;
    uint32_t lkey, rkey;
    void *handle;
};

struct rp_tx {
    int busy, wr_left, acked;
};

struct rp_rx {
    uint32_t count;
    int desc_seen;
};

struct rp_peer {
    int rank;
    int remote_idx;                 /* our index in the peer's list */
    uint32_t nregions;
    struct mki_mr_desc mr[MKI_NET_MAX_REGIONS], ctrl;
    /* RC */
    uint64_t posted, done, last_sig;
    uint64_t *cmd_end;              /* ring of sq_depth + 1 */
    int cmd_head, cmd_tail;
    /* SRD */
    struct rp_tx tx[MKI_SRD_SLOTS];
    struct rp_rx rx[MKI_SRD_SLOTS];
    int tx_inuse, next_slot;
};

struct rp_ctx {
    struct mki_net_args a;
    enum mki_rdma_mode mode;
    const struct mki_nic_ops *nops;
    void *nic;
    struct mki_nic_caps caps;
    int sig_every;
    int *peer_of;
    struct rp_peer *peers;
    int nregions;
    struct rp_region reg[MKI_NET_MAX_REGIONS], ctrl;
    uint64_t rx_base;               /* offset of the rx table in ctrl */
    int sq_out;                     /* SRD: WRs in flight on the QP */
    int posts;                      /* posts since the last progress */
    int *acks, nacks;               /* SRD: (peer << 8 | slot) to answer */
    uint64_t completed;
    mkResult_t err;
};

static mkResult_t fail(struct rp_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static mkResult_t fail(struct rp_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mki_verror(NULL, mkErrTransport, fmt, ap);
    va_end(ap);
    if (c->err == mkSuccess) c->err = mkErrTransport;
    return mkErrTransport;
}

/* ---- init / close ------------------------------------------------- */

void mki_rdma_close(void *ctx)
{
    struct rp_ctx *c = ctx;
    if (!c) return;
    for (int i = 0; i < c->nregions; i++)
        c->nops->dereg(c->nic, c->reg[i].handle);
    if (c->ctrl.handle) c->nops->dereg(c->nic, c->ctrl.handle);
    c->nops->close(c->nic);
    for (int p = 0; c->peers && p < c->a.npeers; p++) free(c->peers[p].cmd_end);
    free(c->ctrl.base);
    free(c->peers);
    free(c->peer_of);
    free(c->acks);
    free(c);
}

static mkResult_t init_peers(struct rp_ctx *c)
{
    int n = c->a.npeers;
    c->peer_of = malloc(sizeof(int) * (size_t)c->a.nranks);
    c->peers = calloc((size_t)n + 1, sizeof(*c->peers));
    c->acks = malloc(sizeof(int) * ((size_t)n * MKI_SRD_SLOTS + 1));
    if (!c->peer_of || !c->peers || !c->acks)
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    for (int r = 0; r < c->a.nranks; r++) c->peer_of[r] = -1;
    for (int p = 0; p < n; p++) {
        int r = c->a.peers[p];
        if (r < 0 || r >= c->a.nranks || r == c->a.rank || c->peer_of[r] >= 0)
            return mki_error(NULL, mkErrInvalidArgument, "%s transport: peer "
                             "list entry %d (rank %d) is out of range, this "
                             "rank, or repeated", c->nops->name, p, r);
        c->peer_of[r] = p;
        c->peers[p].rank = r;
        c->peers[p].cmd_end = calloc((size_t)c->caps.sq_depth + 1, 8);
        if (!c->peers[p].cmd_end)
            return mki_error(NULL, mkErrNoMemory, "out of host memory");
    }
    return mkSuccess;
}

/* The control region: atomic scratch, then the descriptors we send, then
 * the table peers write their descriptors into. */
static mkResult_t init_ctrl(struct rp_ctx *c)
{
    uint64_t table = (uint64_t)c->a.npeers * MKI_SRD_SLOTS * DESC_SIZE;
    c->rx_base = CTRL_TX + table;
    c->ctrl.size = c->rx_base + table;
    c->ctrl.base = calloc(1, c->ctrl.size);
    if (!c->ctrl.base)
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    return c->nops->reg(c->nic, c->ctrl.base, c->ctrl.size, MKI_MEM_HOST,
                        &c->ctrl.lkey, &c->ctrl.rkey, &c->ctrl.handle);
}

mkResult_t mki_rdma_init(const struct mki_net_args *args,
                         enum mki_rdma_mode mode,
                         const struct mki_nic_ops *nops, void *nic,
                         const struct mki_nic_caps *caps, void **out)
{
    struct rp_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        nops->close(nic);
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    }
    c->a = *args;
    c->mode = mode;
    c->nops = nops;
    c->nic = nic;
    c->caps = *caps;
    c->sig_every = caps->sq_depth / 4 > 0 ? caps->sq_depth / 4 : 1;
    mkResult_t res = mkSuccess;
    if (args->rank < 0 || args->rank >= args->nranks || args->npeers < 0 ||
        (args->npeers && !args->peers) || !args->boot ||
        args->nranks > MKI_SRD_MAX_RANKS || caps->sq_depth < 2 ||
        caps->max_msg == 0)
        res = mki_error(NULL, mkErrInvalidArgument, "%s transport: rank %d "
                        "of %d with %d peers is not a valid setup", nops->name,
                        args->rank, args->nranks, args->npeers);
    if (res == mkSuccess) res = init_peers(c);
    if (res == mkSuccess) res = init_ctrl(c);
    if (res != mkSuccess) {
        mki_rdma_close(c);
        return res;
    }
    *out = c;
    return mkSuccess;
}

mkResult_t mki_rdma_reg_mem(void *ctx, void *base, size_t size,
                            enum mki_mem_kind kind, int *region)
{
    struct rp_ctx *c = ctx;
    if (c->nregions == MKI_NET_MAX_REGIONS || !base || !size)
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: region "
                         "%d: base %p size %zu (at most %d regions, not "
                         "empty)", c->nops->name, c->nregions, base, size,
                         MKI_NET_MAX_REGIONS);
    struct rp_region *r = &c->reg[c->nregions];
    MKI_CHECK(c->nops->reg(c->nic, base, size, kind, &r->lkey, &r->rkey,
                           &r->handle));
    r->base = base;
    r->size = size;
    r->kind = kind;
    *region = c->nregions++;
    return mkSuccess;
}

/* ---- connect ------------------------------------------------------ */

struct rp_rec {
    uint32_t nregions, pad;
    struct mki_mr_desc mr[MKI_NET_MAX_REGIONS], ctrl;
};

static size_t entry_size(const struct rp_ctx *c)
{
    return (8 + c->caps.addr_size + 7) & ~(size_t)7;
}

static size_t rec_size(const struct rp_ctx *c)
{
    return sizeof(struct rp_rec) + (size_t)c->a.nranks * entry_size(c);
}

/* Fill this rank's record: regions, then per destination rank our index
 * of it and the endpoint blob it must connect to. */
static mkResult_t fill_rec(struct rp_ctx *c, char *rec)
{
    struct rp_rec *h = (struct rp_rec *)rec;
    h->nregions = (uint32_t)c->nregions;
    for (int i = 0; i < c->nregions; i++)
        h->mr[i] = (struct mki_mr_desc){(uint64_t)(uintptr_t)c->reg[i].base,
                                        c->reg[i].size, c->reg[i].rkey};
    h->ctrl = (struct mki_mr_desc){(uint64_t)(uintptr_t)c->ctrl.base,
                                   c->ctrl.size, c->ctrl.rkey};
    char *ent = rec + sizeof(*h);
    for (int p = 0; p < c->a.npeers; p++) {
        char *e = ent + (size_t)c->peers[p].rank * entry_size(c);
        *(int32_t *)e = p;
        if (c->mode == MKI_RDMA_RC || p == 0)
            MKI_CHECK(c->nops->ep_create(c->nic, c->mode == MKI_RDMA_RC ? p : 0,
                                         e + 8));
        else
            memcpy(e + 8, ent + (size_t)c->peers[0].rank * entry_size(c) + 8,
                   c->caps.addr_size);
    }
    return mkSuccess;
}

static mkResult_t take_rec(struct rp_ctx *c, int p, const char *rec)
{
    const struct rp_rec *h = (const struct rp_rec *)rec;
    struct rp_peer *pe = &c->peers[p];
    const char *e = rec + sizeof(*h) + (size_t)c->a.rank * entry_size(c);
    pe->nregions = h->nregions;
    memcpy(pe->mr, h->mr, sizeof(pe->mr));
    pe->ctrl = h->ctrl;
    pe->remote_idx = *(const int32_t *)e;
    if (pe->nregions > MKI_NET_MAX_REGIONS || pe->remote_idx < 0)
        return mki_error(NULL, mkErrInvalidUsage, "%s transport: rank %d does "
                         "not list rank %d as a peer (peer lists must be "
                         "symmetric)", c->nops->name, pe->rank, c->a.rank);
    return c->nops->ep_connect(c->nic, p, e + 8);
}

mkResult_t mki_rdma_connect(void *ctx)
{
    struct rp_ctx *c = ctx;
    size_t rs = rec_size(c);
    char *all = calloc((size_t)c->a.nranks, rs);
    if (!all) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    char *mine = all + (size_t)c->a.rank * rs;
    /* Unlisted ranks read as "not a peer". */
    for (int r = 0; r < c->a.nranks; r++)
        *(int32_t *)(mine + sizeof(struct rp_rec) + (size_t)r * entry_size(c)) =
            -1;
    mkResult_t res;
    MKI_CHECK_GOTO(fill_rec(c, mine), res, free_all);
    MKI_CHECK_GOTO(c->a.boot->allgather(c->a.boot_ctx, all, rs), res,
                   free_all);
    for (int p = 0; p < c->a.npeers; p++)
        MKI_CHECK_GOTO(take_rec(c, p, all + (size_t)c->peers[p].rank * rs),
                       res, free_all);
    if (c->mode == MKI_RDMA_SRD && c->a.npeers > 0)
        for (int i = 0; i < c->caps.rq_depth; i++)
            MKI_CHECK_GOTO(c->nops->post_recv(c->nic, 0, (uint64_t)i), res,
                           free_all);
    MKI_INFO(MKI_SUB_NET, "%s transport: %d peers connected (%s)",
             c->nops->name, c->a.npeers, c->mode == MKI_RDMA_RC ? "RC" : "SRD");
free_all:
    free(all);
    if (res != mkSuccess && c->err == mkSuccess) c->err = res;
    return res;
}

/* ---- posting ------------------------------------------------------ */

static mkResult_t check_args(struct rp_ctx *c, int peer, uint32_t region,
                             uint64_t loff, uint64_t roff, uint64_t bytes,
                             const struct mki_net_signal *sig,
                             struct rp_peer **pe)
{
    if (c->err != mkSuccess) return c->err;
    int p = (peer >= 0 && peer < c->a.nranks) ? c->peer_of[peer] : -1;
    if (p < 0)
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: rank %d "
                         "is not a connected peer of rank %d", c->nops->name,
                         peer, c->a.rank);
    *pe = &c->peers[p];
    uint64_t rsz[MKI_NET_MAX_REGIONS];
    for (int i = 0; i < MKI_NET_MAX_REGIONS; i++) rsz[i] = (*pe)->mr[i].size;
    if ((int)region >= c->nregions || region >= (*pe)->nregions ||
        !mki_span_ok(loff, bytes, c->reg[region].size) ||
        !mki_span_ok(roff, bytes, rsz[region]))
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: write of "
                         "%llu bytes at local offset %llu / remote offset %llu "
                         "is outside region %u", c->nops->name,
                         (unsigned long long)bytes, (unsigned long long)loff,
                         (unsigned long long)roff, region);
    if (sig && !mki_signal_ok(sig, rsz, (int)(*pe)->nregions))
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: signal "
                         "at region %u offset %llu is not an 8-aligned counter "
                         "inside a region of rank %d", c->nops->name,
                         sig->region, (unsigned long long)sig->offset, peer);
    return mkSuccess;
}

static mkResult_t post(struct rp_ctx *c, const struct mki_nic_wr *wr)
{
    mkResult_t r = c->nops->post(c->nic, wr);
    if (r != mkSuccess && c->err == mkSuccess) c->err = r;
    return r;
}

static uint64_t nchunks(const struct rp_ctx *c, uint64_t bytes)
{
    return (bytes + c->caps.max_msg - 1) / c->caps.max_msg;
}

/* Data chunks of one command, as WRITE (RC) or WRITE_IMM (SRD). */
static mkResult_t post_chunks(struct rp_ctx *c, int p, uint32_t region,
                              uint64_t loff, uint64_t roff, uint64_t bytes,
                              int slot)
{
    struct rp_peer *pe = &c->peers[p];
    for (uint64_t o = 0; o < bytes; o += c->caps.max_msg) {
        uint64_t len = bytes - o < c->caps.max_msg ? bytes - o : c->caps.max_msg;
        struct mki_nic_wr wr = {
            .ep = p, .opcode = MKI_NIC_WRITE, .lkey = c->reg[region].lkey,
            .laddr = (uint64_t)(uintptr_t)(c->reg[region].base + loff + o),
            .len = (uint32_t)len, .raddr = pe->mr[region].base + roff + o,
            .rkey = (uint32_t)pe->mr[region].key};
        if (c->mode == MKI_RDMA_SRD) {
            wr.opcode = MKI_NIC_WRITE_IMM;
            wr.signaled = 1;
            wr.imm = mki_imm(MKI_IMM_DATA, (uint32_t)slot, (uint32_t)c->a.rank);
            wr.wr_id = (uint64_t)p << 32 | (uint64_t)slot << 8 | 1;
        } else {
            wr.wr_id = (uint64_t)p << 40 | ++pe->posted;
            wr.signaled = pe->posted - pe->last_sig >= (uint64_t)c->sig_every;
            if (wr.signaled) pe->last_sig = pe->posted;
        }
        MKI_CHECK(post(c, &wr));
    }
    return mkSuccess;
}

/* ---- RC ----------------------------------------------------------- */

static mkResult_t rc_post_sig(struct rp_ctx *c, int p,
                              const struct mki_net_signal *s)
{
    struct rp_peer *pe = &c->peers[p];
    struct mki_nic_wr wr = {
        .ep = p, .raddr = pe->mr[s->region].base + s->offset,
        .rkey = (uint32_t)pe->mr[s->region].key};
    /* MAX as a store: this QP delivers in order and the values of one
     * counter are posted in increasing order (transport.h). */
    if (s->op == MKI_SIG_SET || s->op == MKI_SIG_MAX) {
        wr.opcode = MKI_NIC_WRITE;
        wr.laddr = (uint64_t)(uintptr_t)&s->value;
        wr.len = 8;
        wr.inline_data = 1;
    } else {
        wr.opcode = MKI_NIC_ATOMIC_ADD;
        wr.laddr = (uint64_t)(uintptr_t)c->ctrl.base;
        wr.lkey = c->ctrl.lkey;
        wr.len = 8;
        wr.add = s->value;
    }
    wr.wr_id = (uint64_t)p << 40 | ++pe->posted;
    wr.signaled = pe->posted - pe->last_sig >= (uint64_t)c->sig_every;
    if (wr.signaled) pe->last_sig = pe->posted;
    return post(c, &wr);
}

static mkResult_t rc_command(struct rp_ctx *c, struct rp_peer *pe,
                             uint32_t region, uint64_t loff, uint64_t roff,
                             uint64_t bytes, const struct mki_net_signal *sig,
                             int *posted)
{
    int p = (int)(pe - c->peers);
    int sigw = sig && sig->op != MKI_SIG_NONE;
    uint64_t nwr = nchunks(c, bytes) + (uint64_t)sigw;
    if (nwr == 0) {
        c->completed++;
        *posted = 1;
        return mkSuccess;
    }
    if (nwr > (uint64_t)c->caps.sq_depth - 1)
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: a write "
                         "of %llu bytes needs %llu work requests, more than "
                         "the queue holds (%d); split it", c->nops->name,
                         (unsigned long long)bytes, (unsigned long long)nwr,
                         c->caps.sq_depth - 1);
    /* One WR stays free for the idle flush. */
    if (pe->posted - pe->done + nwr > (uint64_t)c->caps.sq_depth - 1)
        return mkSuccess;
    MKI_CHECK(post_chunks(c, p, region, loff, roff, bytes, -1));
    if (sigw) MKI_CHECK(rc_post_sig(c, p, sig));
    pe->cmd_end[pe->cmd_tail] = pe->posted;
    pe->cmd_tail = (pe->cmd_tail + 1) % (c->caps.sq_depth + 1);
    c->posts++;
    *posted = 1;
    return mkSuccess;
}

static void rc_retire(struct rp_ctx *c, struct rp_peer *pe, uint64_t seq)
{
    if (seq > pe->done) pe->done = seq;
    while (pe->cmd_head != pe->cmd_tail && pe->cmd_end[pe->cmd_head] <= pe->done) {
        pe->cmd_head = (pe->cmd_head + 1) % (c->caps.sq_depth + 1);
        c->completed++;
    }
}

/* Retire an unsignalled tail with a signalled zero-byte WRITE. */
static mkResult_t rc_flush_idle(struct rp_ctx *c)
{
    for (int p = 0; p < c->a.npeers; p++) {
        struct rp_peer *pe = &c->peers[p];
        if (pe->posted == pe->last_sig || pe->posted - pe->done >=
                                              (uint64_t)c->caps.sq_depth)
            continue;
        struct mki_nic_wr wr = {
            .ep = p, .opcode = MKI_NIC_WRITE, .signaled = 1,
            .wr_id = (uint64_t)p << 40 | ++pe->posted,
            .raddr = pe->ctrl.base, .rkey = (uint32_t)pe->ctrl.key};
        pe->last_sig = pe->posted;
        MKI_CHECK(post(c, &wr));
    }
    return mkSuccess;
}

/* ---- SRD ---------------------------------------------------------- */

static int srd_slot(struct rp_peer *pe)
{
    for (int i = 0; i < MKI_SRD_SLOTS; i++) {
        int s = (pe->next_slot + i) % MKI_SRD_SLOTS;
        if (!pe->tx[s].busy) {
            pe->next_slot = (s + 1) % MKI_SRD_SLOTS;
            return s;
        }
    }
    return -1;
}

static mkResult_t srd_command(struct rp_ctx *c, struct rp_peer *pe,
                              uint32_t region, uint64_t loff, uint64_t roff,
                              uint64_t bytes, const struct mki_net_signal *sig,
                              int *posted)
{
    int p = (int)(pe - c->peers);
    uint64_t nwr = nchunks(c, bytes) + 1;
    if (nwr > (uint64_t)c->caps.sq_depth / 2)
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: a write "
                         "of %llu bytes needs %llu work requests, more than "
                         "half the queue (%d); split it", c->nops->name,
                         (unsigned long long)bytes, (unsigned long long)nwr,
                         c->caps.sq_depth);
    /* Half the queue is kept for acknowledgements. */
    if (c->sq_out + (int)nwr > c->caps.sq_depth / 2 ||
        pe->tx_inuse == MKI_SRD_SLOTS)
        return mkSuccess;
    int slot = srd_slot(pe);
    pe->tx[slot] = (struct rp_tx){1, (int)nwr, 0};
    pe->tx_inuse++;
    uint64_t doff = CTRL_TX + ((uint64_t)p * MKI_SRD_SLOTS + slot) * DESC_SIZE;
    struct rp_desc *d = (struct rp_desc *)(c->ctrl.base + doff);
    *d = (struct rp_desc){(uint32_t)nwr, sig ? sig->op : 0,
                          sig ? sig->region : 0, 0, sig ? sig->offset : 0,
                          sig ? sig->value : 0};
    c->sq_out += (int)nwr;
    MKI_CHECK(post_chunks(c, p, region, loff, roff, bytes, slot));
    struct mki_nic_wr wr = {
        .ep = p, .opcode = MKI_NIC_WRITE_IMM, .signaled = 1,
        .wr_id = (uint64_t)p << 32 | (uint64_t)slot << 8 | 1,
        .laddr = (uint64_t)(uintptr_t)d, .lkey = c->ctrl.lkey,
        .len = DESC_SIZE, .rkey = (uint32_t)pe->ctrl.key,
        /* the peer's rx table starts halfway after its tx area */
        .raddr = pe->ctrl.base + CTRL_TX + (pe->ctrl.size - CTRL_TX) / 2 +
                 ((uint64_t)pe->remote_idx * MKI_SRD_SLOTS + slot) * DESC_SIZE,
        .imm = mki_imm(MKI_IMM_DESC, (uint32_t)slot, (uint32_t)c->a.rank)};
    MKI_CHECK(post(c, &wr));
    c->posts++;
    *posted = 1;
    return mkSuccess;
}

static void srd_tx_release(struct rp_peer *pe, int slot)
{
    struct rp_tx *t = &pe->tx[slot];
    if (t->busy && t->acked && t->wr_left == 0) {
        t->busy = 0;
        pe->tx_inuse--;
    }
}

static mkResult_t srd_send_acks(struct rp_ctx *c)
{
    while (c->nacks > 0 && c->sq_out < c->caps.sq_depth) {
        int a = c->acks[--c->nacks], p = a >> 8, slot = a & 0xff;
        struct rp_peer *pe = &c->peers[p];
        struct mki_nic_wr wr = {
            .ep = p, .opcode = MKI_NIC_WRITE_IMM, .signaled = 1,
            .wr_id = (uint64_t)p << 32 | (uint64_t)slot << 8 | 2,
            .raddr = pe->ctrl.base, .rkey = (uint32_t)pe->ctrl.key,
            .imm = mki_imm(MKI_IMM_ACK, (uint32_t)slot, (uint32_t)c->a.rank)};
        c->sq_out++;
        MKI_CHECK(post(c, &wr));
    }
    return mkSuccess;
}

/* Host memory: a release store or add here; device memory: the runtime's
 * hook (the proxy cannot store to it). */
static mkResult_t raise_signal(struct rp_ctx *c, const struct mki_net_signal *s)
{
    const struct rp_region *r = &c->reg[s->region];
    if (r->kind == MKI_MEM_HOST) {
        mki_signal_apply(r->base, s);
        return mkSuccess;
    }
    if (!c->a.raise_device_signal) {
        mki_error(NULL, mkErrUnsupported, "%s transport: a signal into device "
                  "memory needs the runtime's raise_device_signal hook",
                  c->nops->name);
        c->err = mkErrUnsupported;
        return mkErrUnsupported;
    }
    mkResult_t res = c->a.raise_device_signal(c->a.dev_ctx,
                                              r->base + s->offset, s->op,
                                              s->value);
    if (res != mkSuccess && c->err == mkSuccess) c->err = res;
    return res;
}

/* All of a command's writes are in: check its descriptor, raise the
 * signal once, and queue the acknowledgement. */
static mkResult_t srd_try_finish(struct rp_ctx *c, int p, int slot)
{
    struct rp_rx *x = &c->peers[p].rx[slot];
    const struct rp_desc *d = (const struct rp_desc *)
        (c->ctrl.base + c->rx_base + ((uint64_t)p * MKI_SRD_SLOTS + slot) *
                                         DESC_SIZE);
    if (!x->desc_seen) return mkSuccess;
    if (x->count > d->total || d->total == 0)
        return fail(c, "%s transport: rank %d slot %d: %u writes arrived for "
                    "a command of %u", c->nops->name, c->peers[p].rank, slot,
                    x->count, d->total);
    if (x->count < d->total) return mkSuccess;
    uint64_t sizes[MKI_NET_MAX_REGIONS];
    for (int i = 0; i < MKI_NET_MAX_REGIONS; i++)
        sizes[i] = i < c->nregions ? c->reg[i].size : 0;
    struct mki_net_signal s = {d->op, d->region, d->offset, d->value};
    if (!mki_signal_ok(&s, sizes, c->nregions))
        return fail(c, "%s transport: rank %d sent a signal outside the "
                    "registered regions (region %u offset %llu)",
                    c->nops->name, c->peers[p].rank, s.region,
                    (unsigned long long)s.offset);
    if (s.op != MKI_SIG_NONE) MKI_CHECK(raise_signal(c, &s));
    *x = (struct rp_rx){0, 0};
    c->acks[c->nacks++] = p << 8 | slot;
    return mkSuccess;
}

static mkResult_t srd_recv(struct rp_ctx *c, const struct mki_nic_wc *wc)
{
    MKI_CHECK(c->nops->post_recv(c->nic, 0, wc->wr_id));
    uint32_t type = wc->imm >> 30, slot = (wc->imm >> 22) & 0xff;
    uint32_t src = wc->imm & 0x3fffff;
    int p = src < (uint32_t)c->a.nranks ? c->peer_of[src] : -1;
    if (p < 0 || type == 0)
        return fail(c, "%s transport: a write arrived with immediate 0x%x "
                    "that names no peer (source %u)", c->nops->name, wc->imm,
                    src);
    struct rp_peer *pe = &c->peers[p];
    if (type == MKI_IMM_ACK) {
        if (!pe->tx[slot].busy || pe->tx[slot].acked)
            return fail(c, "%s transport: rank %d acknowledged slot %u that "
                        "was not in flight", c->nops->name, pe->rank, slot);
        pe->tx[slot].acked = 1;
        srd_tx_release(pe, (int)slot);
        return mkSuccess;
    }
    pe->rx[slot].count++;
    if (type == MKI_IMM_DESC) pe->rx[slot].desc_seen = 1;
    return srd_try_finish(c, p, (int)slot);
}

static void srd_send_done(struct rp_ctx *c, uint64_t wr_id)
{
    int p = (int)(wr_id >> 32), slot = (int)(wr_id >> 8) & 0xff;
    c->sq_out--;
    if ((wr_id & 0xff) != 1) return; /* an acknowledgement we sent */
    struct rp_peer *pe = &c->peers[p];
    if (--pe->tx[slot].wr_left == 0) {
        c->completed++;
        srd_tx_release(pe, slot);
    }
}

/* ---- progress ----------------------------------------------------- */

static mkResult_t bad_wc(struct rp_ctx *c, const struct mki_nic_wc *wc)
{
    int p = c->mode == MKI_RDMA_RC ? (int)(wc->wr_id >> 40)
                                   : (int)(wc->wr_id >> 32);
    int rank = !wc->is_recv && p < c->a.npeers ? c->peers[p].rank : -1;
    return fail(c, "%s transport: %s %s rank %d failed: %s (status %d, "
                "vendor error 0x%x)", c->nops->name,
                wc->is_recv ? "a receive" : "an RDMA write",
                wc->is_recv ? "from" : "to", rank,
                c->nops->status_str(wc->status), wc->status, wc->vendor_err);
}

static mkResult_t handle_wc(struct rp_ctx *c, const struct mki_nic_wc *wc)
{
    if (wc->status != 0) return bad_wc(c, wc);
    if (c->mode == MKI_RDMA_SRD) {
        if (wc->is_recv) return srd_recv(c, wc);
        srd_send_done(c, wc->wr_id);
        return mkSuccess;
    }
    int p = (int)(wc->wr_id >> 40);
    if (wc->is_recv || p >= c->a.npeers)
        return fail(c, "%s transport: unexpected completion (wr_id 0x%llx)",
                    c->nops->name, (unsigned long long)wc->wr_id);
    rc_retire(c, &c->peers[p], wc->wr_id & ((1ull << 40) - 1));
    return mkSuccess;
}

mkResult_t mki_rdma_progress(void *ctx, uint64_t *completed)
{
    struct rp_ctx *c = ctx;
    struct mki_nic_wc wc[32];
    if (c->err != mkSuccess) return c->err;
    for (int round = 0; round < 8; round++) {
        int n = c->nops->poll(c->nic, wc, 32);
        if (n < 0) return fail(c, "%s transport: polling the completion "
                               "queue failed", c->nops->name);
        for (int i = 0; i < n; i++) MKI_CHECK(handle_wc(c, &wc[i]));
        if (n < 32) break;
    }
    if (c->mode == MKI_RDMA_SRD) MKI_CHECK(srd_send_acks(c));
    else if (c->posts == 0) MKI_CHECK(rc_flush_idle(c));
    c->posts = 0;
    *completed += c->completed;
    c->completed = 0;
    return mkSuccess;
}

mkResult_t mki_rdma_post_write(void *ctx, int peer, uint32_t region,
                               uint64_t loff, uint64_t roff, uint64_t bytes,
                               const struct mki_net_signal *sig, int *posted)
{
    struct rp_ctx *c = ctx;
    struct rp_peer *pe;
    *posted = 0;
    MKI_CHECK(check_args(c, peer, region, loff, roff, bytes, sig, &pe));
    if (c->mode == MKI_RDMA_RC)
        return rc_command(c, pe, region, loff, roff, bytes, sig, posted);
    return srd_command(c, pe, region, loff, roff, bytes, sig, posted);
}

mkResult_t mki_rdma_post_signal(void *ctx, int peer,
                                const struct mki_net_signal *sig, int *posted)
{
    struct rp_ctx *c = ctx;
    struct rp_peer *pe;
    *posted = 0;
    if (!sig || sig->op == MKI_SIG_NONE)
        return mki_error(NULL, mkErrInvalidArgument, "%s transport: "
                         "post_signal needs a signal (SET or ADD)",
                         c->nops->name);
    MKI_CHECK(check_args(c, peer, sig->region, 0, 0, 0, sig, &pe));
    if (c->mode == MKI_RDMA_RC)
        return rc_command(c, pe, sig->region, 0, 0, 0, sig, posted);
    /* SRD orders nothing: a fence waits until every earlier command of
     * this peer was acknowledged. */
    if (pe->tx_inuse > 0) return mkSuccess;
    return srd_command(c, pe, sig->region, 0, 0, 0, sig, posted);
}
