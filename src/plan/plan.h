/*
 * plan.h - the per-communicator plan: which transport reaches each peer,
 * and how one operation of one shape splits its SMs among roles.
 *
 * What the fused kernels use:
 *
 *   struct mki_op_plan p;
 *   MKI_CHECK(mki_plan_op(comm, MKI_OP_AG_GEMM, m, n, k, 2, &p));
 *   grid = p.split.compute + p.split.intra + p.split.inter_send +
 *          p.split.inter_reduce;       (== p.ctas, never above the budget)
 *   blockIdx.x in [0, compute)               -> COMPUTE
 *              in [compute, +intra)          -> INTRA   (p.mover moves)
 *              then inter_send, inter_reduce -> INTER_SEND / INTER_REDUCE
 *   chunks of p.chunk_rows rows (p.chunk_bytes bytes; whole 128-row tiles
 *   for GEMM ops) are the unit of signalling; a collective over a flat
 *   buffer (count elements per rank: m = nranks, n = count) uses
 *   p.chunk_bytes (4 KiB-aligned; chunk_rows is then 0); p.fused == 0 means "run the unfused sequence of our own
 *   kernels" (p.reason says why): the GEMM on p.sm_budget SMs, then the
 *   collective as planned by mki_plan_op(comm, MKI_OP_ALLGATHER (of A,
 *   m x k), MKI_OP_REDUCESCATTER or MKI_OP_ALLREDUCE (m x n), ...).
 *
 * Shapes (M, N, K are global sizes, as in REFERENCE.md's tables):
 *   allgather      output M x N; rank r contributes rows [r*M/P, (r+1)*M/P)
 *   reducescatter  input M x N on every rank; rank r owns M/P rows of the sum
 *   allreduce      M x N on every rank
 *   alltoall       M x N on every rank; M/P rows go to each rank
 *   ag_gemm        C[M x N] = allgather(A)[M x K] * B[K x N]; A sharded by rows
 *   gemm_rs        C = reducescatter(A[M x K/P] * B[K/P x N]); K sharded
 *   gemm_ar        C = allreduce(A[M x K/P] * B[K/P x N]); K sharded
 * (k is ignored by the collectives).  Cross-rank partial sums travel as
 * fp32 (DESIGN §3: one rounding at the owner).
 *
 * Every rank of a communicator gets the same plan for the same call: the
 * model reads only communicator-wide facts (the least SM budget of any
 * rank, the slowest path inside any node, the largest node, the slowest
 * rank's NICs), so CTA counts and chunk sizes agree across ranks.
 *
 * The cost model's constants live in one table, mki_model_default, in
 * plan.c; calibration replaces that table and nothing else.
 */
#ifndef MKI_PLAN_H
#define MKI_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "mkernel.h"

struct mkComm;

enum mki_op {
    MKI_OP_ALLGATHER,
    MKI_OP_REDUCESCATTER,
    MKI_OP_ALLREDUCE,
    MKI_OP_ALLTOALL,
    MKI_OP_AG_GEMM,
    MKI_OP_GEMM_RS,
    MKI_OP_GEMM_AR,
    MKI_OP_COUNT
};

/* How bytes move between GPUs of one node. */
enum mki_mover {
    MKI_MOVER_NONE,   /* nothing moves inside the node */
    MKI_MOVER_CE,     /* copy engine, triggered by a flag the kernel writes */
    MKI_MOVER_TMA,    /* cp.async.bulk, one thread per CTA */
    MKI_MOVER_REG,    /* register loads/stores (combine on the way) */
    MKI_MOVER_COUNT
};

/* How a peer is reached (the path), whatever transport carries it. */
enum mki_path {
    MKI_PATH_SELF,
    MKI_PATH_SAME_GPU, /* another process on this GPU (MPS): CUDA IPC   */
    MKI_PATH_NVLINK,   /* peer access over NVLink: CUDA IPC              */
    MKI_PATH_PCIE,     /* peer access over PCIe: CUDA IPC                */
    MKI_PATH_HOST,     /* same node, no peer access: staged through host */
    MKI_PATH_NET,      /* another (virtual) node: an inter-node transport */
    MKI_PATH_COUNT
};

