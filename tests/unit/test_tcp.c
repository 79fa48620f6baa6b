/*
 * test_tcp - mkGetUniqueId / mkCommInitRank / mkCommSplit / mkCommAbort
 * across real processes (fork) on this host, through the TCP bootstrap.
 *
 * Every child has an alarm: a hang fails the test instead of blocking CI.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mki.h"
#include "check.h"
#include "ranks.h"


#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: FAIL %s:%d %s (%s)\n", rank, __FILE__,  \
                    __LINE__, #cond, mkGetLastError(NULL));                  \
            return 1;                                                        \
        }                                                                    \
    } while (0)

static int basic(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm, half;
    int v;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    EXPECT(mkCommRank(comm, &v) == mkSuccess && v == rank);
    EXPECT(mkCommSize(comm, &v) == mkSuccess && v == nranks);
    EXPECT(mkCommLocalRank(comm, &v) == mkSuccess && v == rank);
    EXPECT(mkCommLocalSize(comm, &v) == mkSuccess && v == nranks);
    EXPECT(mkCommNodeCount(comm, &v) == mkSuccess && v == 1);
    /* A bootstrap allgather of distinct values, several times and sizes. */
    for (size_t bytes = 1; bytes <= 300000; bytes *= 37) {
        unsigned char *buf = calloc((size_t)nranks, bytes);
        memset(buf + (size_t)rank * bytes, rank + 1, bytes);
        EXPECT(comm->boot->allgather(comm->boot_ctx, buf, bytes) == mkSuccess);
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < bytes; i++)
                EXPECT(buf[(size_t)r * bytes + i] == r + 1);
        free(buf);
    }
    int word = rank == 2 ? 4242 : -1;
    EXPECT(comm->boot->bcast(comm->boot_ctx, &word, sizeof(word), 2) == mkSuccess);
    EXPECT(word == 4242);
    EXPECT(comm->boot->barrier(comm->boot_ctx) == mkSuccess);
    /* Split by parity, key reversing the order. */
    EXPECT(mkCommSplit(comm, rank % 2, -rank, &half, NULL) == mkSuccess);
    EXPECT(mkCommSize(half, &v) == mkSuccess && v == nranks / 2);
    EXPECT(mkCommRank(half, &v) == mkSuccess && v == (nranks - 1 - rank) / 2);
    int mine = rank, all[64];
    all[(nranks - 1 - rank) / 2] = mine;
    EXPECT(half->boot->allgather(half->boot_ctx, all, sizeof(int)) == mkSuccess);
    for (int i = 0; i < nranks / 2; i++)
        EXPECT(all[i] % 2 == rank % 2);
    EXPECT(mkCommDestroy(half) == mkSuccess);
    /* NOCOLOR gives NULL. */
    mkComm_t none = (mkComm_t)&v;
    EXPECT(mkCommSplit(comm, rank == 0 ? MK_SPLIT_NOCOLOR : 1, 0, &none, NULL)
           == mkSuccess);
    if (rank == 0) EXPECT(none == NULL);
    else EXPECT(mkCommDestroy(none) == mkSuccess);
    EXPECT(mkCommDestroy(comm) == mkSuccess);
    return 0;
}

static int virtual_nodes(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm;
    int v;
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.nodeSize = 2;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, &cfg) == mkSuccess);
    EXPECT(mkCommNodeCount(comm, &v) == mkSuccess && v == (nranks + 1) / 2);
    EXPECT(mkCommLocalRank(comm, &v) == mkSuccess && v == rank % 2);
    EXPECT(mkCommLocalSize(comm, &v) == mkSuccess &&
           v == ((rank / 2) * 2 + 2 <= nranks ? 2 : 1));
    EXPECT(mkCommDestroy(comm) == mkSuccess);
    return 0;
}

static int late(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm;
    uint64_t t0 = mki_now_ns();
    setenv("MK_TIMEOUT_MS", "1500", 1);
    mkResult_t r = mkCommInitRank(&comm, nranks, id, rank, NULL);
    double s = (double)(mki_now_ns() - t0) / 1e9;
    EXPECT(r == mkErrTimeout);
    EXPECT(strstr(mkGetLastError(NULL), "missing: 2") != NULL);
    EXPECT(s < 10.0);
    return 0;
}

static int bad_cookie(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm;
    if (rank == 2) {
        struct mki_unique_id *u = (struct mki_unique_id *)id.internal;
        u->cookie ^= 1;
        mkResult_t r = mkCommInitRank(&comm, nranks, id, 0, NULL);
        EXPECT(r == mkErrBootstrap);
        EXPECT(strstr(mkGetLastError(NULL), "cookie") != NULL);
        return 0;
    }
    usleep(200000); /* let the intruder knock first */
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    EXPECT(comm->boot->barrier(comm->boot_ctx) == mkSuccess);
    EXPECT(mkCommDestroy(comm) == mkSuccess);
    return 0;
}

static int abort_peer(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    if (rank == 1) {
        EXPECT(mkCommAbort(comm) == mkSuccess);
        return 0;
    }
    uint64_t t0 = mki_now_ns();
    mkResult_t r = comm->boot->barrier(comm->boot_ctx);
    EXPECT(r == mkErrRemote);
    EXPECT((mki_now_ns() - t0) < 5000000000ull);
    mkCommDestroy(comm);
    return 0;
}

static int mismatch(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm;
    char buf[64] = {0};
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = rank == 0 ? comm->boot->allgather(comm->boot_ctx, buf, 16)
                             : comm->boot->allgather(comm->boot_ctx, buf, 8);
    EXPECT(r == mkErrInvalidUsage);
    EXPECT(strstr(mkGetLastError(NULL), "same collective calls") != NULL);
    mkCommDestroy(comm);
    return 0;
}


int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    setenv("MK_TIMEOUT_MS", "20000", 1);
    CHECK(run_ranks(4, 4, new_id(), basic) == 0);
    CHECK(run_ranks(5, 5, new_id(), virtual_nodes) == 0);
    CHECK(run_ranks(3, 2, new_id(), bad_cookie) == 0);
    CHECK(run_ranks(2, 2, new_id(), abort_peer) == 0);
    CHECK(run_ranks(2, 2, new_id(), mismatch) == 0);
    /* The root of this id waits 1.5 s for a third rank that never comes. */
    setenv("MK_TIMEOUT_MS", "1500", 1);
    mkUniqueId id = new_id();
    CHECK(run_ranks(2, 3, id, late) == 0);
    /* The id has been used: its root is gone. */
    usleep(200000);
    mkComm_t comm;
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkErrBootstrap);
    CHECK_CONTAINS(mkGetLastError(NULL), "mkGetUniqueId again");
    TEST_DONE();
}
