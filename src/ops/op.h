/*
 * op.h - what an operation is to the library, and the one path every
 * call takes.
 *
 * An operation is a host file in src/ops/ (validate, plan, resources,
 * launch) and a kernel file in kernels/ops/ (role split and schedule); its
 * descriptor is one line of the op table (optable.c).  The communicator
 * core names no op: it sizes, creates, loads and destroys them all
 * through the table.  Adding mkGemmReduceScatter, say, adds
 * src/ops/gemm_rs.c (with `const struct mki_op_desc mki_op_gemm_rs`),
 * kernels/ops/gemm_rs.cu, a line in optable.c, its tests and its page.
 *
 * Every public call of an op:
 *
 *     struct mki_call c;
 *     MKI_CHECK(mki_call_enter(comm, MKI_OP_..., stream, &c));   handle, broken?
 *     ... validate (c.res holds the device/capture checks' verdict) ...
 *     ... plan (src/plan/), fill the kernel's parameters (mki_rt_fill) ...
 *     r = mki_launch(&c, &desc);                                  co-resident?
 *     return mki_call_leave(&c, r);                               device back
 */
#ifndef MKI_OP_H
#define MKI_OP_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "mem/heap.h"
#include "rt/launch.h"
#include "rt/rt.h"

struct mki_op_desc {
    const char *name;  /* for messages: "the collectives", "mkAllGatherGemm" */
    /* Bytes this op needs in the heap's host segment on a communicator of
     * several nodes; NULL: none. */
    size_t (*host_bytes)(const struct mkComm *comm);
    /* Its state in a communicator, made with it (collective: heap blocks
     * come in the same order on every rank) and destroyed with it (state
     * may be NULL there); either may be NULL. */
    mkResult_t (*create)(struct mkComm *comm, void **state);
    void (*destroy)(struct mkComm *comm, void *state);
    /* Load its kernels now (never lazily: REFERENCE.md); 0, or nonzero
     * with msg set. */
    int (*preload)(char *msg, size_t len);
};

/* The table, NULL-terminated (optable.c). */
extern const struct mki_op_desc *const mki_op_table[];
/* An op's state in comm (NULL before it was made). */
void *mki_op_state(const struct mkComm *comm, const struct mki_op_desc *op);

/* For the communicator's creation and destruction (src/core/comm.c). */
size_t mki_ops_host_bytes(const struct mkComm *comm);
mkResult_t mki_ops_create(struct mkComm *comm);
void mki_ops_destroy(struct mkComm *comm);
mkResult_t mki_ops_preload(struct mkComm *comm);

/* ---- one call -------------------------------------------------------- */

struct mki_call {
    struct mkComm *comm;
    enum mki_op op;
    const char *func;       /* the public name, for messages */
    cudaStream_t stream;
    int prev_dev;           /* the caller's device, restored on leave */
    int capturing;          /* the stream is being captured into a graph */
    mkResult_t res;         /* the device and capture checks' verdict */
    int locked;             /* holds the device runtime's call_lock */
};

/* The handle, and a communicator already broken: errors returned at once
 * (with a GPU, checked under the device runtime's call_lock, held until
 * mki_call_leave, which records the stream's tail event: the watchdog
 * reports a dead peer only when no call is being enqueued and every tail
 * has completed, so nothing enqueued before the report writes after it).
 * Then, recorded in c->res (an op that must still meet the other ranks,
 * as a first call's shape check does, takes part before it returns it):
 * a GPU in this process, the communicator's device made current, the
 * stream's capture status (an invalidated capture is an error). */
mkResult_t mki_call_enter(mkComm_t comm, enum mki_op op, cudaStream_t stream,
                          struct mki_call *c);
/* Give the caller its device back; returns res. */
mkResult_t mki_call_leave(struct mki_call *c, mkResult_t res);
/* The communicator as a kernel of operation op sees it. */
void mki_rt_fill(const struct mkComm *comm, int op, struct mki_rt_dev *rt);
/* Launch a described kernel on the call's stream: co-residency of the
 * persistent grid (exact grids are refused when they do not fit, the
 * others shrink to what fits), the launch, the launch's error. */
mkResult_t mki_launch(struct mki_call *c, struct mki_launch_desc *d);

/* ---- the collectives' channels for fused ops (coll.c) ---------------- */

/* Across nodes: the collectives' channels as a kernel sees them, for a
 * fused op whose CTA c moves bytes on channel c (numbered by the same
 * operation sequence, kernels/rt/channel.h), and *chunk, the bytes of a
 * net block slot (the largest chunk across nodes); returns the channels
 * across nodes (0: none, e.g. one node or a heap too small for slots). */
struct mki_chan_dev;
int mki_coll_net_channels(struct mkComm *comm, struct mki_chan_dev *ch, uint64_t *chunk);

/* ---- scratch buffers of the unfused sequences (launch.c) ------------ */

/* A device buffer an op keeps between calls, grown to *have >= want.
 * Outside a capture the stream is synchronized and the old buffer freed;
 * inside one, work captured or enqueued before may still use it: it is
 * retired into r (freed with the op's state, at most MKI_OP_RETIRED
 * times) and the new one allocated with the capture mode relaxed for
 * that one call (cudaMalloc is not a stream operation). */
