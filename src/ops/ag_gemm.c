/*
 * ag_gemm.c - mkAllGatherGemm: C = [A_0; A_1; ...] x B, validate -> plan ->
 * launch.
 *
 * The all-gather runs on the copy engines, with no SM: at each call the
 * caller's stream forks to side streams for each local peer (the
 * previous ranks first: enqueue_copies says why); each side
 * stream copies this rank's rows, chunk by chunk, into that peer's arena
 * (cudaMemcpyBatchAsync through the CUDA IPC mapping, asking for a copy
 * engine) and after each chunk writes the chunk's signal there with a
 * stream memory operation (cuStreamWriteValue64, found through
 * cudaGetDriverEntryPointByVersion: no libcuda link).  This rank's own rows
 * are copied into its arena on the caller's stream just before the GEMM
 * (copy_own_rows says why).  Then one persistent GEMM (kernels/ag_gemm.cu)
 * on the caller's stream computes on every SM, this rank's rows first, its
 * producer waiting on the signal of each chunk before loading it.  The caller's stream joins the side streams
 * before the call ends, so buffers are reusable in stream order.  Nothing
 * on the side streams waits for a peer, so nothing there can hang: a rank
 * that never calls makes the others' GEMM waits expire (mkErrTimeout,
 * naming it, through the device runtime's error record).
 *
 * The first call of a shape exchanges (k, n, m_r, dtype, transB) through
 * the bootstrap, so that mismatched arguments are reported on every rank
 * instead of computed wrong, and grows the arena when needed (both host
 * synchronizations happen only then).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "mem/mem.h"
#include "plan/plan.h"
#include "ops/ag_gemm.h"
#include "gemm.h"

#define AGG_FUNC "mkAllGatherGemm"
#define AGG_SHAPES 16
#define AGG_ARENA_GRAIN (64ull << 20)
#define AGG_CHUNKS 8 /* chunks per rank unless MK_SM_SPLIT sets chunk */
#define AGG_MPS_FREE_SMS 8
/* MKT_AGG_DIAG, for measurements only (the results are wrong): nowait =
 * the GEMM does not wait for any chunk (the copies still run: what they
 * cost the GEMM by sharing memory and links); nocopy = no copies either
 * (the fused kernel's GEMM and the call's stream work alone). */
enum { AGG_DIAG_NONE, AGG_DIAG_NOWAIT, AGG_DIAG_NOCOPY };
#define AGG_MPS_FREE_SMS_END /* SMs no rank's GEMM takes when ranks share a GPU */

typedef int (*agg_write64_fn)(void *stream, unsigned long long addr,
                              unsigned long long value, unsigned flags);

/* One call's arguments, as the user gave them. */
#define AGG_MAX_RETIRED 8

struct agg_call {
    const void *a, *b;
    void *c, *ga;
    int64_t m_local;
    const int64_t *m_all;
    int64_t n, k;
    int trans_b;
    mkDataType_t dtype;
    int64_t m_total; /* sum of the m_r */
    int es;
    int capturing;   /* the stream is being captured into a CUDA graph */
};

/* What the first call of a shape tells every rank (bootstrap allgather). */
struct agg_shape {
    int64_t k, n, m_local, m_total;
    int32_t dtype, trans_b, has_m_all, ok;
    uint64_t m_all_hash; /* of the whole m_all array (0 without one) */
    int64_t pad;
};

#define AGG_CE_SPLIT_MAX 4
#define AGG_PROF_RING 1024
#define AGG_PROF_CTAS 256 /* >= SMs of the device */
struct mki_agg {
    char *arena;                      /* mine */
    uint64_t arena_bytes, bank_bytes;
    char *peer[MKI_MAXLOCAL];         /* every local rank's arena, here */
    int opened[MKI_MAXLOCAL];
    /* ce_split side streams per peer (4 with 3+ local ranks, else 1;
     * MKT_AGG_CE_SPLIT overrides), each with its join event */
    int ce_split;
    int own_copy; /* MKT_AGG_OWN_COPY: copy all my rows into my bank */
    int own_sig;  /* MKT_AGG_OWN_SIG: still signal my own chunks */
    int diag;     /* MKT_AGG_DIAG: AGG_DIAG_* (measurements only) */
    /* MKT_AGG_PROF=1: each fused call's kernel writes per CTA its start,
     * end, chunk-wait time and wait count into a ring of AGG_PROF_RING
     * records; mki_ag_gemm_free prints a summary per shape. */
    unsigned long long *prof_dev;
    int64_t prof_shape[AGG_PROF_RING][4]; /* m, n, k, CTAs */
    uint64_t prof_calls;
    cudaStream_t side[MKI_MAXLOCAL][AGG_CE_SPLIT_MAX];
    cudaEvent_t fork, join[MKI_MAXLOCAL][AGG_CE_SPLIT_MAX];
    uint64_t calls;                   /* fused calls so far: signal values */
    agg_write64_fn write64;
    void *scratch;                    /* unfused sequence: gathered A */
    size_t scratch_bytes;
    void *padbuf;                     /* unfused, unequal shards: every */
    size_t padbuf_bytes;              /* shard padded to the largest */
    void *retired[AGG_MAX_RETIRED];   /* outgrown inside a graph capture: */
    int nretired;                     /* freed with the communicator */
    int nshapes;
    struct agg_shape shapes[AGG_SHAPES]; /* checked on every rank */
    uint64_t shape_hash[AGG_SHAPES];
};

static int dtype_size(mkDataType_t t)
{
    return t == mkBfloat16 || t == mkFloat16 ? 2 : t == mkFloat32 ? 4 : 0;
}

/* ---- argument checks (nothing touches the GPU) ---------------------- */

