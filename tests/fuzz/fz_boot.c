/*
 * fz_boot - the rendezvous root of the TCP bootstrap (src/bootstrap/tcp.c)
 * reading what joining processes send: each input is cut into messages
 * of the hello's size (56 bytes; the last may be short), each sent on a
 * connection of its own to a fresh root over the loopback interface, as
 * many processes knocking at once would.  The cookie field (bytes 8..15
 * of a hello) is XORed with the root's real cookie, so the corpus's zero
 * cookies pass the check and the input reaches the rank and size rules.
 * The root must refuse or answer each and end by its deadline (100 ms
 * here; a root is a detached thread, as mkGetUniqueId's is).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mki.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/sock.h"
#include "fuzz.h"

#define HELLO_BYTES 56 /* struct hello in tcp.c */
#define MAX_CONN 8

static int once;

int fuzz_one(const uint8_t *d, size_t n)
{
    if (!once) {
        setenv("MK_BOOTSTRAP_IFNAME", "lo", 1); /* nothing leaves this host */
        once = 1;
    }
    struct mki_unique_id id;
    if (mki_tcp_root_start(&id, 100) != mkSuccess) abort();
    int fds[MAX_CONN], nfd = 0;
    for (size_t off = 0; off < n && nfd < MAX_CONN; off += HELLO_BYTES) {
        uint8_t msg[HELLO_BYTES];
        size_t k = n - off < HELLO_BYTES ? n - off : HELLO_BYTES;
        memcpy(msg, d + off, k);
        for (size_t i = 8; i < 16 && i < k; i++) msg[i] ^= (uint8_t)(id.cookie >> (8 * (i - 8)));
        int fd;
        if (mki_sock_connect(&id.root, mki_deadline_ms(500), "the root", &fd) != mkSuccess)
            break; /* the root has ended (it refused a bad rank and left) */
        if (mki_sock_send(fd, msg, k, mki_deadline_ms(500), "the root") != mkSuccess) {
            close(fd);
            break;
        }
        fds[nfd++] = fd;
    }
    /* Read whatever the root answers until it closes or 150 ms pass. */
    uint8_t buf[4096];
    const uint64_t end = mki_deadline_ms(150);
    for (int i = 0; i < nfd; i++) {
        while (mki_now_ns() < end) {
            struct pollfd p = {fds[i], POLLIN, 0};
            if (poll(&p, 1, 20) <= 0) continue;
            if (recv(fds[i], buf, sizeof(buf), 0) <= 0) break;
        }
        close(fds[i]);
    }
    mki_thread_error_clear();
    return 0;
}
