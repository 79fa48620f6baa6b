/*
 * coll.c - mkAllGather, mkReduceScatter, mkAllReduce, mkAllToAll: validate
 * -> plan -> launch one persistent kernel (kernels/ops/coll.cu).
 *
 * Resources, made with the communicator from its symmetric heap (every
 * rank alike, kernels/rt/channel.h): the channel block (sequence numbers
 * and the counters of local peers), the slot block, and across nodes the
 * net block in the host segment.  Nothing here waits for the device: a
 * call checks its arguments, asks the plan (src/plan/coll.c) and enqueues
 * the kernel on the caller's stream, so calls may be captured in a CUDA
 * graph (the kernel numbers its operations on the device).  Calls on one
 * communicator must be ordered (one stream, or streams ordered by
 * events), as with NCCL.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "mem/mem.h"
#include "net/net.h"
#include "ops/coll.h"
#include "ops/op.h"
#include "plan/plan.h"

struct coll_state {
    uint64_t slot_bytes;           /* 0: the heap is too small for slots */
    int has_ll;                    /* the LL block (one node, several ranks) */
    struct mki_heap_blk ctl, slots, nb, ll;
    struct mki_nb_geom nbg;
    void *tmp;                     /* across nodes: the blocks by local index */
    size_t tmp_bytes;
    struct mki_op_bufs bufs;       /* tmp outgrown inside captures */
};

static size_t coll_host_bytes(const struct mkComm *comm)
{
    return comm->nnodes > 1 ? mki_nb_geometry(comm->nranks).bytes : 0;
}

static mkResult_t coll_create(struct mkComm *comm, void **state)
{
    if (!comm->dev) return mkSuccess;
    struct coll_state *s = calloc(1, sizeof(*s));
    if (!s) return mki_error(comm, mkErrNoMemory, "out of host memory");
    *state = s;
    int net_ch;
    mki_plan_coll_slots(mki_plan_context(comm), &s->slot_bytes, &net_ch);
    MKI_CHECK(mki_heap_alloc(comm, 0, mki_ch_block_bytes(comm->nranks), 1,
                             "the collectives' counters", &s->ctl));
    if (s->slot_bytes)
        MKI_CHECK(mki_heap_alloc(comm, 0, 2ull * (uint64_t)comm->dev->nlocal * MKI_MAXCH *
                                              MKI_NSLOTS * s->slot_bytes,
                                 0, "the collectives' slots", &s->slots));
    if (comm->nnodes == 1 && comm->dev->nlocal > 1) {
        MKI_CHECK(mki_heap_alloc(comm, 0, mki_ll_block_bytes(comm->dev->nlocal), 1,
                                 "the collectives' LL buffers", &s->ll));
        s->has_ll = 1;
    }
    if (comm->nnodes > 1) {
        s->nbg = mki_nb_geometry(comm->nranks);
        MKI_CHECK(mki_heap_alloc(comm, 1, s->nbg.bytes, 1, "the collectives' net block",
                                 &s->nb));
    }
    return mkSuccess;
}

static void coll_destroy(struct mkComm *comm, void *state)
{
    struct coll_state *s = state;
    if (s && comm->dev && !comm->dev->aborted) {
        if (s->tmp) (void)cudaFree(s->tmp);
        mki_op_bufs_free(&s->bufs);
    }
    free(state); /* its blocks go with the heap */
}

static int coll_preload(char *msg, size_t len) { return mki_coll_preload(msg, len); }

const struct mki_op_desc mki_op_coll = {
    "the collectives", coll_host_bytes, coll_create, coll_destroy, coll_preload,
};

/* ---- one call --------------------------------------------------------- */

/* What one collective call reads and writes. */
struct coll_call {
    int kind;                      /* enum mki_coll_kind */
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    mkDataType_t dtype;
    int es;
    size_t send_bytes, recv_bytes;
};