static mkResult_t check_sizes(struct mkComm *comm, struct agg_call *c)
{
    if (c->dtype == mkFloat32)
        return mki_error(comm, mkErrUnsupported, AGG_FUNC ": dtype mkFloat32 "
                         "is not supported; use mkBfloat16 or mkFloat16 "
                         "(accumulation is fp32 either way)");
    c->es = dtype_size(c->dtype);
    if (c->es == 0)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": dtype = %d "
                         "is not a mkDataType_t; use mkBfloat16 or mkFloat16",
                         (int)c->dtype);
    if (c->trans_b != 0 && c->trans_b != 1)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": transB = %d;"
                         " pass 0 (B is K x N) or 1 (B is N x K)", c->trans_b);
    if (c->m_local < 0 || c->n < 0 || c->k < 0)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": negative "
                         "size (m_local = %lld, n = %lld, k = %lld)",
                         (long long)c->m_local, (long long)c->n,
                         (long long)c->k);
    if (c->k == 0 || c->k % 8 != 0 || (!c->trans_b && c->n % 8 != 0))
        return mki_error(comm, mkErrUnsupported, AGG_FUNC ": k = %lld and "
                         "n = %lld: k must be a positive multiple of 8, and so "
                         "must n when transB = 0 (rows of A and B are loaded by "
                         "TMA, which needs 16-byte row strides); pad the "
                         "matrices", (long long)c->k, (long long)c->n);
    const int64_t lim = INT32_MAX;
    int64_t total = 0;
    if (c->m_all) {
        for (int r = 0; r < comm->nranks; r++) {
            if (c->m_all[r] < 0 || c->m_all[r] > lim - total)
                return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": "
                                 "m_all[%d] = %lld is negative or makes the "
                                 "sum of rows exceed %lld", r,
                                 (long long)c->m_all[r], (long long)lim);
            total += c->m_all[r];
        }
        if (c->m_all[comm->rank] != c->m_local)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": m_all[%d]"
                             " = %lld but this rank's m_local = %lld; m_all "
                             "must list every rank's row count",
                             comm->rank, (long long)c->m_all[comm->rank],
                             (long long)c->m_local);
    } else {
        if (c->m_local > lim / comm->nranks)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": m_local ="
                             " %lld times %d ranks exceeds %lld rows",
                             (long long)c->m_local, comm->nranks,
                             (long long)lim);
        total = c->m_local * comm->nranks;
    }
    if (c->n > lim || c->k > lim ||
        (uint64_t)total * (uint64_t)c->k > (1ull << 46) / (uint64_t)c->es ||
        (uint64_t)total * (uint64_t)c->n > (1ull << 46) / (uint64_t)c->es)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": M = %lld, "
                         "n = %lld, k = %lld is too large (sizes up to 2^31 - "
                         "1 and matrices up to 64 TiB)", (long long)total,
                         (long long)c->n, (long long)c->k);
    c->m_total = total;
    struct { const char *name; const void *p; int need; } ptrs[] = {
        {"A", c->a, c->m_local > 0},
        {"B", c->b, c->n > 0},
        {"C", c->c, total > 0 && c->n > 0}};
    for (unsigned i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++)
        if (ptrs[i].need && ptrs[i].p == NULL)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": %s is "
                             "NULL; pass device memory", ptrs[i].name);
    return mkSuccess;
}

static mkResult_t check_pointer(struct mkComm *comm, const char *name,
                                const void *p, size_t bytes)
{
    if (p == NULL || bytes == 0) return mkSuccess;
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": %s = %p is "
                         "not device memory; pass memory from cudaMalloc or "
                         "mkMemAlloc on CUDA device %d", name, p,
                         comm->dev->dev);
    if (a.device != comm->dev->dev)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": %s = %p is "
                         "memory of CUDA device %d but the communicator uses "
                         "device %d", name, p, a.device, comm->dev->dev);
    if ((uintptr_t)p % 16 != 0)
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": %s = %p is "
                         "not 16-byte aligned (TMA needs it)", name, p);
    return mkSuccess;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && na && nb && x < y + nb && y < x + na;
}

static mkResult_t check_device(struct mkComm *comm, const struct agg_call *c)
{
    MKI_CHECK(mki_devrt_require(comm, AGG_FUNC));
    size_t es = (size_t)c->es;
    size_t abytes = (size_t)c->m_local * (size_t)c->k * es;
    size_t bbytes = (size_t)c->n * (size_t)c->k * es;
    size_t cbytes = (size_t)c->m_total * (size_t)c->n * es;
    size_t gbytes = (size_t)c->m_total * (size_t)c->k * es;
    MKI_CHECK(check_pointer(comm, "A", c->a, abytes));
    MKI_CHECK(check_pointer(comm, "B", c->b, bbytes));
    MKI_CHECK(check_pointer(comm, "C", c->c, cbytes));
    MKI_CHECK(check_pointer(comm, "gatheredA", c->ga, gbytes));
    if (overlap(c->c, cbytes, c->a, abytes) || overlap(c->c, cbytes, c->b, bbytes) ||
        overlap(c->c, cbytes, c->ga, gbytes) || overlap(c->ga, gbytes, c->a, abytes) ||
        overlap(c->ga, gbytes, c->b, bbytes))
        return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": C or "
                         "gatheredA overlaps another argument; outputs must "
                         "be separate buffers");
    return mkSuccess;
}

/* ---- the first call of a shape: every rank checks every rank --------- */

static uint64_t shape_hash(const struct mkComm *comm, const struct agg_call *c)
{
    uint64_t h = 1469598103934665603ull;
    int64_t v[6] = {c->k, c->n, c->m_local, c->dtype, c->trans_b, c->m_all != 0};
    for (int i = 0; i < 6; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ull;
    for (int r = 0; c->m_all && r < comm->nranks; r++)
        h = (h ^ (uint64_t)c->m_all[r]) * 1099511628211ull;
    return h;
}

/* Compares what every rank passed; names the first rank that differs. */
static mkResult_t compare_shapes(struct mkComm *comm, const struct agg_call *c,
                                 const struct agg_shape *all)
{
    const struct agg_shape *me = &all[comm->rank];
    for (int r = 0; r < comm->nranks; r++) {
        const struct agg_shape *s = &all[r];
        const char *what = s->k != me->k ? "k"
                           : s->n != me->n ? "n"
                           : s->dtype != me->dtype ? "dtype"
                           : s->trans_b != me->trans_b ? "transB"
                           : s->has_m_all != me->has_m_all ? "m_all (NULL on "
                             "some ranks only)"
                           : NULL;
        if (what)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d "
                             "passed k = %lld, n = %lld, dtype %d, transB %d "
                             "but rank %d passed k = %lld, n = %lld, dtype %d,"
                             " transB %d: %s differs; every rank must pass the"
                             " same k, n, dtype, transB", r, (long long)s->k,
                             (long long)s->n, s->dtype, s->trans_b, comm->rank,
                             (long long)me->k, (long long)me->n, me->dtype,
                             me->trans_b, what);
        int64_t expect = c->m_all ? c->m_all[r] : c->m_local;
        if (r != comm->rank && s->m_local != expect)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d "
                             "holds m_local = %lld rows but this rank expects "
                             "%lld (%s); pass m_all with every rank's count",
                             r, (long long)s->m_local, (long long)expect,
                             c->m_all ? "its m_all entry" : "equal shards");
        if (s->m_all_hash != me->m_all_hash)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d "
                             "passed an m_all that differs from this rank's; "
                             "every rank must pass the same counts", r);
    }
    return mkSuccess;
}

