/*
 * attn.c - mkRingAttention: o = softmax(scale q k^T, masked) v over a
 * sequence spread over the ranks, validate -> plan -> launch (the
 * attention core: kernels/attn/attn.{h,cu}; the fused ring's protocol:
 * kernels/ops/attn.h).
 *
 * Every rank holds seq_local rows of q, k and v.  On one node, one
 * persistent kernel per rank attends its queries to its own keys first,
 * then to each peer's as they land in its bank.  The keys travel on the
 * copy engines: every rank pushes its k and v, chunk by chunk, into slot
 * `me` of every peer's bank from side streams beside its kernel (ce.h),
 * raising the chunk's flag there after each.  Rank r's kernel takes the
 * sources in the order r, r + 1, r + 2, ... (mod P), so rank r's keys are
 * wanted soonest by rank r - 1: its gate opens the side streams to the
 * previous ranks first, and the host enqueues them in that order
 * (copy_dst), as mkAllGatherGemm does.  Four ranks:
 *
 *            segment 0    1      2      3
 *   rank 0   k0 v0 (own)  k1 v1  k2 v2  k3 v3     rank r pushes k_r, v_r
 *   rank 1   k1 v1 (own)  k2 v2  k3 v3  k0 v0     to r - 1, r - 2, r - 3
 *   rank 2   k2 v2 (own)  k3 v3  k0 v0  k1 v1     (slot r of their banks)
 *   rank 3   k3 v3 (own)  k0 v0  k1 v1  k2 v2
 *
 * The online softmax carries across the segments, so nothing is merged
 * after the kernel.  The bank is single: the kernel's gate lets a call's
 * copies into a peer's bank only once that peer released its previous
 * call; call numbers live on the device, so the call can be captured in
 * a CUDA graph and replayed.
 *
 * Across nodes, inside a capture where the driver cannot capture stream
 * memory operations, for more copy chunks than the ring has flags, or
 * with MK_SM_SPLIT ring_attn:fused=0 (choose_fused): mkAllGather of k and
 * of v into a buffer (the proxy across nodes), then the core over every
 * rank's keys in the same order, at most MKI_ATTN_MAXSEG ranks.  With one
 * rank: the core alone.  An empty shape launches nothing on any rank.
 * The first call of a shape checks every rank's arguments through the
 * bootstrap (validate.c), so mismatches are reported on every rank.
 */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "mem/mem.h"
#include "ops/attn.h"
#include "ops/ce.h"
#include "ops/op.h"
#include "plan/plan.h"

#define RATT_FUNC "mkRingAttention"

_Static_assert(MKI_RATT_SPLIT_MAX <= MKI_CE_SPLIT_MAX, "side streams per peer");
_Static_assert(MKI_ATTN_MAXSEG >= MKI_MAXLOCAL, "a segment per rank of a node");

/* One call's arguments, as the user gave them. */
struct ratt_call {
    const void *q, *k, *v;
    void *o;
    float *lse;
    int64_t batch, seq, heads, kv_heads, head_dim;
    mkAttnLayout_t layout;
    mkAttnMask_t mask;
    float scale;
    mkDataType_t dtype;
    /* from check_sizes */
    int es;
    int empty;                        /* no query to compute */
    size_t qbytes, kvbytes, lsebytes; /* q (and o), k (and v), lse */
};

/* What the first call of a shape tells every rank (validate.c). */
struct ratt_shape {
    int32_t ok, dtype, layout, mask;
    float scale;
    int32_t pad;
    int64_t batch, seq, heads, kv_heads, head_dim;
};

struct ratt_state {
    struct mki_shape_cache shapes;
    struct mki_heap_blk ctl;          /* struct mki_ratt_ctl */
    struct mki_heap_blk bank;         /* slot s at 2 s kvbytes: k, then v of local rank s */
    int nretired;                     /* banks outgrown inside a capture */
    struct mki_ce ce;                 /* side streams to the peers (ce.h) */
    void *gathered;                   /* unfused: every rank's k, then every rank's v */
    size_t gathered_bytes;
    struct mki_op_bufs bufs;          /* gathered buffers outgrown */
};

