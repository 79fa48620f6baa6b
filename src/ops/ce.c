/*
 * ce.c - side streams, gates, copy-engine copies and flags of the fused
 * ops that move bytes on the copy engines (ce.h).
 */
#include <stdint.h>
#include <string.h>

#include <cuda.h> /* stream memory operations: types only, no libcuda link */
#include <cuda_runtime_api.h>

#include "mki.h"
#include "mem/mem.h"
#include "ops/ce.h"

#define CE_MAXCOPY 4   /* copies of one mki_ce_copy */

typedef CUresult (*memop_fn)(CUstream, unsigned, CUstreamBatchMemOpParams *, unsigned);

static mkResult_t cuda_err(struct mki_call *k, const char *what, cudaError_t e)
{
    (void)cudaGetLastError();
    return mki_error(k->comm, mkErrCuda, "%s: %s: %s", k->func, what, cudaGetErrorString(e));
}

static mkResult_t memops(struct mki_call *k, const struct mki_ce *ce, cudaStream_t s,
                         CUstreamBatchMemOpParams *ops, unsigned n)
{
    CUresult r = ((memop_fn)ce->memop)((CUstream)s, n, ops, 0);
    if (r != CUDA_SUCCESS)
        return mki_error(k->comm, mkErrCuda, "%s: cuStreamBatchMemOp failed (CUresult %d)",
                         k->func, (int)r);
    return mkSuccess;
}

/* Whether stream memory operations can be captured into a graph here (a
 * capture that holds one unsupported call is lost, so try on a private
 * stream once). */
static int capturable(memop_fn fn, uint64_t *probe)
{
    cudaStream_t s;
    cudaGraph_t graph = NULL;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 0;
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof(op));
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = (CUdeviceptr)(uintptr_t)probe;
    op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    int ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess;
    if (ok) ok = fn((CUstream)s, 1, &op, 0) == CUDA_SUCCESS;
    ok = cudaStreamEndCapture(s, &graph) == cudaSuccess && ok;
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaStreamDestroy(s);
    (void)cudaGetLastError();
    return ok;
}

mkResult_t mki_ce_init(struct mkComm *comm, struct mki_ce *ce, uint64_t *probe,
                       const char *func)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamBatchMemOp", &fn, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
        return mki_error(comm, mkErrUnsupported, "%s: the driver has no cuStreamBatchMemOp "
                         "(%s)", func, cudaGetErrorString(e));
    ce->memop = fn;
    ce->capture_ok = capturable((memop_fn)fn, probe);
    if (!ce->capture_ok)
        MKI_INFO(MKI_SUB_GEMM, "%s: stream memory operations cannot be captured here: calls "
                 "inside a CUDA graph capture run the unfused sequence", func);
    return mkSuccess;
}

void mki_ce_fini(struct mkComm *comm, struct mki_ce *ce)
{
    if (!comm->dev || comm->dev->aborted) return;
    for (int l = 0; l < MKI_MAXLOCAL; l++)
        for (int x = 0; x < MKI_CE_SPLIT_MAX; x++) {
            if (ce->side[l][x]) (void)cudaStreamSynchronize(ce->side[l][x]);
            if (ce->side[l][x]) (void)cudaStreamDestroy(ce->side[l][x]);
            if (ce->join[l][x]) (void)cudaEventDestroy(ce->join[l][x]);
        }
    if (ce->fork) (void)cudaEventDestroy(ce->fork);
}

static cudaError_t new_streams(const struct mkComm *comm, struct mki_ce *ce, int split)
{
    cudaError_t e = cudaSuccess;
    if (!ce->fork) e = cudaEventCreateWithFlags(&ce->fork, cudaEventDisableTiming);
    for (int l = 0; e == cudaSuccess && l < comm->dev->nlocal; l++)
        for (int x = ce->streams; e == cudaSuccess && x < split; x++) {
            e = cudaStreamCreateWithFlags(&ce->side[l][x], cudaStreamNonBlocking);
            if (e == cudaSuccess)
                e = cudaEventCreateWithFlags(&ce->join[l][x], cudaEventDisableTiming);
        }
    return e;
}

