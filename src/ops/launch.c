/*
 * launch.c - the one path of every call (op.h): entry checks, the device
 * guard, the capture status, the kernels' view of the communicator, and
 * the launch of a persistent grid.
 *
 * A persistent kernel's CTAs spin on each other and on other ranks, so
 * the whole grid must be resident at once: the grid of a launch is
 * checked against what the device can hold of that kernel (occupancy,
 * cached per kernel and shape).  The plan keeps every rank's grids within
 * its share of the SMs (MK_SM_BUDGET, or the GPU's SMs split among the
 * ranks on it), so that ranks sharing a GPU under MPS fit beside each
 * other.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "mki.h"
#include "mem/mem.h"
#include "net/net.h"
#include "ops/op.h"
#include "plan/plan.h"

mkResult_t mki_call_enter(mkComm_t comm, enum mki_op op, cudaStream_t stream,
                          struct mki_call *c)
{
    memset(c, 0, sizeof(*c));
    c->func = mki_op_api_name(op);
    c->op = op;
    c->stream = stream;
    c->prev_dev = -1;
    MKI_CHECK(mki_comm_check(comm, c->func));
    c->comm = comm;
    if (comm->dev) { /* recursive: an op's unfused sequence calls others on comm */
        pthread_mutex_lock(&comm->dev->call_lock);
        comm->dev->call_depth++;
        c->locked = 1;
    }
    /* A call made inside another op's sequence runs whatever the outer
     * call found at its entry: an error found on the device since then
     * (bad input, seen alike by every rank) must not leave the peers of
     * this rank waiting in a collective it skipped. */
    const int nested = c->locked && comm->dev->call_depth > 1;
    mkResult_t broken = nested ? mkSuccess : mki_comm_async_error(comm);
    if (broken == mkSuccess && c->locked && !nested) broken = mki_watchdog_gate(comm);
    if (broken != mkSuccess) {
        if (c->locked) {
            comm->dev->call_depth--;
            pthread_mutex_unlock(&comm->dev->call_lock);
        }
        c->locked = 0;
        return mki_comm_broken(comm, broken, c->func);
    }
    c->res = mki_devrt_require(comm, c->func);
    if (c->res != mkSuccess) return mkSuccess;
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != comm->dev->dev) e = cudaSetDevice(comm->dev->dev);
    if (e != cudaSuccess) {
        c->res = mki_error(comm, mkErrCuda, "%s: cannot use CUDA device %d: %s", c->func,
                           comm->dev->dev, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return mkSuccess;
    }
    c->prev_dev = prev;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    e = cudaStreamIsCapturing(stream, &cs);
    if (e != cudaSuccess)
        c->res = mki_error(comm, mkErrInvalidArgument, "%s: cannot query the stream's capture "
                           "status (%s): is the stream valid, and of CUDA device %d?", c->func,
                           cudaGetErrorString(e), comm->dev->dev);
    else if (cs == cudaStreamCaptureStatusInvalidated)
        c->res = mki_error(comm, mkErrInvalidArgument, "%s: the stream's capture was "
                           "invalidated by an earlier error; end it and capture again",
                           c->func);
    c->capturing = cs == cudaStreamCaptureStatusActive;
    if (e != cudaSuccess) (void)cudaGetLastError();
    return mkSuccess;
}

mkResult_t mki_call_leave(struct mki_call *c, mkResult_t res)
{
    if (c->locked) {
        struct mki_devrt *d = c->comm->dev;
        /* the outermost call's tail covers the calls it made */
        if (--d->call_depth == 0 && !c->capturing && c->res == mkSuccess)
            mki_devrt_tail(d, c->stream);
        /* A call that returns a peer's failure (an internal communicator
         * broke under it) is a report too: what it and the calls before
         * it enqueued ends first (bounded, as the watchdog's report). */
        if (!c->capturing && (res == mkErrRemote || res == mkErrTimeout || res == mkErrTransport))
            mki_devrt_drain_wait(d, MKI_DRAIN_NS);
        pthread_mutex_unlock(&d->call_lock);
        c->locked = 0;
    }
    if (c->comm && c->comm->dev && c->prev_dev >= 0 && c->prev_dev != c->comm->dev->dev)
        (void)cudaSetDevice(c->prev_dev);
    return res;
}

