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
#include "check.h"

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

/* ---- operations ----------------------------------------------------- */

/* Every operation the library has or plans (ids in error records, plans,
 * MK_SM_SPLIT and the op table of src/ops/). */
enum mki_op {
    MKI_OP_ALLGATHER,
    MKI_OP_REDUCESCATTER,
    MKI_OP_ALLREDUCE,
    MKI_OP_ALLTOALL,
    MKI_OP_AG_GEMM,
    MKI_OP_GEMM_RS,
    MKI_OP_GEMM_AR,
    MKI_OP_MOE_DISPATCH,
    MKI_OP_MOE_COMBINE,
    MKI_OP_MOE_DISPATCH_GEMM,
    MKI_OP_RING_ATTN,
    MKI_OP_MOE_LAYER,
    MKI_OP_COUNT
};
/* "allgather", "ag_gemm", ... (MK_SM_SPLIT, mkinfo --op); "?" when unknown */
const char *mki_op_name(enum mki_op op);
/* "mkAllGather", "mkAllGatherGemm", ...; "an operation" when unknown */
const char *mki_op_api_name(int op);
int mki_op_from_name(const char *name);          /* -1 when unknown */

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
 * into *out, fill undefined fields from the MK_* parameters in params
 * (NULL: read the environment now) and defaults, and validate.  config
 * may be NULL.  On error nothing in *out is meaningful and the detail is
 * in the thread error (comm is NULL at init time). */
mkResult_t mki_config_resolve(const mkConfig_t *config, const struct mki_params *params,
                              struct mki_config *out);

/* ---- communicator ------------------------------------------------- */

#define MKI_WS_MIN_BYTES (1ll << 20) /* least MK_WORKSPACE_SIZE */

#define MKI_COMM_MAGIC 0x6d6b636fu /* "mkco" */

struct mki_host_info {
    uint64_t host_hash;   /* hostname + boot id */
    uint64_t node_key;    /* equal keys share a node (topology/nodes.c) */
    int32_t pid;
    int32_t cuda_dev;     /* -1 when no GPU */
    char hostname[64];
};

struct mki_topo;   /* topology/: discovery and node grouping */
struct mki_plan;   /* src/plan/: transports per peer, what each call runs */
struct mki_devrt;  /* src/mem/: symmetric heap, error record, watchdog */
struct mki_net;    /* src/net/ + transports/: inter-node path */

#define MKI_OPS_SLOTS 16   /* states of the op table (src/ops/op.h) */

#define MKI_KIDS 4 /* internal communicators (op splits) a communicator keeps */

struct mkComm {
    uint32_t magic;
    int rank, nranks;
    int local_rank, local_size;
    int node, nnodes;
    int cuda_dev;                       /* -1: no GPU in this process */
    uint64_t cookie;                    /* job cookie of this communicator */
    uint64_t splits;                    /* mkCommSplit calls (child cookies) */
    struct mki_config cfg;
    struct mki_params params;           /* MK_* values read at creation */
    const struct mki_bootstrap_ops *boot;
    void *boot_ctx;
    struct mki_host_info *hosts;        /* nranks entries */
    struct mki_topo *topo;              /* NULL until topology is set up */
    struct mki_plan *plan;
    struct mki_devrt *dev;              /* NULL in a process without GPU */
    struct mki_net *net;
    struct mki_live *live;              /* the liveness ring (core/live.h) */
    /* An op's internal communicator (a split it made) names ranks by the
     * parent's numbers: name_of[r] is rank r's number there (NULL: r). */
    int *name_of;
    void *op_state[MKI_OPS_SLOTS];      /* each op's state (src/ops/optable.c) */
    struct mki_op_split *split;         /* across nodes: the internal communicators
                                         * the ops share (src/ops/launch.c) */
    pthread_mutex_t lock;               /* guards the fields below */
    mkResult_t async_error;
    int aborted;
    char last_error[MKI_ERRMSG_LEN];
    char async_detail[MKI_ERRMSG_LEN];  /* the failure that broke it */
    struct mkComm *kids[MKI_KIDS];      /* ops' internal communicators: they
                                         * break when this one does */
    struct mkComm *parent;              /* an internal one's (mki_comm_adopt) */
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
/* An op's internal communicator made from comm (a split): it breaks with
 * comm (its kernels stopped, its async error set), and names ranks by
 * comm's numbers (name_of, nranks entries, taken over).  disown before
 * destroying it. */
mkResult_t mki_comm_adopt(struct mkComm *comm, struct mkComm *kid, int *name_of);
void mki_comm_disown(struct mkComm *comm, struct mkComm *kid);
/* Break comm's internal communicators with comm's failure (res, msg). */
void mki_comm_break_kids(struct mkComm *comm, mkResult_t res, const char *msg);
/* The number comm's rank r goes by in messages. */
static inline int mki_comm_name(const struct mkComm *comm, int r)
{
    return comm->name_of && r >= 0 && r < comm->nranks ? comm->name_of[r] : r;
}
/* Build a communicator around an initialised bootstrap (takes ownership
 * of the bootstrap context, also on failure); params: what the MK_*
 * parameters were when the communicator was asked for. */
mkResult_t mki_comm_create(const struct mki_config *cfg, const struct mki_params *params,
                           const struct mki_bootstrap_ops *boot, void *ctx,
                           int rank, int nranks, uint64_t cookie,
                           mkComm_t *out);

/* ---- misc --------------------------------------------------------- */
/* A growing text buffer (oom set when an allocation failed). */
struct mki_strbuf {
    char *buf;
    size_t len, cap;
    int oom;
};
void mki_sb_printf(struct mki_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
uint64_t mki_now_ns(void);               /* CLOCK_MONOTONIC */
mkResult_t mki_random_bytes(void *buf, size_t len);
uint64_t mki_host_hash(void);            /* hostname + boot id */

#endif /* MKI_H */
