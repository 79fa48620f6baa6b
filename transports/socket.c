/*
 * socket.c - the TCP transport: the fallback without RDMA, and the path
 * the CPU tests drive end to end.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mki.h"
#include "bootstrap/sock.h"
#include "transport.h"
#include "socket_wire.h"

#define STRIPE_MIN (128u << 10)
#define MAX_FRAMES 8192       /* queued frames per context */
#define RECV_BUDGET (8u << 20) /* bytes per connection per progress call */
#define STAGE (1u << 20)       /* bounce buffer per connection (device data) */

struct sk_cmd {
    int frames_left;
};

struct sk_out {
    struct sk_frame h;
    const char *payload;
    size_t done;          /* bytes of header + payload sent */
    int dev;              /* payload in device memory: sent via the bounce */
    struct sk_cmd *cmd;
    struct sk_out *next;
};

struct sk_conn {
    int fd;
    int peer;                     /* index in ctx->peers */
    struct sk_out *head, *tail;
    struct sk_frame rh;           /* header being received */
    size_t rgot;                  /* header bytes received */
    uint64_t pgot;                /* payload bytes received */
    int in_payload;
    uint64_t last_send_ns, last_recv_ns;
    char *sbounce, *rbounce;      /* STAGE bytes each, for device memory */
    uint64_t sfrom, sto;          /* payload bytes [sfrom, sto) staged */
    uint64_t rfrom;               /* received payload bytes not yet copied
                                   * start here (rest are in the bounce) */
};

struct sk_pend {
    uint64_t cmd;
    uint32_t got, nframes;
};

struct sk_peer {
    int rank;
    struct sk_conn *conns;        /* nconn */
    uint64_t next_cmd;
    int rr;
    struct sk_pend *pend;         /* striped commands partly received */
    int npend, cap;
    uint32_t nregions;
    uint64_t sizes[MKI_NET_MAX_REGIONS];
};

struct sk_ctx {
    struct mki_net_args a;
    int *peer_of;                 /* rank -> index in peers, -1 */
    struct sk_peer *peers;
    int nconn;
    int lfd;
    union mki_sockaddr addr;
    int nregions;
    char *base[MKI_NET_MAX_REGIONS];
    uint64_t size[MKI_NET_MAX_REGIONS];
    enum mki_mem_kind kind[MKI_NET_MAX_REGIONS];
    int queued;                   /* frames not yet sent */
    uint64_t completed;           /* not yet reported by progress */
    mkResult_t err;
};

/* ---- errors ------------------------------------------------------- */

