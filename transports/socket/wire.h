/*
 * wire.h - the socket transport's wire format (socket.c, io.c), shared
 * with the protocol tests that forge frames.
 */
#ifndef MKI_SOCKET_WIRE_H
#define MKI_SOCKET_WIRE_H

#include <stdint.h>
#include "bootstrap/bootstrap.h"
#include "transports/transport.h"

#define SK_MAGIC 0x6d6b6e66u  /* "mknf": a frame */
#define SK_HELLO 0x6d6b6e68u  /* "mknh": the first bytes of a connection */

/* 64 bytes, then `bytes` of payload. */
struct sk_frame {
    uint32_t magic;
    uint8_t region, sig_op, sig_region, pad;
    uint64_t cookie;
    uint64_t offset, bytes;   /* where the payload goes in the region */
    uint64_t sig_off, sig_val;
    uint64_t cmd;             /* per-peer command number */
    uint32_t nframes, src;    /* stripes of this command; sender rank */
};

struct sk_hello {
    uint32_t magic;
    int32_t rank;
    uint64_t cookie;
    int32_t conn, nconn;
};

/* What each rank contributes to the connect allgather. */
struct sk_addr {
    union mki_sockaddr addr;
    uint32_t nregions, pad;
    uint64_t sizes[MKI_NET_MAX_REGIONS];
};

#endif /* MKI_SOCKET_WIRE_H */
