/*
 * ag_gemm.h - what src/ops/ag_gemm.c (host) and kernels/ag_gemm.cu (device)
 * agree on for mkAllGatherGemm.  C99 and CUDA C++; no CUDA headers.
 *
 * Each rank owns an arena (cudaMalloc, mapped by every local peer through
 * CUDA IPC):
 *
 *   0                   sig[MKI_MAXLOCAL][MKI_AGG_MAXCHUNKS]  (uint64)
 *   MKI_AGG_SIG_BYTES   bank 0: the gathered A, M x K
 *   + bank_bytes        bank 1: the same, for the next call
 *
 * Call number k (1, 2, ... on every rank alike) uses bank k % 2.  Rank s
 * copies chunk c of A_s (rows [c * chunk_rows, ...)) into bank k % 2 of
 * every local rank (the peers' with the copy engine beside its GEMM; in its
 * own only the rows of partial tiles, before its GEMM starts, as the GEMM
 * reads its whole own tiles from the caller's A, unless gatheredA is
 * wanted), then writes k into sig[s][c] there.  Signals only grow;
 * nothing is reset.  Bank k % 2 of a rank is free again at call k + 2
 * because a rank pushes call k + 2 only after its own GEMM k + 1
 * finished, which waited for every peer's last chunk of call k + 1, which
 * each peer pushed only after its GEMM k.
 */
#ifndef MKI_AG_GEMM_H
#define MKI_AG_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "rt/rt.h"

#define MKI_AGG_MAXCHUNKS 512   /* chunks of one rank's A, at most */
#define MKI_AGG_SIG_BYTES (8ull * MKI_MAXLOCAL * MKI_AGG_MAXCHUNKS)
#define MKI_AGG_OP 16           /* op id in error records */

#ifdef __cplusplus
extern "C" {
#endif

/* Offset of bank b (0 or 1) in an arena whose banks hold bank_bytes. */
static inline uint64_t mki_agg_bank_off(int b, uint64_t bank_bytes)
{
    return MKI_AGG_SIG_BYTES + (uint64_t)b * bank_bytes;
}

/* Rows per chunk for a rank holding m_r rows: at least `want` (rounded up
 * to whole 128-row tiles), and few enough chunks to fit the signal array. */
static inline int64_t mki_agg_chunk_rows(int64_t m_r, int64_t want)
{
    int64_t cr = want < 128 ? 128 : (want + 127) / 128 * 128;
    int64_t min_cr = (m_r + MKI_AGG_MAXCHUNKS - 1) / MKI_AGG_MAXCHUNKS;
    min_cr = (min_cr + 127) / 128 * 128;
    return cr > min_cr ? cr : min_cr;
}

/* Each chunk costs its copy-engine stream ~6 us beyond its bytes (the
 * copy's launch and the signal's write, whose memory barrier waits for the
 * copy), so a chunk carries at least MKI_AGG_CE_CHUNK_MIN bytes, ~11 us at
 * the copy engine's rate: 2 H200, 2000x1032x1048, 8 chunks of 268 KB 70 us
 * per call, one chunk 33 us; 1024x8192x8192, 4 chunks 233 us, one 212
 * (bench/NOTES.md). */
#define MKI_AGG_CE_CHUNK_MIN (4ll << 20)

/* The rows a chunk should hold at least, for rows of row_bytes bytes. */
static inline int64_t mki_agg_chunk_floor(int64_t row_bytes)
{
    if (row_bytes < 1) row_bytes = 1;
    return (MKI_AGG_CE_CHUNK_MIN + row_bytes - 1) / row_bytes;
}

/* Rows of A in one GEMM tile (MKI_GEMM_BM; kernels/ag_gemm.cu checks). */
#define MKI_AGG_TILE_ROWS 128

/* This rank's rows are [lo, hi) of the gathered A.  The whole tiles among
 * them, rows [*d0, *d1), are read by the GEMM straight from the caller's A;
 * only the rows of the partial tiles at both ends, [lo, *d0) and [*d1, hi),
 * are copied into the arena.  No whole tile: *d0 = *d1 = hi (all copied). */
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

/* One launch of the fused GEMM (src/ops/ag_gemm.c fills it). */
struct mki_agg_launch {
    const void *a;          /* the gathered A in my arena's bank: M x K */
    const void *b;
    void *c;
    int64_t m, n, k;
    int dtype;              /* MKI_BF16 or MKI_F16 */
    int trans_b;
    int ctas;               /* compute CTAs (0: all SMs) */
    int nsrc;               /* local ranks = sources of rows */
    int64_t row_off[MKI_MAXLOCAL + 1]; /* gathered rows of source s start here */
    int64_t chunk_rows[MKI_MAXLOCAL];
    const void *own;        /* the caller's A, when the GEMM reads the */
    int64_t own_d0, own_d1; /* whole tiles of rows [own_d0, own_d1) from it
                             * (own_d0 == own_d1: every row from the arena) */
    uint64_t *sig;          /* my arena's signal array (device) */
    uint64_t target;        /* call number k */
    uint64_t *prof;         /* MKT_AGG_PROF: 4 words per CTA, or NULL */
    struct mki_coll_params cp; /* ws[], me, nranks, err, timeout, epoch, op */
};

/* Enqueue the fused GEMM on stream s; 0 or an error with msg set. */
int mki_agg_launch(const struct mki_agg_launch *l, void *stream, char *msg,
                   size_t len);
/* Load its kernels now (lazy loading can deadlock beside a spinning
 * stream). */
int mki_agg_preload(char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* MKI_AG_GEMM_H */