enum mki_transport {
    MKI_TR_IBVERBS,
    MKI_TR_EFA,
    MKI_TR_SOCKET,
    MKI_TR_COUNT
};

struct mki_split {
    int compute, intra, inter_send, inter_reduce;
};

struct mki_op_plan {
    enum mki_op op;
    int64_t m, n, k;
    int dtype_bytes;
    int ctas;                  /* sum of split: the persistent grid */
    int sm_budget;             /* SMs this rank may use (unfused: all) */
    struct mki_split split;
    enum mki_mover mover;
    size_t chunk_bytes;        /* bytes of one signalled chunk */
    int64_t chunk_rows;        /* whole rows in a chunk (GEMM: tiles of rows;
                                  collectives: 0 when a row is larger) */
    int fused;                 /* 1: fused kernel; 0: unfused sequence */
    unsigned overridden;       /* MKI_OVR_* bits taken from MK_SM_SPLIT */
    /* The model's view, for mkinfo and for calibration. */
    double flops;              /* per rank */
    int64_t intra_bytes;       /* per rank, moved inside the node */
    int64_t inter_bytes;       /* per rank, through the NIC(s) */
    double t_compute_us, t_intra_us, t_inter_us;
    double t_fused_us, t_unfused_us;
    char reason[192];
};

/* Bits of struct mki_split_ovr.set / mki_op_plan.overridden. */
#define MKI_OVR_COMPUTE (1u << 0)
#define MKI_OVR_INTRA (1u << 1)
#define MKI_OVR_INTER_SEND (1u << 2)
#define MKI_OVR_INTER_REDUCE (1u << 3)
#define MKI_OVR_MOVER (1u << 4)
#define MKI_OVR_CHUNK (1u << 5)
#define MKI_OVR_FUSED (1u << 6)

/* MK_SM_SPLIT / config->smSplit, parsed: one entry per op. */
struct mki_split_ovr {
    unsigned set;
    struct mki_split split;
    enum mki_mover mover;
    size_t chunk;
    int fused;
};

/* What the model needs to know about a communicator (the same on every
 * rank). */
struct mki_plan_ctx {
    int nranks, local_size, nnodes;  /* local_size: the largest node */
    int sm_count;              /* SMs of the smallest GPU */
    int sm_budget;             /* SMs every rank may use (the least) */
    enum mki_path intra_path;  /* slowest path between two ranks of a node */
    int nvlinks;               /* NVLinks of that path (0 unless NVLINK) */
    int nics;                  /* NICs per rank (0: socket transport) */
    double nic_gbs;            /* one NIC's rate for one rank, GB/s */
    size_t workspace;
};

/* The cost model's constants (REFERENCE.md), in one place. */
struct mki_model {
    int sm_count;              /* SMs when the device does not say */
    double gemm_tflops;        /* dense bf16 GEMM on the whole GPU */
    int tile_m, tile_n;        /* GEMM tile of one CTA */
    double nvlink_link_gbs;    /* one NVLink, one direction */
    int nvlink_ref_links;      /* links behind the *_sat figures (NV18) */
    double tma_cta_gbs, tma_sat_gbs;
    double reg_cta_gbs, reg_sat_gbs;
    double ce_gbs;             /* copy engine over NV18 */
    double pcie_gbs;           /* GPU-GPU peer copies over PCIe */
    double host_gbs;           /* staged through host memory */
    double same_gpu_gbs;       /* device-local copy (MPS peers) */
    double local_cta_gbs;      /* one CTA copying inside the device */
    double reduce_cta_gbs;     /* one CTA adding fp32 partials */
    double ib_nic_gbs;         /* ConnectX-7 400 Gb/s */
    double efa_nic_gbs;        /* one 200 Gb/s EFA device */
    double socket_gbs;         /* TCP fallback */
    int inter_send_per_nic;    /* FIFO producer CTAs per NIC */
    double fused_overhead_us;  /* launch, first signal, last ack */
    double launch_us;          /* one more kernel in the unfused sequence */
    double gemm_interference;  /* compute slowdown beside transfers */
    double fuse_margin;        /* fused must win by this fraction */
    int partial_bytes;         /* cross-rank partial sums travel as fp32 */
    size_t chunk_min, chunk_max;
    int chunks_per_shard;      /* pipeline depth of one shard */
};

