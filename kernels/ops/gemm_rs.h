/*
 * gemm_rs.h - what src/ops/gemm_rs.c (host) and kernels/ops/gemm_rs.cu
 * (device) agree on for mkGemmReduceScatter.  C99 and CUDA C++; no CUDA
 * headers.
 *
 * Every rank of the node computes its partial product A_r op(B_r) for all
 * of D's rows, one persistent GEMM on every SM of its plan.  Rows belong
 * to their owner (rank d holds rows [off_d, off_d + m_d)); each owner's
 * rows are tiled on their own (M-block b of owner d starts at row
 * off_d + 128 b), so no tile straddles two owners.
 *
 *   a peer's tile      its fp32 partial goes, by a TMA store from the
 *                      epilogue, into this CTA's ring of MKI_GRS_RING
 *                      tiles in local memory (the outbox: HBM, not the
 *                      link, so the epilogue is short); once the CTA
 *                      begins its next tile's epilogue (the store has
 *                      completed) the tile is posted to the CTA's mover
 *                      warps (3 warps of the producer warpgroup, idle in
 *                      the mainloop), which copy it into the owner's slot
 *                      for this source (heap bank: a (P-1) x m_max x ld
 *                      fp32 array) over NVLink while the consumers run
 *                      the next mainloops, then raise the owner's flag of
 *                      the tile's group by one (fence, red.add at system
 *                      scope)
 *   an own tile        the epilogue waits for the flag of every source,
 *                      adds the sources' partials to its accumulators (in
 *                      rank order, after its own: fp32, one rounding;
 *                      loaded by TMA, 32 columns at a time, into its two
 *                      staging buffers), and stores C; the flags are
 *                      cleared by the consumer that waited
 *
 * Schedule (deadlock-free by construction): work units go in rounds; in
 * round k this rank computes unit k of each peer d = me + 1, me + 2, ...
 * (those that have a unit k), then unit k - R of its own rows.  Every
 * dependency (own unit k on the peers' unit k, computed in their round
 * k) points to an earlier (round, slot) key, and each CTA takes its units
 * in key order, so no cycle of waits exists.  R, about three waves of
 * units over the P slots of a round (a tile is posted once its CTA has
 * computed the next one, then copied), makes the partials arrive before
 * the owner wants them; NVLink traffic is spread over the whole GEMM.
 * The movers wait only for their own CTA's consumers, and a consumer
 * waits for its movers only to reuse an outbox tile posted MKI_GRS_RING
 * iterations before: no new cycle.
 *
 * mkGemmAllReduce (ar) runs the same kernel with C all of D on every
 * rank (owners' rows in whole 128-row blocks).  An own tile, once
 * reduced and stored in C, is posted to the movers as a peer tile is:
 * they copy it (rounded once: the same bits everywhere) from C into every
 * peer's inbox (heap: m x n of the dtype, each row where it is in D) and
 * raise that peer's agflag of the tile's group.  After its tiles, each CTA's consumers wait for
 * their share of the peers' tiles (units in the order the owners compute
 * them) and copy them from the inbox into C.  A rank releases a call
 * when it has read its bank and its inbox.
 *
 * Split-K (decode-sized M, mki_grs_slices): each tile is computed in S
 * K-slices, slice S - 1 first and slice 0 last, each a work unit of its
 * own.  With slices a CTA has about one unit, so a chain of copies by the
 * mover warps would be the call's latency: instead the epilogue stores
 * every slice straight into its slot (TMA; a peer's over NVLink, after
 * the gate; this rank's own into its own slab) and raises the owner's
 * flag once the store has completed.  The CTA that computed slice 0 of an
 * own tile then sums the tile (done hook, all 256 consumer threads): its
 * own slices in order, then every source's in rank and slice order (a
 * fixed order), rounded once into C and, for mkGemmAllReduce, into every
 * peer's inbox in the same pass.  Slice 0 comes after every slice it
 * waits for in the rounds, so the argument against cycles is unchanged.
 *
 * Call numbers live on the device (graph replay): e = calls + 1 read by
 * every CTA; the last CTA out writes calls = e and released = e, here
 * and into every peer's peer_released[me].  The slot is single: a source
 * stores call e's partials into d's slot only after d released e - 1
 * (its own peer_released[d] >= e - 1, local memory, checked by the
 * storing thread once per CTA and peer).
 */
