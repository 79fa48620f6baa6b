/*
 * test_moe_args.c - mkMoEDispatch, mkMoECombine, mkMoEDispatchGemm and
 * mkMoEDispatchFfnCombine without a GPU: every
 * argument check on one rank (the error, its code, a message naming the
 * call and the argument; nothing launched), the control block's layout,
 * and the first-call shape check across real processes (fork + TCP
 * bootstrap): a rank that passes another hidden, recv_capacity or
 * topk_weights is named on every rank.
 */
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
#include "ops/moe.h"

/* A non-NULL pointer that is never dereferenced: every call here fails
 * before it would touch memory. */
static char buf[1 << 12] __attribute__((aligned(64)));
#define P ((void *)buf)
#define PI ((int32_t *)buf)
#define PF ((float *)buf)
#define PL ((int64_t *)buf)

static mkResult_t dispatch(mkComm_t comm, const void *x, const int32_t *idx, const float *w,
                           void *recv, float *rw, int32_t *src, int64_t *off, int32_t *rows,
                           int64_t tokens, int64_t hidden, int64_t topk, int64_t experts,
                           int64_t cap, mkDataType_t dt)
{
    return mkMoEDispatch(x, idx, w, recv, rw, src, off, rows, tokens, hidden, topk, experts,
                         cap, dt, comm, 0);
}

static void test_layout(void)
{
    /* the signals a peer writes are single-writer words, 8-byte aligned */
    CHECK(offsetof(struct mki_moe_ctl, rec_tag) % 8 == 0);
    CHECK(sizeof(struct mki_moe_ctl) % 8 == 0);
    CHECK(MKI_MOE_MAXE == MK_MOE_MAX_EXPERTS);
    CHECK(MKI_MOE_MAXK == MK_MOE_MAX_TOPK);
    CHECK(MKI_MOE_REC_WORDS(256) == 256 + MKI_MAXLOCAL + 4);
    /* metadata padded to an even count, then the 64-bit tag: every slot's
     * tag 8-byte aligned for any topk */
    CHECK(MKI_MOE_META_WORDS(8) == 28);
    CHECK(MKI_MOE_META_WORDS(1) == 8);
    for (int k = 1; k <= MKI_MOE_MAXK; k++)
        CHECK(MKI_MOE_META_WORDS(k) % 2 == 0 && MKI_MOE_META_WORDS(k) >= 2 + 3 * k + 2);
    /* the launch parameters fit a launch descriptor */
    CHECK(sizeof(struct mki_moe_params) <= MKI_LAUNCH_PARAM_BYTES);
}

