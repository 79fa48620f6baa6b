/*
 * tcp.c - the TCP bootstrap: a rendezvous root and a ring of connections.
 *
 * Setup through a unique id (mkGetUniqueId / mkCommInitRank):
 *
 *     rank r                         root thread (in mkGetUniqueId's process)
 *     listen on L_r
 *     connect to root  ------------> accept, check job cookie (refuse others)
 *     send {cookie, r, n, L_r}       until all n ranks arrived or deadline
 *     <----------------------------- reply {ok, L_0 .. L_n-1}
 *                                    or {error, "ranks 3,5 never arrived"}
 *     connect to L_(r+1), hello{cookie, r}
 *     accept from L_r the hello of rank r-1 (wrong cookie: closed, refused)
 *
 * Every collective then runs on the ring (next = r+1, prev = r-1).  Before
 * its data, each op swaps a small header with the neighbours so that two
 * ranks calling different ops or sizes fail with a clear message instead
 * of reading each other's bytes.
 *
 *   allgather: n-1 steps; at step s send slot (r-s) to next while
 *              receiving slot (r-s-1) from prev.
 *   bcast:     the root's buffer travels once around the ring.
 *   barrier:   an allgather of one byte.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "sock.h"

#define TCP_MAGIC 0x6d6b6274u /* "mkbt" */
#define ROOT_GRACE_MS 2000    /* ranks wait this much longer than the root */

struct tcp_ctx {
    int rank, nranks;
    int timeout_ms;
    uint64_t cookie;
    uint64_t seq;
    int next_fd, prev_fd;
};

struct hello {
    uint32_t magic;
    int32_t rank;
    uint64_t cookie;
    int32_t nranks;
    int32_t pad;
    union mki_sockaddr addr;
};

struct root_reply {
    uint32_t magic;
    int32_t status; /* mkResult_t */
    char msg[256];
};

struct op_header {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq;
    uint64_t bytes;
    int64_t root;
};

/* ---- address selection ------------------------------------------- */

static int ifname_matches(const char *name, const char *spec)
{
    int negate = spec[0] == '^';
    const char *s = spec + negate;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    int hit = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strncmp(name, t, strlen(t)) == 0) hit = 1;
    return negate ? !hit : hit;
}

mkResult_t mki_tcp_pick_address(union mki_sockaddr *addr)
{
    return mki_sock_pick_address(mki_param_str(MKI_P_BOOTSTRAP_IFNAME),
                                 "MK_BOOTSTRAP_IFNAME", mkErrBootstrap, addr);
}

mkResult_t mki_sock_pick_address(const char *spec, const char *var,
                                 mkResult_t fail, union mki_sockaddr *addr)
{
    struct ifaddrs *ifs, *it, *lo = NULL, *pick = NULL;
    if (getifaddrs(&ifs) < 0)
        return mki_error(NULL, mkErrSystem, "getifaddrs: %s", strerror(errno));
    for (it = ifs; it && !pick; it = it->ifa_next) {
        if (!it->ifa_addr || !(it->ifa_flags & IFF_UP)) continue;
        int fam = it->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        if (fam == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)it->ifa_addr)->sin6_addr))
            continue; /* link-local needs a scope id; skip */
        if (spec[0] && spec[0] != '^') {
            if (ifname_matches(it->ifa_name, spec)) pick = it;
        } else if (spec[0] && !ifname_matches(it->ifa_name, spec)) {
            continue; /* excluded by ^list */
        } else if (it->ifa_flags & IFF_LOOPBACK) {
            if (!lo && fam == AF_INET) lo = it;
        } else if (fam == AF_INET) {
            pick = it;
        }
    }
    /* Loopback only when nothing else is up (one host) or asked for. */
    if (!pick && (!spec[0] || spec[0] == '^')) pick = lo;
    if (!pick) {
        freeifaddrs(ifs);
        return mki_error(NULL, fail, "no network interface %s is up with an "
                         "address; check %s (see `ip addr`)",
                         spec[0] ? spec : "at all", var);
    }
    memset(addr, 0, sizeof(*addr));
    memcpy(addr, pick->ifa_addr, pick->ifa_addr->sa_family == AF_INET6
                                     ? sizeof(struct sockaddr_in6)
                                     : sizeof(struct sockaddr_in));
    MKI_TRACE(MKI_SUB_BOOT, "%s: interface %s", var, pick->ifa_name);
    freeifaddrs(ifs);
    return mkSuccess;
}