static mkResult_t cuda_err(struct mki_call *call, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return mki_error(call->comm, mkErrCuda, RATT_FUNC ": %s: %s", what, cudaGetErrorString(e));
}

/* The core's error codes (attn/attn.h) as the library's. */
static mkResult_t core_err(struct mkComm *comm, int rc, const char *msg)
{
    const mkResult_t r = rc == MKI_ATTN_ERR_INVALID ? mkErrInvalidArgument
                         : rc == MKI_ATTN_ERR_UNSUPPORTED ? mkErrUnsupported : mkErrCuda;
    return mki_error(comm, r, RATT_FUNC ": %s", msg);
}

/* ---- state ------------------------------------------------------------- */

static mkResult_t ratt_create(struct mkComm *comm, void **state)
{
    if (!comm->dev) return mkSuccess;
    struct ratt_state *g = calloc(1, sizeof(*g));
    if (!g) return mki_error(comm, mkErrNoMemory, "out of host memory");
    *state = g;
    MKI_CHECK(mki_heap_alloc(comm, 0, sizeof(struct mki_ratt_ctl), 1,
                             RATT_FUNC "'s control block", &g->ctl));
    struct mki_ratt_ctl *ctl = (struct mki_ratt_ctl *)mki_heap_ptr(comm, &g->ctl, comm->dev->me);
    return mki_ce_init(comm, &g->ce, &ctl->spare[0], RATT_FUNC);
}

static void ratt_destroy(struct mkComm *comm, void *state)
{
    struct ratt_state *g = state;
    if (!g) return;
    if (comm->dev && !comm->dev->aborted) {
        mki_ce_fini(comm, &g->ce);
        if (g->gathered) (void)cudaFree(g->gathered);
        mki_op_bufs_free(&g->bufs);
    }
    free(g); /* its heap blocks go with the heap */
}

static int ratt_preload(char *msg, size_t len)
{
    int r = mki_attn_preload(msg, len); /* the core alone: one rank, the unfused sequence */
    return r ? r : mki_ratt_preload(msg, len);
}

const struct mki_op_desc mki_op_ring_attn = {
    RATT_FUNC, NULL, ratt_create, ratt_destroy, ratt_preload,
};

/* ---- positions and the core's arguments ------------------------------ */

/* Global positions of rank r's local rows (attn/attn.h: row i is at
 * i < split ? off0 + i : off1 + (i - split)). */
static struct mki_attn_pos pos_of(const struct ratt_call *c, int nranks, int r)
{
    struct mki_attn_pos p = {c->seq, 0, 0}; /* mkAttnFull: unused */
    if (c->mask == mkAttnCausalZigzag) {    /* chunks r and 2P - 1 - r of s / 2 rows */
        const int64_t h = c->seq / 2;
        p.split = h;
        p.off0 = r * h;
        p.off1 = (2 * (int64_t)nranks - 1 - r) * h;
    } else if (c->mask == mkAttnCausal) {   /* rows [r s, (r + 1) s) */
        p.off0 = p.off1 = r * c->seq;
    }
    return p;
}

/* Segment i of a call holds the keys of rank (rank + i) mod P, as in the
 * fused ring. */
static int src_rank(const struct mkComm *comm, int i)
{
    return (comm->rank + i) % comm->nranks;
}

/* Everything but the peers' segments: q, o, lse, the shape, this rank's
 * keys as segment 0. */
