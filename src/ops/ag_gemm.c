/*
 * ag_gemm.c - mkAllGatherGemm: C = [A_0; A_1; ...] x op(B), validate ->
 * plan -> launch (device side and protocol: kernels/ops/ag_gemm.{h,cu}).
 *
 * The all-gather runs on the copy engines, with no SM: at each call the
 * caller's stream forks to side streams for each peer of the node (the
 * previous ranks first: their GEMMs need my rows soonest); each waits for
 * the fused kernel's gate (a stream memory operation on its go word),
 * then copies this rank's rows, chunk by chunk, into that peer's bank
 * (cudaMemcpyBatchAsync through the CUDA IPC mapping, asking for a copy
 * engine; cudaMemcpyAsync inside a graph capture) and after each chunk
 * raises the chunk's flag there (a stream memory operation).  This rank's own
 * rows of partial tiles go into its bank on the caller's stream before
 * the GEMM (its whole tiles are read from A itself).  Then one persistent
 * GEMM on the caller's stream computes on every SM of the plan, this
 * rank's rows first, its producer waiting on the signal of each chunk of
 * peer rows.  The caller's stream joins the side streams before the call
 * ends, so buffers are reusable in stream order; call numbers live on the
 * device, so the call can be captured in a CUDA graph and replayed.
 *
 * Across nodes the same kernel stays fused: the bank holds every rank's
 * rows, those of the node come by the copy engines as above, and the
 * kernel's first CTAs send this rank's rows to the ranks of the other
 * nodes and receive theirs through the collectives' net channels (the
 * proxy), raising a flag per chunk that the GEMM waits for like a copy
 * engine's (kernels/ops/ag_gemm.h).  With one rank, where the plan says
 * fusion cannot win, or where the kernel cannot take the call (more than
 * MKI_AGG_MAXSRC ranks, no rows or columns across nodes, no net path on
 * the GPU): the unfused sequence of our own kernels (mkAllGather, then
 * the GEMM).
 * The first call of a shape checks every rank's arguments through the
 * bootstrap (validate.c), so mismatches are reported on every rank.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gemm.h"
#include "mki.h"
#include "mem/mem.h"
#include "net/net.h"
#include "ops/ag_gemm.h"
#include "ops/ce.h"
#include "ops/op.h"
#include "plan/plan.h"

#define AGG_FUNC "mkAllGatherGemm"
#define AGG_CHUNKS 8      /* chunks per rank unless MK_SM_SPLIT sets chunk */

_Static_assert(MKI_AGG_SPLIT_MAX <= MKI_CE_SPLIT_MAX, "side streams per peer");
_Static_assert(MKI_AGG_MAXSRC == 64, "choose_fused's message");

/* One call's arguments, as the user gave them. */
struct agg_call {
    const void *a, *b;
    void *c, *ga;
    int64_t m_local;
    const int64_t *m_all;
    int64_t n, k;
    int trans_b;
    mkDataType_t dtype;
    int64_t m_total;  /* sum of the m_r */
    int es;
};

/* What the first call of a shape tells every rank (validate.c). */
struct agg_shape {
    int32_t ok, dtype, trans_b, has_m_all;
    int64_t k, n, m_local;
    uint64_t m_all_hash; /* of the whole m_all array (0 without one) */
};

struct agg_state {
    struct mki_shape_cache shapes;
    struct mki_heap_blk ctl;          /* struct mki_agg_ctl */
    struct mki_heap_blk bank;         /* the gathered A */
    int nretired;                     /* banks outgrown inside a capture */
    struct mki_ce ce;                 /* side streams to the peers (ce.h) */
    void *scratch;                    /* unfused sequence: gathered A */
    size_t scratch_bytes;
    void *padbuf;                     /* unfused, unequal shards: every */
    size_t padbuf_bytes;              /* shard padded to the largest */
    struct mki_op_bufs bufs;          /* padbuf and scratch outgrown */
};

static mkResult_t cuda_err(struct mkComm *comm, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return mki_error(comm, mkErrCuda, AGG_FUNC ": %s: %s", what, cudaGetErrorString(e));
}

/* ---- state ------------------------------------------------------------- */