/* The other ranks' own verdicts on their arguments. */
static mkResult_t others_ok(struct mkComm *comm, const struct agg_call *c,
                               const struct agg_shape *all)
{
    (void)c;
    for (int r = 0; r < comm->nranks; r++)
        if (!all[r].ok)
            return mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": rank %d "
                             "rejected its arguments for this shape (its "
                             "mkGetLastError says why); no rank computed",
                             r);
    return mkSuccess;
}

static mkResult_t exchange_shape(struct mkComm *comm, struct mki_agg *g,
                                 const struct agg_call *c, mkResult_t local)
{
    uint64_t h = shape_hash(comm, c);
    for (int i = 0; local == mkSuccess && i < g->nshapes; i++)
        if (g->shape_hash[i] == h) return mkSuccess;
    char saved[MKI_ERRMSG_LEN];
    snprintf(saved, sizeof(saved), "%s", comm->last_error);
    struct agg_shape *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, AGG_FUNC ": out of host memory");
    struct agg_shape *me = &all[comm->rank];
    me->k = c->k;
    me->n = c->n;
    me->m_local = c->m_local;
    me->m_total = c->m_total;
    me->dtype = (int32_t)c->dtype;
    me->trans_b = c->trans_b;
    me->has_m_all = c->m_all != NULL;
    for (int i = 0; c->m_all && i < comm->nranks; i++)
        me->m_all_hash = (me->m_all_hash ^ (uint64_t)c->m_all[i]) * 1099511628211ull + 1;
    me->ok = local == mkSuccess;
    mkResult_t r = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    if (r != mkSuccess) {
        free(all);
        return mki_error(comm, r, AGG_FUNC ": the shape check with the other "
                         "ranks failed (bootstrap allgather); is every rank "
                         "calling " AGG_FUNC "?");
    }
    /* Disagreement between ranks first, then this rank's own detail. */
    r = compare_shapes(comm, c, all);
    if (r == mkSuccess && local != mkSuccess) {
        mki_error_quiet(comm, "%s", saved);
        r = local;
    }
    if (r == mkSuccess) r = others_ok(comm, c, all);
    free(all);
    if (r != mkSuccess) return r;
    int slot = g->nshapes < AGG_SHAPES ? g->nshapes++ : (int)(h % AGG_SHAPES);
    g->shape_hash[slot] = h;
    return mkSuccess;
}

/* ---- per-communicator state ------------------------------------------ */

static mkResult_t cuda_err(struct mkComm *comm, const char *what, cudaError_t e)
{
    return mki_error(comm, mkErrCuda, AGG_FUNC ": %s: %s", what,
                     cudaGetErrorString(e));
}

static mkResult_t state_create(struct mkComm *comm)
{
    struct mki_agg *g = calloc(1, sizeof(*g));
    if (!g) return mki_error(comm, mkErrNoMemory, AGG_FUNC ": out of host memory");
    comm->agg = g;
    int n = comm->dev->nlocal;
    /* The chunks for one peer go round robin over ce_split side streams:
     * 4 with 3 or more local ranks (4 H200, three runs: 32768x1024x8192
     * 0.94-0.97x -> 1.00-1.14x, 4096x8192x8192 1.05x -> 1.14x, no shape
     * slower), 1 with 2 (no gain measured there); MKT_AGG_CE_SPLIT
     * overrides, for measurements. */
    const char *sp = getenv("MKT_AGG_CE_SPLIT");
    g->ce_split = sp ? atoi(sp) : comm->dev->nlocal >= 3 ? 4 : 1;
    const char *oc = getenv("MKT_AGG_OWN_COPY");
    g->own_copy = oc && atoi(oc) != 0;
    const char *os = getenv("MKT_AGG_OWN_SIG");
    g->own_sig = os && atoi(os) != 0;
    const char *pf = getenv("MKT_AGG_PROF");
    if (pf && atoi(pf) != 0) {
        size_t pb = (size_t)AGG_PROF_RING * AGG_PROF_CTAS * 4 * sizeof(unsigned long long);
        cudaError_t pe = cudaMalloc((void **)&g->prof_dev, pb);
        if (pe == cudaSuccess) pe = cudaMemset(g->prof_dev, 0, pb);
        if (pe != cudaSuccess) return cuda_err(comm, "MKT_AGG_PROF buffer", pe);
        MKI_WARN(MKI_SUB_GEMM, AGG_FUNC ": MKT_AGG_PROF=1: kernel timings are "
                 "recorded and summarised when the communicator is destroyed");
    }
    const char *dg = getenv("MKT_AGG_DIAG");
    g->diag = !dg ? AGG_DIAG_NONE : !strcmp(dg, "nowait") ? AGG_DIAG_NOWAIT
            : !strcmp(dg, "nocopy") ? AGG_DIAG_NOCOPY : AGG_DIAG_NONE;
    if (g->diag != AGG_DIAG_NONE)
        MKI_WARN(MKI_SUB_GEMM, AGG_FUNC ": MKT_AGG_DIAG=%s: the GEMM does not wait "
                 "for the all-gather%s; results are WRONG (for measurements only)",
                 dg, g->diag == AGG_DIAG_NOCOPY ? ", which does not run" : "");
    if (g->ce_split < 1) g->ce_split = 1;
    if (g->ce_split > AGG_CE_SPLIT_MAX) g->ce_split = AGG_CE_SPLIT_MAX;
    cudaError_t e = cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming);
    for (int l = 0; e == cudaSuccess && l < n; l++)
        for (int x = 0; e == cudaSuccess && x < g->ce_split; x++) {
            e = cudaStreamCreateWithFlags(&g->side[l][x], cudaStreamNonBlocking);
            if (e == cudaSuccess)
                e = cudaEventCreateWithFlags(&g->join[l][x], cudaEventDisableTiming);
        }
    if (e != cudaSuccess) return cuda_err(comm, "creating side streams", e);
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    e = cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000,
                                         cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
        return mki_error(comm, mkErrUnsupported, AGG_FUNC ": the driver has "
                         "no cuStreamWriteValue64 (%s)", cudaGetErrorString(e));
    g->write64 = (agg_write64_fn)fn;
    char msg[256];
    if (mki_agg_preload(msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, AGG_FUNC ": %s", msg);
    return mkSuccess;
}