static void core_args(const struct mkComm *comm, const struct ratt_call *c,
                      struct mki_attn_args *a)
{
    memset(a, 0, sizeof(*a));
    a->q = c->q;
    a->o = c->o;
    a->lse = c->lse;
    a->batch = c->batch;
    a->seq = c->seq;
    a->heads = c->heads;
    a->kv_heads = c->kv_heads;
    a->head_dim = c->head_dim;
    a->layout = c->layout == mkAttnBHSD ? MKI_ATTN_BHSD : MKI_ATTN_BSHD;
    a->dtype = c->dtype == mkFloat16 ? MKI_F16 : MKI_BF16;
    a->scale = c->scale;
    a->causal = c->mask != mkAttnFull;
    a->qpos = pos_of(c, comm->nranks, comm->rank);
    a->nseg = 1;
    a->seg[0].k = c->k;
    a->seg[0].v = c->v;
    a->seg[0].pos = a->qpos;
}

/* The rank's SMs: ranks sharing a GPU under MPS keep to their share, or a
 * persistent grid would wait for SMs that the others' kernels hold. */
static int budget_ctas(const struct mkComm *comm)
{
    const struct mki_plan_ctx *pc = mki_plan_context(comm);
    return pc && pc->sm_budget > 0 ? pc->sm_budget : 0;
}

/* ---- argument checks (nothing touches the GPU) ---------------------- */

static mkResult_t check_kinds(struct mkComm *comm, const struct ratt_call *c)
{
    if (c->dtype == mkFloat32)
        return mki_error(comm, mkErrUnsupported, RATT_FUNC ": dtype mkFloat32 is not "
                         "supported; use mkBfloat16 or mkFloat16 (softmax and accumulation "
                         "are fp32 either way)");
    if (c->dtype != mkBfloat16 && c->dtype != mkFloat16)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": dtype = %d is not a "
                         "mkDataType_t; use mkBfloat16 or mkFloat16", (int)c->dtype);
    if ((unsigned)c->layout > (unsigned)mkAttnBHSD)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": layout = %d; pass "
                         "mkAttnBSHD (batch, sequence, heads, head_dim) or mkAttnBHSD (batch, "
                         "heads, sequence, head_dim)", (int)c->layout);
    if ((unsigned)c->mask > (unsigned)mkAttnCausalZigzag)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": mask = %d; pass mkAttnFull, "
                         "mkAttnCausal or mkAttnCausalZigzag", (int)c->mask);
    if (!(c->scale > 0.0f && c->scale <= FLT_MAX))
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": scale = %g; pass a finite "
                         "number above 0 (usually 1 / sqrt(head_dim))", (double)c->scale);
    return mkSuccess;
}

static int mul_over(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static mkResult_t check_dims(struct mkComm *comm, struct ratt_call *c)
{
    if (c->batch < 0 || c->seq < 0 || c->heads < 0 || c->kv_heads < 0 || c->head_dim < 0)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": negative size (batch = %lld, "
                         "seq_local = %lld, heads = %lld, kv_heads = %lld, head_dim = %lld)",
                         (long long)c->batch, (long long)c->seq, (long long)c->heads,
                         (long long)c->kv_heads, (long long)c->head_dim);
    if (c->head_dim != 64 && c->head_dim != 128)
        return mki_error(comm, mkErrUnsupported, RATT_FUNC ": head_dim = %lld is not "
                         "supported; the kernel takes 64 or 128 (pad q, k and v with zero "
                         "columns and pass the scale of the real head_dim)",
                         (long long)c->head_dim);
    if (c->kv_heads < 1 || c->heads % c->kv_heads != 0)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": heads = %lld, kv_heads = "
                         "%lld: kv_heads must be at least 1 and divide heads (query head h "
                         "reads kv head h / (heads / kv_heads))", (long long)c->heads,
                         (long long)c->kv_heads);
    if (c->mask == mkAttnCausalZigzag && c->seq % 2 != 0)
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": seq_local = %lld is odd; "
                         "mkAttnCausalZigzag gives each rank two chunks of seq_local / 2 rows "
                         "(pad the sequence to an even length per rank, or use mkAttnCausal)",
                         (long long)c->seq);
    return mkSuccess;
}

