/*
 * plan.c - per-communicator plan: the transport of each peer and, per
 * (operation, shape), the split of the persistent grid among roles.
 *
 * The cost model (DESIGN §8).  For one rank of P, L of them on its node,
 * a candidate split (n_c compute, n_i intra, n_s inter-send, n_r
 * inter-reduce CTAs, one CTA per SM) and an intra mover:
 *
 *   T_compute = tiles/n_c waves (at least 1) x time of one tile on one SM
 *   T_intra   = intra bytes / min(n_i x per-CTA rate, link saturation)
 *               (copy engine: no CTA, its own rate; a reduction also needs
 *               n_i x per-CTA add rate)
 *   T_inter   = inter bytes / (NICs x NIC rate);   T_ired = inter bytes /
 *               (n_r x per-CTA add rate) for reductions
 *   fused     = max(T_compute x interference, T_intra, T_inter, T_ired)
 *               + one chunk of the faster side (fill/drain) + overhead
 *               (a GEMM of a single wave cannot overlap: the sum instead)
 *   unfused   = T_compute(all SMs) + collective(all SMs) + one launch
 *
 * Bytes per rank follow a hierarchical schedule: of a collective over
 * `total` bytes, (L-1)/L cross the node's links and (P-L)/(P*L) cross this
 * rank's NIC (alltoall: (L-1)/P and (P-L)/P, no aggregation).  The split
 * with the least fused time wins (ties: fewer communication CTAs); the
 * fused kernel runs only when it beats the unfused sequence by the
 * model's margin.  Every figure is in mki_model_default below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "mki.h"
#include "plan/plan.h"
#include "topology/topo.h"

/* Figures from shared/REFERENCE.md (2 x H200, NV18, 2026-11-22) and the
 * public anchors it lists.  Calibration replaces this table only. */
const struct mki_model mki_model_default = {
    .sm_count = 132,
    .gemm_tflops = 700.0,      /* cuBLAS bf16 677-791 TFLOP/s */
    .tile_m = 128,
    .tile_n = 256,
    .nvlink_link_gbs = 26.5,   /* NV18: 18 x 26.5 = 477 GB/s per direction */
    .nvlink_ref_links = 18,
    .tma_cta_gbs = 43.0,       /* cp.async.bulk, one thread per CTA */
    .tma_sat_gbs = 372.0,      /* 8 CTAs 343, 16 353, 132 372 */
    .reg_cta_gbs = 20.0,       /* 512 threads, 16-byte stores */
    .reg_sat_gbs = 367.0,      /* 16 CTAs 316-322, 132 367 */
    .ce_gbs = 385.0,           /* cudaMemcpyPeerAsync beside a GEMM */
    .pcie_gbs = 24.0,          /* PCIe Gen4 x16 peer copies */
    .host_gbs = 10.0,          /* two PCIe hops through pinned host memory */
    .same_gpu_gbs = 2000.0,    /* device-local copy: 4.25 TB/s read+write */
    .local_cta_gbs = 32.0,     /* 4.25 TB/s / 132 SMs */
    .reduce_cta_gbs = 32.0,    /* fp32 add streams at the SM's HBM share */
    .ib_nic_gbs = 50.0,        /* ConnectX-7, 400 Gb/s */
    .efa_nic_gbs = 25.0,       /* p5en: 16 x 200 Gb/s EFA, 2 per GPU */
    .socket_gbs = 3.0,         /* TCP through one host thread */
    .inter_send_per_nic = 1,
    .fused_overhead_us = 10.0,
    .launch_us = 5.0,
    .gemm_interference = 1.02, /* a peer copy slowed cuBLAS 8192^3 by 1.5% */
    .fuse_margin = 0.05,
    .partial_bytes = 4,        /* fp32 partial sums (one rounding) */
    .chunk_min = 256u << 10,
    .chunk_max = 8u << 20,
    .chunks_per_shard = 8,
};

/* Movers each op's kernels may use: the copy engine cannot add, so the
 * reductions combine with TMA (adds by the CTA's other warps) or registers;
 * mkAllGatherGemm's fused kernel has no INTRA CTAs: the copy engine moves
 * its rows (TMA from INTRA CTAs and stores by the GEMM's producer were
 * measured slower, bench/NOTES.md), so its plan weighs only that. */
#define MV(m) (1u << (m))
static const unsigned op_movers[MKI_OP_COUNT] = {
    [MKI_OP_ALLGATHER] = MV(MKI_MOVER_CE) | MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
    [MKI_OP_REDUCESCATTER] = MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
    [MKI_OP_ALLREDUCE] = MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
    [MKI_OP_ALLTOALL] = MV(MKI_MOVER_CE) | MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
    [MKI_OP_AG_GEMM] = MV(MKI_MOVER_CE),
    [MKI_OP_GEMM_RS] = MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
    [MKI_OP_GEMM_AR] = MV(MKI_MOVER_TMA) | MV(MKI_MOVER_REG),
};

/* ---- names -------------------------------------------------------- */

static const char *const op_names[MKI_OP_COUNT] = {
    "allgather", "reducescatter", "allreduce", "alltoall",
    "ag_gemm", "gemm_rs", "gemm_ar",
};
static const char *const mover_names[MKI_MOVER_COUNT] = {
    "none", "ce", "tma", "reg",
};
static const char *const path_names[MKI_PATH_COUNT] = {
    "self", "same-gpu", "nvlink", "pcie", "host", "net",
};
static const char *const tr_names[MKI_TR_COUNT] = {"ibverbs", "efa", "socket"};

const char *mki_op_name(enum mki_op op)
{ return (unsigned)op < MKI_OP_COUNT ? op_names[op] : "?"; }
const char *mki_mover_name(enum mki_mover m)
{ return (unsigned)m < MKI_MOVER_COUNT ? mover_names[m] : "?"; }
const char *mki_path_name(enum mki_path p)
{ return (unsigned)p < MKI_PATH_COUNT ? path_names[p] : "?"; }
const char *mki_transport_name(enum mki_transport t)
{ return (unsigned)t < MKI_TR_COUNT ? tr_names[t] : "?"; }

int mki_op_from_name(const char *name)
{
    for (int i = 0; i < MKI_OP_COUNT; i++)
        if (strcasecmp(name, op_names[i]) == 0) return i;
    return -1;
}

