/*
 * ag_gemm.h - what src/ops/ag_gemm.c (host) and kernels/ops/ag_gemm.cu
 * (device) agree on for mkAllGatherGemm.  C99 and CUDA C++; no CUDA
 * headers.
 *
 * Each rank keeps, in its symmetric heap, a control block (below) and a
 * bank: the gathered A, M x K.  Rank s copies chunk c of its A_s (rows
 * [c * chunk_rows, ...)) into the bank of every rank of the node with the
 * copy engine (side streams the host enqueues beside the GEMM), then
 * raises the chunk's flag there (a stream memory operation writing 1,
 * fenced after the copy).  The GEMM waits for the flag of each chunk
 * before loading its rows.
 *
 * Epochs live on the device, so that a CUDA graph replays correctly:
 *
 *   call e = calls + 1        every CTA reads `calls` at its start; the
 *                             last CTA out writes calls = e
 *   flags                     sig[s][c] is 1 while chunk c of rank s is
 *                             in this rank's bank for the call in flight:
 *                             raised by s's side stream, cleared to 0 by
 *                             this rank's last CTA out once every CTA is
 *                             done with them (CTA 0 waits for all of
 *                             them), before the release below (a
 *                             constant written by a memory operation
 *                             takes no copy-engine time)
 *   cur = e                   written first thing by CTA 0's gate (for
 *                             diagnostics)
 *   gate                      the bank is single: rank s may write call
 *                             e's rows into rank q's bank only once q
 *                             finished reading it for call e - 1
 *                             (q.released >= e - 1).  CTA 0's gate waits
 *                             for that (deadline, abort word), then sets
 *                             go[q][x] = 1 for each of its side streams
 *                             to q, which wait for it (a stream memory
 *                             operation) and reset it to 0 before copying
 *   released = e              the last CTA out, or, when the gathered A is
 *                             copied out after the GEMM, a small kernel
 *                             after that copy
 *
 * The side streams never wait for a peer, only for this rank's kernel
 * (whose every wait has a deadline), so nothing on them can hang.
 *
 * Across nodes (nnet > 0) the bank holds every rank's rows (in
 * communicator order; those of the node as above) and the last nnet CTAs
 * of the kernel move the others' through the collectives' net channels
 * (kernels/rt/channel.h; one channel per CTA, its operation number from
 * the collectives' sequence, so collectives and fused calls interleave):
 *
 *   bytes of rank q's rows  cut into chunks of net_chunk bytes; chunk j
 *                           travels on channel j % nnet as that
 *                           channel's chunk j / nnet, so rows arrive
 *                           front to back
 *   SEND (threads 128-255)  my rows to each rank q of another node, the
 *                           previous ranks first (q = me - 1, me - 2,
 *                           ...): staged in my net block, one WRITE_SIGNAL
 *   RECV (threads 256-383)  from q = me + 1, me + 2, ... (the order of
 *                           the GEMM's tiles): each chunk copied from the
 *                           net block into the bank, the credit returned,
 *                           then rsig[q][channel] = (e << 32) | (k + 1)
 *                           (e: this call's number, k: the channel's
 *                           chunk), which the GEMM's producer waits for
 *
 * Step i of every rank sends to me - i and receives from me + i, so every
 * SEND waits only for a RECV at the same step (no cycle).  rsig only
 * grows (the call number leads), so it is never cleared.
 */
#ifndef MKI_OPS_AG_GEMM_H
#define MKI_OPS_AG_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "rt/channel.h"
#include "rt/launch.h"
#include "rt/rt.h"

#define MKI_AGG_MAXCHUNKS 512   /* chunks of one rank's A, at most */
#define MKI_AGG_SPLIT_MAX 4     /* copy-engine streams per peer, at most */
#define MKI_AGG_MAXSRC 64       /* ranks whose rows the bank holds, at most
                                 * (beyond: the unfused sequence) */
#define MKI_AGG_NET_THREADS 128 /* SEND and RECV of a net CTA, each */

/* A rank's control block (in its heap, zeroed at creation). */
struct mki_agg_ctl {
    uint64_t calls;         /* fused calls completed here */
    uint64_t cur;           /* the call in flight */
    uint64_t released;      /* the last call whose bank reads are done */
    uint32_t exits, pad;    /* CTAs done with the call in flight */
    uint64_t spare[12];
    uint64_t go[MKI_MAXLOCAL][MKI_AGG_SPLIT_MAX];    /* side stream (q, x) may go */
    uint64_t rsig[MKI_AGG_MAXSRC][MKI_NB_CH];        /* across nodes: rank q's chunks
                                                      * landed on a channel */
    uint64_t sig[MKI_MAXLOCAL][MKI_AGG_MAXCHUNKS];   /* flag of chunk c of local rank s */
};

/* Rows per chunk for a rank holding m_r rows: at least `want` (rounded up
 * to whole 128-row tiles), and few enough chunks to fit the signal array. */