/* Sizes that overflow, then NULL pointers where there is work. */
static mkResult_t check_bytes(struct mkComm *comm, struct ratt_call *c)
{
    /* q up to 64 TiB, and so the k and v of every rank together (the
     * gathered buffer of the unfused sequence) */
    const int64_t lim = (1ll << 46) / c->es;
    int64_t rows = 0, hd = 0, kvd = 0, qel = 0, kvel = 0;
    if (mul_over(c->batch, c->seq, &rows) || mul_over(c->heads, c->head_dim, &hd) ||
        mul_over(c->kv_heads, c->head_dim, &kvd) || mul_over(rows, hd, &qel) ||
        mul_over(rows, kvd, &kvel) || qel > lim || kvel > lim / (2 * (int64_t)comm->nranks))
        return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": batch = %lld, seq_local = "
                         "%lld, heads = %lld, kv_heads = %lld, head_dim = %lld is too large (q "
                         "up to 64 TiB, the k and v of all %d ranks together up to 64 TiB)",
                         (long long)c->batch, (long long)c->seq, (long long)c->heads,
                         (long long)c->kv_heads, (long long)c->head_dim, comm->nranks);
    c->qbytes = (size_t)qel * (size_t)c->es;
    c->kvbytes = (size_t)kvel * (size_t)c->es;
    c->lsebytes = (size_t)rows * (size_t)c->heads * sizeof(float);
    c->empty = rows == 0 || c->heads == 0;
    if (c->empty) return mkSuccess;
    const struct { const char *name; const void *p; } req[] = {
        {"q", c->q}, {"k", c->k}, {"v", c->v}, {"o", c->o}};
    for (unsigned i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (!req[i].p)
            return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": %s is NULL; pass device "
                             "memory (only lse may be NULL)", req[i].name);
    return mkSuccess;
}

/* What the core's kernel takes (32-bit tile counts, alignment), for the
 * segments of every rank this call will attend to. */
static mkResult_t check_core(struct mkComm *comm, const struct ratt_call *c)
{
    if (comm->nranks > MKI_ATTN_MAXSEG)
        return mki_error(comm, mkErrUnsupported, RATT_FUNC ": %d ranks; this version attends "
                         "over at most %d ranks (every rank's keys in one launch of the "
                         "core): use a sequence-parallel communicator of at most %d ranks "
                         "(mkCommSplit)", comm->nranks, MKI_ATTN_MAXSEG, MKI_ATTN_MAXSEG);
    if (c->empty) return mkSuccess;
    struct mki_attn_args a;
    core_args(comm, c, &a);
    a.nseg = comm->nranks;
    for (int i = 1; i < a.nseg; i++) {
        a.seg[i] = a.seg[0];
        a.seg[i].pos = pos_of(c, comm->nranks, src_rank(comm, i));
    }
    char msg[512];
    const int rc = mki_attn_validate(&a, msg, sizeof(msg));
    return rc == MKI_ATTN_OK ? mkSuccess : core_err(comm, rc, msg);
}

static mkResult_t check_sizes(struct mkComm *comm, struct ratt_call *c)
{
    MKI_CHECK(check_kinds(comm, c));
    c->es = mki_dtype_bytes(c->dtype);
    MKI_CHECK(check_dims(comm, c));
    MKI_CHECK(check_bytes(comm, c));
    return check_core(comm, c);
}

/* Device pointers of this GPU, aligned; o and lse overlap nothing. */
static mkResult_t check_device(struct mkComm *comm, const struct ratt_call *c)
{
    if (c->empty) return mkSuccess;
    const struct { const char *name; const void *p; size_t bytes, align; } a[] = {
        {"q", c->q, c->qbytes, 16}, {"k", c->k, c->kvbytes, 16}, {"v", c->v, c->kvbytes, 16},
        {"o", c->o, c->qbytes, 16}, {"lse", c->lse, c->lsebytes, 4}};
    const int n = sizeof(a) / sizeof(a[0]), first_out = 3;
    for (int i = 0; i < n; i++)
        if (a[i].p) MKI_CHECK(mki_check_dev_ptr(comm, RATT_FUNC, a[i].name, a[i].p, a[i].align));
    for (int i = first_out; i < n; i++)
        for (int j = 0; j < i; j++)
            if (mki_overlap(a[i].p, a[i].bytes, a[j].p, a[j].bytes))
                return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": %s overlaps %s; o and "
                                 "lse need memory of their own (no in-place form)", a[i].name,
                                 a[j].name);
    return mkSuccess;
}

