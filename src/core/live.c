/*
 * live.c - the liveness ring of a communicator (live.h).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mki.h"
#include "core/live.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/sock.h"

#define LIVE_BEAT_NS 100000000ull /* a beat every 100 ms on each link */
#define LIVE_TX_BYTES 256         /* frames queued while a link is slow */

enum { LINK_NEXT = 0, LINK_PREV = 1 };

struct live_link {
    int fd;            /* -1: closed */
    int peer;          /* the neighbour's rank */
    int bye;           /* it said BYE or ABORT: its end is not a death */
    uint64_t last_rx;  /* when bytes last came (mki_now_ns) */
    struct mki_live_rx rx;
    unsigned char tx[LIVE_TX_BYTES];
    size_t tx_len;
};

struct mki_live {
    struct mkComm *comm;
    int rank, nranks;
    uint32_t check;
    uint64_t silence_ns;
    struct live_link link[2];
    int wake[2];                /* pipe: destroy wakes the thread */
    pthread_t thread;
    int up;
    int stop;                   /* atomic */
    unsigned char *known;       /* nranks flags: learned dead or aborted */
    pthread_mutex_t lock;       /* guards the fields below */
    int dead;                   /* first rank learned dead/aborted, -1 */
    char why[MKI_ERRMSG_LEN];
};

/* ---- wire ------------------------------------------------------------ */

uint32_t mki_live_check(uint64_t cookie)
{
    return (uint32_t)(cookie ^ (cookie >> 32)) ^ 0x4c495645u;
}

static int frame_ok(const struct mki_live_frame *f, int nranks, uint32_t check)
{
    return f->magic == MKI_LIVE_MAGIC && f->check == check && f->type >= MKI_LIVE_HELLO &&
           f->type <= MKI_LIVE_SILENT && f->rank >= 0 && f->rank < nranks;
}

int mki_live_feed(struct mki_live_rx *rx, const void *data, size_t len, int nranks,
                  uint32_t check, int (*fn)(void *arg, const struct mki_live_frame *f),
                  void *arg)
{
    const unsigned char *p = data;
    if (rx->have >= sizeof(rx->buf)) return -1; /* not a state feed leaves */
    while (len > 0) {
        size_t n = sizeof(rx->buf) - rx->have;
        if (n > len) n = len;
        memcpy(rx->buf + rx->have, p, n);
        rx->have += n;
        p += n;
        len -= n;
        if (rx->have < sizeof(rx->buf)) break;
        struct mki_live_frame f;
        memcpy(&f, rx->buf, sizeof(f));
        rx->have = 0;
        if (!frame_ok(&f, nranks, check)) return -1;
        int r = fn(arg, &f);
        if (r) return r;
    }
    return 0;
}

static void frame(struct mki_live *lv, uint32_t type, int rank, struct mki_live_frame *f)
{
    f->magic = MKI_LIVE_MAGIC;
    f->type = type;
    f->rank = rank;
    f->check = lv->check;
}

/* Push queued bytes; never blocks.  A link whose peer does not read keeps
 * its queue (and drops beats) until the silence rule ends it. */
static void link_flush(struct live_link *l)
{
    while (l->fd >= 0 && l->tx_len > 0) {
        ssize_t n = send(l->fd, l->tx, l->tx_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) return; /* EAGAIN, or the reader sees the error */
        memmove(l->tx, l->tx + n, l->tx_len - (size_t)n);
        l->tx_len -= (size_t)n;
    }
}

static void link_send(struct mki_live *lv, struct live_link *l, uint32_t type, int rank)
{
    struct mki_live_frame f;
    if (l->fd < 0 || l->tx_len + sizeof(f) > sizeof(l->tx)) return;
    frame(lv, type, rank, &f);
    memcpy(l->tx + l->tx_len, &f, sizeof(f));
    l->tx_len += sizeof(f);
    link_flush(l);
}

static void link_close(struct live_link *l)
{
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
}

/* ---- what a death does ------------------------------------------------ */

static const char *host_of(struct mki_live *lv, int r)
{
    return lv->comm->hosts ? lv->comm->hosts[r].hostname : "?";
}

/* Learn that rank r is dead (type DEAD or SILENT) or aborted (ABORT): record the
 * first such rank, tell the comm, and forward the news on every link but
 * the one it came from (src; -1: found here). */
