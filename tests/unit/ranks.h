/*
 * ranks.h - run a test function as several forked processes ("ranks")
 * that meet through a unique id, for the multi-process unit tests.
 *
 * Every child has an alarm: a hang fails the test instead of blocking CI.
 */
#ifndef MK_TEST_RANKS_H
#define MK_TEST_RANKS_H
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mkernel.h"

typedef int (*rank_fn)(int rank, int nranks, mkUniqueId id);

/* Fork n children running fn(rank, nranks, id) (n may differ from nranks
 * to leave a rank missing or add an intruder); return how many failed. */
static inline int run_ranks(int n, int nranks, mkUniqueId id, rank_fn fn)
{
    pid_t pids[64];
    if (n > 64) return n;
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60);
            _exit(fn(r, nranks, id));
        }
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st;
        if (pids[r] < 0 || waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r,
                    pids[r] < 0 ? -1 : st);
            bad++;
        }
    }
    return bad;
}

/* The process that forks the ranks must stay single-threaded: a child
 * forked while another thread holds a lock (the allocator's: seen as a
 * hang under AddressSanitizer) inherits it locked.  So a rendezvous root,
 * a thread, runs in a helper process of its own: make() starts it there
 * and its bytes (len of them) come back through a pipe; the helpers are
 * killed when the test exits. */
static pid_t test_helpers[256];
static int test_nhelpers;

static void test_kill_helpers(void)
{
    for (int i = 0; i < test_nhelpers; i++) {
        kill(test_helpers[i], SIGKILL);
        waitpid(test_helpers[i], NULL, 0);
    }
    test_nhelpers = 0;
}

static inline int fork_root(int (*make)(void *out, void *arg), void *arg, void *out, size_t len)
{
    int fd[2];
    if (test_nhelpers == 256 || pipe(fd) != 0) return -1;
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        close(fd[0]);
        char buf[512];
        int ok = len <= sizeof(buf) && make(buf, arg) == 0;
        if (!ok || write(fd[1], buf, len) != (ssize_t)len) _exit(1);
        close(fd[1]);
        for (;;) pause(); /* the root thread serves until killed */
    }
    close(fd[1]);
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd[0], (char *)out + got, len - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    if (test_nhelpers == 0) atexit(test_kill_helpers);
    test_helpers[test_nhelpers++] = p;
    return got == len ? 0 : -1;
}

static int make_unique_id(void *out, void *arg)
{
    (void)arg;
    if (mkGetUniqueId((mkUniqueId *)out) == mkSuccess) return 0;
    fprintf(stderr, "mkGetUniqueId: %s\n", mkGetLastError(NULL));
    return -1;
}

/* A fresh unique id (the parent, before forking the ranks). */
static inline mkUniqueId new_id(void)
{
    mkUniqueId id;
    if (fork_root(make_unique_id, NULL, &id, sizeof(id)) != 0) {
        fprintf(stderr, "new_id: the helper process could not make a unique id\n");
        exit(1);
    }
    return id;
}

/* Inside a rank function (int rank, a mkComm_t comm that may be NULL):
 * on failure, say which rank, where and the last error, and fail it. */
#define RANK_EXPECT(cond)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: FAIL %s:%d %s (%s)\n", rank, __FILE__,  \
                    __LINE__, #cond, comm ? mkGetLastError(comm)             \
                                          : mkGetLastError(NULL));           \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#endif
