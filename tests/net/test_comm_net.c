/*
 * test_comm_net - the inter-node path of a communicator (src/net.c) under
 * mpirun -np 4 with MK_NODE_SIZE=2 (two virtual nodes of two ranks).
 *
 * tests/net/comm_net.sh starts it in one of these modes:
 *   data     MK_TRANSPORT=socket: comm->net is connected to the two ranks
 *            of the other node; a WRITE_SIGNAL pushed into the FIFO from
 *            the host lands in the partner's region and raises its signal
 *            exactly once; the same on two children (mkCommSplit), whose
 *            mkCommDestroy is bounded and leaves no thread behind
 *            (/proc/self/task counts);
 *   nordma   MK_TRANSPORT=ibverbs on a host without RDMA: mkCommInit fails
 *            on every rank with a message naming ibverbs, quickly (the
 *            plan refuses it; with MK_TOPO_XML of a host with InfiniBand
 *            NICs the plan accepts it and the network stage refuses);
 *   dead     rank 3 leaves right after init: the ranks of the other node
 *            see the communicator broken (mkErrRemote naming rank 3, from
 *            the liveness ring) and their FIFO command fail; every destroy
 *            is bounded;
 *   abort    rank 0 pushes a command and calls mkCommAbort at once: it
 *            returns within a second, the ranks of the other node break,
 *            every destroy is bounded.
 * No MPI calls (a dead rank must not take MPI_Finalize down with it): the
 * communicator's own bootstrap synchronises the ranks.  Each rank prints
 * "rank R: MODE: N passed, M failed"; alarm() turns a hang into a failure.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "net/net.h"
#include "bootstrap/sock.h"
#include "topology/topo.h"
#include "../unit/check.h"

#define NBYTES (300u << 10) /* above 2 x the socket stripe: two streams */
#define LOFF 4096u
#define ROFF (512u << 10)
#define SIG_OFF 64u

static int my_rank = -1;

static double secs_since(uint64_t t0) { return (double)(mki_now_ns() - t0) / 1e9; }

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static unsigned char pattern(int rank, size_t i)
{
    return (unsigned char)(rank * 37 + i * 11 + (i >> 9));
}

/* Region access: plain memory without GPU, cudaMemcpy into the GPU
 * workspace (on a GPU host the proxy's CUDA hooks are under test). */
static void region_put(struct mki_net *n, size_t off, const void *src, size_t len)
{
    if (n->kind == MKI_MEM_HOST) { memcpy(n->region + off, src, len); return; }
    CHECK(cudaMemcpy(n->region + off, src, len, cudaMemcpyHostToDevice) ==
          cudaSuccess);
}

static void region_get(struct mki_net *n, size_t off, void *dst, size_t len)
{
    if (n->kind == MKI_MEM_HOST) {
        if (len == 8) *(uint64_t *)dst = __atomic_load_n(
                          (uint64_t *)(n->region + off), __ATOMIC_ACQUIRE);
        else memcpy(dst, n->region + off, len);
        return;
    }
    CHECK(cudaMemcpy(dst, n->region + off, len, cudaMemcpyDeviceToHost) ==
          cudaSuccess);
}

static uint64_t region_u64(struct mki_net *n, size_t off)
{
    uint64_t v = 0;
    region_get(n, off, &v, 8);
    return v;
}

/* Wait until the counter reaches want or the deadline passes. */
static uint64_t wait_u64(const uint64_t *p, uint64_t want, double secs)
{
    uint64_t t0 = mki_now_ns(), v;
    while ((v = __atomic_load_n(p, __ATOMIC_ACQUIRE)) < want &&
           secs_since(t0) < secs)
        usleep(100);
    return v;
}

static uint64_t wait_sig(struct mki_net *n, uint64_t want, double secs)
{
    uint64_t t0 = mki_now_ns(), v;
    while ((v = region_u64(n, SIG_OFF)) < want && secs_since(t0) < secs)
        usleep(100);
    return v;
}

/* The partner: the rank of the other node with my local index. */
static int partner(mkComm_t comm)
{
    for (int r = 0; r < comm->nranks; r++)
        if (comm->topo->node_of[r] != comm->node &&
            comm->topo->local_rank_of[r] == comm->local_rank)
            return r;
    return -1;
}

static void check_wiring(mkComm_t comm)
{
    struct mki_net *n = comm->net;
    CHECK(comm->nnodes == 2);
    CHECK(n != NULL);
    if (!n) return;
    CHECK(strcmp(n->tops->name, "socket") == 0);
    CHECK(n->npeers == 2);
    for (int i = 0; i < n->npeers; i++)
        CHECK(comm->topo->node_of[n->peers[i]] != comm->node);
    CHECK(n->proxy != NULL && n->fifo != NULL && n->monitor_up);
    CHECK(n->kind == (comm->dev ? MKI_MEM_DEVICE : MKI_MEM_HOST));
    CHECK(n->region_bytes >= (1u << 20));
}

