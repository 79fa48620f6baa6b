/*
 * net.h - the inter-node path of a communicator: one transport context
 * connected to every rank on another (virtual) node, the registered
 * workspace, the FIFO and the proxy thread that drains it.
 *
 * Created last in mki_comm_create (after the device runtime, whose
 * workspace it registers); a communicator of one node has none
 * (comm->net == NULL).  Teardown order, which the transports require:
 *
 *     stop the monitor, stop the proxy (drain)   every rank
 *     bootstrap barrier                          no rank closes a socket
 *                                                while a peer still drains
 *     close the transport, free FIFO and region
 *
 * A broken or aborted communicator skips the drain and the barrier: its
 * peers learn of it from the connections closing (mkErrRemote there).
 */
#ifndef MKI_NET_H
#define MKI_NET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mki.h"
#include "net/proxy.h"
#include "rt/fifo.h"
#include "rt/rt.h"
#include "transports/transport.h"

#define MKI_NET_FIFO_SLOTS 4096  /* bench/NOTES.md: 4096 beats 256 for GPUs */

struct mki_net_dev;               /* net.c: the CUDA side of the hooks */

struct mki_net {
    const struct mki_transport_ops *tops;
    void *tctx;
    int *peers;                   /* ranks on other nodes, ascending */
    int npeers;
    /* Region 0 on every rank: the first segment of the symmetric heap, or
     * (no GPU) a host region of its size, so the path runs on CPUs. */
    char *region;
    size_t region_bytes;
    enum mki_mem_kind kind;
    int region_id;
    /* Region 1 on every rank: the heap's host segment (what the kernels
     * send across nodes; page-locked and mapped into the GPU), or (no GPU)
     * plain host memory of its size. */
    char *host_region;
    size_t host_bytes;
    int host_mapped;              /* 1: mmap'ed here (no GPU) */
    /* The ring: host view, and the view a kernel gets (zero without GPU). */
    struct mki_fifo_hdr *fifo;
    uint32_t nslots;
    struct mki_fifo_dev fifo_dev;
    struct mki_proxy *proxy;
    struct mki_net_dev *dev;      /* NULL without GPU */
    pthread_t monitor;
    int monitor_up;
    int stop;                     /* atomic: the monitor exits */
    int ready;                    /* 1 once every rank's create got here */
    int aborted;                  /* mkCommAbort: no drain, no barrier */
};

/* Build comm->net (collective over comm->boot when comm->nnodes > 1);
 * nothing for one node.  host_bytes: the size of region 1 in a process
 * without GPU (with one, the heap's host segment is region 1).  On
 * failure comm->net stays NULL and the detail is in comm's last error. */
mkResult_t mki_net_create(struct mkComm *comm, size_t host_bytes);
/* Undo mki_net_create in the order above (NULL-safe); bounded by
 * MK_TIMEOUT_MS for the drain and the barrier. */
void mki_net_destroy(struct mkComm *comm);
/* Stop the proxy at once, without draining or waiting for peers; the
 * later mki_net_destroy then only frees. */
void mki_net_abort(struct mkComm *comm);

#endif /* MKI_NET_H */
