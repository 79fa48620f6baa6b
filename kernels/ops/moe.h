/*
 * moe.h - what src/ops/moe.c (host) and kernels/ops/moe.cu (device) agree
 * on for mkMoEDispatch and mkMoECombine.  C99 and CUDA C++; no CUDA
 * headers.
 *
 * One node (the ranks of a node reach each other's heaps; local index ==
 * communicator rank).  Each call is one persistent kernel on every rank.
 *
 * Dispatch, call number e (ctl->dcalls + 1, read on the device):
 *
 *   count    CTA b takes tokens [T b / G, T (b + 1) / G) and counts, in
 *            shared memory, the slots per expert, the tokens per
 *            destination rank and the first bad expert id; its record goes
 *            to the rank's scratch; a grid barrier (ctl->dbar)
 *   record   CTA 0 sums the CTAs' records into the rank's record (rows per
 *            expert, tokens per destination, first bad slot, tokens) and,
 *            once every peer q released call e - 1 (peer_unpacked[q] >=
 *            e - 1), stores it in every rank's record block at index
 *            `me`, then raises rec_tag[me] = e there
 *   verdict  every CTA waits for every rank's record: all ranks then hold
 *            the same P records, so every rank finds the same bad id or
 *            the same rank over recv_capacity, writes its error record and
 *            stops before it writes anything (no exchange of verdicts)
 *   send     from the records every rank knows where every row lands:
 *            expert el of rank d starts at the rows of d's experts before
 *            it, source s's rows of an expert after the rows of the sources
 *            before s, and a CTA's after the CTAs before it.  Warp 0 walks
 *            the CTA's tokens in order (a window of MKI_MOE_WINDOW at a
 *            time) and gives each (t, j) its row, and each (t, d) its slot
 *            in d's inbox; then every warp copies: a token of this rank's
 *            own experts straight into recv (once per slot), another rank's
 *            once into that rank's inbox slot (rows of the dtype) with its
 *            metadata (t, the number of rows, each row, j and weight), then
 *            (a system fence) the slot's tag = e
 *   unpack   for each source s (in rank order from me + 1): the warps of
 *            the grid take s's inbox slots, each once its tag is e (a CTA
 *            that has sent its share unpacks what has arrived while other
 *            CTAs still send), and copy it into its recv rows (a local
 *            copy) with recv_src and recv_weights.  Tags are compared for
 *            equality: a grown inbox is not zeroed
 *   finish   the last CTA out (ctl->dexit) resets the counters, sets
 *            dcalls = e and stores peer_unpacked[me] = e in every rank
 *
 * Combine, call number c (ctl->ccalls + 1): every rank first copies y
 * (expert_offsets[El] rows) into its stage once every peer has pulled call
 * c - 1 from it (peer_pulled[q] >= c - 1), the last CTA raising
 * peer_staged[me] = c in every rank; then each warp takes tokens and sums
 * w_j * y_d[row_j] in fp32, j in order, reading a peer's stage over NVLink
 * (its own y directly); the last CTA out stores peer_pulled[me] = c in
 * every rank.  The signals are single-writer words in the reader's
 * control block, so every wait spins on local memory.
 *
 * mkMoEDispatchGemm, one kernel (moe_dispatch.cuh says what the dispatch
 * does differently there): its first dctas CTAs dispatch, CTA 0 of them
 * raising gemm_ready = e once the grouped GEMM's table is built
 * (e | MKI_MOE_GEMM_FAILED when the call stopped before: no GEMM); the
 * other CTAs wait for it and start the GEMM, each tile once its expert's
 * rows are all in place (ready[el], counted as rows land); the dispatch
 * CTAs join the GEMM when the dispatch is done; the GEMM's units go to the
 * clusters as they ask for them (one counter, zeroed by the dispatch).
 * The dispatch's last CTA out sets dok = e (instead of dcalls); the
 * kernel's last CTA out (gexit) sets dcalls = e when dok == e, so that
 * every CTA of the launch reads the same call number at entry.  The
 * records carry each sender CTA's pair count per destination
 * (MKI_MOE_REC_WORDS_FUSED), for the unpack's order.
 *
 * mkMoEDispatchFfnCombine's one launch: the same, the first GEMM (W13,
 * SwiGLU) raising, once each of its tiles is stored, a count per M-block
 * (tile of the table); then every CTA runs the down projection's units
 * (the same table, a second schedule), each tile's loads waiting until its
 * M-block's count reaches the first GEMM's N-blocks.  The dispatch zeroes
 * the counts and the second schedule's unit counter (zero2).  On one node
 * the down projection stores the experts' outputs into the combine's
 * stages: its first tile's loads in a CTA wait until every peer has
 * finished the last combine (peer_pulled[q] >= c - 1, c = ccalls + 1 at
 * entry), and the kernel's last CTA out raises peer_staged[me] = c in
 * every rank where the dispatch completed (dok == e).  Push: where every
 * rank runs this launch (record word E + 11) and every rank's tokens * topk
 * slots fit cap rows, the dispatch's CTA 0 sets push_e = e (else 0), the
 * same verdict on every rank; the down projection then stores each row,
 * by an asynchronous bulk copy per 128-byte piece (EPI_ROWS), into the
 * stage of the token's rank at slot t * topk + j (recv_src of the row),
 * over NVLink for a peer's token, and the combine that follows (staged,
 * push_e == dcalls) sums each token's topk consecutive rows of its own
 * stage, all local.  Otherwise the rows go into this rank's stage in
 * expert order and the combine pulls them from there (staged: it copies
 * nothing).  The push moves the link's bytes into the down projection,
 * where they overlap the GEMM, and leaves the combine a local sum (2 x
 * H200, 16384 tokens: the combine 2.9 -> 0.7 ms, bench/NOTES.md).
 */
