/*
 * fake_nic.c - an in-process NIC that delivers out of order and completes
 * late, for the RC and SRD protocol tests (see fake_nic.h).
 *
 * Everything happens under the fabric lock, inside the poll of whichever
 * rank polls: each poll advances a tick, places a few pending writes
 * chosen at random, and hands back the completions that are due.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "fake_nic.h"

#define FK_MAX_NICS 64
#define FK_STEPS 4

struct fk_mr {
    char *base;
    uint64_t size;
    int nic, live;
};

struct fk_op {
    int src, dst;
    uint64_t chan;        /* RC: one channel per queue pair */
    uint64_t seq;
    struct mki_nic_wr wr;
    uint8_t inl[8];
};

struct fk_wc {
    struct mki_nic_wc wc;
    uint64_t due;
};

struct fk_nic {
    struct mki_fake_fabric *f;
    int id, rc;
    int ep_nic[FK_MAX_NICS];     /* peer index -> remote NIC */
    int ep_qp[FK_MAX_NICS];      /* RC: remote queue pair (its peer index) */
    uint64_t *rq;                /* posted receive wr_ids (ring) */
    int rq_head, rq_n;
    struct fk_wc *cq;
    int ncq, capcq;
    uint64_t last_due;
};

struct mki_fake_fabric {
    pthread_mutex_t mu;
    struct mki_fake_params p;
    uint64_t rng, tick, seq;
    struct fk_op *ops;
    int nops, capops;
    struct fk_mr *mrs;
    int nmrs, capmrs;
    int fail_n, fail_status;
    struct mki_fake_stats st;
};

static struct mki_fake_fabric *current;

static uint64_t rnd(struct mki_fake_fabric *f)
{
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return f->rng;
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *a = realloc(*arr, (size_t)n * elem);
    if (!a) return -1;
    *arr = a;
    *cap = n;
    return 0;
}

struct mki_fake_fabric *mki_fake_fabric_create(const struct mki_fake_params *p)
{
    struct mki_fake_fabric *f = calloc(1, sizeof(*f));
    if (!f) return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->p = *p;
    f->rng = p->seed ? p->seed : 0x9e3779b97f4a7c15ull;
    return f;
}

void mki_fake_fabric_destroy(struct mki_fake_fabric *f)
{
    if (!f) return;
    pthread_mutex_destroy(&f->mu);
    free(f->ops);
    free(f->mrs);
    free(f);
}

void mki_fake_fabric_use(struct mki_fake_fabric *f) { current = f; }

void mki_fake_fail_next(struct mki_fake_fabric *f, int n, int status)
{
    pthread_mutex_lock(&f->mu);
    f->fail_n = n;
    f->fail_status = status;
    pthread_mutex_unlock(&f->mu);
}

void mki_fake_stats(struct mki_fake_fabric *f, struct mki_fake_stats *s)
{
    pthread_mutex_lock(&f->mu);
    *s = f->st;
    pthread_mutex_unlock(&f->mu);
}

static struct fk_nic *nics[FK_MAX_NICS]; /* by id, under the fabric lock */

/* ---- backend ops -------------------------------------------------- */

static mkResult_t fk_reg(void *nic, void *base, size_t size,
                         enum mki_mem_kind kind, uint32_t *lkey,
                         uint32_t *rkey, void **handle)
{
    struct fk_nic *n = nic;
    struct mki_fake_fabric *f = n->f;
    (void)kind; /* "device" memory is host memory here: the engine's
                 * device paths (raise_device_signal) run all the same */
    pthread_mutex_lock(&f->mu);
    int bad = grow((void **)&f->mrs, &f->capmrs, f->nmrs + 1, sizeof(*f->mrs));
    if (!bad) {
        f->mrs[f->nmrs] = (struct fk_mr){base, size, n->id, 1};
        *lkey = *rkey = (uint32_t)++f->nmrs;
        *handle = (void *)(uintptr_t)*rkey;
    }
    pthread_mutex_unlock(&f->mu);
    return bad ? mki_error(NULL, mkErrNoMemory, "out of host memory")
               : mkSuccess;
}

static void fk_dereg(void *nic, void *handle)
{
    struct fk_nic *n = nic;
    pthread_mutex_lock(&n->f->mu);
    n->f->mrs[(uintptr_t)handle - 1].live = 0;
    pthread_mutex_unlock(&n->f->mu);
}

static mkResult_t fk_ep_create(void *nic, int ep, void *blob)
{
    struct fk_nic *n = nic;
    int32_t b[2] = {n->id, ep};
    memcpy(blob, b, sizeof(b));
    return mkSuccess;
}

static mkResult_t fk_ep_connect(void *nic, int ep, const void *blob)
{
    struct fk_nic *n = nic;
    int32_t b[2];
    memcpy(b, blob, sizeof(b));
    if (ep >= FK_MAX_NICS || b[0] < 0 || b[0] >= FK_MAX_NICS)
        return mki_error(NULL, mkErrInternal, "fake NIC: endpoint %d", ep);
    n->ep_nic[ep] = b[0];
    n->ep_qp[ep] = b[1];
    return mkSuccess;
}