static void learn(struct mki_live *lv, int r, uint32_t type, int src, const char *how)
{
    if (lv->known[r]) return;
    lv->known[r] = 1;
    struct mkComm *comm = lv->comm;
    char msg[MKI_ERRMSG_LEN];
    if (type == MKI_LIVE_ABORT)
        snprintf(msg, sizeof(msg), "rank %d (host %s, pid %d) aborted the communicator "
                 "(mkCommAbort)%s; destroy this communicator", mki_comm_name(comm, r),
                 host_of(lv, r), (int)comm->hosts[r].pid, how);
    else
        snprintf(msg, sizeof(msg), "rank %d (host %s, pid %d) is gone: %s; destroy this "
                 "communicator", mki_comm_name(comm, r), host_of(lv, r),
                 (int)comm->hosts[r].pid, how);
    int first = 0;
    pthread_mutex_lock(&lv->lock);
    if (lv->dead < 0) {
        lv->dead = r;
        snprintf(lv->why, sizeof(lv->why), "%s", msg);
        first = 1;
    }
    pthread_mutex_unlock(&lv->lock);
    for (int i = 0; i < 2; i++)
        if (i != src) link_send(lv, &lv->link[i], type, r);
    if (!first) return;
    MKI_INFO(MKI_SUB_INIT, "liveness: %s", msg);
    /* With a GPU the watchdog stops the kernels first, then reports. */
    if (comm->cuda_dev < 0) {
        mki_error(comm, mkErrRemote, "%s", msg);
        mki_comm_set_async_error(comm, mkErrRemote);
    }
}

struct feed_ctx {
    struct mki_live *lv;
    int li;
};

static int on_frame(void *arg, const struct mki_live_frame *f)
{
    struct feed_ctx *c = arg;
    struct mki_live *lv = c->lv;
    struct live_link *l = &lv->link[c->li];
    char how[160];
    switch (f->type) {
    case MKI_LIVE_BEAT:
        return f->rank == l->peer ? 0 : -1;
    case MKI_LIVE_BYE:
        if (f->rank != l->peer) return -1;
        l->bye = 1;
        return 0;
    case MKI_LIVE_DEAD:
        snprintf(how, sizeof(how), "its connections closed without mkCommDestroy (it exited "
                 "or was killed; seen by a rank of the ring, heard from rank %d)",
                 mki_comm_name(lv->comm, l->peer));
        learn(lv, f->rank, MKI_LIVE_DEAD, c->li, how);
        return 0;
    case MKI_LIVE_SILENT:
        snprintf(how, sizeof(how), "it sent nothing for %llu ms (MK_TIMEOUT_MS) to a rank of "
                 "the ring (heard from rank %d): its host or the network is down, or it is "
                 "stopped", (unsigned long long)(lv->silence_ns / 1000000),
                 mki_comm_name(lv->comm, l->peer));
        learn(lv, f->rank, MKI_LIVE_SILENT, c->li, how);
        return 0;
    case MKI_LIVE_ABORT:
        if (f->rank == l->peer) l->bye = 1;
        how[0] = '\0';
        if (f->rank != l->peer)
            snprintf(how, sizeof(how), " (heard from rank %d)", mki_comm_name(lv->comm, l->peer));
        learn(lv, f->rank, MKI_LIVE_ABORT, c->li, how);
        return 0;
    default: /* HELLO after the handshake */
        return -1;
    }
}

/* Read what a link has; returns 0 while it is healthy. */
static void link_read(struct mki_live *lv, int li)
{
    struct live_link *l = &lv->link[li];
    unsigned char buf[512];
    for (;;) {
        ssize_t n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            l->last_rx = mki_now_ns();
            struct feed_ctx c = {lv, li};
            if (mki_live_feed(&l->rx, buf, (size_t)n, lv->nranks, lv->check, on_frame, &c) < 0) {
                char how[160];
                snprintf(how, sizeof(how), "its liveness link carried a malformed frame "
                         "(memory corruption or a foreign connection)");
                link_close(l);
                learn(lv, l->peer, MKI_LIVE_DEAD, li, how);
                return;
            }
            if (l->fd < 0) return;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        /* End of stream or a reset. */
        int bye = l->bye;
        char how[200];
        snprintf(how, sizeof(how), "its connection closed without mkCommDestroy (%s: the "
                 "process exited, crashed or was killed)",
                 n == 0 ? "end of stream" : strerror(errno));
        link_close(l);
        if (!bye) learn(lv, l->peer, MKI_LIVE_DEAD, li, how);
        return;
    }
}

