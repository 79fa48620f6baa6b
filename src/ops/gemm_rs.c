/*
 * gemm_rs.c - mkGemmReduceScatter: rank r receives rows [off_r, off_r +
 * m_r) of D = sum over ranks of A_q op(B_q), and mkGemmAllReduce: every
 * rank receives all of D, validate -> plan -> launch (device side and
 * protocol: kernels/ops/gemm_rs.{h,cu}).
 *
 * Fused (one node, the plan says it pays): one persistent GEMM per rank
 * on every SM of the plan computes its partial product tile by tile in
 * destination order; a peer's tile goes as fp32 into the peer's slot
 * from the epilogue (TMA store over NVLink), and an own tile adds every
 * source's partial (in rank order, after its own) before it is stored in C (fp32 sums,
 * one rounding).  Nothing but the kernel runs: no side stream, no host
 * round trip, and the call numbers live on the device, so the call can
 * be captured in a CUDA graph and replayed.
 *
 * Unfused (one rank, several nodes, or where the plan says fusion cannot
 * win): our own GEMM into an fp32 buffer, mkReduceScatter in fp32, one
 * conversion into C; still one rounding.
 *
 * mkGemmAllReduce is the same call with m split in whole 128-row blocks,
 * C all of D, and
 * each owner's reduced tiles copied to every peer (fused: by the same
 * kernel, through the peers' inboxes; unfused: mkAllReduce in fp32, which
 * adds in a fixed order).  Either way every rank gets the same bits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gemm.h"
#include "mki.h"
#include "mem/mem.h"
#include "ops/gemm_rs.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "topology/topo.h"

#define GRS_FUNC "mkGemmReduceScatter"
#define GAR_FUNC "mkGemmAllReduce"

/* One call's arguments, as the user gave them, and the rows they imply. */
struct grs_call {
    const void *a, *b;
    void *c;
    const int64_t *m_all;
    int64_t m, n, k;
    int trans_b;
    mkDataType_t dtype;
    int es;
    int64_t m_me, off_me, m_max; /* this rank's rows, where they start, the most any rank has */
    int ar;                      /* mkGemmAllReduce: C is all of D */
    enum mki_op op;
    const char *func;
};

/* What the first call of a shape tells every rank (validate.c). */
struct grs_shape {
    int32_t ok, dtype, trans_b, has_m_all;
    int64_t m, n, k;
    uint64_t m_all_hash;
};

struct grs_state {
    struct mki_shape_cache shapes;
    struct mki_heap_blk ctl;          /* struct mki_grs_ctl */
    struct mki_heap_blk bank;         /* the slots of the peers' partials */
    int nretired;                     /* banks outgrown inside a capture */
    struct mki_heap_blk llbank;       /* decode kernel: the partials as LL lines */
    int nretired_ll;
    struct mki_heap_blk agctl;        /* mkGemmAllReduce: struct mki_gar_ctl */
    struct mki_heap_blk inbox;        /* mkGemmAllReduce: the peers' reduced rows */
    int nretired_inbox;
    void *part;                       /* unfused: the fp32 partial product */
    size_t part_bytes;
    void *sum;                        /* unfused: this rank's fp32 rows */
    size_t sum_bytes;
    void *outbox;                     /* fused: the CTAs' fp32 tiles for the movers */
    size_t outbox_bytes;
    void *mid;                        /* across nodes: the node's sums */
    size_t mid_bytes;
    struct mki_op_bufs bufs;
};

/* ---- state ------------------------------------------------------------- */

static mkResult_t grs_create(struct mkComm *comm, void **state)
{
    if (!comm->dev) return mkSuccess;
    struct grs_state *g = calloc(1, sizeof(*g));
    if (!g) return mki_error(comm, mkErrNoMemory, "out of host memory");
    *state = g;
    return mki_heap_alloc(comm, 0, sizeof(struct mki_grs_ctl), 1, GRS_FUNC "'s control block",
                          &g->ctl);
}

static mkResult_t gar_create(struct mkComm *comm, void **state)
{
    MKI_CHECK(grs_create(comm, state));
    struct grs_state *g = *state;
    if (!g) return mkSuccess;
    return mki_heap_alloc(comm, 0, sizeof(struct mki_gar_ctl), 1, GAR_FUNC "'s flags",
                          &g->agctl);
}