static void unmap_arenas(struct mkComm *comm, struct mki_agg *g)
{
    for (int l = 0; l < MKI_MAXLOCAL; l++) {
        if (g->opened[l]) (void)cudaIpcCloseMemHandle(g->peer[l]);
        g->opened[l] = 0;
        g->peer[l] = NULL;
    }
    if (g->arena) (void)cudaFree(g->arena);
    g->arena = NULL;
    g->arena_bytes = g->bank_bytes = 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t med_u64(uint64_t *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    return v[n / 2];
}

/* MKT_AGG_PROF: per run of calls of one shape, medians over the calls of:
 * the kernel's span (first CTA start to last CTA end), the CTAs' start
 * skew, the mean and max chunk-wait time of a CTA, and the gap between
 * the previous call's last CTA end and this call's first start (the
 * stream work between kernels: memory operations, joins, launch). */
static void prof_report(struct mkComm *comm, struct mki_agg *g)
{
    if (cudaDeviceSynchronize() != cudaSuccess) return;
    uint64_t n = g->prof_calls < AGG_PROF_RING ? g->prof_calls : AGG_PROF_RING;
    uint64_t first = g->prof_calls - n;
    size_t rec = (size_t)AGG_PROF_CTAS * 4;
    unsigned long long *h = malloc(sizeof(*h) * rec * AGG_PROF_RING);
    uint64_t *span = malloc(sizeof(uint64_t) * 5 * AGG_PROF_RING);
    if (!h || !span ||
        cudaMemcpy(h, g->prof_dev, sizeof(*h) * rec * AGG_PROF_RING,
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
        free(h);
        free(span);
        return;
    }
    uint64_t *skew = span + AGG_PROF_RING, *wmean = skew + AGG_PROF_RING,
             *wmax = wmean + AGG_PROF_RING, *gap = wmax + AGG_PROF_RING;
    /* MKT_AGG_PROF_FILE (a path; %d becomes the rank): one line per call. */
    FILE *raw = NULL;
    const char *rf = getenv("MKT_AGG_PROF_FILE");
    if (rf && *rf) {
        char path[512];
        const char *pd = strstr(rf, "%d");
        if (pd)
            snprintf(path, sizeof(path), "%.*s%d%s", (int)(pd - rf), rf, comm->rank, pd + 2);
        else
            snprintf(path, sizeof(path), "%s.%d", rf, comm->rank);
        raw = fopen(path, "w");
        if (raw) fprintf(raw, "call\tm\tn\tk\tstart_ns\tend_ns\tskew_ns\twait_mean_ns\twait_max_ns\n");
    }
    uint64_t c = first;
    while (c < g->prof_calls) {
        const int64_t *sh = g->prof_shape[c % AGG_PROF_RING];
        int cnt = 0, ngap = 0;
        uint64_t prev_end = 0;
        for (; c < g->prof_calls && !memcmp(g->prof_shape[c % AGG_PROF_RING], sh,
                                           3 * sizeof(int64_t)); c++) {
            const unsigned long long *r = h + rec * (c % AGG_PROF_RING);
            uint64_t s0 = UINT64_MAX, s1 = 0, e1 = 0, wsum = 0, wm = 0;
            int ctas = 0;
            for (int b = 0; b < g->prof_shape[c % AGG_PROF_RING][3]; b++) {
                if (r[4 * b + 1] == 0) continue;
                ctas++;
                if (r[4 * b] < s0) s0 = r[4 * b];
                if (r[4 * b] > s1) s1 = r[4 * b];
                if (r[4 * b + 1] > e1) e1 = r[4 * b + 1];
                wsum += r[4 * b + 2];
                if (r[4 * b + 2] > wm) wm = r[4 * b + 2];
            }
            if (!ctas) { prev_end = 0; continue; }
            span[cnt] = e1 - s0;
            skew[cnt] = s1 - s0;
            wmean[cnt] = wsum / (uint64_t)ctas;
            wmax[cnt] = wm;
            if (raw)
                fprintf(raw, "%llu\t%lld\t%lld\t%lld\t%llu\t%llu\t%llu\t%llu\t%llu\n",
                        (unsigned long long)c, (long long)sh[0], (long long)sh[1],
                        (long long)sh[2], (unsigned long long)s0, (unsigned long long)e1,
                        (unsigned long long)(s1 - s0), (unsigned long long)wmean[cnt],
                        (unsigned long long)wm);
            cnt++;
            if (prev_end && s0 > prev_end) gap[ngap++] = s0 - prev_end;
            prev_end = e1;
        }
        if (cnt)
            MKI_WARN(MKI_SUB_GEMM, AGG_FUNC " prof rank %d %lldx%lldx%lld: %d calls, "
                     "medians: kernel %.1f us, start skew %.1f us, chunk wait per CTA "
                     "mean %.1f us max %.1f us, gap before the kernel %.1f us (%d gaps)",
                     comm->rank, (long long)sh[0], (long long)sh[1], (long long)sh[2], cnt,
                     med_u64(span, cnt) / 1e3, med_u64(skew, cnt) / 1e3,
                     med_u64(wmean, cnt) / 1e3, med_u64(wmax, cnt) / 1e3,
                     med_u64(gap, ngap) / 1e3, ngap);
    }
    if (raw) fclose(raw);
    free(h);
    free(span);
}

void mki_ag_gemm_free(struct mkComm *comm)
{
    struct mki_agg *g = comm ? comm->agg : NULL;
    if (!g) return;
    if (comm->dev && !comm->dev->aborted) {
        int prev = 0;
        if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(comm->dev->dev) == cudaSuccess) {
            for (int l = 0; l < MKI_MAXLOCAL; l++) {
                for (int x = 0; x < AGG_CE_SPLIT_MAX; x++) {
                    if (g->side[l][x]) (void)cudaStreamSynchronize(g->side[l][x]);
                    if (g->side[l][x]) (void)cudaStreamDestroy(g->side[l][x]);
                    if (g->join[l][x]) (void)cudaEventDestroy(g->join[l][x]);
                }
            }
            if (g->fork) (void)cudaEventDestroy(g->fork);
            if (g->prof_dev) {
                prof_report(comm, g);
                (void)cudaFree(g->prof_dev);
            }
            unmap_arenas(comm, g);
            if (g->scratch) (void)cudaFree(g->scratch);
            if (g->padbuf) (void)cudaFree(g->padbuf);
            for (int i = 0; i < g->nretired; i++) (void)cudaFree(g->retired[i]);
            (void)cudaSetDevice(prev);
        }
    }
    free(g);
    comm->agg = NULL;
}

/* Every local rank needs a bank of `bank` bytes (the same on every rank,
 * so all of them take this path together): wait for our work in flight,
 * unmap, reallocate, exchange IPC handles. */
static mkResult_t grow_arena(struct mkComm *comm, struct mki_agg *g,
                             uint64_t bank, cudaStream_t stream)
{
    struct mki_devrt *d = comm->dev;
    cudaError_t e = cudaStreamSynchronize(stream);
    for (int l = 0; l < d->nlocal; l++)
        for (int x = 0; e == cudaSuccess && x < g->ce_split; x++)
            e = cudaStreamSynchronize(g->side[l][x]);
    if (e != cudaSuccess) return cuda_err(comm, "waiting for earlier calls", e);
    uint64_t want = MKI_AGG_SIG_BYTES + 2 * bank;
    want = (want + AGG_ARENA_GRAIN - 1) / AGG_ARENA_GRAIN * AGG_ARENA_GRAIN;
    for (int l = 0; l < MKI_MAXLOCAL; l++)
        if (g->opened[l]) { (void)cudaIpcCloseMemHandle(g->peer[l]); g->opened[l] = 0; }
    MKI_CHECK(comm->boot->barrier(comm->boot_ctx)); /* nobody maps the old one */
    unmap_arenas(comm, g);
    e = cudaMalloc((void **)&g->arena, want);
    if (e != cudaSuccess) {
        g->arena = NULL;
        return mki_error(comm, mkErrNoMemory, AGG_FUNC ": cannot allocate the "
                         "%llu-byte arena for the gathered A: %s",
                         (unsigned long long)want, cudaGetErrorString(e));
    }
    e = cudaMemset(g->arena, 0, MKI_AGG_SIG_BYTES);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_err(comm, "clearing the arena", e);
    cudaIpcMemHandle_t *h = calloc((size_t)comm->nranks, sizeof(*h));
    if (!h) return mki_error(comm, mkErrNoMemory, AGG_FUNC ": out of host memory");
    e = cudaIpcGetMemHandle(&h[comm->rank], g->arena);
    mkResult_t r = e == cudaSuccess ? mkSuccess : cuda_err(comm, "cudaIpcGetMemHandle", e);
    mkResult_t r2 = comm->boot->allgather(comm->boot_ctx, h, sizeof(*h));
    if (r == mkSuccess && r2 != mkSuccess)
        r = mki_error(comm, r2, AGG_FUNC ": exchanging arena handles failed");
    for (int l = 0; r == mkSuccess && l < d->nlocal; l++) {
        if (l == d->me) { g->peer[l] = g->arena; continue; }
        void *p = NULL;
        e = cudaIpcOpenMemHandle(&p, h[d->comm_rank[l]], cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            r = cuda_err(comm, "mapping a peer's arena (cudaIpcOpenMemHandle)", e);
            break;
        }
        g->peer[l] = p;
        g->opened[l] = 1;
    }
    free(h);
    if (r != mkSuccess) return r;
    g->arena_bytes = want;
    g->bank_bytes = (want - MKI_AGG_SIG_BYTES) / 2;
    MKI_INFO(MKI_SUB_MEM, AGG_FUNC ": arena of %llu MiB (two banks of the "
             "gathered A)", (unsigned long long)(want >> 20));
    return mkSuccess;
}

/* ---- the unfused sequence of our own kernels ------------------------- */

static mkResult_t gemm_on(struct mkComm *comm, const struct agg_call *c,
                          const void *a, int ctas, cudaStream_t stream)
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
    ga.num_ctas = ctas;
    ga.stream = stream;
    char msg[512];
    int rc = mki_gemm(&ga, msg, sizeof(msg));
    if (rc == MKI_GEMM_OK) return mkSuccess;
    return mki_error(comm, rc == MKI_GEMM_ERR_INVALID ? mkErrInvalidArgument
                     : rc == MKI_GEMM_ERR_UNSUPPORTED ? mkErrUnsupported
                     : mkErrCuda, AGG_FUNC ": %s", msg);
}

