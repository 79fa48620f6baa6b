/*
 * coll.c - mkAllGather, mkReduceScatter, mkAllReduce, mkAllToAll: validate
 * -> plan -> launch one persistent kernel (kernels/collectives.cu).
 *
 * Nothing here waits for the device: a call checks its arguments, numbers
 * itself (++comm->epoch, only used to name the call in error records),
 * picks its CTA count and enqueues the kernel on the caller's stream, so
 * calls may be captured in a CUDA graph.  Calls on one communicator must be
 * ordered (one stream, or streams ordered by events), as with NCCL.
 */
#include <stdio.h>
#include <string.h>

#include "mki.h"
#include "mem/mem.h"
#include "net/net.h"
#include "plan/plan.h"

int mki_coll_launch(const struct mki_coll_params *p, cudaStream_t s,
                    const char **why);

static int dtype_size(mkDataType_t t)
{
    switch (t) {
    case mkBfloat16: return 2;
    case mkFloat16: return 2;
    case mkFloat32: return 4;
    default: return 0;
    }
}

/* CTAs for one call: the plan's rule (mki_plan_coll_ctas) at most the
 * node's SM budget (mem.c: the smallest over its ranks of MK_SM_BUDGET,
 * else of the GPU's SMs shared by the ranks on it), so every rank picks
 * the same count; MK_COLL_CTAS overrides (up to MKI_MAXCH and the
 * budget). */
static mkResult_t coll_ctas(struct mkComm *comm, uint64_t block_bytes,
                            int oneshot, int *ctas)
{
    int budget = comm->dev->coll_budget;
    int cap = budget < MKI_MAXCH ? budget : MKI_MAXCH;
    if (cap < 1) cap = 1;
    int64_t forced = 0;
    if (mki_param_is_set(MKI_P_COLL_CTAS)) {
        mkResult_t r = mki_param_int(MKI_P_COLL_CTAS, &forced);
        if (r != mkSuccess) return mki_error(comm, r, "%s", mki_thread_error());
    }
    if (forced > 0) {
        *ctas = forced < cap ? (int)forced : cap;
        return mkSuccess;
    }
    *ctas = mki_plan_coll_ctas(block_bytes, oneshot, comm->nnodes, cap);
    return mkSuccess;
}

/* MK_COLL_MOVER: a typo must not silently measure another mover. */
static mkResult_t coll_mover(struct mkComm *comm, int *mover)
{
    const char *mv = mki_param_str(MKI_P_COLL_MOVER);
    if (!strcmp(mv, "reg")) *mover = MKI_COLL_MOVER_REG;
    else if (!strcmp(mv, "tma")) *mover = MKI_COLL_MOVER_TMA;
    else if (!strcmp(mv, "tma-send")) *mover = MKI_COLL_MOVER_TMA_SEND;
    else
        return mki_error(comm, mkErrInvalidArgument, "MK_COLL_MOVER=%s; use "
                         "tma-send, tma or reg", mv);
    return mkSuccess;
}

/* Chunk bytes: one node keeps d->slot_bytes; across nodes the workspace
 * slots are indexed by communicator rank and the chunk must fit the net
 * buffer's slots too (devrt.h). */
static uint64_t coll_slot_bytes(const struct mkComm *comm)
{
    if (comm->nnodes == 1) return comm->dev->slot_bytes;
    uint64_t s = mki_ws_slot_bytes(comm->dev->ws_bytes, comm->nranks);
    return s < comm->net->nb_slot ? s : comm->net->nb_slot;
}

/* Peers by communicator rank: the mapped workspace of a rank of my node,
 * NULL and a bit of net_mask for a rank on another node. */
static void coll_peers(const struct mkComm *comm, struct mki_coll_params *p)
{
    const struct mki_devrt *d = comm->dev;
    p->net_mask = 0;
    for (int q = 0; q < comm->nranks; q++) p->ws[q] = NULL;
    for (int l = 0; l < d->nlocal; l++) {
        p->glob[l] = d->comm_rank[l];
        p->ws[d->comm_rank[l]] = d->peer_ws[l];
    }
    for (int q = 0; q < comm->nranks; q++)
        if (p->ws[q] == NULL) p->net_mask |= 1u << q;
    p->me_local = d->me;
    if (p->net_mask) {
        p->fifo = comm->net->fifo_dev;
        p->nb = comm->net->nb_dev;
        p->nb_slot = comm->net->nb_slot;
    }
}

