/*
 * test_attn_args.c - mkRingAttention without a GPU: the readiness chunks
 * that the host's copies and the kernel share (attn/attn.h) and the ring's
 * control block (ops/attn.h), every argument check on one rank (the error,
 * its code, a message naming the call and the argument; nothing
 * launched), and the first-call shape check across real processes (fork +
 * TCP bootstrap): a rank that passes another heads, scale or mask is
 * named on every rank, and more ranks than the core takes are refused on
 * every rank.
 */
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ranks.h"
#include "mki.h"
#include "ops/attn.h"

/* Every chunk of a segment, in order, tiles it exactly: each starts where
 * the one before ended, and together they hold all of its bytes. */
static void check_tiling(int layout, int64_t batch, int64_t kvh, int64_t seq, int64_t d,
                         int64_t cr)
{
    const int64_t es = 2, n = mki_attn_nchunks(layout, batch, kvh, seq, cr);
    int64_t at = 0, off, len;
    int ok = 1;
    for (int64_t c = 0; c < n; c++) {
        mki_attn_chunk(layout, batch, kvh, seq, d, es, cr, c, &off, &len);
        ok &= off == at && len >= 0 && len <= cr * (layout == MKI_ATTN_BHSD ? 1 : kvh) * d * es;
        at += len;
    }
    CHECK(ok);
    CHECK(at == batch * seq * kvh * d * es);
}

static void test_chunks(void)
{
    /* at least MKI_RATT_CE_CHUNK_MIN bytes of k per chunk, whole 128-row
     * blocks: BSHD rows of 8 kv heads x 128 x bf16 = 2 KiB -> 2048 rows */
    CHECK(mki_attn_chunk_rows(MKI_ATTN_BSHD, 1, 8, 16384, 2048, MKI_RATT_CE_CHUNK_MIN) == 2048);
    CHECK(mki_attn_nchunks(MKI_ATTN_BSHD, 1, 8, 16384, 2048) == 8);
    CHECK(mki_attn_nchunks(MKI_ATTN_BSHD, 3, 8, 16384, 2048) == 24);
    /* BHSD: rows of one head; a chunk per (batch, kv head) at least */
    CHECK(mki_attn_chunk_rows(MKI_ATTN_BHSD, 4, 8, 4096, 256, MKI_RATT_CE_CHUNK_MIN) == 16384);
    CHECK(mki_attn_nchunks(MKI_ATTN_BHSD, 4, 8, 4096, 16384) == 32);
    /* rows larger than the minimum: one block of 128 rows */
    CHECK(mki_attn_chunk_rows(MKI_ATTN_BSHD, 1, 64, 1000, 8ll << 20, 4096) == 128);
    /* few enough chunks for the flags, still whole blocks */
    int64_t cr = mki_attn_chunk_rows(MKI_ATTN_BSHD, 1, 1, 1ll << 29, 256, MKI_RATT_CE_CHUNK_MIN);
    CHECK(cr % MKI_ATTN_BN == 0);
    CHECK(mki_attn_nchunks(MKI_ATTN_BSHD, 1, 1, 1ll << 29, cr) <= MKI_ATTN_MAXCHUNKS);
    CHECK(mki_attn_nchunks(MKI_ATTN_BSHD, 1, 1, 1ll << 29, cr / 2) > MKI_ATTN_MAXCHUNKS);
    /* every call carries a flag, even with no rows */
    CHECK(mki_attn_nchunks(MKI_ATTN_BSHD, 0, 8, 0, 128) == 1);
    CHECK(mki_attn_nchunks(MKI_ATTN_BHSD, 2, 4, 0, 128) >= 1);
    /* the chunks tile a segment exactly, odd sizes included */
    check_tiling(MKI_ATTN_BSHD, 3, 2, 1000, 64, 256);
    check_tiling(MKI_ATTN_BHSD, 3, 2, 1000, 64, 256);
    check_tiling(MKI_ATTN_BSHD, 1, 8, 4097, 128, 128);
    check_tiling(MKI_ATTN_BHSD, 2, 1, 100, 128, 2048);
    /* The control block: words the copy engines and stream memory
     * operations touch are 8-byte aligned (32-bit waits on go's low half),
     * the flags last. */
    CHECK(offsetof(struct mki_ratt_ctl, go) % 8 == 0);
    CHECK(offsetof(struct mki_ratt_ctl, sig) % 8 == 0);
    CHECK(offsetof(struct mki_ratt_ctl, released) % 8 == 0);
    CHECK(sizeof(((struct mki_ratt_ctl *)0)->sig) == 8ull * MKI_MAXLOCAL * MKI_ATTN_MAXCHUNKS);
    CHECK(offsetof(struct mki_ratt_ctl, sig) + sizeof(((struct mki_ratt_ctl *)0)->sig) ==
          sizeof(struct mki_ratt_ctl));
    /* a segment for every rank of a node, and the API's values are the core's */
    CHECK(MKI_ATTN_MAXSEG >= MKI_MAXLOCAL);
    CHECK((int)mkAttnBSHD == MKI_ATTN_BSHD && (int)mkAttnBHSD == MKI_ATTN_BHSD);
    CHECK((int)mkBfloat16 == MKI_BF16 && (int)mkFloat16 == MKI_F16);
}