static void grs_destroy(struct mkComm *comm, void *state)
{
    struct grs_state *g = state;
    if (!g) return;
    if (comm->dev && !comm->dev->aborted) {
#ifdef MKI_GRS_TE /* lab builds: the last call's timeline */
        mki_grs_te_dump(comm->rank);
#endif
        if (g->part) (void)cudaFree(g->part);
        if (g->sum) (void)cudaFree(g->sum);
        if (g->mid) (void)cudaFree(g->mid);
        if (g->outbox) (void)cudaFree(g->outbox);
        mki_op_bufs_free(&g->bufs);
    }
    free(g); /* its heap blocks go with the heap */
}

static int grs_preload(char *msg, size_t len)
{
    int r = mki_grs_preload(msg, len);
    if (!r) r = mki_gdec_preload(msg, len);
    return r ? r : mki_gemm_preload(msg, len); /* the unfused sequence's GEMM */
}

extern const struct mki_op_desc mki_op_gemm_ar;

const struct mki_op_desc mki_op_gemm_rs = {
    GRS_FUNC, NULL, grs_create, grs_destroy, grs_preload,
};

const struct mki_op_desc mki_op_gemm_ar = {
    GAR_FUNC, NULL, gar_create, grs_destroy, NULL, /* its kernels are mkGemmReduceScatter's */
};

/* ---- argument checks (nothing touches the GPU) ---------------------- */

/* Rows of rank r: m_all[r], or as mki_grs_rows says (mkGemmAllReduce:
 * whole 128-row blocks; gemm_rs.h). */
static int64_t rows_of(const struct grs_call *c, int nranks, int r)
{
    if (c->m_all) return c->m_all[r];
    return mki_grs_rows(c->m, nranks, r, c->ar);
}

static mkResult_t check_rows(struct mkComm *comm, struct grs_call *c)
{
    int64_t total = 0;
    c->m_max = 0;
    for (int r = 0; r < comm->nranks; r++) {
        const int64_t mr = rows_of(c, comm->nranks, r);
        if (c->m_all && (mr < 0 || mr > c->m - total))
            return mki_error(comm, mkErrInvalidArgument, "%s: m_all[%d] = %lld is "
                             "negative or makes the sum of rows exceed m = %lld; m_all lists "
                             "the rows of D each rank receives and must add up to m", c->func, r,
                             (long long)mr, (long long)c->m);
        if (r == comm->rank) c->off_me = total, c->m_me = mr;
        if (mr > c->m_max) c->m_max = mr;
        total += mr;
    }
    if (total != c->m)
        return mki_error(comm, mkErrInvalidArgument, "%s: m_all adds up to %lld rows "
                         "but m = %lld; the counts must add up to m", c->func, (long long)total,
                         (long long)c->m);
    return mkSuccess;
}

