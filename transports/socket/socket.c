/*
 * socket.c - the TCP transport: the fallback without RDMA, and the path
 * the CPU tests drive end to end.  This file: the wiring (init, regions,
 * connect), the receiving thread, posting and progress (the sending half,
 * on the proxy's thread); the data path is io.c.
 *
 * Wiring (connect): every rank listens on MK_SOCKET_IFNAME, the addresses
 * and region sizes go around the bootstrap (allgather), then for each pair
 * of peers the lower rank opens MK_SOCKET_NCONN connections to the higher
 * one and says hello {magic, cookie, rank, conn, nconn}.  A hello with
 * another job's cookie is refused and closed.
 *
 * Frames (64-byte header + payload), each on one connection:
 *
 *     {magic, region, sig op/region, cookie, remote offset, bytes,
 *      sig offset, sig value, cmd, nframes, src rank} payload[bytes]
 *
 * A write of at least 2 x STRIPE_MIN bytes is cut into up to NCONN
 * stripes, one per connection; every stripe carries the command number
 * and the stripe count.  post_signal sends a zero-byte frame on every
 * connection: since each connection is read in order, once all of them
 * arrived every earlier frame from that peer has been copied (a fence).
 *
 *     sender                                receiver (per connection)
 *     stripe 0 --conn 0--> header: magic, cookie, span within region?
 *     stripe 1 --conn 1-->   no: close it, mkErrTransport, write nothing
 *     ...                    yes: recv the payload straight into place
 *                              (headers and short payloads through a
 *                              read-ahead buffer: a small frame is one recv)
 *                          frames of cmd == nframes? raise the signal
 *
 * Device memory (the GPU workspace): the proxy cannot touch it, so each
 * connection has a bounce buffer per direction (STAGE bytes); the sender
 * copies the next STAGE bytes of the head frame in through the runtime's
 * copy_device hook once the previous ones are on the wire, the receiver
 * copies out each time the buffer fills and at the end of the frame, and
 * raises the signal (raise_device_signal) only after the last copy.
 *
 * Liveness: a peer that closes at a frame boundary is mkErrRemote; mid
 * frame, or silent for MK_TIMEOUT_MS in the middle of a frame, it is
 * mkErrTransport (truncated frame); a peer that takes no bytes for
 * MK_TIMEOUT_MS while we have some to send is mkErrTimeout.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "socket.h"

/* ---- errors ------------------------------------------------------- */

