/*
 * test_comm - communicators under a real launcher, checked against MPI.
 *
 * tests/mpi/run.sh starts it with mpirun -np 4 in one of these modes:
 *   mpi       mkCommInit (PMIx) and mkGetUniqueId + MPI_Bcast +
 *             mkCommInitRank compared with MPI_Comm_rank/size and an
 *             MPI_COMM_TYPE_SHARED split; bootstrap collectives; a split
 *             by parity; config->nodeSize = 2; a rank that never arrives
 *             at mkCommInitRank;
 *   nodesize  mkCommInit with MK_NODE_SIZE=2 in the environment;
 *   fence     no MPI: mkCommInit, then rank 3 stays away from a bootstrap
 *             barrier, which must end within the deadline on the others
 *             (mkErrTimeout, or mkErrRemote where a neighbour gave up
 *             first and closed its connection), not hang.
 * Each rank prints "rank R: N passed, M failed" and exits 1 on a failure;
 * alarm() turns any hang into a failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "mki.h"
#include "../unit/check.h"

static int my_rank = -1;

#define RCHECK(call)                                                         \
    do {                                                                     \
        mkResult_t r_ = (call);                                              \
        if (r_ == mkSuccess) {                                               \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s: %s (%s)\n", my_rank,   \
                    __FILE__, __LINE__, #call, mkGetErrorString(r_),         \
                    mkGetLastError(NULL));                                   \
        }                                                                    \
    } while (0)

#define ECHECK(cond)                                                         \
    do {                                                                     \
        if (cond) {                                                          \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", my_rank, __FILE__,  \
                    __LINE__, #cond);                                        \
        }                                                                    \
    } while (0)

static int query(mkResult_t (*fn)(mkComm_t, int *), mkComm_t comm)
{
    int v = -12345;
    RCHECK(fn(comm, &v));
    return v;
}

/* Rank, size, local rank/size and node count against MPI's view. */
static void check_shape(mkComm_t comm, int node_size)
{
    int rank, size, lrank, lsize;
    MPI_Comm shm;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &shm);
    MPI_Comm_rank(shm, &lrank);
    MPI_Comm_size(shm, &lsize);
    MPI_Comm_free(&shm);
    ECHECK(query(mkCommRank, comm) == rank);
    ECHECK(query(mkCommSize, comm) == size);
    if (node_size == 0) {
        ECHECK(query(mkCommLocalRank, comm) == lrank);
        ECHECK(query(mkCommLocalSize, comm) == lsize);
        ECHECK(query(mkCommNodeCount, comm) == 1);
    } else {
        ECHECK(query(mkCommLocalRank, comm) == lrank % node_size);
        ECHECK(query(mkCommLocalSize, comm) == node_size);
        ECHECK(query(mkCommNodeCount, comm) == size / node_size);
    }
    ECHECK(query(mkCommCuDevice, comm) >= -1);
}

/* Allgather distinct patterns of several sizes, a bcast and a barrier
 * over the communicator's bootstrap. */
static void check_bootstrap(mkComm_t comm)
{
    int rank = comm->rank, n = comm->nranks;
    for (size_t bytes = 1; bytes <= 100000; bytes *= 23) {
        unsigned char *buf = calloc((size_t)n, bytes);
        if (!buf) { ECHECK(!"out of memory"); return; }
        memset(buf + (size_t)rank * bytes, 0x40 + rank, bytes);
        RCHECK(comm->boot->allgather(comm->boot_ctx, buf, bytes));
        int bad = 0;
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < bytes; i++)
                bad += buf[(size_t)r * bytes + i] != 0x40 + r;
        ECHECK(bad == 0);
        free(buf);
    }
    int word = rank == n - 1 ? 777 : -1;
    RCHECK(comm->boot->bcast(comm->boot_ctx, &word, sizeof(word), n - 1));
    ECHECK(word == 777);
    RCHECK(comm->boot->barrier(comm->boot_ctx));
}

/* A long life of bootstrap operations keeps its cost: 1,000 allgathers,
 * the last 100 not much slower than the first 100 (the job's PMIx
 * bootstrap once grew from 0.9 ms to 99 ms per operation over 2,000). */
static void check_bootstrap_steady(mkComm_t comm)
{
    int words[64] = {0};
    double t[11];
    if (comm->nranks > 64) return;
    t[0] = MPI_Wtime();
    for (int i = 1; i <= 1000; i++) {
        words[comm->rank] = i;
        if (comm->boot->allgather(comm->boot_ctx, words, sizeof(int)) != mkSuccess) {
            ECHECK(!"bootstrap allgather failed");
            return;
        }
        if (i % 100 == 0) t[i / 100] = MPI_Wtime();
    }
    const double first = t[1] - t[0], last = t[10] - t[9];
    if (comm->rank == 0)
        printf("bootstrap %s: 100 allgathers took %.1f ms first, %.1f ms last\n",
               comm->boot->name, first * 1e3, last * 1e3);
    ECHECK(last < 4 * first + 0.05);
}

/* Split by parity: each half has the right size and order, and its own
 * bootstrap sees only ranks of its parity. */
static void check_split(mkComm_t comm)
{
    int rank = comm->rank, n = comm->nranks;
    mkComm_t half = NULL;
    RCHECK(mkCommSplit(comm, rank % 2, rank, &half, NULL));
    if (!half) return;
    int hsize = (n - rank % 2 + 1) / 2;
    ECHECK(query(mkCommSize, half) == hsize);
    ECHECK(query(mkCommRank, half) == rank / 2);
    int all[64];
    all[rank / 2] = rank;
    RCHECK(half->boot->allgather(half->boot_ctx, all, sizeof(int)));
    for (int i = 0; i < hsize && i < 64; i++)
        ECHECK(all[i] == 2 * i + rank % 2);
    RCHECK(mkCommDestroy(half));
}