static mkResult_t agg_create(struct mkComm *comm, void **state)
{
    if (!comm->dev) return mkSuccess;
    struct agg_state *g = calloc(1, sizeof(*g));
    if (!g) return mki_error(comm, mkErrNoMemory, "out of host memory");
    *state = g;
    MKI_CHECK(mki_heap_alloc(comm, 0, sizeof(struct mki_agg_ctl), 1, AGG_FUNC "'s control block",
                             &g->ctl));
    struct mki_agg_ctl *ctl = (struct mki_agg_ctl *)mki_heap_ptr(comm, &g->ctl, comm->dev->me);
    return mki_ce_init(comm, &g->ce, &ctl->spare[0], AGG_FUNC);
}

static void agg_destroy(struct mkComm *comm, void *state)
{
    struct agg_state *g = state;
    if (!g) return;
    if (comm->dev && !comm->dev->aborted) {
        mki_ce_fini(comm, &g->ce);
        if (g->scratch) (void)cudaFree(g->scratch);
        if (g->padbuf) (void)cudaFree(g->padbuf);
        mki_op_bufs_free(&g->bufs);
    }
    free(g); /* its heap blocks go with the heap */
}

static int agg_preload(char *msg, size_t len)
{
    int r = mki_agg_preload(msg, len);
    return r ? r : mki_gemm_preload(msg, len); /* the unfused sequence's GEMM */
}

const struct mki_op_desc mki_op_ag_gemm = {
    AGG_FUNC, NULL, agg_create, agg_destroy, agg_preload,
};

/* ---- argument checks (nothing touches the GPU) ---------------------- */

static mkResult_t check_rows(struct mkComm *comm, struct agg_call *c)
{
    const int64_t lim = INT32_MAX;
    int64_t total = 0;
    if (!c->m_all) {
        if (c->m_local > lim / comm->nranks)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": m_local = %lld times %d "
                             "ranks exceeds %lld rows", (long long)c->m_local, comm->nranks,
                             (long long)lim);
        c->m_total = c->m_local * comm->nranks;
        return mkSuccess;
    }
    for (int r = 0; r < comm->nranks; r++) {
        if (c->m_all[r] < 0 || c->m_all[r] > lim - total)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": m_all[%d] = %lld is "
                             "negative or makes the sum of rows exceed %lld", r,
                             (long long)c->m_all[r], (long long)lim);
        total += c->m_all[r];
    }
    if (c->m_all[comm->rank] != c->m_local)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": m_all[%d] = %lld but this "
                         "rank's m_local = %lld; m_all must list every rank's row count",
                         comm->rank, (long long)c->m_all[comm->rank], (long long)c->m_local);
    c->m_total = total;
    return mkSuccess;
}

static mkResult_t check_sizes(struct mkComm *comm, struct agg_call *c)
{
    MKI_CHECK(mki_check_gemm_args(comm, AGG_FUNC, c->dtype, c->trans_b, c->m_local, c->n, c->k,
                                  "the inner dimension", &c->es));
    MKI_CHECK(check_rows(comm, c));
    const uint64_t lim = (1ull << 46) / (uint64_t)c->es;
    if (c->n > INT32_MAX || c->k > INT32_MAX || (uint64_t)c->m_total * (uint64_t)c->k > lim ||
        (uint64_t)c->m_total * (uint64_t)c->n > lim)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": M = %lld, n = %lld, k = %lld "
                         "is too large (sizes up to 2^31 - 1 and matrices up to 64 TiB)",
                         (long long)c->m_total, (long long)c->n, (long long)c->k);
    const struct { const char *name; const void *p; int need; } ptrs[] = {
        {"A", c->a, c->m_local > 0},
        {"B", c->b, c->n > 0},
        {"C", c->c, c->m_total > 0 && c->n > 0}};
    for (unsigned i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        if (ptrs[i].need && ptrs[i].p == NULL)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": %s is NULL; pass device "
                             "memory", ptrs[i].name);
    return mkSuccess;
}

