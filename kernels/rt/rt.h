/*
 * devrt.h - what the host runtime and the device kernels agree on: the
 * layout of the symmetric workspace, the error record, the signal
 * arithmetic and the parameters of a collective launch.  C99 and CUDA C++.
 *
 * Workspace of one rank (MK_WORKSPACE_SIZE bytes, cudaMalloc, mapped by
 * every local peer through CUDA IPC):
 *
 *   0       abort word   (0: healthy; l + 1: the rank of local index l
 *                         raised it)
 *   8       claim word   (the first failing waiter of this rank takes it)
 *   128     16 words free for tools (mkbench net)
 *   256     seq[MKI_MAXCH]             op counter of each channel (local)
 *   4096    arrive[2][MKI_MAXLOCAL][MKI_MAXCH]   written by the sender
 *   12288   credit[2][MKI_MAXLOCAL][MKI_MAXCH]   written by the receiver
 *   20480   post[MKI_MAXLOCAL][MKI_MAXCH]        {address, tag}, written
 *                                                by the receiver (zero copy)
 *   28672   done[MKI_MAXLOCAL][MKI_MAXCH]        written by the sender
 *                                                (zero copy)
 *   32768   owed[2][MKI_MAXLOCAL][MKI_MAXCH]     local: the credit that peer
 *                                                q owes this channel's last
 *                                                use of its slots
 *   65536   slots[2][local_size][MKI_MAXCH][MKI_NSLOTS] of slot_bytes
 *
 * Signals.  Channel c of every rank runs the same sequence of operations,
 * so seq[c] (incremented by CTA c at the end of each operation) is equal
 * on all ranks for the same call.  Operation e = seq[c] + 1 uses the
 * targets (e << 32) | (k + 1) for its chunk k: counters only ever grow,
 * nothing is reset between calls, and the host passes nothing that a CUDA
 * graph replay would freeze (the sequence lives in device memory).
 *
 * Zero copy (p.direct: all-gather and all-to-all on one node, when the
 * communicator has registered buffers and the block is large enough; the
 * same on every rank).  At entry, CTA c of every rank q posts into each
 * peer r's post[q][c] the address at which r writes into q's recvbuf (as r
 * maps it; 0 when q's recvbuf is not registered) and releases its tag
 * (e << 32) | 1.  r's SEND waits for the tag, then writes its part
 * straight into q's recvbuf, or through the slots when the address is 0,
 * and after the last byte releases done[r][c] in q = (e << 32) | 1; q's
 * RECV waits for that instead of copying chunks (a counter of its own:
 * ranks that disagree on the regime time out instead of reading slots
 * as if they were the data).  The post is what makes
 * this safe: q's kernel has started, so whatever q's stream did with its
 * recvbuf before the call is done.
 *
 * Across (virtual) nodes, for communicators of at most MKI_MAXLOCAL ranks
 * in all: ranks are indexed by communicator rank; ws[q] is NULL for a rank
 * q on another node (bit q of net_mask).  Everything shared with a remote
 * rank lives in the net buffer `nb`: page-locked host memory mapped into
 * the GPU and registered as region 1 of the transport, so the proxy moves
 * it with no CUDA call (a proxy that calls cudaMemcpy can stall behind the
 * application's own pageable copies, which wait for the very kernel that
 * waits for the proxy: seen on H200).
 *
 *   0       credit[2][MKI_MAXLOCAL][MKI_MAXCH]             from remote receivers
 *   8192    arrive[2][MKI_MAXLOCAL][MKI_MAXCH][MKI_NSLOTS]  from remote senders
 *   65536   slots[2][2 * nranks][MKI_MAXCH][MKI_NSLOTS] of nb_slot bytes:
 *           index q < nranks receives from rank q, nranks + q stages what
 *           goes to rank q
 *
 * The sender copies a chunk into its staging slot and pushes one
 * MKI_CMD_WRITE_SIGNAL (the proxy writes it into the receiver's slot and
 * raises its arrive counter of that slot with MKI_SIG_MAX).  Commands may
 * land out of order (several connections, SRD), hence one arrive counter
 * per slot: only one chunk per slot is ever in flight (the sender waits
 * for the credit of the chunk before), so each counter grows in order.
 * Credits go back as MKI_CMD_SIGNAL (MAX too): the receiver consumes in
 * order, so credit k covers every chunk up to k.
 */
#ifndef MKI_DEVRT_H
#define MKI_DEVRT_H

#include <stddef.h>
#include <stdint.h>

#include "fifo.h"

#ifdef __CUDACC__
#define MKI_HD __host__ __device__ __forceinline__
#else
#define MKI_HD static inline
#endif