/* ---- the rendezvous root ------------------------------------------ */

struct root_state {
    int lfd;
    int timeout_ms;
    uint64_t cookie;
};

static void root_reply_all(int *fds, int n, const struct root_reply *rep,
                           const union mki_sockaddr *addrs, uint64_t deadline)
{
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0) continue;
        if (mki_sock_send(fds[i], rep, sizeof(*rep), deadline, "a rank") ==
                mkSuccess && rep->status == mkSuccess)
            (void)mki_sock_send(fds[i], addrs, sizeof(*addrs) * (size_t)n,
                                deadline, "a rank");
        close(fds[i]);
    }
}

/* Accept one connection and read its hello; 1 when it is one of ours. */
static int root_accept_one(struct root_state *st, uint64_t deadline,
                           struct hello *h, int *fd)
{
    if (mki_sock_accept(st->lfd, deadline, "ranks at the rendezvous", fd) !=
        mkSuccess)
        return -1;
    if (mki_sock_recv(*fd, h, sizeof(*h), mki_deadline_ms(1000), "a joining "
                      "process") != mkSuccess ||
        h->magic != TCP_MAGIC || h->cookie != st->cookie) {
        struct root_reply no = {TCP_MAGIC, mkErrBootstrap,
                                "connection refused: the unique id's job "
                                "cookie does not match this rendezvous"};
        MKI_WARN(MKI_SUB_BOOT, "refused a connection to the rendezvous root "
                 "that did not carry this job's cookie");
        (void)mki_sock_send(*fd, &no, sizeof(no), mki_deadline_ms(1000),
                            "a refused process");
        close(*fd);
        return 0;
    }
    return 1;
}

static void *root_thread(void *arg)
{
    struct root_state *st = arg;
    struct root_reply rep = {TCP_MAGIC, mkSuccess, ""};
    int n = -1, arrived = 0;
    int *fds = NULL;
    union mki_sockaddr *addrs = NULL;
    uint64_t deadline = mki_deadline_ms(st->timeout_ms);
    while (n < 0 || arrived < n) {
        struct hello h;
        int fd, ok = root_accept_one(st, deadline, &h, &fd);
        if (ok < 0) break;                /* deadline */
        if (ok == 0) continue;            /* refused */
        if (n < 0) {
            if (h.nranks < 1 || h.nranks > (1 << 20)) { close(fd); continue; }
            n = h.nranks;
            fds = malloc(sizeof(int) * (size_t)n);
            addrs = calloc((size_t)n, sizeof(*addrs));
            if (!fds || !addrs) { close(fd); break; }
            for (int i = 0; i < n; i++) fds[i] = -1;
            deadline = mki_deadline_ms(st->timeout_ms); /* from first arrival */
        }
        if (h.nranks != n || h.rank < 0 || h.rank >= n || fds[h.rank] >= 0) {
            snprintf(rep.msg, sizeof(rep.msg), "rank %d of %d joined a "
                     "rendezvous of %d ranks%s; every rank must pass the same "
                     "nranks and a distinct rank in [0, nranks)", h.rank,
                     h.nranks, n, (h.rank >= 0 && h.rank < n && fds[h.rank] >= 0)
                     ? " twice" : "");
            rep.status = mkErrInvalidArgument;
            close(fd);
            break;
        }
        fds[h.rank] = fd;
        addrs[h.rank] = h.addr;
        arrived++;
    }
    if (fds && rep.status == mkSuccess && arrived < n) {
        int o = snprintf(rep.msg, sizeof(rep.msg), "timed out after %d ms: "
                         "%d of %d ranks never reached the rendezvous "
                         "(missing:", st->timeout_ms, n - arrived, n);
        for (int i = 0; i < n && o < (int)sizeof(rep.msg) - 16; i++)
            if (fds[i] < 0) o += snprintf(rep.msg + o, sizeof(rep.msg) - o,
                                          " %d", i);
        snprintf(rep.msg + o, sizeof(rep.msg) - (size_t)o, ")");
        rep.status = mkErrTimeout;
    }
    if (fds) root_reply_all(fds, n, &rep, addrs, mki_deadline_ms(st->timeout_ms));
    close(st->lfd);
    free(fds);
    free(addrs);
    free(st);
    return NULL;
}