static mkResult_t check_sizes(struct mki_call *c, struct coll_call *a)
{
    struct mkComm *comm = c->comm;
    a->es = mki_dtype_bytes(a->dtype);
    if (a->es == 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: datatype = %d is not a mkDataType_t; "
                         "use mkBfloat16, mkFloat16 or mkFloat32", c->func, (int)a->dtype);
    size_t n = (size_t)comm->nranks;
    if (a->count > SIZE_MAX / (size_t)a->es / n || a->count > (1ull << 48))
        return mki_error(comm, mkErrInvalidArgument, "%s: count = %zu elements of %d bytes "
                         "times %d ranks overflows; split the call", c->func, a->count, a->es,
                         comm->nranks);
    size_t one = a->count * (size_t)a->es, all = one * n;
    switch (a->kind) {
    case MKI_COLL_ALLGATHER: a->send_bytes = one; a->recv_bytes = all; break;
    case MKI_COLL_REDUCESCATTER: a->send_bytes = all; a->recv_bytes = one; break;
    case MKI_COLL_ALLREDUCE: a->send_bytes = one; a->recv_bytes = one; break;
    default: a->send_bytes = all; a->recv_bytes = all; break;
    }
    if (a->count > 0 && (a->sendbuf == NULL || a->recvbuf == NULL))
        return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass device buffers",
                         c->func, a->sendbuf == NULL ? "sendbuf" : "recvbuf");
    return mkSuccess;
}

/* In place is allowed as NCCL defines it; any other overlap is refused. */
static mkResult_t check_overlap(struct mki_call *c, const struct coll_call *a)
{
    size_t one = a->count * (size_t)a->es;
    const char *s = a->sendbuf, *r = a->recvbuf;
    int inplace = 0;
    if (a->kind == MKI_COLL_ALLGATHER) inplace = s == r + (size_t)c->comm->rank * one;
    if (a->kind == MKI_COLL_REDUCESCATTER) inplace = r == s + (size_t)c->comm->rank * one;
    if (a->kind == MKI_COLL_ALLREDUCE) inplace = s == r;
    if (!inplace && mki_overlap(s, a->send_bytes, r, a->recv_bytes))
        return mki_error(c->comm, mkErrInvalidArgument, "%s: sendbuf and recvbuf overlap%s",
                         c->func, a->kind == MKI_COLL_ALLTOALL
                         ? " (all-to-all is never in place)"
                         : " without being the in-place layout");
    return mkSuccess;
}

static mkResult_t check_call(struct mki_call *c, struct coll_call *a, const struct coll_state *s)
{
    struct mkComm *comm = c->comm;
    if (comm->nnodes > 1 && (comm->net == NULL || comm->net->dev == NULL))
        return mki_error(comm, mkErrUnsupported, "%s: this communicator spans %d nodes but has "
                         "no inter-node path on the GPU (see MK_TRANSPORT and the errors of its "
                         "creation)", c->func, comm->nnodes);
    if (!s || s->slot_bytes == 0)
        return mki_error(comm, mkErrUnsupported, "%s: the symmetric heap (MK_WORKSPACE_SIZE = "
                         "%zu bytes) is too small for the slots of %d ranks per node; raise "
                         "MK_WORKSPACE_SIZE", c->func, comm->cfg.workspaceSize,
                         comm->plan->ctx.local_size);
    if (a->count == 0) return mkSuccess;
    MKI_CHECK(mki_check_dev_ptr(comm, c->func, "sendbuf", a->sendbuf, (size_t)a->es));
    MKI_CHECK(mki_check_dev_ptr(comm, c->func, "recvbuf", a->recvbuf, (size_t)a->es));
    return check_overlap(c, a);
}

/* The channels of this call, as the kernel sees them. */
static void fill_channels(struct mkComm *comm, const struct coll_state *s, uint64_t chunk,
                          struct mki_chan_dev *ch)
{
    const struct mki_devrt *d = comm->dev;
    memset(ch, 0, sizeof(*ch));
    for (int l = 0; l < d->nlocal; l++) {
        ch->ctl[l] = mki_heap_ptr(comm, &s->ctl, l);
        ch->slots[l] = mki_heap_ptr(comm, &s->slots, l);
    }
    ch->slot_bytes = chunk;
    if (comm->nnodes > 1) {
        ch->nb = mki_heap_ptr(comm, &s->nb, d->me);
        ch->nb_off = s->nb.off;
        ch->nbg = s->nbg;
    }
}