extern const struct mki_model mki_model_default;

/* ---- names -------------------------------------------------------- */
const char *mki_op_name(enum mki_op op);
int mki_op_from_name(const char *name);          /* -1 when unknown */
const char *mki_mover_name(enum mki_mover m);
const char *mki_path_name(enum mki_path p);
const char *mki_transport_name(enum mki_transport t);

/* ---- parsers (syntax only; comm creation calls them through config) */
/* "ibverbs,socket", "^efa": the ordered transports to try.  what names
 * the source in messages ("MK_TRANSPORT", "config->transports"). */
mkResult_t mki_transport_list(const char *list, const char *what,
                              enum mki_transport order[MKI_TR_COUNT],
                              int *count);
/* "[op:]key=value,...", keys compute, intra, inter_send, inter_reduce,
 * mover (ce|tma|reg), chunk (size), fused (0|1). */
mkResult_t mki_split_parse(const char *spec, const char *what,
                           struct mki_split_ovr ovr[MKI_OP_COUNT]);

/* ---- the model (pure; what the tests and mkinfo call) -------------- */
mkResult_t mki_plan_model(const struct mki_model *model,
                          const struct mki_plan_ctx *ctx,
                          const struct mki_split_ovr *ovr, enum mki_op op,
                          int64_t m, int64_t n, int64_t k, int dtype_bytes,
                          struct mki_op_plan *out);

/* ---- per communicator ---------------------------------------------- */
/* Build comm->plan from comm->topo (transport per peer, SM budget, the
 * parsed MK_SM_SPLIT); called by comm creation after the topology. */
mkResult_t mki_plan_setup(struct mkComm *comm);
void mki_plan_free(struct mkComm *comm);

/* The plan of one call; cached per (op, shape, dtype).  Errors name the
 * argument (bad op, sizes < 1, dtype_bytes not 2 or 4). */
mkResult_t mki_plan_op(struct mkComm *comm, enum mki_op op, int64_t m,
                       int64_t n, int64_t k, int dtype_bytes,
                       struct mki_op_plan *out);

/* The plain collectives' kernel (kernels/collectives.cu): CTAs and mover
 * for one call, from measurements rather than the cost model above (the
 * model's per-CTA rates describe the fused kernels' roles, not the
 * workspace pipeline; bench/NOTES.md has the runs).  block: bytes of one
 * peer block; oneshot: all-reduce in one phase; nnodes: nodes of the
 * communicator; budget: CTAs the node's ranks may all use.  The same
 * inputs give the same answer on every rank. */
enum mki_coll_pick_mover { MKI_COLL_PICK_TMA_SEND, MKI_COLL_PICK_REG };
int mki_plan_coll_ctas(uint64_t block, int oneshot, int nnodes, int budget);
enum mki_coll_pick_mover mki_plan_coll_mover(uint64_t block, int zero_copy);
int mki_plan_coll_oneshot(uint64_t bytes, uint64_t limit, int nranks);

/* How this rank reaches peer (path and, for MKI_PATH_NET, transport). */
enum mki_path mki_plan_path(const struct mkComm *comm, int peer);
enum mki_transport mki_plan_transport(const struct mkComm *comm, int peer);
const struct mki_plan_ctx *mki_plan_context(const struct mkComm *comm);

/* Text for mkinfo and mkCommGetInfo (appended to *buf; see print.c). */
struct mki_strbuf;
void mki_plan_print(struct mki_strbuf *sb, const struct mki_plan_ctx *ctx,
                    const struct mki_op_plan *p);

#endif /* MKI_PLAN_H */