static int op_has_gemm(enum mki_op op) { return op >= MKI_OP_AG_GEMM; }
static int op_reduces(enum mki_op op)
{
    return op == MKI_OP_REDUCESCATTER || op == MKI_OP_ALLREDUCE ||
           op == MKI_OP_GEMM_RS || op == MKI_OP_GEMM_AR;
}

/* ---- MK_TRANSPORT --------------------------------------------------- */

static int tr_from_name(const char *s)
{
    for (int i = 0; i < MKI_TR_COUNT; i++)
        if (strcasecmp(s, tr_names[i]) == 0) return i;
    return -1;
}

mkResult_t mki_transport_list(const char *list, const char *what,
                              enum mki_transport order[MKI_TR_COUNT],
                              int *count)
{
    char buf[256];
    int neg = list[0] == '^', named[MKI_TR_COUNT] = {0}, n = 0;
    if (strlen(list) >= sizeof(buf))
        return mki_error(NULL, mkErrInvalidArgument, "%s is longer than %zu "
                         "characters", what, sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", list + neg);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int id = tr_from_name(t);
        if (id < 0)
            return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\" names "
                             "unknown transport \"%s\"; use a comma list of "
                             "ibverbs, efa, socket (a leading ^ excludes)",
                             what, list, t);
        if (!neg && !named[id]) order[n++] = (enum mki_transport)id;
        named[id] = 1;
    }
    if (neg)
        for (int i = 0; i < MKI_TR_COUNT; i++)
            if (!named[i]) order[n++] = (enum mki_transport)i;
    if (n == 0)
        return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\" leaves no "
                         "transport; name at least one of ibverbs, efa, "
                         "socket", what, list);
    *count = n;
    return mkSuccess;
}

/* ---- MK_SM_SPLIT ----------------------------------------------------- */

static mkResult_t split_bad(const char *what, const char *spec,
                            const char *item, const char *why)
{
    return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\": item \"%s\" %s; "
                     "write a comma list of [op:]key=value with key compute, "
                     "intra, inter_send, inter_reduce (CTAs), mover (ce, tma, "
                     "reg), chunk (bytes, K/M suffix) or fused (0, 1), e.g. "
                     "\"ag_gemm:intra=8,fused=1\"", what, spec, item, why);
}

static int parse_count(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < 0 || x > 4096) return -1;
    *v = (int)x;
    return 0;
}

/* Apply key=value to one op's entry; scoped says the op was named. */
static mkResult_t split_item(const char *what, const char *spec, const char *item,
                             const char *key, const char *val, int scoped,
                             enum mki_op op, struct mki_split_ovr *o)
{
    static const struct { const char *key; unsigned bit; size_t off; } roles[] = {
        {"compute", MKI_OVR_COMPUTE, offsetof(struct mki_split, compute)},
        {"intra", MKI_OVR_INTRA, offsetof(struct mki_split, intra)},
        {"inter_send", MKI_OVR_INTER_SEND, offsetof(struct mki_split, inter_send)},
        {"inter_reduce", MKI_OVR_INTER_REDUCE,
         offsetof(struct mki_split, inter_reduce)},
    };
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        if (strcmp(key, roles[i].key)) continue;
        int v;
        if (parse_count(val, &v))
            return split_bad(what, spec, item, "needs a CTA count 0..4096");
        *(int *)((char *)&o->split + roles[i].off) = v;
        o->set |= roles[i].bit;
        return mkSuccess;
    }
    if (!strcmp(key, "mover")) {
        int m = -1;
        for (int i = MKI_MOVER_CE; i < MKI_MOVER_COUNT; i++)
            if (!strcasecmp(val, mover_names[i])) m = i;
        if (m < 0) return split_bad(what, spec, item, "names no mover");
        if (!(op_movers[op] & MV(m))) {
            if (scoped)
                return split_bad(what, spec, item,
                                 op_movers[op] == MV(MKI_MOVER_CE)
                                     ? "names a mover this operation does not have "
                                       "(its fused kernel moves rows with the copy "
                                       "engine only: use ce)"
                                     : "asks the copy engine to reduce, which it "
                                       "cannot (use tma or reg)");
            return mkSuccess; /* an unscoped mover skips ops it cannot serve */
        }
        o->mover = (enum mki_mover)m;
        o->set |= MKI_OVR_MOVER;
        return mkSuccess;
    }
    if (!strcmp(key, "chunk")) {
        int64_t b;
        if (mki_parse_size(val, &b) || b < 4096 || b > (1ll << 34))
            return split_bad(what, spec, item, "needs a size from 4K to 16G");
        o->chunk = (size_t)b;
        o->set |= MKI_OVR_CHUNK;
        return mkSuccess;
    }
    if (!strcmp(key, "fused")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return split_bad(what, spec, item, "needs 0 or 1");
        o->fused = val[0] == '1';
        o->set |= MKI_OVR_FUSED;
        return mkSuccess;
    }
    return split_bad(what, spec, item, "has an unknown key");
}

/* One pass over the items: unscoped ones (scoped_pass 0) or op-scoped
 * ones (1), so that "op:key" wins over "key" whatever the order. */
static mkResult_t split_pass(const char *spec, const char *what,
                             int scoped_pass, struct mki_split_ovr *ovr)
{
    char buf[256], item[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        snprintf(item, sizeof(item), "%s", t);
        char *eq = strchr(t, '='), *colon = strchr(t, ':');
        if (!eq || eq == t || !eq[1])
            return split_bad(what, spec, item, "is not key=value");
        *eq = '\0';
        int op = -1;
        if (colon && colon < eq) {
            *colon = '\0';
            op = mki_op_from_name(t);
            if (op < 0)
                return split_bad(what, spec, item, "names an unknown op (use "
                                 "allgather, reducescatter, allreduce, "
                                 "alltoall, ag_gemm, gemm_rs or gemm_ar)");
            t = colon + 1;
        }
        if ((op >= 0) != scoped_pass) continue;
        for (int o = 0; o < MKI_OP_COUNT; o++)
            if (op < 0 || o == op)
                MKI_CHECK(split_item(what, spec, item, t, eq + 1, op >= 0,
                                     (enum mki_op)o, &ovr[o]));
    }
    return mkSuccess;
}

