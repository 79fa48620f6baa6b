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

/* A fresh unique id (the parent, before forking the ranks). */
static inline mkUniqueId new_id(void)
{
    mkUniqueId id;
    if (mkGetUniqueId(&id) != mkSuccess) {
        fprintf(stderr, "mkGetUniqueId: %s\n", mkGetLastError(NULL));
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