/* ---- the first call of a shape: every rank checks every rank --------- */

/* Names the first rank whose arguments differ from this rank's. */
static mkResult_t compare_shapes(struct mkComm *comm, const void *records, size_t rec,
                                 const void *ctx)
{
    const struct ratt_shape *all = records, *me = &all[comm->rank];
    (void)rec;
    (void)ctx;
    for (int r = 0; r < comm->nranks; r++) {
        const struct ratt_shape *s = &all[r];
        const char *what = s->batch != me->batch ? "batch" : s->seq != me->seq ? "seq_local"
                           : s->heads != me->heads ? "heads"
                           : s->kv_heads != me->kv_heads ? "kv_heads"
                           : s->head_dim != me->head_dim ? "head_dim"
                           : s->layout != me->layout ? "layout"
                           : s->mask != me->mask ? "mask"
                           : memcmp(&s->scale, &me->scale, sizeof(float)) ? "scale"
                           : s->dtype != me->dtype ? "dtype" : NULL;
        if (what)
            return mki_error(comm, mkErrInvalidArgument, RATT_FUNC ": rank %d passed batch = "
                             "%lld, seq_local = %lld, heads = %lld, kv_heads = %lld, head_dim = "
                             "%lld, layout %d, mask %d, scale %g, dtype %d but rank %d passed "
                             "%lld, %lld, %lld, %lld, %lld, layout %d, mask %d, scale %g, dtype "
                             "%d: %s differs; every rank must pass the same", r,
                             (long long)s->batch, (long long)s->seq, (long long)s->heads,
                             (long long)s->kv_heads, (long long)s->head_dim, s->layout, s->mask,
                             (double)s->scale, s->dtype, comm->rank, (long long)me->batch,
                             (long long)me->seq, (long long)me->heads, (long long)me->kv_heads,
                             (long long)me->head_dim, me->layout, me->mask, (double)me->scale,
                             me->dtype, what);
    }
    return mkSuccess;
}

static mkResult_t agree(struct mkComm *comm, struct ratt_state *g, const struct ratt_call *c,
                        mkResult_t local)
{
    uint32_t bits;
    memcpy(&bits, &c->scale, sizeof(bits));
    const int64_t v[9] = {c->batch, c->seq, c->heads, c->kv_heads, c->head_dim, c->layout,
                          c->mask, bits, c->dtype};
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 9; i++) h = mki_hash64(h, (uint64_t)v[i]);
    struct ratt_shape *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, RATT_FUNC ": out of host memory");
    all[comm->rank] = (struct ratt_shape){0, (int32_t)c->dtype, (int32_t)c->layout,
                                          (int32_t)c->mask, c->scale, 0, c->batch, c->seq,
                                          c->heads, c->kv_heads, c->head_dim};
    mkResult_t r = mki_agree_shape(comm, g ? &g->shapes : NULL, RATT_FUNC, h, all, sizeof(*all),
                                   local, compare_shapes, NULL);
    free(all);
    return r;
}

/* ---- one rank, and the unfused sequence ------------------------------- */

static mkResult_t run_core(struct mki_call *call, struct mki_attn_args *a)
{
    char msg[512];
    a->ctas = budget_ctas(call->comm);
    const int rc = mki_attn_run(a, (void *)call->stream, msg, sizeof(msg));
    return rc == MKI_ATTN_OK ? mkSuccess : core_err(call->comm, rc, msg);
}

/* Every rank's k and v gathered (rank order), then the core over them,
 * this rank's own keys first and then rank + 1, rank + 2, ... as in the
 * fused ring. */