mkResult_t mki_split_parse(const char *spec, const char *what,
                           struct mki_split_ovr ovr[MKI_OP_COUNT])
{
    struct mki_split_ovr tmp[MKI_OP_COUNT];
    memset(tmp, 0, sizeof(tmp));
    if (strlen(spec) >= 256)
        return mki_error(NULL, mkErrInvalidArgument, "%s is longer than 255 "
                         "characters", what);
    MKI_CHECK(split_pass(spec, what, 0, tmp));
    MKI_CHECK(split_pass(spec, what, 1, tmp));
    memcpy(ovr, tmp, sizeof(tmp));
    return mkSuccess;
}

/* ---- the model ------------------------------------------------------ */

struct work {
    double flops;
    int64_t gm, gn, gk;       /* the GEMM of one rank */
    int64_t intra, inter;     /* bytes per rank */
    int reduce;
    int64_t row_bytes, shard_rows;
};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/* Not libm's: the core library links no libm. */
static double dmin(double a, double b) { return a < b ? a : b; }
static double dmax(double a, double b) { return a > b ? a : b; }
static int iceil(double x) { int i = (int)x; return i < x ? i + 1 : i; }

/* Bytes a rank moves for a hierarchical collective over `total` bytes. */
static void coll_bytes(const struct mki_plan_ctx *c, double total, int a2a,
                       double *intra, double *inter)
{
    double P = c->nranks, L = c->local_size;
    if (a2a) {
        *intra += total * (L - 1) / P;
        *inter += total * (P - L) / P;
    } else {
        *intra += total * (L - 1) / L;
        *inter += total * (P - L) / (P * L);
    }
}

static void work_of(const struct mki_model *md, const struct mki_plan_ctx *c,
                    enum mki_op op, int64_t m, int64_t n, int64_t k, int e,
                    struct work *w)
{
    double intra = 0, inter = 0, pb = md->partial_bytes;
    double mn = (double)m * (double)n;
    memset(w, 0, sizeof(*w));
    w->reduce = op_reduces(op);
    w->shard_rows = cdiv(m, c->nranks);
    w->row_bytes = n * e;
    switch (op) {
    case MKI_OP_ALLGATHER:
    case MKI_OP_REDUCESCATTER: coll_bytes(c, mn * e, 0, &intra, &inter); break;
    case MKI_OP_ALLREDUCE: coll_bytes(c, 2 * mn * e, 0, &intra, &inter); break;
    case MKI_OP_ALLTOALL: coll_bytes(c, mn * e, 1, &intra, &inter); break;
    case MKI_OP_AG_GEMM:
        coll_bytes(c, (double)m * (double)k * e, 0, &intra, &inter);
        w->gm = m, w->gn = n, w->gk = k;
        w->row_bytes = k * e;
        break;
    case MKI_OP_GEMM_RS:
    case MKI_OP_GEMM_AR:
        coll_bytes(c, mn * pb, 0, &intra, &inter);
        if (op == MKI_OP_GEMM_AR) coll_bytes(c, mn * e, 0, &intra, &inter);
        w->gm = m, w->gn = n, w->gk = cdiv(k, c->nranks);
        w->row_bytes = n * md->partial_bytes;
        break;
    default: break;
    }
    w->flops = 2.0 * (double)w->gm * (double)w->gn * (double)w->gk;
    w->intra = (int64_t)intra;
    w->inter = (int64_t)inter;
}

static double gemm_us(const struct mki_model *md, const struct mki_plan_ctx *c,
                      const struct work *w, int n_c)
{
    if (w->flops <= 0) return 0;
    if (n_c <= 0) return INFINITY;
    double tiles = (double)cdiv(w->gm, md->tile_m) * (double)cdiv(w->gn, md->tile_n);
    double sm_flops = md->gemm_tflops * 1e12 / c->sm_count;
    double t_tile = 2.0 * md->tile_m * md->tile_n * (double)w->gk / sm_flops;
    double waves = tiles / n_c < 1 ? 1 : tiles / n_c;
    return waves * t_tile * 1e6;
}

/* Rates of one mover on the node's slowest path, GB/s. */
static void mover_rates(const struct mki_model *md, const struct mki_plan_ctx *c,
                        enum mki_mover mv, double *per_cta, double *sat)
{
    double scale = 1.0;
    *per_cta = mv == MKI_MOVER_TMA ? md->tma_cta_gbs
             : mv == MKI_MOVER_REG ? md->reg_cta_gbs : INFINITY;
    *sat = mv == MKI_MOVER_TMA ? md->tma_sat_gbs
         : mv == MKI_MOVER_REG ? md->reg_sat_gbs : md->ce_gbs;
    switch (c->intra_path) {
    case MKI_PATH_NVLINK:
        if (c->nvlinks > 0 && c->nvlinks < md->nvlink_ref_links)
            scale = (double)c->nvlinks / md->nvlink_ref_links;
        *sat *= scale;
        break;
    case MKI_PATH_PCIE: *sat = md->pcie_gbs; break;
    case MKI_PATH_HOST: *sat = md->host_gbs; break;
    case MKI_PATH_SAME_GPU:
        *sat = md->same_gpu_gbs;
        if (mv != MKI_MOVER_CE) *per_cta = md->local_cta_gbs;
        break;
    default: break;
    }
}

static double intra_gbs(const struct mki_model *md, const struct mki_plan_ctx *c,
                        enum mki_mover mv, int n_i, int reduce)
{
    double per_cta, sat;
    mover_rates(md, c, mv, &per_cta, &sat);
    double bw = mv == MKI_MOVER_CE ? sat : dmin(n_i * per_cta, sat);
    /* TMA leaves the CTA's other warps free to add what arrived. */
    if (reduce && mv == MKI_MOVER_TMA) bw = dmin(bw, n_i * md->reduce_cta_gbs);
    return bw;
}

static double nic_total_gbs(const struct mki_model *md, const struct mki_plan_ctx *c)
{
    return c->nics > 0 ? c->nics * c->nic_gbs : md->socket_gbs;
}

struct times {
    double c, i, x, comm, fused;
};

static double us_of(int64_t bytes, double gbs)
{
    if (bytes <= 0) return 0;
    return gbs > 0 ? (double)bytes / (gbs * 1e3) : INFINITY;
}