#ifndef MKI_OPS_GEMM_RS_H
#define MKI_OPS_GEMM_RS_H

#include <stddef.h>
#include <stdint.h>

#include "gemm/gemm_sched.h"
#include "rt/launch.h"
#include "rt/rt.h"

/* Flags a rank keeps per source: one per group of tiles of its rows. */
#define MKI_GRS_MAXFLAGS 8192
/* Outbox tiles per CTA (fp32 partials waiting for the movers). */
#define MKI_GRS_RING 4
/* k-blocks into a tile's mainloop after which the CTA's previous tile,
 * stored into the outbox, is handed to the movers */
#ifndef MKI_GRS_SIGNAL_KB
#define MKI_GRS_SIGNAL_KB 8
#endif
/* Segments of the schedule (breakpoints of the rounds). */
#define MKI_GRS_MAXSEG (2 * MKI_MAXLOCAL + 2)

/* A rank's control block (in its heap, zeroed at creation). */
struct mki_grs_ctl {
    uint64_t calls;         /* fused calls completed here */
    uint64_t cur;           /* the call in flight (diagnostics) */
    uint64_t released;      /* the last call whose slot reads are done */
    uint32_t exits, pad;    /* CTAs done with the call in flight */
    /* peer_released[d]: local rank d's `released`, stored here by d, so
     * that the gate spins on local memory (a remote spin by every CTA of a
     * rank that runs ahead slowed the peer it waits for, bench/NOTES.md) */
    uint64_t peer_released[MKI_MAXLOCAL];
    uint64_t spare[4];
    /* flag[j][g]: tiles of group g of my rows that source j stored
     * (j = (s - me + P) % P - 1 for source s), one per K-slice; flag[P -
     * 1][g]: this rank's own K-slices 1.. of the group's tiles; 0 between
     * calls */
    uint64_t flag[MKI_MAXLOCAL][MKI_GRS_MAXFLAGS];
};

/* mkGemmAllReduce's second control block (in its heap, zeroed at
 * creation): agflag[j][g]: tiles of group g of source s's rows that s
 * reduced and copied into my inbox (j = (s - me + P) % P - 1); 0 between
 * calls. */
struct mki_gar_ctl {
    uint64_t agflag[MKI_MAXLOCAL - 1][MKI_GRS_MAXFLAGS];
};

/* The schedule of one rank: rounds [k0[i], k0[i+1]) hold the slots of
 * mask[i] (bit j, 1 <= j < P: peer me + j; bit P: own rows, lagged),
 * pos0[i] is the position of round k0[i]'s first unit. */
struct mki_grs_sched {
    int nseg;
    int k0[MKI_GRS_MAXSEG + 1];
    int pos0[MKI_GRS_MAXSEG + 1];
    uint16_t mask[MKI_GRS_MAXSEG];
};

/* Which of the c slots of its round the unit at offset off of a
 * segment takes, on a kernel of `step` clusters (cluster j takes
 * positions j, j + step, ...): the round's slots rotated so that each
 * cluster takes every kind in turn.  Without it a step that c divides
 * (66 clusters, 2 ranks) gives each cluster one kind for the whole middle
 * of the schedule, and the clusters with only own tiles (each with a
 * combine) finish last.  Where c divides step the rotation is the wave
 * of the round (counted from the segment's start: rounds never straddle
 * two waves then), moving a cluster's slot by one per wave; otherwise
 * the round's index, whose remainder mod c drifts against the positions'
 * (step % c per wave).  On 66-132 clusters with 2-8 ranks every cluster
 * then gets within 2 of the mean count of own tiles (tests/unit/
 * test_gemm_rs_args.c), against 0 to 2x it without.  A permutation within
 * each round, so the rounds' order, which the waits rely on, is
 * unchanged; only with lag 0, where an own unit waits for the peers'
 * units of its own round, must the own slot stay last (unrotated). */
MKI_HD int mki_grs_round_slot(int off, int c, int step, int lag)
{
    if (lag == 0) return off % c;
    const int rot = step % c == 0 ? (off - off % c) / step : off / c;
    return (off % c + rot) % c;
}