mkResult_t mki_tcp_root_start(struct mki_unique_id *id, int timeout_ms)
{
    struct root_state *st = calloc(1, sizeof(*st));
    if (!st) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    memset(id, 0, sizeof(*id));
    mkResult_t res;
    MKI_CHECK_GOTO(mki_random_bytes(&st->cookie, sizeof(st->cookie)), res,
                   free_state);
    MKI_CHECK_GOTO(mki_tcp_pick_address(&id->root), res, free_state);
    MKI_CHECK_GOTO(mki_sock_listen(&id->root, &st->lfd), res, free_state);
    st->timeout_ms = timeout_ms;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, root_thread, st);
    pthread_attr_destroy(&attr);
    if (err) {
        res = mki_error(NULL, mkErrSystem, "pthread_create: %s", strerror(err));
        close(st->lfd);
        goto free_state;
    }
    id->magic = TCP_MAGIC;
    id->version = MK_VERSION_CODE;
    id->cookie = st->cookie;
    return mkSuccess;
free_state:
    free(st);
    return res;
}

/* ---- the ring ------------------------------------------------------ */

static void peer_name(char *buf, size_t len, const char *role, int rank)
{
    snprintf(buf, len, "bootstrap %s (rank %d)", role, rank);
}

/* Every byte of what goes on the wire is defined (no stack padding). */
static void hello_init(struct hello *h, const struct tcp_ctx *c,
                       const union mki_sockaddr *addr)
{
    memset(h, 0, sizeof(*h));
    h->magic = TCP_MAGIC;
    h->rank = c->rank;
    h->cookie = c->cookie;
    h->nranks = c->nranks;
    if (addr) h->addr = *addr;
}

/* Connect to next, accept prev; refuse connections without our cookie. */
static mkResult_t ring_connect(struct tcp_ctx *c, int lfd,
                               const union mki_sockaddr *next_addr)
{
    uint64_t deadline = mki_deadline_ms(c->timeout_ms);
    int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
    char name[64];
    struct hello h;
    hello_init(&h, c, NULL);
    peer_name(name, sizeof(name), "next", next);
    MKI_CHECK(mki_sock_connect(next_addr, deadline, name, &c->next_fd));
    MKI_CHECK(mki_sock_send(c->next_fd, &h, sizeof(h), deadline, name));
    peer_name(name, sizeof(name), "prev", prev);
    for (;;) {
        int fd;
        MKI_CHECK(mki_sock_accept(lfd, deadline, name, &fd));
        if (mki_sock_recv(fd, &h, sizeof(h), deadline, name) == mkSuccess &&
            h.magic == TCP_MAGIC && h.cookie == c->cookie && h.rank == prev) {
            c->prev_fd = fd;
            return mkSuccess;
        }
        MKI_WARN(MKI_SUB_BOOT, "refused a bootstrap connection without this "
                 "communicator's cookie");
        close(fd);
    }
}