/* What one collective call reads and writes. */
struct coll_call {
    const char *func;
    int op;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    mkDataType_t dtype;
    size_t send_bytes, recv_bytes;
};

static mkResult_t check_sizes(struct mkComm *comm, struct coll_call *c)
{
    int es = dtype_size(c->dtype);
    if (es == 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: datatype = %d is "
                         "not a mkDataType_t; use mkBfloat16, mkFloat16 or "
                         "mkFloat32", c->func, (int)c->dtype);
    size_t n = (size_t)comm->nranks;
    if (c->count > SIZE_MAX / (size_t)es / n || c->count > (1ull << 48))
        return mki_error(comm, mkErrInvalidArgument, "%s: count = %zu "
                         "elements of %d bytes times %d ranks overflows; "
                         "split the call", c->func, c->count, es,
                         comm->nranks);
    size_t one = c->count * (size_t)es, all = one * n;
    switch (c->op) {
    case MKI_COLL_ALLGATHER: c->send_bytes = one; c->recv_bytes = all; break;
    case MKI_COLL_REDUCESCATTER: c->send_bytes = all; c->recv_bytes = one; break;
    case MKI_COLL_ALLREDUCE: c->send_bytes = one; c->recv_bytes = one; break;
    default: c->send_bytes = all; c->recv_bytes = all; break;
    }
    if (c->count > 0 && (c->sendbuf == NULL || c->recvbuf == NULL))
        return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass "
                         "device buffers", c->func,
                         c->sendbuf == NULL ? "sendbuf" : "recvbuf");
    return mkSuccess;
}

static mkResult_t check_pointer(struct mkComm *comm, const char *func,
                                const char *name, const void *p, int es)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is not "
                         "device memory (%s); pass memory from cudaMalloc or "
                         "mkMemAlloc on CUDA device %d", func, name, p,
                         e != cudaSuccess ? cudaGetErrorString(e)
                         : a.type == cudaMemoryTypeHost ? "host memory"
                         : a.type == cudaMemoryTypeManaged ? "managed memory"
                         : "unregistered host memory", comm->dev->dev);
    if (a.device != comm->dev->dev)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is memory "
                         "of CUDA device %d but the communicator uses device "
                         "%d", func, name, p, a.device, comm->dev->dev);
    if ((uintptr_t)p % (uintptr_t)es != 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is not "
                         "aligned to its %d-byte elements", func, name, p, es);
    return mkSuccess;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* In place is allowed as NCCL defines it; any other overlap is refused. */
static mkResult_t check_overlap(struct mkComm *comm, const struct coll_call *c)
{
    size_t one = c->count * (size_t)dtype_size(c->dtype);
    const char *s = c->sendbuf, *r = c->recvbuf;
    int inplace = 0;
    if (c->op == MKI_COLL_ALLGATHER) inplace = s == r + (size_t)comm->rank * one;
    if (c->op == MKI_COLL_REDUCESCATTER) inplace = r == s + (size_t)comm->rank * one;
    if (c->op == MKI_COLL_ALLREDUCE) inplace = s == r;
    if (!inplace && overlap(s, c->send_bytes, r, c->recv_bytes))
        return mki_error(comm, mkErrInvalidArgument, "%s: sendbuf and recvbuf "
                         "overlap%s", c->func, c->op == MKI_COLL_ALLTOALL
                         ? " (all-to-all is never in place)"
                         : " without being the in-place layout");
    return mkSuccess;
}

static mkResult_t check_call(struct mkComm *comm, struct coll_call *c)
{
    MKI_CHECK(check_sizes(comm, c));
    mkResult_t broken;
    pthread_mutex_lock(&comm->lock);
    broken = comm->async_error;
    pthread_mutex_unlock(&comm->lock);
    if (broken != mkSuccess)
        return mki_comm_broken(comm, broken, c->func);
    MKI_CHECK(mki_devrt_require(comm, c->func));
    if (comm->nranks > MKI_MAXLOCAL)
        return mki_error(comm, mkErrUnsupported, "%s: collectives run on at "
                         "most %d ranks in all for now; this communicator "
                         "has %d ranks on %d nodes (split it with "
                         "mkCommSplit)", c->func, MKI_MAXLOCAL, comm->nranks,
                         comm->nnodes);
    if (comm->nnodes > 1 && (comm->net == NULL || comm->net->dev == NULL))
        return mki_error(comm, mkErrUnsupported, "%s: this communicator "
                         "spans %d nodes but has no inter-node path on the "
                         "GPU (see MK_TRANSPORT and the errors of its "
                         "creation)", c->func, comm->nnodes);
    if (coll_slot_bytes(comm) == 0)
        return mki_error(comm, mkErrUnsupported, "%s: the workspace (%zu "
                         "bytes) is too small for %d ranks%s; raise "
                         "MK_WORKSPACE_SIZE", c->func, comm->dev->ws_bytes,
                         comm->nranks, comm->nnodes > 1 ? " in all" : "");
    if (c->count == 0) return mkSuccess;
    int es = dtype_size(c->dtype);
    MKI_CHECK(check_pointer(comm, c->func, "sendbuf", c->sendbuf, es));
    MKI_CHECK(check_pointer(comm, c->func, "recvbuf", c->recvbuf, es));
    return check_overlap(comm, c);
}

