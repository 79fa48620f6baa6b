/*
 * live.h - who is still alive: a ring of TCP connections per communicator.
 *
 * Every rank of a communicator of two or more ranks connects to the next
 * rank of the ring and accepts the previous one; a thread per communicator
 * watches both connections.  The operating system closes a process's
 * sockets when it dies (SIGKILL, a crash, exit without mkCommDestroy), so
 * a neighbour sees the end of the stream within milliseconds and tells the
 * rest of the ring, each rank forwarding the news away from where it came.
 * A rank that leaves on purpose says BYE first (mkCommDestroy) or ABORT
 * (mkCommAbort, which the others then report as the rank's abort).  A
 * neighbour silent for MK_TIMEOUT_MS (its host gone, the network cut) is
 * taken as dead too; beats every 100 ms keep a healthy link from being
 * silent.
 *
 * What a death does to the communicator: without a GPU the thread marks
 * it broken (mkErrRemote naming the rank) at once; with one, the watchdog
 * (src/mem/watchdog.c) first raises the local abort word so that running
 * kernels stop, then marks it broken.
 *
 * Wire: frames of 16 bytes, {magic, type, rank, check}, little-endian as
 * the hosts are; check is the communicator's cookie folded to 32 bits, so
 * a stray connection or a byte stream out of step is refused.
 */
#ifndef MKI_LIVE_H
#define MKI_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "mkernel.h"

struct mkComm;

#define MKI_LIVE_MAGIC 0x6d6b6c76u /* "mklv" */
enum mki_live_type {
    MKI_LIVE_HELLO = 1, /* rank = the sender (first frame of a link) */
    MKI_LIVE_BEAT = 2,  /* rank = the sender */
    MKI_LIVE_BYE = 3,   /* rank = the sender: mkCommDestroy */
    MKI_LIVE_DEAD = 4,  /* rank = a rank found dead */
    MKI_LIVE_ABORT = 5, /* rank = a rank that called mkCommAbort */
    MKI_LIVE_SILENT = 6, /* rank = a rank silent past MK_TIMEOUT_MS */
};

struct mki_live_frame {
    uint32_t magic, type;
    int32_t rank;
    uint32_t check;
};

/* A link's partial frame between reads. */
struct mki_live_rx {
    unsigned char buf[sizeof(struct mki_live_frame)];
    size_t have;
};

/* Feed received bytes: fn is called for every whole frame that is valid
 * (magic, check, a known type, 0 <= rank < nranks) and may stop the feed
 * by returning nonzero (that value is returned).  A frame that is not
 * valid stops the feed and returns -1: the stream cannot be trusted after
 * it.  Exposed for the fuzzer (tests/fuzz). */
int mki_live_feed(struct mki_live_rx *rx, const void *data, size_t len, int nranks,
                  uint32_t check, int (*fn)(void *arg, const struct mki_live_frame *f),
                  void *arg);

/* The cookie folded into a frame's check word. */
uint32_t mki_live_check(uint64_t cookie);

/* Collective over comm->boot: connect the ring and start the thread.
 * Nothing for one rank. */
mkResult_t mki_live_create(struct mkComm *comm);
/* Say BYE to both neighbours, stop the thread, close (NULL-safe). */
void mki_live_destroy(struct mkComm *comm);
/* Tell the ring this rank aborts (the others report it), then as destroy. */
void mki_live_abort(struct mkComm *comm);
/* The first rank found dead or aborted, or -1; msg (if any) gets the
 * sentence that says so.  Thread-safe. */
int mki_live_dead(struct mkComm *comm, char *msg, size_t len);

#endif /* MKI_LIVE_H */