#ifndef MKI_OPS_MOE_H
#define MKI_OPS_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "gemm/gemm.h"
#include "rt/launch.h"
#include "rt/rt.h"

#define MKI_MOE_THREADS 512
#define MKI_MOE_WINDOW 64      /* tokens whose rows warp 0 places at once */
#define MKI_MOE_MAXE 4096      /* MK_MOE_MAX_EXPERTS */
#define MKI_MOE_MAXK 32        /* MK_MOE_MAX_TOPK */
/* 32-bit words of one rank's record: rows per expert [E], tokens per
 * destination [8], first bad slot + 1 (0: none), tokens, then (fused
 * kernels) the rank's dispatch CTAs and 1 where its layer can push. */
#define MKI_MOE_REC_WORDS(E) ((E) + MKI_MAXLOCAL + 4)
/* mkMoEDispatchGemm's records: word E + 10 holds the rank's dispatch CTAs
 * D, then come the (token, rank) pairs per destination [8] of each of
 * MKI_MOE_FUSED_MAXD CTAs (those past D: 0); the same stride on every
 * rank. */
#define MKI_MOE_FUSED_MAXD 64  /* dispatch CTAs of mkMoEDispatchGemm, at most */
#define MKI_MOE_REC_WORDS_FUSED(E, D) (MKI_MOE_REC_WORDS(E) + (D) * MKI_MAXLOCAL)
#define MKI_MOE_GEMM_FAILED (1ull << 63) /* gemm_ready: the call stopped */
/* 32-bit words of an inbox slot's metadata: t, rows, then topk rows,
 * topk j's and topk weights (fp32 bits), padded to an even count, then
 * the slot's 64-bit tag: the dispatch call number that filled it in the low
 * word and the communicator's tag_hi in the high word (MKI_MOE_TAG).  A
 * slot's words move with topk and the inbox is not cleared between calls,
 * so a tag word may hold an older call's metadata (row and token indices,
 * small numbers like a call number): the high word, drawn from the
 * communicator's cookie with its top bit set, is what no index can be. */