static inline int64_t mki_agg_chunk_rows(int64_t m_r, int64_t want)
{
    int64_t cr = want < 128 ? 128 : (want + 127) / 128 * 128;
    int64_t min_cr = (m_r + MKI_AGG_MAXCHUNKS - 1) / MKI_AGG_MAXCHUNKS;
    min_cr = (min_cr + 127) / 128 * 128;
    return cr > min_cr ? cr : min_cr;
}

/* Each chunk costs its copy-engine stream some us beyond its bytes (the
 * copy's launch), so a chunk
 * carries at least MKI_AGG_CE_CHUNK_MIN bytes, ~11 us at the copy
 * engine's rate: 2 H200, 2000x1032x1048, 8 chunks of 268 KB 70 us per
 * call, one chunk 33 us; 1024x8192x8192, 4 chunks 233 us, one 212
 * (bench/NOTES.md). */
#define MKI_AGG_CE_CHUNK_MIN (4ll << 20)

/* The rows a chunk should hold at least, for rows of row_bytes bytes. */
static inline int64_t mki_agg_chunk_floor(int64_t row_bytes)
{
    if (row_bytes < 1) row_bytes = 1;
    return (MKI_AGG_CE_CHUNK_MIN + row_bytes - 1) / row_bytes;
}

/* Rows of A in one GEMM tile (MKI_GEMM_BM; kernels/ops/ag_gemm.cu checks). */
#define MKI_AGG_TILE_ROWS 128

/* This rank's rows are [lo, hi) of the gathered A.  The whole tiles among
 * them, rows [*d0, *d1), are read by the GEMM straight from the caller's A;
 * only the rows of the partial tiles at both ends, [lo, *d0) and [*d1, hi),
 * are copied into the bank.  No whole tile: *d0 = *d1 = hi (all copied). */
static inline void mki_agg_own_direct(int64_t lo, int64_t hi, int64_t *d0, int64_t *d1)
{
    const int64_t t = MKI_AGG_TILE_ROWS;
    int64_t a = (lo + t - 1) / t * t, b = hi / t * t;
    if (b <= a) a = b = hi;
    *d0 = a;
    *d1 = b;
}

/* Chunks rank r signals (at least one, even with no rows, so that every
 * call carries a signal from every rank). */
static inline int64_t mki_agg_nchunks(int64_t m_r, int64_t chunk_rows)
{
    int64_t n = (m_r + chunk_rows - 1) / chunk_rows;
    return n < 1 ? 1 : n;
}

/* Chunks of the n bytes of a rank's rows that channel c of nnet carries
 * (chunk j goes on channel j % nnet). */
MKI_HD uint64_t mki_agg_net_chunks(uint64_t n, uint64_t chunk, int nnet, int c)
{
    const uint64_t all = (n + chunk - 1) / chunk;
    return all > (uint64_t)c ? (all - (uint64_t)c + (uint64_t)nnet - 1) / (uint64_t)nnet : 0;
}

/* One fused call (src/ops/ag_gemm.c fills it). */
struct mki_agg_launch {
    const void *a;          /* the gathered A: my bank, M x K */
    const void *b;
    void *c;
    int64_t m, n, k;
    int dtype;              /* MKI_BF16 or MKI_F16 */
    int trans_b;
    int ctas;               /* compute CTAs */
    int nsrc;               /* ranks = sources of rows (communicator order) */
    int split;              /* side streams to each peer of the node this call */
    int release;            /* 1: the kernel releases the bank at its end */
    int64_t row_off[MKI_AGG_MAXSRC + 1]; /* gathered rows of rank q start here */
    int64_t chunk_rows[MKI_MAXLOCAL];    /* rows per flag, by local index */
    /* Across nodes: the net CTAs (0: one node) and what they move. */
    int nnet;
    uint64_t net_chunk;     /* bytes of a chunk (<= the net block's slots) */
    const void *net_src;    /* this rank's rows (the caller's A) */
    struct mki_chan_dev ch; /* the collectives' channels */
    const void *own;        /* the caller's A, when the GEMM reads the */
    int64_t own_d0, own_d1; /* whole tiles of rows [own_d0, own_d1) from it
                             * (own_d0 == own_d1: every row from the bank) */
    struct mki_agg_ctl *ctl;                        /* mine */
    const struct mki_agg_ctl *peer_ctl[MKI_MAXLOCAL]; /* local rank l's, here */
    struct mki_rt_dev rt;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Describe the fused kernel of a call (or, with no tiles, the kernel that
 * only takes part in the protocol); 0 or an error code of gemm.h with
 * msg set. */
int mki_agg_describe(const struct mki_agg_launch *l, struct mki_launch_desc *d, char *msg,
                     size_t len);
/* The kernel that releases the bank after the gathered A was copied out:
 * one CTA of 32 threads, argument: struct mki_agg_ctl *. */
const void *mki_agg_release_kernel(void);
/* Load the kernels now (lazy loading can deadlock beside a spinning
 * stream). */
int mki_agg_preload(char *msg, size_t len);
#ifdef __cplusplus
}
#endif
#endif /* MKI_OPS_AG_GEMM_H */