static void evaluate(const struct mki_model *md, const struct mki_plan_ctx *c,
                     const struct work *w, const struct mki_split *s,
                     enum mki_mover mv, struct times *t)
{
    int comm = w->intra > 0 || w->inter > 0;
    t->c = gemm_us(md, c, w, s->compute) * (comm ? md->gemm_interference : 1);
    t->i = w->intra > 0 ? us_of(w->intra, intra_gbs(md, c, mv, s->intra, w->reduce))
                        : 0;
    t->x = w->inter > 0 && s->inter_send == 0 ? INFINITY
                                              : us_of(w->inter, nic_total_gbs(md, c));
    double xr = w->reduce && w->inter > 0
                    ? us_of(w->inter, s->inter_reduce * md->reduce_cta_gbs) : 0;
    t->comm = dmax(dmax(t->i, t->x), xr);
    /* The stage that is not the bottleneck still shows for one chunk at
     * the start (fill) or the end (drain).  In a single wave every tile
     * runs at once: the tiles that need remote rows (or whose sums must
     * leave) wait for all of them, and nothing overlaps. */
    double fill = w->flops > 0 ? dmin(t->c, t->comm) / md->chunks_per_shard : 0;
    double tiles = (double)cdiv(w->gm, md->tile_m) * (double)cdiv(w->gn, md->tile_n);
    if (w->flops > 0 && tiles <= s->compute) fill = dmin(t->c, t->comm);
    t->fused = dmax(t->c, t->comm) + fill + (comm ? md->fused_overhead_us : 0);
}

/* CTAs the inter-node roles need (not searched: set by the NICs). */
static void inter_ctas(const struct mki_model *md, const struct mki_plan_ctx *c,
                       const struct work *w, struct mki_split *s)
{
    s->inter_send = w->inter > 0 ? md->inter_send_per_nic * (c->nics > 0 ? c->nics : 1)
                                 : 0;
    s->inter_reduce = w->reduce && w->inter > 0
                          ? iceil(nic_total_gbs(md, c) / md->reduce_cta_gbs) : 0;
}

struct cand {
    struct mki_split s;
    enum mki_mover mv;
    struct times t;
    int ok;
};

static int comm_ctas(const struct mki_split *s)
{ return s->intra + s->inter_send + s->inter_reduce; }

/* Try every intra CTA count of one mover.  Pass 0 finds the least fused
 * time (*best_t); pass 1 keeps, among candidates within tol of it, the one
 * with the fewest communication CTAs (SMs left to the GEMM or to other
 * ranks). */
static void search_mover(const struct mki_model *md, const struct mki_plan_ctx *c,
                         const struct work *w, const struct mki_split *base,
                         unsigned fixed, enum mki_mover mv, int budget,
                         double tol, int pass, double *best_t, struct cand *best)
{
    int gemm = w->flops > 0, ce = mv == MKI_MOVER_CE && !w->reduce;
    /* The copy engine needs no CTA; a collective keeps one to raise the
     * flags that start the copies and to signal peers. */
    int lo = mv == MKI_MOVER_NONE || (ce && gemm) ? 0 : 1;
    int hi = ce || mv == MKI_MOVER_NONE ? lo : budget;
    if (fixed & MKI_OVR_INTRA) lo = hi = base->intra;
    for (int n_i = lo; n_i <= hi; n_i++) {
        struct mki_split s = *base;
        s.intra = n_i;
        if (!(fixed & MKI_OVR_COMPUTE))
            s.compute = gemm ? budget - comm_ctas(&s) : 0;
        if ((gemm && s.compute < 1) || comm_ctas(&s) + s.compute > budget)
            break;
        struct times t;
        evaluate(md, c, w, &s, mv, &t);
        if (pass == 0) {
            if (t.fused < *best_t) *best_t = t.fused;
        } else if (t.fused <= *best_t * (1 + tol) &&
                   (!best->ok || comm_ctas(&s) < comm_ctas(&best->s) ||
                    (comm_ctas(&s) == comm_ctas(&best->s) &&
                     t.fused < best->t.fused))) {
            best->s = s, best->mv = mv, best->t = t, best->ok = 1;
        }
    }
}

static void search(const struct mki_model *md, const struct mki_plan_ctx *c,
                   const struct work *w, enum mki_op op,
                   const struct mki_split_ovr *o, int budget, struct cand *best)
{
    struct mki_split base = {0, 0, 0, 0};
    unsigned fixed = o ? o->set : 0;
    inter_ctas(md, c, w, &base);
    if (fixed & MKI_OVR_INTER_SEND) base.inter_send = o->split.inter_send;
    if (fixed & MKI_OVR_INTER_REDUCE) base.inter_reduce = o->split.inter_reduce;
    if (fixed & MKI_OVR_INTRA) base.intra = o->split.intra;
    if (fixed & MKI_OVR_COMPUTE) base.compute = w->flops > 0 ? o->split.compute : 0;
    memset(best, 0, sizeof(*best));
    double tol = w->flops > 0 ? 0.005 : 0.02, best_t = INFINITY;
    if (w->intra == 0) fixed |= MKI_OVR_INTRA, base.intra = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (w->intra == 0) {
            search_mover(md, c, w, &base, fixed, MKI_MOVER_NONE, budget, tol,
                         pass, &best_t, best);
            continue;
        }
        for (int mv = MKI_MOVER_CE; mv < MKI_MOVER_COUNT; mv++) {
            if (!(op_movers[op] & MV(mv))) continue;
            if ((fixed & MKI_OVR_MOVER) && o->mover != (enum mki_mover)mv)
                continue;
            search_mover(md, c, w, &base, fixed, (enum mki_mover)mv, budget,
                         tol, pass, &best_t, best);
        }
    }
    if (best_t == INFINITY) best->ok = 0;
}

/* Rows of one signalled chunk: a shard in chunks_per_shard pieces, within
 * [chunk_min, chunk_max] bytes and an eighth of the workspace, whole tiles
 * for GEMM ops. */