int mki_coll_net_channels(struct mkComm *comm, struct mki_chan_dev *ch, uint64_t *chunk)
{
    const struct coll_state *s = mki_op_state(comm, &mki_op_coll);
    *chunk = 0;
    if (!s || comm->nnodes < 2 || s->slot_bytes == 0 || s->nbg.nbch < 1) return 0;
    *chunk = s->nbg.stride; /* the net block's slots (a collective's chunk is
                             * also bounded by the local slots) */
    fill_channels(comm, s, s->slot_bytes < s->nbg.stride ? s->slot_bytes : s->nbg.stride, ch);
    return s->nbg.nbch;
}

/* Zero copy: where each local peer writes into my recvbuf (0: it is not
 * registered, the peer goes through my slots). */
static void fill_posts(struct mkComm *comm, const struct coll_call *a,
                       struct mki_coll_params *p)
{
    uint64_t seen[MKI_MAXLOCAL];
    if (!mki_devrt_is_registered(comm, a->recvbuf, a->recv_bytes, seen)) return;
    for (int l = 0; l < comm->dev->nlocal; l++)
        if (l != comm->dev->me) p->post[l] = seen[l];
}

/* ---- across nodes, hierarchically --------------------------------------- */

/* Reduce-scatter inside the node into this rank's share of recvbuf (share
 * = count / L elements at local index l; in place when sendbuf is
 * recvbuf), all-reduce of the share across the nodes between the ranks of
 * local index l, all-gather of the shares inside the node; the count % L
 * last elements by one flat all-reduce. */
static mkResult_t run_hier_ar(struct mki_call *c, struct coll_call *a, mkComm_t node,
                              mkComm_t peer, int *done)
{
    struct mkComm *comm = c->comm;
    const int L = node->nranks, l = node->rank;
    const size_t share = a->count / (size_t)L, main = share * (size_t)L, es = (size_t)a->es;
    char *mine = (char *)a->recvbuf + (size_t)l * share * es;
    MKI_CHECK(mki_op_sub_check(comm, mkReduceScatter(a->sendbuf, mine, share, a->dtype, node,
                                                     c->stream), node));
    MKI_CHECK(mki_op_sub_check(comm, mkAllReduce(mine, mine, share, a->dtype, peer, c->stream),
                               peer));
    MKI_CHECK(mki_op_sub_check(comm, mkAllGather(mine, a->recvbuf, share, a->dtype, node,
                                                 c->stream), node));
    if (main < a->count)
        MKI_CHECK(mkAllReduce((const char *)a->sendbuf + main * es,
                              (char *)a->recvbuf + main * es, a->count - main, a->dtype, comm,
                              c->stream));
    MKI_TRACE(MKI_SUB_COLL, "%s: count %zu hierarchically: %d ranks per node, share %zu%s",
              c->func, a->count, L, share, main < a->count ? ", the rest flat" : "");
    *done = 1;
    return mkSuccess;
}

/* Rank r is local index r % L of node r / L (virtual nodes and most
 * launchers): the layout the strided copies of run_hier_blocks assume. */
static int nodes_contiguous(const struct mkComm *comm, int L)
{
    const struct mki_topo *t = comm->topo;
    for (int r = 0; r < comm->nranks; r++)
        if (t->node_of[r] != r / L || t->local_rank_of[r] != r % L) return 0;
    return 1;
}

/* count x es bytes per block, N blocks of each of L local indices: block
 * (n, l) at dst + (l N + n) x cb from src + (n L + l) x cb (by_index), or
 * back (the inverse).  L two-dimensional copies on the stream. */