/* A device buffer of at least want bytes (kept between calls).  Inside a
 * capture the stream cannot be synchronized and work captured or enqueued
 * before may still use the old buffer: it is retired (freed with the
 * communicator) and the new one allocated with the thread's capture mode
 * relaxed for that one call (cudaMalloc is not a stream operation). */
static mkResult_t ensure_buf(struct mkComm *comm, struct mki_agg *g, void **p,
                             size_t *have, size_t want, cudaStream_t stream,
                             const char *what, int capturing)
{
    if (*have >= want) return mkSuccess;
    cudaError_t e = cudaSuccess;
    if (capturing) {
        if (*p && g->nretired == AGG_MAX_RETIRED)
            return mki_error(comm, mkErrUnsupported, AGG_FUNC ": %s needs a "
                             "larger buffer inside a CUDA graph capture once "
                             "more than %d times; make one uncaptured call of "
                             "the largest shape first", what, AGG_MAX_RETIRED);
        if (*p) g->retired[g->nretired++] = *p;
        *p = NULL;
        *have = 0;
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        e = cudaThreadExchangeStreamCaptureMode(&mode);
        if (e == cudaSuccess) {
            e = cudaMalloc(p, want);
            (void)cudaThreadExchangeStreamCaptureMode(&mode);
        }
    } else {
        e = cudaStreamSynchronize(stream);
        if (*p) (void)cudaFree(*p);
        *p = NULL;
        *have = 0;
        if (e == cudaSuccess) e = cudaMalloc(p, want);
    }
    if (e != cudaSuccess) {
        *p = NULL;
        return mki_error(comm, mkErrNoMemory, AGG_FUNC ": cannot allocate %zu "
                         "bytes for %s: %s", want, what, cudaGetErrorString(e));
    }
    *have = want;
    return mkSuccess;
}

/* Unequal shards without the fused kernel: gather every shard padded to
 * the largest (in place, this rank's copied into its padded block first),
 * then pack the rows into dst. */
