/*
 * fz_socket - the socket transport's receiver (transports/socket/io.c):
 * the input is what a peer sends on one connection (frame headers and
 * payloads), written into a socketpair and then closed; mki_sk_recv_some
 * takes it as the proxy would, into two host regions of 4 KiB and 64 B
 * allocated exactly (a write or read past them is a sanitizer report).
 * Every frame must be refused or placed inside a region; the receiver
 * must give the connection up (bad frame, end of stream) rather than spin.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mki.h"
#include "transports/socket/socket.h"
#include "fuzz.h"

#define COOKIE 0xc00c1e5eedull

int fuzz_one(const uint8_t *d, size_t n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
    int big = 1 << 20;
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    (void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(sv[1], d + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(sv[1]);

    static const uint64_t sizes[2] = {4096, 64};
    struct sk_ctx c;
    struct sk_conn k;
    struct sk_peer pe;
    memset(&c, 0, sizeof(c));
    memset(&k, 0, sizeof(k));
    memset(&pe, 0, sizeof(pe));
    pthread_mutex_init(&c.elock, NULL);
    c.a.cookie = COOKIE;
    c.a.timeout_ms = 1000;
    c.a.rank = 0;
    c.a.nranks = 2;
    c.nconn = 2;
    c.nregions = 2;
    for (int i = 0; i < 2; i++) {
        c.base[i] = malloc(sizes[i]);
        c.size[i] = sizes[i];
        c.kind[i] = MKI_MEM_HOST;
        if (!c.base[i]) abort();
        memset(c.base[i], 0, sizes[i]);
    }
    pe.rank = 1;
    pe.conns = &k;
    c.peers = &pe;
    k.fd = sv[0];
    k.peer = 0;
    k.last_recv_ns = mki_now_ns();
    /* Every call takes what is there; the stream ends with EOF, so the
     * receiver must shut the connection within a bounded number of calls. */
    for (int i = 0; i < 10000 && !k.shut; i++)
        if (mki_sk_recv_some(&c, &k) != mkSuccess) break;
    if (!k.shut) abort(); /* the receiver spun on a stream that had ended */
    close(sv[0]);
    pthread_mutex_destroy(&c.elock);
    free(pe.pend);
    free(k.ra); /* the connection's read-ahead (sk_close frees it in the library) */
    for (int i = 0; i < 2; i++) free(c.base[i]);
    mki_thread_error_clear();
    return 0;
}