void mki_rt_fill(const struct mkComm *comm, int op, struct mki_rt_dev *rt)
{
    const struct mki_devrt *d = comm->dev;
    memset(rt, 0, sizeof(*rt));
    rt->rank = comm->rank;
    rt->nranks = comm->nranks;
    rt->local = d->me;
    rt->nlocal = d->nlocal;
    rt->op = op;
    for (int l = 0; l < d->nlocal; l++) {
        rt->glob[l] = d->comm_rank[l];
        rt->heap[l] = d->heap.seg[0].peer[l];
    }
    rt->local_of = (const int32_t *)mki_heap_ptr(comm, &d->local_of, d->me);
    memcpy(rt->lof, d->lof_head, sizeof(rt->lof));
    rt->err = d->rec_dev;
    /* An internal communicator's kernels also stop on the abort word of
     * the communicator the op was called on: a node-mate that finds this
     * rank dead raises it there (stop_orphans, src/mem/watchdog.c), which
     * is how an orphaned kernel of a dead MPS client ends. */
    const struct mkComm *root = comm;
    while (root->parent) root = root->parent;
    if (root != comm && root->dev && root->dev->heap.nseg > 0)
        rt->abort2 = (const uint64_t *)(root->dev->heap.seg[0].base + MKI_CTL_ABORT);
    rt->timeout_ns = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
    if (comm->net) rt->fifo = comm->net->fifo_dev;
}

/* ---- co-residency ------------------------------------------------------ */

static dim3 dim3_of(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

struct fit {
    const void *fn;
    int dev;
    unsigned block, cluster;
    size_t smem;
    int ctas;          /* CTAs of the kernel the device holds at once */
};

#define FIT_CACHE 64
static struct fit fits[FIT_CACHE];
static int nfits;
static pthread_mutex_t fit_lock = PTHREAD_MUTEX_INITIALIZER;

static mkResult_t device_fit(struct mki_call *c, const struct mki_launch_desc *d, int *ctas)
{
    const int dev = c->comm->dev->dev;
    pthread_mutex_lock(&fit_lock);
    for (int i = 0; i < nfits; i++)
        if (fits[i].fn == d->fn && fits[i].dev == dev && fits[i].block == d->block &&
            fits[i].cluster == d->cluster && fits[i].smem == d->smem) {
            *ctas = fits[i].ctas;
            pthread_mutex_unlock(&fit_lock);
            return mkSuccess;
        }
    pthread_mutex_unlock(&fit_lock);
    cudaError_t e = cudaSuccess;
    int n = 0;
    if (d->cluster > 1) {
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at;
        memset(&cfg, 0, sizeof(cfg));
        at.id = cudaLaunchAttributeClusterDimension;
        at.val.clusterDim.x = d->cluster;
        at.val.clusterDim.y = at.val.clusterDim.z = 1;
        cfg.gridDim = dim3_of(d->cluster);
        cfg.blockDim = dim3_of(d->block);
        cfg.dynamicSmemBytes = d->smem;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        e = cudaOccupancyMaxActiveClusters(&n, d->fn, &cfg);
        n *= (int)d->cluster;
    } else {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, d->fn, (int)d->block, d->smem);
        n *= c->comm->dev->sm_count;
    }
    if (e != cudaSuccess)
        return mki_error(c->comm, mkErrCuda, "%s: occupancy of its kernel: %s", c->func,
                         cudaGetErrorString(e));
    pthread_mutex_lock(&fit_lock);
    if (nfits < FIT_CACHE) fits[nfits++] = (struct fit){d->fn, dev, d->block, d->cluster, d->smem, n};
    pthread_mutex_unlock(&fit_lock);
    *ctas = n;
    return mkSuccess;
}