static mkResult_t permute(struct mki_call *c, char *dst, const char *src, int N, int L,
                          size_t cb, int by_index)
{
    for (int l = 0; l < L; l++) {
        cudaError_t e = by_index
            ? cudaMemcpy2DAsync(dst + (size_t)l * N * cb, cb, src + (size_t)l * cb, L * cb, cb,
                                (size_t)N, cudaMemcpyDeviceToDevice, c->stream)
            : cudaMemcpy2DAsync(dst + (size_t)l * cb, L * cb, src + (size_t)l * N * cb, cb, cb,
                                (size_t)N, cudaMemcpyDeviceToDevice, c->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return mki_error(c->comm, mkErrCuda, "%s: strided copy of the blocks failed: %s",
                             c->func, cudaGetErrorString(e));
        }
    }
    return mkSuccess;
}

/* All-gather: this rank's block to the ranks of its local index l (one per
 * node) into tmp's group l, the group to the node's ranks (in place in
 * tmp: groups by local index), then the blocks into rank order in
 * recvbuf.  Reduce-scatter: the blocks by local index into tmp, the node
 * sums every group (this rank keeps group l's), the nodes sum group l
 * into this rank's block.  (N - 1) blocks leave the node per rank, not
 * (P - L). */
static mkResult_t run_hier_blocks(struct mki_call *c, struct coll_call *a, mkComm_t node,
                                  mkComm_t peer, int *done)
{
    struct mkComm *comm = c->comm;
    const int L = node->nranks, l = node->rank, N = peer->nranks;
    if (!nodes_contiguous(comm, L)) return mkSuccess;
    struct coll_state *s = (struct coll_state *)mki_op_state(comm, &mki_op_coll);
    const size_t cb = a->count * (size_t)a->es, group = (size_t)N * cb;
    MKI_CHECK(mki_op_buf(c, &s->bufs, &s->tmp, &s->tmp_bytes, group * (size_t)L,
                         "the blocks ordered by local index"));
    char *tmp = s->tmp, *mine = tmp + (size_t)l * group;
    if (a->kind == MKI_COLL_ALLGATHER) {
        MKI_CHECK(mki_op_sub_check(comm, mkAllGather(a->sendbuf, mine, a->count, a->dtype, peer,
                                                     c->stream), peer));
        MKI_CHECK(mki_op_sub_check(comm, mkAllGather(mine, tmp, (size_t)N * a->count, a->dtype,
                                                     node, c->stream), node));
        MKI_CHECK(permute(c, a->recvbuf, tmp, N, L, cb, 0));
    } else {
        MKI_CHECK(permute(c, tmp, a->sendbuf, N, L, cb, 1));
        MKI_CHECK(mki_op_sub_check(comm, mkReduceScatter(tmp, mine, (size_t)N * a->count,
                                                         a->dtype, node, c->stream), node));
        MKI_CHECK(mki_op_sub_check(comm, mkReduceScatter(mine, a->recvbuf, a->count, a->dtype,
                                                         peer, c->stream), peer));
    }
    MKI_TRACE(MKI_SUB_COLL, "%s: count %zu hierarchically: %d nodes of %d ranks", c->func,
              a->count, N, L);
    *done = 1;
    return mkSuccess;
}

/* *done = 0 when the call cannot go hierarchically (no internal
 * communicators: a capture came first; ranks not in node order for the
 * blocks): the caller runs it flat, as every rank does. */
static mkResult_t run_hier(struct mki_call *c, struct coll_call *a, int *done)
{
    *done = 0;
    struct mki_op_split sp;
    MKI_CHECK(mki_op_split_make(c, &sp));
    if (!sp.node_comm || !sp.peer_comm) return mkSuccess;
    return a->kind == MKI_COLL_ALLREDUCE ? run_hier_ar(c, a, sp.node_comm, sp.peer_comm, done)
                                         : run_hier_blocks(c, a, sp.node_comm, sp.peer_comm, done);
}

