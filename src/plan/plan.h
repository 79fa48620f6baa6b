/*
 * plan.h - the per-communicator plan (src/plan/): which transport reaches
 * each peer, and, per operation and shape, what its kernel runs: CTAs,
 * roles, movers, chunks, fused or not.  What the plan decides is what
 * runs; mkinfo and mkCommGetInfo print it.
 *
 *   model.c  the cost model of the fused ops (pure: tests and mkinfo)
 *   model_table.c  its constants (mki_model_default)
 *   model_moe.c  the MoE calls' kernels and roles
 *   coll.c   the plain collectives' measured rules (pure, and per call)
 *   parse.c  MK_TRANSPORT and MK_SM_SPLIT (and a split against the SMs)
 *   setup.c  a communicator's facts, transports, SM budget; plan cache
 *   print.c  the communicator and its plans as text; mkCommGetInfo
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
 *   ring_attn      one batch element of mkRingAttention: M = seq_local
 *                  (rows per rank), N = heads x head_dim (a row of q),
 *                  K = kv_heads x head_dim (a row of k); head_dim and the
 *                  mask through struct mki_plan_attn (none: 128, full);
 *                  FLOPs 4 M (P M) N per rank without a mask, half with
 *                  the zigzag mask, (P - 1/2) / P on the busiest rank with
 *                  the plain causal one; batch scales every time alike
 * (k is ignored by the collectives).  Cross-rank partial sums travel as
 * fp32 (DESIGN §3: one rounding at the owner).
 *
 * Every rank of a communicator gets the same plan for the same call: the
 * model reads only communicator-wide facts (the least SM budget of any
 * rank, the slowest path inside any node, the largest node, the slowest
 * rank's NICs), so CTA counts and chunk sizes agree across ranks.
 *
 * The cost model's constants live in one table, mki_model_default, in
 * model_table.c; calibration replaces that table and nothing else.
 */
#ifndef MKI_PLAN_H
#define MKI_PLAN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "mkernel.h"
#include "mki.h"
#include "ops/coll.h"
#include "topology/topo.h"

struct mkComm;