static mkResult_t check_device(struct mkComm *comm, const struct agg_call *c)
{
    const size_t es = (size_t)c->es;
    const size_t ab = (size_t)c->m_local * (size_t)c->k * es;
    const size_t bb = (size_t)c->n * (size_t)c->k * es;
    const size_t cb = (size_t)c->m_total * (size_t)c->n * es;
    const size_t gb = (size_t)c->m_total * (size_t)c->k * es;
    const struct { const char *name; const void *p; size_t bytes; } ptrs[] = {
        {"A", c->a, ab}, {"B", c->b, bb}, {"C", c->c, cb}, {"gatheredA", c->ga, gb}};
    for (unsigned i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        if (ptrs[i].p && ptrs[i].bytes)
            MKI_CHECK(mki_check_dev_ptr(comm, AGG_FUNC, ptrs[i].name, ptrs[i].p, 16));
    if (mki_overlap(c->c, cb, c->a, ab) || mki_overlap(c->c, cb, c->b, bb) ||
        mki_overlap(c->c, cb, c->ga, gb) || mki_overlap(c->ga, gb, c->a, ab) ||
        mki_overlap(c->ga, gb, c->b, bb))
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": C or gatheredA overlaps "
                         "another argument; outputs must be separate buffers");
    return mkSuccess;
}

/* ---- the first call of a shape: every rank checks every rank --------- */

/* Names the first rank whose arguments differ from this rank's. */
static mkResult_t compare_shapes(struct mkComm *comm, const void *records, size_t rec,
                                 const void *ctx)
{
    const struct agg_call *c = ctx;
    const struct agg_shape *all = records, *me = &all[comm->rank];
    (void)rec;
    for (int r = 0; r < comm->nranks; r++) {
        const struct agg_shape *s = &all[r];
        const char *what = s->k != me->k ? "k" : s->n != me->n ? "n"
                           : s->dtype != me->dtype ? "dtype"
                           : s->trans_b != me->trans_b ? "transB"
                           : s->has_m_all != me->has_m_all ? "m_all (NULL on some ranks only)"
                           : NULL;
        if (what)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d passed k = %lld, "
                             "n = %lld, dtype %d, transB %d but rank %d passed k = %lld, n = "
                             "%lld, dtype %d, transB %d: %s differs; every rank must pass the "
                             "same k, n, dtype, transB", r, (long long)s->k, (long long)s->n,
                             s->dtype, s->trans_b, comm->rank, (long long)me->k,
                             (long long)me->n, me->dtype, me->trans_b, what);
        const int64_t expect = c->m_all ? c->m_all[r] : c->m_local;
        if (r != comm->rank && s->m_local != expect)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d holds m_local = "
                             "%lld rows but this rank expects %lld (%s); pass m_all with every "
                             "rank's count", r, (long long)s->m_local, (long long)expect,
                             c->m_all ? "its m_all entry" : "equal shards");
        if (s->m_all_hash != me->m_all_hash)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d passed an m_all "
                             "that differs from this rank's; every rank must pass the same "
                             "counts", r);
    }
    return mkSuccess;
}

static mkResult_t agree(struct mkComm *comm, struct agg_state *g, const struct agg_call *c,
                        mkResult_t local)
{
    uint64_t h = 1469598103934665603ull;
    const int64_t v[6] = {c->k, c->n, c->m_local, c->dtype, c->trans_b, c->m_all != 0};
    for (int i = 0; i < 6; i++) h = mki_hash64(h, (uint64_t)v[i]);
    h = mki_hash64(h, mki_hash_counts(comm, c->m_all));
    struct agg_shape *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, AGG_FUNC ": out of host memory");
    all[comm->rank] = (struct agg_shape){0, (int32_t)c->dtype, c->trans_b, c->m_all != NULL,
                                         c->k, c->n, c->m_local, mki_hash_counts(comm, c->m_all)};
    mkResult_t r = mki_agree_shape(comm, g ? &g->shapes : NULL, AGG_FUNC, h, all, sizeof(*all),
                                   local, compare_shapes, c);
    free(all);
    return r;
}

/* ---- the unfused sequence of our own kernels ------------------------- */

static mkResult_t gemm_on(struct mki_call *k, const struct agg_call *c, const void *a)
{
    if (c->m_total == 0 || c->n == 0) return mkSuccess;
    mki_gemm_args ga;
    memset(&ga, 0, sizeof(ga));
    ga.m = c->m_total;
    ga.n = c->n;
    ga.k = c->k;
    ga.a = a;
    ga.b = c->b;
    ga.d = c->c;
    ga.in_type = ga.out_type = (mki_dtype_t)c->dtype;
    ga.trans_b = c->trans_b;
    ga.alpha = 1.0f;
    return mki_op_gemm(k, &ga);
}

