/*
 * coll.h - what src/ops/coll.c (host) and kernels/ops/coll.cu (device)
 * agree on for mkAllGather, mkReduceScatter, mkAllReduce and mkAllToAll.
 * C99 and CUDA C++; no CUDA headers.
 */
#ifndef MKI_OPS_COLL_H
#define MKI_OPS_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "rt/channel.h"
#include "rt/roles.h"
#include "rt/rt.h"

#define MKI_COLL_THREADS 512

enum mki_coll_kind {
    MKI_COLL_ALLGATHER = 1,
    MKI_COLL_REDUCESCATTER = 2,
    MKI_COLL_ALLREDUCE = 3,
    MKI_COLL_ALLTOALL = 4
};

/* What moves the bytes of the SEND role (the plan's choice). */
enum mki_coll_mover {
    MKI_COLL_MOVER_TMA = 0,      /* TMA for every copy (send and receive) */
    MKI_COLL_MOVER_REG = 1,      /* register loads/stores only */
    MKI_COLL_MOVER_TMA_SEND = 2  /* TMA to peers, register copies locally */
};

/* The roles of each kernel, in thread order (struct mki_roles):
 *   all-gather, all-to-all:        SEND, RECV
 *   reduce-scatter, one-phase AR:  SEND, REDUCE
 *   all-reduce, TMA movers:        SEND, SEND2, REDUCE, RECV (phase 1)
 *   all-reduce, register stores:   SEND, REDUCE (pushes results), RECV */
enum { MKI_CR_SEND = 0, MKI_CR_SECOND = 1 };

/* Parameters of one launch (by value, __grid_constant__). */
struct mki_coll_params {
    struct mki_rt_dev rt;
    struct mki_chan_dev ch;
    struct mki_roles roles;     /* threads of each role */
    int32_t kind, dtype, esize, nch;
    int32_t mover;              /* enum mki_coll_mover */
    int32_t oneshot;            /* all-reduce in one phase: every peer gets
                                 * the whole buffer, every rank reduces all */
    int32_t direct;             /* zero copy (coll.cu says how) */
    int32_t ll;                 /* LL: the flag in every word (channel.h) */
    int32_t peer_major;         /* all chunks to one peer, then the next
                                 * (the plan's; coll.cu says when) */
    int32_t pipelined;          /* SEND / SEND2's TMA chunks to local peers
                                 * signalled without a drain (the plan's;
                                 * kernels/rt/channel.cuh, deliver) */
    int32_t stagger;            /* two-phase all-reduce: channels of the
                                 * second half start when their partner
                                 * of the first half sent (channel.h, go) */
    uint64_t post[MKI_MAXLOCAL];/* zero copy: my recvbuf as local rank l
                                 * maps it, or 0 (not registered) */
    char *llb[MKI_MAXLOCAL];    /* LL: local rank l's LL block, as mapped
                                 * here */
    uint64_t count;             /* as in the public call */
    const char *src;
    char *dst;
};

#ifdef __cplusplus
extern "C" {
#endif
/* The kernel of a launch and its dynamic shared memory. */
const void *mki_coll_kernel(const struct mki_coll_params *p);
size_t mki_coll_smem(const struct mki_coll_params *p);
/* Load every collective kernel now (lazy loading can deadlock beside a
 * spinning stream); 0 or an error with msg set. */
int mki_coll_preload(char *msg, size_t len);
#ifdef __cplusplus
}
#endif

#endif /* MKI_OPS_COLL_H */
