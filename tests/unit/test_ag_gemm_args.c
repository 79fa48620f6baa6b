/*
 * test_ag_gemm_args.c - mkAllGatherGemm without a GPU: chunk arithmetic
 * and its control block, argument validation on one rank, and the first-call shape
 * check across real processes (fork + TCP bootstrap): a rank that passes
 * another k, n or row count is reported by name on every rank, and
 * nothing is computed; the cache of shapes already checked makes the same
 * choices on every rank though its hashes differ between ranks.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranks.h"
#include "mki.h"
#include "ops/ag_gemm.h"
#include "ops/op.h"

static void test_chunks(void)
{
    /* whole 128-row tiles, at least the wish, at most MKI_AGG_MAXCHUNKS */
    CHECK(mki_agg_chunk_rows(4096, 512) == 512);
    CHECK(mki_agg_chunk_rows(4096, 1) == 128);
    CHECK(mki_agg_chunk_rows(4096, 300) == 384);
    /* No chunk below MKI_AGG_CE_CHUNK_MIN: 4 MiB of 2096-byte rows (K =
     * 1048, bf16) is 2002 rows, so a 1000-row shard is one chunk; 16 KB
     * rows (K = 8192) give 256 rows; a row larger than 4 MiB, one row. */
    CHECK(mki_agg_chunk_floor(2096) == 2002);
    CHECK(mki_agg_nchunks(1000, mki_agg_chunk_rows(1000, mki_agg_chunk_floor(2096))) == 1);
    CHECK(mki_agg_chunk_floor(8192 * 2) == 256);
    CHECK(mki_agg_chunk_floor(8ll << 20) == 1);
    CHECK(mki_agg_chunk_floor(0) == MKI_AGG_CE_CHUNK_MIN);
    int64_t big = (int64_t)MKI_AGG_MAXCHUNKS * 128 * 3 + 1;
    int64_t cr = mki_agg_chunk_rows(big, 128);
    CHECK(cr % 128 == 0);
    CHECK(mki_agg_nchunks(big, cr) <= MKI_AGG_MAXCHUNKS);
    /* a rank with no rows still signals one chunk */
    CHECK(mki_agg_nchunks(0, 128) == 1);
    CHECK(mki_agg_nchunks(1, 128) == 1);
    CHECK(mki_agg_nchunks(129, 128) == 2);
    /* the whole tiles of my rows come from the caller's A, the rest of the
     * rows through the arena */
    int64_t d0, d1;
    mki_agg_own_direct(0, 4096, &d0, &d1);
    CHECK(d0 == 0 && d1 == 4096);
    mki_agg_own_direct(1000, 2000, &d0, &d1);
    CHECK(d0 == 1024 && d1 == 1920);
    mki_agg_own_direct(129, 4225, &d0, &d1);
    CHECK(d0 == 256 && d1 == 4224);
    mki_agg_own_direct(1000, 1200, &d0, &d1); /* one whole tile between */
    CHECK(d0 == 1024 && d1 == 1152);
    mki_agg_own_direct(1000, 1100, &d0, &d1); /* parts of two tiles */
    CHECK(d0 == d1 && d1 == 1100);
    mki_agg_own_direct(130, 300, &d0, &d1);   /* no whole tile */
    CHECK(d0 == d1 && d1 == 300);
    mki_agg_own_direct(256, 384, &d0, &d1);   /* exactly one tile */
    CHECK(d0 == 256 && d1 == 384);
    mki_agg_own_direct(5, 5, &d0, &d1);       /* no rows */
    CHECK(d0 == d1);
    /* The control block: words the copy engines and stream memory
     * operations touch are 8-byte aligned (32-bit waits on go's low half),
     * the signal array last. */
    CHECK(offsetof(struct mki_agg_ctl, go) % 8 == 0);
    CHECK(offsetof(struct mki_agg_ctl, sig) % 8 == 0);
    CHECK(offsetof(struct mki_agg_ctl, cur) % 8 == 0);
    CHECK(sizeof(((struct mki_agg_ctl *)0)->sig) ==
          8ull * MKI_MAXLOCAL * MKI_AGG_MAXCHUNKS);
    CHECK(offsetof(struct mki_agg_ctl, sig) + sizeof(((struct mki_agg_ctl *)0)->sig) ==
          sizeof(struct mki_agg_ctl));
    CHECK(offsetof(struct mki_agg_ctl, rsig) % 8 == 0);
    CHECK(sizeof(((struct mki_agg_ctl *)0)->rsig) == 8ull * MKI_AGG_MAXSRC * MKI_NB_CH);
    /* Across nodes: chunk j of a rank's rows on channel j % nnet; every
     * chunk on exactly one channel. */
    for (uint64_t n = 0; n < 40; n += 3)
        for (int nnet = 1; nnet <= 4; nnet *= 2) {
            uint64_t all = 0;
            for (int c = 0; c < nnet; c++) all += mki_agg_net_chunks(n, 4, nnet, c);
            CHECK(all == (n + 3) / 4);
        }
    CHECK(mki_agg_net_chunks(10 * 4, 4, 4, 0) == 3 && mki_agg_net_chunks(10 * 4, 4, 4, 1) == 3);
    CHECK(mki_agg_net_chunks(10 * 4, 4, 4, 2) == 2 && mki_agg_net_chunks(10 * 4, 4, 4, 3) == 2);
    CHECK(mki_agg_net_chunks(4, 4, 4, 1) == 0);
}