static void chunking(const struct mki_model *md, const struct mki_plan_ctx *c,
                     const struct work *w, const struct mki_split_ovr *o,
                     struct mki_op_plan *p)
{
    int64_t rb = w->row_bytes > 0 ? w->row_bytes : 1;
    int64_t bytes = cdiv(w->shard_rows, md->chunks_per_shard) * rb;
    if (bytes < (int64_t)md->chunk_min) bytes = (int64_t)md->chunk_min;
    if (bytes > (int64_t)md->chunk_max) bytes = (int64_t)md->chunk_max;
    if (c->workspace && bytes > (int64_t)(c->workspace / 8))
        bytes = (int64_t)(c->workspace / 8);
    if (o && (o->set & MKI_OVR_CHUNK)) bytes = (int64_t)o->chunk;
    if (w->flops <= 0) {
        /* A collective moves flat bytes: 4 KiB-aligned chunks, no larger
         * than a shard; rows only say how many whole rows fit. */
        int64_t shard = w->shard_rows * rb;
        if (bytes > shard) bytes = shard;
        bytes = bytes >= 4096 ? bytes / 4096 * 4096 : bytes;
        p->chunk_bytes = (size_t)(bytes > 0 ? bytes : 1);
        p->chunk_rows = bytes / rb;
        return;
    }
    int64_t rows = bytes / rb > 0 ? bytes / rb : 1;
    rows = rows < md->tile_m ? md->tile_m : rows / md->tile_m * md->tile_m;
    int64_t cap = cdiv(w->shard_rows, md->tile_m) * md->tile_m;
    if (rows > cap) rows = cap;
    p->chunk_rows = rows;
    p->chunk_bytes = (size_t)(rows * rb);
}

static double unfused_us(const struct mki_model *md, const struct mki_plan_ctx *c,
                         const struct work *w, enum mki_op op, int budget)
{
    struct work coll = *w;
    coll.flops = 0;
    struct cand best;
    search(md, c, &coll, op, NULL, budget, &best);
    double t = gemm_us(md, c, w, budget);
    if (w->intra > 0 || w->inter > 0)
        t += (best.ok ? best.t.fused : INFINITY) + (w->flops > 0 ? md->launch_us : 0);
    return t;
}

static void decide(const struct mki_model *md, const struct work *w,
                   const struct mki_split_ovr *o, struct mki_op_plan *p)
{
    if (w->intra == 0 && w->inter == 0) {
        p->fused = 0;
        snprintf(p->reason, sizeof(p->reason), "nothing to communicate (one "
                 "rank): %s", w->flops > 0 ? "runs the GEMM alone" : "a copy");
    } else if (w->flops <= 0) {
        p->fused = 1;
        snprintf(p->reason, sizeof(p->reason), "a collective: one kernel, "
                 "nothing to fuse");
    } else if (p->t_fused_us <= p->t_unfused_us * (1 - md->fuse_margin)) {
        p->fused = 1;
        snprintf(p->reason, sizeof(p->reason), "fused %.0f us beats unfused "
                 "%.0f us by %.0f%%", p->t_fused_us, p->t_unfused_us,
                 100 * (1 - p->t_fused_us / p->t_unfused_us));
    } else {
        p->fused = 0;
        snprintf(p->reason, sizeof(p->reason), "unfused: fused %.0f us would "
                 "gain %.1f%% over %.0f us, under the %.0f%% margin",
                 p->t_fused_us, 100 * (1 - p->t_fused_us / p->t_unfused_us),
                 p->t_unfused_us, 100 * md->fuse_margin);
    }
    if (o && (o->set & MKI_OVR_FUSED)) {
        p->fused = o->fused;
        size_t l = strlen(p->reason);
        snprintf(p->reason + l, sizeof(p->reason) - l, "; MK_SM_SPLIT sets "
                 "fused=%d", o->fused);
    }
}

/* A user split must fit the rank's SMs. */
static mkResult_t check_ovr(const struct mki_split_ovr *o, enum mki_op op,
                            int budget)
{
    if (!o) return mkSuccess;
    const struct mki_split *s = &o->split;
    int given = s->intra + s->inter_send + s->inter_reduce +
                (op_has_gemm(op) ? s->compute : 0);
    if (given > budget)
        return mki_error(NULL, mkErrInvalidArgument, "MK_SM_SPLIT asks for %d "
                         "CTAs for %s but this rank may use %d SMs (the GPU's "
                         "SMs, or MK_SM_BUDGET / ranks sharing the GPU); "
                         "lower the counts", given, mki_op_name(op), budget);
    if (op_has_gemm(op) && (o->set & MKI_OVR_COMPUTE) && s->compute < 1)
        return mki_error(NULL, mkErrInvalidArgument, "MK_SM_SPLIT sets "
                         "compute=0 for %s, which has a GEMM to run; give at "
                         "least 1", mki_op_name(op));
    return mkSuccess;
}

static mkResult_t check_shape(enum mki_op op, int64_t m, int64_t n, int64_t k,
                              int e)
{
    if ((unsigned)op >= MKI_OP_COUNT)
        return mki_error(NULL, mkErrInvalidArgument, "plan: op %d is not an "
                         "operation", (int)op);
    if (m < 1 || n < 1 || (op_has_gemm(op) && k < 1))
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: m = %lld, n = "
                         "%lld, k = %lld; sizes must be >= 1", op_names[op],
                         (long long)m, (long long)n, (long long)k);
    if (m > (1ll << 40) || n > (1ll << 40) || k > (1ll << 40))
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: a size above "
                         "2^40 elements", op_names[op]);
    if (e != 2 && e != 4)
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: dtype_bytes = "
                         "%d; give 2 (bf16, fp16) or 4 (fp32)", op_names[op], e);
    return mkSuccess;
}