static struct tcp_ctx *ctx_new(int rank, int nranks, int timeout_ms,
                               uint64_t cookie)
{
    struct tcp_ctx *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->rank = rank;
    c->nranks = nranks;
    c->timeout_ms = timeout_ms;
    c->cookie = cookie;
    c->next_fd = c->prev_fd = -1;
    return c;
}

static void tcp_close(void *ctx)
{
    struct tcp_ctx *c = ctx;
    if (!c) return;
    if (c->next_fd >= 0) close(c->next_fd);
    if (c->prev_fd >= 0) close(c->prev_fd);
    free(c);
}

mkResult_t mki_unique_id_parse(const void *bytes, size_t len, struct mki_unique_id *out)
{
    struct mki_unique_id id;
    if (len < sizeof(id))
        return mki_error(NULL, mkErrInvalidArgument, "mkCommInitRank: the unique id is "
                         "%zu bytes, not %zu", len, sizeof(id));
    memcpy(&id, bytes, sizeof(id));
    if (id.magic != TCP_MAGIC || id.version != MK_VERSION_CODE)
        return mki_error(NULL, mkErrInvalidArgument, "mkCommInitRank: the "
                         "unique id is not from mkGetUniqueId of this mkernel "
                         "version; broadcast all sizeof(mkUniqueId) bytes");
    const int fam = id.root.sa.sa_family;
    const unsigned port = fam == AF_INET ? id.root.sin.sin_port
                          : fam == AF_INET6 ? id.root.sin6.sin6_port : 0;
    if (port == 0)
        return mki_error(NULL, mkErrInvalidArgument, "mkCommInitRank: the unique id "
                         "holds no rendezvous address (family %d, port 0): it was "
                         "damaged on the way; broadcast all sizeof(mkUniqueId) bytes "
                         "of one mkGetUniqueId", fam);
    *out = id;
    return mkSuccess;
}

/* Ask the root for the table of listen addresses of all ranks. */
static mkResult_t join_root(const struct mki_unique_id *id, struct tcp_ctx *c,
                            const union mki_sockaddr *mine,
                            union mki_sockaddr *addrs)
{
    uint64_t deadline = mki_deadline_ms((int64_t)c->timeout_ms + ROOT_GRACE_MS);
    struct hello h;
    struct root_reply rep;
    hello_init(&h, c, mine);
    int fd;
    mkResult_t res = mki_sock_connect(&id->root, deadline, "the rendezvous root",
                                      &fd);
    if (res != mkSuccess)
        return mki_error(NULL, res == mkErrTimeout ? mkErrTimeout : mkErrBootstrap,
                         "rank %d cannot reach the rendezvous root (%s); the "
                         "mkUniqueId serves one mkCommInitRank round and its "
                         "process must stay alive: call mkGetUniqueId again "
                         "for another communicator", c->rank,
                         mki_thread_error());
    res = mki_sock_send(fd, &h, sizeof(h), deadline, "the rendezvous root");
    if (res == mkSuccess)
        res = mki_sock_recv(fd, &rep, sizeof(rep), deadline,
                            "the rendezvous root");
    if (res == mkSuccess && rep.magic != TCP_MAGIC) {
        res = mki_error(NULL, mkErrBootstrap, "the rendezvous root at the unique id's "
                        "address answered with bytes that are not mkernel's (another "
                        "service on that port?)");
    } else if (res == mkSuccess && rep.status != mkSuccess) {
        rep.msg[sizeof(rep.msg) - 1] = '\0';
        const mkResult_t st = rep.status > mkSuccess && rep.status < mkNumResults
                                  ? (mkResult_t)rep.status : mkErrBootstrap;
        res = mki_error(NULL, st, "rendezvous failed: %s", rep.msg);
    } else if (res == mkSuccess) {
        res = mki_sock_recv(fd, addrs, sizeof(*addrs) * (size_t)c->nranks,
                            deadline, "the rendezvous root");
    }
    close(fd);
    return res;
}