/* One fused call (src/ops/gemm_rs.c fills it). */
struct mki_grs_launch {
    const void *a;          /* this rank's A: m x k */
    const void *b;
    void *c;                /* my rows of D: m_me x n */
    int ar;                 /* mkGemmAllReduce: own tiles also go to every peer */
    void *c_full;           /* ar: all of D (m x n, this rank's C) */
    char *inbox[MKI_MAXLOCAL]; /* ar: local rank d's inbox (m x n of dtype), here */
    struct mki_gar_ctl *agctl[MKI_MAXLOCAL]; /* ar: local rank d's flags */
    int64_t m, n, k;
    int dtype;              /* MKI_BF16 or MKI_F16 */
    int trans_b;
    int ctas;               /* compute CTAs (the plan's) */
    int slices;             /* K-slices per tile (mki_grs_slices) */
    int nlocal;             /* P: ranks of the node (= the communicator) */
    int64_t row_off[MKI_MAXLOCAL + 1]; /* rows of local rank d start here */
    int64_t m_max;          /* rows of the largest owner (slot rows) */
    int64_t ld;             /* fp32 elements per slot row (n rounded to 4) */
    char *bank[MKI_MAXLOCAL]; /* local rank d's bank, here */
    void *outbox;           /* mki_grs_outbox_bytes(ctas), this GPU's memory */
    struct mki_grs_ctl *ctl[MKI_MAXLOCAL]; /* local rank d's control block */
    int ll;                 /* decode kernel: partials as LL lines (mki_gdec_ll) */
    int two_rows;           /* engine kernel: movers with two rows in flight (the
                             * plan's wide_movers) */
    char *llbank[MKI_MAXLOCAL]; /* decode kernel, ll: local rank d's LL bank, here */
    struct mki_rt_dev rt;
};

/* Slot of source s in owner d's bank (P ranks): j = (s - d + P) % P - 1. */
MKI_HD int mki_grs_slot(int s, int d, int P) { return (s - d + P) % P - 1; }

/* Tiles of one flag for an owner of t tiles: the least g with
 * ceil(t / g) <= MKI_GRS_MAXFLAGS. */
static inline int64_t mki_grs_group(int64_t tiles)
{
    int64_t g = (tiles + MKI_GRS_MAXFLAGS - 1) / MKI_GRS_MAXFLAGS;
    return g < 1 ? 1 : g;
}

/* fp32 elements between two K-slices of one source's slab (K-slices:
 * the slices sit side by side in each row, each n rounded up to whole
 * tiles, so that the epilogue's TMA store of a whole tile never reaches
 * the next slice, and the tensor map clips rows at the owner's). */
static inline int64_t mki_grs_slice_cols(int64_t n)
{
    return (n + MKI_GEMM_BN - 1) / MKI_GEMM_BN * MKI_GEMM_BN;
}

/* Bytes of a bank.  Without K-slices (S = 1): one slot of m_max rows of
 * ld fp32 per source, P - 1.  With S > 1: one slab per source and one for
 * this rank's own slices, P, each m_max rows of S slices of
 * mki_grs_slice_cols(n) fp32. */
static inline uint64_t mki_grs_bank_bytes(int P, int S, int64_t m_max, int64_t ld, int64_t n)
{
    if (P <= 1) return 0;
    if (S <= 1) return (uint64_t)(P - 1) * (uint64_t)m_max * (uint64_t)ld * 4u;
    return (uint64_t)P * (uint64_t)m_max * (uint64_t)S * (uint64_t)mki_grs_slice_cols(n) * 4u;
}

/* K-slices per tile (split-K) where the tiles (all owners' output tiles
 * of BM x BN, each computed by every rank) fill less than half of the
 * grid and hold at most 64 real rows (rows: the largest owner's, up to
 * BM): doubled while the tiles times the slices fit the grid and each
 * slice keeps at least 4 k-blocks of BK, at most 8 (decode-sized M: at
 * m = 16, n = 8192, 32 tiles on 132 SMs, each 64 k-blocks long).  The
 * owner's sum reads P S slots of every real row: at 128 rows that cost
 * more than the slices saved (bench/NOTES.md). */