/* How bytes move between GPUs of one node. */
enum mki_mover {
    MKI_MOVER_NONE,   /* nothing moves inside the node */
    MKI_MOVER_CE,     /* copy engine, triggered by a flag the kernel writes */
    MKI_MOVER_TMA,    /* cp.async.bulk, one thread per CTA */
    MKI_MOVER_REG,    /* register loads/stores (combine on the way) */
    MKI_MOVER_COUNT
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

/* The plan of one call of a plain collective (kernels/ops/coll.cu). */
struct mki_coll_plan {
    int nch;                   /* CTAs = channels */
    int mover;                 /* enum mki_coll_mover */
    int oneshot;               /* all-reduce in one phase */
    int direct;                /* zero copy into registered recvbufs */
    int ll;                    /* LL lines instead of the slots (channel.h) */
    int peer_major;            /* all-gather / all-to-all through the slots
                                * by TMA, one node, > 2 ranks: every chunk
                                * to one peer before the next (coll.cu);
                                * the two-phase all-reduce and
                                * reduce-scatter there too when a
                                * channel's part is at most MKI_NSLOTS /
                                * one chunk(s) */
    int pipelined;             /* reduce-scatter (> 2 ranks) and two-phase
                                * all-reduce by TMA on one node: a chunk's
                                * arrive counter raised once the next
                                * chunk's first piece is stored, not after
                                * a drain (kernels/rt/copy.cuh) */
    int stagger;               /* two-phase all-reduce by TMA on one node
                                * of 2 ranks, parts of one chunk: the
                                * second half of the channels starts its
                                * first phase when the first half has sent
                                * its own (kernels/rt/channel.h, go) */
    int hier;                  /* across nodes in steps: all-reduce as
                                * reduce-scatter in the node, all-reduce of
                                * the share across nodes, all-gather in the
                                * node; all-gather and reduce-scatter across
                                * the nodes and inside the node, with a
                                * strided copy (the fields above: the flat
                                * kernel's) */
    uint64_t chunk;            /* bytes of a chunk (what one slot holds) */
    uint64_t block;            /* bytes of one peer block */
    struct mki_roles roles;    /* threads of each role, in the kernel's order */
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
    int decode;                /* GEMM+RS/AR: the decode-sized kernel (fused) */
    int wide_movers;           /* GEMM+RS, engine kernel: the movers keep two rows
                                  in flight (where the link binds, 3+ ranks) */
    unsigned overridden;       /* MKI_OVR_* bits taken from MK_SM_SPLIT */
    int ce_streams;            /* mkAllGatherGemm: copy-engine streams per peer */
    struct mki_coll_plan coll; /* a plain collective: what its kernel runs */
    /* The model's view, for mkinfo and for calibration. */
    int head_dim, mask;        /* ring_attn: those planned for (mkAttnMask_t) */
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
    int gpu_share;             /* most ranks on one GPU (MPS; 0 or 1: none) */
    uint64_t hier_min;         /* MK_COLL_HIER_MIN: collectives across nodes in
                                * steps from these bytes (0: always flat) */
};

/* The cost model's constants (REFERENCE.md), in one place. */
struct mki_model {
    int sm_count;              /* SMs when the device does not say */
    double gemm_tflops;        /* dense bf16 GEMM on the whole GPU */
    double attn_tflops[2];     /* attention forward (bf16/fp16), no mask, on
                                * the whole GPU: [0] head_dim 64, [1] 128 */
    double attn_causal[2];     /* a causal mask's rate per FLOP computed over
                                * the unmasked rate, long sequences (uneven
                                * tiles), by head_dim as above */
    double attn_diag[2];       /* and the blocks the mask cuts: that rate
                                * over 1 + attn_diag / keys (keys attended
                                * by the busiest rank's queries) */
    int tile_m, tile_n;        /* GEMM tile of one CTA */
    double nvlink_link_gbs;    /* one NVLink, one direction */
    int nvlink_ref_links;      /* links behind the *_sat figures (NV18) */
    double tma_cta_gbs, tma_sat_gbs;
    double reg_cta_gbs, reg_sat_gbs;
    double ce_gbs;             /* copy engine over NV18 */
    double coll_sat_gbs;       /* the plain collectives' slot pipeline (kernels/ops/coll.cu),
                                * two peers over NV18, either mover */
    double coll_chunk_gbs;     /* its first chunk per CTA, which nothing overlaps */
    size_t coll_chunk_bytes;   /* that chunk: the workspace's slot */
    double pcie_gbs;           /* GPU-GPU peer copies over PCIe */
    double host_gbs;           /* staged through host memory */
    double same_gpu_gbs;       /* device-local copy (MPS peers) */
    double local_cta_gbs;      /* one CTA copying inside the device */
    double reduce_cta_gbs;     /* one CTA adding fp32 partials */
    double ib_nic_gbs;         /* ConnectX-7 400 Gb/s */
    double efa_nic_gbs;        /* one 200 Gb/s EFA device */
    double socket_gbs;         /* TCP fallback */
    int inter_send_per_nic;    /* FIFO producer CTAs per NIC */
    double peer_latency_us;    /* per call and peer of the node: handshakes */
    double link_share_loss;    /* rate lost to peers sharing a GPU's links:
                                * eff = 1 - loss (1 - 2 / ranks of the node) */
    double fused_overhead_us;  /* launch, first signal, last ack */
    double epi_overhead_us;    /* the same when the epilogues move the bytes */
    double epi_own_us;         /* GEMM+RS/AR: an own tile's combine, per source */
    double epi_peer_us;        /* GEMM+RS/AR: a peer tile's fp32 store into the outbox */
    double epi_link_eff;       /* GEMM+RS/AR: of the link's rate, what the mover warps reach
                                * beside the GEMM where the link is the bound */
    double epi_link_eff_wide;  /* the same with two rows in flight (wide_movers) */
    double launch_us;          /* one more kernel in the unfused sequence */
    double hbm_read_gbs;       /* HBM read by every SM at once (a GEMM bound by B) */
    double moe_send_gbs;       /* mkMoEDispatch: the rows that cross, per rank, once a token */
    double moe_dispatch_us;    /* and its count, records and handshakes, beyond the common fixed
                                * cost */
    double moe_pull_gbs;       /* mkMoECombine: every slot's row pulled (local or remote) */
    double moe_combine_us;     /* and its fixed cost beyond the common one */
    double moe_sum_gbs;        /* the layer's combine on one node: every slot's row read
                                * from its own stage (the down projection pushed them) */
    double moe_gemm_eff;       /* the MoE calls' grouped GEMMs over gemm_tflops, on their
                                * tiles (power-capped clocks, the groups' order) */
    double decode_mma_eff;     /* the decode kernel's MMA rate over gemm_tflops (one
                                * warpgroup per SM, the m rows as wgmma's N) */
    double gemm_interference;  /* compute slowdown beside transfers */
    double fuse_margin;        /* fused must win by this fraction */
    int partial_bytes;         /* cross-rank partial sums travel as fp32 */
    size_t chunk_min, chunk_max;
    int chunks_per_shard;      /* pipeline depth of one shard */
};

extern const struct mki_model mki_model_default;

/* ---- names (the ops' names: src/core/mki.h) ----------------------- */
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
/* What the attention plan needs beyond its shape: head_dim (64 or 128)
 * and the mask (mkAttnMask_t).  NULL: 128, mkAttnFull. */
struct mki_plan_attn {
    int head_dim, mask;
};
/* What the model of mkMoEDispatchGemm's and the layer's GEMMs needs beyond
 * (tokens, hidden, top-k): the experts and the first GEMM's columns (the
 * dispatch + GEMM's N; the layer's 2 x inter).  Without it their plan has
 * no GEMM time. */
struct mki_plan_moe_shape {
    int64_t experts, gemm_n;
};
/* mki_plan_model with that (op moe_dispatch_gemm or moe_layer, one node):
 * the grouped GEMMs' time from the tiles of uniform routing's groups
 * (each expert's rows at their mean, a half tile more for its partial
 * last one) at moe_gemm_eff of the GEMM rate; the layer's combine after
 * them (mkMoECombine's model). */
mkResult_t mki_plan_model_moe(const struct mki_model *model, const struct mki_plan_ctx *ctx,
                              const struct mki_split_ovr *ovr, enum mki_op op, int64_t m,
                              int64_t n, int64_t k, int dtype_bytes,
                              const struct mki_plan_moe_shape *moe, struct mki_op_plan *out);
/* The model's attention rate (TFLOP/s on a whole GPU, per FLOP computed)
 * at head_dim (64, else 128) and mask (mkAttnMask_t; 0: none). */
double mki_model_attn_rate(const struct mki_model *model, int head_dim, int mask,
                           double keys);
/* The MoE calls' split, kernel and reason in *p (model_moe.c), after the
 * cost model filled its times and bytes, and on one node mkMoEDispatch's
 * and mkMoECombine's times from their kernels' measured rates; budget:
 * the rank's SMs. */
void mki_plan_moe(const struct mki_model *model, const struct mki_plan_ctx *ctx,
                  const struct mki_split_ovr *ovr, enum mki_op op, int budget,
                  struct mki_op_plan *p);
/* mki_plan_model with attn (ring_attn only; NULL elsewhere). */
mkResult_t mki_plan_model_attn(const struct mki_model *model,
                               const struct mki_plan_ctx *ctx,
                               const struct mki_split_ovr *ovr, enum mki_op op,
                               int64_t m, int64_t n, int64_t k, int dtype_bytes,
                               const struct mki_plan_attn *attn, struct mki_op_plan *out);

/* ---- per communicator ---------------------------------------------- */

#define MKI_PLAN_CACHE 32
struct mki_plan {
    struct mki_plan_ctx ctx;
    struct mki_split_ovr ovr[MKI_OP_COUNT];
    enum mki_transport *tr;    /* per rank (MKI_PATH_NET peers) */
    int coll_mover;            /* MK_COLL_MOVER as enum mki_coll_mover, -1: unset */
    pthread_mutex_t lock;
    int ncache, next;
    struct mki_op_plan cache[MKI_PLAN_CACHE];
};

/* Build comm->plan from comm->topo (transport per peer, SM budget, the
 * parsed MK_SM_SPLIT); called by comm creation after the topology. */
mkResult_t mki_plan_setup(struct mkComm *comm);
void mki_plan_free(struct mkComm *comm);

/* What runs for a plan of the model (mki_plan_model): the collectives'
 * kernel (their measured rules), mkAllGatherGemm's grid and copy streams;
 * for a context and parameters (mkinfo) or, through mki_plan_op, for a
 * communicator. */
mkResult_t mki_plan_runs(const struct mki_plan_ctx *c, const struct mki_params *pr,
                         int coll_mover, int registered, struct mki_op_plan *p);
/* The plan of one call; cached per (op, shape, dtype; ring_attn: head_dim
 * and mask too).  Errors name the argument (bad op, sizes < 1, dtype_bytes
 * not 2 or 4, head_dim not 64 or 128, an unknown mask). */
mkResult_t mki_plan_op(struct mkComm *comm, enum mki_op op, int64_t m,
                       int64_t n, int64_t k, int dtype_bytes,
                       struct mki_op_plan *out);
mkResult_t mki_plan_op_attn(struct mkComm *comm, enum mki_op op, int64_t m, int64_t n,
                            int64_t k, int dtype_bytes, const struct mki_plan_attn *attn,
                            struct mki_op_plan *out);

/* ---- the plain collectives (coll.c) --------------------------------- */
/* Measured rules.  block: bytes of one peer block; oneshot: all-reduce in
 * one phase; nnodes: nodes of the communicator; budget: CTAs every rank
 * may use.  The same inputs give the same answer on every rank. */
int mki_plan_coll_ctas(enum mki_op op, uint64_t block, int oneshot, int nranks, int nnodes,
                       int budget);
enum mki_coll_mover mki_plan_coll_mover(enum mki_op op, uint64_t block, int zero_copy,
                                        int nranks, int nnodes);
int mki_plan_coll_oneshot(uint64_t bytes, uint64_t limit, int nranks);

/* What a collective's plan depends on. */
struct mki_coll_in {
    enum mki_op op;
    uint64_t count;            /* elements, as in the public call */
    int esize;
    int nranks, nnodes;
    int local_size;            /* ranks of the largest node */
    int budget;                /* CTAs every rank may use */
    int maxch;                 /* channels the slots have (0: MKI_MAXCH) */
    uint64_t slot_bytes;       /* bytes a slot holds */
    int registered;            /* the communicator has registered buffers */
    int ctas;                  /* MK_COLL_CTAS (0: the rule's) */
    int mover;                 /* MK_COLL_MOVER (-1: the rule's) */
    uint64_t oneshot_limit;    /* MK_COLL_AR_ONESHOT */
    uint64_t zcopy_min;        /* MK_COLL_ZCOPY_MIN (0: never) */
    uint64_t hier_min;         /* MK_COLL_HIER_MIN (0: never) */
    uint64_t ll_max;           /* MK_COLL_LL_MAX (0: never) */
};
/* Whether a collective of count elements goes hierarchically (see
 * mki_coll_plan.hier): across nodes that all have local_size ranks, more
 * than one per node, from hier_min bytes of the whole buffer; all-reduce
 * with at least one element per rank of a node. */
int mki_plan_coll_hier(enum mki_op op, uint64_t count, int esize, int nranks, int nnodes,
                       int local_size, uint64_t hier_min);
/* LL for a block of `block` bytes: the channels it takes, 0 for none
 * (cap: the CTAs the call may use). */
int mki_plan_coll_ll(enum mki_op op, int oneshot, uint64_t block, int nnodes, int nranks,
                     uint64_t ll_max, int cap);
void mki_plan_coll_model(const struct mki_coll_in *in, struct mki_coll_plan *out);
/* The slots every rank gives the collectives (bytes a slot holds, the
 * same on every rank) and the channels across nodes (the net block's). */
void mki_plan_coll_slots(const struct mki_plan_ctx *c, uint64_t *slot_bytes, int *net_ch);
/* The plan of one call of a collective: on comm, or for a context and
 * parameters (mkinfo; mover: MK_COLL_MOVER parsed, -1 unset). */
mkResult_t mki_plan_coll(struct mkComm *comm, enum mki_op op, uint64_t count, int esize,
                         struct mki_coll_plan *out);
mkResult_t mki_plan_coll_ctx(const struct mki_plan_ctx *c, const struct mki_params *pr,
                             int mover, int registered, enum mki_op op, uint64_t count,
                             int esize, struct mki_coll_plan *out);
mkResult_t mki_plan_coll_mover_param(const char *value, int set, int *mover);

/* How this rank reaches peer (path and, for MKI_PATH_NET, transport). */
enum mki_path mki_plan_path(const struct mkComm *comm, int peer);
enum mki_transport mki_plan_transport(const struct mkComm *comm, int peer);
const struct mki_plan_ctx *mki_plan_context(const struct mkComm *comm);

/* ---- text (print.c) -------------------------------------------------- */
void mki_plan_print(struct mki_strbuf *sb, const struct mki_plan_ctx *ctx,
                    const struct mki_op_plan *p);
void mki_plan_print_comm(struct mki_strbuf *sb, const struct mkComm *comm);
/* The plan context of a hypothetical communicator of ranks_per_node ranks
 * per node (one per GPU of h, or 132-SM NVLink GPUs when h has none) on
 * nnodes nodes (mkinfo --op without --comm). */
void mki_plan_ctx_from_host(const struct mki_host_topo *h, int ranks_per_node,
                            int nnodes, struct mki_plan_ctx *ctx);

/* ---- helpers shared between the plan's files ---------------------------- */
unsigned mki_plan_movers(enum mki_op op);   /* bit per enum mki_mover it may use */
/* What a rank gets of one NIC (its kinds: bits of enum mki_nic_kind) for
 * the share of it that its GPU has. */
double mki_plan_nic_gbs(unsigned nic_kinds, double share);
/* A user split (MK_SM_SPLIT) must fit the rank's SMs. */
mkResult_t mki_plan_check_ovr(const struct mki_split_ovr *o, enum mki_op op, int budget);
int mki_op_has_gemm(enum mki_op op);

#endif /* MKI_PLAN_H */