static mkResult_t gather_padded(struct mkComm *comm, const struct agg_call *c,
                                char *pad, size_t block, char *out,
                                cudaStream_t stream);

static mkResult_t gather_unequal(struct mkComm *comm, struct mki_agg *g,
                                 const struct agg_call *c, void *dst,
                                 cudaStream_t stream)
{
    size_t es = (size_t)c->es, row = (size_t)c->k * es;
    int64_t mmax = 0;
    for (int r = 0; r < comm->nranks; r++)
        if (c->m_all[r] > mmax) mmax = c->m_all[r];
    if (mmax == 0) return mkSuccess;
    size_t block = (size_t)mmax * row;
    MKI_CHECK(ensure_buf(comm, g, &g->padbuf, &g->padbuf_bytes,
                         block * (size_t)comm->nranks, stream,
                         "the padded shards", c->capturing));
    return gather_padded(comm, c, g->padbuf, block, dst, stream);
}

static mkResult_t gather_padded(struct mkComm *comm, const struct agg_call *c,
                                char *pad, size_t block, char *out,
                                cudaStream_t stream)
{
    size_t es = (size_t)c->es, row = (size_t)c->k * es;
    cudaError_t e = cudaSuccess;
    if (c->m_local > 0)
        e = cudaMemcpyAsync(pad + (size_t)comm->rank * block, c->a,
                            (size_t)c->m_local * row, cudaMemcpyDeviceToDevice,
                            stream);
    if (e != cudaSuccess) return cuda_err(comm, "copying this rank's rows", e);
    MKI_CHECK(mkAllGather(pad + (size_t)comm->rank * block, pad, block / es,
                          c->dtype, comm, stream));
    size_t at = 0;
    for (int r = 0; r < comm->nranks; r++) {
        size_t n = (size_t)c->m_all[r] * row;
        if (n) e = cudaMemcpyAsync(out + at, pad + (size_t)r * block, n,
                                   cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) return cuda_err(comm, "packing the gathered rows", e);
        at += n;
    }
    return mkSuccess;
}

static mkResult_t run_unfused(struct mkComm *comm, struct mki_agg *g,
                              const struct agg_call *c, cudaStream_t stream)
{
    size_t es = (size_t)c->es;
    size_t gbytes = (size_t)c->m_total * (size_t)c->k * es;
    if (comm->nranks == 1) {
        if (c->ga && gbytes) {
            cudaError_t e = cudaMemcpyAsync(c->ga, c->a, gbytes,
                                            cudaMemcpyDeviceToDevice, stream);
            if (e != cudaSuccess) return cuda_err(comm, "copying gatheredA", e);
        }
        return gemm_on(comm, c, c->a, 0, stream);
    }
    int unequal = 0;
    for (int r = 1; c->m_all && r < comm->nranks; r++)
        unequal |= c->m_all[r] != c->m_all[0];
    void *dst = c->ga;
    if (!dst && gbytes) {
        MKI_CHECK(ensure_buf(comm, g, &g->scratch, &g->scratch_bytes, gbytes,
                             stream, "the gathered A", c->capturing));
        dst = g->scratch;
    }
    mkResult_t r;
    if (unequal)
        r = gather_unequal(comm, g, c, dst, stream);
    else
        r = mkAllGather(c->a, dst, (size_t)c->m_local * (size_t)c->k,
                        c->dtype, comm, stream);
    if (r == mkSuccess) r = gemm_on(comm, c, dst, 0, stream);
    return r;
}

/* ---- the fused call -------------------------------------------------- */

/* A copy the driver should give to a copy engine: a copy kernel could not
 * start while the persistent GEMM holds every SM, and the GEMM waits for
 * it (seen: device-local cudaMemcpyAsync hung behind the grid). */
static cudaError_t ce_copy(void *dst, const void *src, size_t bytes,
                           cudaStream_t s)
{
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof(at));
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    void *d[1] = {dst};
    const void *sr[1] = {src};
    size_t n[1] = {bytes};
    return cudaMemcpyBatchAsync(d, sr, n, 1, &at, &idx, 1, s);
}

/* My own rows go into my bank on the caller's stream, before the GEMM:
 * only those of partial tiles, when the GEMM reads my whole tiles from the
 * caller's A (l->own; not when gatheredA is wanted, which is copied from
 * the bank).
 * Measured (bench/NOTES.md): a device-local copy on a side stream, even
 * through cudaMemcpyBatchAsync with cudaMemcpyFlagPreferOverlapWithCompute,
 * did not run while the persistent grid held every SM, and the GEMM waiting
 * for it timed out; here nothing of the GEMM runs yet. */
static mkResult_t copy_own_rows(struct mkComm *comm, struct mki_agg *g,
                                const struct agg_call *c,
                                const struct mki_agg_launch *l,
                                uint64_t bank_off, cudaStream_t stream)
{
    const int me = comm->dev->me;
    const size_t row = (size_t)c->k * (size_t)c->es;
    const int64_t lo = l->row_off[me], hi = l->row_off[me + 1];
    /* Rows [lo, hi) but those the GEMM reads from the caller's A. */
    const int64_t part[2][2] = {{lo, l->own ? l->own_d0 : hi},
                                {l->own ? l->own_d1 : hi, hi}};
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < 2 && e == cudaSuccess; i++)
        if (part[i][1] > part[i][0])
            e = cudaMemcpyAsync(g->arena + bank_off + (size_t)part[i][0] * row,
                                (const char *)c->a + (size_t)(part[i][0] - lo) * row,
                                (size_t)(part[i][1] - part[i][0]) * row,
                                cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return cuda_err(comm, "copying this rank's rows", e);
    /* No signal for them: the GEMM does not wait for its own rows, which
     * are in place (here, or in A) before it starts on this stream
     * (MKT_AGG_OWN_SIG=1 still writes them, to measure what they cost). */
    if (!g->own_sig) return mkSuccess;
    const int64_t nch = mki_agg_nchunks(c->m_local, l->chunk_rows[me]);
    for (int64_t ch = 0; ch < nch; ch++) {
        uint64_t sig = (uint64_t)(uintptr_t)(g->arena + 8ull *
                       ((uint64_t)me * MKI_AGG_MAXCHUNKS + (uint64_t)ch));
        int cu = g->write64((void *)stream, sig, l->target, 0);
        if (cu != 0)
            return mki_error(comm, mkErrCuda, AGG_FUNC ": "
                             "cuStreamWriteValue64 failed (CUresult %d)", cu);
    }
    return mkSuccess;
}

