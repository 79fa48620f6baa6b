/*
 * attn.h - the attention core (kernels/attn/attn.cu): a FlashAttention-
 * style forward on Hopper (TMA, wgmma, fp32 online softmax), for the
 * library's mkRingAttention and for tools that time the core alone.  C99
 * and CUDA C++; no CUDA headers.
 *
 * One launch computes, for every (batch, head, block of queries: 192 at
 * head_dim 64, 128 at 128), softmax(scale q k^T) v over the keys of up
 * to MKI_ATTN_MAXSEG segments (a ring's ranks: this rank's keys and those
 * that arrived from peers), in one pass: the online softmax carries
 * across segments, so the partial results of a ring need no merge.
 * Positions (for the causal mask) are piecewise: local row i of a tensor
 * is at global position i < split ? off0 + i : off1 + (i - split) (a
 * zigzag rank holds two chunks of the sequence).  A key is seen by a
 * query when the mask is off or its position is not after the query's.
 *
 * Readiness: a segment with `flags` waits, before loading keys of chunk
 * c, until flags[c] >= flag_target (a deadline wait on the communicator's
 * abort word and MK_TIMEOUT_MS when `rt` is given).  Chunks are the
 * contiguous pieces a copy engine moves: rows [j cr, (j + 1) cr) of the
 * segment, cr = chunk_rows, of batch b (BSHD: all kv heads; BHSD: one kv
 * head): c = (b * nh + h) * nsc + j with nh = kv_heads (BHSD) or 1 (BSHD)
 * and nsc = ceil(seq / cr).
 */
#ifndef MKI_ATTN_H
#define MKI_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "rt/hd.h"

#define MKI_ATTN_MAXSEG 8     /* key segments per launch (MKI_MAXLOCAL) */
#define MKI_ATTN_BN 128       /* keys per block */

enum { MKI_ATTN_BSHD = 0, MKI_ATTN_BHSD = 1 };

/* Error codes (same values as the GEMM engine's, gemm.h). */
#define MKI_ATTN_OK 0
#define MKI_ATTN_ERR_INVALID 1
#define MKI_ATTN_ERR_UNSUPPORTED 2
#define MKI_ATTN_ERR_CUDA 3

struct mki_attn_pos {
    int64_t split, off0, off1; /* local row i -> global position (above) */
};

struct mki_attn_seg {
    const void *k, *v;         /* [batch, seq, kv_heads, d] or [batch, kv_heads, seq, d] */
    struct mki_attn_pos pos;
    const uint64_t *flags;     /* NULL: already there */
};

struct mki_attn_args {
    const void *q;
    void *o;
    float *lse;                /* [batch, heads, seq] (NULL: not written) */
    int64_t batch, seq, heads, kv_heads, head_dim; /* seq: rows of q and of each segment */
    int layout;                /* MKI_ATTN_BSHD / MKI_ATTN_BHSD */
    int dtype;                 /* MKI_BF16 / MKI_F16 (rt/rt.h) */
    float scale;
    int causal;
    struct mki_attn_pos qpos;
    int nseg;
    struct mki_attn_seg seg[MKI_ATTN_MAXSEG];
    int64_t chunk_rows;        /* readiness chunks (segments with flags) */
    uint64_t flag_target;
    int ctas;                  /* persistent grid (0: one CTA per SM) */
};


/* ---- readiness chunks (shared by the host that copies and the kernel) -- */

#define MKI_ATTN_MAXCHUNKS 1024   /* chunks of one segment, at most */

static inline int64_t mki_attn_nsc(int64_t seq, int64_t cr)
{
    return seq <= 0 || cr <= 0 ? 1 : (seq + cr - 1) / cr;
}

/* Chunks of one segment (at least 1, so that every call carries a flag). */
static inline int64_t mki_attn_nchunks(int layout, int64_t batch, int64_t kv_heads, int64_t seq,
                                       int64_t cr)
{
    const int64_t n = batch * (layout == MKI_ATTN_BHSD ? kv_heads : 1) * mki_attn_nsc(seq, cr);
    return n < 1 ? 1 : n;
}