/* All-reduce in one phase (MK_COLL_AR_ONESHOT, scaled by the rank count
 * in mki_plan_coll_oneshot): every rank sends its whole buffer to every
 * peer and reduces all of them.  For 2 ranks the bytes on the wire equal
 * the two-phase algorithm's with half its signal round trips; for n ranks
 * it sends (n-1) x S instead of 2 (n-1)/n x S, so it pays only for small
 * buffers. */
static mkResult_t ar_oneshot(struct mkComm *comm, const struct coll_call *c,
                             int *oneshot)
{
    int64_t limit = 0;
    *oneshot = 0;
    if (c->op != MKI_COLL_ALLREDUCE) return mkSuccess;
    mkResult_t r = mki_param_int(MKI_P_COLL_AR_ONESHOT, &limit);
    if (r != mkSuccess) return mki_error(comm, r, "%s", mki_thread_error());
    *oneshot = mki_plan_coll_oneshot(c->count * (uint64_t)dtype_size(c->dtype),
                                     limit > 0 ? (uint64_t)limit : 0, comm->nranks);
    return mkSuccess;
}

static uint64_t block_bytes(const struct mkComm *comm, const struct coll_call *c,
                            int oneshot)
{
    uint64_t es = (uint64_t)dtype_size(c->dtype);
    if (c->op != MKI_COLL_ALLREDUCE || oneshot) return c->count * es;
    uint64_t first, elems;
    mki_ar_block(c->count, comm->nranks, 0, &first, &elems);
    return elems * es;
}

/* Zero copy (devrt.h): all-gather, all-to-all, and all-reduce in two
 * phases when MK_COLL_MOVER=reg (REDUCE pushes the reduced blocks into the
 * peers' recvbufs; not the default: on 2 H200 at 64 MB - 1 GB it measured
 * 232-284 GB/s against 257-300 for TMA through the workspace,
 * bench/NOTES.md), on one node, when the
 * communicator has registered buffers (mkMemAlloc, mkCommRegister: both
 * collective, so every rank counts the same) and each rank's block is at
 * least MK_COLL_ZCOPY_MIN: the same decision on every rank.  Whether a
 * peer then writes into my recvbuf depends only on my recvbuf being
 * registered, which I tell it on the device (p->post). */
static mkResult_t coll_direct(struct mkComm *comm, const struct coll_call *c,
                              int oneshot, int mover, struct mki_coll_params *p)
{
    int64_t min = 0;
    p->direct = 0;
    if (c->op == MKI_COLL_REDUCESCATTER || oneshot || comm->nnodes != 1 ||
        comm->dev->nregs == 0)
        return mkSuccess;
    if (c->op == MKI_COLL_ALLREDUCE && mover != MKI_COLL_MOVER_REG) return mkSuccess;
    mkResult_t r = mki_param_int(MKI_P_COLL_ZCOPY_MIN, &min);
    if (r != mkSuccess) return mki_error(comm, r, "%s", mki_thread_error());
    if (min <= 0 || block_bytes(comm, c, oneshot) < (uint64_t)min)
        return mkSuccess;
    p->direct = 1;
    uint64_t seen[MKI_MAXLOCAL];
    if (!mki_devrt_is_registered(comm, c->recvbuf, c->recv_bytes, seen))
        return mkSuccess; /* peers go through my slots */
    const struct mki_devrt *d = comm->dev;
    for (int l = 0; l < d->nlocal; l++)
        if (l != d->me) p->post[d->comm_rank[l]] = seen[l];
    return mkSuccess;
}

