/*
 * sock.c - non-blocking TCP with deadlines.
 *
 * All sockets are O_NONBLOCK; every blocking step is a poll() bounded by
 * the caller's deadline, so no bootstrap step can hang past MK_TIMEOUT_MS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mki.h"
#include "sock.h"

uint64_t mki_deadline_ms(int64_t timeout_ms)
{
    return mki_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

static int ms_left(uint64_t deadline)
{
    uint64_t now = mki_now_ns();
    if (now >= deadline) return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > 1000 ? 1000 : (int)ms; /* re-check the clock every second */
}

static mkResult_t set_options(int fd)
{
    int one = 1;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return mki_error(NULL, mkErrSystem, "fcntl(O_NONBLOCK): %s",
                         strerror(errno));
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return mki_error(NULL, mkErrSystem, "fcntl(FD_CLOEXEC): %s",
                         strerror(errno));
    /* Not fatal for a listening socket, where TCP_NODELAY may not apply. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return mkSuccess;
}

static socklen_t addr_len(const union mki_sockaddr *a)
{
    return a->sa.sa_family == AF_INET6 ? sizeof(a->sin6) : sizeof(a->sin);
}

mkResult_t mki_sock_listen(union mki_sockaddr *addr, int *out)
{
    int fd = socket(addr->sa.sa_family, SOCK_STREAM, 0);
    if (fd < 0)
        return mki_error(NULL, mkErrSystem, "socket: %s", strerror(errno));
    mkResult_t res = set_options(fd);
    if (res != mkSuccess) goto close_fd;
    if (addr->sa.sa_family == AF_INET6) addr->sin6.sin6_port = 0;
    else addr->sin.sin_port = 0;
    socklen_t len = addr_len(addr);
    if (bind(fd, &addr->sa, len) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, &addr->sa, &len) < 0) {
        char b[80];
        res = mki_error(NULL, mkErrSystem, "cannot listen on %s: %s",
                        mki_sockaddr_str(addr, b, sizeof(b)), strerror(errno));
        goto close_fd;
    }
    *out = fd;
    return mkSuccess;
close_fd:
    close(fd);
    return res;
}

mkResult_t mki_sock_connect(const union mki_sockaddr *addr, uint64_t deadline,
                            const char *peer, int *out)
{
    char b[80];
    int fd = socket(addr->sa.sa_family, SOCK_STREAM, 0);
    if (fd < 0)
        return mki_error(NULL, mkErrSystem, "socket: %s", strerror(errno));
    mkResult_t res = set_options(fd);
    if (res != mkSuccess) goto close_fd;
    if (connect(fd, &addr->sa, addr_len(addr)) < 0 && errno != EINPROGRESS) {
        res = mki_error(NULL, mkErrBootstrap, "cannot connect to %s at %s: %s",
                        peer, mki_sockaddr_str(addr, b, sizeof(b)),
                        strerror(errno));
        goto close_fd;
    }
    for (;;) {
        struct pollfd p = {fd, POLLOUT, 0};
        int n = poll(&p, 1, ms_left(deadline));
        if (n > 0) break;
        if (n < 0 && errno != EINTR) {
            res = mki_error(NULL, mkErrSystem, "poll: %s", strerror(errno));
            goto close_fd;
        }
        if (mki_now_ns() >= deadline) {
            res = mki_error(NULL, mkErrTimeout, "timed out connecting to %s "
                            "at %s", peer, mki_sockaddr_str(addr, b, sizeof(b)));
            goto close_fd;
        }
    }
    int err = 0;
    socklen_t el = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        res = mki_error(NULL, mkErrBootstrap, "cannot connect to %s at %s: %s",
                        peer, mki_sockaddr_str(addr, b, sizeof(b)),
                        strerror(err));
        goto close_fd;
    }
    *out = fd;
    return mkSuccess;
close_fd:
    close(fd);
    return res;
}

mkResult_t mki_sock_accept(int lfd, uint64_t deadline, const char *what,
                           int *out)
{
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd >= 0) {
            mkResult_t res = set_options(fd);
            if (res != mkSuccess) close(fd);
            else *out = fd;
            return res;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
            errno != ECONNABORTED)
            return mki_error(NULL, mkErrSystem, "accept: %s", strerror(errno));
        if (mki_now_ns() >= deadline)
            return mki_error(NULL, mkErrTimeout, "timed out waiting for %s",
                             what);
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, ms_left(deadline)) < 0 && errno != EINTR)
            return mki_error(NULL, mkErrSystem, "poll: %s", strerror(errno));
    }
}

/* One step of a transfer: returns 1 when progress was made, 0 when it
 * would block, or an error (negative mkResult_t) */
static int step(int fd, int sending, char *buf, size_t len, size_t *done,
                const char *peer, mkResult_t *res)
{
    ssize_t n = sending ? send(fd, buf + *done, len - *done, MSG_NOSIGNAL)
                        : recv(fd, buf + *done, len - *done, 0);
    if (n > 0) {
        *done += (size_t)n;
        return 1;
    }
    if (n == 0 && !sending) {
        *res = mki_error(NULL, mkErrRemote, "%s closed the connection (it "
                         "exited, aborted or failed)", peer);
        return -1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    *res = mki_error(NULL, errno == EPIPE || errno == ECONNRESET
                               ? mkErrRemote : mkErrSystem,
                     "%s to %s failed: %s", sending ? "send" : "recv", peer,
                     strerror(errno));
    return -1;
}

mkResult_t mki_sock_sendrecv(int sfd, const void *sbuf, size_t slen, int rfd,
                             void *rbuf, size_t rlen, uint64_t deadline,
                             const char *speer, const char *rpeer)
{
    size_t sdone = 0, rdone = 0;
    mkResult_t res = mkSuccess;
    while (sdone < slen || rdone < rlen) {
        struct pollfd p[2];
        int np = 0;
        if (sdone < slen) p[np++] = (struct pollfd){sfd, POLLOUT, 0};
        if (rdone < rlen) p[np++] = (struct pollfd){rfd, POLLIN, 0};
        int n = poll(p, np, ms_left(deadline));
        if (n < 0 && errno != EINTR)
            return mki_error(NULL, mkErrSystem, "poll: %s", strerror(errno));
        if (sdone < slen &&
            step(sfd, 1, (char *)sbuf, slen, &sdone, speer, &res) < 0)
            return res;
        if (rdone < rlen && step(rfd, 0, rbuf, rlen, &rdone, rpeer, &res) < 0)
            return res;
        if ((sdone < slen || rdone < rlen) && mki_now_ns() >= deadline)
            return mki_error(NULL, mkErrTimeout, "timed out %s %s",
                             rdone < rlen ? "waiting for data from"
                                          : "sending to",
                             rdone < rlen ? rpeer : speer);
    }
    return mkSuccess;
}

mkResult_t mki_sock_send(int fd, const void *buf, size_t len,
                         uint64_t deadline, const char *peer)
{
    return mki_sock_sendrecv(fd, buf, len, -1, NULL, 0, deadline, peer, NULL);
}

mkResult_t mki_sock_recv(int fd, void *buf, size_t len, uint64_t deadline,
                         const char *peer)
{
    return mki_sock_sendrecv(-1, NULL, 0, fd, buf, len, deadline, NULL, peer);
}

const char *mki_sockaddr_str(const union mki_sockaddr *a, char *buf,
                             size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6.sin6_port);
        snprintf(buf, len, "[%s]:%d", host, port);
    } else {
        inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host));
        port = ntohs(a->sin.sin_port);
        snprintf(buf, len, "%s:%d", host, port);
    }
    return buf;
}