static mkResult_t fail(struct sk_ctx *c, mkResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mkResult_t fail(struct sk_ctx *c, mkResult_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mki_verror(NULL, res, fmt, ap);
    va_end(ap);
    if (c->err == mkSuccess) c->err = res;
    return res;
}

static void conn_close(struct sk_conn *k)
{
    if (k->fd >= 0) close(k->fd);
    k->fd = -1;
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
    for (int p = 0; c->peers && p < c->a.npeers; p++) {
        struct sk_peer *pe = &c->peers[p];
        for (int i = 0; pe->conns && i < c->nconn; i++) {
            struct sk_conn *k = &pe->conns[i];
            conn_close(k);
            bounce_free(c, k->sbounce);
            bounce_free(c, k->rbounce);
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
    MKI_INFO(MKI_SUB_NET, "socket transport: %d peers x %d connections",
             c->a.npeers, c->nconn);
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

/* ---- sending ------------------------------------------------------ */

static void frame_sent(struct sk_ctx *c, struct sk_conn *k)
{
    struct sk_out *o = k->head;
    k->head = o->next;
    if (!k->head) k->tail = NULL;
    k->sfrom = k->sto = 0;
    if (--o->cmd->frames_left == 0) {
        free(o->cmd);
        c->completed++;
    }
    free(o);
    c->queued--;
}

#define SEND_IOV 64 /* frames gathered into one sendmsg (small writes) */

/* The unsent parts of the first frames of the queue, as iovecs. */
static int gather(const struct sk_conn *k, struct iovec *iov)
{
    const size_t hl = sizeof(struct sk_frame);
    int n = 0;
    for (const struct sk_out *o = k->head; o && n + 2 <= SEND_IOV; o = o->next) {
        int staged = o->dev && o->h.bytes;
        if (staged && o != k->head) break; /* its bytes are not staged yet */
        if (o->done < hl)
            iov[n++] = (struct iovec){(char *)&o->h + o->done, hl - o->done};
        size_t pd = o->done > hl ? o->done - hl : 0;
        if (staged) {
            iov[n++] = (struct iovec){k->sbounce + (pd - k->sfrom), k->sto - pd};
            break;
        }
        if (o->h.bytes)
            iov[n++] = (struct iovec){(char *)o->payload + pd, o->h.bytes - pd};
    }
    return n;
}

/* Account s sent bytes to the frames at the head of the queue. */
static void advance(struct sk_ctx *c, struct sk_conn *k, size_t s)
{
    const size_t hl = sizeof(struct sk_frame);
    while (s > 0 && k->head) {
        struct sk_out *o = k->head;
        size_t left = hl + o->h.bytes - o->done;
        size_t take = s < left ? s : left;
        o->done += take;
        s -= take;
        if (take == left) frame_sent(c, k);
    }
}

/* A connection carries both directions: one bounce buffer for each,
 * page-locked through the runtime's hook when it has one. */
static mkResult_t need_bounce(struct sk_ctx *c, char **b)
{
    if (*b) return mkSuccess;
    *b = c->a.host_alloc ? c->a.host_alloc(c->a.dev_ctx, STAGE) : malloc(STAGE);
    if (!*b)
        return fail(c, mkErrNoMemory, "out of %shost memory for a %u-byte "
                    "bounce buffer", c->a.host_alloc ? "page-locked " : "",
                    STAGE);
    return mkSuccess;
}

/* Device data goes out through the bounce buffer: copy the next part of
 * the head frame when what is staged has been sent. */
static mkResult_t stage(struct sk_ctx *c, struct sk_conn *k)
{
    const size_t hl = sizeof(struct sk_frame);
    struct sk_out *o = k->head;
    uint64_t pd = o->done > hl ? o->done - hl : 0;
    if (!o->dev || !o->h.bytes || (pd >= k->sfrom && pd < k->sto))
        return mkSuccess;
    MKI_CHECK(need_bounce(c, &k->sbounce));
    uint64_t len = o->h.bytes - pd < STAGE ? o->h.bytes - pd : STAGE;
    mkResult_t r = c->a.copy_device(c->a.dev_ctx, k->sbounce, o->payload + pd,
                                    (size_t)len, 0);
    if (r != mkSuccess)
        return fail(c, r, "socket transport: copying %llu bytes from device "
                    "memory failed", (unsigned long long)len);
    k->sfrom = pd;
    k->sto = pd + len;
    return mkSuccess;
}

static mkResult_t send_some(struct sk_ctx *c, struct sk_conn *k)
{
    struct iovec iov[SEND_IOV];
    while (k->head) {
        MKI_CHECK(stage(c, k));
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)gather(k, iov)};
        ssize_t s = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (s < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            return fail(c, errno == EPIPE || errno == ECONNRESET
                        ? mkErrRemote : mkErrTransport, "socket transport: "
                        "send to rank %d failed: %s (it exited, aborted or "
                        "failed)", c->peers[k->peer].rank, strerror(errno));
        }
        k->last_send_ns = mki_now_ns();
        advance(c, k, (size_t)s);
    }
    if (k->head && mki_now_ns() - k->last_send_ns >
                       (uint64_t)c->a.timeout_ms * 1000000ull)
        return fail(c, mkErrTimeout, "socket transport: rank %d took no data "
                    "for %d ms (MK_TIMEOUT_MS); it is stuck or gone",
                    c->peers[k->peer].rank, c->a.timeout_ms);
    return mkSuccess;
}

/* ---- receiving ---------------------------------------------------- */

static mkResult_t bad_frame(struct sk_ctx *c, struct sk_conn *k,
                            const char *why)
{
    int r = c->peers[k->peer].rank;
    conn_close(k);
    return fail(c, mkErrTransport, "socket transport: bad frame from rank %d "
                "(%s); connection closed, nothing written", r, why);
}

/* Validate a complete header against our regions before any byte of its
 * payload is placed. */
static const char *frame_problem(struct sk_ctx *c, struct sk_conn *k)
{
    const struct sk_frame *h = &k->rh;
    struct mki_net_signal s = {h->sig_op, h->sig_region, h->sig_off,
                               h->sig_val};
    if (h->magic != SK_MAGIC) return "bad magic";
    if (h->cookie != c->a.cookie) return "wrong job cookie";
    if (h->src != (uint32_t)c->peers[k->peer].rank) return "wrong source rank";
    if (h->region >= c->nregions) return "no such region";
    if (!mki_span_ok(h->offset, h->bytes, c->size[h->region]))
        return "span past the end of the registered region";
    if (!mki_signal_ok(&s, c->size, c->nregions)) return "bad signal";
    if (h->nframes < 1 || h->nframes > (uint32_t)c->nconn)
        return "bad stripe count";
    return NULL;
}

static mkResult_t pend_add(struct sk_peer *pe, const struct sk_frame *h,
                           int *complete)
{
    for (int i = 0; i < pe->npend; i++) {
        struct sk_pend *q = &pe->pend[i];
        if (q->cmd != h->cmd) continue;
        if (q->nframes != h->nframes) return mkErrTransport;
        if (++q->got == q->nframes) {
            *q = pe->pend[--pe->npend];
            *complete = 1;
        }
        return mkSuccess;
    }
    if (pe->npend == pe->cap) {
        int cap = pe->cap ? 2 * pe->cap : 16;
        struct sk_pend *n = realloc(pe->pend, sizeof(*n) * (size_t)cap);
        if (!n) return mkErrNoMemory;
        pe->pend = n;
        pe->cap = cap;
    }
    pe->pend[pe->npend++] = (struct sk_pend){h->cmd, 1, h->nframes};
    return mkSuccess;
}

static mkResult_t frame_landed(struct sk_ctx *c, struct sk_conn *k)
{
    const struct sk_frame *h = &k->rh;
    int complete = h->nframes == 1;
    if (!complete) {
        mkResult_t r = pend_add(&c->peers[k->peer], h, &complete);
        if (r == mkErrNoMemory)
            return fail(c, r, "socket transport: out of host memory");
        if (r != mkSuccess) return bad_frame(c, k, "stripe count changed");
    }
    if (complete && h->sig_op != MKI_SIG_NONE) {
        struct mki_net_signal s = {h->sig_op, h->sig_region, h->sig_off,
                                   h->sig_val};
        MKI_TRACE(MKI_SUB_NET, "%llu us: socket: command %llu from rank %u "
                  "landed: signal op %u at %llu value 0x%llx",
                  (unsigned long long)(mki_now_ns() / 1000),
                  (unsigned long long)h->cmd, h->src, s.op, (unsigned long long)s.offset,
                  (unsigned long long)s.value);
        if (c->kind[s.region] == MKI_MEM_HOST) {
            mki_signal_apply(c->base[s.region], &s);
        } else {
            mkResult_t r = c->a.raise_device_signal(
                c->a.dev_ctx, c->base[s.region] + s.offset, s.op, s.value);
            if (r != mkSuccess)
                return fail(c, r, "socket transport: raising a signal in "
                            "device memory failed");
        }
    }
    k->rgot = 0;
    k->pgot = 0;
    k->rfrom = 0;
    k->in_payload = 0;
    return mkSuccess;
}

/* recv() into dst; 1 when bytes came, 0 when none are there now. */
static int rd(struct sk_ctx *c, struct sk_conn *k, void *dst, size_t len,
              mkResult_t *res)
{
    ssize_t n = recv(k->fd, dst, len, MSG_DONTWAIT);
    if (n > 0) {
        k->last_recv_ns = mki_now_ns();
        return (int)n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    int r = c->peers[k->peer].rank, mid = k->rgot || k->in_payload;
    const char *why = n == 0 ? "closed the connection" : strerror(errno);
    conn_close(k);
    if (mid)
        *res = fail(c, mkErrTransport, "socket transport: rank %d %s in the "
                    "middle of a frame (truncated frame)", r, why);
    else
        *res = fail(c, mkErrRemote, "socket transport: rank %d %s (it exited, "
                    "aborted or failed)", r, why);
    return -1;
}

/* Payload bytes into plain memory were counted by the caller's rd(); for
 * device memory they go to the bounce buffer first and are copied out
 * whenever it fills or the frame ends, before the signal can be raised. */
static int recv_staged(struct sk_ctx *c, struct sk_conn *k, uint64_t budget,
                       mkResult_t *res)
{
    if ((*res = need_bounce(c, &k->rbounce)) != mkSuccess) return -1;
    uint64_t fill = k->pgot - k->rfrom, want = k->rh.bytes - k->pgot;
    if (want > STAGE - fill) want = STAGE - fill;
    if (want > budget) want = budget;
    int n = rd(c, k, k->rbounce + fill, (size_t)want, res);
    if (n <= 0) return n;
    k->pgot += (uint64_t)n;
    fill += (uint64_t)n;
    if (fill == STAGE || k->pgot == k->rh.bytes) {
        char *dst = c->base[k->rh.region] + k->rh.offset + k->rfrom;
        *res = c->a.copy_device(c->a.dev_ctx, dst, k->rbounce, (size_t)fill, 1);
        if (*res != mkSuccess) {
            *res = fail(c, *res, "socket transport: copying %llu bytes to "
                        "device memory failed", (unsigned long long)fill);
            return -1;
        }
        k->rfrom = k->pgot;
    }
    return n;
}

static mkResult_t recv_some(struct sk_ctx *c, struct sk_conn *k)
{
    const size_t hl = sizeof(struct sk_frame);
    mkResult_t res = mkSuccess;
    uint64_t budget = RECV_BUDGET;
    while (budget > 0) { /* then let the other connections have a turn */
        int n;
        if (!k->in_payload) {
            n = rd(c, k, (char *)&k->rh + k->rgot, hl - k->rgot, &res);
            if (n <= 0) break;
            budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
            if ((k->rgot += (size_t)n) < hl) continue;
            const char *why = frame_problem(c, k);
            if (why) return bad_frame(c, k, why);
            k->in_payload = 1;
        } else if (k->pgot < k->rh.bytes) {
            if (c->kind[k->rh.region] == MKI_MEM_DEVICE) {
                n = recv_staged(c, k, budget, &res);
            } else {
                uint64_t want = k->rh.bytes - k->pgot;
                n = rd(c, k, c->base[k->rh.region] + k->rh.offset + k->pgot,
                       (size_t)(want < budget ? want : budget), &res);
                if (n > 0) k->pgot += (uint64_t)n;
            }
            if (n <= 0) break;
            budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
        }
        if (k->in_payload && k->pgot == k->rh.bytes)
            MKI_CHECK(frame_landed(c, k));
    }
    if (res != mkSuccess) return res;
    if ((k->rgot || k->in_payload) &&
        mki_now_ns() - k->last_recv_ns > (uint64_t)c->a.timeout_ms * 1000000ull) {
        int r = c->peers[k->peer].rank;
        conn_close(k);
        return fail(c, mkErrTransport, "socket transport: rank %d sent part "
                    "of a frame (%zu header and %llu payload bytes) and "
                    "nothing for %d ms (truncated frame); connection closed",
                    r, k->rgot, (unsigned long long)k->pgot, c->a.timeout_ms);
    }
    return mkSuccess;
}

static mkResult_t sk_progress(void *ctx, uint64_t *completed)
{
    struct sk_ctx *c = ctx;
    if (c->err != mkSuccess) return c->err;
    for (int p = 0; p < c->a.npeers; p++) {
        for (int i = 0; i < c->nconn; i++) {
            struct sk_conn *k = &c->peers[p].conns[i];
            if (k->fd < 0) return c->err != mkSuccess ? c->err : mkErrInternal;
            MKI_CHECK(send_some(c, k));
            MKI_CHECK(recv_some(c, k));
        }
    }
    *completed += c->completed;
    c->completed = 0;
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