static mkResult_t run_unfused(struct mki_call *call, struct ratt_state *g,
                              const struct ratt_call *c)
{
    struct mkComm *comm = call->comm;
    const int P = comm->nranks;
    const size_t kvb = c->kvbytes;
    struct mki_attn_args a;
    core_args(comm, c, &a);
    MKI_CHECK(mki_op_buf(call, &g->bufs, &g->gathered, &g->gathered_bytes, 2 * (size_t)P * kvb,
                         "the gathered k and v"));
    char *gk = g->gathered, *gv = gk + (size_t)P * kvb;
    MKI_CHECK(mkAllGather(c->k, gk, kvb / (size_t)c->es, c->dtype, comm, call->stream));
    MKI_CHECK(mkAllGather(c->v, gv, kvb / (size_t)c->es, c->dtype, comm, call->stream));
    a.nseg = P;
    for (int i = 1; i < P; i++) {
        const int r = src_rank(comm, i);
        a.seg[i].k = gk + (size_t)r * kvb;
        a.seg[i].v = gv + (size_t)r * kvb;
        a.seg[i].pos = pos_of(c, P, r);
    }
    return run_core(call, &a);
}

/* ---- the fused ring on one node ---------------------------------------- */

/* Pieces of a rank's k that the chunks cannot merge (attn/attn.h): one
 * per batch (BSHD), one per batch and kv head (BHSD). */
static int64_t pieces(const struct ratt_call *c)
{
    return c->batch * (c->layout == mkAttnBHSD ? c->kv_heads : 1);
}

/* Rows per chunk: the same on every rank (the shapes agree). */
static int64_t chunk_rows(const struct ratt_call *c)
{
    const int bhsd = c->layout == mkAttnBHSD;
    const int64_t row = (bhsd ? 1 : c->kv_heads) * c->head_dim * c->es;
    return mki_attn_chunk_rows(bhsd ? MKI_ATTN_BHSD : MKI_ATTN_BSHD, c->batch, c->kv_heads,
                               c->seq, row, MKI_RATT_CE_CHUNK_MIN);
}

/* The bank for a call (single: the gate orders its reuse), grown in
 * MKI_HEAP_GRAIN steps.  Collective: every rank grows at the same call
 * (the shapes agree).  Outside a capture the old bank is given back after
 * this rank's previous calls (and so every peer's copies into it: each
 * kernel waited for them); inside one it stays with the heap. */
static mkResult_t ensure_bank(struct mki_call *call, struct ratt_state *g, uint64_t bytes)
{
    if (g->bank.bytes >= bytes && g->bank.bytes) return mkSuccess;
    if (g->bank.bytes && !call->capturing) /* the side streams' copies into the peers' banks */
        MKI_CHECK(mki_ce_drain(call, &g->ce));
    return mki_op_bank(call, &g->bank, bytes, &g->nretired, "the bank of k and v");
}

static void fill_launch(struct mki_call *call, struct ratt_state *g, const struct ratt_call *c,
                        const struct mki_op_plan *p, struct mki_ratt_launch *l)
{
    struct mkComm *comm = call->comm;
    const struct mki_devrt *d = comm->dev;
    const int n = d->nlocal, me = d->me;
    const size_t kvb = c->kvbytes;
    char *bank = mki_heap_ptr(comm, &g->bank, me);
    memset(l, 0, sizeof(*l));
    l->ctl = (struct mki_ratt_ctl *)mki_heap_ptr(comm, &g->ctl, me);
    core_args(comm, c, &l->core);
    l->core.nseg = n;
    l->core.chunk_rows = chunk_rows(c);
    l->core.flag_target = 1;
    l->core.ctas = p->split.compute;
    l->nsrc = n;
    l->seg_src[0] = me;
    for (int i = 1; i < n; i++) {
        const int src = (me + i) % n;
        struct mki_attn_seg *s = &l->core.seg[i];
        l->seg_src[i] = src;
        s->k = bank + 2 * (size_t)src * kvb;
        s->v = bank + (2 * (size_t)src + 1) * kvb;
        s->pos = pos_of(c, comm->nranks, d->comm_rank[src]);
        s->flags = l->ctl->sig[src];
    }
    for (int s = 0; s < n; s++)
        l->peer_ctl[s] = (const struct mki_ratt_ctl *)mki_heap_ptr(comm, &g->ctl, s);
    const int64_t nch = mki_attn_nchunks(l->core.layout, c->batch, c->kv_heads, c->seq,
                                         l->core.chunk_rows);
    int split = p->ce_streams < 1 ? 1 : p->ce_streams;
    if (split > MKI_RATT_SPLIT_MAX) split = MKI_RATT_SPLIT_MAX;
    l->split = nch < split ? (int)nch : split;
    mki_rt_fill(comm, MKI_OP_RING_ATTN, &l->rt);
}

