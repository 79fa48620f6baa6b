/*
 * ce.h - the host side of the fused ops whose bytes ride the copy engines
 * beside a persistent kernel (mkAllGatherGemm, mkRingAttention): side
 * streams to each peer of the node, forked from the caller's stream and
 * joined back into it; on each, a stream memory operation that waits for
 * the kernel's go word (the gate: the peer's bank is free), copies the
 * driver should give a copy engine, and after each chunk a flag raised in
 * the peer's control block.
 *
 *   caller's stream  --fork--+--[persistent kernel: sets go, waits flags]--+--join-->
 *                            |                                             |
 *   side[dst][x]             +--wait go[dst][x]--copy--flag--copy--flag----+
 *
 * The side streams wait only for this rank's own kernel (whose every wait
 * has a deadline), never for a peer, so nothing enqueued here can hang.
 */
#ifndef MKI_OPS_CE_H
#define MKI_OPS_CE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "ops/op.h"

#define MKI_CE_SPLIT_MAX 4   /* side streams per peer, at most */

struct mki_ce {
    void *memop;                /* cuStreamBatchMemOp, from the driver */
    int capture_ok;             /* stream memory operations can be captured */
    int streams;                /* side streams made per peer */
    cudaStream_t side[MKI_MAXLOCAL][MKI_CE_SPLIT_MAX];
    cudaEvent_t fork, join[MKI_MAXLOCAL][MKI_CE_SPLIT_MAX];
};

/* Find the driver's stream memory operations and whether a graph capture
 * takes them (probed once, writing into *probe, a word of this rank's
 * control block); func names the op in messages. */
mkResult_t mki_ce_init(struct mkComm *comm, struct mki_ce *ce, uint64_t *probe,
                       const char *func);
/* Wait for and destroy the side streams and events (not after an abort). */
void mki_ce_fini(struct mkComm *comm, struct mki_ce *ce);
/* split side streams to every local peer (made once, grown when asked for
 * more; not stream operations, so a capture may be going on). */
mkResult_t mki_ce_streams(struct mki_call *k, struct mki_ce *ce, int split);
/* Wait for everything enqueued on the side streams (before a bank that
 * peers' copies went into is given back). */
mkResult_t mki_ce_drain(struct mki_call *k, struct mki_ce *ce);
/* The fork point: the side streams start after what the caller's stream
 * holds now. */
mkResult_t mki_ce_fork(struct mki_call *k, struct mki_ce *ce);
/* Side streams 0 .. split - 1 to peer dst wait for the fork, then for the
 * gate: go[x] == 1 (this rank's kernel writes it), reset to 0. */
mkResult_t mki_ce_gate(struct mki_call *k, struct mki_ce *ce, int dst, int split,
                       uint64_t *go);
/* Device-to-device copies the driver should give to a copy engine (a copy
 * kernel could not start while the persistent kernel holds every SM, and
 * the kernel waits for it: seen, a device-local cudaMemcpyAsync hung
 * behind mkAllGatherGemm's grid); inside a capture, memcpy nodes.  n (at
 * most 4) copies of bytes[i] from src[i] to dst[i], empty ones skipped. */
cudaError_t mki_ce_copy(struct mki_call *k, cudaStream_t s, int n, void *const *dst,
                        const void *const *src, const size_t *bytes);
/* The chunk is in the peer's bank: *flag = 1 after the stream's copies
 * (the write's default memory barrier); the peer's kernel clears it. */
mkResult_t mki_ce_flag(struct mki_call *k, struct mki_ce *ce, uint64_t *flag, cudaStream_t s);
/* The caller's stream waits for side streams 0 .. split - 1 to dst. */
mkResult_t mki_ce_join(struct mki_call *k, struct mki_ce *ce, int dst, int split);

#endif /* MKI_OPS_CE_H */