/* The end of both ways in: while res is success, connect the ring to the
 * next rank (listening on lfd for the previous one); then free what the
 * setup used (scratch, lfd), and on failure the context too. */
static mkResult_t ring_finish(mkResult_t res, struct tcp_ctx *c, int lfd,
                              const union mki_sockaddr *next, void *scratch, void **out)
{
    if (res == mkSuccess && c->nranks > 1) res = ring_connect(c, lfd, next);
    if (lfd >= 0) close(lfd);
    free(scratch);
    if (res != mkSuccess) {
        tcp_close(c);
        return res;
    }
    *out = c;
    return mkSuccess;
}

mkResult_t mki_bootstrap_tcp_init(const struct mki_unique_id *id, int rank,
                                  int nranks, int timeout_ms, void **out)
{
    mkResult_t res = mkSuccess;
    union mki_sockaddr mine;
    int lfd = -1;
    struct tcp_ctx *c = ctx_new(rank, nranks, timeout_ms, id->cookie);
    union mki_sockaddr *addrs = calloc((size_t)nranks, sizeof(*addrs));
    if (!c || !addrs) {
        res = mki_error(NULL, mkErrNoMemory, "out of host memory");
        goto fail;
    }
    MKI_CHECK_GOTO(mki_tcp_pick_address(&mine), res, fail);
    MKI_CHECK_GOTO(mki_sock_listen(&mine, &lfd), res, fail);
    MKI_CHECK_GOTO(join_root(id, c, &mine, addrs), res, fail);
    return ring_finish(mkSuccess, c, lfd, &addrs[(rank + 1) % nranks], addrs, out);
fail:
    return ring_finish(res, c, lfd, NULL, addrs, out);
}

struct split_entry {
    int32_t member;
    int32_t rank;
    union mki_sockaddr addr;
};

mkResult_t mki_bootstrap_tcp_from_parent(const struct mki_bootstrap_ops *pops,
                                         void *pctx, int prank, int pnranks,
                                         int member, int rank, int nranks,
                                         const int *group, uint64_t cookie,
                                         int timeout_ms, void **out)
{
    mkResult_t res = mkSuccess;
    int lfd = -1;
    struct tcp_ctx *c = NULL;
    struct split_entry *tab = calloc((size_t)pnranks, sizeof(*tab));
    if (!tab) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    if (member) {
        tab[prank].member = 1;
        tab[prank].rank = rank;
        MKI_CHECK_GOTO(mki_tcp_pick_address(&tab[prank].addr), res, fail);
        MKI_CHECK_GOTO(mki_sock_listen(&tab[prank].addr, &lfd), res, fail);
    }
    /* Everyone takes part in the exchange, even if setup failed locally,
     * so that the others do not wait for this rank until the deadline. */
    MKI_CHECK_GOTO(pops->allgather(pctx, tab, sizeof(*tab)), res, fail);
    if (!member) {
        *out = NULL;
        free(tab);
        return mkSuccess;
    }
    c = ctx_new(rank, nranks, timeout_ms, cookie);
    if (!c) {
        res = mki_error(NULL, mkErrNoMemory, "out of host memory");
        goto fail;
    }
    return ring_finish(mkSuccess, c, lfd, &tab[group[(rank + 1) % nranks]].addr, tab, out);
fail:
    return ring_finish(res, c, lfd, NULL, tab, out);
}

/* ---- collectives on the ring ------------------------------------- */

enum { OP_ALLGATHER = 1, OP_BCAST = 2, OP_BARRIER = 3 };
static const char *op_name(uint32_t k)
{
    return k == OP_ALLGATHER ? "allgather" : k == OP_BCAST ? "bcast" : "barrier";
}