static mkResult_t fk_post(void *nic, const struct mki_nic_wr *wr)
{
    struct fk_nic *n = nic;
    struct mki_fake_fabric *f = n->f;
    pthread_mutex_lock(&f->mu);
    int bad = grow((void **)&f->ops, &f->capops, f->nops + 1, sizeof(*f->ops));
    if (!bad) {
        struct fk_op *o = &f->ops[f->nops++];
        memset(o, 0, sizeof(*o));
        o->src = n->id;
        o->dst = n->ep_nic[wr->ep];
        o->chan = (uint64_t)n->id << 16 | (uint64_t)wr->ep;
        o->seq = ++f->seq;
        o->wr = *wr;
        if (wr->inline_data)
            memcpy(o->inl, (const void *)(uintptr_t)wr->laddr, wr->len);
    }
    pthread_mutex_unlock(&f->mu);
    return bad ? mki_error(NULL, mkErrNoMemory, "out of host memory")
               : mkSuccess;
}

static mkResult_t fk_post_recv(void *nic, int ep, uint64_t wr_id)
{
    struct fk_nic *n = nic;
    pthread_mutex_lock(&n->f->mu);
    int cap = n->f->p.rq_depth * 2;
    int ok = n->rq_n < cap;
    if (ok) n->rq[(n->rq_head + n->rq_n++) % cap] = wr_id;
    pthread_mutex_unlock(&n->f->mu);
    return ok ? mkSuccess
              : mki_error(NULL, mkErrTransport, "fake NIC: receive queue full");
}

static void push_wc(struct fk_nic *n, const struct mki_nic_wc *wc)
{
    struct mki_fake_fabric *f = n->f;
    uint64_t due = f->tick + rnd(f) % (uint64_t)(f->p.max_delay + 1);
    if (n->rc && due < n->last_due) due = n->last_due; /* RC: in order */
    n->last_due = due;
    if (due > f->tick) f->st.late++;
    if (grow((void **)&n->cq, &n->capcq, n->ncq + 1, sizeof(*n->cq)) == 0)
        n->cq[n->ncq++] = (struct fk_wc){*wc, due};
}

/* Where a remote access lands, or NULL when the key/bounds are wrong. */
static char *resolve(struct mki_fake_fabric *f, int dst, uint32_t rkey,
                     uint64_t raddr, uint64_t len)
{
    if (rkey == 0 || rkey > (uint32_t)f->nmrs) return NULL;
    struct fk_mr *m = &f->mrs[rkey - 1];
    uint64_t b = (uint64_t)(uintptr_t)m->base;
    if (!m->live || m->nic != dst || raddr < b ||
        !mki_span_ok(raddr - b, len, m->size))
        return NULL;
    return (char *)(uintptr_t)raddr;
}

static int place(struct mki_fake_fabric *f, struct fk_op *o)
{
    const struct mki_nic_wr *w = &o->wr;
    if (w->len == 0 && w->opcode != MKI_NIC_ATOMIC_ADD) return 0;
    char *dst = resolve(f, o->dst, w->rkey, w->raddr,
                        w->opcode == MKI_NIC_ATOMIC_ADD ? 8 : w->len);
    if (!dst || (w->opcode == MKI_NIC_ATOMIC_ADD && (w->raddr & 7)))
        return MKI_FAKE_REM_ACCESS_ERR;
    const void *src = w->inline_data ? o->inl : (const void *)(uintptr_t)w->laddr;
    if (w->opcode == MKI_NIC_ATOMIC_ADD) {
        uint64_t old = __atomic_fetch_add((uint64_t *)dst, w->add,
                                          __ATOMIC_RELEASE);
        memcpy((void *)(uintptr_t)w->laddr, &old, 8);
    } else if (w->len == 8 && !(w->raddr & 7)) {
        uint64_t v;
        memcpy(&v, src, 8);
        __atomic_store_n((uint64_t *)dst, v, __ATOMIC_RELEASE);
    } else {
        memcpy(dst, src, w->len);
    }
    return 0;
}

/* Deliver op i; 0 when it must wait (no receive posted). */
static int deliver(struct mki_fake_fabric *f, int i)
{
    struct fk_op *o = &f->ops[i];
    struct fk_nic *dn = nics[o->dst], *sn = nics[o->src];
    int imm = o->wr.opcode == MKI_NIC_WRITE_IMM;
    int status = 0;
    if (f->fail_n > 0) {
        f->fail_n--;
        status = f->fail_status;
    } else if (!dn) { /* the target NIC is gone: retries run out */
        status = MKI_FAKE_RETRY_EXC_ERR;
    } else if (imm && dn->rq_n == 0) {
        f->st.rnr++;
        return 0;
    } else {
        status = place(f, o);
    }
    if (status == 0 && imm) {
        int cap = f->p.rq_depth * 2;
        struct mki_nic_wc rwc = {dn->rq[dn->rq_head], 0, 1, o->wr.imm, 0};
        dn->rq_head = (dn->rq_head + 1) % cap;
        dn->rq_n--;
        push_wc(dn, &rwc);
    }
    if (status == 0) f->st.delivered++;
    if ((o->wr.signaled || status) && sn) {
        struct mki_nic_wc swc = {o->wr.wr_id, status, 0, 0,
                                 status ? 0x5a : 0};
        push_wc(sn, &swc);
    }
    for (int k = 0; k < f->nops; k++)
        if (f->ops[k].seq < o->seq) {
            f->st.reordered++;
            break;
        }
    f->ops[i] = f->ops[--f->nops];
    return 1;
}