/* A non-NULL pointer that is never dereferenced: every call here fails
 * before it would touch memory. */
static char buf[1 << 12] __attribute__((aligned(64)));
#define P ((void *)buf)
#define PF ((float *)buf)

struct shape {
    int64_t batch, seq, heads, kvh, d;
    int layout, mask;
    float scale;
    int dt;
};

static const struct shape good = {2, 1024, 8, 2, 128, mkAttnBSHD, mkAttnCausalZigzag, 0.088f,
                                  mkBfloat16};

static mkResult_t attn(mkComm_t comm, const void *q, const void *k, const void *v, void *o,
                       float *lse, struct shape s)
{
    return mkRingAttention(q, k, v, o, lse, s.batch, s.seq, s.heads, s.kvh, s.d,
                           (mkAttnLayout_t)s.layout, (mkAttnMask_t)s.mask, s.scale,
                           (mkDataType_t)s.dt, comm, 0);
}

static struct shape with(int what, int64_t x)
{
    struct shape s = good;
    switch (what) {
    case 0: s.batch = x; break;
    case 1: s.seq = x; break;
    case 2: s.heads = x; break;
    case 3: s.kvh = x; break;
    case 4: s.d = x; break;
    case 5: s.layout = (int)x; break;
    case 6: s.mask = (int)x; break;
    case 7: s.dt = (int)x; break;
    default: break;
    }
    return s;
}

static void test_bad_shapes(mkComm_t comm)
{
    struct {
        int what;
        int64_t x;
        mkResult_t want;
        const char *msg;
    } bad[] = {
        {7, mkFloat32, mkErrUnsupported, "mkFloat32"},
        {7, 9, mkErrInvalidArgument, "dtype = 9"},
        {5, 2, mkErrInvalidArgument, "layout = 2"},
        {5, -1, mkErrInvalidArgument, "layout = -1"},
        {6, 3, mkErrInvalidArgument, "mask = 3"},
        {0, -1, mkErrInvalidArgument, "negative"},
        {1, -4, mkErrInvalidArgument, "negative"},
        {3, -2, mkErrInvalidArgument, "negative"},
        {4, 96, mkErrUnsupported, "head_dim = 96"},
        {4, 0, mkErrUnsupported, "head_dim = 0"},
        {4, 256, mkErrUnsupported, "64 or 128"},
        {3, 0, mkErrInvalidArgument, "kv_heads = 0"},
        {3, 3, mkErrInvalidArgument, "divide heads"},
        {1, 1001, mkErrInvalidArgument, "seq_local = 1001 is odd"},
        {0, 1ll << 40, mkErrInvalidArgument, "too large"},
        {2, 1ll << 62, mkErrInvalidArgument, "too large"},
        /* within the byte limits, beyond the kernel's 32-bit counts */
        {2, 1ll << 16, mkErrUnsupported, "32-bit"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct shape s = with(bad[i].what, bad[i].x);
        if (bad[i].what == 2) s.kvh = 1;
        CHECK_RES(attn(comm, P, P, P, P, PF, s), bad[i].want);
        CHECK_CONTAINS(mkGetLastError(comm), "mkRingAttention");
        CHECK_CONTAINS(mkGetLastError(comm), bad[i].msg);
    }
    const float scales[] = {0.0f, -0.5f, NAN, INFINITY};
    for (unsigned i = 0; i < sizeof(scales) / sizeof(scales[0]); i++) {
        struct shape s = good;
        s.scale = scales[i];
        CHECK_RES(attn(comm, P, P, P, P, PF, s), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "scale = ");
    }
    /* an odd seq_local is fine without the zigzag: refused for want of a
     * GPU (or host memory), never for the length */
    struct shape odd = with(1, 1001);
    odd.mask = mkAttnCausal;
    CHECK(attn(comm, P, P, P, P, PF, odd) != mkSuccess);
    CHECK(strstr(mkGetLastError(comm), "odd") == NULL);
}

static void test_one_rank(void)
{
    mkUniqueId id;
    mkComm_t comm;
    CHECK_RES(mkGetUniqueId(&id), mkSuccess);
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkSuccess);
    CHECK_RES(attn(NULL, P, P, P, P, PF, good), mkErrInvalidArgument);
    test_bad_shapes(comm);
    /* NULL where there is work (lse alone may be NULL) */
    const char *names[] = {"q is NULL", "k is NULL", "v is NULL", "o is NULL"};
    for (int i = 0; i < 4; i++) {
        const void *p[4] = {P, P, P, P};
        p[i] = NULL;
        CHECK_RES(attn(comm, p[0], p[1], p[2], (void *)p[3], PF, good), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), names[i]);
    }
    CHECK(attn(comm, P, P, P, P, NULL, good) != mkSuccess);
    CHECK(strstr(mkGetLastError(comm), "NULL") == NULL);
    /* no work (batch, seq_local or heads 0): every pointer may be NULL;
     * without a GPU the call still fails for want of one, never for them */
    for (int what = 0; what < 3; what++) {
        struct shape s = with(what, 0);
        mkResult_t r = attn(comm, NULL, NULL, NULL, NULL, NULL, s);
        CHECK(r == mkSuccess || strstr(mkGetLastError(comm), "NULL") == NULL);
    }
    /* host memory: never launched (no GPU here, or not device memory) */
    CHECK(attn(comm, P, P, P, P, PF, good) != mkSuccess);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