mkResult_t mki_plan_model(const struct mki_model *md,
                          const struct mki_plan_ctx *c,
                          const struct mki_split_ovr *o, enum mki_op op,
                          int64_t m, int64_t n, int64_t k, int e,
                          struct mki_op_plan *out)
{
    MKI_CHECK(check_shape(op, m, n, k, e));
    int budget = c->sm_budget > 0 ? c->sm_budget : c->sm_count;
    MKI_CHECK(check_ovr(o, op, budget));
    struct work w;
    work_of(md, c, op, m, n, k, e, &w);
    struct mki_op_plan p;
    memset(&p, 0, sizeof(p));
    p.op = op, p.m = m, p.n = n, p.k = k, p.dtype_bytes = e;
    p.flops = w.flops, p.intra_bytes = w.intra, p.inter_bytes = w.inter;
    p.overridden = o ? o->set : 0;
    struct cand best;
    search(md, c, &w, op, o, budget, &best);
    if (!best.ok)
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: no split fits "
                         "%d SMs (MK_SM_SPLIT or MK_SM_BUDGET leave no CTA "
                         "for a needed role)", op_names[op], budget);
    p.split = best.s, p.mover = best.mv, p.sm_budget = budget;
    p.ctas = best.s.compute + comm_ctas(&best.s);
    p.t_compute_us = best.t.c, p.t_intra_us = best.t.i, p.t_inter_us = best.t.x;
    p.t_fused_us = best.t.fused;
    p.t_unfused_us = unfused_us(md, c, &w, op, budget);
    chunking(md, c, &w, o, &p);
    decide(md, &w, o, &p);
    *out = p;
    return mkSuccess;
}

/* ---- per communicator ------------------------------------------------ */

#define PLAN_CACHE 32

struct mki_plan {
    struct mki_plan_ctx ctx;
    struct mki_split_ovr ovr[MKI_OP_COUNT];
    enum mki_transport *tr;    /* per rank (MKI_PATH_NET peers) */
    pthread_mutex_t lock;
    int ncache, next;
    struct mki_op_plan cache[PLAN_CACHE];
};

/* Which transports can run on this rank: socket always; the RDMA ones when
 * built and a device of their kind was found.  The network stage confirms
 * with the transport's init. */
unsigned mki_plan_usable_transports(const struct mki_host_topo *h, int gpu)
{
    unsigned mask = 1u << MKI_TR_SOCKET;
    for (int i = 0; i < h->nnics; i++) {
        if (gpu >= 0 && h->gpu[gpu].nnics > 0) {
            int mine = 0;
            for (int j = 0; j < h->gpu[gpu].nnics; j++)
                mine |= h->gpu[gpu].nic[j] == i;
            if (!mine) continue;
        }
        if (h->nic[i].kind == MKI_NIC_EFA && HAVE_EFA) mask |= 1u << MKI_TR_EFA;
        if (h->nic[i].kind == MKI_NIC_IB && HAVE_VERBS) mask |= 1u << MKI_TR_IBVERBS;
    }
    return mask;
}

/* Every rank derives the same communicator-wide facts from the same
 * allgathered records, so that all ranks plan alike (chunk sizes and CTA
 * counts must match across ranks) and all fail alike (an error on one
 * rank only would leave the others waiting in the next collective). */

static mkResult_t same_config(struct mkComm *comm)
{
    const struct mki_topo *t = comm->topo;
    for (int r = 0; r < comm->nranks; r++)
        if (t->facts[r].cfg_hash != t->facts[0].cfg_hash)
            return mki_error(comm, mkErrInvalidUsage, "rank %d and rank 0 "
                             "have different MK_TRANSPORT or MK_SM_SPLIT (or "
                             "config->transports / smSplit); give every rank "
                             "the same values", r);
    return mkSuccess;
}

/* The first transport of the list that both masks allow, or -1. */
static int first_common(const enum mki_transport *order, int n, unsigned both)
{
    for (int i = 0; i < n; i++)
        if (both & (1u << order[i])) return (int)order[i];
    return -1;
}

/* Some pair of ranks on different nodes with masks a and b exists when
 * the two masks together occur on two different nodes. */
static mkResult_t check_pairs(struct mkComm *comm, const enum mki_transport *order,
                              int n)
{
    const struct mki_topo *t = comm->topo;
    /* Per transport mask: the first two nodes that have it, and a rank on
     * each (to name a pair that cannot talk). */
    int node[8][2], rank[8][2];
    for (int m = 0; m < 8; m++)
        node[m][0] = node[m][1] = rank[m][0] = rank[m][1] = -1;
    for (int r = 0; r < comm->nranks; r++) {
        unsigned m = t->facts[r].transports & 7u;
        if (node[m][0] < 0) node[m][0] = t->node_of[r], rank[m][0] = r;
        else if (node[m][1] < 0 && t->node_of[r] != node[m][0])
            node[m][1] = t->node_of[r], rank[m][1] = r;
    }
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            if (node[a][0] < 0 || node[b][0] < 0) continue;
            int apart = node[a][1] >= 0 || node[b][1] >= 0 ||
                        node[a][0] != node[b][0];
            if (!apart || first_common(order, n, (unsigned)(a & b)) >= 0) continue;
            int ra = rank[a][0], rb = rank[b][0];
            if (a == b) rb = rank[a][1];
            else if (node[a][0] == node[b][0])
                rb = node[b][1] >= 0 ? rank[b][1] : rb, ra = node[b][1] >= 0 ? ra : rank[a][1];
            return mki_error(comm, mkErrTransport, "no transport of the "
                             "list \"%s\" (MK_TRANSPORT or config->transports) "
                             "works between rank %d and rank %d, on different "
                             "nodes (ibverbs needs an InfiniBand/RoCE device, "
                             "efa an EFA device, on both); add socket to the "
                             "list", comm->cfg.transports, ra, rb);
        }
    return mkSuccess;
}

static mkResult_t pick_transports(struct mkComm *comm, struct mki_plan *pl)
{
    const struct mki_topo *t = comm->topo;
    enum mki_transport order[MKI_TR_COUNT];
    int n;
    MKI_CHECK(mki_transport_list(comm->cfg.transports, "MK_TRANSPORT", order, &n));
    MKI_CHECK(check_pairs(comm, order, n));
    unsigned mine = t->facts[comm->rank].transports;
    for (int r = 0; r < comm->nranks; r++) {
        int tr = first_common(order, n, mine & t->facts[r].transports);
        pl->tr[r] = t->path[r] == MKI_PATH_NET && tr >= 0
                        ? (enum mki_transport)tr : MKI_TR_SOCKET;
    }
    /* What the model assumes: the slowest rank's inter-node rate. */
    pl->ctx.nics = 1 << 30;
    pl->ctx.nic_gbs = INFINITY;
    for (int r = 0; r < comm->nranks; r++) {
        const struct mki_rank_facts *f = &t->facts[r];
        int tr = first_common(order, n, f->transports);
        int rdma = tr == MKI_TR_IBVERBS || tr == MKI_TR_EFA;
        if (!rdma || f->nnics == 0) pl->ctx.nics = 0;
        else if (f->nnics < pl->ctx.nics) pl->ctx.nics = f->nnics;
        if (rdma && f->nic_gbs < pl->ctx.nic_gbs) pl->ctx.nic_gbs = f->nic_gbs;
    }
    if (pl->ctx.nics == 0 || pl->ctx.nic_gbs == INFINITY)
        pl->ctx.nics = 0, pl->ctx.nic_gbs = 0;
    return mkSuccess;
}

