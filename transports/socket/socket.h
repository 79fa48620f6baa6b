/*
 * socket.h - what the socket transport's two files share (not a public
 * header): the context, connection and frame queues, the limits, and the
 * calls between the wiring (socket.c) and the data path (io.c).
 */
#ifndef MKI_SOCKET_H
#define MKI_SOCKET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mki.h"
#include "bootstrap/sock.h"
#include "transports/transport.h"
#include "wire.h"

#define STRIPE_MIN (128u << 10)
#define MAX_FRAMES 8192       /* queued frames per context */
#define RECV_BUDGET (8u << 20) /* bytes per connection per progress call */
#define STAGE (1u << 20)       /* bounce buffer per connection (device data) */
#define RA_BYTES (16u << 10)   /* read-ahead buffer per connection: headers and
                                * payloads smaller than it arrive through it */

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
    int shut;                     /* the receiver gave up on it (shut down;
                                   * closed by sk_close) */
    char *ra;                     /* RA_BYTES read ahead (malloc, first use) */
    uint32_t ra_lo, ra_hi;        /* its bytes not yet taken: [ra_lo, ra_hi) */
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
    /* The receiving thread (rx_main) owns the receive half of every
     * connection (rh .. rfrom, shut, pend); the proxy's thread, through
     * progress, the send half.  The first error of either is err (read
     * atomically) and its message emsg, under elock. */
    mkResult_t err;
    pthread_mutex_t elock;
    char emsg[MKI_ERRMSG_LEN];
    pthread_t rx;
    int rx_on, rx_stop;
    uint64_t rx_bytes;            /* payload and header bytes received */
#ifdef MKI_SK_STATS
    /* Lab instrumentation (-DMKI_SK_STATS; nothing without it): time in
     * the calls that moved bytes and in those that found nothing, printed
     * when the context closes.  [0] sendmsg, [1] recv. */
    uint64_t st_ns[2], st_bytes[2], st_calls[2], st_idle_ns[2], st_idle[2];
    uint64_t st_prog, st_prog_ns, st_first_ns, st_last_ns;
#endif
};

#ifdef MKI_SK_STATS
#define MKI_SK_STAT_T0() uint64_t st_t0_ = mki_now_ns()
#define MKI_SK_STAT(c, dir, n)                                                \
    do {                                                                      \
        uint64_t st_t1_ = mki_now_ns();                                       \
        if ((n) > 0) {                                                        \
            (c)->st_ns[dir] += st_t1_ - st_t0_;                               \
            (c)->st_bytes[dir] += (uint64_t)(n);                              \
            (c)->st_calls[dir]++;                                             \
            if (!(c)->st_first_ns) (c)->st_first_ns = st_t0_;                 \
            (c)->st_last_ns = st_t1_;                                         \
        } else {                                                              \
            (c)->st_idle_ns[dir] += st_t1_ - st_t0_;                          \
            (c)->st_idle[dir]++;                                              \
        }                                                                     \
    } while (0)
#else
#define MKI_SK_STAT_T0() (void)0
#define MKI_SK_STAT(c, dir, n) (void)0
#endif

/* Record the context's first error (and the thread error); returns res. */
mkResult_t mki_sk_fail(struct sk_ctx *c, mkResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mki_sk_conn_close(struct sk_conn *k);
/* The receiver's way to give up on a connection: shut it down both ways
 * (the peer sees the end), leave the descriptor to sk_close. */
void mki_sk_conn_shut(struct sk_conn *k);
/* The first error, or mkSuccess. */
static inline mkResult_t mki_sk_err(const struct sk_ctx *c)
{
    return __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
}
/* The data path (io.c): send what is queued on k, take what arrived. */
mkResult_t mki_sk_send_some(struct sk_ctx *c, struct sk_conn *k);
mkResult_t mki_sk_recv_some(struct sk_ctx *c, struct sk_conn *k);

#endif /* MKI_SOCKET_H */