static mkResult_t check_sizes(struct mkComm *comm, struct grs_call *c)
{
    MKI_CHECK(mki_check_gemm_args(comm, c->func, c->dtype, c->trans_b, c->m, c->n, c->k,
                                  "this rank's slice of K", &c->es));
    const uint64_t lim = (1ull << 46) / 4u; /* fp32 partials */
    if (c->m > INT32_MAX || c->n > INT32_MAX || c->k > INT32_MAX ||
        (uint64_t)c->m * (uint64_t)c->k > lim || (uint64_t)c->m * (uint64_t)c->n > lim ||
        (uint64_t)c->n * (uint64_t)c->k > lim)
        return mki_error(comm, mkErrInvalidArgument, "%s: m = %lld, n = %lld, k = %lld "
                         "is too large (sizes up to 2^31 - 1 and matrices up to 16 Ti "
                         "elements)", c->func, (long long)c->m, (long long)c->n, (long long)c->k);
    MKI_CHECK(check_rows(comm, c));
    const struct { const char *name; const void *p; int need; } ptrs[] = {
        {"A", c->a, c->m > 0 && c->n > 0},
        {"B", c->b, c->m > 0 && c->n > 0},
        {"C", c->c, (c->ar ? c->m : c->m_me) > 0 && c->n > 0}};
    for (unsigned i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        if (ptrs[i].need && ptrs[i].p == NULL)
            return mki_error(comm, mkErrInvalidArgument, "%s: %s is NULL; pass device "
                             "memory", c->func, ptrs[i].name);
    return mkSuccess;
}

static mkResult_t check_device(struct mkComm *comm, const struct grs_call *c)
{
    if (c->m == 0 || c->n == 0) return mkSuccess;
    const size_t es = (size_t)c->es;
    const size_t ab = (size_t)c->m * (size_t)c->k * es;
    const size_t bb = (size_t)c->n * (size_t)c->k * es;
    const size_t cb = (size_t)(c->ar ? c->m : c->m_me) * (size_t)c->n * es;
    const struct { const char *name; const void *p; size_t bytes; } ptrs[] = {
        {"A", c->a, ab}, {"B", c->b, bb}, {"C", c->c, cb}};
    for (unsigned i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        if (ptrs[i].p && ptrs[i].bytes)
            MKI_CHECK(mki_check_dev_ptr(comm, c->func, ptrs[i].name, ptrs[i].p, 16));
    if (mki_overlap(c->c, cb, c->a, ab) || mki_overlap(c->c, cb, c->b, bb))
        return mki_error(comm, mkErrInvalidArgument, "%s: C overlaps A or B; the "
                         "output must be a separate buffer", c->func);
    return mkSuccess;
}

/* ---- the first call of a shape: every rank checks every rank --------- */

static mkResult_t compare_shapes(struct mkComm *comm, const void *records, size_t rec,
                                 const void *ctx)
{
    const struct grs_shape *all = records, *me = &all[comm->rank];
    (void)rec;
    for (int r = 0; r < comm->nranks; r++) {
        const struct grs_shape *s = &all[r];
        const char *what = s->m != me->m ? "m" : s->n != me->n ? "n" : s->k != me->k ? "k"
                           : s->dtype != me->dtype ? "dtype"
                           : s->trans_b != me->trans_b ? "transB"
                           : s->has_m_all != me->has_m_all ? "m_all (NULL on some ranks only)"
                           : s->m_all_hash != me->m_all_hash ? "m_all"
                           : NULL;
        if (what)
            return mki_error(comm, mkErrInvalidArgument, "%s: rank %d passed m = %lld, "
                             "n = %lld, k = %lld, dtype %d, transB %d but rank %d passed m = "
                             "%lld, n = %lld, k = %lld, dtype %d, transB %d: %s differs; every "
                             "rank must pass the same m, n, k, m_all, dtype and transB (pad "
                             "slices of K with zeros to one size)", ((const struct grs_call *)ctx)->func, r, (long long)s->m,
                             (long long)s->n, (long long)s->k, s->dtype, s->trans_b, comm->rank,
                             (long long)me->m, (long long)me->n, (long long)me->k, me->dtype,
                             me->trans_b, what);
    }
    return mkSuccess;
}

static mkResult_t agree(struct mkComm *comm, struct grs_state *g, const struct grs_call *c,
                        mkResult_t local)
{
    uint64_t h = 1099511628211ull;
    const int64_t v[7] = {c->m, c->n, c->k, c->dtype, c->trans_b, c->m_all != 0, c->ar};
    for (int i = 0; i < 7; i++) h = mki_hash64(h, (uint64_t)v[i]);
    h = mki_hash64(h, mki_hash_counts(comm, c->m_all));
    struct grs_shape *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, "%s: out of host memory", c->func);
    all[comm->rank] = (struct grs_shape){0, (int32_t)c->dtype, c->trans_b, c->m_all != NULL,
                                         c->m, c->n, c->k, mki_hash_counts(comm, c->m_all)};
    mkResult_t r = mki_agree_shape(comm, g ? &g->shapes : NULL, c->func, h, all, sizeof(*all),
                                   local, compare_shapes, c);
    free(all);
    return r;
}

/* ---- the unfused sequence of our own kernels ------------------------- */

static mkResult_t gemm_rows(struct mki_call *k, const struct grs_call *c, int64_t row0,
                            int64_t rows, void *d, mki_dtype_t out)
{
    if (rows == 0 || c->n == 0) return mkSuccess;
    mki_gemm_args ga;
    memset(&ga, 0, sizeof(ga));
    ga.m = rows;
    ga.n = c->n;
    ga.k = c->k;
    ga.a = (const char *)c->a + (size_t)row0 * (size_t)c->k * (size_t)c->es;
    ga.b = c->b;
    ga.d = d;
    ga.in_type = (mki_dtype_t)c->dtype;
    ga.out_type = out;
    ga.trans_b = c->trans_b;
    ga.alpha = 1.0f;
    return mki_op_gemm(k, &ga);
}

/* Each rank's rows of the fp32 partial product in a block of m_max rows
 * (one GEMM when the blocks are the rows as they come), then the sum:
 * on one node mkReduceScatter in fp32; across nodes (mki_op_split_make) a true
 * reduce-scatter: the blocks ordered by (local index, node), summed inside
 * the node first (each local rank gets the node's sums of the rows of
 * every rank with its local index), then across the nodes between ranks
 * of the same local index, so that only 1/nodes of a node's sums leaves
 * it, once.  Then this rank's rows converted into C. */
static mkResult_t run_unfused(struct mki_call *k, struct grs_state *g, const struct grs_call *c)
{
    struct mkComm *comm = k->comm;
    const int P = comm->nranks;
    if (P == 1) return gemm_rows(k, c, 0, c->m, c->c, (mki_dtype_t)c->dtype);
    char msg[256];
    if (c->ar) { /* the whole fp32 product, summed in place, one rounding */
        const size_t count = (size_t)c->m * (size_t)c->n;
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->part, &g->part_bytes, count * 4u,
                             "the fp32 partial product"));
        MKI_CHECK(gemm_rows(k, c, 0, c->m, g->part, MKI_DT_F32));
        MKI_CHECK(mkAllReduce(g->part, g->part, count, mkFloat32, comm, k->stream));
        if (mki_grs_convert(g->part, c->c, (int)c->dtype, count, k->stream, msg, sizeof(msg)))
            return mki_error(comm, mkErrCuda, "%s: %s", c->func, msg);
        return mkSuccess;
    }
    const size_t row = (size_t)c->n * 4u, block = (size_t)c->m_max * row;
    if (block == 0) return mkSuccess;
    struct mki_op_split sp = {0, NULL, NULL}; /* across nodes: comm's internal communicators */
    if (comm->nnodes > 1) MKI_CHECK(mki_op_split_make(k, &sp));
    const int hier = sp.node_comm && sp.peer_comm;
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->part, &g->part_bytes, block * (size_t)P,
                         "the fp32 partial product"));
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->sum, &g->sum_bytes, block, "the fp32 sum of its rows"));
    const struct mki_topo *t = comm->topo;
    if (!hier && c->m_max * P == c->m) {
        MKI_CHECK(gemm_rows(k, c, 0, c->m, g->part, MKI_DT_F32));
    } else {
        int64_t off = 0;
        for (int r = 0; r < P; r++) {
            const int64_t mr = rows_of(c, P, r);
            const size_t at = hier ? (size_t)t->local_rank_of[r] * (size_t)comm->nnodes +
                                         (size_t)t->node_of[r]
                                   : (size_t)r;
            MKI_CHECK(gemm_rows(k, c, off, mr, (char *)g->part + at * block, MKI_DT_F32));
            off += mr;
        }
    }
    if (hier) {
        const size_t nb = (size_t)comm->nnodes * block;
        MKI_CHECK(mki_op_buf(k, &g->bufs, &g->mid, &g->mid_bytes, nb, "the node's fp32 sums"));
        MKI_CHECK(mki_op_sub_check(comm, mkReduceScatter(g->part, g->mid, nb / 4u, mkFloat32,
                                                         sp.node_comm, k->stream), sp.node_comm));
        MKI_CHECK(mki_op_sub_check(comm, mkReduceScatter(g->mid, g->sum, block / 4u, mkFloat32,
                                                         sp.peer_comm, k->stream), sp.peer_comm));
    } else {
        MKI_CHECK(mkReduceScatter(g->part, g->sum, block / 4u, mkFloat32, comm, k->stream));
    }
    if (mki_grs_convert(g->sum, c->c, (int)c->dtype, (size_t)c->m_me * (size_t)c->n, k->stream,
                        msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, "%s: %s", c->func, msg);
    return mkSuccess;
}