/* Bandwidth rank of a path, to find the slowest one. */
static double path_gbs(const struct mki_model *md, enum mki_path p, int links)
{
    switch (p) {
    case MKI_PATH_NVLINK:
        return links > 0 ? links * md->nvlink_link_gbs
                         : md->nvlink_ref_links * md->nvlink_link_gbs;
    case MKI_PATH_PCIE: return md->pcie_gbs;
    case MKI_PATH_HOST: return md->host_gbs;
    case MKI_PATH_SAME_GPU: return md->same_gpu_gbs;
    default: return INFINITY;
    }
}

static int sms_of(const struct mki_rank_facts *f)
{
    return f->has_gpu && f->gpu.sm_count > 0 ? f->gpu.sm_count
                                             : mki_model_default.sm_count;
}

/* The budget every rank plans with: the least any rank may use.  A budget
 * that lets the ranks of one GPU overfill it is refused on every rank. */
static mkResult_t global_budget(struct mkComm *comm, struct mki_plan_ctx *c)
{
    const struct mki_topo *t = comm->topo;
    c->sm_count = c->sm_budget = 1 << 30;
    for (int r = 0; r < comm->nranks; r++) {
        const struct mki_rank_facts *f = &t->facts[r];
        int sms = sms_of(f), share = t->sharers[r] > 0 ? t->sharers[r] : 1;
        int b = f->sm_budget;
        if (b > sms)
            return mki_error(comm, mkErrInvalidArgument, "rank %d: smBudget "
                             "(MK_SM_BUDGET) = %d but its GPU has %d SMs; give "
                             "at most %d", r, b, sms, sms);
        if (b > 0 && b * share > sms)
            return mki_error(comm, mkErrInvalidArgument, "rank %d: smBudget "
                             "(MK_SM_BUDGET) = %d with %d ranks on its GPU of %d "
                             "SMs: their persistent grids cannot all be "
                             "resident; give at most %d", r, b, share, sms,
                             sms / share);
        int eff = b > 0 ? b : sms / share;
        if (eff < c->sm_budget) c->sm_budget = eff;
        if (sms < c->sm_count) c->sm_count = sms;
    }
    if (t->gpu_sharers > 1 && comm->cfg.smBudget == 0)
        MKI_INFO(MKI_SUB_PLAN, "%d ranks share this GPU: plans use %d of its "
                 "%d SMs (set MK_SM_BUDGET to choose)", t->gpu_sharers,
                 c->sm_budget, c->sm_count);
    return mkSuccess;
}

/* The slowest path between two ranks of one node, over every node, and
 * the largest node: members listed node by node (a counting sort), then
 * pairs inside each node, O(ranks x ranks per node). */