static void test_one_rank(void)
{
    mkUniqueId id;
    mkComm_t comm;
    CHECK_RES(mkGetUniqueId(&id), mkSuccess);
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkSuccess);
    /* no communicator */
    CHECK_RES(mkMoEDispatch(P, PI, PF, P, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16, NULL, 0),
              mkErrInvalidArgument);
    CHECK_RES(mkMoECombine(P, PL, PI, PF, PI, P, 4, 64, 2, 8, 64, mkBfloat16, NULL, 0),
              mkErrInvalidArgument);
    struct {
        int64_t tokens, hidden, topk, experts, cap;
        int dt;
        const char *msg;
    } bad[] = {
        {4, 64, 2, 8, 64, 9, "dtype"},
        {-1, 64, 2, 8, 64, 0, "negative"},
        {4, 64, 2, 8, -5, 0, "negative"},
        {4, 0, 2, 8, 64, 0, "hidden = 0"},
        {4, 12, 2, 8, 64, 0, "multiple of 8"},
        {4, 64, 0, 8, 64, 0, "topk = 0"},
        {4, 64, 33, 8, 64, 0, "topk = 33"},
        {4, 64, 2, 0, 64, 0, "experts = 0"},
        {4, 64, 2, 4097, 64, 0, "experts = 4097"},
        {(int64_t)1 << 30, 64, 8, 8, 64, 0, "2^31"},
        {4, 64, 2, 8, (int64_t)1 << 29, 0, "recv_capacity"},
        {4, 1 << 20, 2, 8, (int64_t)1 << 22, 2, "1 TiB"},
    };
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_RES(dispatch(comm, P, PI, PF, P, PF, PI, PL, PI, bad[i].tokens, bad[i].hidden,
                           bad[i].topk, bad[i].experts, bad[i].cap, (mkDataType_t)bad[i].dt),
                  mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "mkMoEDispatch");
        CHECK_CONTAINS(mkGetLastError(comm), bad[i].msg);
        CHECK_RES(mkMoECombine(P, PL, PI, PF, PI, P, bad[i].tokens, bad[i].hidden, bad[i].topk,
                               bad[i].experts, bad[i].cap, (mkDataType_t)bad[i].dt, comm, 0),
                  mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "mkMoECombine");
        CHECK_CONTAINS(mkGetLastError(comm), bad[i].msg);
    }
    /* NULL where something is needed */
    CHECK_RES(dispatch(comm, NULL, PI, PF, P, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "x is NULL");
    CHECK_RES(dispatch(comm, P, NULL, PF, P, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "topk_idx is NULL");
    CHECK_RES(dispatch(comm, P, PI, PF, P, PF, PI, PL, NULL, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "send_rows is NULL");
    CHECK_RES(dispatch(comm, P, PI, PF, P, PF, PI, NULL, PI, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "expert_offsets is NULL");
    CHECK_RES(dispatch(comm, P, PI, PF, NULL, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "recv is NULL");
    CHECK_RES(dispatch(comm, P, PI, NULL, P, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "recv_weights is given but topk_weights is NULL");
    CHECK_RES(mkMoECombine(P, PL, PI, PF, PI, NULL, 4, 64, 2, 8, 64, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "out is NULL");
    CHECK_RES(mkMoECombine(P, NULL, PI, PF, PI, P, 4, 64, 2, 8, 64, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "expert_offsets is NULL");
    CHECK_RES(mkMoECombine(P, PL, PI, PF, NULL, P, 4, 64, 2, 8, 64, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "send_rows is NULL");
    /* no tokens, no capacity: x, topk_idx, send_rows, recv may be NULL;
     * without a GPU the call still fails for want of one, never for them */
    mkResult_t r = dispatch(comm, NULL, NULL, NULL, NULL, NULL, NULL, PL, NULL, 0, 64, 2, 8, 0,
                            mkBfloat16);
    CHECK(r == mkSuccess || strstr(mkGetLastError(comm), "NULL") == NULL);
    r = mkMoECombine(NULL, PL, NULL, NULL, NULL, NULL, 0, 64, 2, 8, 0, mkBfloat16, comm, 0);
    CHECK(r == mkSuccess || strstr(mkGetLastError(comm), "NULL") == NULL);
    /* mkMoEDispatchGemm: its own arguments */
    struct {
        int64_t hidden, n;
        int transw, dt, want;
        const char *msg;
    } gbad[] = {
        {64, 0, 1, 0, mkErrInvalidArgument, "n = 0"},
        {64, 12, 1, 0, mkErrInvalidArgument, "multiple of 8"},
        {64, 64, 2, 0, mkErrInvalidArgument, "transW = 2"},
        {72, 64, 0, 0, mkErrInvalidArgument, "multiple of 64"},
        {64, 64, 1, 2, mkErrUnsupported, "mkFloat32"},
    };
    for (unsigned i = 0; i < sizeof(gbad) / sizeof(gbad[0]); i++) {
        CHECK_RES(mkMoEDispatchGemm(P, PI, PF, P, P, PF, PI, PL, PI, 4, gbad[i].hidden,
                                    gbad[i].n, 2, 8, 512, gbad[i].transw,
                                    (mkDataType_t)gbad[i].dt, comm, 0),
                  gbad[i].want);
        CHECK_CONTAINS(mkGetLastError(comm), "mkMoEDispatchGemm");
        CHECK_CONTAINS(mkGetLastError(comm), gbad[i].msg);
    }
    CHECK_RES(mkMoEDispatchGemm(P, PI, PF, NULL, P, PF, PI, PL, PI, 4, 64, 64, 2, 8, 512, 1,
                                mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "W is NULL");
    CHECK_RES(mkMoEDispatchGemm(P, PI, PF, P, NULL, PF, PI, PL, PI, 4, 64, 64, 2, 8, 512, 1,
                                mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "y is NULL");
    CHECK_RES(mkMoEDispatchGemm(P, PI, PF, P, P, PF, PI, PL, PI, 4, 64, 64, 2, 8, 512, 1,
                                mkBfloat16, NULL, 0), mkErrInvalidArgument);
    /* mkMoEDispatchFfnCombine: its own arguments (inter in n's place) */
    struct {
        int64_t hidden, inter;
        int transw, dt, want;
        const char *msg;
    } lbad[] = {
        {64, 0, 1, 0, mkErrInvalidArgument, "inter = 0"},
        {64, 12, 1, 0, mkErrInvalidArgument, "multiple of 8"},
        {64, 64, 3, 0, mkErrInvalidArgument, "transW = 3"},
        {72, 64, 0, 0, mkErrInvalidArgument, "multiples of 64"},
        {64, 72, 0, 0, mkErrInvalidArgument, "multiples of 64"},
        {64, 64, 1, 2, mkErrUnsupported, "mkFloat32"},
        {60, 64, 1, 0, mkErrInvalidArgument, "hidden = 60"},
    };
    for (unsigned i = 0; i < sizeof(lbad) / sizeof(lbad[0]); i++) {
        CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, P, P, P, 4, lbad[i].hidden, lbad[i].inter, 2,
                                          8, 512, lbad[i].transw, (mkDataType_t)lbad[i].dt,
                                          comm, 0),
                  lbad[i].want);
        CHECK_CONTAINS(mkGetLastError(comm), "mkMoEDispatchFfnCombine");
        CHECK_CONTAINS(mkGetLastError(comm), lbad[i].msg);
    }
    CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, NULL, P, P, 4, 64, 64, 2, 8, 512, 1,
                                      mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "W13 is NULL");
    CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, P, NULL, P, 4, 64, 64, 2, 8, 512, 1,
                                      mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "W2 is NULL");
    CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, P, P, NULL, 4, 64, 64, 2, 8, 512, 1,
                                      mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "out is NULL");
    CHECK_RES(mkMoEDispatchFfnCombine(NULL, PI, PF, P, P, P, 4, 64, 64, 2, 8, 512, 1,
                                      mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "x is NULL");
    CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, P, P, P, 4, 64, 64, 2, 0, 512, 1,
                                      mkBfloat16, comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "experts = 0");
    CHECK_RES(mkMoEDispatchFfnCombine(P, PI, PF, P, P, P, 4, 64, 64, 2, 8, 512, 1,
                                      mkBfloat16, NULL, 0), mkErrInvalidArgument);
    /* host memory: never launched (no GPU here, or not device memory) */
    CHECK(dispatch(comm, P, PI, PF, P, PF, PI, PL, PI, 4, 64, 2, 8, 64, mkBfloat16) != mkSuccess);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

/* ---- several processes: the shape check ----------------------------- */

#define EXPECT RANK_EXPECT

/* Rank 1 passes hidden = 72 where the others pass 64. */
static int mismatched_hidden(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = dispatch(comm, P, PI, PF, P, PF, PI, PL, PI, 4 + rank, rank == 1 ? 72 : 64, 2,
                            8 * nranks, 64, mkBfloat16);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "rank 1") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "hidden differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 2 passes another recv_capacity. */
static int mismatched_cap(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkMoECombine(P, PL, PI, PF, PI, P, 3, 64, 2, 3, rank == 2 ? 100 : 64,
                                mkFloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "recv_capacity differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 0 passes no weights. */
static int mismatched_weights(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = dispatch(comm, P, PI, rank == 0 ? NULL : PF, P, NULL, PI, PL, PI, 4, 64, 2,
                            2, 64, mkBfloat16);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "topk_weights") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* mkMoEDispatchGemm: rank 1 passes another n. */
static int mismatched_n(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkMoEDispatchGemm(P, PI, PF, P, P, PF, PI, PL, PI, 4, 64, rank == 1 ? 128 : 64,
                                     2, 2, 512, 1, mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "n differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* mkMoEDispatchFfnCombine: rank 1 passes another inter. */
static int mismatched_inter(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkMoEDispatchFfnCombine(P, PI, PF, P, P, P, 4, 64, rank == 1 ? 128 : 64, 2, 2,
                                           512, 1, mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "inter differs") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "mkMoEDispatchFfnCombine") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Shapes agree, tokens differ: every rank is rejected for the same local
 * reason (no GPU here), none for the shape. */
static int matching(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = dispatch(comm, P, PI, PF, P, PF, PI, PL, PI, 1 + 7 * rank, 64, 2, 2, 64,
                            mkBfloat16);
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
    test_layout();
    /* forked ranks first: the parent must not have touched CUDA yet */
    CHECK(run_ranks(2, 2, new_id(), mismatched_hidden) == 0);
    CHECK(run_ranks(3, 3, new_id(), mismatched_cap) == 0);
    CHECK(run_ranks(2, 2, new_id(), mismatched_weights) == 0);
    CHECK(run_ranks(2, 2, new_id(), matching) == 0);
    CHECK(run_ranks(2, 2, new_id(), mismatched_n) == 0);
    CHECK(run_ranks(2, 2, new_id(), mismatched_inter) == 0);
    test_one_rank();
    TEST_DONE();
}