/* Swap headers with the neighbours and check both sides agree. */
static mkResult_t op_begin(struct tcp_ctx *c, uint32_t kind, size_t bytes,
                           int root, uint64_t deadline)
{
    struct op_header mine = {TCP_MAGIC, kind, c->seq++, bytes, root}, theirs;
    int prev = (c->rank - 1 + c->nranks) % c->nranks;
    char sname[64], rname[64];
    peer_name(sname, sizeof(sname), "next", (c->rank + 1) % c->nranks);
    peer_name(rname, sizeof(rname), "prev", prev);
    MKI_CHECK(mki_sock_sendrecv(c->next_fd, &mine, sizeof(mine), c->prev_fd,
                                &theirs, sizeof(theirs), deadline, sname, rname));
    if (theirs.magic != TCP_MAGIC || theirs.kind != kind ||
        theirs.seq != mine.seq || theirs.bytes != bytes || theirs.root != root)
        return mki_error(NULL, mkErrInvalidUsage,
                         "bootstrap mismatch: rank %d called %s #%llu of %llu "
                         "bytes (root %lld) while rank %d called %s #%llu of "
                         "%llu bytes (root %lld); every rank must make the same "
                         "collective calls in the same order", prev,
                         op_name(theirs.kind), (unsigned long long)theirs.seq,
                         (unsigned long long)theirs.bytes, (long long)theirs.root,
                         c->rank, op_name(kind), (unsigned long long)mine.seq,
                         (unsigned long long)bytes, (long long)root);
    return mkSuccess;
}

static mkResult_t ring_allgather(struct tcp_ctx *c, uint32_t kind, void *buf,
                                 size_t bytes)
{
    if (c->nranks == 1) return mkSuccess;
    uint64_t deadline = mki_deadline_ms(c->timeout_ms);
    char *b = buf;
    int n = c->nranks, r = c->rank;
    char sname[64], rname[64];
    peer_name(sname, sizeof(sname), "next", (r + 1) % n);
    peer_name(rname, sizeof(rname), "prev", (r - 1 + n) % n);
    MKI_CHECK(op_begin(c, kind, bytes, -1, deadline));
    for (int s = 0; s < n - 1; s++) {
        int sslot = (r - s + n) % n, rslot = (r - s - 1 + n) % n;
        MKI_CHECK(mki_sock_sendrecv(c->next_fd, b + (size_t)sslot * bytes, bytes,
                                    c->prev_fd, b + (size_t)rslot * bytes, bytes,
                                    deadline, sname, rname));
    }
    return mkSuccess;
}

static mkResult_t tcp_allgather(void *ctx, void *buf, size_t bytes)
{
    return ring_allgather(ctx, OP_ALLGATHER, buf, bytes);
}

static mkResult_t tcp_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    struct tcp_ctx *c = ctx;
    if (c->nranks == 1) return mkSuccess;
    uint64_t deadline = mki_deadline_ms(c->timeout_ms);
    int n = c->nranks, next = (c->rank + 1) % n, prev = (c->rank - 1 + n) % n;
    char sname[64], rname[64];
    peer_name(sname, sizeof(sname), "next", next);
    peer_name(rname, sizeof(rname), "prev", prev);
    MKI_CHECK(op_begin(c, OP_BCAST, bytes, root, deadline));
    if (c->rank != root)
        MKI_CHECK(mki_sock_recv(c->prev_fd, buf, bytes, deadline, rname));
    if (next != root)
        MKI_CHECK(mki_sock_send(c->next_fd, buf, bytes, deadline, sname));
    return mkSuccess;
}

static mkResult_t tcp_barrier(void *ctx)
{
    struct tcp_ctx *c = ctx;
    char *tmp = calloc((size_t)c->nranks, 1);
    if (!tmp) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    mkResult_t res = ring_allgather(c, OP_BARRIER, tmp, 1);
    free(tmp);
    return res;
}

const struct mki_bootstrap_ops mki_bootstrap_tcp_ops = {
    "tcp", tcp_allgather, tcp_bcast, tcp_barrier, tcp_close,
};