/* ---- the fused call -------------------------------------------------- */

static void fill_launch(struct mkComm *comm, struct grs_state *g, const struct grs_call *c,
                        const struct mki_op_plan *p, struct mki_grs_launch *l)
{
    const struct mki_devrt *d = comm->dev;
    memset(l, 0, sizeof(*l));
    l->a = c->a;
    l->b = c->b;
    l->c = c->ar ? (char *)c->c + (size_t)c->off_me * (size_t)c->n * (size_t)c->es : c->c;
    l->ar = c->ar;
    l->c_full = c->ar ? c->c : NULL;
    l->m = c->m;
    l->n = c->n;
    l->k = c->k;
    l->dtype = (int)c->dtype;
    l->trans_b = c->trans_b;
    l->ctas = p->split.compute;
    l->nlocal = d->nlocal;
    for (int s = 0; s < d->nlocal; s++) {
        l->row_off[s + 1] = l->row_off[s] + rows_of(c, comm->nranks, d->comm_rank[s]);
        l->bank[s] = mki_heap_ptr(comm, &g->bank, s);
        l->ctl[s] = (struct mki_grs_ctl *)mki_heap_ptr(comm, &g->ctl, s);
        if (c->ar) {
            l->inbox[s] = mki_heap_ptr(comm, &g->inbox, s);
            l->agctl[s] = (struct mki_gar_ctl *)mki_heap_ptr(comm, &g->agctl, s);
        }
    }
    l->m_max = c->m_max;
    l->ld = (c->n + 3) / 4 * 4;
    mki_rt_fill(comm, c->op, &l->rt);
}