static void step(struct mki_fake_fabric *f)
{
    if (f->nops == 0) return;
    int i = (int)(rnd(f) % (uint64_t)f->nops);
    if (nics[f->ops[i].src] && nics[f->ops[i].src]->rc)
        for (int k = 0; k < f->nops; k++) /* RC: the oldest of its QP */
            if (f->ops[k].chan == f->ops[i].chan && f->ops[k].seq < f->ops[i].seq)
                i = k;
    deliver(f, i);
}

static int fk_poll(void *nic, struct mki_nic_wc *wc, int max)
{
    struct fk_nic *n = nic;
    struct mki_fake_fabric *f = n->f;
    int got = 0;
    pthread_mutex_lock(&f->mu);
    f->tick++;
    for (int s = 0; s < FK_STEPS; s++) step(f);
    for (int i = 0; i < n->ncq && got < max;) {
        if (n->cq[i].due > f->tick) { i++; continue; }
        wc[got++] = n->cq[i].wc;
        /* keep the order of the rest (RC completions are ordered) */
        memmove(&n->cq[i], &n->cq[i + 1], sizeof(*n->cq) * (size_t)(n->ncq - i - 1));
        n->ncq--;
    }
    pthread_mutex_unlock(&f->mu);
    return got;
}

static const char *fk_status_str(int status)
{
    switch (status) {
    case 0: return "success";
    case MKI_FAKE_REM_ACCESS_ERR: return "remote access error (fake NIC)";
    case MKI_FAKE_RETRY_EXC_ERR: return "transport retry counter exceeded (fake NIC)";
    default: return "unknown status (fake NIC)";
    }
}

static void fk_close(void *nic)
{
    struct fk_nic *n = nic;
    pthread_mutex_lock(&n->f->mu);
    for (int i = 0; i < n->f->nops;) /* drop what it still had in flight */
        if (n->f->ops[i].src == n->id) n->f->ops[i] = n->f->ops[--n->f->nops];
        else i++;
    nics[n->id] = NULL;
    pthread_mutex_unlock(&n->f->mu);
    free(n->rq);
    free(n->cq);
    free(n);
}

static const struct mki_nic_ops fk_ops = {
    .name = "fake",
    .reg = fk_reg,
    .dereg = fk_dereg,
    .ep_create = fk_ep_create,
    .ep_connect = fk_ep_connect,
    .post = fk_post,
    .post_recv = fk_post_recv,
    .poll = fk_poll,
    .status_str = fk_status_str,
    .close = fk_close,
};

/* ---- the fake transports ------------------------------------------ */

static mkResult_t fk_open(const struct mki_net_args *a, int rc, void **ctx)
{
    struct mki_fake_fabric *f = current;
    if (!f || a->rank >= FK_MAX_NICS || a->npeers >= FK_MAX_NICS)
        return mki_error(NULL, mkErrUnsupported, "fake NIC: no fabric, or "
                         "more than %d ranks", FK_MAX_NICS);
    struct fk_nic *n = calloc(1, sizeof(*n));
    if (!n || !(n->rq = calloc((size_t)f->p.rq_depth * 2, 8))) {
        free(n);
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    }
    n->f = f;
    n->id = a->rank;
    n->rc = rc;
    pthread_mutex_lock(&f->mu);
    nics[n->id] = n;
    pthread_mutex_unlock(&f->mu);
    struct mki_nic_caps caps = {8, f->p.max_msg, f->p.sq_depth, f->p.rq_depth};
    return mki_rdma_init(a, rc ? MKI_RDMA_RC : MKI_RDMA_SRD, &fk_ops, n, &caps,
                         ctx);
}

static mkResult_t fk_init_rc(const struct mki_net_args *a, void **ctx)
{
    return fk_open(a, 1, ctx);
}

static mkResult_t fk_init_srd(const struct mki_net_args *a, void **ctx)
{
    return fk_open(a, 0, ctx);
}

#define FAKE_OPS(nm, initfn)                                                 \
    {                                                                        \
        .name = nm, .version = MKI_TRANSPORT_VERSION, .init = initfn,        \
        .reg_mem = mki_rdma_reg_mem, .connect = mki_rdma_connect,            \
        .post_write = mki_rdma_post_write,                                   \
        .post_signal = mki_rdma_post_signal,                                 \
        .progress = mki_rdma_progress, .close = mki_rdma_close,              \
    }

const struct mki_transport_ops mki_transport_fake_rc =
    FAKE_OPS("fake-rc", fk_init_rc);
const struct mki_transport_ops mki_transport_fake_srd =
    FAKE_OPS("fake-srd", fk_init_srd);