/* Either thread may fail first; the first error and its message stay. */
mkResult_t mki_sk_fail(struct sk_ctx *c, mkResult_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mki_verror(NULL, res, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->elock);
    if (c->err == mkSuccess) {
        snprintf(c->emsg, sizeof(c->emsg), "%s", mki_thread_error());
        __atomic_store_n(&c->err, res, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->elock);
    return res;
}

/* The first error as the calling thread's error (progress reports what
 * the receiving thread found). */
static mkResult_t sticky_error(struct sk_ctx *c)
{
    pthread_mutex_lock(&c->elock);
    mkResult_t res = c->err;
    if (res != mkSuccess) mki_error_quiet(NULL, "%s", c->emsg);
    pthread_mutex_unlock(&c->elock);
    return res;
}

void mki_sk_conn_close(struct sk_conn *k)
{
    if (k->fd >= 0) close(k->fd);
    k->fd = -1;
}

void mki_sk_conn_shut(struct sk_conn *k)
{
    if (k->fd >= 0) (void)shutdown(k->fd, SHUT_RDWR);
    __atomic_store_n(&k->shut, 1, __ATOMIC_RELEASE);
}

/* ---- the receiving thread ------------------------------------------ */

#define RX_SPIN_NS 2000000ull /* without data this long, it sleeps in poll() */
#define RX_POLL_MS 1           /* for at most this long (stop, timeouts) */

/* Takes what arrives on every connection, so that the proxy's thread
 * only sends: one thread doing both copies moved at most about half of
 * what either alone does (bench/NOTES.md, eighteenth session). */
static void *rx_main(void *arg)
{
    struct sk_ctx *c = arg;
    const int n = c->a.npeers * c->nconn;
    struct pollfd *pf = calloc((size_t)(n > 0 ? n : 1), sizeof(*pf));
    uint64_t idle_since = 0;
    while (!__atomic_load_n(&c->rx_stop, __ATOMIC_ACQUIRE) && mki_sk_err(c) == mkSuccess) {
        const uint64_t before = c->rx_bytes;
        int live = 0;
        for (int p = 0; p < c->a.npeers; p++)
            for (int i = 0; i < c->nconn; i++) {
                struct sk_conn *k = &c->peers[p].conns[i];
                if (k->fd < 0 || k->shut) continue;
                if (mki_sk_recv_some(c, k) != mkSuccess) break;
                if (pf) pf[live++] = (struct pollfd){k->fd, POLLIN, 0};
            }
        if (c->rx_bytes != before) {
            idle_since = 0;
        } else {
            const uint64_t now = mki_now_ns();
            if (!idle_since) idle_since = now;
            if (now - idle_since >= RX_SPIN_NS) {
                if (pf && live) (void)poll(pf, (nfds_t)live, RX_POLL_MS);
                else usleep(RX_POLL_MS * 1000);
            }
        }
    }
    free(pf);
    return NULL;
}

static mkResult_t rx_start(struct sk_ctx *c)
{
    int rc = pthread_create(&c->rx, NULL, rx_main, c);
    if (rc != 0)
        return mki_error(NULL, mkErrSystem, "socket transport: cannot start the "
                         "receiving thread: %s", strerror(rc));
    c->rx_on = 1;
    return mkSuccess;
}

static void rx_stop(struct sk_ctx *c)
{
    if (!c->rx_on) return;
    __atomic_store_n(&c->rx_stop, 1, __ATOMIC_RELEASE);
    (void)pthread_join(c->rx, NULL);
    c->rx_on = 0;
}

/* ---- interface ---------------------------------------------------- */

/* MK_SOCKET_IFNAME, or else the bootstrap's interface; the same rule as
 * the bootstrap (src/bootstrap/tcp.c). */
static mkResult_t pick_address(union mki_sockaddr *addr)
{
    const char *spec = mki_param_str(MKI_P_SOCKET_IFNAME);
    if (!spec[0]) return mki_tcp_pick_address(addr);
    MKI_CHECK(mki_sock_pick_address(spec, "MK_SOCKET_IFNAME", mkErrTransport,
                                    addr));
    char b[80];
    MKI_INFO(MKI_SUB_NET, "socket transport on %s",
             mki_sockaddr_str(addr, b, sizeof(b)));
    return mkSuccess;
}

/* ---- init / reg / close ------------------------------------------- */

static void bounce_free(struct sk_ctx *c, char *b)
{
    if (b && c->a.host_free) c->a.host_free(c->a.dev_ctx, b);
    else free(b);
}

static void sk_close(void *ctx)
{
    struct sk_ctx *c = ctx;
    if (!c) return;
    rx_stop(c);
#ifdef MKI_SK_STATS
    if (c->st_calls[0] + c->st_calls[1])
        fprintf(stderr, "socket stats rank %d: span %.1f ms, progress %llu calls %.1f ms; "
                "send %llu calls %.1f MB %.1f ms (%.2f GB/s in the call), idle %llu %.1f ms; "
                "recv %llu calls %.1f MB %.1f ms (%.2f GB/s), idle %llu %.1f ms\n",
                c->a.rank, (double)(c->st_last_ns - c->st_first_ns) / 1e6,
                (unsigned long long)c->st_prog, (double)c->st_prog_ns / 1e6,
                (unsigned long long)c->st_calls[0], (double)c->st_bytes[0] / 1e6,
                (double)c->st_ns[0] / 1e6,
                c->st_ns[0] ? (double)c->st_bytes[0] / (double)c->st_ns[0] : 0.0,
                (unsigned long long)c->st_idle[0], (double)c->st_idle_ns[0] / 1e6,
                (unsigned long long)c->st_calls[1], (double)c->st_bytes[1] / 1e6,
                (double)c->st_ns[1] / 1e6,
                c->st_ns[1] ? (double)c->st_bytes[1] / (double)c->st_ns[1] : 0.0,
                (unsigned long long)c->st_idle[1], (double)c->st_idle_ns[1] / 1e6);
#endif
    for (int p = 0; c->peers && p < c->a.npeers; p++) {
        struct sk_peer *pe = &c->peers[p];
        for (int i = 0; pe->conns && i < c->nconn; i++) {
            struct sk_conn *k = &pe->conns[i];
            mki_sk_conn_close(k);
            bounce_free(c, k->sbounce);
            bounce_free(c, k->rbounce);
            free(k->ra);
            while (k->head) {
                struct sk_out *o = k->head;
                k->head = o->next;
                if (o->cmd && --o->cmd->frames_left == 0) free(o->cmd);
                free(o);
            }
        }
        free(pe->conns);
        free(pe->pend);
    }
    if (c->lfd >= 0) close(c->lfd);
    free(c->peers);
    free(c->peer_of);
    pthread_mutex_destroy(&c->elock);
    free(c);
}

static mkResult_t init_peers(struct sk_ctx *c)
{
    c->peer_of = malloc(sizeof(int) * (size_t)c->a.nranks);
    c->peers = calloc((size_t)c->a.npeers + 1, sizeof(*c->peers));
    if (!c->peer_of || !c->peers)
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    for (int r = 0; r < c->a.nranks; r++) c->peer_of[r] = -1;
    for (int p = 0; p < c->a.npeers; p++) {
        int r = c->a.peers[p];
        if (r < 0 || r >= c->a.nranks || r == c->a.rank || c->peer_of[r] >= 0)
            return mki_error(NULL, mkErrInvalidArgument, "socket transport: "
                             "peer list entry %d (rank %d) is out of range, "
                             "this rank, or repeated", p, r);
        c->peer_of[r] = p;
        c->peers[p].rank = r;
        c->peers[p].conns = calloc((size_t)c->nconn, sizeof(struct sk_conn));
        if (!c->peers[p].conns)
            return mki_error(NULL, mkErrNoMemory, "out of host memory");
        for (int i = 0; i < c->nconn; i++) {
            c->peers[p].conns[i].fd = -1;
            c->peers[p].conns[i].peer = p;
        }
    }
    return mkSuccess;
}

static mkResult_t sk_init(const struct mki_net_args *args, void **out)
{
    int64_t nconn;
    MKI_CHECK(mki_param_int(MKI_P_SOCKET_NCONN, &nconn));
    if (args->rank < 0 || args->rank >= args->nranks || args->npeers < 0 ||
        (args->npeers && !args->peers) || !args->boot)
        return mki_error(NULL, mkErrInvalidArgument, "socket transport: "
                         "rank %d of %d with %d peers is not a valid setup",
                         args->rank, args->nranks, args->npeers);
    struct sk_ctx *c = calloc(1, sizeof(*c));
    if (!c) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    c->a = *args;
    c->nconn = (int)nconn;
    c->lfd = -1;
    pthread_mutex_init(&c->elock, NULL);
    mkResult_t res;
    MKI_CHECK_GOTO(init_peers(c), res, fail_ctx);
    MKI_CHECK_GOTO(pick_address(&c->addr), res, fail_ctx);
    MKI_CHECK_GOTO(mki_sock_listen(&c->addr, &c->lfd), res, fail_ctx);
    *out = c;
    return mkSuccess;
fail_ctx:
    sk_close(c);
    return res;
}

static mkResult_t sk_reg_mem(void *ctx, void *base, size_t size,
                             enum mki_mem_kind kind, int *region)
{
    struct sk_ctx *c = ctx;
    if (kind != MKI_MEM_HOST &&
        (!c->a.copy_device || !c->a.raise_device_signal))
        return mki_error(NULL, mkErrUnsupported, "socket transport: device "
                         "memory needs the runtime's copy_device and "
                         "raise_device_signal hooks");
    if (c->nregions == MKI_NET_MAX_REGIONS || (!base && size))
        return mki_error(NULL, mkErrInvalidArgument, "socket transport: "
                         "region %d: base %p size %zu (at most %d regions)",
                         c->nregions, base, size, MKI_NET_MAX_REGIONS);
    c->base[c->nregions] = base;
    c->size[c->nregions] = size;
    c->kind[c->nregions] = kind;
    *region = c->nregions++;
    return mkSuccess;
}

/* ---- connect ------------------------------------------------------ */

static void keepalive(int fd, int timeout_ms)
{
    int one = 1, idle = timeout_ms / 2000 + 1, cnt = 2, intvl = idle / 2 + 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static mkResult_t dial(struct sk_ctx *c, const struct sk_addr *all,
                       uint64_t deadline)
{
    char what[64];
    for (int p = 0; p < c->a.npeers; p++) {
        int r = c->peers[p].rank;
        if (r < c->a.rank) continue;
        snprintf(what, sizeof(what), "rank %d (socket transport)", r);
        for (int i = 0; i < c->nconn; i++) {
            struct sk_conn *k = &c->peers[p].conns[i];
            struct sk_hello h = {SK_HELLO, c->a.rank, c->a.cookie, i, c->nconn};
            MKI_CHECK(mki_sock_connect(&all[r].addr, deadline, what, &k->fd));
            keepalive(k->fd, c->a.timeout_ms);
            MKI_CHECK(mki_sock_send(k->fd, &h, sizeof(h), deadline, what));
        }
    }
    return mkSuccess;
}

/* Check one hello; 1: placed, 0: refused (closed). */
static int take_hello(struct sk_ctx *c, int fd, const struct sk_hello *h,
                      mkResult_t *res)
{
    int p = (h->rank >= 0 && h->rank < c->a.nranks) ? c->peer_of[h->rank] : -1;
    if (h->magic != SK_HELLO || h->cookie != c->a.cookie) {
        MKI_WARN(MKI_SUB_NET, "socket transport refused a connection that "
                 "did not carry this communicator's job cookie");
        return 0;
    }
    if (h->nconn != c->nconn) {
        *res = mki_error(NULL, mkErrInvalidUsage, "rank %d uses "
                         "MK_SOCKET_NCONN=%d, this rank %d: set the same "
                         "value on every rank", h->rank, h->nconn, c->nconn);
        return 0;
    }
    if (p < 0 || h->rank > c->a.rank || h->conn < 0 || h->conn >= c->nconn ||
        c->peers[p].conns[h->conn].fd >= 0) {
        *res = mki_error(NULL, mkErrInvalidUsage, "rank %d connected as "
                         "connection %d, but it is not an expected peer of "
                         "rank %d (peer lists must be symmetric)", h->rank,
                         h->conn, c->a.rank);
        return 0;
    }
    c->peers[p].conns[h->conn].fd = fd;
    keepalive(fd, c->a.timeout_ms);
    return 1;
}

static mkResult_t answer(struct sk_ctx *c, uint64_t deadline)
{
    int want = 0;
    for (int p = 0; p < c->a.npeers; p++)
        if (c->peers[p].rank < c->a.rank) want += c->nconn;
    while (want > 0) {
        int fd;
        struct sk_hello h;
        mkResult_t res = mkSuccess;
        MKI_CHECK(mki_sock_accept(c->lfd, deadline, "socket transport peers",
                                  &fd));
        uint64_t d = mki_deadline_ms(1000);
        if (mki_sock_recv(fd, &h, sizeof(h), d < deadline ? d : deadline,
                          "a connecting process") == mkSuccess &&
            take_hello(c, fd, &h, &res)) {
            want--;
            continue;
        }
        close(fd);
        if (res != mkSuccess) return res;
    }
    return mkSuccess;
}

static mkResult_t sk_connect(void *ctx)
{
    struct sk_ctx *c = ctx;
    int n = c->a.nranks;
    struct sk_addr *all = calloc((size_t)n, sizeof(*all));
    if (!all) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    struct sk_addr *me = &all[c->a.rank];
    me->addr = c->addr;
    me->nregions = (uint32_t)c->nregions;
    memcpy(me->sizes, c->size, sizeof(c->size));
    mkResult_t res;
    MKI_CHECK_GOTO(c->a.boot->allgather(c->a.boot_ctx, all, sizeof(*all)),
                   res, free_all);
    for (int p = 0; p < c->a.npeers; p++) {
        struct sk_peer *pe = &c->peers[p];
        pe->nregions = all[pe->rank].nregions;
        memcpy(pe->sizes, all[pe->rank].sizes, sizeof(pe->sizes));
    }
    uint64_t deadline = mki_deadline_ms(c->a.timeout_ms);
    MKI_CHECK_GOTO(dial(c, all, deadline), res, free_all);
    MKI_CHECK_GOTO(answer(c, deadline), res, free_all);
    uint64_t now = mki_now_ns();
    for (int p = 0; p < c->a.npeers; p++)
        for (int i = 0; i < c->nconn; i++)
            c->peers[p].conns[i].last_recv_ns =
                c->peers[p].conns[i].last_send_ns = now;
    MKI_CHECK_GOTO(rx_start(c), res, free_all);
    MKI_INFO(MKI_SUB_NET, "socket transport: %d peers x %d connections, a receiving "
             "thread", c->a.npeers, c->nconn);
free_all:
    free(all);
    if (res != mkSuccess && c->err == mkSuccess) c->err = res;
    return res;
}

/* ---- posting ------------------------------------------------------ */

static void enqueue(struct sk_conn *k, struct sk_out *o)
{
    if (!k->head) k->last_send_ns = mki_now_ns();
    if (k->tail) k->tail->next = o;
    else k->head = o;
    k->tail = o;
}

/* Queue nframes frames of one command; frame i carries [off_i, off_i+len_i)
 * of the span (len 0 for fence frames). */
static mkResult_t queue_cmd(struct sk_ctx *c, struct sk_peer *pe,
                            uint32_t region, const char *src, uint64_t roff,
                            uint64_t bytes, int nframes,
                            const struct mki_net_signal *sig)
{
    struct sk_cmd *cmd = malloc(sizeof(*cmd));
    struct sk_out *o[16];
    int made = 0;
    if (!cmd) goto nomem;
    for (; made < nframes; made++)
        if (!(o[made] = calloc(1, sizeof(struct sk_out)))) goto nomem;
    cmd->frames_left = nframes;
    uint64_t stripe = (bytes + (uint64_t)nframes - 1) / (uint64_t)nframes;
    stripe = (stripe + 4095) & ~(uint64_t)4095;
    uint64_t cno = pe->next_cmd++;
    for (int i = 0; i < nframes; i++) {
        uint64_t off = (uint64_t)i * stripe;
        uint64_t len = off >= bytes ? 0 : (bytes - off < stripe ? bytes - off
                                                                 : stripe);
        o[i]->h = (struct sk_frame){
            SK_MAGIC, (uint8_t)region, (uint8_t)(sig ? sig->op : 0),
            (uint8_t)(sig ? sig->region : 0), 0, c->a.cookie, roff + off, len,
            sig ? sig->offset : 0, sig ? sig->value : 0, cno,
            (uint32_t)nframes, (uint32_t)c->a.rank};
        o[i]->payload = src ? src + off : NULL;
        o[i]->dev = c->kind[region] == MKI_MEM_DEVICE;
        o[i]->cmd = cmd;
        enqueue(&pe->conns[(pe->rr + i) % c->nconn], o[i]);
    }
    pe->rr = (pe->rr + 1) % c->nconn;
    c->queued += nframes;
    return mkSuccess;
nomem:
    while (made-- > 0) free(o[made]);
    free(cmd);
    return mki_error(NULL, mkErrNoMemory, "out of host memory");
}

static mkResult_t check_peer(struct sk_ctx *c, int peer, struct sk_peer **pe)
{
    if (c->err != mkSuccess) return c->err;
    int p = (peer >= 0 && peer < c->a.nranks) ? c->peer_of[peer] : -1;
    if (p < 0)
        return mki_error(NULL, mkErrInvalidArgument, "socket transport: rank "
                         "%d is not a connected peer of rank %d", peer,
                         c->a.rank);
    *pe = &c->peers[p];
    return mkSuccess;
}

static mkResult_t check_sig(struct sk_peer *pe,
                            const struct mki_net_signal *sig)
{
    if (!sig || mki_signal_ok(sig, pe->sizes, (int)pe->nregions))
        return mkSuccess;
    return mki_error(NULL, mkErrInvalidArgument, "socket transport: signal "
                     "op %u at region %u offset %llu is not an 8-aligned "
                     "counter inside a region of rank %d", sig->op,
                     sig->region, (unsigned long long)sig->offset, pe->rank);
}

static mkResult_t sk_post_write(void *ctx, int peer, uint32_t region,
                                uint64_t loff, uint64_t roff, uint64_t bytes,
                                const struct mki_net_signal *sig, int *posted)
{
    struct sk_ctx *c = ctx;
    struct sk_peer *pe;
    *posted = 0;
    MKI_CHECK(check_peer(c, peer, &pe));
    if ((int)region >= c->nregions || region >= pe->nregions ||
        !mki_span_ok(loff, bytes, c->size[region]) ||
        !mki_span_ok(roff, bytes, pe->sizes[region]))
        return mki_error(NULL, mkErrInvalidArgument, "socket transport: "
                         "write of %llu bytes from offset %llu to offset %llu "
                         "of region %u of rank %d is outside the region",
                         (unsigned long long)bytes, (unsigned long long)loff,
                         (unsigned long long)roff, region, peer);
    MKI_CHECK(check_sig(pe, sig));
    int n = 1;
    if (c->nconn > 1 && bytes >= 2ull * STRIPE_MIN) {
        uint64_t k = bytes / STRIPE_MIN;
        n = k < (uint64_t)c->nconn ? (int)k : c->nconn;
    }
    if (c->queued + n > MAX_FRAMES) return mkSuccess;
    MKI_CHECK(queue_cmd(c, pe, region, c->base[region] + loff, roff, bytes, n,
                        sig));
    *posted = 1;
    return mkSuccess;
}

static mkResult_t sk_post_signal(void *ctx, int peer,
                                 const struct mki_net_signal *sig, int *posted)
{
    struct sk_ctx *c = ctx;
    struct sk_peer *pe;
    *posted = 0;
    MKI_CHECK(check_peer(c, peer, &pe));
    if (!sig || sig->op == MKI_SIG_NONE)
        return mki_error(NULL, mkErrInvalidArgument, "socket transport: "
                         "post_signal needs a signal (SET or ADD)");
    MKI_CHECK(check_sig(pe, sig));
    if (c->queued + c->nconn > MAX_FRAMES) return mkSuccess;
    MKI_CHECK(queue_cmd(c, pe, sig->region, NULL, 0, 0, c->nconn, sig));
    *posted = 1;
    return mkSuccess;
}

/* ---- progress ----------------------------------------------------- */

/* The sending half (the receiving thread takes what arrives). */
static mkResult_t sk_progress(void *ctx, uint64_t *completed)
{
    struct sk_ctx *c = ctx;
    if (mki_sk_err(c) != mkSuccess) return sticky_error(c);
#ifdef MKI_SK_STATS
    const uint64_t st_p0 = mki_now_ns();
#endif
    for (int p = 0; p < c->a.npeers; p++) {
        for (int i = 0; i < c->nconn; i++) {
            struct sk_conn *k = &c->peers[p].conns[i];
            if (k->fd < 0) return mkErrInternal;
            if (__atomic_load_n(&k->shut, __ATOMIC_ACQUIRE)) continue; /* err follows */
            if (mki_sk_send_some(c, k) != mkSuccess) return sticky_error(c);
        }
    }
    *completed += c->completed;
    c->completed = 0;
#ifdef MKI_SK_STATS
    c->st_prog++;
    c->st_prog_ns += mki_now_ns() - st_p0;
#endif
    return mkSuccess;
}

const struct mki_transport_ops mki_transport_socket = {
    .name = "socket",
    .version = MKI_TRANSPORT_VERSION,
    .init = sk_init,
    .reg_mem = sk_reg_mem,
    .connect = sk_connect,
    .post_write = sk_post_write,
    .post_signal = sk_post_signal,
    .progress = sk_progress,
    .close = sk_close,
};