#define MKI_MAXCH 64       /* channels (CTAs) of one collective, at most */
#define MKI_MAXLOCAL 8     /* ranks that share one workspace mesh        */
#define MKI_NSLOTS 4       /* pipeline depth of each (peer, channel)     */
#define MKI_WS_ABORT 0
#define MKI_WS_CLAIM 8
#define MKI_WS_BENCH 128
#define MKI_WS_SEQ 256
#define MKI_WS_ARRIVE 4096
#define MKI_WS_CREDIT 12288
#define MKI_WS_POST 20480
#define MKI_WS_DONE 28672
#define MKI_WS_OWED 32768
#define MKI_WS_DATA 65536
#define MKI_SLOT_MAX (1u << 20)
#define MKI_NB_CREDIT 0
#define MKI_NB_ARRIVE 8192
#define MKI_NB_DATA 65536
#define MKI_NB_TARGET (128ull << 20) /* slot bytes of a net buffer, about */
#define MKI_SLOT_ALIGN 4096

/* Collective ids (also in error records). */
enum mki_coll_op {
    MKI_COLL_ALLGATHER = 1,
    MKI_COLL_REDUCESCATTER = 2,
    MKI_COLL_ALLREDUCE = 3,
    MKI_COLL_ALLTOALL = 4
};

/* What moves the bytes of the SEND role (MK_COLL_MOVER). */
enum mki_coll_mover {
    MKI_COLL_MOVER_TMA = 0,      /* TMA for every copy (send and receive) */
    MKI_COLL_MOVER_REG = 1,      /* register loads/stores only */
    MKI_COLL_MOVER_TMA_SEND = 2  /* TMA to peers, register copies locally */
};

/* Element types; values equal mkDataType_t. */
enum mki_dtype { MKI_BF16 = 0, MKI_F16 = 1, MKI_F32 = 2 };

/* Error record, in host-mapped memory; the device writes every field and
 * then valid = 1 (after a system fence). */
enum mki_err_kind {
    MKI_ERR_NONE = 0, MKI_ERR_TIMEOUT = 1, MKI_ERR_REMOTE = 2,
    MKI_ERR_PROXY = 3  /* this rank's proxy failed while a kernel pushed */
};
struct mki_err_record {
    volatile uint32_t valid;
    int32_t kind;      /* enum mki_err_kind */
    int32_t op;        /* enum mki_coll_op */
    int32_t rank;      /* the waiter */
    int32_t peer;      /* the rank waited for (or that raised abort) */
    int32_t channel;
    int32_t chunk;
    int32_t phase;
    uint64_t expected; /* the target of the wait */
    uint64_t seen;     /* the counter's value at expiry */
    uint64_t epoch;    /* host epoch of the operation */
    int32_t global;    /* 1: rank and peer are communicator ranks, 0:
                        * local indices (the host maps them) */
    int32_t pad;
};

/* Parameters of one collective launch (by value, __grid_constant__). */
struct mki_coll_params {
    int32_t op, dtype, esize;
    int32_t nranks, me, nch;
    int32_t mover;              /* enum mki_coll_mover */
    int32_t oneshot;            /* all-reduce in one phase: every peer gets
                                 * the whole buffer, every rank reduces all */
    int32_t direct;             /* zero-copy regime (see the top) */
    int32_t pad0;
    uint64_t post[MKI_MAXLOCAL];/* my recvbuf as rank q maps it, or 0 */
    uint64_t count;             /* as in the public call */
    const char *src;
    char *dst;
    char *ws[MKI_MAXLOCAL];     /* every rank's workspace, mapped here */
    uint64_t slot_bytes;
    uint64_t timeout_ns;
    uint64_t epoch;             /* host epoch: names the call in errors */
    struct mki_err_record *err; /* device view of the host-mapped record */
    /* Across nodes (see the top): 0 on one node. */
    uint32_t net_mask;          /* bit q: rank q is reached by the proxy */
    char *nb;                   /* my net buffer (device view) */
    uint64_t nb_slot;           /* its slot stride (>= slot_bytes) */
    int32_t me_local;           /* my local index (abort words) */
    int32_t glob[MKI_MAXLOCAL]; /* communicator rank of local index l */
    struct mki_fifo_dev fifo;   /* the proxy's ring (net_mask only) */
};

/* ---- arithmetic shared by host tests and kernels -------------------- */

/* Target of chunk k of operation number e (e >= 1). */
MKI_HD uint64_t mki_sig_target(uint64_t e, uint64_t k)
{
    return (e << 32) | ((k + 1) & 0xffffffffull);
}

/* Split `bytes` among nch channels in 16-byte units: channel c gets
 * [*off, *off + *len). */
MKI_HD void mki_chan_part(uint64_t bytes, int nch, int c, uint64_t *off,
                          uint64_t *len)
{
    uint64_t units = (bytes + 15) / 16;
    uint64_t per = (units + (uint64_t)nch - 1) / (uint64_t)nch * 16;
    uint64_t o = per * (uint64_t)c;
    *off = o < bytes ? o : bytes;
    *len = o < bytes ? (bytes - o < per ? bytes - o : per) : 0;
}

MKI_HD uint64_t mki_nchunks(uint64_t len, uint64_t chunk)
{
    return (len + chunk - 1) / chunk;
}