static char buf[4096] __attribute__((aligned(64)));
#define P ((void *)buf)

static void test_one_rank(void)
{
    mkUniqueId id;
    mkComm_t comm;
    CHECK_RES(mkGetUniqueId(&id), mkSuccess);
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkSuccess);
    int64_t mall[1] = {64};
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 64, 64, 0, mkBfloat16,
                              NULL, 0), mkErrInvalidArgument);
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 64, 64, 0, mkFloat32,
                              comm, 0), mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "mkFloat32");
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 64, 64, 0,
                              (mkDataType_t)9, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "dtype");
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 64, 64, 2, mkBfloat16,
                              comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "transB");
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, -1, NULL, 64, 64, 0, mkBfloat16,
                              comm, 0), mkErrInvalidArgument);
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 64, 60, 1, mkBfloat16,
                              comm, 0), mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "multiple of 8");
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, NULL, 60, 64, 0, mkFloat16,
                              comm, 0), mkErrUnsupported);
    /* n need not be a multiple of 8 with transB = 1: rejected only for
     * want of a GPU (or, on a GPU machine, because buf is host memory) */
    mkResult_t r = mkAllGatherGemm(P, P, P, NULL, 64, NULL, 60, 64, 1,
                                   mkFloat16, comm, 0);
    CHECK(r == mkErrUnsupported || r == mkErrInvalidArgument);
    CHECK_RES(mkAllGatherGemm(NULL, P, P, NULL, 64, NULL, 64, 64, 0,
                              mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "A is NULL");
    CHECK_RES(mkAllGatherGemm(P, P, NULL, NULL, 64, NULL, 64, 64, 0,
                              mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "C is NULL");
    /* A may be NULL when this rank holds no rows */
    r = mkAllGatherGemm(NULL, P, P, NULL, 0, NULL, 64, 64, 0, mkBfloat16,
                        comm, 0);
    CHECK(r != mkErrInvalidArgument || strstr(mkGetLastError(comm), "A is NULL") == NULL);
    mall[0] = 32;
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 64, mall, 64, 64, 0, mkBfloat16,
                              comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "m_all[0]");
    mall[0] = -5;
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, -5, mall, 64, 64, 0, mkBfloat16,
                              comm, 0), mkErrInvalidArgument);
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, (int64_t)1 << 40, NULL, 64, 64, 0,
                              mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_RES(mkAllGatherGemm(P, P, P, NULL, 1 << 30, NULL, 1 << 30, 1 << 20,
                              1, mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "too large");
    int ndev = 0;
    (void)ndev;
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

/* ---- the cache of checked shapes -------------------------------------- */

/* Each rank hashes its own row count into a shape's key, so the keys of
 * one call differ between ranks; every rank must still skip the check for
 * exactly the same calls, or one rank waits in a check the others skipped
 * (seen in the GPU soak: 8 ranks, per-rank rows, more shapes than the
 * cache holds).  Three ranks, 40 shapes, 4000 calls in a random order. */
static void test_shape_cache(void)
{
    enum { RANKS = 3, SHAPES = 40, CALLS = 4000 };
    struct mki_shape_cache cache[RANKS];
    memset(cache, 0, sizeof(cache));
    uint64_t x = 0x2545f4914f6cdd1dull;
    int hits = 0, misses = 0, agree = 1;
    for (int c = 0; c < CALLS; c++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* a small working set most of the time, sometimes any shape */
        const uint64_t shape = (x >> 40) % 8 ? (x >> 20) % 12 : (x >> 20) % SHAPES;
        int known0 = -1;
        for (int r = 0; r < RANKS; r++) {
            /* rank r's key: the shape and its own rows (shape + r) */
            const uint64_t h = mki_hash64(mki_hash64(1469598103934665603ull, shape),
                                          shape * 7 + (uint64_t)r);
            const int known = mki_shape_known(&cache[r], h);
            if (r == 0) known0 = known;
            else if (known != known0) agree = 0;
            if (!known) mki_shape_remember(&cache[r], h);
        }
        if (known0) hits++;
        else misses++;
    }
    CHECK(agree);
    CHECK(hits > CALLS / 2); /* the cache does hold shapes */
    CHECK(misses > SHAPES);  /* and turns them over */
    for (int r = 0; r < RANKS; r++) CHECK(cache[r].n == MKI_SHAPES);
}

/* ---- several processes: the shape check ----------------------------- */


#define EXPECT RANK_EXPECT

/* Rank 1 passes k = 136 where the others pass 128. */
static int mismatched_k(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    int64_t k = rank == 1 ? 136 : 128;
    mkResult_t r = mkAllGatherGemm(P, P, P, NULL, 64, NULL, 256, k, 0,
                                   mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "rank 1") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "k differs") != NULL);
    /* The same call again: checked again (not cached), same verdict. */
    r = mkAllGatherGemm(P, P, P, NULL, 64, NULL, 256, k, 0, mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    mkCommDestroy(comm);
    return 0;
}