mkResult_t mki_launch(struct mki_call *c, struct mki_launch_desc *d)
{
    int fit = 0;
    MKI_CHECK(device_fit(c, d, &fit));
    const unsigned cl = d->cluster > 1 ? d->cluster : 1;
    if ((int)d->grid > fit) {
        if (d->exact || fit < (int)cl)
            return mki_error(c->comm, mkErrInternal, "%s: the plan asked for %u CTAs but CUDA "
                             "device %d holds %d of this kernel at once (a persistent grid "
                             "must be resident); lower MK_SM_BUDGET or MK_COLL_CTAS",
                             c->func, d->grid, c->comm->dev->dev, fit);
        d->grid = (unsigned)fit / cl * cl;
    }
    void *args[MKI_LAUNCH_MAXARGS];
    for (int i = 0; i < d->nargs; i++) args[i] = d->param + d->arg_off[i];
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = dim3_of(d->grid);
    cfg.blockDim = dim3_of(d->block);
    cfg.dynamicSmemBytes = d->smem;
    cfg.stream = c->stream;
    if (cl > 1) {
        at.id = cudaLaunchAttributeClusterDimension;
        at.val.clusterDim.x = cl;
        at.val.clusterDim.y = at.val.clusterDim.z = 1;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
    }
    cudaError_t e = cudaLaunchKernelExC(&cfg, d->fn, args);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return mki_error(c->comm, e == cudaErrorMemoryAllocation ? mkErrNoMemory : mkErrCuda,
                         "%s: kernel launch failed: %s", c->func, cudaGetErrorString(e));
    return mkSuccess;
}

/* ---- scratch buffers ------------------------------------------------- */

mkResult_t mki_op_buf(struct mki_call *k, struct mki_op_bufs *r, void **p, size_t *have,
                      size_t want, const char *what)
{
    if (*have >= want) return mkSuccess;
    cudaError_t e = cudaSuccess;
    if (k->capturing) {
        if (*p && r->n == MKI_OP_RETIRED)
            return mki_error(k->comm, mkErrUnsupported, "%s: %s needs a larger buffer inside a "
                             "CUDA graph capture once more than %d times; make one uncaptured "
                             "call of the largest shape first", k->func, what, MKI_OP_RETIRED);
        if (*p) r->retired[r->n++] = *p;
    } else {
        e = cudaStreamSynchronize(k->stream);
        if (*p) (void)cudaFree(*p);
    }
    *p = NULL;
    *have = 0;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e == cudaSuccess) e = cudaMalloc(p, want);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return mki_error(k->comm, mkErrNoMemory, "%s: cannot allocate %zu bytes for %s: %s",
                         k->func, want, what, cudaGetErrorString(e));
    }
    *have = want;
    return mkSuccess;
}

void mki_op_bufs_free(struct mki_op_bufs *r)
{
    for (int i = 0; i < r->n; i++) (void)cudaFree(r->retired[i]);
    r->n = 0;
}

/* ---- the GEMM ops' shared steps ---------------------------------------- */

mkResult_t mki_op_gemm(struct mki_call *k, void *args)
{
    mki_gemm_args *ga = args;
    const struct mki_plan_ctx *pc = mki_plan_context(k->comm);
    if (pc && pc->sm_budget > 0 && pc->sm_budget < pc->sm_count) ga->num_ctas = pc->sm_budget;
    char msg[512];
    struct mki_launch_desc d;
    int rc = mki_gemm_describe(ga, &d, msg, sizeof(msg));
    if (rc != MKI_GEMM_OK)
        return mki_error(k->comm, rc == MKI_GEMM_ERR_INVALID ? mkErrInvalidArgument
                         : rc == MKI_GEMM_ERR_UNSUPPORTED ? mkErrUnsupported : mkErrCuda,
                         "%s: %s", k->func, msg);
    return d.fn ? mki_launch(k, &d) : mkSuccess;
}

static mkResult_t op_bank(struct mki_call *k, struct mki_heap_blk *blk, uint64_t bytes,
                          int *retired, const char *what, int zero)
{
    const uint64_t grain = MKI_HEAP_GRAIN;
    if (blk->bytes >= bytes && blk->bytes) return mkSuccess;
    struct mkComm *comm = k->comm;
    uint64_t want = (bytes + grain - 1) / grain * grain;
    if (want == 0) want = grain;
    if (blk->bytes && k->capturing) {
        if (*retired == MKI_OP_RETIRED)
            return mki_error(comm, mkErrUnsupported, "%s: %s grew inside a CUDA graph capture "
                             "%d times; make one uncaptured call of the largest shape first",
                             k->func, what, MKI_OP_RETIRED);
        (*retired)++;
    } else if (blk->bytes) {
        cudaError_t e = cudaStreamSynchronize(k->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return mki_error(comm, mkErrCuda, "%s: waiting for earlier calls: %s", k->func,
                             cudaGetErrorString(e));
        }
        mki_heap_free(comm, blk);
    }
    memset(blk, 0, sizeof(*blk));
    return mki_heap_alloc(comm, 0, want, zero, what, blk);
}

