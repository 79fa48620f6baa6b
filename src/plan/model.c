/*
 * model.c - the plan's cost model: per (operation, shape), the split of
 * the persistent grid among roles, the mover and the chunk, and whether
 * fusion beats the unfused sequence.
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
 * model's margin.  Every figure is in mki_model_default (model_table.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "mki.h"
#include "ops/attn.h"
#include "ops/gemm_rs.h"
#include "ops/moe.h"
#include "plan/plan.h"

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
    [MKI_OP_MOE_DISPATCH] = MV(MKI_MOVER_REG),
    [MKI_OP_MOE_COMBINE] = MV(MKI_MOVER_REG),
    [MKI_OP_MOE_DISPATCH_GEMM] = MV(MKI_MOVER_REG),
    [MKI_OP_RING_ATTN] = MV(MKI_MOVER_CE),
    [MKI_OP_MOE_LAYER] = MV(MKI_MOVER_REG),
};

unsigned mki_plan_movers(enum mki_op op)
{
    return (unsigned)op < MKI_OP_COUNT ? op_movers[op] : 0;
}

int mki_op_has_gemm(enum mki_op op)
{
    return op == MKI_OP_AG_GEMM || op == MKI_OP_GEMM_RS || op == MKI_OP_GEMM_AR;
}
#define op_has_gemm mki_op_has_gemm
static int op_reduces(enum mki_op op)
{
    return op == MKI_OP_REDUCESCATTER || op == MKI_OP_ALLREDUCE ||
           op == MKI_OP_GEMM_RS || op == MKI_OP_GEMM_AR;
}


/* ---- the model ------------------------------------------------------ */