/* Unequal shards without the fused kernel: gather every shard padded to
 * the largest (this rank's copied into its padded block first), then pack
 * the rows into out. */
static mkResult_t gather_unequal(struct mki_call *k, struct agg_state *g,
                                 const struct agg_call *c, char *out)
{
    struct mkComm *comm = k->comm;
    const size_t es = (size_t)c->es, row = (size_t)c->k * es;
    int64_t mmax = 0;
    for (int r = 0; r < comm->nranks; r++)
        if (c->m_all[r] > mmax) mmax = c->m_all[r];
    if (mmax == 0) return mkSuccess;
    const size_t block = (size_t)mmax * row;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->padbuf, &g->padbuf_bytes, block * (size_t)comm->nranks,
                         "the padded shards"));
    char *pad = g->padbuf;
    cudaError_t e = cudaSuccess;
    if (c->m_local > 0)
        e = cudaMemcpyAsync(pad + (size_t)comm->rank * block, c->a, (size_t)c->m_local * row,
                            cudaMemcpyDeviceToDevice, k->stream);
    if (e != cudaSuccess) return cuda_err(comm, "copying this rank's rows", e);
    MKI_CHECK(mkAllGather(pad + (size_t)comm->rank * block, pad, block / es, c->dtype, comm,
                          k->stream));
    size_t at = 0;
    for (int r = 0; r < comm->nranks; r++) {
        const size_t n = (size_t)c->m_all[r] * row;
        if (n) e = cudaMemcpyAsync(out + at, pad + (size_t)r * block, n,
                                   cudaMemcpyDeviceToDevice, k->stream);
        if (e != cudaSuccess) return cuda_err(comm, "packing the gathered rows", e);
        at += n;
    }
    return mkSuccess;
}

static mkResult_t run_unfused(struct mki_call *k, struct agg_state *g, const struct agg_call *c)
{
    struct mkComm *comm = k->comm;
    const size_t gbytes = (size_t)c->m_total * (size_t)c->k * (size_t)c->es;
    if (comm->nranks == 1) {
        if (c->ga && gbytes) {
            cudaError_t e = cudaMemcpyAsync(c->ga, c->a, gbytes, cudaMemcpyDeviceToDevice,
                                            k->stream);
            if (e != cudaSuccess) return cuda_err(comm, "copying gatheredA", e);
        }
        return gemm_on(k, c, c->a);
    }
    int unequal = 0;
    for (int r = 1; c->m_all && r < comm->nranks; r++) unequal |= c->m_all[r] != c->m_all[0];
    void *dst = c->ga;
    if (!dst && gbytes) {
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->scratch, &g->scratch_bytes, gbytes, "the gathered A"));
        dst = g->scratch;
    }
    if (unequal) MKI_CHECK(gather_unequal(k, g, c, dst));
    else MKI_CHECK(mkAllGather(c->a, dst, (size_t)c->m_local * (size_t)c->k, c->dtype, comm,
                               k->stream));
    return gemm_on(k, c, dst);
}

/* ---- the fused call -------------------------------------------------- */

/* The bank for a call of gbytes (single: the gate orders its reuse),
 * grown in MKI_HEAP_GRAIN steps.  Collective: every rank grows at the same
 * call (the shapes agree).  Outside a capture the old bank is given back
 * after this rank's previous calls (and so every peer's copies into it:
 * each kernel waited for them); inside one it stays with the heap. */
static mkResult_t ensure_bank(struct mki_call *k, struct agg_state *g, uint64_t gbytes)
{
    if (g->bank.bytes >= gbytes && g->bank.bytes) return mkSuccess;
    if (g->bank.bytes && !k->capturing) /* the side streams' copies into the peers' banks */
        MKI_CHECK(mki_ce_drain(k, &g->ce));
    return mki_op_bank(k, &g->bank, gbytes, &g->nretired, "the bank of the gathered A");
}

/* Powers of two at most v (v >= 1). */
static uint64_t pow2_floor(uint64_t v)
{
    uint64_t p = 1;
    while (p <= v / 2) p *= 2;
    return p;
}

/* Chunks across nodes are at least this large (a command and its credit
 * through the proxy per chunk), and at most a net block slot. */