mkResult_t mki_ce_streams(struct mki_call *k, struct mki_ce *ce, int split)
{
    if (split > MKI_CE_SPLIT_MAX)
        return mki_error(k->comm, mkErrInternal, "%s: %d copy streams per peer asked, at "
                         "most %d", k->func, split, MKI_CE_SPLIT_MAX);
    if (ce->streams >= split) return mkSuccess;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = new_streams(k->comm, ce, split);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) return cuda_err(k, "creating the copy streams", e);
    ce->streams = split;
    return mkSuccess;
}

mkResult_t mki_ce_drain(struct mki_call *k, struct mki_ce *ce)
{
    cudaError_t e = cudaSuccess;
    for (int l = 0; e == cudaSuccess && l < MKI_MAXLOCAL; l++)
        for (int x = 0; e == cudaSuccess && x < ce->streams; x++)
            if (ce->side[l][x]) e = cudaStreamSynchronize(ce->side[l][x]);
    return e == cudaSuccess ? mkSuccess : cuda_err(k, "waiting for earlier calls", e);
}

mkResult_t mki_ce_fork(struct mki_call *k, struct mki_ce *ce)
{
    cudaError_t e = cudaEventRecord(ce->fork, k->stream);
    return e == cudaSuccess ? mkSuccess : cuda_err(k, "cudaEventRecord", e);
}

mkResult_t mki_ce_gate(struct mki_call *k, struct mki_ce *ce, int dst, int split,
                       uint64_t *go)
{
    for (int x = 0; x < split; x++) {
        cudaError_t e = cudaStreamWaitEvent(ce->side[dst][x], ce->fork, 0);
        if (e != cudaSuccess) return cuda_err(k, "enqueueing the copies", e);
        CUstreamBatchMemOpParams ops[2];
        memset(ops, 0, sizeof(ops));
        ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        ops[0].waitValue.address = (CUdeviceptr)(uintptr_t)&go[x];
        ops[0].waitValue.value = 1;
        ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
        ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        ops[1].writeValue.address = (CUdeviceptr)(uintptr_t)&go[x];
        ops[1].writeValue.value = 0;
        ops[1].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        MKI_CHECK(memops(k, ce, ce->side[dst][x], ops, 2));
    }
    return mkSuccess;
}

cudaError_t mki_ce_copy(struct mki_call *k, cudaStream_t s, int n, void *const *dst,
                        const void *const *src, const size_t *bytes)
{
    void *d[CE_MAXCOPY];
    const void *sr[CE_MAXCOPY];
    size_t len[CE_MAXCOPY];
    size_t m = 0;
    for (int i = 0; i < n && i < CE_MAXCOPY; i++)
        if (bytes[i]) d[m] = dst[i], sr[m] = src[i], len[m++] = bytes[i];
    if (m == 0) return cudaSuccess;
    /* Inside a capture, memcpy nodes (peers on other GPUs are reached by a
     * copy engine; ranks sharing a GPU leave SMs free beside their grids). */
    if (k->capturing) {
        cudaError_t e = cudaSuccess;
        for (size_t i = 0; e == cudaSuccess && i < m; i++)
            e = cudaMemcpyAsync(d[i], sr[i], len[i], cudaMemcpyDeviceToDevice, s);
        return e;
    }
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof(at));
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    return cudaMemcpyBatchAsync(d, sr, len, m, &at, &idx, 1, s);
}

mkResult_t mki_ce_flag(struct mki_call *k, struct mki_ce *ce, uint64_t *flag, cudaStream_t s)
{
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof(op));
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = (CUdeviceptr)(uintptr_t)flag;
    op.writeValue.value = 1;
    op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return memops(k, ce, s, &op, 1);
}

mkResult_t mki_ce_join(struct mki_call *k, struct mki_ce *ce, int dst, int split)
{
    for (int x = 0; x < split; x++) {
        cudaError_t e = cudaEventRecord(ce->join[dst][x], ce->side[dst][x]);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(k->stream, ce->join[dst][x], 0);
        if (e != cudaSuccess) return cuda_err(k, "enqueueing the copies", e);
    }
    return mkSuccess;
}