static mkResult_t enqueue_copies(struct mkComm *comm, struct mki_agg *g,
                                 const struct agg_call *c,
                                 const struct mki_agg_launch *l,
                                 uint64_t bank_off, cudaStream_t stream)
{
    struct mki_devrt *d = comm->dev;
    const int me = d->me;
    const size_t row = (size_t)c->k * (size_t)c->es;
    const int64_t cr = l->chunk_rows[me];
    const int64_t nch = mki_agg_nchunks(c->m_local, cr);
    /* No more side streams per peer than chunks: an idle one would only
     * add its fork wait, join record and the caller's join wait (three
     * stream operations; no time difference measured, bench/NOTES.md). */
    const int split = (int64_t)g->ce_split < nch ? g->ce_split : (int)nch;
    for (int i = 1; i < d->nlocal; i++) {
        /* Each GEMM computes its own rows first, then those of the next
         * ranks in order (me + 1, me + 2, ...): my rows are wanted soonest
         * by the rank before me, so the previous ranks go first (8 H200:
         * 0.72-0.84x the unfused sequence with the next ranks first,
         * 1.11-1.38x so; bench/NOTES.md). */
        int dst = (me - i + d->nlocal) % d->nlocal;
        cudaError_t e = cudaSuccess;
        for (int x = 0; e == cudaSuccess && x < split; x++)
            e = cudaStreamWaitEvent(g->side[dst][x], g->fork, 0);
        for (int64_t ch = 0; e == cudaSuccess && ch < nch; ch++) {
            cudaStream_t s = g->side[dst][ch % split];
            int64_t r0 = ch * cr;
            int64_t rows = c->m_local - r0 < cr ? c->m_local - r0 : cr;
            if (rows > 0)
                e = ce_copy(g->peer[dst] + bank_off +
                                (size_t)(l->row_off[me] + r0) * row,
                            (const char *)c->a + (size_t)r0 * row,
                            (size_t)rows * row, s);
            if (e != cudaSuccess) break;
            uint64_t sig = (uint64_t)(uintptr_t)(g->peer[dst] + 8ull *
                           ((uint64_t)me * MKI_AGG_MAXCHUNKS + (uint64_t)ch));
            int cu = g->write64((void *)s, sig, l->target, 0);
            if (cu != 0)
                return mki_error(comm, mkErrCuda, AGG_FUNC ": "
                                 "cuStreamWriteValue64 failed (CUresult %d)", cu);
        }
        for (int x = 0; e == cudaSuccess && x < split; x++) {
            e = cudaEventRecord(g->join[dst][x], g->side[dst][x]);
            if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, g->join[dst][x], 0);
        }
        if (e != cudaSuccess) return cuda_err(comm, "enqueueing the copies", e);
    }
    return mkSuccess;
}

static void fill_launch(struct mkComm *comm, struct mki_agg *g,
                        const struct agg_call *c, const struct mki_op_plan *p,
                        struct mki_agg_launch *l)
{
    struct mki_devrt *d = comm->dev;
    memset(l, 0, sizeof(*l));
    l->b = c->b;
    l->c = c->c;
    l->m = c->m_total;
    l->n = c->n;
    l->k = c->k;
    l->dtype = (int)c->dtype;
    l->trans_b = c->trans_b;
    /* The copy engines move the rows: every SM of the budget computes,
     * unless MK_SM_SPLIT says otherwise. */
    int ctas = (p->overridden & MKI_OVR_COMPUTE) || p->mover == MKI_MOVER_CE
               ? p->split.compute : 0;
    if (ctas <= 0 || ctas > d->sm_count) ctas = d->sm_count;
    /* Ranks sharing a GPU (MPS): each spinning grid must leave room for
     * the others', or a rank whose chunks we wait for could not run the
     * kernel before the call that sends them; and a few SMs stay free for
     * copies between ranks of one device, which the driver may do with a
     * kernel. */
    if (d->ranks_on_dev > 1 &&
        ctas > (d->sm_count - AGG_MPS_FREE_SMS) / d->ranks_on_dev)
        ctas = (d->sm_count - AGG_MPS_FREE_SMS) / d->ranks_on_dev;
    l->ctas = ctas < 1 ? 1 : ctas;
    l->nsrc = d->nlocal;
    for (int s = 0; s < d->nlocal; s++) {
        int64_t ms = c->m_all ? c->m_all[d->comm_rank[s]] : c->m_local;
        l->row_off[s + 1] = l->row_off[s] + ms;
        /* Local rows go first, so a few large chunks hide the copies: at
         * most AGG_CHUNKS per rank keeps host enqueue time small, and no
         * chunk smaller than MKI_AGG_CE_CHUNK_MIN (its fixed cost). */
        int64_t want = (ms + AGG_CHUNKS - 1) / AGG_CHUNKS;
        if (p->chunk_rows > want) want = p->chunk_rows;
        int64_t floor_rows = mki_agg_chunk_floor(c->k * c->es);
        if (want < floor_rows) want = floor_rows;
        if (p->overridden & MKI_OVR_CHUNK) want = p->chunk_rows;
        l->chunk_rows[s] = mki_agg_chunk_rows(ms, want);
    }
    /* The GEMM reads this rank's whole tiles straight from A, unless the
     * gathered A is wanted (copied out of the bank) or MKT_AGG_OWN_COPY
     * asks for the whole copy (for measurements). */
    if (!c->ga && !g->own_copy && c->m_local > 0) {
        mki_agg_own_direct(l->row_off[d->me], l->row_off[d->me + 1], &l->own_d0,
                           &l->own_d1);
        if (l->own_d1 > l->own_d0) l->own = c->a;
    }
    l->sig = (uint64_t *)g->arena;
    l->target = g->calls;
    if (g->prof_dev && l->ctas <= AGG_PROF_CTAS) { /* launch grid <= l->ctas */
        uint64_t slot = g->prof_calls++ % AGG_PROF_RING;
        l->prof = (uint64_t *)(g->prof_dev + slot * AGG_PROF_CTAS * 4);
        g->prof_shape[slot][0] = c->m_total;
        g->prof_shape[slot][1] = c->n;
        g->prof_shape[slot][2] = c->k;
        g->prof_shape[slot][3] = l->ctas;
    }
    l->cp.op = MKI_AGG_OP;
    l->cp.nranks = d->nlocal;
    l->cp.me = d->me;
    for (int s = 0; s < d->nlocal; s++) l->cp.ws[s] = d->peer_ws[s];
    l->cp.timeout_ns = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
    l->cp.err = d->rec_dev;
}

