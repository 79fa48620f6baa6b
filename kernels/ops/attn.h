/*
 * attn.h (ops) - what src/ops/attn.c (host) and kernels/attn/attn.cu
 * (device) agree on for mkRingAttention's fused call on one node.  C99 and
 * CUDA C++; no CUDA headers.
 *
 * The protocol is mkAllGatherGemm's (ops/ag_gemm.h) with k and v as the
 * rows that travel.  Each rank keeps, in its symmetric heap, a control
 * block (below) and a bank: for every local rank s, a k region and a v
 * region of kvbytes each (slot s at 2 s kvbytes; this rank's own slot is
 * unused: its keys are read from the caller's k and v).  Rank s copies
 * chunk c of its k and of its v (kernels/attn/attn.h: mki_attn_chunk)
 * into slot s of every other local rank's bank with a copy engine (side
 * streams the host enqueues beside the kernel), then raises sig[s][c]
 * there (a stream memory operation writing 1, after the copies).  The
 * kernel's producer waits for that flag before loading keys of chunk c.
 *
 *   call e = calls + 1        every CTA reads `calls` at its start; the
 *                             last CTA out writes calls = e
 *   cur = e                   written by CTA 0's gate (diagnostics)
 *   gate                      rank s may write call e's chunks into q's
 *                             bank only once q.released >= e - 1; CTA 0
 *                             waits for that (deadline, abort word), then
 *                             sets go[q][x] = 1 for each side stream x to
 *                             q (previous ranks first), which waits for
 *                             it and resets it to 0 before copying
 *   flags                     CTA 0 waits for every flag of every peer
 *                             at its end; the last CTA out clears them
 *   released = e              the last CTA out
 *
 * The side streams wait only for this rank's kernel, whose every wait has
 * a deadline: nothing on them can hang.
 */
#ifndef MKI_OPS_ATTN_H
#define MKI_OPS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attn.h"
#include "rt/launch.h"
#include "rt/rt.h"

#define MKI_RATT_SPLIT_MAX 2  /* copy-engine streams per peer, at most */
#define MKI_RATT_CE_CHUNK_MIN (4ll << 20) /* bytes of k per chunk, at least */

/* A rank's control block (in its heap, zeroed at creation). */
struct mki_ratt_ctl {
    uint64_t calls;         /* fused calls completed here */
    uint64_t cur;           /* the call in flight */
    uint64_t released;      /* the last call whose bank reads are done */
    uint32_t exits, pad;    /* CTAs done with the call in flight */
    uint64_t spare[12];     /* spare[0]: the host's capture probe */
    uint64_t go[MKI_MAXLOCAL][MKI_RATT_SPLIT_MAX];
    uint64_t sig[MKI_MAXLOCAL][MKI_ATTN_MAXCHUNKS];
};

/* One fused call (src/ops/attn.c fills it).  core.seg[0] is this rank's
 * k and v (no flags); core.seg[i], i = 1 .. nsrc - 1, local rank
 * seg_src[i] = (me + i) mod nsrc, in this rank's bank, with flags
 * ctl->sig[seg_src[i]] and flag_target 1; core.chunk_rows the chunks'
 * rows, the same on every rank. */
struct mki_ratt_launch {
    struct mki_attn_args core;
    int nsrc;                                   /* local ranks */
    int split;                                  /* side streams per peer */
    int seg_src[MKI_ATTN_MAXSEG];
    struct mki_ratt_ctl *ctl;                   /* mine */
    const struct mki_ratt_ctl *peer_ctl[MKI_MAXLOCAL]; /* local rank l's, here */
    struct mki_rt_dev rt;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Describe the fused kernel of a call (with no work, a kernel that only
 * takes part in the protocol); MKI_ATTN_OK or an error with msg set. */
int mki_ratt_describe(const struct mki_ratt_launch *l, struct mki_launch_desc *d, char *msg,
                      size_t len);
int mki_ratt_preload(char *msg, size_t len);
#ifdef __cplusplus
}
#endif
#endif /* MKI_OPS_ATTN_H */