/* My k and v to peer dst, chunk by chunk, into slot `me` of its bank, on
 * its side streams (ops/attn.h's protocol). */
static mkResult_t copies_to(struct mki_call *call, struct ratt_state *g,
                            const struct ratt_call *c, const struct mki_ratt_launch *l, int dst)
{
    struct mkComm *comm = call->comm;
    const int me = comm->dev->me;
    const struct mki_attn_args *a = &l->core;
    const size_t kvb = c->kvbytes;
    const int64_t cr = a->chunk_rows;
    const int64_t nch = mki_attn_nchunks(a->layout, c->batch, c->kv_heads, c->seq, cr);
    char *slot = mki_heap_ptr(comm, &g->bank, dst) + 2 * (size_t)me * kvb;
    struct mki_ratt_ctl *peer = (struct mki_ratt_ctl *)mki_heap_ptr(comm, &g->ctl, dst);
    MKI_CHECK(mki_ce_gate(call, &g->ce, dst, l->split, l->ctl->go[dst]));
    for (int64_t ch = 0; ch < nch; ch++) {
        cudaStream_t s = g->ce.side[dst][ch % l->split];
        int64_t off, len;
        mki_attn_chunk(a->layout, c->batch, c->kv_heads, c->seq, c->head_dim, c->es, cr, ch,
                       &off, &len);
        void *to[2] = {slot + off, slot + kvb + off};
        const void *from[2] = {(const char *)c->k + off, (const char *)c->v + off};
        const size_t bytes[2] = {(size_t)len, (size_t)len};
        cudaError_t e = mki_ce_copy(call, s, 2, to, from, bytes);
        if (e != cudaSuccess) return cuda_err(call, "enqueueing the copies", e);
        MKI_CHECK(mki_ce_flag(call, &g->ce, &peer->sig[me][ch], s));
    }
    return mki_ce_join(call, &g->ce, dst, l->split);
}

/* The i-th peer this rank's keys go to (i = 1 .. n - 1): the previous
 * ranks first (rank r - 1 reads them right after its own), the order in
 * which the kernel's gate (kernels/attn/attn.cu) opens their side
 * streams. */
static int copy_dst(int me, int i, int n)
{
    return (me - i + n) % n;
}

static mkResult_t run_fused(struct mki_call *call, struct ratt_state *g,
                            const struct ratt_call *c, const struct mki_op_plan *p)
{
    struct mkComm *comm = call->comm;
    const int n = comm->dev->nlocal;
    MKI_CHECK(ensure_bank(call, g, 2 * (uint64_t)n * c->kvbytes));
    struct mki_ratt_launch l;
    fill_launch(call, g, c, p, &l);
    MKI_CHECK(mki_ce_streams(call, &g->ce, l.split));
    struct mki_launch_desc d;
    char msg[512];
    const int rc = mki_ratt_describe(&l, &d, msg, sizeof(msg));
    if (rc != MKI_ATTN_OK) return core_err(comm, rc, msg);
    MKI_CHECK(mki_ce_fork(call, &g->ce));
    MKI_CHECK(mki_launch(call, &d));
    for (int i = 1; i < n; i++)
        MKI_CHECK(copies_to(call, g, c, &l, copy_dst(comm->dev->me, i, n)));
    return mkSuccess;
}