#define AGG_NET_CHUNK_MIN (64u << 10)
/* ... and as small as gives each channel this many chunks of an average
 * shard, so that its slots pipeline (2 x H100, 2 x 1 virtual nodes, 16 MiB
 * shards: 1 MiB chunks, 4 per channel, 0.72-0.82x the unfused sequence;
 * bench/NOTES.md). */
#define AGG_NET_CHUNKS_PER_CH 8

/* Across nodes: the net CTAs of the fused kernel (one per channel of the
 * collectives, as many as the plan's inter_send allows, a power of two)
 * and the chunk (a power of two, from the average shard's bytes: the same
 * on every rank); 0 when the communicator has no such channels. */
static int net_setup(struct mkComm *comm, const struct mki_op_plan *p, uint64_t shard_bytes,
                     struct mki_agg_launch *l)
{
    uint64_t slot = 0;
    const int nbch = mki_coll_net_channels(comm, &l->ch, &slot);
    if (nbch < 1 || slot < AGG_NET_CHUNK_MIN) return 0;
    int want = p->split.inter_send > 0 ? p->split.inter_send : 1;
    if (want > nbch) want = nbch;
    l->nnet = (int)pow2_floor((uint64_t)want);
    uint64_t chunk = shard_bytes / ((uint64_t)l->nnet * AGG_NET_CHUNKS_PER_CH);
    if (chunk < AGG_NET_CHUNK_MIN) chunk = AGG_NET_CHUNK_MIN;
    if (chunk > slot) chunk = slot;
    l->net_chunk = pow2_floor(chunk);
    return l->nnet;
}

static void fill_launch(struct mkComm *comm, struct agg_state *g, const struct agg_call *c,
                        const struct mki_op_plan *p, struct mki_agg_launch *l)
{
    const struct mki_devrt *d = comm->dev;
    memset(l, 0, sizeof(*l));
    l->a = mki_heap_ptr(comm, &g->bank, d->me);
    l->b = c->b;
    l->c = c->c;
    l->m = c->m_total;
    l->n = c->n;
    l->k = c->k;
    l->dtype = (int)c->dtype;
    l->trans_b = c->trans_b;
    l->ctas = p->split.compute;
    l->nsrc = comm->nranks;
    l->release = c->ga == NULL;
    for (int r = 0; r < comm->nranks; r++)
        l->row_off[r + 1] = l->row_off[r] + (c->m_all ? c->m_all[r] : c->m_local);
    for (int s = 0; s < d->nlocal; s++) {
        const int64_t ms = c->m_all ? c->m_all[d->comm_rank[s]] : c->m_local;
        /* Local rows go first, so a few large chunks hide the copies: at
         * most AGG_CHUNKS per rank keeps host enqueue time small, and no
         * chunk smaller than MKI_AGG_CE_CHUNK_MIN (its fixed cost). */
        int64_t want = (ms + AGG_CHUNKS - 1) / AGG_CHUNKS;
        if (p->chunk_rows > want) want = p->chunk_rows;
        const int64_t floor_rows = mki_agg_chunk_floor(c->k * c->es);
        if (want < floor_rows) want = floor_rows;
        if (p->overridden & MKI_OVR_CHUNK) want = p->chunk_rows;
        l->chunk_rows[s] = mki_agg_chunk_rows(ms, want);
        l->peer_ctl[s] = (const struct mki_agg_ctl *)mki_heap_ptr(comm, &g->ctl, s);
    }
    const int64_t nch = mki_agg_nchunks(c->m_local, l->chunk_rows[d->me]);
    l->split = p->ce_streams < nch ? p->ce_streams : (int)nch;
    /* The GEMM reads this rank's whole tiles straight from A, unless the
     * gathered A is wanted (copied out of the bank). */
    if (!c->ga && c->m_local > 0) {
        mki_agg_own_direct(l->row_off[comm->rank], l->row_off[comm->rank + 1], &l->own_d0,
                           &l->own_d1);
        if (l->own_d1 > l->own_d0) l->own = c->a;
    }
    l->ctl = (struct mki_agg_ctl *)mki_heap_ptr(comm, &g->ctl, d->me);
    mki_rt_fill(comm, MKI_OP_AG_GEMM, &l->rt);
    if (comm->nnodes > 1) {
        const uint64_t shard = (uint64_t)c->m_total * (uint64_t)c->k * (uint64_t)c->es /
                               (uint64_t)comm->nranks;
        (void)net_setup(comm, p, shard, l); /* choose_fused checked it */
        l->net_src = c->a;
    }
}

