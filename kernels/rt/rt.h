/*
 * rt.h - what the host runtime and every kernel agree on: the symmetric
 * heap's control block, the error record, and the device view of a
 * communicator that every persistent kernel gets by value.  C99 and CUDA
 * C++; no CUDA headers.
 *
 * The symmetric heap (src/mem/heap.c) of every rank starts with the same
 * control block, at offset 0 of its first segment:
 *
 *   0     abort word   0: healthy; r + 1: communicator rank r failed or
 *                      aborted (raised by r's kernels in every rank of its
 *                      node, by mkCommAbort, by the watchdog)
 *   8     claim word   the first failing waiter of this rank takes it and
 *                      writes the error record
 *   128   16 words for tools (mkbench net)
 *   4096  the rest of the heap: blocks carved by the ops (identical
 *         offsets on every rank: every rank makes the same allocations in
 *         the same order)
 *
 * Peers are addressed as (node, local index): a kernel reaches the heaps
 * of the ranks of its node through `heap[local]` (CUDA IPC mappings) and
 * every other rank through the proxy (commands name heap offsets, never
 * pointers).  `local_of[q]` says which: the local index of communicator
 * rank q, or -1 for a rank on another node.  Nothing here bounds the
 * number of ranks or nodes; MKI_MAXLOCAL bounds the ranks of one node.
 */
#ifndef MKI_RT_H
#define MKI_RT_H

#include <stddef.h>
#include <stdint.h>

#include "fifo.h"
#include "hd.h"

#define MKI_MAXLOCAL 8        /* ranks of one node, at most (a constant to
                               * raise with the node sizes of new machines) */
#define MKI_CTL_ABORT 0
#define MKI_CTL_CLAIM 8
#define MKI_CTL_TOOLS 128     /* 16 words */
#define MKI_CTL_BYTES 4096    /* the first block starts here */
#define MKI_RT_LOF 64         /* ranks whose local index the parameters carry */

/* Element types; values equal mkDataType_t. */
enum mki_dtype { MKI_BF16 = 0, MKI_F16 = 1, MKI_F32 = 2 };

/* Error record, in host-mapped memory; the device writes every field and
 * then valid = 1 (after a system fence).  rank and peer are communicator
 * ranks; op is the operation's id (enum mki_op, src/plan/plan.h), epoch
 * the operation's call number on the device (a collective channel's
 * sequence number, a fused op's call count). */
enum mki_err_kind {
    MKI_ERR_NONE = 0, MKI_ERR_TIMEOUT = 1, MKI_ERR_REMOTE = 2,
    MKI_ERR_PROXY = 3, /* this rank's proxy failed while a kernel pushed */
    /* bad input only the device can see (every rank finds it alike):
     * CAPACITY: rank `peer` would receive `expected` rows, more than the
     * capacity `seen`; BADINDEX: rank `peer`'s index at position `chunk`
     * is out of range; BADLAYOUT: a layout array (`phase` 0: the row
     * count, `seen` rows against a capacity of `expected`; 1: position
     * `chunk` of the rows; 2, across nodes: rank `peer`'s position
     * `chunk` names row `seen` of this rank's `expected` rows) is not one
     * a call of the op wrote */
    MKI_ERR_CAPACITY = 4, MKI_ERR_BADINDEX = 5, MKI_ERR_BADLAYOUT = 6
};
struct mki_err_record {
    volatile uint32_t valid;
    int32_t kind;      /* enum mki_err_kind */
    int32_t op;        /* enum mki_op */
    int32_t rank;      /* the waiter */
    int32_t peer;      /* the rank waited for (or that raised abort) */
    int32_t channel;   /* CTA / channel of the waiter */
    int32_t chunk;     /* -1: a handshake, not a data chunk */
    int32_t phase;
    uint64_t expected; /* the target of the wait */
    uint64_t seen;     /* the counter's value at expiry */
    uint64_t epoch;    /* the operation's call number on the device */
    /* Stop word: the rank to blame + 1, raised by this rank's host (the
     * watchdog, mkCommAbort) with a plain store.  Kernels' waits watch it
     * beside the abort word in the heap, which the host can only reach
     * through a stream: a write queued there can sit behind a stream
     * memory wait sharing its hardware queue (ranks sharing a GPU under
     * MPS share one pool of queues) and never land. */
    volatile uint64_t stop;
};

/* The communicator as a kernel sees it (part of every op's parameters). */
struct mki_rt_dev {
    int32_t rank, nranks;           /* communicator rank and size */
    int32_t local, nlocal;          /* my index in my node, ranks of my node */
    int32_t op;                     /* this launch's operation (errors) */
    int32_t pad;
    int32_t glob[MKI_MAXLOCAL];     /* communicator rank of local index l */
    char *heap[MKI_MAXLOCAL];       /* heap (first segment) of local index
                                     * l, mapped here; control block at 0 */
    const int32_t *local_of;        /* [nranks], in my heap: local index of
                                     * rank q, -1 on another node */
    int8_t lof[MKI_RT_LOF];         /* the same for the first MKI_RT_LOF ranks:
                                     * a parameter read costs no load from
                                     * memory on the chunk path */
    struct mki_err_record *err;     /* device view of the host-mapped record */
    const uint64_t *abort2;         /* an internal communicator's: the abort
                                     * word of the one its op was called on
                                     * (in this process's heap); else NULL */
    uint64_t timeout_ns;            /* MK_TIMEOUT_MS */
    struct mki_fifo_dev fifo;       /* the proxy's ring (several nodes) */
};

#endif /* MKI_RT_H */
