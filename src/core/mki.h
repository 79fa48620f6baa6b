/*
 * mki.h - internal declarations shared by the host runtime.
 *
 * Names: public API mk*, internal mki_* (or static).  Nothing here is
 * exported from libmkernel.so (built with -fvisibility=hidden).
 */
#ifndef MKI_H
#define MKI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "mkernel.h"
#include "log.h"
#include "param.h"
#include "bootstrap/bootstrap.h"

#define MKI_ERRMSG_LEN 1024

/* ---- errors ------------------------------------------------------- */

/* Record a failure detail for comm (or the calling thread when comm is
 * NULL), log it at WARN, and return res so callers can write
 * `return mki_error(comm, mkErrInvalidArgument, "...")`. */
mkResult_t mki_error(struct mkComm *comm, mkResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mkResult_t mki_verror(struct mkComm *comm, mkResult_t res, const char *fmt,
                      va_list ap);
/* The same as mki_error without logging (for expected, handled failures). */
void mki_error_quiet(struct mkComm *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The thread-local detail buffer used when no communicator exists. */
const char *mki_thread_error(void);
void mki_thread_error_clear(void);

/* Propagate an error, adding one "-> file:line" frame at TRACE. */
#define MKI_CHECK(call)                                                    \
    do {                                                                   \
        mkResult_t mki_res_ = (call);                                      \
        if (mki_res_ != mkSuccess) {                                       \
            MKI_TRACE(MKI_SUB_ALL, "-> %s:%d (%s)", __FILE__, __LINE__,    \
                      mkGetErrorString(mki_res_));                         \
            return mki_res_;                                               \
        }                                                                  \
    } while (0)

#define MKI_CHECK_GOTO(call, res, label)                                   \
    do {                                                                   \
        (res) = (call);                                                    \
        if ((res) != mkSuccess) {                                          \
            MKI_TRACE(MKI_SUB_ALL, "-> %s:%d (%s)", __FILE__, __LINE__,    \
                      mkGetErrorString(res));                              \
            goto label;                                                    \
        }                                                                  \
    } while (0)

/* ---- configuration ------------------------------------------------ */

/* The resolved configuration: every field defined. */
struct mki_config {
    int cudaDev;             /* -1: pick local rank % device count */
    int timeoutMs;
    char transports[256];
    int smBudget;            /* 0: all SMs of the device */
    size_t workspaceSize; /* 0: automatic (mki_ws_bytes) */
    int nodeSize;            /* 0: physical nodes */
    char smSplit[256];       /* MK_SM_SPLIT syntax, "" none (src/plan.c) */
};

/* Copy the user's config (which may come from an older or newer header)
 * into *out, fill undefined fields from MK_* parameters and defaults, and
 * validate.  config may be NULL.  On error nothing in *out is meaningful
 * and the detail is in the thread error (comm is NULL at init time). */
mkResult_t mki_config_resolve(const mkConfig_t *config,
                              struct mki_config *out);

/* ---- communicator ------------------------------------------------- */

#define MKI_WS_MIN_BYTES (1ll << 20)

#define MKI_COMM_MAGIC 0x6d6b636fu /* "mkco" */

struct mki_host_info {
    uint64_t host_hash;   /* hostname + boot id */
    uint64_t node_key;    /* equal keys share a node (topology/nodes.c) */
    int32_t pid;
    int32_t cuda_dev;     /* -1 when no GPU */
    char hostname[64];
};

struct mki_topo;   /* topology/: discovery and node grouping */
struct mki_plan;   /* src/plan.c: transports per peer, SM splits */
struct mki_devrt;  /* src/mem.c: workspace, peers, signals, error records */
struct mki_net;    /* src/proxy.c + transports/: inter-node path */
struct mki_agg;    /* src/ops/ag_gemm.c: mkAllGatherGemm's arena */

struct mkComm {
    uint32_t magic;
    int rank, nranks;
    int local_rank, local_size;
    int node, nnodes;
    int cuda_dev;                       /* -1: no GPU in this process */
    uint64_t cookie;                    /* job cookie of this communicator */
    uint64_t epoch;                     /* incremented by every operation */
    struct mki_config cfg;
    const struct mki_bootstrap_ops *boot;
    void *boot_ctx;
    struct mki_host_info *hosts;        /* nranks entries */
    struct mki_topo *topo;              /* NULL until topology is set up */
    struct mki_plan *plan;
    struct mki_devrt *dev;              /* NULL in a process without GPU */
    struct mki_net *net;
    struct mki_agg *agg;                /* src/ops/ag_gemm.c: arena, side streams */
    pthread_mutex_t lock;               /* guards the fields below */
    mkResult_t async_error;
    int aborted;
    char last_error[MKI_ERRMSG_LEN];
    char async_detail[MKI_ERRMSG_LEN];  /* the failure that broke it */
};

/* Validate a communicator handle from the user (NULL, freed, garbage
 * magic); on failure records the detail in the thread error. */
mkResult_t mki_comm_check(mkComm_t comm, const char *func);
/* The error that broke the communicator, or mkSuccess (locked read). */
mkResult_t mki_comm_async_error(struct mkComm *comm);
/* The error every call on a broken communicator returns, with the detail
 * of the failure that broke it (which peer, which wait). */
mkResult_t mki_comm_broken(struct mkComm *comm, mkResult_t res,
                           const char *func);
/* Mark the communicator broken; later calls return res.  The detail is
 * taken from the communicator's last error: record it first. */
void mki_comm_set_async_error(struct mkComm *comm, mkResult_t res);
/* Build a communicator around an initialised bootstrap (takes ownership
 * of the bootstrap context, also on failure). */
mkResult_t mki_comm_create(const struct mki_config *cfg,
                           const struct mki_bootstrap_ops *boot, void *ctx,
                           int rank, int nranks, uint64_t cookie,
                           mkComm_t *out);
/* src/mem.c: the device runtime of a communicator (workspace, peers,
 * error record, watchdog).  Create skips a process without GPU; destroy is
 * NULL-safe; abort raises every local peer's abort word without waiting
 * for peers (call it before destroy). */
mkResult_t mki_devrt_create(struct mkComm *comm);
void mki_devrt_destroy(struct mkComm *comm);
void mki_devrt_abort(struct mkComm *comm);
/* src/ops/ag_gemm.c: mkAllGatherGemm's arena and streams (NULL-safe). */
void mki_ag_gemm_free(struct mkComm *comm);

/* ---- misc --------------------------------------------------------- */
uint64_t mki_now_ns(void);               /* CLOCK_MONOTONIC */
mkResult_t mki_random_bytes(void *buf, size_t len);
uint64_t mki_host_hash(void);            /* hostname + boot id */

/* Workspace bytes of this rank: the configured size, or when that is 0,
 * 128 MiB per rank of the node plus 1 MiB (256 KiB slots for every
 * (peer, channel, slot) at MKI_MAXCH channels), at least 256 MiB.  The
 * same on every rank of a node. */
static inline size_t mki_ws_bytes(const struct mkComm *comm)
{
    if (comm->cfg.workspaceSize) return comm->cfg.workspaceSize;
    size_t n = comm->local_size > 0 ? (size_t)comm->local_size : 1;
    size_t b = n * ((size_t)128 << 20) + ((size_t)1 << 20);
    return b < ((size_t)256 << 20) ? ((size_t)256 << 20) : b;
}

#endif /* MKI_H */