static mkResult_t run_fused(struct mkComm *comm, struct mki_agg *g,
                            const struct agg_call *c,
                            const struct mki_op_plan *p, cudaStream_t stream)
{
    uint64_t gbytes = (uint64_t)c->m_total * (uint64_t)c->k * (uint64_t)c->es;
    uint64_t bank = (gbytes + 4095) / 4096 * 4096;
    if (bank == 0) bank = 4096;
    if (g->bank_bytes < bank) MKI_CHECK(grow_arena(comm, g, bank, stream));
    g->calls++;
    comm->epoch++;
    struct mki_agg_launch l;
    fill_launch(comm, g, c, p, &l);
    l.cp.epoch = comm->epoch;
    uint64_t bank_off = mki_agg_bank_off((int)(g->calls & 1), g->bank_bytes);
    l.a = g->arena + bank_off;
    cudaError_t e = cudaEventRecord(g->fork, stream);
    if (e != cudaSuccess) return cuda_err(comm, "cudaEventRecord", e);
    MKI_CHECK(copy_own_rows(comm, g, c, &l, bank_off, stream));
    char msg[512];
    struct mki_agg_launch kl = l;
    if (g->diag != AGG_DIAG_NONE) kl.target = 0; /* every wait passes */
    if (mki_agg_launch(&kl, (void *)stream, msg, sizeof(msg)) != 0)
        return mki_error(comm, mkErrCuda, AGG_FUNC ": %s", msg);
    if (g->diag != AGG_DIAG_NOCOPY)
        MKI_CHECK(enqueue_copies(comm, g, c, &l, bank_off, stream));
    if (c->ga && gbytes) {
        e = cudaMemcpyAsync(c->ga, l.a, gbytes, cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) return cuda_err(comm, "copying gatheredA", e);
    }
    return mkSuccess;
}

/* Fused when the communicator is one node the arena can serve and the
 * plan says it pays; otherwise our unfused sequence, said once at INFO. */
static int choose_fused(struct mkComm *comm, const struct agg_call *c,
                        struct mki_op_plan *p, const char **why)
{
    if (comm->nranks == 1) { *why = "one rank: nothing to gather"; return 0; }
    if (c->capturing) {
        *why = "the stream is being captured into a CUDA graph (the fused "
               "kernel numbers its chunk signals on the host, which a replay "
               "would repeat)";
        return 0;
    }
    if (comm->nnodes != 1 || comm->dev->nlocal != comm->nranks ||
        comm->nranks > MKI_MAXLOCAL) {
        *why = "ranks on several nodes (the fused kernel has no remote "
               "source of chunks yet; the all-gather crosses nodes through "
               "the proxy)";
        return 0;
    }
    for (int l = 0; l < comm->nranks; l++)
        if (comm->dev->comm_rank[l] != l) {
            *why = "local ranks are not in communicator order";
            return 0;
        }
    if (c->m_total == 0 || c->n == 0) { *why = NULL; return 1; }
    if (mki_plan_op(comm, MKI_OP_AG_GEMM, c->m_total, c->n, c->k, c->es, p) != mkSuccess) {
        *why = "no plan for this shape";
        return 0;
    }
    int unequal = 0;
    for (int r = 1; c->m_all && r < comm->nranks; r++) unequal |= c->m_all[r] != c->m_all[0];
    if (!p->fused && !unequal) { *why = p->reason; return 0; }
    *why = NULL;
    return 1;
}

MK_API mkResult_t mkAllGatherGemm(const void *A, const void *B, void *C,
                                  void *gatheredA, int64_t m_local,
                                  const int64_t *m_all, int64_t n, int64_t k,
                                  int transB, mkDataType_t dtype, mkComm_t comm,
                                  cudaStream_t stream)
{
    MKI_CHECK(mki_comm_check(comm, AGG_FUNC));
    struct agg_call c = {A, B, C, gatheredA, m_local, m_all, n, k, transB,
                         dtype, 0, 0, 0};
    mkResult_t broken = mki_comm_async_error(comm);
    if (broken != mkSuccess) return mki_comm_broken(comm, broken, AGG_FUNC);
    mkResult_t local = check_sizes(comm, &c);
    int prev = -1;
    if (local == mkSuccess) local = check_device(comm, &c);
    if (local == mkSuccess && cudaGetDevice(&prev) == cudaSuccess &&
        prev != comm->dev->dev && cudaSetDevice(comm->dev->dev) != cudaSuccess)
        local = mki_error(comm, mkErrCuda, AGG_FUNC ": cannot use device %d",
                          comm->dev->dev);
    if (local == mkSuccess && !comm->agg) local = state_create(comm);
    if (local == mkSuccess) {
        enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        cudaError_t e = cudaStreamIsCapturing(stream, &cs);
        if (e != cudaSuccess)
            local = mki_error(comm, mkErrCuda, AGG_FUNC ": cannot query the "
                              "stream's capture status: %s",
                              cudaGetErrorString(e));
        else if (cs == cudaStreamCaptureStatusInvalidated)
            local = mki_error(comm, mkErrInvalidArgument, AGG_FUNC ": the "
                              "stream's capture was invalidated by an earlier "
                              "error; end it and capture again");
        else
            c.capturing = cs == cudaStreamCaptureStatusActive;
    }
    /* Every rank takes part in the shape check, even after a local error,
     * so no rank is left waiting in it. */
    mkResult_t r = exchange_shape(comm, comm->agg ? comm->agg : &(struct mki_agg){0},
                                  &c, local);
    if (r == mkSuccess) {
        struct mki_op_plan p;
        memset(&p, 0, sizeof(p));
        const char *why = NULL;
        if (choose_fused(comm, &c, &p, &why)) {
            r = run_fused(comm, comm->agg, &c, &p, stream);
        } else {
            MKI_INFO(MKI_SUB_GEMM, AGG_FUNC " %lld x %lld x %lld: unfused "
                     "sequence (all-gather, then GEMM): %s",
                     (long long)c.m_total, (long long)n, (long long)k, why);
            r = run_unfused(comm, comm->agg, &c, stream);
        }
    }
    if (prev >= 0 && prev != comm->dev->dev) (void)cudaSetDevice(prev);
    return r;
}