static mkUniqueId bcast_id(void)
{
    mkUniqueId id;
    memset(&id, 0, sizeof(id));
    if (my_rank == 0) RCHECK(mkGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    return id;
}

/* Ranks 0..n-2 join an id for n ranks; the last rank never comes. */
static void check_missing_rank(int n)
{
    setenv("MK_TIMEOUT_MS", "1500", 1); /* also the rendezvous root's */
    mkUniqueId id = bcast_id();
    if (my_rank < n - 1) {
        mkComm_t comm = NULL;
        double t0 = MPI_Wtime();
        mkResult_t r = mkCommInitRank(&comm, n, id, my_rank, NULL);
        double secs = MPI_Wtime() - t0;
        ECHECK(r == mkErrTimeout);
        char want[32];
        snprintf(want, sizeof(want), "missing: %d", n - 1);
        if (r == mkErrTimeout) CHECK_CONTAINS(mkGetLastError(NULL), want);
        ECHECK(secs < 6.0);
        if (r == mkSuccess) mkCommDestroy(comm);
    }
    setenv("MK_TIMEOUT_MS", "20000", 1);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void mode_mpi(void)
{
    mkComm_t comm = NULL, comm2 = NULL;
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    /* (a) the whole job through PMIx, then on a tcp ring */
    RCHECK(mkCommInit(&comm, NULL));
    if (comm) {
        ECHECK(strcmp(comm->boot->name, "tcp") == 0);
        check_shape(comm, 0);
        check_bootstrap(comm);
        check_bootstrap_steady(comm);
        check_split(comm); /* (c) over a PMIx parent */
    }
    /* (b) a unique id broadcast with MPI */
    mkUniqueId id = bcast_id();
    RCHECK(mkCommInitRank(&comm2, n, id, my_rank, NULL));
    if (comm2) {
        ECHECK(strcmp(comm2->boot->name, "tcp") == 0);
        check_shape(comm2, 0);
        check_bootstrap(comm2);
        check_split(comm2); /* (c) over a tcp parent */
        RCHECK(mkCommDestroy(comm2));
    }
    /* (d) virtual nodes of 2 from the config */
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.nodeSize = 2;
    id = bcast_id();
    comm2 = NULL;
    RCHECK(mkCommInitRank(&comm2, n, id, my_rank, &cfg));
    if (comm2) {
        check_shape(comm2, n % 2 == 0 ? 2 : 0);
        RCHECK(mkCommDestroy(comm2));
    }
    if (comm) RCHECK(mkCommDestroy(comm));
    /* (e) a rank that never arrives */
    check_missing_rank(n);
}

static void mode_nodesize(void)
{
    mkComm_t comm = NULL;
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    RCHECK(mkCommInit(&comm, NULL));
    if (!comm) return;
    check_shape(comm, 2);
    check_bootstrap(comm);
    RCHECK(mkCommDestroy(comm));
}

/* No MPI here: MPI_Finalize would fence too and meet the barrier that the
 * absent rank left open. */
static void mode_fence(void)
{
    mkComm_t comm = NULL;
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1000;
    RCHECK(mkCommInit(&comm, &cfg));
    if (!comm) return;
    my_rank = comm->rank;
    int absent = comm->nranks - 1;
    ECHECK(comm->nranks >= 2);
    RCHECK(comm->boot->barrier(comm->boot_ctx));
    if (comm->rank == absent) {
        sleep(4); /* outlive the others' deadline, then leave */
    } else {
        uint64_t t0 = mki_now_ns();
        mkResult_t r = comm->boot->barrier(comm->boot_ctx);
        double secs = (double)(mki_now_ns() - t0) / 1e9;
        /* The job's bootstrap is a TCP ring after the PMIx rendezvous: the
         * rank whose deadline passes first gives up and closes its
         * connections, so a neighbour may hear that (mkErrRemote) just
         * before its own deadline; either way within it, never a hang. */
        ECHECK(r == mkErrTimeout || r == mkErrRemote);
        ECHECK(secs >= 0.8 && secs < 3.5);
        mkResult_t async = mkSuccess;
        RCHECK(mkCommGetAsyncError(comm, &async));
        printf("rank %d: barrier without rank %d: %s after %.1f s: %s\n",
               comm->rank, absent, mkGetErrorString(r), secs,
               mkGetLastError(NULL));
    }
    RCHECK(mkCommDestroy(comm));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "mpi";
    int use_mpi = strcmp(mode, "fence") != 0;
    alarm(90);
    signal(SIGPIPE, SIG_IGN);
    /* A rank that fails early must not leave the others waiting for the
     * default deadline (minutes): fail within the alarm. */
    setenv("MK_TIMEOUT_MS", "20000", 0);
    if (use_mpi) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    }
    if (!strcmp(mode, "mpi")) mode_mpi();
    else if (!strcmp(mode, "nodesize")) mode_nodesize();
    else if (!strcmp(mode, "fence")) mode_fence();
    else { fprintf(stderr, "usage: test_comm mpi|nodesize|fence\n"); return 2; }
    printf("rank %d: %s: %d passed, %d failed\n", my_rank, mode, check_passed,
           check_failed);
    fflush(stdout);
    if (use_mpi) MPI_Finalize();
    return check_failed ? 1 : 0;
}