/* Unequal shards: rank 2's m_all disagrees with what rank 0 holds. */
static int mismatched_rows(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    int64_t mall[3] = {100, 0, 28};
    if (rank == 2) mall[0] = 99;
    mkResult_t r = mkAllGatherGemm(P, P, P, NULL, mall[rank], mall, 64, 64, 1,
                                   mkFloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    if (rank == 2)
        EXPECT(strstr(mkGetLastError(comm), "rank 0 holds m_local = 100") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Shapes agree: every rank is rejected for the same local reason (no GPU
 * here), none for the shape, and nobody waits for anybody. */
static int matching(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkAllGatherGemm(P, P, P, NULL, 64, NULL, 256, 128, 1,
                                   mkBfloat16, comm, 0);
    EXPECT(r != mkSuccess);
    EXPECT(strstr(mkGetLastError(comm), "differs") == NULL);
    mkCommDestroy(comm);
    return 0;
}


int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    setenv("MK_TIMEOUT_MS", "20000", 1);
    test_chunks();
    test_shape_cache();
    /* forked ranks first: the parent must not have touched CUDA yet */
    CHECK(run_ranks(2, 2, new_id(), mismatched_k) == 0);
    CHECK(run_ranks(3, 3, new_id(), mismatched_rows) == 0);
    CHECK(run_ranks(2, 2, new_id(), matching) == 0);
    test_one_rank();
    TEST_DONE();
}
