/*
 * transport.h - the inter-node transport ops table.
 *
 * A transport moves bytes from a region registered on this rank into the
 * same-numbered region registered on a peer, and raises a 64-bit signal
 * counter inside a peer's region once the bytes are there.  Regions are
 * described by (base, size, key) and addressed by offsets, never by raw
 * pointers, so the same protocol code serves host buffers (CPU tests) and
 * the GPU workspace (later).
 *
 * Life cycle (the proxy thread owns a context after connect):
 *
 *     init(args)                       open the device, read MK_* params
 *     reg_mem(region 0..n-1)           before connect; same count everywhere
 *     connect()                        collective over args->boot: swap
 *                                      addresses and region keys, wire up
 *     post_write / post_signal         any number, from one thread
 *     progress()                       the same thread, in a loop
 *     close()                          never blocks on peers
 *
 * Non-blocking contract (every op but init, connect and close):
 *   - an op never waits for a peer; when it lacks room (in-flight caps,
 *     queue depth) it returns mkSuccess with *posted = 0 and the caller
 *     calls progress() and tries again;
 *   - progress() moves what can move now, applies what arrived (data, then
 *     signals) and adds the number of this rank's posted operations that
 *     completed locally (their source bytes may be reused) to *completed;
 *   - an error is sticky: once an op or progress returned an error, every
 *     later call returns the same code; the detail is in the thread error
 *     (mki_thread_error()) of the call that first saw it, logged at WARN.
 *   - any wait inside an op is bounded by args->timeout_ms (a peer that
 *     stops taking data fails the context with mkErrTimeout, a peer that
 *     dies with mkErrRemote or mkErrTransport).
 *
 * Signals: a counter of 8 bytes at an 8-aligned offset inside a registered
 * region of the destination.  MKI_SIG_SET stores the value, MKI_SIG_ADD
 * adds it, MKI_SIG_MAX stores it only if it is greater than the counter
 * (for counters that only grow, whose commands may land out of order:
 * the kernels' chunk targets); each is done with release semantics after
 * the data it covers is in place (host: __atomic_* RELEASE; the GPU reads
 * it with ld.acquire.sys).  A transport that delivers one peer's commands
 * in order (RC: one QP per peer) may carry MAX as a plain store.
 *   - the signal of post_write covers that write's bytes;
 *   - post_signal covers every write this rank posted to that peer before
 *     it (a fence), whatever the transport's delivery order.
 * Nothing else is ordered between two commands to one peer.
 */
#ifndef MKI_TRANSPORT_H
#define MKI_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include "mkernel.h"
#include "bootstrap/bootstrap.h"
#include "rt/fifo.h"

#define MKI_TRANSPORT_VERSION 1
#define MKI_NET_MAX_REGIONS 4

/* enum mki_sig_op (NONE, SET, ADD, MAX): kernels/common/fifo.h, which the
 * GPU side shares. */

/* A region as a peer sees it: offsets in [0, size) are valid; key is the
 * transport's name for it (the rkey for verbs; sockets need only size). */
struct mki_mr_desc {
    uint64_t base;
    uint64_t size;
    uint64_t key;
};

/* Where the runtime's memory lives. */
enum mki_mem_kind { MKI_MEM_HOST = 0, MKI_MEM_DEVICE = 1 };

struct mki_net_signal {
    uint32_t op;       /* enum mki_sig_op */
    uint32_t region;   /* region index on the peer */
    uint64_t offset;   /* 8-aligned, offset + 8 <= region size */
    uint64_t value;
};

/* Everything a transport gets from the runtime at init. */
struct mki_net_args {
    const struct mki_bootstrap_ops *boot;
    void *boot_ctx;
    int rank, nranks;
    const int *peers;   /* ranks on other nodes that this rank talks to */
    int npeers;
    int timeout_ms;     /* MK_TIMEOUT_MS */
    uint64_t cookie;    /* the communicator's job cookie */
    const char *device; /* NIC name from the topology; NULL: first found */
    int port;           /* NIC port; 0: first active */
    /* Device memory through the runtime, for the transports whose proxy
     * touches the bytes (socket: both copies; SRD: the signal).  Either
     * may be NULL: then MKI_MEM_DEVICE regions are refused with
     * mkErrUnsupported where the hook would be needed.
     *   raise_device_signal: store or add a counter in device memory with
     *     release semantics (e.g. cuStreamWriteValue64 after the copies);
     *   copy_device: copy n bytes between pinned host and device memory
     *     (to_device 1: host -> device), complete on return. */
    mkResult_t (*raise_device_signal)(void *dev_ctx, void *addr, uint32_t op,
                                      uint64_t value);
    mkResult_t (*copy_device)(void *dev_ctx, void *dst, const void *src,
                              size_t n, int to_device);
    void *dev_ctx;
    /* Page-locked host memory for the buffers that copy_device fills or
     * drains (NULL: malloc/free), so those copies skip the driver's
     * staging.  Any CUDA call of the proxy can still wait behind the
     * application's own pageable copy on a stream that waits for the
     * kernel that waits for this proxy (seen on H200: 5 s, until the
     * deadline): the kernels' data therefore goes through host memory
     * (region 1, kernels/common/devrt.h), and device regions serve tools. */
    void *(*host_alloc)(void *dev_ctx, size_t n);
    void (*host_free)(void *dev_ctx, void *p);
};

