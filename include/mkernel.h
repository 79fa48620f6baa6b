/*
 * mkernel.h - the public API of libmkernel.
 *
 * Fused, persistent, multi-GPU and multi-node CUDA kernels behind an
 * MPI-style communicator API.  C99; the only outside types used are CUDA
 * runtime types, and only by calls that take a stream.
 *
 * Conventions:
 *   - every call returns an mkResult_t; output parameters come last and are
 *     written only on success;
 *   - after a failure, mkGetLastError(comm) (or mkGetLastError(NULL) for
 *     calls that have no communicator yet) says which argument or peer was
 *     at fault and what to do;
 *   - no call terminates the process.
 */
#ifndef MKERNEL_H
#define MKERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h> /* cudaStream_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(MK_NO_VISIBILITY)
#define MK_API __attribute__((visibility("default")))
#else
#define MK_API
#endif

/* ------------------------------------------------------------------ */
/* Versions                                                            */
/* ------------------------------------------------------------------ */
#define MK_VERSION_MAJOR 0
#define MK_VERSION_MINOR 1
#define MK_VERSION_PATCH 0
#define MK_VERSION(maj, min, pat) ((maj) * 10000 + (min) * 100 + (pat))
#define MK_VERSION_CODE \
    MK_VERSION(MK_VERSION_MAJOR, MK_VERSION_MINOR, MK_VERSION_PATCH)


/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */
typedef enum {
    mkSuccess = 0,
    mkErrInvalidArgument = 1, /* a bad argument; nothing was changed      */
    mkErrUnsupported = 2,     /* valid but not supported (dtype, arch...) */
    mkErrInvalidUsage = 3,    /* calls in the wrong order or state        */
    mkErrCuda = 4,            /* a CUDA call failed                       */
    mkErrSystem = 5,          /* a system call failed (errno in message)  */
    mkErrBootstrap = 6,       /* launcher / rendezvous failure            */
    mkErrTransport = 7,       /* network transport failure                */
    mkErrTimeout = 8,         /* a wait passed its deadline (MK_TIMEOUT_MS) */
    mkErrRemote = 9,          /* a peer failed or aborted                 */
    mkErrNoMemory = 10,       /* host or device allocation failed         */
    mkErrInternal = 11,       /* a bug in mkernel: please report it       */
    mkNumResults = 12
} mkResult_t;

/* The version of the library actually loaded (compare with
 * MK_VERSION_CODE, the version the caller was compiled against). */
MK_API mkResult_t mkGetVersion(int *version);

/* A static string naming the result; never NULL. */
MK_API const char *mkGetErrorString(mkResult_t result);

struct mkComm;
typedef struct mkComm *mkComm_t;

/* The detail of the last failure on this communicator (or, with comm ==
 * NULL, of the last failure in this thread of a call that had no usable
 * communicator, such as mkCommInit).  Never NULL; "" when none. */
MK_API const char *mkGetLastError(mkComm_t comm);

/* ------------------------------------------------------------------ */
/* Configuration                                                       */
/* ------------------------------------------------------------------ */
#define MK_CONFIG_MAGIC 0x6d6b6366u /* "mkcf" */
#define MK_CONFIG_UNDEF_INT INT32_MIN
#define MK_CONFIG_UNDEF_PTR NULL
#define MK_CONFIG_UNDEF_SIZE ((size_t)0)

/*
 * Communicator configuration.  Always start from MK_CONFIG_INITIALIZER and
 * set only the fields you need; an undefined field takes its MK_*
 * environment variable or the built-in default.  The first three fields
 * let a newer library accept a config compiled against an older header.
 */
