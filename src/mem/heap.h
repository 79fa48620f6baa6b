/*
 * heap.h - the symmetric heap of a communicator.
 *
 * Every rank owns a heap made of segments; every op carves what it shares
 * with other ranks (counters, slots, staging, the all-gather's bank) out
 * of it as blocks.  Every rank makes the same allocations in the same
 * order with the same sizes (ops allocate at communicator creation or in
 * a call that every rank makes), so a block has the same segment and
 * offset on every rank: peers name it by offset, never by pointer.
 *
 *   segment 0    device memory (cudaMalloc), mapped by every rank of the
 *                node (CUDA IPC; under MPS too), registered with the
 *                transport as region 0; control block at offset 0
 *                (kernels/rt/rt.h)
 *   host segment page-locked host memory mapped into the GPU, registered
 *                as region 1 (communicators of several nodes): what the
 *                proxy moves, with no CUDA call in the proxy
 *   segments 2.. device memory added when a block does not fit (the
 *                all-gather's bank of a large shape); mapped inside the
 *                node.  The transports register memory before they
 *                connect, so these are not reachable from other nodes
 *                yet (what a fused op across nodes needs comes with the
 *                inter-node issue).
 *
 * Adding a segment is collective (a bootstrap exchange of IPC handles);
 * every rank adds it at the same allocation, so all ranks must call
 * mki_heap_alloc together, as they call the op that allocates.
 */
#ifndef MKI_HEAP_H
#define MKI_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "mkernel.h"
#include "rt/rt.h"

struct mkComm;

#define MKI_HEAP_MAXSEG 16
#define MKI_HEAP_ALIGN 4096
#define MKI_HEAP_GRAIN (64ull << 20) /* least bytes of an added segment */

struct mki_heap_seg {
    char *base;                  /* mine (host segment: host address) */
    char *dev;                   /* host segment: the device view; else base */
    size_t bytes;
    int host;
    char *peer[MKI_MAXLOCAL];    /* device segments: local rank l's, here */
    int opened[MKI_MAXLOCAL];    /* 1: mapped with cudaIpcOpenMemHandle */
};

struct mki_heap_range {
    int32_t seg;
    uint64_t off, bytes;
};

struct mki_heap {
    int nseg;
    int host_seg;                /* index of the host segment, -1: none */
    struct mki_heap_seg seg[MKI_HEAP_MAXSEG];
    struct mki_heap_range *free; /* free ranges, by segment then offset */
    int nfree, cap;
};

/* A block: the same on every rank. */
struct mki_heap_blk {
    int32_t seg;
    int32_t host;                /* 1: in the host segment */
    uint64_t off, bytes;
};

/* Segment 0 of dev_bytes (and, when host_bytes > 0, the host segment),
 * zeroed; collective over the bootstrap.  comm->dev holds the heap. */
mkResult_t mki_heap_create(struct mkComm *comm, size_t dev_bytes, size_t host_bytes);
/* Unmap and free every segment (NULL-safe; after mkCommAbort device
 * memory is left alone: kernels may still run on it). */
void mki_heap_destroy(struct mkComm *comm);
/* A block of `bytes` (rounded up to MKI_HEAP_ALIGN), zeroed when zero is
 * set (then a bootstrap barrier: no peer writes into it before every rank
 * zeroed its copy), from the host segment when host is set.  A device block that fits
 * nowhere adds a segment (collective).  `what` names it in errors. */
mkResult_t mki_heap_alloc(struct mkComm *comm, int host, uint64_t bytes, int zero,
                          const char *what, struct mki_heap_blk *out);
/* Give a block back (every rank, in the same order as the allocations;
 * no kernel may still use it). */
void mki_heap_free(struct mkComm *comm, const struct mki_heap_blk *b);
/* Device address, here, of local rank l's copy of the block (host
 * segment: only l == my local index). */
char *mki_heap_ptr(const struct mkComm *comm, const struct mki_heap_blk *b, int l);
/* Host address of a block of the host segment. */
char *mki_heap_host(const struct mkComm *comm, const struct mki_heap_blk *b);

#endif /* MKI_HEAP_H */
