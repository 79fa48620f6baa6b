/*
 * net_tcp.cu - the baselines of mkbench net (net.cu): plain TCP between
 * the same two processes over loopback, pinned host buffers, and the same
 * with a cudaMemcpy to / from device memory on each side ("tcp+copy":
 * what the proxy does besides TCP).
 */
#include <arpa/inet.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <vector>

#include "net.h"

namespace mkb_net {

void tcp_send(tcp &t, const void *buf, size_t n)
{
    const char *p = (const char *)buf;
    while (n) {
        ssize_t s = send(t.fd, p, n, MSG_NOSIGNAL);
        if (s < 0 && errno == EINTR) continue;
        if (s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            die("TCP baseline: the other rank took no data for %d ms "
                "(MK_TIMEOUT_MS)", t.timeout_ms);
        if (s <= 0) die("TCP baseline: send: %s", strerror(errno));
        p += s;
        n -= (size_t)s;
    }
}

void tcp_recv(tcp &t, void *buf, size_t n)
{
    char *p = (char *)buf;
    while (n) {
        ssize_t s = recv(t.fd, p, n, 0);
        if (s < 0 && errno == EINTR) continue;
        if (s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            die("TCP baseline: nothing from the other rank for %d ms "
                "(MK_TIMEOUT_MS)", t.timeout_ms);
        if (s == 0) die("TCP baseline: the other rank closed the connection");
        if (s < 0) die("TCP baseline: recv: %s", strerror(errno));
        p += s;
        n -= (size_t)s;
    }
}

void tcp_options(tcp &t)
{
    int one = 1;
    struct timeval tv = {t.timeout_ms / 1000, (t.timeout_ms % 1000) * 1000};
    if (setsockopt(t.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ||
        setsockopt(t.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) ||
        setsockopt(t.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv))
        die("TCP baseline: setsockopt: %s", strerror(errno));
}

/* Rank 1 listens on 127.0.0.1 (a port the kernel picks), the port goes
 * around the bootstrap, rank 0 connects. */
void tcp_connect(tcp &t, size_t max_bytes)
{
    int lfd = -1, port[2] = {0, 0};
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (g_rank == 1) {
        socklen_t len = sizeof a;
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
            getsockname(lfd, (struct sockaddr *)&a, &len))
            die("TCP baseline: listen on 127.0.0.1: %s", strerror(errno));
        port[1] = ntohs(a.sin_port);
    }
    if (g_comm->boot->allgather(g_comm->boot_ctx, port, sizeof(int)) != mkSuccess)
        die("TCP baseline: port exchange failed: %s", mki_thread_error());
    if (g_rank == 0) {
        a.sin_port = htons((uint16_t)port[1]);
        t.fd = socket(AF_INET, SOCK_STREAM, 0);
        if (t.fd < 0 || connect(t.fd, (struct sockaddr *)&a, sizeof a))
            die("TCP baseline: connect to 127.0.0.1:%d: %s", port[1], strerror(errno));
    } else {
        struct pollfd p = {lfd, POLLIN, 0};
        int r = poll(&p, 1, t.timeout_ms);
        if (r <= 0) die("TCP baseline: rank 0 did not connect within %d ms", t.timeout_ms);
        t.fd = accept(lfd, NULL, NULL);
        if (t.fd < 0) die("TCP baseline: accept: %s", strerror(errno));
        close(lfd);
    }
    tcp_options(t);
    MKB_CHECK(cudaHostAlloc((void **)&t.hsend, max_bytes, cudaHostAllocDefault));
    MKB_CHECK(cudaHostAlloc((void **)&t.hrecv, max_bytes, cudaHostAllocDefault));
    MKB_CHECK(cudaMalloc((void **)&t.dbuf, max_bytes));
    memset(t.hsend, 0x5a, max_bytes);
}

/* The staging copies of the "tcp+copy" runs, on a private stream. */
void copy_sync(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
    MKB_CHECK(cudaMemcpyAsync(dst, src, n, k, g_copy));
    MKB_CHECK(cudaStreamSynchronize(g_copy));
}

/* Ping-pong of `bytes` (at least 1); one-way microseconds on rank 0. */
double tcp_pingpong_once(tcp &t, size_t bytes, int warm, int iters, int staged)
{
    double t0 = 0;
    bytes = bytes ? bytes : 1;
    barrier();
    for (int i = 0; i < warm + iters; i++) {
        if (i == warm) t0 = now_s();
        if (g_rank == 0) {
            if (staged) copy_sync(t.hsend, t.dbuf, bytes, cudaMemcpyDeviceToHost);
            tcp_send(t, t.hsend, bytes);
            tcp_recv(t, t.hrecv, bytes);
            if (staged) copy_sync(t.dbuf, t.hrecv, bytes, cudaMemcpyHostToDevice);
        } else {
            tcp_recv(t, t.hrecv, bytes);
            if (staged) {
                copy_sync(t.dbuf, t.hrecv, bytes, cudaMemcpyHostToDevice);
                copy_sync(t.hsend, t.dbuf, bytes, cudaMemcpyDeviceToHost);
            }
            tcp_send(t, t.hsend, bytes);
        }
    }
    return (now_s() - t0) / iters / 2.0 * 1e6;
}

double tcp_pingpong(tcp &t, size_t bytes, int warm, int iters, int reps, int staged)
{
    std::vector<double> v;
    for (int k = 0; k < reps; k++) v.push_back(tcp_pingpong_once(t, bytes, warm, iters, staged));
    return mkb_median(v.data(), reps);
}

/* count messages one way, one byte back at the end; seconds on rank 0. */
double tcp_stream_once(tcp &t, size_t bytes, long long count, int staged)
{
    char ack = 1;
    barrier();
    double t0 = now_s();
    for (long long i = 0; i < count; i++) {
        if (g_rank == 0) {
            if (staged) copy_sync(t.hsend, t.dbuf, bytes, cudaMemcpyDeviceToHost);
            tcp_send(t, t.hsend, bytes);
        } else {
            tcp_recv(t, t.hrecv, bytes);
            if (staged) copy_sync(t.dbuf, t.hrecv, bytes, cudaMemcpyHostToDevice);
        }
    }
    if (g_rank == 0) tcp_recv(t, &ack, 1);
    else tcp_send(t, &ack, 1);
    return now_s() - t0;
}

} // namespace mkb_net