static void *live_main(void *arg)
{
    struct mki_live *lv = arg;
    uint64_t next_beat = 0;
    while (!__atomic_load_n(&lv->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p[3];
        int map[3], np = 0;
        p[np].fd = lv->wake[0];
        p[np].events = POLLIN;
        map[np++] = -1;
        for (int i = 0; i < 2; i++) {
            struct live_link *l = &lv->link[i];
            if (l->fd < 0) continue;
            p[np].fd = l->fd;
            p[np].events = POLLIN | (l->tx_len ? POLLOUT : 0);
            map[np++] = i;
        }
        const uint64_t now = mki_now_ns();
        int ms = next_beat > now ? (int)((next_beat - now) / 1000000 + 1) : 0;
        int n = poll(p, (nfds_t)np, ms);
        if (n < 0 && errno != EINTR) break;
        for (int k = 1; n > 0 && k < np; k++) {
            struct live_link *l = &lv->link[map[k]];
            if (l->fd < 0) continue;
            if (p[k].revents & POLLOUT) link_flush(l);
            if (p[k].revents & (POLLIN | POLLHUP | POLLERR)) link_read(lv, map[k]);
        }
        const uint64_t t = mki_now_ns();
        if (t < next_beat) continue;
        next_beat = t + LIVE_BEAT_NS;
        for (int i = 0; i < 2; i++) {
            struct live_link *l = &lv->link[i];
            if (l->fd < 0) continue;
            if (l->tx_len == 0) link_send(lv, l, MKI_LIVE_BEAT, lv->rank);
            if (t - l->last_rx > lv->silence_ns) {
                char how[160];
                snprintf(how, sizeof(how), "it sent nothing for %llu ms (MK_TIMEOUT_MS): its "
                         "host or the network between us is down, or it is stopped",
                         (unsigned long long)(lv->silence_ns / 1000000));
                link_close(l);
                learn(lv, l->peer, MKI_LIVE_SILENT, i, how);
            }
        }
    }
    return NULL;
}

/* ---- setup and teardown ----------------------------------------------- */

static mkResult_t live_fail(struct mkComm *comm, const char *what)
{
    return mki_error(comm, mki_thread_error()[0] ? mkErrBootstrap : mkErrSystem,
                     "cannot connect the liveness ring (%s): %s", what, mki_thread_error());
}

static mkResult_t live_connect(struct mkComm *comm, struct mki_live *lv)
{
    union mki_sockaddr me;
    int lfd = -1;
    mkResult_t res = mki_tcp_pick_address(&me);
    if (res == mkSuccess) res = mki_sock_listen(&me, &lfd);
    union mki_sockaddr *all = calloc((size_t)lv->nranks, sizeof(*all));
    if (!all) {
        if (lfd >= 0) close(lfd);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    /* Every rank joins the exchange even when its listen failed: a zero
     * address makes the others fail too instead of waiting. */
    if (res == mkSuccess) all[lv->rank] = me;
    mkResult_t ex = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    if (res != mkSuccess || ex != mkSuccess) {
        res = live_fail(comm, res != mkSuccess ? "listen" : "address exchange");
        goto out;
    }
    const int next = (lv->rank + 1) % lv->nranks;
    const int prev = (lv->rank + lv->nranks - 1) % lv->nranks;
    if (all[next].sa.sa_family == 0) {
        res = mki_error(comm, mkErrBootstrap, "cannot connect the liveness ring: rank %d "
                        "could not listen (see its log)", next);
        goto out;
    }
    const uint64_t deadline = mki_deadline_ms(comm->cfg.timeoutMs);
    char name[64];
    snprintf(name, sizeof(name), "rank %d (liveness link)", next);
    struct mki_live_frame hello;
    frame(lv, MKI_LIVE_HELLO, lv->rank, &hello);
    if (mki_sock_connect(&all[next], deadline, name, &lv->link[LINK_NEXT].fd) != mkSuccess ||
        mki_sock_send(lv->link[LINK_NEXT].fd, &hello, sizeof(hello), deadline, name) !=
            mkSuccess) {
        res = live_fail(comm, "connect");
        goto out;
    }
    lv->link[LINK_NEXT].peer = next;
    snprintf(name, sizeof(name), "rank %d (liveness link)", prev);
    for (;;) {
        int fd;
        if (mki_sock_accept(lfd, deadline, name, &fd) != mkSuccess) {
            res = live_fail(comm, "accept");
            goto out;
        }
        struct mki_live_frame h;
        if (mki_sock_recv(fd, &h, sizeof(h), deadline, name) == mkSuccess &&
            frame_ok(&h, lv->nranks, lv->check) && h.type == MKI_LIVE_HELLO && h.rank == prev) {
            lv->link[LINK_PREV].fd = fd;
            lv->link[LINK_PREV].peer = prev;
            break;
        }
        close(fd); /* a stray connection: keep waiting for the neighbour */
        mki_thread_error_clear();
    }
out:
    free(all);
    if (lfd >= 0) close(lfd);
    return res;
}

static void live_free(struct mki_live *lv)
{
    for (int i = 0; i < 2; i++) link_close(&lv->link[i]);
    for (int i = 0; i < 2; i++)
        if (lv->wake[i] >= 0) close(lv->wake[i]);
    pthread_mutex_destroy(&lv->lock);
    free(lv->known);
    free(lv);
}

mkResult_t mki_live_create(struct mkComm *comm)
{
    if (comm->nranks < 2) return mkSuccess;
    struct mki_live *lv = calloc(1, sizeof(*lv));
    if (!lv) return mki_error(comm, mkErrNoMemory, "out of host memory");
    lv->comm = comm;
    lv->rank = comm->rank;
    lv->nranks = comm->nranks;
    lv->check = mki_live_check(comm->cookie);
    lv->silence_ns = (uint64_t)comm->cfg.timeoutMs * 1000000ull;
    lv->dead = -1;
    lv->wake[0] = lv->wake[1] = -1;
    pthread_mutex_init(&lv->lock, NULL);
    for (int i = 0; i < 2; i++) lv->link[i].fd = -1;
    lv->known = calloc((size_t)lv->nranks, 1);
    mkResult_t res = mkSuccess;
    if (!lv->known) {
        res = mki_error(comm, mkErrNoMemory, "out of host memory");
        goto fail;
    }
    MKI_CHECK_GOTO(live_connect(comm, lv), res, fail);
    if (pipe(lv->wake) != 0) {
        lv->wake[0] = lv->wake[1] = -1;
        res = mki_error(comm, mkErrSystem, "pipe: %s", strerror(errno));
        goto fail;
    }
    const uint64_t now = mki_now_ns();
    for (int i = 0; i < 2; i++) lv->link[i].last_rx = now;
    if (pthread_create(&lv->thread, NULL, live_main, lv) != 0) {
        res = mki_error(comm, mkErrSystem, "cannot start the liveness thread");
        goto fail;
    }
    lv->up = 1;
    comm->live = lv;
    return mkSuccess;
fail:
    live_free(lv);
    return res;
}

static void live_stop(struct mki_live *lv)
{
    if (!lv->up) return;
    __atomic_store_n(&lv->stop, 1, __ATOMIC_RELEASE);
    const char c = 0;
    ssize_t w = write(lv->wake[1], &c, 1);
    (void)w;
    pthread_join(lv->thread, NULL);
    lv->up = 0;
}

/* Stop the thread, send a last frame on both links (best effort, bounded),
 * close. */
static void live_end(struct mkComm *comm, uint32_t type)
{
    struct mki_live *lv = comm->live;
    if (!lv) return;
    live_stop(lv);
    for (int i = 0; i < 2; i++) link_send(lv, &lv->link[i], type, lv->rank);
    const uint64_t deadline = mki_now_ns() + 100000000ull;
    for (int i = 0; i < 2; i++)
        while (lv->link[i].fd >= 0 && lv->link[i].tx_len && mki_now_ns() < deadline) {
            struct pollfd p = {lv->link[i].fd, POLLOUT, 0};
            if (poll(&p, 1, 10) < 0 && errno != EINTR) break;
            link_flush(&lv->link[i]);
        }
    comm->live = NULL;
    live_free(lv);
}

void mki_live_destroy(struct mkComm *comm) { live_end(comm, MKI_LIVE_BYE); }

void mki_live_abort(struct mkComm *comm) { live_end(comm, MKI_LIVE_ABORT); }

int mki_live_dead(struct mkComm *comm, char *msg, size_t len)
{
    struct mki_live *lv = comm->live;
    if (!lv) return -1;
    pthread_mutex_lock(&lv->lock);
    int r = lv->dead;
    if (r >= 0 && msg) snprintf(msg, len, "%s", lv->why);
    pthread_mutex_unlock(&lv->lock);
    return r;
}