mkResult_t mki_op_bank(struct mki_call *k, struct mki_heap_blk *blk, uint64_t bytes,
                       int *retired, const char *what)
{
    return op_bank(k, blk, bytes, retired, what, 0);
}

mkResult_t mki_op_bank_zeroed(struct mki_call *k, struct mki_heap_blk *blk, uint64_t bytes,
                              int *retired, const char *what)
{
    return op_bank(k, blk, bytes, retired, what, 1);
}

/* ---- internal communicators across nodes ------------------------------ */

mkResult_t mki_op_sub_check(struct mkComm *comm, mkResult_t res, mkComm_t sub)
{
    if (res == mkSuccess) return res;
    return mki_error(comm, res, "%s", sub ? mkGetLastError(sub) : mki_thread_error());
}

/* node_comm's rank i is the rank of local index i on this node,
 * peer_comm's rank j the rank of this local index on node j. */
static mkResult_t split_adopt(struct mkComm *comm, mkComm_t sub, int node_comm)
{
    if (!sub) return mkSuccess;
    const struct mki_topo *t = comm->topo;
    int *name = calloc((size_t)sub->nranks, sizeof(int));
    if (!name) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int r = 0; r < comm->nranks; r++) {
        if (node_comm && t->node_of[r] == comm->node && t->local_rank_of[r] < sub->nranks)
            name[t->local_rank_of[r]] = r;
        if (!node_comm && t->local_rank_of[r] == comm->local_rank && t->node_of[r] < sub->nranks)
            name[t->node_of[r]] = r;
    }
    return mki_comm_adopt(comm, sub, name);
}

static mkResult_t split_once(struct mkComm *comm, struct mki_op_split *s)
{
    s->tried = 1;
    const struct mki_topo *t = comm->topo;
    const int L = comm->local_size;
    for (int r = 0; r < comm->nranks; r++) {
        int n = 0;
        for (int q = 0; q < comm->nranks; q++) n += t->node_of[q] == t->node_of[r];
        if (n != L) return mkSuccess; /* nodes of different sizes */
    }
    mkConfig_t cf = MK_CONFIG_INITIALIZER;
    cf.cudaDev = comm->dev->dev;
    cf.timeoutMs = comm->cfg.timeoutMs;
    const struct mki_plan_ctx *pc = mki_plan_context(comm);
    if (pc && pc->sm_budget > 0 && pc->sm_budget < pc->sm_count) cf.smBudget = pc->sm_budget;
    MKI_CHECK(mki_op_sub_check(comm, mkCommSplit(comm, comm->node, comm->local_rank,
                                                 &s->node_comm, &cf), NULL));
    MKI_CHECK(split_adopt(comm, s->node_comm, 1));
    cf.nodeSize = 1; /* one rank per node */
    MKI_CHECK(mki_op_sub_check(comm, mkCommSplit(comm, comm->local_rank, comm->node,
                                                 &s->peer_comm, &cf), NULL));
    return split_adopt(comm, s->peer_comm, 0);
}

mkResult_t mki_op_split_make(struct mki_call *k, struct mki_op_split *out)
{
    struct mkComm *comm = k->comm;
    memset(out, 0, sizeof(*out));
    if (!comm->split && !(comm->split = calloc(1, sizeof(*comm->split))))
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    struct mki_op_split *s = comm->split;
    if (!s->tried && !k->capturing) MKI_CHECK(split_once(comm, s));
    *out = *s;
    return mkSuccess;
}

void mki_op_split_free(struct mkComm *comm)
{
    struct mki_op_split *s = comm->split;
    if (!s) return;
    for (mkComm_t *sc = &s->node_comm; sc <= &s->peer_comm; sc++) {
        if (!*sc) continue;
        mki_comm_disown(comm, *sc);
        (void)(comm->dev && comm->dev->aborted ? mkCommAbort(*sc) : mkCommDestroy(*sc));
    }
    free(s);
    comm->split = NULL;
}