static void push_write_signal(mkComm_t comm, int to)
{
    struct mki_net *n = comm->net;
    struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, (uint32_t)to, MKI_SIG_ADD,
                             (uint32_t)n->region_id, LOFF, ROFF, NBYTES,
                             SIG_OFF, 1};
    CHECK_RES(mki_fifo_push_host(n->fifo, n->nslots, &c,
                                 mki_deadline_ms(comm->cfg.timeoutMs)),
              mkSuccess);
}

/* Every rank sends to its partner; every receiver checks bytes and the
 * signal, and all ranks learn every receiver's verdict. */
static void check_data(mkComm_t comm)
{
    struct mki_net *n = comm->net;
    int to = partner(comm);
    CHECK(to >= 0);
    if (!n || to < 0) return;
    static unsigned char buf[NBYTES];
    for (size_t i = 0; i < NBYTES; i++) buf[i] = pattern(comm->rank, i);
    region_put(n, LOFF, buf, NBYTES);
    CHECK_RES(comm->boot->barrier(comm->boot_ctx), mkSuccess);
    push_write_signal(comm, to);
    CHECK(wait_sig(n, 1, 10.0) == 1);
    size_t bad = 0;
    region_get(n, ROFF, buf, NBYTES);
    for (size_t i = 0; i < NBYTES; i++) bad += buf[i] != pattern(to, i);
    CHECK(bad == 0);
    CHECK(wait_u64(&n->fifo->done, 1, 10.0) == 1);
    CHECK_RES(comm->boot->barrier(comm->boot_ctx), mkSuccess);
    usleep(100000); /* a second raise would show up by now */
    int ok = bad == 0 && region_u64(n, SIG_OFF) == 1;
    int all[64] = {0};
    all[comm->rank] = ok;
    CHECK_RES(comm->boot->allgather(comm->boot_ctx, all, sizeof(int)), mkSuccess);
    for (int r = 0; r < comm->nranks; r++)
        if (!all[r]) { check_failed++; fprintf(stderr, "rank %d: receiver %d "
                                               "saw bad data or signal\n",
                                               my_rank, r); }
    mkResult_t async = mkErrInternal;
    CHECK_RES(mkCommGetAsyncError(comm, &async), mkSuccess);
    CHECK(async == mkSuccess);
}

/* A child communicator (tcp bootstrap) of the same 4 ranks: its own
 * transport, proxy and monitor; destroyed and counted. */
static int child_cycle(mkComm_t parent, int *during)
{
    mkComm_t comm = NULL;
    CHECK_RES(mkCommSplit(parent, 0, parent->rank, &comm, NULL), mkSuccess);
    if (!comm) return -1;
    check_wiring(comm);
    check_data(comm);
    *during = threads();
    uint64_t t0 = mki_now_ns();
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
    double s = secs_since(t0);
    printf("rank %d: mkCommDestroy took %.3f s\n", my_rank, s);
    CHECK(s < 3.0);
    return threads();
}

/* PMIx cannot be initialised twice in one process, so the job-wide
 * communicator stays up while two children come and go. */
static void mode_data(void)
{
    mkComm_t comm = NULL;
    mkResult_t r = mkCommInit(&comm, NULL);
    CHECK_RES(r, mkSuccess);
    if (r != mkSuccess) return;
    my_rank = comm->rank;
    check_wiring(comm);
    check_data(comm);
    int before = threads(), d1 = 0, d2 = 0;
    int after1 = child_cycle(comm, &d1);
    int after2 = child_cycle(comm, &d2);
    printf("rank %d: threads before %d, during %d/%d, after %d/%d\n",
           my_rank, before, d1, d2, after1, after2);
    CHECK(after1 == before && after2 == before); /* nothing left behind */
    CHECK(d1 >= before + 2 && d2 >= before + 2); /* proxy and monitor ran */
    uint64_t t0 = mki_now_ns();
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
    CHECK(secs_since(t0) < 3.0);
}

static void mode_nordma(void)
{
    mkComm_t comm = NULL;
    uint64_t t0 = mki_now_ns();
    mkResult_t r = mkCommInit(&comm, NULL);
    double s = secs_since(t0);
    CHECK(r == mkErrTransport || r == mkErrUnsupported);
    CHECK(comm == NULL);
    CHECK_CONTAINS(mkGetLastError(NULL), "ibverbs");
    /* With a fixture that has InfiniBand NICs the plan accepts ibverbs and
     * the network stage is the one that must refuse it. */
    if (getenv("MK_TOPO_XML")) {
        CHECK(r == mkErrUnsupported);
        CHECK_CONTAINS(mkGetLastError(NULL), "inter-node path");
    }
    CHECK(s < 10.0);
    printf("rank %d: mkCommInit with MK_TRANSPORT=ibverbs: %s after %.1f s: %s\n",
           my_rank, mkGetErrorString(r), s, mkGetLastError(NULL));
    if (r == mkSuccess) mkCommDestroy(comm);
}

/* The ranks that talk to the dead one must break; the others must only
 * not hang. */
