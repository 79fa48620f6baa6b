/*
 * proxy.h - the host side of the inter-node path: a thread that consumes
 * the FIFO (kernels/common/fifo.h) and drives one transport context.
 *
 * One proxy per GPU (or per NIC), pinned to the CPUs the caller gives
 * (the GPU's NUMA node from the topology).  The loop:
 *
 *     progress(transport)          receive, complete, raise signals
 *     slot[tail] valid? (acquire)  decode; post to the transport
 *                                  (no room: retry after progress)
 *     clear slot, tail + 1 (release)
 *     done = completed commands (release)
 *
 * A failure (transport error, corrupt slot) is kept as the proxy's error,
 * written to the FIFO's error word (GPU producers give up) and logged at
 * WARN once; the thread then only idles until stopped.
 */
#ifndef MKI_PROXY_H
#define MKI_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include "mki.h"
#include "rt/fifo.h"
#include "transports/transport.h"

struct mki_proxy;

struct mki_proxy_args {
    struct mki_fifo_hdr *fifo;       /* host address of the ring */
    uint32_t nslots;
    const struct mki_transport_ops *tops;
    void *tctx;                      /* connected transport context */
    const void *cpus;                /* a cpu_set_t; NULL: not pinned */
    size_t cpus_size;                /* sizeof that cpu_set_t */
    int timeout_ms;                  /* MK_TIMEOUT_MS */
    int spin_us;                     /* idle time before it naps (0: 1000) */
};

struct mki_proxy_stats {
    uint64_t commands;               /* slots consumed */
    uint64_t bytes;                  /* bytes of the writes posted */
    uint64_t done;                   /* commands completed */
    uint64_t busy;                   /* posts refused for lack of room */
    int cpu;                         /* where the thread last ran */
};

/* Allocate a ring of nslots (a power of two) in ordinary host memory, for
 * tests and host producers; the device runtime maps its own. */
mkResult_t mki_fifo_alloc(uint32_t nslots, struct mki_fifo_hdr **out);
void mki_fifo_free(struct mki_fifo_hdr *fifo);
/* Host producer (tests): claim, wait for room until deadline, publish.
 * mkErrRemote when the proxy failed, mkErrTimeout at the deadline. */
mkResult_t mki_fifo_push_host(struct mki_fifo_hdr *fifo, uint32_t nslots,
                              const struct mki_fifo_cmd *cmd,
                              uint64_t deadline_ns);

/* Start the proxy thread; the transport context is used only by it until
 * mki_proxy_stop returns. */
mkResult_t mki_proxy_start(const struct mki_proxy_args *args,
                           struct mki_proxy **out);
/* Drain (every published slot posted and completed) and stop, within
 * timeout_ms; returns the proxy's error if it failed, mkErrTimeout if it
 * could not drain in time (it is stopped anyway), else mkSuccess.  Frees
 * the proxy, never the transport. */
mkResult_t mki_proxy_stop(struct mki_proxy *p, int timeout_ms);
/* mkSuccess while healthy; else the error, its message copied to msg. */
mkResult_t mki_proxy_error(struct mki_proxy *p, char *msg, size_t len);
void mki_proxy_get_stats(struct mki_proxy *p, struct mki_proxy_stats *s);

#endif /* MKI_PROXY_H */