/* ---- several processes: the shape check ----------------------------- */

#define EXPECT RANK_EXPECT

/* Rank 1 passes heads = 16 where the others pass 8. */
static int mismatched_heads(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    struct shape s = good;
    if (rank == 1) s.heads = 16;
    EXPECT(attn(comm, P, P, P, P, PF, s) == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "rank 1") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "heads differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 2 passes another scale (the next float: compared bit for bit). */
static int mismatched_scale(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    struct shape s = good;
    if (rank == 2) {
        uint32_t bits;
        memcpy(&bits, &s.scale, sizeof(bits));
        bits++;
        memcpy(&s.scale, &bits, sizeof(bits));
    }
    EXPECT(attn(comm, P, P, P, P, PF, s) == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "scale differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 0 passes the contiguous causal mask, the others the zigzag. */
static int mismatched_mask(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    struct shape s = good;
    if (rank == 0) s.mask = mkAttnCausal;
    EXPECT(attn(comm, P, P, P, P, PF, s) == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "mask differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Shapes agree: every rank is rejected for the same local reason (no GPU
 * here), none for the shape. */
static int matching(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    EXPECT(attn(comm, P, P, P, P, PF, good) != mkSuccess);
    EXPECT(strstr(mkGetLastError(comm), "differs") == NULL);
    mkCommDestroy(comm);
    return 0;
}

/* More ranks than the core takes keys of: refused on every rank. */
static int too_many(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    EXPECT(attn(comm, P, P, P, P, PF, good) == mkErrUnsupported);
    EXPECT(strstr(mkGetLastError(comm), "at most 8 ranks") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* The tile order (mki_attn_tile) visits every (head, query block) once;
 * without a mask head after head, the last block first; under a causal
 * mask band after band from the last block, so that a tile never comes
 * after one of a lighter band. */
static void test_tile_order(void)
{
    static const int nqbs[] = {1, 5, 15, 16, 17, 32, 86, 129};
    static const int bhs[] = {1, 3, 64};
    for (size_t i = 0; i < sizeof(nqbs) / sizeof(nqbs[0]); i++)
        for (size_t j = 0; j < sizeof(bhs) / sizeof(bhs[0]); j++)
            for (int causal = 0; causal < 2; causal++) {
                const int nqb = nqbs[i], bh = bhs[j], n = nqb * bh;
                char *seen = calloc((size_t)n, 1);
                int ok = seen != NULL, ordered = 1, last_band = 0;
                for (int t = 0; ok && t < n; t++) {
                    int h = -1, qb = -1;
                    mki_attn_tile(t, nqb, bh, causal, &h, &qb);
                    ok = h >= 0 && h < bh && qb >= 0 && qb < nqb && !seen[h * nqb + qb];
                    if (!ok) break;
                    seen[h * nqb + qb] = 1;
                    if (!causal) {
                        ordered &= h == t / nqb && qb == nqb - 1 - t % nqb;
                    } else {
                        const int band = (nqb - 1 - qb) / MKI_ATTN_BAND;
                        ordered &= band >= last_band;
                        last_band = band;
                    }
                }
                if (!ok || !ordered)
                    printf("tile order: nqb %d, bh %d, causal %d: %s\n", nqb, bh, causal,
                           !ok ? "not a bijection" : "out of order");
                CHECK(ok && ordered);
                free(seen);
            }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    setenv("MK_TIMEOUT_MS", "20000", 1);
    test_chunks();
    test_tile_order();
    /* forked ranks first: the parent must not have touched CUDA yet */
    CHECK(run_ranks(2, 2, new_id(), mismatched_heads) == 0);
    CHECK(run_ranks(3, 3, new_id(), mismatched_scale) == 0);
    CHECK(run_ranks(2, 2, new_id(), mismatched_mask) == 0);
    CHECK(run_ranks(2, 2, new_id(), matching) == 0);
    CHECK(run_ranks(9, 9, new_id(), too_many) == 0);
    test_one_rank();
    TEST_DONE();
}