/* Elements of rank r's block when count elements are split among n ranks
 * for all-reduce (blocks of a multiple of 8 elements, the last shorter). */
MKI_HD void mki_ar_block(uint64_t count, int n, int r, uint64_t *first,
                         uint64_t *elems)
{
    uint64_t q = (count + (uint64_t)n - 1) / (uint64_t)n;
    q = (q + 7) / 8 * 8;
    uint64_t f = q * (uint64_t)r;
    *first = f < count ? f : count;
    *elems = f < count ? (count - f < q ? count - f : q) : 0;
}

/* Byte offsets of the signal arrays and slots. */
MKI_HD uint64_t mki_ws_arrive(int phase, int src, int ch)
{
    return MKI_WS_ARRIVE + 8ull * (((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)src) * MKI_MAXCH + (uint64_t)ch);
}
MKI_HD uint64_t mki_ws_credit(int phase, int dst, int ch)
{
    return MKI_WS_CREDIT + 8ull * (((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)dst) * MKI_MAXCH + (uint64_t)ch);
}
MKI_HD uint64_t mki_ws_slot(int phase, int src, int ch, int slot, int nlocal,
                            uint64_t slot_bytes)
{
    uint64_t i = (((uint64_t)phase * (uint64_t)nlocal + (uint64_t)src) * MKI_MAXCH + (uint64_t)ch) * MKI_NSLOTS + (uint64_t)slot;
    return MKI_WS_DATA + i * slot_bytes;
}
/* The post of receiver q for channel ch (address; the tag follows). */
MKI_HD uint64_t mki_ws_post(int q, int ch)
{
    return MKI_WS_POST + 16ull * ((uint64_t)q * MKI_MAXCH + (uint64_t)ch);
}
/* Zero copy: sender q's part of channel ch is in place. */
MKI_HD uint64_t mki_ws_done(int q, int ch)
{
    return MKI_WS_DONE + 8ull * ((uint64_t)q * MKI_MAXCH + (uint64_t)ch);
}
/* The credit target that the last operation of channel ch which sent
 * through q's phase slots waits for (stored at its end; the next one that
 * uses those slots waits for it first, so no call ends on that wait). */
MKI_HD uint64_t mki_ws_owed(int phase, int q, int ch)
{
    return MKI_WS_OWED + 8ull * (((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)q) * MKI_MAXCH + (uint64_t)ch);
}
/* Slot bytes that fit a workspace of ws_bytes for nlocal ranks; 0 when
 * the workspace is too small. */
MKI_HD uint64_t mki_ws_slot_bytes(uint64_t ws_bytes, int nlocal)
{
    if (ws_bytes <= MKI_WS_DATA || nlocal < 1) return 0;
    uint64_t n = 2ull * (uint64_t)nlocal * MKI_MAXCH * MKI_NSLOTS;
    uint64_t s = (ws_bytes - MKI_WS_DATA) / n / MKI_SLOT_ALIGN * MKI_SLOT_ALIGN;
    return s > MKI_SLOT_MAX ? MKI_SLOT_MAX : s;
}

/* The net buffer (see the top). */
MKI_HD uint64_t mki_nb_credit(int phase, int dst, int ch)
{
    return MKI_NB_CREDIT + 8ull * (((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)dst) * MKI_MAXCH + (uint64_t)ch);
}
MKI_HD uint64_t mki_nb_arrive(int phase, int src, int ch, int slot)
{
    return MKI_NB_ARRIVE + 8ull * ((((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)src) * MKI_MAXCH + (uint64_t)ch) * MKI_NSLOTS + (uint64_t)slot);
}
MKI_HD uint64_t mki_nb_slot(int phase, int idx, int ch, int slot, int nranks,
                            uint64_t stride)
{
    uint64_t i = (((uint64_t)phase * 2ull * (uint64_t)nranks + (uint64_t)idx) * MKI_MAXCH + (uint64_t)ch) * MKI_NSLOTS + (uint64_t)slot;
    return MKI_NB_DATA + i * stride;
}
/* Slot stride of a net buffer for nranks ranks (about MKI_NB_TARGET of
 * slots, 4 KB aligned, at most MKI_SLOT_MAX) and the buffer's bytes. */
MKI_HD uint64_t mki_nb_stride(int nranks)
{
    uint64_t n = 2ull * 2ull * (uint64_t)nranks * MKI_MAXCH * MKI_NSLOTS;
    uint64_t s = MKI_NB_TARGET / n / MKI_SLOT_ALIGN * MKI_SLOT_ALIGN;
    if (s < MKI_SLOT_ALIGN) s = MKI_SLOT_ALIGN;
    return s > MKI_SLOT_MAX ? MKI_SLOT_MAX : s;
}
MKI_HD uint64_t mki_nb_bytes(int nranks, uint64_t stride)
{
    return MKI_NB_DATA + 2ull * 2ull * (uint64_t)nranks * MKI_MAXCH * MKI_NSLOTS * stride;
}

#endif /* MKI_DEVRT_H */