static mkResult_t coll_call(struct mki_call *c, struct coll_call *a)
{
    struct mkComm *comm = c->comm;
    MKI_CHECK(check_sizes(c, a));
    if (c->res != mkSuccess) return c->res;
    const struct coll_state *s = mki_op_state(comm, &mki_op_coll);
    MKI_CHECK(check_call(c, a, s));
    if (a->count == 0) return mkSuccess;
    struct mki_coll_plan pl;
    MKI_CHECK(mki_plan_coll(comm, c->op, a->count, a->es, &pl));
    if (pl.hier) {
        int done;
        MKI_CHECK(run_hier(c, a, &done));
        if (done) return mkSuccess;
    }
    struct mki_coll_params p;
    memset(&p, 0, sizeof(p));
    mki_rt_fill(comm, c->op, &p.rt);
    fill_channels(comm, s, pl.chunk, &p.ch);
    p.roles = pl.roles;
    p.kind = a->kind;
    p.dtype = (int32_t)a->dtype;
    p.esize = a->es;
    p.nch = pl.nch;
    p.mover = pl.mover;
    p.oneshot = pl.oneshot;
    p.direct = pl.direct;
    p.peer_major = pl.peer_major;
    p.pipelined = pl.pipelined;
    p.stagger = pl.stagger;
    if (pl.ll) {
        if (!s->has_ll)
            return mki_error(comm, mkErrInternal, "%s: the plan chose LL but the communicator "
                             "has no LL block", c->func);
        p.ll = 1;
        for (int l = 0; l < comm->dev->nlocal; l++) p.llb[l] = mki_heap_ptr(comm, &s->ll, l);
    }
    p.count = a->count;
    p.src = a->sendbuf;
    p.dst = a->recvbuf;
    if (p.direct) fill_posts(comm, a, &p);
    struct mki_launch_desc d;
    memset(&d, 0, offsetof(struct mki_launch_desc, param));
    d.fn = mki_coll_kernel(&p);
    d.grid = (unsigned)pl.nch;
    d.block = MKI_COLL_THREADS;
    d.cluster = 1;
    d.smem = mki_coll_smem(&p);
    d.exact = 1;
    if (!d.fn || !mki_roles_valid(&p.roles, MKI_COLL_THREADS) ||
        mki_launch_arg(&d, &p, sizeof(p)) != 0)
        return mki_error(comm, mkErrInternal, "%s: no kernel for this plan (kind %d, dtype %d, "
                         "%d roles)", c->func, a->kind, (int)a->dtype, p.roles.n);
    MKI_CHECK(mki_launch(c, &d));
    MKI_TRACE(MKI_SUB_COLL, "%s: count %zu, %d CTAs, mover %d%s%s%s", c->func, a->count,
              pl.nch, pl.mover, pl.oneshot ? ", one phase" : "", pl.direct ? ", zero copy" : "",
              pl.ll ? ", LL" : "");
    return mkSuccess;
}

static mkResult_t coll_run(mkComm_t comm, enum mki_op op, struct coll_call *a,
                           cudaStream_t stream)
{
    struct mki_call c;
    MKI_CHECK(mki_call_enter(comm, op, stream, &c));
    return mki_call_leave(&c, coll_call(&c, a));
}

/* The four public calls: one signature, one kind each. */
#define MKI_COLL_API(name, kind, op)                                                          \
    MK_API mkResult_t name(const void *sendbuf, void *recvbuf, size_t count,                 \
                           mkDataType_t datatype, mkComm_t comm, cudaStream_t stream)        \
    {                                                                                        \
        struct coll_call a = {kind, sendbuf, recvbuf, count, datatype, 0, 0, 0};             \
        return coll_run(comm, op, &a, stream);                                               \
    }

MKI_COLL_API(mkAllGather, MKI_COLL_ALLGATHER, MKI_OP_ALLGATHER)
MKI_COLL_API(mkReduceScatter, MKI_COLL_REDUCESCATTER, MKI_OP_REDUCESCATTER)
MKI_COLL_API(mkAllReduce, MKI_COLL_ALLREDUCE, MKI_OP_ALLREDUCE)
MKI_COLL_API(mkAllToAll, MKI_COLL_ALLTOALL, MKI_OP_ALLTOALL)