static inline int mki_grs_slices(int64_t tiles, int ctas, int64_t k, int64_t rows)
{
    const int64_t nkb = (k + MKI_GEMM_BK - 1) / MKI_GEMM_BK;
    int S = 1;
    if (rows > 64) return 1;
    while (S < 8 && tiles * S * 2 <= ctas && nkb / (S * 2) >= 4) S *= 2;
    return S;
}

/* Bytes of the outbox of a grid of ctas CTAs: MKI_GRS_RING fp32 tiles of
 * the engine's MKI_GEMM_BM x MKI_GEMM_BN each. */
static inline uint64_t mki_grs_outbox_bytes(int ctas)
{
    return ctas > 0 ? (uint64_t)ctas * MKI_GRS_RING * MKI_GEMM_BM * MKI_GEMM_BN * 4u : 0;
}

/* Rows of D that rank r of P owns when the caller gives no counts: m split
 * evenly (the first m % P ranks one row more) or, with blocks
 * (mkGemmAllReduce, which chooses its owners), whole MKI_GEMM_BM-row
 * blocks, the first ranks one block more and the last rows with the rank
 * whose block holds them: no tile split between two owners. */
static inline int64_t mki_grs_rows(int64_t m, int P, int r, int blocks)
{
    if (!blocks) return m / P + (r < m % P ? 1 : 0);
    const int64_t bm = MKI_GEMM_BM, nblk = (m + bm - 1) / bm;
    const int64_t base = nblk / P, extra = nblk % P;
    const int64_t b0 = r * base + (r < extra ? r : extra);
    const int64_t nb = base + (r < extra ? 1 : 0);
    int64_t lo = b0 * bm, hi = (b0 + nb) * bm;
    if (lo > m) lo = m;
    if (hi > m) hi = m;
    return hi - lo;
}

/* K-slices of a fused call of P ranks (owner r with rows[r] rows of D),
 * each with k_rank of K, on ctas CTAs. */
static inline int mki_grs_call_slices(const int64_t *rows, int P, int64_t n, int64_t k_rank,
                                      int ctas)
{
    int64_t tiles = 0, m_max = 0;
    for (int r = 0; r < P; r++) {
        tiles += (rows[r] + MKI_GEMM_BM - 1) / MKI_GEMM_BM;
        if (rows[r] > m_max) m_max = rows[r];
    }
    tiles *= (n + MKI_GEMM_BN - 1) / MKI_GEMM_BN;
    return mki_grs_slices(tiles, ctas, k_rank, m_max);
}

/* The schedule of rank `me` of P whose owners have units[d] work units,
 * own rows lagged by R rounds (host and tests). */
static inline void mki_grs_make_sched(int P, int me, const int *units, int R,
                                      struct mki_grs_sched *s)
{
    int bp[MKI_GRS_MAXSEG + 2], n = 0;
    bp[n++] = 0;
    for (int j = 1; j < P; j++) bp[n++] = units[(me + j) % P];
    bp[n++] = R;
    bp[n++] = R + units[me];
    /* sort, unique */
    for (int i = 1; i < n; i++)
        for (int x = i; x > 0 && bp[x - 1] > bp[x]; x--) {
            int t = bp[x]; bp[x] = bp[x - 1]; bp[x - 1] = t;
        }
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || bp[i] != bp[u - 1]) bp[u++] = bp[i];
    s->nseg = 0;
    int pos = 0;
    for (int i = 0; i + 1 < u; i++) {
        const int k0 = bp[i], k1 = bp[i + 1];
        uint16_t mask = 0;
        int c = 0;
        for (int j = 1; j < P; j++)
            if (k0 < units[(me + j) % P]) mask |= (uint16_t)(1u << j), c++;
        if (k0 >= R && k0 < R + units[me]) mask |= (uint16_t)(1u << P), c++;
        if (!c) continue; /* a gap (own rows not yet due): no unit */
        s->k0[s->nseg] = k0;
        s->pos0[s->nseg] = pos;
        s->mask[s->nseg] = mask;
        s->nseg++;
        pos += (k1 - k0) * c;
        s->k0[s->nseg] = k1;
        s->pos0[s->nseg] = pos;
    }
    if (s->nseg == 0) s->k0[0] = s->pos0[0] = 0;
}