struct work {
    double flops;
    int64_t gm, gn, gk;       /* the GEMM of one rank */
    int64_t intra, inter;     /* bytes per rank */
    int reduce;
    int epi;                  /* moved by the compute CTAs' epilogues */
    int ar, es;               /* GEMM+AR; bytes of an element of C */
    int64_t row_bytes, shard_rows;
    int plain;                /* a plain collective (coll.cu's slot pipeline) */
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

/* One all-gather, reduce-scatter or all-reduce of `total` bytes (count
 * elements of e bytes as mki_plan_coll_hier counts them).  Across nodes in
 * one flat kernel (below MK_COLL_HIER_MIN, or an op without the stepped
 * path) each rank sends its blocks to every rank: L times the stepped
 * path's bytes across the network and 1/N of them inside the node. */
static void coll_op_bytes(const struct mki_plan_ctx *c, enum mki_op op, double total,
                          uint64_t count, int e, double *intra, double *inter)
{
    double a = 0, r = 0;
    coll_bytes(c, total, 0, &a, &r);
    if (c->nnodes > 1 && !mki_plan_coll_hier(op, count, e, c->nranks, c->nnodes,
                                             c->local_size, c->hier_min)) {
        r *= c->local_size;
        a /= c->nnodes;
    }
    *intra += a;
    *inter += r;
}

static void work_of(const struct mki_model *md, const struct mki_plan_ctx *c,
                    enum mki_op op, int64_t m, int64_t n, int64_t k, int e,
                    struct work *w)
{
    double intra = 0, inter = 0, pb = md->partial_bytes;
    double mn = (double)m * (double)n;
    memset(w, 0, sizeof(*w));
    w->reduce = op_reduces(op);
    w->plain = op == MKI_OP_ALLGATHER || op == MKI_OP_REDUCESCATTER || op == MKI_OP_ALLREDUCE ||
               op == MKI_OP_ALLTOALL;
    w->shard_rows = cdiv(m, c->nranks);
    w->row_bytes = n * e;
    switch (op) {
    case MKI_OP_ALLGATHER:
    case MKI_OP_REDUCESCATTER:
    case MKI_OP_ALLREDUCE:
        coll_op_bytes(c, op, (op == MKI_OP_ALLREDUCE ? 2 : 1) * mn * e,
                      op == MKI_OP_ALLREDUCE ? (uint64_t)(m * n)
                                             : (uint64_t)(m * n) / (uint64_t)c->nranks,
                      e, &intra, &inter);
        break;
    case MKI_OP_ALLTOALL: coll_bytes(c, mn * e, 1, &intra, &inter); break;
    case MKI_OP_MOE_DISPATCH:
    case MKI_OP_MOE_DISPATCH_GEMM:
    case MKI_OP_MOE_LAYER:
    case MKI_OP_MOE_COMBINE: {
        /* k: top-k.  Dispatch: a token once to each rank of its experts,
         * k experts picked uniformly: L (1 - (1 - 1/L)^k) ranks, the share
         * (L - 1) / L of them peers; combine: k rows back per token; the
         * layer both. */
        double L = c->local_size, miss = 1;
        for (int64_t i = 0; i < k && L > 1; i++) miss *= 1 - 1 / L;
        const double to = op == MKI_OP_MOE_COMBINE ? 0 : L * (1 - miss);
        const double back = op == MKI_OP_MOE_COMBINE || op == MKI_OP_MOE_LAYER ? (double)k : 0;
        const double peers = L > 1 ? (to + back) * (L - 1) / L : 0;
        intra = mn * e * peers;
        if (c->nnodes > 1) {
            /* across nodes (kernels/ops/moe.h): every rank's tokens
             * all-gathered; the combine reduce-scatters fp32 sums of every
             * rank's tokens (the routing's words left out) */
            const double P = c->nranks;
            intra = 0;
            if (op != MKI_OP_MOE_COMBINE)
                coll_op_bytes(c, MKI_OP_ALLGATHER, P * mn * e, (uint64_t)(m * n), e, &intra,
                              &inter);
            if (op == MKI_OP_MOE_COMBINE || op == MKI_OP_MOE_LAYER)
                coll_op_bytes(c, MKI_OP_REDUCESCATTER, P * mn * 4, (uint64_t)(m * n), 4, &intra,
                              &inter);
        }
        break;
    }
    case MKI_OP_AG_GEMM:
        coll_bytes(c, (double)m * (double)k * e, 0, &intra, &inter);
        /* Across nodes the fused kernel sends each rank's rows to every
         * rank of the other nodes, L times the stepped all-gather's bytes
         * (unfused_us takes the all-gather's own volume). */
        inter *= c->local_size;
        w->gm = m, w->gn = n, w->gk = k;
        w->row_bytes = k * e;
        break;
    case MKI_OP_GEMM_RS:
    case MKI_OP_GEMM_AR:
        /* mkGemmReduceScatter's fused kernel (mkGemmAllReduce's too)
         * moves tiles with warps of the compute CTAs and adds arrivals in
         * the epilogue of its own tiles: no INTRA CTA, every SM computes. */
        w->epi = 1;
        w->ar = op == MKI_OP_GEMM_AR;
        w->es = e;
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

static double us_of(int64_t bytes, double gbs);

/* Output tiles of one rank's GEMM, and one tile's time on one SM (s). */
static int64_t tiles_of(const struct mki_model *md, const struct work *w)
{
    return cdiv(w->gm, md->tile_m) * cdiv(w->gn, md->tile_n);
}

static double tile_s(const struct mki_model *md, const struct mki_plan_ctx *c,
                     const struct work *w)
{
    const double sm_flops = md->gemm_tflops * 1e12 / c->sm_count;
    return 2.0 * md->tile_m * md->tile_n * (double)w->gk / sm_flops;
}

/* mkGemmReduceScatter's / mkGemmAllReduce's kernel on one node with whole
 * tiles (no K-slices): every CTA runs whole waves of tiles (the last one
 * too: ceil), each with the GEMM's time and its epilogue's extra (a peer
 * tile's fp32 store into the outbox, P - 1 in P of them; an own tile's
 * combine of P - 1 sources, 1 in P), then the last tiles' wait: what
 * of one tile's copy at the CTA's share of the link (the own tiles'
 * sources come through it) outlasts the last mainloop, beside which it
 * runs; for the all-reduce also the last reduced tile's
 * broadcast and the copy of the peers' rows from the inbox into C.
 * Negative where K-slices apply, the tiles fill one wave, or the peers
 * are not joined by NVLink (the plain model then).  Calibrated on 2 x
 * H100 (NVLink) at 8 shapes of 2-32 waves (tools/model_check.py, NOTES
 * "Fourteenth session"; the tail since the early hand-over, "Sixteenth
 * session": 10 records, median error 1.7%, max 11%). */
static int epi_modeled(const struct mki_model *md, const struct mki_plan_ctx *c,
                       const struct work *w, int n_c)
{
    const int P = c->nranks;
    if (P < 2 || c->nnodes > 1 || n_c <= 0 || P > MKI_MAXLOCAL ||
        c->intra_path != MKI_PATH_NVLINK)
        return 0;
    int64_t rows[MKI_MAXLOCAL];
    for (int r = 0; r < P; r++) rows[r] = mki_grs_rows(w->gm, P, r, w->ar);
    if (mki_grs_call_slices(rows, P, w->gn, w->gk, n_c) > 1) return 0;
    /* one wave: not calibrated (M = 128: the plain model) */
    return tiles_of(md, w) > n_c;
}

static double epi_us(const struct mki_model *md, const struct mki_plan_ctx *c,
                     const struct work *w, int n_c, double link_gbs)
{
    if (!epi_modeled(md, c, w, n_c)) return -1;
    const int P = c->nranks;
    const double waves = (double)cdiv(tiles_of(md, w), n_c);
    const double t_tile = tile_s(md, c, w) * 1e6;
    const double extra = (P - 1.0) / P * (md->epi_peer_us + md->epi_own_us);
    const double share = link_gbs / n_c; /* GB/s of one CTA */
    /* the last peer tile's copy runs beside the CTA's last mainloop (the
     * outbox tile is handed over a few k-blocks into it): only what
     * outlasts that mainloop waits */
    double tail = us_of((int64_t)md->tile_m * md->tile_n * md->partial_bytes, share) -
                  t_tile * md->gemm_interference;
    if (tail < 0) tail = 0;
    double t = waves * (t_tile * md->gemm_interference + extra) + tail;
    if (w->ar)
        t += us_of((int64_t)md->tile_m * md->tile_n * w->es, share) +
             us_of((int64_t)((double)w->gm * (double)w->gn * w->es * (P - 1) / P),
                   md->same_gpu_gbs);
    return t;
}

static double gemm_us(const struct mki_model *md, const struct mki_plan_ctx *c,
                      const struct work *w, int n_c)
{
    if (w->flops <= 0) return 0;
    if (n_c <= 0) return INFINITY;
    double tiles = (double)tiles_of(md, w);
    double waves = tiles / n_c < 1 ? 1 : tiles / n_c;
    return waves * tile_s(md, c, w) * 1e6;
}

/* Rates of one mover on the node's slowest path, GB/s. */
static void mover_rates(const struct mki_model *md, const struct mki_plan_ctx *c,
                        enum mki_mover mv, int plain, double *per_cta, double *sat)
{
    double scale = 1.0;
    *per_cta = mv == MKI_MOVER_TMA ? md->tma_cta_gbs
             : mv == MKI_MOVER_REG ? md->reg_cta_gbs : INFINITY;
    *sat = mv == MKI_MOVER_CE ? md->ce_gbs
         : plain ? md->coll_sat_gbs
         : mv == MKI_MOVER_TMA ? md->tma_sat_gbs : md->reg_sat_gbs;
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
                        enum mki_mover mv, int n_i, int reduce, int epi, int plain)
{
    double per_cta, sat;
    mover_rates(md, c, mv, plain, &per_cta, &sat);
    /* every peer of the node through the same links (NVLink or NVSwitch) */
    if (c->intra_path == MKI_PATH_NVLINK && c->local_size > 2)
        sat *= 1 - md->link_share_loss * (1 - 2.0 / c->local_size);
    /* Stores from every compute CTA's epilogue: the link's rate. */
    if (epi) return sat;
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
    const double ibw = w->intra > 0 ? intra_gbs(md, c, mv, s->intra, w->reduce, w->epi, w->plain)
                                    : 0;
    const double epi = w->epi && comm ? epi_us(md, c, w, s->compute, ibw) : -1;
    t->c = epi >= 0 ? epi : gemm_us(md, c, w, s->compute) * (comm ? md->gemm_interference : 1);
    t->i = w->intra > 0 ? us_of(w->intra, ibw) : 0;
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
    if (w->flops > 0 && tiles_of(md, w) <= s->compute) fill = dmin(t->c, t->comm);
    /* a plain collective's first chunk per CTA: sent, then taken out of
     * the slot, nothing beside it (on one node) */
    if (w->plain && w->intra > 0 && s->intra > 0 && mv != MKI_MOVER_CE)
        fill = us_of((int64_t)dmin((double)w->intra / s->intra, (double)md->coll_chunk_bytes),
                     md->coll_chunk_gbs);
    if (epi >= 0) {
        /* epi_us has the last tiles' wait; the movers reach part of the
         * link's rate beside the GEMM, and where the link is the bound (3
         * or more ranks: each rank's partials for P - 1 peers) the first
         * tile has nothing to send yet */
        fill = 0;
        t->comm /= md->epi_link_eff;
        if (t->comm > t->c) fill = tile_s(md, c, w) * 1e6;
    }
    t->fused = dmax(t->c, t->comm) + fill +
               (comm ? (w->epi ? md->epi_overhead_us : md->fused_overhead_us) : 0) +
               (w->intra > 0 ? md->peer_latency_us * (c->local_size - 1) : 0);
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
    if (w->epi) lo = hi = 0; /* no INTRA CTA to size (an intra= override has no effect) */
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
            /* the plain collectives' kernel moves with its CTAs on one
             * node (the copy engine serves the fused kernels) */
            if (w->plain && mv == MKI_MOVER_CE && c->nnodes == 1) continue;
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
    coll.epi = 0; /* the unfused collective has its own CTAs */
    if (op == MKI_OP_AG_GEMM && c->nnodes > 1 && w->gk > 0) {
        /* mkAllGather: flat (w->inter), or stepped across the nodes */
        const int e = (int)(w->row_bytes / w->gk);
        const uint64_t count = (uint64_t)cdiv(w->gm, c->nranks) * (uint64_t)w->gk;
        if (mki_plan_coll_hier(MKI_OP_ALLGATHER, count, e, c->nranks, c->nnodes, c->local_size,
                               c->hier_min))
            coll.inter = w->inter / c->local_size;
    }
    struct cand best;
    search(md, c, &coll, op, NULL, budget, &best);
    double t = gemm_us(md, c, w, budget);
    const int comm = w->intra > 0 || w->inter > 0;
    if (w->epi && comm && epi_modeled(md, c, w, budget)) {
        /* GEMM+RS/AR where epi_us models the fused kernel: our GEMM into
         * fp32 (whole waves, each tile's store of fp32 like a peer
         * tile's), the collective of fp32, then one conversion kernel into
         * C (this rank's rows, or all of them) reading fp32 and writing C;
         * the same terms on both sides of the decision. */
        t = (double)cdiv(tiles_of(md, w), budget) * (tile_s(md, c, w) * 1e6 + md->epi_peer_us);
        const double conv = (double)w->gm * (double)w->gn * (md->partial_bytes + w->es) /
                            (w->ar ? 1 : c->nranks);
        t += us_of((int64_t)conv, md->same_gpu_gbs) + md->launch_us;
    } else if (op == MKI_OP_GEMM_RS && comm) {
        t += md->launch_us; /* GEMM+RS: fp32 partials, then one conversion kernel into C */
    }
    if (comm)
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

/* mkGemmReduceScatter / mkGemmAllReduce at decode-sized m on one node
 * (kernels/ops/gemm_dec.cu): every SM streams its columns of B (the
 * product is bound by reading B, n x k per rank, not by the MMA), then
 * each unit's fp32 partial goes to every rank that needs its rows in one
 * hop (the all-reduce: all m rows to every peer) and each rank sums what
 * it received: B at the read rate, the exchange at the link's rate (the
 * stores of every CTA at once), the sum (every partial of the rank's
 * rows read once, at the device's copy rate), the fixed cost of a fused
 * call.  Against 2 x H200 (tools/model_check.py, bench/NOTES.md,
 * fifteenth session): within 5-7% at m = 1 and 16, optimistic at 128.  The
 * unfused side gets the same floor for its GEMM (its compute time alone
 * is far below the read of B at these m).  False where it does not
 * apply (the engine's plan stands). */
static int decode_model(const struct mki_model *md, const struct mki_plan_ctx *c,
                        const struct work *w, enum mki_op op, int budget,
                        const struct mki_split_ovr *o, struct mki_op_plan *p)
{
    const int P = c->nranks;
    if ((op != MKI_OP_GEMM_RS && op != MKI_OP_GEMM_AR) || w->gm < 1 ||
        w->gm > MKI_GDEC_MAXM || P < 2 || P > MKI_MAXLOCAL || c->nnodes > 1)
        return 0;
    const double b_us = us_of((int64_t)((double)w->gn * (double)w->gk * w->es), md->hbm_read_gbs);
    const double mma_us = w->flops / (md->gemm_tflops * md->decode_mma_eff * 1e6);
    const double x = (double)w->gm * (double)w->gn * md->partial_bytes *
                     (w->ar ? (double)(P - 1) : (double)(P - 1) / P);
    const double link = intra_gbs(md, c, MKI_MOVER_REG, budget, 0, 1, 0);
    /* the receiver's sum reads every rank's partial of its rows once */
    const int64_t kr = w->gk, S = mki_gdec_slices(w->gn, kr, budget);
    const double rows = w->ar ? (double)w->gm : (double)cdiv(w->gm, P);
    const double sum_us = us_of((int64_t)(rows * (double)w->gn * md->partial_bytes * P * S),
                                md->same_gpu_gbs);
    p->t_compute_us = dmax(b_us, mma_us);
    p->t_intra_us = us_of((int64_t)x, link);
    p->t_inter_us = 0;
    p->t_fused_us = p->t_compute_us + p->t_intra_us + sum_us + md->fused_overhead_us;
    const double g = gemm_us(md, c, w, budget);
    if (b_us > g) p->t_unfused_us += b_us - g;
    memset(&p->split, 0, sizeof(p->split));
    p->split.compute = o && (o->set & MKI_OVR_COMPUTE) ? o->split.compute : budget;
    p->ctas = p->split.compute;
    p->mover = MKI_MOVER_REG;
    p->decode = 1;
    decide(md, w, o, p);
    return 1;
}

static mkResult_t check_shape(enum mki_op op, int64_t m, int64_t n, int64_t k,
                              int e)
{
    if ((unsigned)op >= MKI_OP_COUNT)
        return mki_error(NULL, mkErrInvalidArgument, "plan: op %d is not an "
                         "operation", (int)op);
    if (m < 1 || n < 1 || ((op_has_gemm(op) || op == MKI_OP_RING_ATTN) && k < 1))
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: m = %lld, n = "
                         "%lld, k = %lld; sizes must be >= 1", mki_op_name(op),
                         (long long)m, (long long)n, (long long)k);
    if (m > (1ll << 40) || n > (1ll << 40) || k > (1ll << 40))
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: a size above "
                         "2^40 elements", mki_op_name(op));
    if (e != 2 && e != 4)
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: dtype_bytes = "
                         "%d; give 2 (bf16, fp16) or 4 (fp32)", mki_op_name(op), e);
    if (op == MKI_OP_RING_ATTN && e != 2)
        return mki_error(NULL, mkErrUnsupported, "plan ring_attn: mkRingAttention "
                         "takes 2-byte elements (bf16, fp16)");
    return mkSuccess;
}

/* ---- mkRingAttention ------------------------------------------------- */

double mki_model_attn_rate(const struct mki_model *md, int head_dim, int mask, double keys)
{
    const int d = head_dim == 64 ? 0 : 1;
    if (!mask) return md->attn_tflops[d];
    return md->attn_tflops[d] * md->attn_causal[d] /
           (1.0 + md->attn_diag[d] / (keys > 1.0 ? keys : 1.0));
}

/* The plan of one batch element (plan.h's shapes: m = seq_local, n = heads
 * x head_dim, k = kv_heads x head_dim; head_dim and mask from
 * mki_plan_attn).  Compute: the busiest rank's FLOPs at the attention rate
 * of that head_dim and mask on the rank's SMs.  One node: every rank's k
 * and v go once to every peer on the copy engines while the kernel
 * computes its own segment and then each peer's as it lands; rows arrive
 * in order, so the copies keep ahead of the compute when all of them take
 * no longer than it (then only the last chunk's compute follows the last
 * copy).  Unfused (across nodes): all-gathers of k and v, then the core. */
static void ring_attn_model(const struct mki_model *md, const struct mki_plan_ctx *c,
                            const struct mki_split_ovr *o, int budget, struct mki_op_plan *p)
{
    const int P = c->nranks, L = c->local_size;
    const int64_t s = p->m, row = p->k * p->dtype_bytes, seg = 2 * s * row;
    /* the busiest rank's share of the unmasked FLOPs: plain causal, the
     * last rank (its own keys half, every earlier rank's whole) */
    const double share = p->mask == 0 ? 1.0
                       : p->mask == 2 || P == 1 ? 0.5 : (P - 0.5) / (double)P;
    const double rate = mki_model_attn_rate(md, p->head_dim, p->mask, (double)s * P);
    p->flops = 4.0 * (double)s * (double)s * P * (double)p->n * share;
    p->t_compute_us = p->flops / (rate * 1e6 * budget / c->sm_count);
    p->split.compute = p->ctas = p->sm_budget = budget;
    p->chunk_rows = mki_attn_chunk_rows(MKI_ATTN_BSHD, 1, 1, s, row, MKI_RATT_CE_CHUNK_MIN);
    p->chunk_bytes = (size_t)((p->chunk_rows < s ? p->chunk_rows : s) * row);
    /* unfused: k and v of every rank gathered (two calls), then the core */
    struct work g;
    memset(&g, 0, sizeof(g));
    double intra = 0, inter = 0;
    coll_bytes(c, (double)seg * P, 0, &intra, &inter);
    g.intra = (int64_t)intra, g.inter = (int64_t)inter;
    g.shard_rows = 2 * s, g.row_bytes = row;
    struct cand ag;
    search(md, c, &g, MKI_OP_ALLGATHER, NULL, budget, &ag);
    const int comm = g.intra > 0 || g.inter > 0;
    p->t_unfused_us = p->t_compute_us +
                      (comm ? (ag.ok ? ag.t.fused : INFINITY) + 2 * md->launch_us : 0);
    p->t_fused_us = p->t_unfused_us;
    p->intra_bytes = g.intra, p->inter_bytes = g.inter;
    if (comm && ag.ok) p->t_intra_us = ag.t.i, p->t_inter_us = ag.t.x;
    if (P == 1) {
        snprintf(p->reason, sizeof(p->reason), "one rank: the attention core alone, "
                 "nothing to communicate");
        return;
    }
    if (P > MKI_ATTN_MAXSEG) {
        snprintf(p->reason, sizeof(p->reason), "%d ranks: this version attends over at most "
                 "%d (mkErrUnsupported)", P, MKI_ATTN_MAXSEG);
        return;
    }
    if (c->nnodes > 1) {
        snprintf(p->reason, sizeof(p->reason), "ranks on several nodes: mkAllGather of k "
                 "and v (the proxy across nodes), then the core over every rank's keys");
        if (o && (o->set & MKI_OVR_FUSED) && o->fused)
            strncat(p->reason, "; MK_SM_SPLIT fused=1 has no effect across nodes",
                    sizeof(p->reason) - strlen(p->reason) - 1);
        return;
    }
    const int64_t ring_bytes = (int64_t)(L - 1) * seg;
    const double t_ring = us_of(ring_bytes, intra_gbs(md, c, MKI_MOVER_CE, 0, 0, 0, 0));
    const double t_chunk = p->t_compute_us / ((double)P * (double)mki_attn_nsc(s, p->chunk_rows));
    /* (the copies' interference with the core is not modelled: not measured) */
    p->t_fused_us = dmax(p->t_compute_us, t_ring + t_chunk) + md->fused_overhead_us +
                    md->peer_latency_us * (L - 1);
    if (o && (o->set & MKI_OVR_FUSED) && !o->fused) {
        snprintf(p->reason, sizeof(p->reason), "one node, but MK_SM_SPLIT sets fused=0: "
                 "mkAllGather of k and v, then the core over every rank's keys");
        return;
    }
    p->fused = 1;
    p->mover = MKI_MOVER_CE;
    p->intra_bytes = ring_bytes, p->inter_bytes = 0;
    p->t_intra_us = t_ring, p->t_inter_us = 0;
    snprintf(p->reason, sizeof(p->reason), "one node: the fused ring, k and v on the copy "
             "engines beside the kernel");
}

mkResult_t mki_plan_model(const struct mki_model *md,
                          const struct mki_plan_ctx *c,
                          const struct mki_split_ovr *o, enum mki_op op,
                          int64_t m, int64_t n, int64_t k, int e,
                          struct mki_op_plan *out)
{
    return mki_plan_model_attn(md, c, o, op, m, n, k, e, NULL, out);
}

mkResult_t mki_plan_model_attn(const struct mki_model *md,
                               const struct mki_plan_ctx *c,
                               const struct mki_split_ovr *o, enum mki_op op,
                               int64_t m, int64_t n, int64_t k, int e,
                               const struct mki_plan_attn *a, struct mki_op_plan *out)
{
    MKI_CHECK(check_shape(op, m, n, k, e));
    if (a && op != MKI_OP_RING_ATTN)
        return mki_error(NULL, mkErrInvalidArgument, "plan %s: a head_dim and mask are "
                         "for ring_attn only", mki_op_name(op));
    if (a && ((a->head_dim != 64 && a->head_dim != 128) || a->mask < 0 || a->mask > 2))
        return mki_error(NULL, mkErrInvalidArgument, "plan ring_attn: head_dim %d, mask %d; "
                         "give head_dim 64 or 128 and a mask of mkAttnMask_t (0-2)",
                         a->head_dim, a->mask);
    int budget = c->sm_budget > 0 ? c->sm_budget : c->sm_count;
    MKI_CHECK(mki_plan_check_ovr(o, op, budget));
    if (op == MKI_OP_RING_ATTN) {
        struct mki_op_plan p;
        memset(&p, 0, sizeof(p));
        p.op = op, p.m = m, p.n = n, p.k = k, p.dtype_bytes = e;
        p.head_dim = a ? a->head_dim : 128;
        p.mask = a ? a->mask : 0;
        p.overridden = o ? o->set : 0;
        ring_attn_model(md, c, o, budget, &p);
        *out = p;
        return mkSuccess;
    }
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
                         "for a needed role)", mki_op_name(op), budget);
    p.split = best.s, p.mover = best.mv, p.sm_budget = budget;
    p.ctas = best.s.compute + comm_ctas(&best.s);
    p.t_compute_us = best.t.c, p.t_intra_us = best.t.i, p.t_inter_us = best.t.x;
    p.t_fused_us = best.t.fused;
    p.t_unfused_us = unfused_us(md, c, &w, op, budget);
    chunking(md, c, &w, o, &p);
    decide(md, &w, o, &p);
    (void)decode_model(md, c, &w, op, budget, o, &p);
    /* GEMM + RS movers with two rows in flight where the link binds, 3+
     * ranks (not the all-reduce: -6% where its model misjudged the bound;
     * bench/NOTES.md "Seventeenth session") */
    if (op == MKI_OP_GEMM_RS && p.fused && !p.decode &&
        c->local_size >= 3 && p.t_intra_us / md->epi_link_eff > p.t_compute_us) {
        p.wide_movers = 1;
        p.t_fused_us += dmax(p.t_compute_us, p.t_intra_us / md->epi_link_eff_wide) -
                        dmax(p.t_compute_us, p.t_intra_us / md->epi_link_eff);
    }
    if (op == MKI_OP_MOE_DISPATCH || op == MKI_OP_MOE_COMBINE || op == MKI_OP_MOE_DISPATCH_GEMM ||
        op == MKI_OP_MOE_LAYER)
        mki_plan_moe(md, c, o, op, budget, &p);
    *out = p;
    return mkSuccess;
}