static mkResult_t run_fused(struct mki_call *k, struct grs_state *g, const struct grs_call *c,
                            const struct mki_op_plan *p)
{
    struct mkComm *comm = k->comm;
    const int64_t ld = (c->n + 3) / 4 * 4;
    /* K-slices: from the output tiles of every owner (the same on every
     * rank: the shapes and the plan agree; one node: at most MKI_MAXLOCAL) */
    int64_t rows[MKI_MAXLOCAL];
    for (int r = 0; r < comm->nranks; r++) rows[r] = rows_of(c, comm->nranks, r);
    const int slices = mki_grs_call_slices(rows, comm->nranks, c->n, c->k, p->split.compute);
    /* single: the kernel's gate orders its reuse; grown collectively (the
     * shapes agree); every peer's stores into the old one were waited for
     * by this rank's kernels */
    MKI_CHECK(mki_op_bank(k, &g->bank,
                          mki_grs_bank_bytes(comm->dev->nlocal, slices, c->m_max, ld, c->n),
                          &g->nretired, "the bank of partial sums"));
    /* mkGemmAllReduce: single too, read by this rank's kernel before it
     * releases the call (the same gate) */
    if (c->ar)
        MKI_CHECK(mki_op_bank(k, &g->inbox, (uint64_t)c->m * (uint64_t)c->n * (uint64_t)c->es,
                              &g->nretired_inbox, "the inbox of reduced rows"));
    /* local: written by this rank's kernels only, each call's tiles
     * copied out before the kernel ends */
    MKI_CHECK(mki_op_buf(k, &g->bufs, &g->outbox, &g->outbox_bytes,
                         mki_grs_outbox_bytes(p->split.compute), "the outbox of fp32 tiles"));
    struct mki_grs_launch l;
    fill_launch(comm, g, c, p, &l);
    l.outbox = g->outbox;
    l.slices = slices;
    l.two_rows = p->wide_movers;
    struct mki_launch_desc d;
    char msg[512];
    if (mki_grs_describe(&l, &d, msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, "%s: %s", c->func, msg);
    return mki_launch(k, &d);
}

/* Decode-sized m (the plan's decode kernel, kernels/ops/gemm_dec.cu):
 * one kernel, the bank holding P x S slabs of this rank's rows (all m
 * for mkGemmAllReduce); no outbox, no inbox. */
static mkResult_t run_decode(struct mki_call *k, struct grs_state *g, const struct grs_call *c,
                             const struct mki_op_plan *p)
{
    struct mkComm *comm = k->comm;
    const int64_t ld = (c->n + 3) / 4 * 4;
    const int P = comm->dev->nlocal;
    const int S = mki_gdec_slices(c->n, c->k, p->split.compute);
    /* the largest receiver's slabs (the same size on every rank: grown
     * collectively) */
    const int64_t rows = c->ar ? c->m : c->m_max;
    const int ll = mki_gdec_ll(rows, S);
    if (ll)
        MKI_CHECK(mki_op_bank_zeroed(k, &g->llbank, 2 * mki_gdec_bank_bytes(P, S, rows, ld),
                                     &g->nretired_ll, "the bank of partial sums (LL lines)"));
    else
        MKI_CHECK(mki_op_bank(k, &g->bank, mki_gdec_bank_bytes(P, S, rows, ld), &g->nretired,
                              "the bank of partial sums"));
    struct mki_grs_launch l;
    fill_launch(comm, g, c, p, &l);
    l.slices = S;
    l.ll = ll;
    for (int s = 0; ll && s < P; s++) l.llbank[s] = mki_heap_ptr(comm, &g->llbank, s);
    struct mki_launch_desc d;
    char msg[512];
    if (mki_gdec_describe(&l, &d, msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, "%s: %s", c->func, msg);
    return mki_launch(k, &d);
}

/* Fused when the communicator is one node and the plan says it pays;
 * otherwise our unfused sequence, said at INFO. */
static int choose_fused(struct mki_call *k, const struct grs_call *c, struct mki_op_plan *p,
                        const char **why)
{
    struct mkComm *comm = k->comm;
    *why = NULL;
    if (comm->nranks == 1) { *why = "one rank: nothing to reduce"; return 0; }
    if (comm->nnodes != 1 || comm->dev->nlocal != comm->nranks) {
        *why = "ranks on several nodes (the fused kernel reaches only the ranks of its node; "
               "the reduce-scatter crosses nodes through the proxy)";
        return 0;
    }
    for (int l = 0; l < comm->nranks; l++)
        if (comm->dev->comm_rank[l] != l) { *why = "local ranks not in communicator order"; return 0; }
    if (c->n % 8 != 0) {
        *why = "n is not a multiple of 8 (the fused kernel stores C with TMA, which needs "
               "16-byte rows)";
        return 0;
    }
    const int64_t kg = c->k * comm->nranks; /* the plan's K is global */
    if (mki_plan_op(comm, c->op, c->m, c->n, kg, c->es, p) != mkSuccess) {
        *why = "no plan for this shape";
        return 0;
    }
    if (!p->fused) { *why = p->reason; return 0; }
    return 1;
}

static mkResult_t grs_call_run(struct mki_call *k, struct grs_call *c)
{
    struct mkComm *comm = k->comm;
    mkResult_t local = check_sizes(comm, c);
    if (local == mkSuccess) local = k->res;
    if (local == mkSuccess) local = check_device(comm, c);
    struct grs_state *g = mki_op_state(comm, c->ar ? &mki_op_gemm_ar : &mki_op_gemm_rs);
    /* Every rank takes part in the shape check, even after a local error,
     * so that no rank is left waiting in it. */
    MKI_CHECK(agree(comm, g, c, local));
    if (c->m == 0 || c->n == 0) return mkSuccess; /* on every rank: nothing to do */
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    const char *why = NULL;
    if (choose_fused(k, c, &p, &why)) return p.decode ? run_decode(k, g, c, &p)
                                                      : run_fused(k, g, c, &p);
    MKI_INFO(MKI_SUB_GEMM, "%s %lld x %lld x %lld: unfused sequence (GEMM, then %s): %s",
             c->func, (long long)c->m, (long long)c->n, (long long)c->k,
             c->ar ? "all-reduce" : "reduce-scatter", why);
    return run_unfused(k, g, c);
}

/* Both entry points: one call of op (MKI_OP_GEMM_RS or MKI_OP_GEMM_AR). */
static mkResult_t grs_api(mkComm_t comm, cudaStream_t stream, enum mki_op op, const void *A,
                          const void *B, void *C, const int64_t *m_all, int64_t m, int64_t n,
                          int64_t k, int transB, mkDataType_t dtype)
{
    struct mki_call kc;
    MKI_CHECK(mki_call_enter(comm, op, stream, &kc));
    struct grs_call c;
    memset(&c, 0, sizeof(c));
    c.a = A;
    c.b = B;
    c.c = C;
    c.m_all = m_all;
    c.m = m;
    c.n = n;
    c.k = k;
    c.trans_b = transB;
    c.dtype = dtype;
    c.ar = op == MKI_OP_GEMM_AR;
    c.op = op;
    c.func = c.ar ? GAR_FUNC : GRS_FUNC;
    return mki_call_leave(&kc, grs_call_run(&kc, &c));
}

MK_API mkResult_t mkGemmReduceScatter(const void *A, const void *B, void *C,
                                      const int64_t *m_all, int64_t m, int64_t n, int64_t k,
                                      int transB, mkDataType_t dtype, mkComm_t comm,
                                      cudaStream_t stream)
{
    return grs_api(comm, stream, MKI_OP_GEMM_RS, A, B, C, m_all, m, n, k, transB, dtype);
}

MK_API mkResult_t mkGemmAllReduce(const void *A, const void *B, void *C, int64_t m, int64_t n,
                                  int64_t k, int transB, mkDataType_t dtype, mkComm_t comm,
                                  cudaStream_t stream)
{
    return grs_api(comm, stream, MKI_OP_GEMM_AR, A, B, C, NULL, m, n, k, transB, dtype);
}