/* The decode-sized path (kernels/ops/gemm_dec.cu): m <= MKI_GDEC_MAXM
 * rows of D on one node.  Work units of MKI_GDEC_BN columns of D by all
 * m rows, over one K-slice; each unit's fp32 partial goes to every rank
 * that needs its rows (mkGemmAllReduce: every rank, all m rows), which
 * sums P x S partials in a fixed order.  Bank of receiver d: P slabs
 * (one per source rank, in rank order) of S slices of rows_d x ld fp32
 * (rows_d: d's rows; mkGemmAllReduce: m). */
#define MKI_GDEC_MAXM 128
#define MKI_GDEC_BN 64

/* wgmma's N for m rows: 16, 32, 64 or 128. */
static inline int mki_gdec_nw(int64_t m)
{
    return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
}

/* K-slices of the decode kernel: doubled (up to 8) while twice the work
 * units (column blocks x slices) still fit the grid and each slice keeps
 * at least 4 k-blocks of 64 (n = 1024 on 132 SMs: 16 blocks x 8). */
static inline int mki_gdec_slices(int64_t n, int64_t k, int ctas)
{
    const int64_t nnb = (n + MKI_GDEC_BN - 1) / MKI_GDEC_BN, nkb = (k + 63) / 64;
    int S = 1;
    while (S < 8 && nnb * S * 2 <= ctas && nkb / (S * 2) >= 4) S *= 2;
    return S;
}

/* Whether the decode kernel sends its partials as LL lines (kernels/rt/
 * ll.cuh: every 4 bytes of a partial with the call's flag, twice the
 * bytes; the reader polls the data itself, so no fence, counter or
 * counter wait between a partial's stores and its sum): where the most
 * rows any rank receives are at most 8 and there is one K-slice.
 * Measured on 2 x H100 (bench/NOTES.md, fifteenth session): 3 us faster
 * at 1 and 8 rows, even at 16, 6 us slower at 32 (the doubled bytes)
 * and slower with 8 slices (16 sources to poll).  Its bank is a
 * separate one (only LL lines ever in it, zeroed when made, so no stale
 * word carries this call's flag), twice mki_gdec_bank_bytes. */
static inline int mki_gdec_ll(int64_t rows_max, int slices)
{
#ifdef MKI_GDEC_LAB_NOLL /* lab builds: counters at every m */
    return rows_max < 0 && slices < 0;
#else
    return rows_max <= 8 && slices == 1;
#endif
}

/* Bytes of the decode path's bank at a receiver of rows_d rows. */
static inline uint64_t mki_gdec_bank_bytes(int P, int S, int64_t rows_d, int64_t ld)
{
    return (uint64_t)P * (uint64_t)S * (uint64_t)rows_d * (uint64_t)ld * 4u;
}

#ifdef __cplusplus
extern "C" {
#endif
/* Describe the fused kernel of a call (or, with nothing to compute, the
 * kernel that only takes part in the protocol); 0 or an error code of
 * gemm.h with msg set. */
int mki_grs_describe(const struct mki_grs_launch *l, struct mki_launch_desc *d, char *msg,
                     size_t len);
/* The unfused sequence's last step: out[i] = (dtype) in[i], count fp32
 * values; a kernel launched on stream (a cudaStream_t). */
int mki_grs_convert(const float *in, void *out, int dtype, size_t count, void *stream,
                    char *msg, size_t len);
/* Load the kernels now (lazy loading can deadlock beside a spinning
 * stream). */
int mki_grs_preload(char *msg, size_t len);
/* The decode-sized path's kernel for a call (l->slices: its K-slices,
 * mki_gdec_slices; l->bank: banks of mki_gdec_bank_bytes), and its
 * preload. */
int mki_gdec_describe(const struct mki_grs_launch *l, struct mki_launch_desc *d, char *msg,
                      size_t len);
int mki_gdec_preload(char *msg, size_t len);
#ifdef MKI_GRS_TE
/* Lab builds (-DMKI_GRS_TE): print the last call's timeline (TE lines,
 * kernels/ops/gemm_rs_te.cuh), once per process. */
void mki_grs_te_dump(int rank);
#endif
#ifdef __cplusplus
}
#endif
#endif /* MKI_OPS_GEMM_RS_H */
