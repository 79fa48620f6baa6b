/*
 * common.h - helpers of the inter-node path tests: forked ranks joined by
 * the TCP bootstrap, a socket transport over one region, and waits on
 * signal counters with deadlines.
 */
#ifndef MK_TEST_NET_COMMON_H
#define MK_TEST_NET_COMMON_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mki.h"
#include "bootstrap/sock.h"
#include "transports/transport.h"
#include "../unit/ranks.h"

#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "rank %d: FAIL %s:%d %s (%s)\n", rank, __FILE__,  \
                    __LINE__, #cond, mki_thread_error());                    \
            return 1;                                                        \
        }                                                                    \
    } while (0)

struct net_rank {
    int rank, nranks;
    const struct mki_bootstrap_ops *boot;
    void *bctx;
    void *tctx;
    int peers[64];
};

typedef int (*net_fn)(struct net_rank *nr, void *arg);

/* Join the bootstrap of id as rank of n and run fn. */
static int net_child(const struct mki_unique_id *id, int rank, int n,
                     int timeout_ms, net_fn fn, void *arg)
{
    struct net_rank nr = {rank, n, &mki_bootstrap_tcp_ops, NULL, NULL, {0}};
    if (mki_bootstrap_tcp_init(id, rank, n, timeout_ms, &nr.bctx) != mkSuccess) {
        fprintf(stderr, "rank %d: bootstrap: %s\n", rank, mki_thread_error());
        return 1;
    }
    int k = 0;
    for (int r = 0; r < n; r++)
        if (r != rank) nr.peers[k++] = r;
    int rc = fn(&nr, arg);
    nr.boot->close(nr.bctx);
    return rc;
}

/* The rendezvous root, in a helper process (ranks.h: fork_root). */
static int net_make_root(void *out, void *arg)
{
    if (mki_tcp_root_start((struct mki_unique_id *)out, *(int *)arg) == mkSuccess) return 0;
    fprintf(stderr, "root: %s\n", mki_thread_error());
    return -1;
}

/* Fork n ranks running fn; returns how many failed.  Every child has an
 * alarm.  Rank `doomed` (-1: none) is expected to kill or stop itself:
 * once the others exited it is killed and not counted. */
static int net_run(int n, int timeout_ms, net_fn fn, void *arg, int alarm_s,
                   int doomed)
{
    struct mki_unique_id id;
    if (fork_root(net_make_root, &timeout_ms, &id, sizeof(id)) != 0) {
        fprintf(stderr, "root: the helper process could not start it\n");
        return n;
    }
    pid_t pids[64];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)alarm_s);
            _exit(net_child(&id, r, n, timeout_ms, fn, arg));
        }
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st;
        if (r == doomed) continue;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            bad++;
        }
    }
    if (doomed >= 0) {
        kill(pids[doomed], SIGKILL);
        waitpid(pids[doomed], NULL, 0);
    }
    return bad;
}

/* Stand-ins for the runtime's device-memory hooks (the "device" memory is
 * host memory here); they count what went through them. */
static uint64_t net_dev_to, net_dev_from, net_dev_raised;

static mkResult_t net_copy_device(void *h, void *dst, const void *src,
                                  size_t n, int to_device)
{
    memcpy(dst, src, n);
    *(to_device ? &net_dev_to : &net_dev_from) += n;
    return mkSuccess;
}

static mkResult_t net_raise_device(void *h, void *addr, uint32_t op,
                                   uint64_t value)
{
    struct mki_net_signal s = {op, 0, 0, value};
    mki_signal_apply(addr, &s);
    net_dev_raised++;
    return mkSuccess;
}

/* Socket transport over [base, base+size) as region 0, connected; with
 * device = 1 the region is registered as device memory (hooks above). */
static mkResult_t net_socket_open(struct net_rank *nr, void *base, size_t size,
                                  int timeout_ms, uint64_t cookie, int device)
{
    struct mki_net_args a = {nr->boot, nr->bctx, nr->rank, nr->nranks,
                             nr->peers, nr->nranks - 1, timeout_ms, cookie,
                             NULL, 0, net_raise_device, net_copy_device, NULL};
    int region;
    MKI_CHECK(mki_transport_socket.init(&a, &nr->tctx));
    mkResult_t r = mki_transport_socket.reg_mem(
        nr->tctx, base, size, device ? MKI_MEM_DEVICE : MKI_MEM_HOST, &region);
    if (r == mkSuccess) r = mki_transport_socket.connect(nr->tctx);
    if (r != mkSuccess) {
        mki_transport_socket.close(nr->tctx);
        nr->tctx = NULL;
    }
    return r;
}

/* Wait until *p >= want (acquire), driving progress when tops is given;
 * mkErrTimeout at the deadline, or the transport's error. */
static mkResult_t net_wait_ge(const uint64_t *p, uint64_t want,
                              const struct mki_transport_ops *tops, void *tctx,
                              uint64_t deadline)
{
    uint64_t done = 0;
    while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < want) {
        if (tops) MKI_CHECK(tops->progress(tctx, &done));
        if (mki_now_ns() > deadline)
            return mki_error(NULL, mkErrTimeout, "signal stays at %llu < %llu",
                             (unsigned long long)__atomic_load_n(p, __ATOMIC_ACQUIRE),
                             (unsigned long long)want);
        if (!tops) usleep(50);
    }
    return mkSuccess;
}

/* Recognisable bytes: a function of (sender, offset). */
static inline unsigned char net_pattern(int src, uint64_t off)
{
    uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(src + 1) * 0xbf58476d1ce4e5b9ull;
    return (unsigned char)(x >> 56);
}

#endif /* MK_TEST_NET_COMMON_H */