/* My own rows go into my bank on the caller's stream, before the GEMM:
 * only those of partial tiles when the GEMM reads my whole tiles from A;
 * all of them when the gathered A is wanted.  (A device-local copy on a
 * side stream did not run while the persistent grid held every SM, and
 * the GEMM waiting for it timed out; here nothing of the GEMM runs yet.) */
static mkResult_t copy_own_rows(struct mki_call *k, const struct agg_call *c,
                                const struct mki_agg_launch *l)
{
    const int me = k->comm->rank;
    const size_t row = (size_t)c->k * (size_t)c->es;
    const int64_t lo = l->row_off[me], hi = l->row_off[me + 1];
    const int64_t part[2][2] = {{lo, l->own ? l->own_d0 : hi}, {l->own ? l->own_d1 : hi, hi}};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 2 && e == cudaSuccess; i++)
        if (part[i][1] > part[i][0])
            e = cudaMemcpyAsync((char *)l->a + (size_t)part[i][0] * row,
                                (const char *)c->a + (size_t)(part[i][0] - lo) * row,
                                (size_t)(part[i][1] - part[i][0]) * row,
                                cudaMemcpyDeviceToDevice, k->stream);
    return e == cudaSuccess ? mkSuccess : cuda_err(k->comm, "copying this rank's rows", e);
}

/* My rows to peer dst, on its side streams (ag_gemm.h's protocol). */
static mkResult_t copies_to(struct mki_call *k, struct agg_state *g, const struct agg_call *c,
                            const struct mki_agg_launch *l, int dst)
{
    struct mkComm *comm = k->comm;
    const int me = comm->dev->me;
    const size_t row = (size_t)c->k * (size_t)c->es;
    const int64_t cr = l->chunk_rows[me], nch = mki_agg_nchunks(c->m_local, cr);
    char *bank = mki_heap_ptr(comm, &g->bank, dst);
    struct mki_agg_ctl *peer = (struct mki_agg_ctl *)mki_heap_ptr(comm, &g->ctl, dst);
    MKI_CHECK(mki_ce_gate(k, &g->ce, dst, l->split, l->ctl->go[dst]));
    for (int64_t ch = 0; ch < nch; ch++) {
        cudaStream_t s = g->ce.side[dst][ch % l->split];
        const int64_t r0 = ch * cr, rows = c->m_local - r0 < cr ? c->m_local - r0 : cr;
        void *to = bank + (size_t)(l->row_off[comm->rank] + r0) * row;
        const void *from = (const char *)c->a + (size_t)r0 * row;
        const size_t bytes = rows > 0 ? (size_t)rows * row : 0;
        cudaError_t e = mki_ce_copy(k, s, 1, &to, &from, &bytes);
        if (e != cudaSuccess) return cuda_err(comm, "enqueueing the copies", e);
        MKI_CHECK(mki_ce_flag(k, &g->ce, &peer->sig[me][ch], s));
    }
    return mki_ce_join(k, &g->ce, dst, l->split);
}

