/*
 * io.c - the socket transport's data path: frames out of the per-connection
 * queues (header + payload, device payloads through the bounce buffer),
 * frames in (header checked against our regions before a byte is placed,
 * payload received straight into place or through the bounce buffer
 * (headers and short payloads through a read-ahead buffer),
 * striped commands counted, the signal raised after the last stripe).
 * The protocol and the wiring are in socket.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "socket.h"

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
        return mki_sk_fail(c, mkErrNoMemory, "out of %shost memory for a %u-byte "
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
        return mki_sk_fail(c, r, "socket transport: copying %llu bytes from device "
                    "memory failed", (unsigned long long)len);
    k->sfrom = pd;
    k->sto = pd + len;
    return mkSuccess;
}

mkResult_t mki_sk_send_some(struct sk_ctx *c, struct sk_conn *k)
{
    struct iovec iov[SEND_IOV];
    while (k->head) {
        MKI_CHECK(stage(c, k));
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)gather(k, iov)};
        MKI_SK_STAT_T0();
        ssize_t s = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        MKI_SK_STAT(c, 0, s);
        if (s < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            return mki_sk_fail(c, errno == EPIPE || errno == ECONNRESET
                        ? mkErrRemote : mkErrTransport, "socket transport: "
                        "send to rank %d failed: %s (it exited, aborted or "
                        "failed)", c->peers[k->peer].rank, strerror(errno));
        }
        k->last_send_ns = mki_now_ns();
        advance(c, k, (size_t)s);
    }
    if (k->head && mki_now_ns() - k->last_send_ns >
                       (uint64_t)c->a.timeout_ms * 1000000ull)
        return mki_sk_fail(c, mkErrTimeout, "socket transport: rank %d took no data "
                    "for %d ms (MK_TIMEOUT_MS); it is stuck or gone",
                    c->peers[k->peer].rank, c->a.timeout_ms);
    return mkSuccess;
}

/* ---- receiving ---------------------------------------------------- */