/* Fused on one node (unless MK_SM_SPLIT says ring_attn:fused=0);
 * otherwise the unfused sequence, said at INFO. */
static int choose_fused(struct mki_call *call, const struct ratt_state *g,
                        const struct ratt_call *c, struct mki_op_plan *p, const char **why)
{
    struct mkComm *comm = call->comm;
    *why = NULL;
    if (comm->nnodes != 1 || comm->dev->nlocal != comm->nranks) {
        *why = "ranks on several nodes (the fused ring has no remote source of keys yet; the "
               "all-gathers cross nodes through the proxy)";
        return 0;
    }
    if (!g) { *why = "no state for the fused ring"; return 0; }
    if (call->capturing && !g->ce.capture_ok) {
        *why = "the stream is being captured and this driver cannot capture stream memory "
               "operations, which start the fused call's copies";
        return 0;
    }
    for (int l = 0; l < comm->nranks; l++)
        if (comm->dev->comm_rank[l] != l) { *why = "local ranks not in communicator order"; return 0; }
    if (pieces(c) > MKI_ATTN_MAXCHUNKS) {
        *why = "batch (times kv_heads with mkAttnBHSD) above 1024: more copy chunks than the "
               "fused ring has flags";
        return 0;
    }
    const struct mki_plan_attn pa = {(int)c->head_dim, (int)c->mask};
    if (mki_plan_op_attn(comm, MKI_OP_RING_ATTN, c->seq, c->heads * c->head_dim,
                         c->kv_heads * c->head_dim, c->es, &pa, p) != mkSuccess) {
        *why = "no plan for this shape";
        return 0;
    }
    if (!p->fused) { *why = p->reason; return 0; }
    return 1;
}

static mkResult_t call_run(struct mki_call *call, struct ratt_call *c)
{
    struct mkComm *comm = call->comm;
    mkResult_t local = check_sizes(comm, c);
    if (local == mkSuccess) local = call->res;
    if (local == mkSuccess) local = check_device(comm, c);
    struct ratt_state *g = mki_op_state(comm, &mki_op_ring_attn);
    /* Every rank takes part in the shape check, even after a local error,
     * so that no rank is left waiting in it. */
    MKI_CHECK(agree(comm, g, c, local));
    if (c->empty) return mkSuccess; /* the same on every rank: no launch anywhere */
    if (comm->nranks == 1) {
        struct mki_attn_args a;
        core_args(comm, c, &a);
        return run_core(call, &a);
    }
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    const char *why = NULL;
    if (choose_fused(call, g, c, &p, &why)) return run_fused(call, g, c, &p);
    MKI_INFO(MKI_SUB_GEMM, RATT_FUNC " batch %lld, seq_local %lld, heads %lld (kv %lld) x %lld "
             "on %d ranks: unfused sequence (mkAllGather of k and v, then the attention core): "
             "%s", (long long)c->batch, (long long)c->seq, (long long)c->heads,
             (long long)c->kv_heads, (long long)c->head_dim, comm->nranks, why);
    return run_unfused(call, g, c);
}

MK_API mkResult_t mkRingAttention(const void *q, const void *k, const void *v, void *o,
                                  float *lse, int64_t batch, int64_t seq_local, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim, mkAttnLayout_t layout,
                                  mkAttnMask_t mask, float scale, mkDataType_t dtype,
                                  mkComm_t comm, cudaStream_t stream)
{
    struct mki_call kc;
    MKI_CHECK(mki_call_enter(comm, MKI_OP_RING_ATTN, stream, &kc));
    struct ratt_call c = {.q = q, .k = k, .v = v, .o = o, .lse = lse, .batch = batch,
                          .seq = seq_local, .heads = heads, .kv_heads = kv_heads,
                          .head_dim = head_dim, .layout = layout, .mask = mask, .scale = scale,
                          .dtype = dtype};
    return mki_call_leave(&kc, call_run(&kc, &c));
}