/* Rows per chunk: at least min_bytes of k per chunk (a copy engine's
 * launch costs some us), a multiple of MKI_ATTN_BN, and few enough chunks
 * for MKI_ATTN_MAXCHUNKS.  row_bytes: one row of k (BSHD: kv_heads x d
 * elements, BHSD: d). */
static inline int64_t mki_attn_chunk_rows(int layout, int64_t batch, int64_t kv_heads,
                                          int64_t seq, int64_t row_bytes, int64_t min_bytes)
{
    const int64_t bn = MKI_ATTN_BN;
    int64_t cr = row_bytes > 0 ? (min_bytes + row_bytes - 1) / row_bytes : bn;
    cr = (cr + bn - 1) / bn * bn;
    if (cr < bn) cr = bn;
    /* (batch x heads pieces above MKI_ATTN_MAXCHUNKS stay above at any cr:
     * stop at a whole segment; the caller checks the count) */
    while (mki_attn_nchunks(layout, batch, kv_heads, seq, cr) > MKI_ATTN_MAXCHUNKS && cr < seq)
        cr *= 2;
    return cr;
}

/* Chunk c of a segment: its byte offset and length in k (and in v). */
static inline void mki_attn_chunk(int layout, int64_t batch, int64_t kv_heads, int64_t seq,
                                  int64_t d, int64_t es, int64_t cr, int64_t c, int64_t *off,
                                  int64_t *len)
{
    const int64_t nsc = mki_attn_nsc(seq, cr);
    const int64_t j = c % nsc, bh = c / nsc;
    const int64_t r0 = j * cr, rows = seq - r0 < cr ? seq - r0 : cr;
    const int64_t row = (layout == MKI_ATTN_BHSD ? 1 : kv_heads) * d * es;
    (void)batch;
    *off = (bh * seq + r0) * row;
    *len = rows > 0 ? rows * row : 0;
}

/* ---- the order of a call's tiles -------------------------------------- */

#define MKI_ATTN_BAND 16 /* query blocks of one band (causal order) */

/* Tile t (0 .. bh x nqb - 1) of a call: its (batch x head) index *bh_out
 * and its query block *qb_out.  Without a mask, head after head (the tiles
 * running at once share their head's k and v in L2), the last query block
 * first.  Under a causal mask the heaviest tiles of every head come first,
 * band after band of MKI_ATTN_BAND query blocks from the last one, head
 * after head inside a band: tiles of similar work run together and the
 * light ones end the call (a head at a time left the busiest SMs of the
 * zigzag ring with twice the mean work), while a round of the grid still
 * spans few heads.  A bijection onto [0, bh) x [0, nqb). */
MKI_HD void mki_attn_tile(int t, int nqb, int bh, int causal, int *bh_out, int *qb_out)
{
    int h, r; /* r: query blocks from the last */
    if (!causal) {
        h = t / nqb;
        r = t % nqb;
    } else {
        const int band = MKI_ATTN_BAND, full = nqb / band, in_full = full * band * bh;
        if (t < in_full) {
            const int b = t / (band * bh), u = t % (band * bh);
            h = u / band;
            r = b * band + u % band;
        } else { /* the last band, narrower */
            const int w = nqb - full * band, u = t - in_full;
            h = u / w;
            r = full * band + u % w;
        }
    }
    *bh_out = h;
    *qb_out = nqb - 1 - r;
}

#ifdef __cplusplus
extern "C" {
#endif
/* Check the arguments the kernel needs (head_dim 64 or 128, dtype, sizes
 * that fit 32-bit tile counts, 16-byte alignment); MKI_ATTN_OK or an
 * error with msg set.  No CUDA call. */
int mki_attn_validate(const struct mki_attn_args *a, char *msg, size_t len);
/* Launch the core alone on stream (void *: cudaStream_t), no readiness
 * flags (segments' flags must be NULL): for tools and tests. */
int mki_attn_run(const struct mki_attn_args *a, void *stream, char *msg, size_t len);
/* Load the kernels now. */
int mki_attn_preload(char *msg, size_t len);
#ifdef __cplusplus
}
#endif
#endif /* MKI_ATTN_H */