static mkResult_t bad_frame(struct sk_ctx *c, struct sk_conn *k,
                            const char *why)
{
    int r = c->peers[k->peer].rank;
    mki_sk_conn_shut(k);
    return mki_sk_fail(c, mkErrTransport, "socket transport: bad frame from rank %d "
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
            return mki_sk_fail(c, r, "socket transport: out of host memory");
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
                return mki_sk_fail(c, r, "socket transport: raising a signal in "
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
    MKI_SK_STAT_T0();
    ssize_t n = recv(k->fd, dst, len, MSG_DONTWAIT);
    MKI_SK_STAT(c, 1, n);
    if (n > 0) {
        k->last_recv_ns = mki_now_ns();
        c->rx_bytes += (uint64_t)n;
        return (int)n;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    int r = c->peers[k->peer].rank, mid = k->rgot || k->in_payload;
    const char *why = n == 0 ? "closed the connection" : strerror(errno);
    mki_sk_conn_shut(k);
    if (mid)
        *res = mki_sk_fail(c, mkErrTransport, "socket transport: rank %d %s in the "
                    "middle of a frame (truncated frame)", r, why);
    else
        *res = mki_sk_fail(c, mkErrRemote, "socket transport: rank %d %s (it exited, "
                    "aborted or failed)", r, why);
    return -1;
}

/* The read-ahead: one recv() takes whatever the connection holds, up to
 * RA_BYTES, so that a small frame costs one system call, not three (its
 * header, its payload, and the try for the next header).  Headers and
 * payloads shorter than the buffer come through it; a longer payload's
 * bytes past what is already buffered are received straight into place
 * (or into the bounce buffer), as before.  1 when bytes came, 0 when none
 * are there now, -1 on failure (*res set). */
static int ra_fill(struct sk_ctx *c, struct sk_conn *k, mkResult_t *res)
{
    if (!k->ra && !(k->ra = malloc(RA_BYTES))) {
        *res = mki_sk_fail(c, mkErrNoMemory, "socket transport: out of host memory for a "
                           "%u-byte read-ahead buffer", RA_BYTES);
        return -1;
    }
    int n = rd(c, k, k->ra, RA_BYTES, res);
    if (n <= 0) return n;
    k->ra_lo = 0;
    k->ra_hi = (uint32_t)n;
    return 1;
}

/* Up to len bytes of the current frame out of the read-ahead buffer. */
static size_t ra_take(struct sk_conn *k, void *dst, uint64_t len)
{
    uint64_t t = k->ra_hi - k->ra_lo;
    if (t > len) t = len;
    memcpy(dst, k->ra + k->ra_lo, (size_t)t);
    k->ra_lo += (uint32_t)t;
    return (size_t)t;
}

/* Payload bytes for device memory go to the bounce buffer first (from the
 * read-ahead buffer, or received into it) and are copied out whenever it
 * fills or the frame ends, before the signal can be raised.  Returns what
 * rd() returns for a receive, 1 for bytes taken from the read-ahead. */
static int recv_staged(struct sk_ctx *c, struct sk_conn *k, uint64_t budget,
                       mkResult_t *res)
{
    if ((*res = need_bounce(c, &k->rbounce)) != mkSuccess) return -1;
    uint64_t fill = k->pgot - k->rfrom, want = k->rh.bytes - k->pgot;
    if (want > STAGE - fill) want = STAGE - fill;
    int n;
    if (k->ra_lo < k->ra_hi) {
        n = (int)ra_take(k, k->rbounce + fill, want);
        k->pgot += (uint64_t)n;
        fill += (uint64_t)n;
        n = 1;
    } else {
        if (want > budget) want = budget;
        n = rd(c, k, k->rbounce + fill, (size_t)want, res);
        if (n <= 0) return n;
        k->pgot += (uint64_t)n;
        fill += (uint64_t)n;
    }
    if (fill == STAGE || k->pgot == k->rh.bytes) {
        char *dst = c->base[k->rh.region] + k->rh.offset + k->rfrom;
        *res = c->a.copy_device(c->a.dev_ctx, dst, k->rbounce, (size_t)fill, 1);
        if (*res != mkSuccess) {
            *res = mki_sk_fail(c, *res, "socket transport: copying %llu bytes to "
                        "device memory failed", (unsigned long long)fill);
            return -1;
        }
        k->rfrom = k->pgot;
    }
    return n;
}

mkResult_t mki_sk_recv_some(struct sk_ctx *c, struct sk_conn *k)
{
    const size_t hl = sizeof(struct sk_frame);
    mkResult_t res = mkSuccess;
    uint64_t budget = RECV_BUDGET; /* bytes received by system calls */
    /* what is read ahead is taken whatever the budget: a frame it holds
     * must not wait for more bytes that may never come */
    while (budget > 0 || k->ra_lo < k->ra_hi) {
        int n;
        if (!k->in_payload) {
            if (k->ra_lo == k->ra_hi) {
                n = ra_fill(c, k, &res);
                if (n <= 0) break;
                budget -= (uint64_t)k->ra_hi < budget ? (uint64_t)k->ra_hi : budget;
            }
            k->rgot += ra_take(k, (char *)&k->rh + k->rgot, hl - k->rgot);
            if (k->rgot < hl) continue;
            const char *why = frame_problem(c, k);
            if (why) return bad_frame(c, k, why);
            k->in_payload = 1;
        } else if (k->pgot < k->rh.bytes) {
            const uint64_t want = k->rh.bytes - k->pgot;
            if (k->ra_lo == k->ra_hi && want < RA_BYTES) {
                /* a short rest: read ahead (the next frames come with it) */
                n = ra_fill(c, k, &res);
                if (n <= 0) break;
                budget -= (uint64_t)k->ra_hi < budget ? (uint64_t)k->ra_hi : budget;
                continue;
            }
            if (c->kind[k->rh.region] == MKI_MEM_DEVICE) {
                const int from_ra = k->ra_lo < k->ra_hi;
                const uint64_t before = k->pgot;
                n = recv_staged(c, k, budget, &res);
                if (n <= 0) break;
                if (!from_ra) budget -= k->pgot - before < budget ? k->pgot - before : budget;
            } else {
                char *dst = c->base[k->rh.region] + k->rh.offset + k->pgot;
                if (k->ra_lo < k->ra_hi) {
                    k->pgot += ra_take(k, dst, want);
                } else {
                    n = rd(c, k, dst, (size_t)(want < budget ? want : budget), &res);
                    if (n <= 0) break;
                    k->pgot += (uint64_t)n;
                    budget -= (uint64_t)n < budget ? (uint64_t)n : budget;
                }
            }
        }
        if (k->in_payload && k->pgot == k->rh.bytes)
            MKI_CHECK(frame_landed(c, k));
    }
    if (res != mkSuccess) return res;
    if ((k->rgot || k->in_payload) &&
        mki_now_ns() - k->last_recv_ns > (uint64_t)c->a.timeout_ms * 1000000ull) {
        int r = c->peers[k->peer].rank;
        mki_sk_conn_shut(k);
        return mki_sk_fail(c, mkErrTransport, "socket transport: rank %d sent part "
                    "of a frame (%zu header and %llu payload bytes) and "
                    "nothing for %d ms (truncated frame); connection closed",
                    r, k->rgot, (unsigned long long)k->pgot, c->a.timeout_ms);
    }
    return mkSuccess;
}