typedef struct mkConfig_v1 {
    size_t size;           /* sizeof(mkConfig_t) at compile time       */
    unsigned int magic;    /* MK_CONFIG_MAGIC                          */
    unsigned int version;  /* MK_VERSION_CODE at compile time          */
    int cudaDev;           /* CUDA device; default: local rank % #GPUs */
    int timeoutMs;         /* deadline of every wait (MK_TIMEOUT_MS)   */
    const char *transports;/* allow-list, e.g. "socket" (MK_TRANSPORT) */
    int smBudget;          /* SMs this rank may use (MK_SM_BUDGET)     */
    size_t workspaceSize;  /* symmetric workspace bytes (MK_WORKSPACE_SIZE); 0: by the node */
    int nodeSize;          /* virtual node size (MK_NODE_SIZE)         */
    const char *smSplit;   /* SM split override (MK_SM_SPLIT)          */
} mkConfig_t;

#define MK_CONFIG_INITIALIZER                                             \
    {                                                                     \
        sizeof(mkConfig_t), MK_CONFIG_MAGIC, MK_VERSION_CODE,             \
            MK_CONFIG_UNDEF_INT, MK_CONFIG_UNDEF_INT, MK_CONFIG_UNDEF_PTR, \
            MK_CONFIG_UNDEF_INT, MK_CONFIG_UNDEF_SIZE, MK_CONFIG_UNDEF_INT, \
            MK_CONFIG_UNDEF_PTR                                           \
    }

/* ------------------------------------------------------------------ */
/* Communicators                                                       */
/* ------------------------------------------------------------------ */
#define MK_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[MK_UNIQUE_ID_BYTES];
} mkUniqueId;

/* Whole-job communicator from the launcher (PMIx: srun, mpirun, prterun).
 * Without a launcher: a communicator of size 1.  config may be NULL. */
MK_API mkResult_t mkCommInit(mkComm_t *comm, const mkConfig_t *config);

/* For programs that bring their own MPI: one rank calls mkGetUniqueId,
 * broadcasts the id (MPI_Bcast of sizeof(mkUniqueId) bytes), then every
 * rank calls mkCommInitRank. */
MK_API mkResult_t mkGetUniqueId(mkUniqueId *uniqueId);
MK_API mkResult_t mkCommInitRank(mkComm_t *comm, int nranks,
                                 mkUniqueId uniqueId, int rank,
                                 const mkConfig_t *config);

/* Collective over comm: ranks with the same color form a new
 * communicator, ordered by key then by rank in comm.  color ==
 * MK_SPLIT_NOCOLOR gives *newcomm = NULL. */
#define MK_SPLIT_NOCOLOR (-1)
MK_API mkResult_t mkCommSplit(mkComm_t comm, int color, int key,
                              mkComm_t *newcomm, const mkConfig_t *config);

/* Release the communicator.  Local: call it after all work on the
 * communicator has completed on every rank. */
MK_API mkResult_t mkCommDestroy(mkComm_t comm);

/* Tear down at once, without waiting for peers; peers waiting on this rank
 * fail with mkErrRemote or mkErrTimeout. */
MK_API mkResult_t mkCommAbort(mkComm_t comm);

/* mkSuccess in *asyncError while the communicator is healthy; otherwise the
 * error that broke it (details in mkGetLastError). */
MK_API mkResult_t mkCommGetAsyncError(mkComm_t comm, mkResult_t *asyncError);

MK_API mkResult_t mkCommRank(mkComm_t comm, int *rank);
MK_API mkResult_t mkCommSize(mkComm_t comm, int *size);
MK_API mkResult_t mkCommLocalRank(mkComm_t comm, int *localRank);
MK_API mkResult_t mkCommLocalSize(mkComm_t comm, int *localSize);
MK_API mkResult_t mkCommNodeCount(mkComm_t comm, int *nodeCount);
/* The CUDA device of this rank, or -1 when the process has no GPU. */
MK_API mkResult_t mkCommCuDevice(mkComm_t comm, int *device);

/* ------------------------------------------------------------------ */
/* Device memory and collectives                                       */
/* ------------------------------------------------------------------ */
/* Element types of collectives.  Sums accumulate in fp32 and round once. */
typedef enum {
    mkBfloat16 = 0,
    mkFloat16 = 1,
    mkFloat32 = 2,
    mkNumDataTypes = 3
} mkDataType_t;