#define MKI_OP_RETIRED 8
struct mki_op_bufs {
    void *retired[MKI_OP_RETIRED];
    int n;
};
mkResult_t mki_op_buf(struct mki_call *k, struct mki_op_bufs *r, void **p, size_t *have,
                      size_t want, const char *what);
void mki_op_bufs_free(struct mki_op_bufs *r);

/* ---- shared argument checks (validate.c) ----------------------------- */

int mki_dtype_bytes(mkDataType_t t);   /* 0: not a type */
int mki_overlap(const void *a, size_t na, const void *b, size_t nb);
/* p (bytes long, not NULL) is device memory of the communicator's device,
 * aligned to align bytes; the error names func and the argument. */
mkResult_t mki_check_dev_ptr(struct mkComm *comm, const char *func, const char *name,
                             const void *p, size_t align);

/* The first call of a shape: every rank checks what every rank passed
 * (a bootstrap allgather of a fixed-size record), so that mismatched
 * arguments are reported on every rank instead of computed wrong; known
 * shapes (by hash) skip it.  compare() returns mkSuccess or an error
 * naming the first rank that differs. */
#define MKI_SHAPES 16
struct mki_shape_cache {
    int n;    /* shapes held */
    int next; /* the slot the next new shape takes once all are held */
    uint64_t hash[MKI_SHAPES];
};
/* Whether a shape is held; hold a new one.  A rank's hash may differ
 * from its peers' for the same call (its own row count is part of it), so
 * the slot a new shape takes must not depend on the hash: in turn, so
 * that every rank's cache holds the same shapes and every rank skips the
 * check for the same calls. */
int mki_shape_known(const struct mki_shape_cache *cache, uint64_t hash);
void mki_shape_remember(struct mki_shape_cache *cache, uint64_t hash);
typedef mkResult_t (*mki_shape_cmp)(struct mkComm *comm, const void *all, size_t rec,
                                    const void *ctx);
mkResult_t mki_agree_shape(struct mkComm *comm, struct mki_shape_cache *cache,
                           const char *func, uint64_t hash, void *records, size_t rec,
                           mkResult_t local, mki_shape_cmp compare, const void *ctx);
uint64_t mki_hash64(uint64_t h, uint64_t v);   /* FNV-1a step */
/* A hash of every rank's count (m_all of the GEMM ops; 0 for NULL). */
uint64_t mki_hash_counts(const struct mkComm *comm, const int64_t *counts);

/* ---- the GEMM ops' shared checks and steps (validate.c, launch.c) ------ */

/* dtype bf16 or fp16 (fp32: mkErrUnsupported), transB 0 or 1, sizes not
 * negative, k (what) a positive multiple of 8 and so n when transB = 0
 * (TMA row strides); *es: the element's bytes. */
mkResult_t mki_check_gemm_args(struct mkComm *comm, const char *func, mkDataType_t dtype,
                               int trans_b, int64_t m, int64_t n, int64_t k, const char *kwhat,
                               int *es);
/* Our GEMM of the unfused sequences on the call's stream, within the
 * rank's SM budget (a persistent GEMM waiting for SMs that the spinning
 * kernels of ranks sharing the GPU hold would never finish). */
mkResult_t mki_op_gemm(struct mki_call *k, void *args /* mki_gemm_args * */);
/* A heap block of at least bytes, grown in MKI_HEAP_GRAIN steps
 * (collective: every rank grows at the same call).  Outside a capture the
 * stream is synchronized and the old block freed; inside one the old block
 * stays with the heap (at most MKI_OP_RETIRED times, counted in *retired). */
mkResult_t mki_op_bank(struct mki_call *k, struct mki_heap_blk *blk, uint64_t bytes,
                       int *retired, const char *what);
/* The same, each new block zeroed (a bank of LL lines: no stale word may
 * look like a flag). */
mkResult_t mki_op_bank_zeroed(struct mki_call *k, struct mki_heap_blk *blk, uint64_t bytes,
                              int *retired, const char *what);

/* ---- internal communicators across nodes (launch.c) ------------------- */

/* The two internal communicators across nodes that the ops share
 * (comm->split, one pair per communicator: each holds a symmetric heap):
 * this node's ranks (rank = local index) and the ranks of this local index
 * (rank = node), one per node; both break with comm and name comm's
 * ranks.  Made by the first call that asks (collective: every rank takes
 * that path at the same call), outside a capture, only when every node
 * has the same size; they keep this rank's SM budget.  Otherwise *out is
 * left with NULLs (the op runs flat).  Freed with comm's ops. */
struct mki_op_split {
    int tried;
    mkComm_t node_comm, peer_comm;
};
mkResult_t mki_op_split_make(struct mki_call *k, struct mki_op_split *out);
void mki_op_split_free(struct mkComm *comm);
/* A call on an internal communicator failed: its detail becomes comm's. */
mkResult_t mki_op_sub_check(struct mkComm *comm, mkResult_t res, mkComm_t sub);

#endif /* MKI_OP_H */