static mkResult_t run_fused(struct mki_call *k, struct agg_state *g, const struct agg_call *c,
                            const struct mki_op_plan *p)
{
    struct mkComm *comm = k->comm;
    const uint64_t gbytes = (uint64_t)c->m_total * (uint64_t)c->k * (uint64_t)c->es;
    MKI_CHECK(ensure_bank(k, g, gbytes));
    struct mki_agg_launch l;
    fill_launch(comm, g, c, p, &l);
    MKI_CHECK(mki_ce_streams(k, &g->ce, l.split));
    struct mki_launch_desc d;
    char msg[512];
    if (mki_agg_describe(&l, &d, msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, AGG_FUNC ": %s", msg);
    MKI_CHECK(mki_ce_fork(k, &g->ce));
    MKI_CHECK(copy_own_rows(k, c, &l));
    MKI_CHECK(mki_launch(k, &d));
    /* Each GEMM computes its own rows first, then those of the next ranks
     * in order (me + 1, me + 2, ...): my rows are wanted soonest by the
     * rank before me, so the previous ranks go first (8 H200: 0.72-0.84x
     * the unfused sequence with the next ranks first, 1.11-1.38x so;
     * bench/NOTES.md). */
    for (int i = 1; i < comm->dev->nlocal; i++)
        MKI_CHECK(copies_to(k, g, c, &l, (comm->dev->me - i + comm->dev->nlocal) %
                                             comm->dev->nlocal));
    if (!c->ga) return mkSuccess;
    if (gbytes) {
        cudaError_t e = cudaMemcpyAsync(c->ga, l.a, gbytes, cudaMemcpyDeviceToDevice, k->stream);
        if (e != cudaSuccess) return cuda_err(comm, "copying gatheredA", e);
    }
    struct mki_launch_desc rd;
    memset(&rd, 0, offsetof(struct mki_launch_desc, param));
    rd.fn = mki_agg_release_kernel();
    rd.grid = 1;
    rd.block = 32;
    rd.cluster = 1;
    rd.exact = 1;
    (void)mki_launch_arg(&rd, &l.ctl, sizeof(l.ctl));
    return mki_launch(k, &rd);
}

/* Fused when the communicator is one node and the plan says it pays;
 * otherwise our unfused sequence, said at INFO. */
static int choose_fused(struct mki_call *k, const struct agg_state *g, const struct agg_call *c,
                        struct mki_op_plan *p, const char **why)
{
    struct mkComm *comm = k->comm;
    *why = NULL;
    if (comm->nranks == 1) { *why = "one rank: nothing to gather"; return 0; }
    if (comm->nranks > MKI_AGG_MAXSRC) {
        *why = "more than 64 ranks (the fused kernel's sources)";
        return 0;
    }
    if (k->capturing && !g->ce.capture_ok) {
        *why = "the stream is being captured and this driver cannot capture stream memory "
               "operations, which start the fused call's copies";
        return 0;
    }
    if (mki_plan_op(comm, MKI_OP_AG_GEMM, c->m_total ? c->m_total : 1, c->n ? c->n : 1, c->k,
                    c->es, p) != mkSuccess) {
        *why = "no plan for this shape";
        return 0;
    }
    if (comm->nnodes > 1) {
        struct mki_agg_launch probe;
        memset(&probe, 0, sizeof(probe));
        if (comm->net == NULL || comm->net->dev == NULL || net_setup(comm, p, 0, &probe) == 0) {
            *why = "ranks on several nodes without the collectives' net channels on the GPU";
            return 0;
        }
        if (c->m_total == 0 || c->n == 0) {
            *why = "ranks on several nodes and no tiles to compute";
            return 0;
        }
    }
    if (c->m_total == 0 || c->n == 0) return 1; /* the protocol only */
    int unequal = 0;
    for (int r = 1; c->m_all && r < comm->nranks; r++) unequal |= c->m_all[r] != c->m_all[0];
    if (!p->fused && !unequal) { *why = p->reason; return 0; }
    return 1;
}

static mkResult_t agg_call_run(struct mki_call *k, struct agg_call *c)
{
    struct mkComm *comm = k->comm;
    mkResult_t local = check_sizes(comm, c);
    if (local == mkSuccess) local = k->res;
    if (local == mkSuccess) local = check_device(comm, c);
    struct agg_state *g = mki_op_state(comm, &mki_op_ag_gemm);
    /* Every rank takes part in the shape check, even after a local error,
     * so that no rank is left waiting in it. */
    MKI_CHECK(agree(comm, g, c, local));
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    const char *why = NULL;
    if (choose_fused(k, g, c, &p, &why)) return run_fused(k, g, c, &p);
    MKI_INFO(MKI_SUB_GEMM, AGG_FUNC " %lld x %lld x %lld: unfused sequence (all-gather, then "
             "GEMM): %s", (long long)c->m_total, (long long)c->n, (long long)c->k, why);
    return run_unfused(k, g, c);
}

MK_API mkResult_t mkAllGatherGemm(const void *A, const void *B, void *C, void *gatheredA,
                                  int64_t m_local, const int64_t *m_all, int64_t n, int64_t k,
                                  int transB, mkDataType_t dtype, mkComm_t comm,
                                  cudaStream_t stream)
{
    struct mki_call kc;
    MKI_CHECK(mki_call_enter(comm, MKI_OP_AG_GEMM, stream, &kc));
    struct agg_call c = {A, B, C, gatheredA, m_local, m_all, n, k, transB, dtype, 0, 0};
    return mki_call_leave(&kc, agg_call_run(&kc, &c));
}