/* Registered memory, collective: every rank makes the same sequence of
 * these four calls (sizes may differ), and the ranks of a node map each
 * other's buffers.  mkAllGather and mkAllToAll then write straight into a
 * registered recvbuf (zero copy, MK_COLL_ZCOPY_MIN).  mkMemAlloc allocates
 * device memory of the communicator's GPU; mkMemFree releases only what
 * mkMemAlloc returned (NULL: nothing, not collective). */
MK_API mkResult_t mkMemAlloc(mkComm_t comm, size_t size, void **ptr);
MK_API mkResult_t mkMemFree(mkComm_t comm, void *ptr);
/* Register a cudaMalloc'ed buffer of the communicator's device; *handle is
 * what mkCommDeregister takes (after which the caller may free it). */
MK_API mkResult_t mkCommRegister(mkComm_t comm, void *buf, size_t size,
                                 void **handle);
MK_API mkResult_t mkCommDeregister(mkComm_t comm, void *handle);

/*
 * Collectives among the ranks of comm, enqueued on stream (asynchronous,
 * stream-ordered, capturable in a CUDA graph).  Buffers are device memory
 * of the communicator's GPU, aligned to the element size; count is in
 * elements and need not be a multiple of anything:
 *   mkAllGather      sendbuf: count; recvbuf: nranks * count (rank r's
 *                    data at r * count); in place when sendbuf ==
 *                    recvbuf + rank * count.
 *   mkReduceScatter  sendbuf: nranks * count; recvbuf: count (the sum of
 *                    every rank's block `rank`); in place when recvbuf ==
 *                    sendbuf + rank * count.
 *   mkAllReduce      sendbuf, recvbuf: count (the sum); in place when
 *                    sendbuf == recvbuf.
 *   mkAllToAll       sendbuf, recvbuf: nranks * count; block q of sendbuf
 *                    goes to rank q, which stores it as its block `rank`;
 *                    never in place.
 * Calls on one communicator must be ordered (one stream, or streams
 * ordered by events).  A peer that does not arrive within MK_TIMEOUT_MS
 * makes the call fail on the device; mkCommGetAsyncError then reports
 * mkErrTimeout or mkErrRemote, and every later call returns it.
 */
MK_API mkResult_t mkAllGather(const void *sendbuf, void *recvbuf, size_t count,
                              mkDataType_t datatype, mkComm_t comm,
                              cudaStream_t stream);
MK_API mkResult_t mkReduceScatter(const void *sendbuf, void *recvbuf,
                                  size_t count, mkDataType_t datatype,
                                  mkComm_t comm, cudaStream_t stream);
MK_API mkResult_t mkAllReduce(const void *sendbuf, void *recvbuf, size_t count,
                              mkDataType_t datatype, mkComm_t comm,
                              cudaStream_t stream);