static mkResult_t slowest_path(struct mkComm *comm, struct mki_plan_ctx *c)
{
    const struct mki_topo *t = comm->topo;
    int n = comm->nranks, nn = comm->nnodes;
    int *start = calloc((size_t)nn + 1, sizeof(int));
    int *member = malloc(sizeof(int) * (size_t)n);
    if (!start || !member) {
        free(start), free(member);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    for (int r = 0; r < n; r++) start[t->node_of[r] + 1]++;
    for (int i = 0; i < nn; i++) start[i + 1] += start[i];
    for (int r = 0, *fill = start; r < n; r++) member[fill[t->node_of[r]]++] = r;
    /* fill advanced each start[i] to the end of node i: shift back. */
    for (int i = nn; i > 0; i--) start[i] = start[i - 1];
    start[0] = 0;
    double slow = INFINITY;
    c->intra_path = MKI_PATH_SELF, c->nvlinks = 0, c->local_size = 1;
    for (int i = 0; i < nn; i++) {
        int a = start[i], b = start[i + 1];
        if (b - a > c->local_size) c->local_size = b - a;
        for (int x = a; x < b; x++)
            for (int y = x + 1; y < b; y++) {
                int nv;
                enum mki_path p = mki_topo_path(t, member[x], member[y], &nv);
                double g = path_gbs(&mki_model_default, p, nv);
                if (g < slow) slow = g, c->intra_path = p, c->nvlinks = nv;
            }
    }
    free(start), free(member);
    return mkSuccess;
}

mkResult_t mki_plan_setup(struct mkComm *comm)
{
    struct mki_plan *pl = calloc(1, sizeof(*pl));
    if (pl) pl->tr = calloc((size_t)comm->nranks, sizeof(*pl->tr));
    if (!pl || !pl->tr) {
        if (pl) free(pl);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    pthread_mutex_init(&pl->lock, NULL);
    comm->plan = pl;
    struct mki_plan_ctx *c = &pl->ctx;
    c->nranks = comm->nranks, c->nnodes = comm->nnodes;
    c->workspace = mki_ws_bytes(comm);
    mkResult_t res;
    MKI_CHECK_GOTO(same_config(comm), res, fail);
    MKI_CHECK_GOTO(pick_transports(comm, pl), res, fail);
    MKI_CHECK_GOTO(global_budget(comm, c), res, fail);
    MKI_CHECK_GOTO(slowest_path(comm, c), res, fail);
    res = mki_split_parse(comm->cfg.smSplit, "MK_SM_SPLIT", pl->ovr);
    for (int op = 0; res == mkSuccess && op < MKI_OP_COUNT; op++)
        res = check_ovr(&pl->ovr[op], (enum mki_op)op, c->sm_budget);
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        goto fail;
    }
    MKI_INFO(MKI_SUB_PLAN, "plan: %d of %d SMs, %d ranks per node at most, "
             "slowest intra path %s, %d NIC(s) per rank, %d node(s)",
             c->sm_budget, c->sm_count, c->local_size,
             mki_path_name(c->intra_path), c->nics, c->nnodes);
    return mkSuccess;
fail:
    mki_plan_free(comm);
    return res;
}

void mki_plan_free(struct mkComm *comm)
{
    struct mki_plan *pl = comm->plan;
    if (!pl) return;
    pthread_mutex_destroy(&pl->lock);
    free(pl->tr);
    free(pl);
    comm->plan = NULL;
}

static int cache_find(struct mki_plan *pl, enum mki_op op, int64_t m, int64_t n,
                      int64_t k, int e, struct mki_op_plan *out)
{
    for (int i = 0; i < pl->ncache; i++) {
        const struct mki_op_plan *p = &pl->cache[i];
        if (p->op == op && p->m == m && p->n == n && p->k == k &&
            p->dtype_bytes == e) {
            *out = *p;
            return 1;
        }
    }
    return 0;
}

mkResult_t mki_plan_op(struct mkComm *comm, enum mki_op op, int64_t m,
                       int64_t n, int64_t k, int dtype_bytes,
                       struct mki_op_plan *out)
{
    struct mki_plan *pl = comm->plan;
    if (!pl)
        return mki_error(comm, mkErrInternal, "plan asked before the "
                         "communicator's plan was set up");
    if (!op_has_gemm(op)) k = 1;
    pthread_mutex_lock(&pl->lock);
    int hit = cache_find(pl, op, m, n, k, dtype_bytes, out);
    pthread_mutex_unlock(&pl->lock);
    if (hit) return mkSuccess;
    struct mki_op_plan p;
    mkResult_t r = mki_plan_model(&mki_model_default, &pl->ctx,
                                  (unsigned)op < MKI_OP_COUNT ? &pl->ovr[op] : NULL,
                                  op, m, n, k, dtype_bytes, &p);
    if (r != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        return r;
    }
    pthread_mutex_lock(&pl->lock);
    pl->cache[pl->next] = p;
    pl->next = (pl->next + 1) % PLAN_CACHE;
    if (pl->ncache < PLAN_CACHE) pl->ncache++;
    pthread_mutex_unlock(&pl->lock);
    MKI_INFO(MKI_SUB_PLAN, "%s %lldx%lldx%lld: %d+%d+%d+%d CTAs, %s, %s",
             mki_op_name(op), (long long)m, (long long)n, (long long)k,
             p.split.compute, p.split.intra, p.split.inter_send,
             p.split.inter_reduce, mki_mover_name(p.mover), p.reason);
    *out = p;
    return mkSuccess;
}

/* ---- the plain collectives (measured rules) ------------------------ */

/* Bytes of a peer block per CTA below the wide regime: small calls are
 * latency-bound, so more CTAs pay even at 16 KB each (1 MB per rank,
 * 16 -> 32 CTAs: reduce-scatter 21.3 -> 19.6 us; bench/NOTES.md). */
#define COLL_BYTES_PER_CTA (16u << 10)
#define COLL_NARROW_MAXCH 32
/* From this many bytes per peer block, on one node, a collective takes
 * every CTA it may (MKI_MAXCH = 64): a CTA moves about 8 GB/s through the
 * workspace, so the bandwidth grows with the count up to 64 (4 H200, 1 GB
 * per rank: all-gather 193 / 222 / 258 / 265 / 292 GB/s at 16 / 24 / 32 /
 * 48 / 64 CTAs; 2 H200: all-reduce 299 -> 342 GB/s). */
#define COLL_WIDE_MIN (4u << 20)
/* One-phase all-reduce from 1 MiB (2 H200, 1 MB: 18.7-18.8 us on 64 CTAs
 * against 18.9-19.1 on 32, three runs each). */
#define COLL_WIDE_MIN_ONESHOT (1u << 20)

int mki_plan_coll_ctas(uint64_t block, int oneshot, int nnodes, int budget)
{
    if (budget < 1) budget = 1;
    /* across nodes at most 32: the proxy's chunks were measured so */
    if (nnodes == 1 && block >= (oneshot ? COLL_WIDE_MIN_ONESHOT : COLL_WIDE_MIN))
        return budget;
    int cap = budget < COLL_NARROW_MAXCH ? budget : COLL_NARROW_MAXCH;
    uint64_t n = (block + COLL_BYTES_PER_CTA - 1) / COLL_BYTES_PER_CTA;
    if (n < 1) n = 1;
    return n < (uint64_t)cap ? (int)n : cap;
}

/* One-phase all-reduce up to limit bytes at 2 ranks (MK_COLL_AR_ONESHOT),
 * limit x 2 / n at n ranks: it sends (n - 1) x S where two phases send
 * 2 (n - 1) / n x S, n / 2 times the bytes (8 H200, 4 MB: 194 us one phase
 * against 111 us in two; 1 MB: 104 against 97; 256 KB: 62 against 93). */
int mki_plan_coll_oneshot(uint64_t bytes, uint64_t limit, int nranks)
{
    if (limit == 0 || nranks < 2) return 0;
    if (nranks > 2) limit = limit / (uint64_t)nranks * 2;
    return bytes <= limit;
}

/* Register stores for zero copy (4 H200, 1 GB per rank: 312 GB/s against
 * 281 with TMA; 2 H200, 16 CTAs: 311 against 259) and below COLL_WIDE_MIN
 * per block (a chunk's bulk copies end with a wait for their completion
 * that register stores and a fence do not pay: 2 H200, 1 MB per rank,
 * all-reduce 20.3 -> 19.0 us, all-to-all 19.9 -> 17.9 us); TMA bulk copies
 * to the peers otherwise (256 MB, 64 CTAs: 333 against 317 GB/s). */
enum mki_coll_pick_mover mki_plan_coll_mover(uint64_t block, int zero_copy)
{
    return zero_copy || block < COLL_WIDE_MIN ? MKI_COLL_PICK_REG
                                              : MKI_COLL_PICK_TMA_SEND;
}

enum mki_path mki_plan_path(const struct mkComm *comm, int peer)
{
    return comm->topo ? comm->topo->path[peer] : MKI_PATH_NET;
}

enum mki_transport mki_plan_transport(const struct mkComm *comm, int peer)
{
    return comm->plan ? comm->plan->tr[peer] : MKI_TR_SOCKET;
}

const struct mki_plan_ctx *mki_plan_context(const struct mkComm *comm)
{
    return comm->plan ? &comm->plan->ctx : NULL;
}
