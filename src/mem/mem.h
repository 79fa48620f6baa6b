/*
 * mem.h - the device runtime of a communicator (src/mem/): its symmetric
 * heap (heap.h), the host-mapped error record and the watchdog that turns
 * it into the communicator's async error, the abort word, and the user
 * buffers registered with it.
 *
 *   devrt.c     create / destroy / abort, the kernels' view (mki_rt_fill)
 *   heap.c      segments and blocks of the symmetric heap
 *   watchdog.c  error records -> async error; the abort word
 *   reg.c       mkMemAlloc, mkCommRegister and their release
 */
#ifndef MKI_MEM_H
#define MKI_MEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "mkernel.h"
#include "mem/heap.h"
#include "rt/rt.h"

struct mkComm;

/* One allocation of a local peer mapped here by CUDA IPC, shared by the
 * registrations that lie in it (a handle is opened once per process). */
struct mki_ipc_map {
    struct mki_ipc_map *next;
    int local;                /* the peer's local index */
    cudaIpcMemHandle_t handle;
    char *base;               /* the allocation's base, mapped here */
    int refs;
};

/* One buffer from mkMemAlloc or mkCommRegister (both collective): every
 * local peer's buffer of the same registration is mapped here, and every
 * peer told us where it maps ours, so a kernel can tell a peer where to
 * write into our buffer (zero copy, kernels/ops/coll.cu). */
struct mki_reg {
    struct mki_reg *next;
    void *ptr;
    size_t bytes;
    int owned;                        /* 1: mkMemAlloc allocated it */
    char *peer_buf[MKI_MAXLOCAL];     /* local rank l's buffer, here */
    uint64_t seen_by[MKI_MAXLOCAL];   /* my buffer as local rank l maps it */
    struct mki_ipc_map *map[MKI_MAXLOCAL]; /* mappings held (or NULL) */
};

#define MKI_TAILS 8 /* streams whose last call the watchdog waits for */

struct mki_devrt {
    int dev;
    int nlocal, me;                 /* ranks of my node; my index */
    int sm_count;
    int comm_rank[MKI_MAXLOCAL];    /* communicator rank of local index */
    struct mki_heap heap;
    struct mki_heap_blk local_of;   /* int32 [nranks]: rt.h's local_of */
    int8_t lof_head[MKI_RT_LOF];    /* its first MKI_RT_LOF entries (rt.h's lof) */
    struct mki_err_record *rec;     /* host-mapped: host view */
    struct mki_err_record *rec_dev; /* the same, device view */
    cudaStream_t side;              /* private stream: abort words, polls,
                                     * zeroing heap blocks */
    uint64_t *pinned;               /* [0]: abort value out, [1]: poll in,
                                     * [2]: own abort word (a dead peer) */
    pthread_t watchdog;
    int watchdog_up;
    volatile int stop;
    int aborted;                    /* mkCommAbort: leave device memory */
    pthread_mutex_t reg_lock;
    struct mki_reg *regs;
    int nregs;                      /* equal on every rank (collective) */
    struct mki_ipc_map *maps;       /* peers' allocations mapped here */
    /* The calls' tails: an event after the last call on each stream calls
     * came on (the least recently used slot goes to a new stream), so that
     * the watchdog reports a dead peer only once nothing this rank
     * enqueued can still write into the caller's buffers.  call_lock is
     * held by a call from its check of the communicator to its tail. */
    pthread_mutex_t call_lock;
    int call_depth;                 /* calls inside calls (unfused sequences) */
    struct mki_tail {
        cudaStream_t stream;
        cudaEvent_t ev;
        uint64_t used;
    } tail[MKI_TAILS];
    uint64_t tail_clock;
    /* Raised by the watchdog when it finds a dead peer (gate_msg says
     * which): a call then enqueues nothing, waits for the tails and
     * returns the failure itself (without it a caller that keeps calling
     * keeps its stream busy, and the tails never all complete). */
    int gate;
    uint64_t gate_since;
    char gate_msg[MKI_ERRMSG_LEN];
};

/* ---- devrt.c ----------------------------------------------------------- */
/* After a call enqueued on stream (not in a capture): the stream's tail
 * event recorded there; call_lock held. */
void mki_devrt_tail(struct mki_devrt *d, cudaStream_t stream);
/* Whether every tail event has completed (never blocks); call_lock held. */
int mki_devrt_drained(struct mki_devrt *d);
/* Wait (polling) until drained, at most max_ns; call_lock held. */
#define MKI_DRAIN_NS 500000000ull
void mki_devrt_drain_wait(struct mki_devrt *d, uint64_t max_ns);
/* Set up comm->dev (collective over comm->boot) with a heap whose first
 * segment has heap_bytes and, when host_bytes > 0, a host segment of that
 * size; a process without GPU (comm->cuda_dev < 0) gets comm->dev == NULL
 * and returns mkSuccess. */
mkResult_t mki_devrt_create(struct mkComm *comm, size_t heap_bytes, size_t host_bytes);
/* Undo mki_devrt_create (NULL-safe).  After mki_devrt_abort, device
 * memory is left alone: kernels may still be running on it. */
void mki_devrt_destroy(struct mkComm *comm);
/* mkErrUnsupported with a message when the communicator has no GPU. */
mkResult_t mki_devrt_require(struct mkComm *comm, const char *func);
/* Bytes of a communicator's first heap segment: MK_WORKSPACE_SIZE, or
 * when that is 0, 128 MiB per rank of the largest node plus 1 MiB (the
 * collectives' slots), at least 256 MiB.  The same on every rank. */
size_t mki_heap_default_bytes(size_t configured, int largest_node);

/* ---- watchdog.c --------------------------------------------------------- */
mkResult_t mki_watchdog_start(struct mkComm *comm);
/* In a call, call_lock held: mkSuccess, or, once the watchdog found a dead
 * peer, mkErrRemote after the tails completed (bounded by MKI_DRAIN_NS
 * from the finding) and the communicator broken with the watchdog's
 * sentence. */
mkResult_t mki_watchdog_gate(struct mkComm *comm);
void mki_watchdog_stop(struct mki_devrt *d);
/* Raise the abort word in every local peer's heap and in mine, waiting
 * at most a short bounded time for the writes; never waits for peers. */
void mki_devrt_abort(struct mkComm *comm);
/* Raise this rank's own abort word with dead + 1 (a peer found dead):
 * its kernels stop at their next wait; never blocks. */
void mki_devrt_stop_kernels(struct mkComm *comm, int dead);
/* Decode an error record into text naming op, ranks, channel, chunk,
 * expected and seen values.  Returns mkErrTimeout, mkErrRemote or
 * mkErrTransport (a failed proxy); mkSuccess when !valid. */
mkResult_t mki_err_record_format(const struct mki_err_record *r, char *buf, size_t len);

/* ---- reg.c ---------------------------------------------------------------- */
/* 1 when [ptr, ptr + bytes) lies in a buffer registered with comm; then
 * seen_by[l] (when not NULL) receives the address of ptr in local rank l's
 * address space (ptr itself for me and for a rank of my process). */
int mki_devrt_is_registered(struct mkComm *comm, const void *ptr, size_t bytes,
                            uint64_t *seen_by);
/* Drop every registration (communicator destroy). */
void mki_reg_free_all(struct mki_devrt *d);

#endif /* MKI_MEM_H */
