/*
 * test_live - dead peers found in about a second (the liveness ring,
 * src/core/live.h), across real processes on this host, no GPU.
 *
 *   kill drill   one rank of 2, 4 and 8 (flat, as virtual nodes of 2, and
 *                a sub-communicator from mkCommSplit) SIGKILLs itself; every
 *                survivor's communicator turns mkErrRemote naming it within
 *                1.0 s with MK_TIMEOUT_MS = 60000, and destroys cleanly
 *   exit         a rank exits without mkCommDestroy: the same
 *   abort        mkCommAbort on one rank: the others report its abort
 *   quiet        ranks destroying one after the other: nobody is taken
 *                for dead
 *   stopped      a rank SIGSTOPped: taken for dead after MK_TIMEOUT_MS of
 *                silence, not before
 *
 * The victim writes when it dies (CLOCK_MONOTONIC, the same clock in
 * every process) into a shared page; survivors poll mkCommGetAsyncError
 * every millisecond and report their delay there too; the slowest is
 * printed and checked.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mki.h"
#include "core/live.h"
#include "check.h"
#include "ranks.h"

struct shared {
    volatile uint64_t t_dead;        /* when the victim died (mki_now_ns) */
    volatile uint64_t delay_ns[64];  /* each survivor's detection delay */
};
static struct shared *g_sh;
static int g_victim;
static int g_mode;
static int g_node_size;
enum { M_KILL, M_EXIT, M_ABORT, M_QUIET, M_STOP };

/* Wait until comm breaks or limit_ns passes; return the result seen. */
static mkResult_t wait_broken(mkComm_t comm, uint64_t limit_ns)
{
    const uint64_t t0 = mki_now_ns();
    mkResult_t ae = mkSuccess;
    while (mki_now_ns() - t0 < limit_ns) {
        if (mkCommGetAsyncError(comm, &ae) != mkSuccess) return mkErrInternal;
        if (ae != mkSuccess) return ae;
        usleep(1000);
    }
    return ae;
}

static int drill(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL, sub = NULL;
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.nodeSize = g_node_size;
    RANK_EXPECT(mkCommInitRank(&comm, nranks, id, rank, &cfg) == mkSuccess);
    /* A sub-communicator of the victim's parity: watched on its own. */
    RANK_EXPECT(mkCommSplit(comm, rank % 2, rank, &sub, NULL) == mkSuccess);
    RANK_EXPECT(comm->boot->barrier(comm->boot_ctx) == mkSuccess);
    if (g_mode == M_QUIET) {
        /* Leave one after the other, 100 ms apart; each first watches its
         * communicator for 50 ms more (the last ones while their
         * neighbours have already left). */
        usleep(100000u * (unsigned)rank);
        RANK_EXPECT(wait_broken(comm, 50000000u) == mkSuccess);
        RANK_EXPECT(mkCommDestroy(sub) == mkSuccess);
        RANK_EXPECT(mkCommDestroy(comm) == mkSuccess);
        return 0;
    }
    if (rank == g_victim) {
        usleep(200000);
        g_sh->t_dead = mki_now_ns();
        __sync_synchronize();
        switch (g_mode) {
        case M_KILL: raise(SIGKILL); break;
        case M_EXIT: _exit(0);
        case M_ABORT: RANK_EXPECT(mkCommAbort(comm) == mkSuccess); return 0;
        case M_STOP: raise(SIGSTOP); break;
        }
        return 1;
    }
    const uint64_t limit = g_mode == M_STOP ? 10000000000ull : 5000000000ull;
    mkResult_t ae = wait_broken(comm, limit);
    const uint64_t t = mki_now_ns();
    while (!g_sh->t_dead) usleep(100);
    const uint64_t delay = t - g_sh->t_dead;
    g_sh->delay_ns[rank] = delay;
    char want[32];
    snprintf(want, sizeof(want), "rank %d ", g_victim);
    const char *msg = mkGetLastError(comm);
    printf("  rank %d: %s after %.1f ms: %s\n", rank, mkGetErrorString(ae), delay / 1e6, msg);
    RANK_EXPECT(ae == mkErrRemote);
    RANK_EXPECT(strstr(msg, want) != NULL);
    RANK_EXPECT(strstr(msg, g_mode == M_ABORT ? "aborted" : g_mode == M_STOP ? "sent nothing"
                                                                              : "closed") != NULL);
    if (g_mode == M_STOP) {
        /* MK_TIMEOUT_MS = 1500 after its last beat (<= 100 ms before it stopped) */
        RANK_EXPECT(delay >= 1350000000ull);
    } else {
        RANK_EXPECT(delay < 1000000000ull);
    }
    /* The victim's half of the split knows too (its own ring). */
    if (rank % 2 == g_victim % 2) RANK_EXPECT(wait_broken(sub, limit) == mkErrRemote);
    /* A later call says the communicator is broken, naming the rank. */
    mkComm_t again = NULL;
    RANK_EXPECT(mkCommSplit(comm, 0, 0, &again, NULL) == mkErrRemote);
    RANK_EXPECT(strstr(mkGetLastError(comm), want) != NULL);
    const uint64_t t1 = mki_now_ns();
    RANK_EXPECT(mkCommDestroy(sub) == mkSuccess);
    RANK_EXPECT(mkCommDestroy(comm) == mkSuccess);
    RANK_EXPECT(mki_now_ns() - t1 < 2000000000ull);
    return 0;
}