MK_API mkResult_t mkAllToAll(const void *sendbuf, void *recvbuf, size_t count,
                             mkDataType_t datatype, mkComm_t comm,
                             cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Fused operations: mkAllGatherGemm                                   */
/* ------------------------------------------------------------------ */
/*
 * C = [A_0; A_1; ...; A_{P-1}] x op(B), every rank computing all of C.
 * A: this rank's m_local x k rows, row-major; B: k x n row-major (transB
 * = 0) or n x k row-major (transB = 1); C: M x n row-major, M the sum of
 * every rank's rows; gatheredA (may be NULL): receives the gathered M x k
 * A.  m_all: every rank's row count in rank order (as MPI_Allgatherv takes
 * its counts), or NULL when every rank holds m_local rows.  bf16 or fp16,
 * fp32 accumulation; k (and n when transB = 0) a multiple of 8; pointers
 * 16-byte aligned device memory of the communicator's GPU.  Stream-ordered
 * and asynchronous; see mkAllGatherGemm(3).
 */
MK_API mkResult_t mkAllGatherGemm(const void *A, const void *B, void *C,
                                  void *gatheredA, int64_t m_local,
                                  const int64_t *m_all, int64_t n, int64_t k,
                                  int transB, mkDataType_t dtype,
                                  mkComm_t comm, cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Fused operations: mkGemmReduceScatter                               */
/* ------------------------------------------------------------------ */
/*
 * The row-parallel linear layer: D = sum over ranks q of A_q x op(B_q),
 * and this rank receives its rows of D in C.  A: m x k row-major (this
 * rank's slice of K, the same k on every rank); B: k x n row-major
 * (transB = 0) or n x k row-major (transB = 1); D is m x n.  Rank r
 * receives rows [off_r, off_r + m_r) of D, m_r = m_all[r] (m_all: every
 * rank's row count in rank order, adding up to m) or, with m_all NULL, m
 * split evenly (the first m % P ranks one row more); off_r is the sum of
 * the counts before r.  C: m_r x n row-major.  bf16 or fp16 inputs, fp32
 * accumulation inside the GEMM and across ranks, one rounding; k (and n
 * when transB = 0) a multiple of 8; pointers 16-byte aligned device
 * memory of the communicator's GPU.  Stream-ordered and asynchronous; see
 * mkGemmReduceScatter(3).
 */
MK_API mkResult_t mkGemmReduceScatter(const void *A, const void *B, void *C,
                                      const int64_t *m_all, int64_t m, int64_t n,
                                      int64_t k, int transB, mkDataType_t dtype,
                                      mkComm_t comm, cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Fused operations: mkGemmAllReduce                                   */
/* ------------------------------------------------------------------ */
/*
 * The row-parallel linear layer whose output every rank needs whole:
 * C = sum over ranks q of A_q x op(B_q) on every rank.  A: m x k
 * row-major (this rank's slice of K, the same k on every rank); B: k x n
 * row-major (transB = 0) or n x k row-major (transB = 1); C: m x n
 * row-major, not overlapping A or B.  bf16 or fp16 inputs, fp32
 * accumulation inside the GEMM and across ranks, one rounding, and the
 * same bits on every rank; k (and n when transB = 0) a multiple of 8;
 * pointers 16-byte aligned device memory of the communicator's GPU.
 * Stream-ordered and asynchronous; see mkGemmAllReduce(3).
 */
MK_API mkResult_t mkGemmAllReduce(const void *A, const void *B, void *C,
                                  int64_t m, int64_t n, int64_t k, int transB,
                                  mkDataType_t dtype, mkComm_t comm,
                                  cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Mixture of experts: mkMoEDispatch, mkMoECombine                     */
/* ------------------------------------------------------------------ */
/*
 * Experts 0 .. experts - 1 are spread evenly over the ranks: rank d holds
 * the El = experts / nranks experts [d * El, (d + 1) * El) (experts a
 * multiple of nranks, at most MK_MOE_MAX_EXPERTS).  This rank's token t (t
 * < tokens, which may differ between ranks) goes to the experts
 * topk_idx[t * topk + j], j < topk (int32; -1: no expert in that slot).
 *
 * mkMoEDispatch sends row t of x (hidden elements of dtype) once to every
 * rank that holds one of its experts; there it lands in recv once per
 * (t, j) slot naming a local expert.  recv (recv_capacity x hidden) holds
 * the rows of local expert 0, then 1, ..., each expert's rows by source
 * rank, then by (t, j) of the source.  Written on every rank:
 *   expert_offsets  [El + 1] int64: expert e's rows are [off[e],
 *                   off[e + 1]); off[El] is the number of rows received;
 *   recv_src        [2 * recv_capacity] int32 (may be NULL): for row i,
 *                   the source rank and its t * topk + j;
 *   recv_weights    [recv_capacity] float (NULL when topk_weights is
 *                   NULL): topk_weights[t * topk + j] of the source;
 *   send_rows       [tokens * topk] int32: for this rank's slot (t, j),
 *                   the row of recv on the expert's rank where it landed,
 *                   -1 for an empty slot (mkMoECombine reads it).
 * Rows of recv past off[El] are not written.  recv_capacity must be the
 * same on every rank; a call that would give any rank more rows than
 * recv_capacity, or that finds an expert id outside [-1, experts), writes
 * nothing on any rank: the error is found on the device, and every rank's
 * communicator reports mkErrInvalidArgument, naming the rank and the rows
 * it needed, through mkCommGetAsyncError and every later call.
 *
 * mkMoECombine brings the experts' outputs back and sums them:
 * out[t] = sum over j with topk_idx[t * topk + j] >= 0 of
 * topk_weights[t * topk + j] * y[send_rows[t * topk + j]] of the expert's
 * rank, in fp32, j in order, rounded once (across nodes: each rank's
 * experts' slots summed j in order, then those sums over the ranks, in
 * fp32, rounded once); topk_weights NULL: weights 1; a token with no
 * expert gets zeros.  y: this rank's expert outputs in recv's layout
 * (off[El] rows of hidden); topk_idx, send_rows and expert_offsets those
 * of the dispatch the outputs answer.
 *
 * hidden a multiple of 8, topk in [1, MK_MOE_MAX_TOPK]; bf16, fp16 or
 * fp32; x, recv, y, out 16-byte aligned device memory of the
 * communicator's GPU, the other arrays aligned to their element.  On one
 * node (local ranks in communicator order) each call is one kernel that
 * reaches the peers' heaps.  Otherwise (several nodes) each call is a
 * sequence on stream: the ranks' token counts exchanged through the
 * bootstrap (a host synchronization with every rank), every rank's tokens
 * and routing all-gathered and routed alike on every rank (the same
 * layout, the same errors); the combine all-gathers the routing and
 * reduce-scatters each rank's fp32 sums: across the network a rank's
 * tokens go once to each other node and their sums come back once, but
 * inside the node every rank handles every token.  Stream-ordered and
 * asynchronous; see mkMoEDispatch(3).
 */
#define MK_MOE_MAX_EXPERTS 4096
#define MK_MOE_MAX_TOPK 32
MK_API mkResult_t mkMoEDispatch(const void *x, const int32_t *topk_idx,
                                const float *topk_weights, void *recv,
                                float *recv_weights, int32_t *recv_src,
                                int64_t *expert_offsets, int32_t *send_rows,
                                int64_t tokens, int64_t hidden, int64_t topk,
                                int64_t experts, int64_t recv_capacity,
                                mkDataType_t dtype, mkComm_t comm,
                                cudaStream_t stream);
MK_API mkResult_t mkMoECombine(const void *y, const int64_t *expert_offsets,
                               const int32_t *topk_idx, const float *topk_weights,
                               const int32_t *send_rows, void *out,
                               int64_t tokens, int64_t hidden, int64_t topk,
                               int64_t experts, int64_t recv_capacity,
                               mkDataType_t dtype, mkComm_t comm,
                               cudaStream_t stream);

/*
 * mkMoEDispatchGemm: mkMoEDispatch and each local expert's GEMM in one
 * call: y_e = recv_e op(W_e) for the rows recv_e that local expert e
 * received (recv itself stays inside the library).  W: this rank's El
 * experts' weights one after the other: transW = 1, El x (n x hidden)
 * row-major (stored Linear weights); transW = 0, El x (hidden x n), hidden
 * then a multiple of 64.  y: recv_capacity x n of dtype, its rows where
 * mkMoEDispatch would put the rows of recv (expert_offsets, recv_src,
 * recv_weights and send_rows as it writes them), so that
 * mkMoECombine(y, expert_offsets, ..., n, ...) brings the outputs back.
 * bf16 or fp16 (fp32: mkErrUnsupported); n a multiple of 8.  On one
 * node one persistent kernel on stream: its first CTAs dispatch, the
 * others compute each expert's tiles as soon as all its rows have landed.
 * Across nodes mkMoEDispatch's sequence, then the grouped GEMM's launches.
 */
MK_API mkResult_t mkMoEDispatchGemm(const void *x, const int32_t *topk_idx,
                                    const float *topk_weights, const void *W,
                                    void *y, float *recv_weights, int32_t *recv_src,
                                    int64_t *expert_offsets, int32_t *send_rows,
                                    int64_t tokens, int64_t hidden, int64_t n,
                                    int64_t topk, int64_t experts,
                                    int64_t recv_capacity, int transW,
                                    mkDataType_t dtype, mkComm_t comm,
                                    cudaStream_t stream);

/*
 * mkMoEDispatchFfnCombine: the whole expert layer in one call.  For this
 * rank's token t (topk_idx, topk_weights and the experts' placement as in
 * mkMoEDispatch):
 *   out[t] = sum over j with e = topk_idx[t * topk + j] >= 0 of
 *            topk_weights[t * topk + j] * FFN_e(x[t]),
 *   FFN_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T   (SwiGLU; silu(g) =
 *            g / (1 + exp(-g))),
 * the gate and up projections Wg_e, Wu_e (inter x hidden) and the down
 * projection Wd_e (hidden x inter) of expert e.  W13 and W2 hold this
 * rank's El = experts / nranks experts one after the other:
 *   transW = 1 (stored Linear weights): W13 El x (2 inter x hidden), rows
 *            [0, inter) Wg_e and [inter, 2 inter) Wu_e; W2 El x (hidden x
 *            inter) = Wd_e;
 *   transW = 0: W13 El x (hidden x 2 inter), columns [0, inter) Wg_e^T and
 *            [inter, 2 inter) Wu_e^T; W2 El x (inter x hidden) = Wd_e^T
 *            (hidden and inter then multiples of 64).
 * The GEMMs accumulate in fp32; silu(g) * u is taken from the fp32 sums
 * and rounded once to dtype (the intermediate rows), each expert's output
 * row is rounded to dtype, and the weighted sum is taken in fp32, j in
 * order, rounded once (topk_weights NULL: weights 1; a token with no
 * expert gets zeros).  recv_capacity: the rows any rank may receive (as
 * mkMoEDispatch; the same on every rank; a call that needs more writes
 * nothing and every rank reports mkErrInvalidArgument).  The received
 * rows, the intermediate rows and the experts' outputs stay inside the
 * library (recv_capacity x (hidden + inter + hidden) elements and 8
 * bytes, kept between calls).  bf16 or fp16 (fp32: mkErrUnsupported); hidden and
 * inter multiples of 8 up to 2^24; x, out, W13 and W2 16-byte aligned
 * device memory, out not overlapping any other argument; x, topk_idx and
 * out may be NULL where tokens = 0; topk_weights NULL on every rank or on
 * none (a rank without tokens included).  On one node two launches on
 * stream: mkMoEDispatchGemm's kernel with W13 and SwiGLU in its
 * epilogue, which then runs the grouped down projection (a tile once the
 * rows it reads are stored), each output row sent as it is stored to its
 * token's slot in the token's rank's combine stage, and mkMoECombine's
 * kernel, which sums each token's rows there (where a rank cannot run the
 * first launch whole, or tokens x topk exceeds recv_capacity on a rank:
 * the rows stay in each rank's stage and the combine pulls them).  Across
 * nodes the dispatch and the combine run as those calls' sequences, with
 * the two grouped GEMMs between them.  Stream-ordered and asynchronous.
 */
MK_API mkResult_t mkMoEDispatchFfnCombine(const void *x, const int32_t *topk_idx,
                                          const float *topk_weights, const void *W13,
                                          const void *W2, void *out, int64_t tokens,
                                          int64_t hidden, int64_t inter, int64_t topk,
                                          int64_t experts, int64_t recv_capacity, int transW,
                                          mkDataType_t dtype, mkComm_t comm,
                                          cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Sequence-parallel attention: mkRingAttention                        */
/* ------------------------------------------------------------------ */
/* Layouts of q, k, v and o: batch, sequence, heads, head_dim (BSHD) or
 * batch, heads, sequence, head_dim (BHSD), each contiguous. */
typedef enum {
    mkAttnBSHD = 0,
    mkAttnBHSD = 1
} mkAttnLayout_t;

/* Which keys a query sees.  The global sequence is spread over the ranks:
 *   mkAttnFull          every key of every rank;
 *   mkAttnCausal        keys at or before the query's global position,
 *                       rank r holding positions [r s, (r + 1) s), s =
 *                       seq_local;
 *   mkAttnCausalZigzag  the same mask, the sequence cut into 2P chunks
 *                       of s / 2 rows (s even), rank r holding chunk r
 *                       (its rows [0, s/2)) and chunk 2P - 1 - r (rows
 *                       [s/2, s)): every rank gets the same work. */
typedef enum {
    mkAttnFull = 0,
    mkAttnCausal = 1,
    mkAttnCausalZigzag = 2
} mkAttnMask_t;

/*
 * Attention over a sequence spread over the ranks of comm:
 * o = softmax(scale q k^T, masked) v, where q (this rank's seq_local
 * queries, `heads` heads) attends the keys and values of every rank
 * (k, v: this rank's seq_local rows, kv_heads heads; query head h reads
 * kv head h / (heads / kv_heads)).  lse (NULL: not written): batch x
 * heads x seq_local floats, the natural log of each query's softmax
 * denominator (sum over the keys it sees of exp(scale q.k)).  The same
 * batch, seq_local, heads, kv_heads, head_dim, layout, mask, scale and
 * dtype on every rank; head_dim 64 or 128; bf16 or fp16; softmax and
 * accumulation in fp32.  On one node one persistent kernel per rank
 * computes while the other ranks' k and v arrive over NVLink; across
 * nodes k and v are all-gathered first; at most 8 ranks; with one rank,
 * the attention core alone.  Stream-ordered and asynchronous; see
 * mkRingAttention(3).
 */
MK_API mkResult_t mkRingAttention(const void *q, const void *k, const void *v, void *o,
                                  float *lse, int64_t batch, int64_t seq_local,
                                  int64_t heads, int64_t kv_heads, int64_t head_dim,
                                  mkAttnLayout_t layout, mkAttnMask_t mask, float scale,
                                  mkDataType_t dtype, mkComm_t comm, cudaStream_t stream);

/* ------------------------------------------------------------------ */
/* Topology and plans                                                  */
/* ------------------------------------------------------------------ */
/*
 * What mkinfo prints, as text: this host's GPUs, links, NICs and NUMA
 * nodes, every rank's node, GPU and path from this rank, and, when op is
 * not NULL ("allgather", "reducescatter", "allreduce", "alltoall",
 * "ag_gemm", "gemm_rs", "gemm_ar", "moe_dispatch", "moe_combine",
 * "moe_dispatch_gemm", "ring_attn", "moe_layer"), the
 * plan of that operation for the global shape m x n x k of datatype (the
 * MoE calls: tokens x hidden x top-k; ring_attn: seq_local x (heads x
 * head_dim) x (kv_heads x head_dim), one batch element).  With buf ==
 * NULL, *size receives the bytes needed (terminating NUL included);
 * otherwise *size is buf's capacity on entry and the text's size on
 * return.
 */
MK_API mkResult_t mkCommGetInfo(mkComm_t comm, const char *op, int64_t m,
                                int64_t n, int64_t k, mkDataType_t datatype,
                                char *buf, size_t *size);

#ifdef __cplusplus
}
#endif

#endif /* MKERNEL_H */