static void mode_dead(void)
{
    mkComm_t comm = NULL;
    mkResult_t r = mkCommInit(&comm, NULL);
    CHECK_RES(r, mkSuccess);
    if (r != mkSuccess) return;
    my_rank = comm->rank;
    int dead = comm->nranks - 1, timeout = comm->cfg.timeoutMs;
    CHECK_RES(comm->boot->barrier(comm->boot_ctx), mkSuccess);
    if (comm->rank == dead) {
        printf("rank %d: dead: %d passed, %d failed\n", my_rank, check_passed,
               check_failed);
        fflush(stdout);
        /* Leave PMIx properly (else mpirun kills the job: the library
         * finalizes PMIx at exit), but not the communicator: the sockets
         * close only as the process goes. */
        comm->boot->close(comm->boot_ctx);
        exit(0);
    }
    int talks = comm->topo->node_of[dead] != comm->node;
    uint64_t t0 = mki_now_ns();
    if (comm->net) push_write_signal(comm, talks ? dead : partner(comm));
    mkResult_t async = mkSuccess;
    while (async == mkSuccess && secs_since(t0) < timeout / 1000.0 + 1.0) {
        CHECK_RES(mkCommGetAsyncError(comm, &async), mkSuccess);
        usleep(1000);
    }
    double s = secs_since(t0);
    if (talks) {
        CHECK(async == mkErrRemote || async == mkErrTransport);
        CHECK(s <= timeout / 1000.0 + 0.5);
        /* The liveness ring names the rank first (src/core/live.h); the
         * command to the dead rank fails too, it does not hang. */
        char want[32];
        snprintf(want, sizeof(want), "rank %d ", dead);
        CHECK_CONTAINS(mkGetLastError(comm), want);
        const uint64_t t1 = mki_now_ns();
        while (!__atomic_load_n(&comm->net->fifo->error, __ATOMIC_ACQUIRE) && secs_since(t1) < 2.0)
            usleep(1000);
        CHECK(__atomic_load_n(&comm->net->fifo->error, __ATOMIC_ACQUIRE) != 0);
    }
    printf("rank %d: after rank %d left: %s after %.2f s: %s\n", my_rank, dead,
           mkGetErrorString(async), s, mkGetLastError(comm));
    t0 = mki_now_ns();
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
    s = secs_since(t0);
    printf("rank %d: mkCommDestroy took %.2f s\n", my_rank, s);
    CHECK(s < timeout / 1000.0 * 2 + 2.0);
}

/* mkCommAbort on rank 0 returns at once (no drain, no barrier); the ranks
 * of the other node break, nobody hangs. */
static void mode_abort(void)
{
    mkComm_t comm = NULL;
    mkResult_t r = mkCommInit(&comm, NULL);
    CHECK_RES(r, mkSuccess);
    if (r != mkSuccess) return;
    my_rank = comm->rank;
    int timeout = comm->cfg.timeoutMs;
    CHECK_RES(comm->boot->barrier(comm->boot_ctx), mkSuccess);
    uint64_t t0 = mki_now_ns();
    if (comm->rank == 0) {
        if (comm->net) push_write_signal(comm, partner(comm));
        CHECK_RES(mkCommAbort(comm), mkSuccess);
        printf("rank 0: mkCommAbort took %.3f s\n", secs_since(t0));
        CHECK(secs_since(t0) < 1.0);
        return;
    }
    mkResult_t async = mkSuccess;
    int talks = comm->topo->node_of[0] != comm->node;
    while (talks && async == mkSuccess && secs_since(t0) < timeout / 1000.0 + 1.0) {
        CHECK_RES(mkCommGetAsyncError(comm, &async), mkSuccess);
        usleep(1000);
    }
    if (talks) CHECK(async == mkErrRemote || async == mkErrTransport);
    t0 = mki_now_ns();
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
    printf("rank %d: after rank 0 aborted: %s; mkCommDestroy took %.2f s\n",
           my_rank, mkGetErrorString(async), secs_since(t0));
    CHECK(secs_since(t0) < timeout / 1000.0 * 2 + 2.0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "data";
    alarm(60);
    signal(SIGPIPE, SIG_IGN);
    const char *r = getenv("PMIX_RANK");
    my_rank = r ? atoi(r) : -1;
    setenv("MK_TIMEOUT_MS", "3000", 0);
    setenv("MK_WORKSPACE_SIZE", "1M", 0);
    if (!strcmp(mode, "data")) mode_data();
    else if (!strcmp(mode, "nordma")) mode_nordma();
    else if (!strcmp(mode, "dead")) mode_dead();
    else if (!strcmp(mode, "abort")) mode_abort();
    else { fprintf(stderr, "usage: test_comm_net data|nordma|dead|abort\n");
           return 2; }
    printf("rank %d: %s: %d passed, %d failed\n", my_rank, mode, check_passed,
           check_failed);
    fflush(stdout);
    return check_failed ? 1 : 0;
}