#define MKI_MOE_META_WORDS(topk) ((2 + 3 * (topk) + 1) / 2 * 2 + 2)

/* A rank's control block (its heap, zeroed at creation).  Indices are
 * local ranks (== communicator ranks on one node). */
struct mki_moe_ctl {
    uint64_t dcalls, ccalls;            /* calls completed here */
    uint64_t dbar, dsent, dexit;        /* dispatch: CTAs at the barrier, sent, out */
    uint64_t cstaged, cexit;            /* combine: CTAs done staging, out */
    uint64_t gemm_ready;                /* mkMoEDispatchGemm: the table of call n built */
    uint64_t dok, gexit;                /* mkMoEDispatchGemm: dispatch done, CTAs out */
    uint64_t rec_tag[MKI_MAXLOCAL];     /* call number of rank s's record here */
    uint64_t arrive[MKI_MAXLOCAL];      /* unused (the inbox slots carry tags) */
    uint64_t peer_unpacked[MKI_MAXLOCAL]; /* rank q finished dispatch call n */
    uint64_t peer_staged[MKI_MAXLOCAL];   /* rank q's stage holds combine call n */
    uint64_t peer_pulled[MKI_MAXLOCAL];   /* rank q finished pulling combine call n from me */
    uint64_t push_e;                      /* the layer's dispatch call n pushes (moe.h) */
};

/* Parameters of one launch (by value, __grid_constant__). */
struct mki_moe_params {
    struct mki_rt_dev rt;
    struct mki_moe_ctl *ctl[MKI_MAXLOCAL]; /* every rank's, mapped */
    int32_t *rec[MKI_MAXLOCAL];            /* every rank's P records */
    char *inbox[MKI_MAXLOCAL];             /* cap rows of row_bytes */
    int32_t *meta[MKI_MAXLOCAL];           /* cap slots of META_WORDS */
    char *stage[MKI_MAXLOCAL];             /* cap rows of row_bytes */
    int32_t *scratch;                      /* this rank's: a record per CTA */
    /* dispatch */
    const void *x;
    const int32_t *idx;
    const float *w;                        /* may be NULL (weights 1) */
    void *recv;
    float *recv_w;                         /* may be NULL */
    int32_t *recv_src;                     /* may be NULL */
    int64_t *off;                          /* expert_offsets */
    int32_t *send_rows;
    /* mkMoEDispatchGemm */
    uint64_t *ready;                       /* [el]: rows of each local expert in place */
    int32_t *order;                        /* [tokens * P]: each CTA's pairs, sorted */
    int32_t *table;                        /* the grouped GEMM's table of tiles */
    uint64_t *zero2;                       /* mkMoEDispatchFfnCombine's one launch: nzero2
                                            * words the dispatch zeroes (the down
                                            * projection's unit counter, then each tile's
                                            * count of stored first-GEMM tiles) */
    int64_t nzero2;
    /* combine */
    const void *y;
    void *out;
    int64_t tokens, hidden, cap, row_bytes;
    int32_t topk, experts, el, dtype;
    int32_t P, me;
    uint32_t tag_hi;                       /* high word of the inbox tags */
    int32_t staged;                        /* combine: y is this rank's stage already,
                                            * peer_staged raised (the layer's first
                                            * kernel): no copy; the layer's first
                                            * kernel: its down projection stores there */
};