/* Run n ranks; the victim's end must match the mode; return failures. */
static int run(const char *name, int mode, int n, int victim, int node_size)
{
    g_mode = mode;
    g_victim = victim;
    g_node_size = node_size ? node_size : MK_CONFIG_UNDEF_INT;
    memset((void *)g_sh, 0, sizeof(*g_sh));
    mkUniqueId id = new_id();
    pid_t pids[64];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60);
            _exit(drill(r, n, id));
        }
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        if (pids[r] < 0) { bad++; continue; }
        if (r == victim && mode == M_STOP) continue;
        int st;
        if (waitpid(pids[r], &st, 0) < 0) { bad++; continue; }
        int ok = r == victim && mode == M_KILL
                     ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                     : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok) {
            fprintf(stderr, "%s: rank %d ended with status 0x%x\n", name, r, st);
            bad++;
        }
    }
    if (mode == M_STOP && victim < n && pids[victim] > 0) {
        kill(pids[victim], SIGKILL);
        waitpid(pids[victim], NULL, 0);
    }
    uint64_t worst = 0;
    for (int r = 0; r < n; r++)
        if (g_sh->delay_ns[r] > worst) worst = g_sh->delay_ns[r];
    if (mode != M_QUIET)
        printf("%s: %d ranks, victim %d: slowest survivor noticed after %.1f ms%s\n", name, n,
               victim, worst / 1e6, bad ? " FAIL" : "");
    else
        printf("%s: %d ranks left one by one, none taken for dead%s\n", name, n,
               bad ? " FAIL" : "");
    fflush(stdout);
    return bad;
}

static int count_frame(void *arg, const struct mki_live_frame *f)
{
    (void)f;
    ++*(int *)arg;
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(240);
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) SKIP("mmap(MAP_SHARED) failed");
    setenv("MK_TIMEOUT_MS", "60000", 1);
    CHECK(run("kill", M_KILL, 2, 1, 0) == 0);
    CHECK(run("kill", M_KILL, 4, 0, 0) == 0);
    CHECK(run("kill", M_KILL, 8, 5, 0) == 0);
    CHECK(run("kill, virtual nodes of 2", M_KILL, 4, 2, 2) == 0);
    CHECK(run("exit without destroy", M_EXIT, 4, 3, 0) == 0);
    CHECK(run("abort", M_ABORT, 4, 1, 0) == 0);
    CHECK(run("quiet", M_QUIET, 4, -1, 0) == 0);
    setenv("MK_TIMEOUT_MS", "1500", 1);
    CHECK(run("stopped", M_STOP, 3, 1, 0) == 0);

    /* The frame parser: whole frames split anywhere, a bad one refused. */
    struct mki_live_frame f[3] = {
        {MKI_LIVE_MAGIC, MKI_LIVE_BEAT, 1, mki_live_check(7)},
        {MKI_LIVE_MAGIC, MKI_LIVE_DEAD, 2, mki_live_check(7)},
        {MKI_LIVE_MAGIC, MKI_LIVE_DEAD, 9, mki_live_check(7)}, /* rank out of range */
    };
    int count;
    struct mki_live_rx rx = {{0}, 0};
    int (*counter)(void *, const struct mki_live_frame *) = count_frame;
    for (size_t cut = 0; cut <= 2 * sizeof(f[0]); cut++) {
        count = 0;
        rx.have = 0;
        const char *p = (const char *)f;
        CHECK(mki_live_feed(&rx, p, cut, 4, mki_live_check(7), counter, &count) == 0);
        CHECK(mki_live_feed(&rx, p + cut, 2 * sizeof(f[0]) - cut, 4, mki_live_check(7), counter,
                            &count) == 0);
        CHECK(count == 2 && rx.have == 0);
    }
    rx.have = 0;
    count = 0;
    CHECK(mki_live_feed(&rx, f, sizeof(f), 4, mki_live_check(7), counter, &count) == -1);
    CHECK(count == 2);
    rx.have = 0;
    CHECK(mki_live_feed(&rx, f, sizeof(f[0]), 4, mki_live_check(8), counter, &count) == -1);
    TEST_DONE();
}