struct mki_transport_ops {
    const char *name;
    int version;
    /* Open the device and read this transport's parameters.  Returns
     * mkErrUnsupported (and says why at INFO) when the transport cannot
     * run here: not built, no device, no driver. */
    mkResult_t (*init)(const struct mki_net_args *args, void **ctx);
    /* Register [base, base+size) as region index `*region` (0, 1, ...). */
    mkResult_t (*reg_mem)(void *ctx, void *base, size_t size,
                          enum mki_mem_kind kind, int *region);
    /* Collective over args->boot: every rank of the bootstrap calls it,
     * also a rank with no peers.  Blocks until wired or the deadline. */
    mkResult_t (*connect)(void *ctx);
    /* Copy bytes at local region offset loff to the peer's same-numbered
     * region at roff; then raise sig (NULL: none). */
    mkResult_t (*post_write)(void *ctx, int peer, uint32_t region,
                             uint64_t loff, uint64_t roff, uint64_t bytes,
                             const struct mki_net_signal *sig, int *posted);
    /* Raise sig on the peer after all earlier writes to it landed. */
    mkResult_t (*post_signal)(void *ctx, int peer,
                              const struct mki_net_signal *sig, int *posted);
    mkResult_t (*progress)(void *ctx, uint64_t *completed);
    /* Tear down; never blocks on peers (data not yet sent is dropped). */
    void (*close)(void *ctx);
};

extern const struct mki_transport_ops mki_transport_socket;
extern const struct mki_transport_ops mki_transport_ibverbs;
extern const struct mki_transport_ops mki_transport_efa;

/* The built-in transports in their default order of preference. */
const struct mki_transport_ops *const *mki_transports(int *count);
/* Filter the built-in list by a MK_TRANSPORT-style spec ("a,b" keeps and
 * orders; "^a,b" removes); unknown names are mkErrInvalidArgument. */
mkResult_t mki_transport_select(const char *spec,
                                const struct mki_transport_ops **out,
                                int *count);

/* Collective over args->boot: pick the first transport of spec (an
 * MK_TRANSPORT list) that initialises on every rank, initialise it, and
 * return its ops and context (not yet connected: register memory, then
 * call connect).  Each transport skipped is logged at INFO with its
 * reason; mkErrUnsupported when none works everywhere (the message names
 * every transport and why it was skipped here). */
mkResult_t mki_transport_open(const char *spec,
                              const struct mki_net_args *args,
                              const struct mki_transport_ops **ops,
                              void **ctx);

/* Shared by the transports: check a peer-supplied (or caller-supplied)
 * span against a region size without overflow. */
static inline int mki_span_ok(uint64_t off, uint64_t bytes, uint64_t size)
{
    return off <= size && bytes <= size - off;
}

/* Apply a signal to host-visible memory with release semantics. */
static inline void mki_signal_apply(void *base, const struct mki_net_signal *s)
{
    uint64_t *p = (uint64_t *)((char *)base + s->offset);
    if (s->op == MKI_SIG_SET)
        __atomic_store_n(p, s->value, __ATOMIC_RELEASE);
    else if (s->op == MKI_SIG_ADD)
        __atomic_fetch_add(p, s->value, __ATOMIC_RELEASE);
    else if (s->op == MKI_SIG_MAX) {
        uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
        while (old < s->value &&
               !__atomic_compare_exchange_n(p, &old, s->value, 0,
                                            __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            ;
    }
}

/* Validate a signal against a region table (count regions of sizes). */
int mki_signal_ok(const struct mki_net_signal *s, const uint64_t *sizes,
                  int nregions);

#endif /* MKI_TRANSPORT_H */