/* ---- across nodes (moe_net.cu) ----------------------------------------
 *
 * The kernels above reach the peers' heaps, so they serve the ranks of one
 * node.  A communicator that spans nodes runs each call as a sequence on
 * the stream instead: the library's collectives, which cross nodes through
 * the proxy, and these kernels in between.
 *
 * Dispatch: every rank's tokens padded to the largest count tmax (expert
 * id -1 past its own) are all-gathered with their topk_idx and weights;
 * then every rank routes the P * tmax * topk gathered slots alike, slot i
 * = (s, t * topk + j) in order of i:
 *   count   the slots are cut into nchunk chunks of `chunk`; CTAs count
 *           each chunk's slots per expert into hist[chunk][0, E) and note
 *           its first bad id in hist[chunk][E]
 *   scan    one CTA: the first bad id of all (every rank fails alike), each
 *           expert's rows and, from them, each rank's rows (one over
 *           recv_capacity: every rank fails alike); hist made exclusive per
 *           expert; start[e]: expert e's first row on its rank;
 *           expert_offsets written, state[0] = rows received here
 *   place   a warp per chunk walks it in order and gives each slot its row
 *           (start + hist + its rank among the chunk's earlier slots of the
 *           expert): src_of[row] = i for rows here, send_rows for this
 *           rank's own slots
 *   copy    the received rows out of the gathered tokens, with recv_src and
 *           recv_weights
 * The rows land exactly where the one-node kernel puts them.
 *
 * Combine: topk_idx, topk_weights and send_rows are all-gathered (padded
 * alike); each rank sums, for every gathered token, w * y[row] of its own
 * experts' slots, j in order, in fp32 (partial: P blocks of tmax rows of
 * hidden, then a flag per rank, padded to 4 floats); a reduce-scatter of
 * those fp32 sums; `convert` rounds this rank's tokens once into out.
 * Each rank's flag column carries the call's stamp (a count of combine
 * calls that `tick` advances on every rank alike) or -1 when that rank
 * stopped (a layout it cannot read, an error recorded before): convert
 * writes out only where every column holds the stamp, so that no rank
 * writes out from sums that did not all arrive. */
#define MKI_MOE_NET_CHUNK 2048   /* slots per chunk, at least */
#define MKI_MOE_NET_MAXCHUNK 1024
#define MKI_MOE_NET_FLAGS(P) (((size_t)(P) + 3) / 4 * 4) /* flag floats per block */
enum mki_moe_net_kernel {
    MKI_MOE_NET_COUNT = 0, MKI_MOE_NET_SCAN, MKI_MOE_NET_PLACE, MKI_MOE_NET_COPY,
    MKI_MOE_NET_TICK, MKI_MOE_NET_PARTIAL, MKI_MOE_NET_CONVERT, MKI_MOE_NET_NKERNELS
};
struct mki_moe_net_params {
    struct mki_rt_dev rt;
    const char *gx;               /* dispatch: P * tmax rows of row_bytes */
    const int32_t *gmeta;         /* P blocks of mwords: idx, weights, send_rows */
    int32_t *hist;                /* [nchunk][experts + 1] */
    int32_t *start;               /* [experts] */
    int64_t *src_of;              /* [cap]: the gathered slot of each row here */
    int64_t *state;               /* dispatch [2 + P]: rows here, 1 when
                                   * the call stopped, then each rank's
                                   * rows; combine [1]: its call count,
                                   * the stamp of its flags */
    void *recv;
    float *recv_w;                /* may be NULL */
    int32_t *recv_src;            /* may be NULL */
    int64_t *off;                 /* expert_offsets (written) */
    int32_t *send_rows;           /* this rank's tokens * topk (written) */
    const void *y;                /* combine */
    const int64_t *off_in;
    float *partial;               /* P blocks of pstride floats */
    const float *red;             /* pstride floats: this rank's sums */
    void *out;
    int64_t tmax, tokens, hidden, cap, row_bytes, mwords, pstride, chunk;
    uint64_t epoch;               /* the op's call number here (errors) */
    int32_t topk, experts, el, dtype, P, me, nchunk, has_w;
};

/* The inbox tag of dispatch call e (a macro: host and device). */
#define MKI_MOE_TAG(tag_hi, e) (((uint64_t)(tag_hi) << 32) | (uint64_t)(uint32_t)(e))

