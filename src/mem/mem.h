/*
 * mem.h - the device runtime of a communicator: symmetric workspace mapped
 * by every local peer, the host-mapped error record and its watchdog, the
 * abort word, registered user buffers.
 */
#ifndef MKI_MEM_H
#define MKI_MEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "mkernel.h"
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
 * write into our buffer (zero copy, see collectives.cu). */
struct mki_reg {
    struct mki_reg *next;
    void *ptr;
    size_t bytes;
    int owned;                        /* 1: mkMemAlloc allocated it */
    char *peer_buf[MKI_MAXLOCAL];     /* local rank l's buffer, here */
    uint64_t seen_by[MKI_MAXLOCAL];   /* my buffer as local rank l maps it */
    struct mki_ipc_map *map[MKI_MAXLOCAL]; /* mappings held (or NULL) */
};

struct mki_devrt {
    int dev;
    int nlocal, me;                 /* ranks of my node; my index */
    int ranks_on_dev;               /* local ranks sharing my GPU (MPS) */
    int sm_count;
    int coll_budget;                /* CTAs a collective may use, equal on
                                     * every rank of the node */
    char *ws;                       /* my workspace */
    size_t ws_bytes;
    uint64_t slot_bytes;            /* 0: workspace too small for a mesh */
    char *peer_ws[MKI_MAXLOCAL];    /* every local rank's workspace, here */
    int opened[MKI_MAXLOCAL];       /* 1: mapped with cudaIpcOpenMemHandle */
    int comm_rank[MKI_MAXLOCAL];    /* communicator rank of local index */
    struct mki_err_record *rec;     /* host-mapped: host view */
    struct mki_err_record *rec_dev; /* the same, device view */
    cudaStream_t side;              /* private stream: abort words, polls */
    uint64_t *pinned;               /* [0]: abort value out, [1]: poll in */
    pthread_t watchdog;
    int watchdog_up;
    volatile int stop;
    int aborted;                    /* mkCommAbort: leave device memory */
    pthread_mutex_t reg_lock;
    struct mki_reg *regs;
    int nregs;                      /* equal on every rank (collective) */
    struct mki_ipc_map *maps;       /* peers' allocations mapped here */
};

/* Set up comm->dev (collective over comm->boot); a process without GPU
 * (comm->cuda_dev < 0) gets comm->dev == NULL and returns mkSuccess. */
mkResult_t mki_devrt_create(struct mkComm *comm);
/* Undo mki_devrt_create (NULL-safe).  After mki_devrt_abort, device
 * memory is left alone: kernels may still be running on it. */
void mki_devrt_destroy(struct mkComm *comm);
/* Raise the abort word in every local peer's workspace and in mine,
 * waiting at most a short bounded time for the writes; never waits for
 * peers. */
void mki_devrt_abort(struct mkComm *comm);

/* mkErrUnsupported with a message when the communicator has no GPU. */
mkResult_t mki_devrt_require(struct mkComm *comm, const char *func);

/* Decode an error record into text naming op, ranks, channel, chunk,
 * expected and seen values; comm_rank maps local indices (may be NULL).
 * Returns mkErrTimeout, mkErrRemote or mkErrTransport (a failed proxy);
 * mkSuccess when !valid.  A record with global set names communicator
 * ranks already (kernels across nodes). */
mkResult_t mki_err_record_format(const struct mki_err_record *r,
                                 const int *comm_rank, int nlocal, char *buf,
                                 size_t len);
const char *mki_coll_op_name(int op);

/* 1 when [ptr, ptr + bytes) lies in a buffer registered with comm;
 * then seen_by[l] (when not NULL) receives the address of ptr in local
 * rank l's address space (ptr itself for me and for a rank of my
 * process). */
int mki_devrt_is_registered(struct mkComm *comm, const void *ptr,
                            size_t bytes, uint64_t *seen_by);

#endif /* MKI_MEM_H */