static mkResult_t coll_run(mkComm_t comm, struct coll_call *c,
                           cudaStream_t stream)
{
    MKI_CHECK(mki_comm_check(comm, c->func));
    MKI_CHECK(check_call(comm, c));
    if (c->count == 0) return mkSuccess;
    struct mki_devrt *d = comm->dev;
    struct mki_coll_params p;
    memset(&p, 0, sizeof(p));
    p.op = c->op;
    p.dtype = (int32_t)c->dtype;
    p.esize = dtype_size(c->dtype);
    p.nranks = comm->nranks;
    p.me = comm->rank;
    int nch = 1, mover = MKI_COLL_MOVER_TMA_SEND, oneshot = 0;
    MKI_CHECK(ar_oneshot(comm, c, &oneshot));
    const uint64_t block = block_bytes(comm, c, oneshot);
    MKI_CHECK(coll_ctas(comm, block, oneshot, &nch));
    MKI_CHECK(coll_mover(comm, &mover));
    coll_peers(comm, &p);
    MKI_CHECK(coll_direct(comm, c, oneshot, mover, &p));
    /* Unless MK_COLL_MOVER says otherwise, the plan's mover (register
     * stores for zero copy and small calls). */
    if (!mki_param_is_set(MKI_P_COLL_MOVER) &&
        mki_plan_coll_mover(block, p.direct) == MKI_COLL_PICK_REG)
        mover = MKI_COLL_MOVER_REG;
    /* Register stores push all-reduce results straight into peers'
     * slots, which a remote rank does not have: TMA (SEND2) there. */
    if (p.net_mask && c->op == MKI_COLL_ALLREDUCE && mover == MKI_COLL_MOVER_REG)
        mover = MKI_COLL_MOVER_TMA_SEND;
    p.nch = nch;
    p.mover = mover;
    p.oneshot = oneshot;
    p.count = c->count;
    p.src = c->sendbuf;
    p.dst = c->recvbuf;
    p.slot_bytes = coll_slot_bytes(comm);
    p.timeout_ns = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
    p.err = d->rec_dev;
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != d->dev) e = cudaSetDevice(d->dev);
    if (e != cudaSuccess)
        return mki_error(comm, mkErrCuda, "%s: cannot use CUDA device %d: %s",
                         c->func, d->dev, cudaGetErrorString(e));
    p.epoch = ++comm->epoch;
    const char *why = "";
    int rc = mki_coll_launch(&p, stream, &why);
    if (prev != d->dev) (void)cudaSetDevice(prev);
    if (rc != 0)
        return mki_error(comm, mkErrCuda, "%s: kernel launch failed: %s",
                         c->func, why);
    MKI_TRACE(MKI_SUB_COLL, "%s call %llu: count %zu, %d CTAs%s%s", c->func,
              (unsigned long long)p.epoch, c->count, p.nch,
              oneshot ? ", one phase" : "",
              !p.direct ? "" : p.post[(comm->rank + 1) % comm->nranks]
              ? ", zero copy into my recvbuf" : ", zero copy (my recvbuf "
              "is not registered: through my workspace)");
    return mkSuccess;
}

MK_API mkResult_t mkAllGather(const void *sendbuf, void *recvbuf, size_t count,
                              mkDataType_t datatype, mkComm_t comm,
                              cudaStream_t stream)
{
    struct coll_call c = {"mkAllGather", MKI_COLL_ALLGATHER, sendbuf, recvbuf,
                          count, datatype, 0, 0};
    return coll_run(comm, &c, stream);
}

MK_API mkResult_t mkReduceScatter(const void *sendbuf, void *recvbuf,
                                  size_t count, mkDataType_t datatype,
                                  mkComm_t comm, cudaStream_t stream)
{
    struct coll_call c = {"mkReduceScatter", MKI_COLL_REDUCESCATTER, sendbuf,
                          recvbuf, count, datatype, 0, 0};
    return coll_run(comm, &c, stream);
}

MK_API mkResult_t mkAllReduce(const void *sendbuf, void *recvbuf, size_t count,
                              mkDataType_t datatype, mkComm_t comm,
                              cudaStream_t stream)
{
    struct coll_call c = {"mkAllReduce", MKI_COLL_ALLREDUCE, sendbuf, recvbuf,
                          count, datatype, 0, 0};
    return coll_run(comm, &c, stream);
}

MK_API mkResult_t mkAllToAll(const void *sendbuf, void *recvbuf, size_t count,
                             mkDataType_t datatype, mkComm_t comm,
                             cudaStream_t stream)
{
    struct coll_call c = {"mkAllToAll", MKI_COLL_ALLTOALL, sendbuf, recvbuf,
                          count, datatype, 0, 0};
    return coll_run(comm, &c, stream);
}