#ifdef __cplusplus
extern "C" {
#endif
/* The launch of one call (combine = 0: dispatch); grid: the CTAs the
 * plan gives (the launch may shrink it to what is co-resident). */
int mki_moe_describe(const struct mki_moe_params *p, int combine, int grid,
                     struct mki_launch_desc *d, char *msg, size_t len);
/* mkMoEDispatchGemm's one launch (the GEMM engine's grid: the plan of
 * mki_gemm_grouped for ga, whose offsets and table are p->off and
 * p->table); the first *dctas CTAs dispatch (at most dctas_max, whole
 * clusters), the others start the GEMM, and the dispatch CTAs join it when
 * they are done (units are handed out as CTAs ask).  p->scratch holds
 * MKI_MOE_FUSED_MAXD records of MKI_MOE_REC_WORDS_FUSED(experts,
 * MKI_MOE_FUSED_MAXD) words; p->ready mki_moe_gemm_sched_words(el, grid)
 * 64-bit words.  0; 1 when the grid is too small to split (run the two
 * launches); or an MKI_GEMM_ERR_* with msg set. */
int mki_moe_gemm_describe(const struct mki_moe_params *p, const mki_gemm_grouped_args *ga,
                          int dctas_max, struct mki_launch_desc *d, int *dctas, char *msg,
                          size_t len);
/* Words of p->ready for a launch of at most ctas CTAs: the row count of
 * each local expert, the schedule's next unit, 8 slots and an end word per
 * cluster. */
static inline size_t mki_moe_gemm_sched_words(int el, int ctas)
{
    return (size_t)el + 1 + 9 * (size_t)ctas;
}
/* mkMoEDispatchFfnCombine's one launch (the first GEMM ga with SwiGLU, the
 * down projection down on the same table and offsets): as
 * mki_moe_gemm_describe, p->ready mki_moe_layer_sched_words(el, grid,
 * tiles) words, tiles = MKI_GEMM_GROUP_TABLE(rows, el) / 2.  0; 1 when the
 * grid is too small to split or the two GEMMs' plans differ (run the
 * launches in turn); or an MKI_GEMM_ERR_* with msg set. */
int mki_moe_layer_describe(const struct mki_moe_params *p, const mki_gemm_grouped_args *ga,
                           const mki_gemm_grouped_args *down, int dctas_max,
                           struct mki_launch_desc *d, int *dctas, char *msg, size_t len);
/* Words of p->ready for it: mkMoEDispatchGemm's, then the second
 * schedule's counter, a count per tile, 8 slots and an end per cluster. */
static inline size_t mki_moe_layer_sched_words(int el, int ctas, size_t tiles)
{
    return mki_moe_gemm_sched_words(el, ctas) + 1 + tiles + 9 * (size_t)ctas;
}
/* The dispatch CTAs of mkMoEDispatchGemm's launch of grid CTAs: a quarter,
 * even, 2 .. MKI_MOE_FUSED_MAXD (the plan's and mkinfo's rule). */
static inline int mki_moe_gemm_dctas(int grid)
{
    int d = grid / 4;
    d += d & 1;
    return d < 2 ? 2 : d > MKI_MOE_FUSED_MAXD ? MKI_MOE_FUSED_MAXD : d;
}
/* Load the kernels now; 0 or an error with msg set. */
int mki_moe_preload(char *msg, size_t len);
/* One kernel of the sequence across nodes (enum mki_moe_net_kernel);
 * 0, or -1 with msg set. */
int mki_moe_net_describe(const struct mki_moe_net_params *p, int which, int sm_count,
                         struct mki_launch_desc *d, char *msg, size_t len);
/* Load those kernels now (mki_moe_preload calls it). */
int mki_moe_net_preload(char *msg, size_t len);
#ifdef __cplusplus
}
#endif

#endif /* MKI_OPS_MOE_H */
