/*
 * test_badframe - malformed input to the socket transport's receiver.
 *
 * Rank 1 runs the real transport over a 64 KiB region with guard pages of
 * a known pattern around it.  Rank 0 speaks the wire protocol by hand
 * (transports/socket/wire.h) and sends, one case per run: a hello with another job's
 * cookie and then a good frame (control), a frame with a wrong cookie, a
 * span past the region, a span whose end overflows, a signal outside the
 * region, a header cut short and closed, a header cut short and left
 * hanging.  Each bad case must fail the receiver with mkErrTransport,
 * close the connection (rank 0 sees EOF), and write nothing anywhere.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common.h"
#include "transports/socket/wire.h"
#include "../unit/check.h"

#define REGION (64u << 10)
#define GUARD 4096u
#define COOKIE 0xc00c1eull
#define TIMEOUT_MS 1500

enum bad_case {
    CONTROL, WRONG_COOKIE, PAST_END, OVERFLOW, BAD_SIGNAL, TRUNC_CLOSE,
    TRUNC_HANG, NCASES
};
static const char *case_name[] = {"control", "wrong cookie", "past end",
                                  "overflowing span", "bad signal",
                                  "truncated header + close",
                                  "truncated header + hang"};
static const char *expect_msg[] = {"", "wrong job cookie", "past the end",
                                   "past the end", "bad signal",
                                   "truncated frame", "truncated frame"};

static struct sk_frame good_frame(uint64_t off, uint64_t bytes)
{
    struct sk_frame h = {SK_MAGIC, 0, MKI_SIG_NONE, 0, 0, COOKIE, off, bytes,
                         0, 0, 0, 1, 0};
    return h;
}

static int dial(struct net_rank *nr, const struct sk_addr *a, uint64_t cookie,
                int *fd)
{
    int rank = 0;
    struct sk_hello h = {SK_HELLO, 0, cookie, 0, 1};
    uint64_t d = mki_deadline_ms(5000);
    EXPECT(mki_sock_connect(&a[1].addr, d, "rank 1", fd) == mkSuccess);
    EXPECT(mki_sock_send(*fd, &h, sizeof(h), d, "rank 1") == mkSuccess);
    return 0;
}

/* Rank 1 closes a connection it judged bad: we must see EOF (or reset). */
static int sees_close(int fd)
{
    char b[4096];
    uint64_t d = mki_deadline_ms(TIMEOUT_MS + 3000);
    while (mki_now_ns() < d) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 100);
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    }
    return 0;
}

static int send_case(int fd, enum bad_case c)
{
    static char payload[256];
    memset(payload, 0xee, sizeof(payload));
    struct sk_frame h = good_frame(4096, 100);
    if (c == WRONG_COOKIE) h.cookie ^= 1;
    if (c == PAST_END) h.offset = REGION - 10;
    if (c == OVERFLOW) h.offset = UINT64_MAX - 5, h.bytes = 100;
    if (c == BAD_SIGNAL) h.sig_op = MKI_SIG_SET, h.sig_off = REGION;
    if (c == CONTROL) h.sig_op = MKI_SIG_SET, h.sig_off = 8, h.sig_val = 5;
    size_t len = c == TRUNC_CLOSE || c == TRUNC_HANG ? 20 : sizeof(h);
    uint64_t d = mki_deadline_ms(5000);
    if (mki_sock_send(fd, &h, len, d, "rank 1") != mkSuccess) return 1;
    if (len == sizeof(h))
        (void)mki_sock_send(fd, payload, 100, d, "rank 1"); /* may be cut */
    return 0;
}

static int forger(struct net_rank *nr, enum bad_case c)
{
    int rank = 0, fd, bad_fd;
    struct sk_addr all[2];
    memset(all, 0, sizeof(all));
    all[0].nregions = 1;
    all[0].sizes[0] = REGION;
    EXPECT(nr->boot->allgather(nr->bctx, all, sizeof(all[0])) == mkSuccess);
    if (c == CONTROL) { /* an intruder first: refused */
        EXPECT(dial(nr, all, COOKIE + 1, &bad_fd) == 0);
        EXPECT(sees_close(bad_fd));
        close(bad_fd);
    }
    EXPECT(dial(nr, all, COOKIE, &fd) == 0);
    EXPECT(send_case(fd, c) == 0);
    if (c == CONTROL || c == TRUNC_CLOSE) {
        EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess); /* it saw the frame */
        close(fd);
    } else {
        EXPECT(sees_close(fd));
        close(fd);
    }
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    return 0;
}

static int untouched(const unsigned char *buf, enum bad_case c)
{
    for (unsigned i = 0; i < GUARD; i++)
        if (buf[i] != 0xa5 || buf[GUARD + REGION + i] != 0xa5) return 0;
    for (unsigned i = 0; i < REGION; i++) {
        unsigned char want = 0;
        if (c == CONTROL && i >= 4096 && i < 4196) want = 0xee;
        if (c == CONTROL && i == 8) want = 5;
        if (buf[GUARD + i] != want) return 0;
    }
    return 1;
}

static int receiver(struct net_rank *nr, enum bad_case c)
{
    int rank = 1;
    unsigned char *buf = malloc(REGION + 2 * GUARD);
    EXPECT(buf);
    memset(buf, 0xa5, REGION + 2 * GUARD);
    memset(buf + GUARD, 0, REGION);
    uint64_t *sig = (uint64_t *)(buf + GUARD + 8), done = 0;
    EXPECT(net_socket_open(nr, buf + GUARD, REGION, TIMEOUT_MS, COOKIE, 0) ==
           mkSuccess);
    const struct mki_transport_ops *t = &mki_transport_socket;
    if (c == CONTROL || c == TRUNC_CLOSE) {
        if (c == CONTROL)
            EXPECT(net_wait_ge(sig, 5, t, nr->tctx, mki_deadline_ms(5000)) ==
                   mkSuccess);
        else
            usleep(100000);
        EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    }
    uint64_t t0 = mki_now_ns();
    mkResult_t r;
    while ((r = t->progress(nr->tctx, &done)) == mkSuccess &&
           mki_now_ns() - t0 < (TIMEOUT_MS + 3000) * 1000000ull)
        usleep(200);
    double s = (double)(mki_now_ns() - t0) / 1e9;
    fprintf(stderr, "case %s: %s after %.2f s: %s\n", case_name[c],
            mkGetErrorString(r), s, mki_thread_error());
    if (c == CONTROL) {
        EXPECT(r == mkErrRemote); /* a clean close between frames */
    } else {
        EXPECT(r == mkErrTransport);
        EXPECT(strstr(mki_thread_error(), expect_msg[c]) != NULL);
    }
    EXPECT(s < TIMEOUT_MS / 1000.0 + 1.5);
    EXPECT(t->progress(nr->tctx, &done) == r); /* sticky */
    EXPECT(untouched(buf, c));
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    t->close(nr->tctx);
    free(buf);
    return 0;
}

static int run_case(struct net_rank *nr, void *arg)
{
    enum bad_case c = (enum bad_case)(intptr_t)arg;
    return nr->rank == 0 ? forger(nr, c) : receiver(nr, c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    setenv("MK_SOCKET_NCONN", "1", 1);
    setenv("MK_SOCKET_IFNAME", "lo", 1);
    setenv("MK_BOOTSTRAP_IFNAME", "lo", 1);
    for (int c = 0; c < NCASES; c++) {
        int bad = net_run(2, 10000, run_case, (void *)(intptr_t)c, 30, -1);
        if (bad) fprintf(stderr, "case %s failed\n", case_name[c]);
        CHECK(bad == 0);
    }
    TEST_DONE();
}
