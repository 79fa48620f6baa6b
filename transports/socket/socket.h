/*
 * socket.h - what the socket transport's two files share (not a public
 * header): the context, connection and frame queues, the limits, and the
 * calls between the wiring (socket.c) and the data path (io.c).
 */
#ifndef MKI_SOCKET_H
#define MKI_SOCKET_H

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

/* Record the context's first error (and the thread error); returns res. */
mkResult_t mki_sk_fail(struct sk_ctx *c, mkResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mki_sk_conn_close(struct sk_conn *k);
/* The data path (io.c): send what is queued on k, take what arrived. */
mkResult_t mki_sk_send_some(struct sk_ctx *c, struct sk_conn *k);
mkResult_t mki_sk_recv_some(struct sk_ctx *c, struct sk_conn *k);

#endif /* MKI_SOCKET_H */
