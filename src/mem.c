/*
 * mem.c - symmetric workspace, peer mapping, error record, watchdog, abort,
 * and the user-buffer API (mkMemAlloc/mkMemFree, mkCommRegister/Deregister).
 *
 * Creation (collective over the bootstrap, after the device is picked):
 *   1. cudaMalloc the workspace (MK_WORKSPACE_SIZE), zero it;
 *   2. allgather {IPC handle, pid, device, node, local rank} over all ranks;
 *   3. map the workspace of every rank of my node (cudaIpcOpenMemHandle,
 *      which also works for another process on my GPU under MPS; the same
 *      process uses the pointer as is);
 *   4. allocate the host-mapped error record, start the watchdog thread.
 *
 * The watchdog polls the record every few milliseconds and the local abort
 * word (through a private stream, never blocking) every 50 ms: a device
 * failure becomes the communicator's async error and a WARN line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mki.h"
#include "mem.h"

struct ipc_info {
    cudaIpcMemHandle_t handle;
    uint64_t ptr;
    int32_t pid, dev, node, local_rank;
    int32_t sm_count, sm_budget;   /* for a CTA budget equal on all ranks */
    uint64_t host_hash;
    char bus[32];                  /* PCI bus id: the physical GPU */
};

#define CUDA_OR(call, comm, label, res)                                       \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            (res) = mki_error((comm), e_ == cudaErrorMemoryAllocation        \
                                          ? mkErrNoMemory : mkErrCuda,        \
                              "%s: %s", #call,                                \
                              cudaGetErrorString(e_));                        \
            goto label;                                                       \
        }                                                                     \
    } while (0)

const char *mki_coll_op_name(int op)
{
    switch (op) {
    case MKI_COLL_ALLGATHER: return "mkAllGather";
    case MKI_COLL_REDUCESCATTER: return "mkReduceScatter";
    case MKI_COLL_ALLREDUCE: return "mkAllReduce";
    case MKI_COLL_ALLTOALL: return "mkAllToAll";
    case 16: return "mkAllGatherGemm"; /* MKI_AGG_OP, src/ops/ag_gemm.h */
    }
    return "an operation";
}

static int rank_of(const int *comm_rank, int nlocal, int local)
{
    if (comm_rank && local >= 0 && local < nlocal) return comm_rank[local];
    return local;
}

mkResult_t mki_err_record_format(const struct mki_err_record *r,
                                 const int *comm_rank, int nlocal, char *buf,
                                 size_t len)
{
    if (!r->valid) {
        snprintf(buf, len, "no error recorded");
        return mkSuccess;
    }
    int me = r->global ? r->rank : rank_of(comm_rank, nlocal, r->rank);
    int peer = r->global ? r->peer : rank_of(comm_rank, nlocal, r->peer);
    const char *op = mki_coll_op_name(r->op);
    if (r->kind == MKI_ERR_PROXY) {
        snprintf(buf, len, "%s (call %llu) on rank %d stopped: this rank's "
                 "inter-node proxy failed while sending to rank %d (channel "
                 "%d, chunk %d); the transport's error is logged at WARN; "
                 "destroy this communicator", op,
                 (unsigned long long)r->epoch, me, peer, r->channel,
                 r->chunk);
        return mkErrTransport;
    }
    if (r->kind == MKI_ERR_TIMEOUT) {
        snprintf(buf, len, "%s (call %llu) on rank %d timed out waiting for "
                 "rank %d: channel %d, chunk %d, phase %d, expected signal "
                 "0x%llx, saw 0x%llx; rank %d is dead, hung or never made the "
                 "call (raise MK_TIMEOUT_MS if it is only slow)", op,
                 (unsigned long long)r->epoch, me, peer, r->channel, r->chunk,
                 r->phase, (unsigned long long)r->expected,
                 (unsigned long long)r->seen, peer);
        return mkErrTimeout;
    }
    snprintf(buf, len, "%s (call %llu) on rank %d stopped: rank %d failed or "
             "aborted the communicator (channel %d, chunk %d); destroy this "
             "communicator", op, (unsigned long long)r->epoch, me, peer,
             r->channel, r->chunk);
    return mkErrRemote;
}

/* ---- watchdog ------------------------------------------------------ */

static void watchdog_report(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    char msg[512];
    mkResult_t res = mki_err_record_format(d->rec, d->comm_rank, d->nlocal,
                                           msg, sizeof(msg));
    mki_error(comm, res, "%s", msg);
    mki_comm_set_async_error(comm, res);
}

/* Poll the local abort word without ever blocking on the device. */
static int watchdog_poll_abort(struct mki_devrt *d, int *inflight)
{
    if (*inflight) {
        cudaError_t e = cudaStreamQuery(d->side);
        if (e == cudaErrorNotReady) return 0;
        *inflight = 0;
        if (e != cudaSuccess) return -1;
        return d->pinned[1] != 0;
    }
    if (cudaMemcpyAsync(&d->pinned[1], d->ws + MKI_WS_ABORT, 8,
                        cudaMemcpyDeviceToHost, d->side) == cudaSuccess)
        *inflight = 1;
    return 0;
}

static void *watchdog_main(void *arg)
{
    struct mkComm *comm = arg;
    struct mki_devrt *d = comm->dev;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (cudaSetDevice(d->dev) != cudaSuccess) return NULL;
    int inflight = 0, tick = 0, reported = 0;
    const struct timespec ts = {0, 2000000};
    while (!d->stop) {
        nanosleep(&ts, NULL);
        if (reported) continue;
        if (d->rec->valid) {
            watchdog_report(comm);
            reported = 1;
            continue;
        }
        if (++tick % 25 != 0 && !inflight) continue;
        int up = watchdog_poll_abort(d, &inflight);
        if (up > 0 && !d->rec->valid) {
            uint64_t who = d->pinned[1];
            mki_error(comm, mkErrRemote, "rank %d failed or aborted the "
                      "communicator; destroy it",
                      rank_of(d->comm_rank, d->nlocal, (int)who - 1));
            mki_comm_set_async_error(comm, mkErrRemote);
            reported = 1;
        }
    }
    if (inflight) (void)cudaStreamSynchronize(d->side);
    return NULL;
}

/* ---- creation ------------------------------------------------------ */

static mkResult_t map_peers(struct mkComm *comm, const struct ipc_info *all)
{
    struct mki_devrt *d = comm->dev;
    mkResult_t res = mkSuccess;
    for (int r = 0; r < comm->nranks; r++) {
        if (all[r].node != comm->node) continue;
        int l = all[r].local_rank;
        d->comm_rank[l] = r;
        if (!strcmp(all[r].bus, all[comm->rank].bus) &&
            all[r].host_hash == all[comm->rank].host_hash)
            d->ranks_on_dev++;
        if (r == comm->rank) {
            d->peer_ws[l] = d->ws;
            continue;
        }
        if (all[r].pid == all[comm->rank].pid &&
            all[r].host_hash == all[comm->rank].host_hash) {
            d->peer_ws[l] = (char *)(uintptr_t)all[r].ptr;
            continue;
        }
        void *p = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&p, all[r].handle,
                                             cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess)
            return mki_error(comm, mkErrCuda, "cannot map the workspace of "
                             "rank %d (CUDA device %d, pid %d): "
                             "cudaIpcOpenMemHandle: %s; ranks of one node need "
                             "peer access between their GPUs, or MPS when they "
                             "share one", r, all[r].dev, all[r].pid,
                             cudaGetErrorString(e));
        d->peer_ws[l] = p;
        d->opened[l] = 1;
    }
    return res;
}

/* SMs each rank may give a collective: the smallest of all ranks'
 * budgets (MK_SM_BUDGET, else the GPU's SMs shared evenly by the ranks on
 * it, whatever virtual node they belong to), so every rank of the
 * communicator, on every node, picks the same CTA count for a call. */
static int node_budget(struct mkComm *comm, const struct ipc_info *all)
{
    int best = 1 << 30;
    for (int r = 0; r < comm->nranks; r++) {
        int share = 0;
        for (int q = 0; q < comm->nranks; q++)
            share += !strcmp(all[q].bus, all[r].bus) &&
                     all[q].host_hash == all[r].host_hash;
        int b = all[r].sm_budget > 0 ? all[r].sm_budget
                                     : all[r].sm_count / (share > 0 ? share : 1);
        if (b < best) best = b;
    }
    return best < 1 ? 1 : best;
}

static mkResult_t exchange_and_map(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    mkResult_t res = mkSuccess;
    struct ipc_info *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, "out of host memory");
    struct ipc_info *me = &all[comm->rank];
    CUDA_OR(cudaIpcGetMemHandle(&me->handle, d->ws), comm, out, res);
    me->ptr = (uint64_t)(uintptr_t)d->ws;
    me->pid = (int32_t)getpid();
    me->dev = d->dev;
    me->node = comm->node;
    me->local_rank = comm->local_rank;
    me->host_hash = comm->hosts[comm->rank].host_hash;
    me->sm_count = d->sm_count;
    me->sm_budget = comm->cfg.smBudget;
    CUDA_OR(cudaDeviceGetPCIBusId(me->bus, sizeof(me->bus), d->dev), comm, out,
            res);
    res = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        goto out;
    }
    res = map_peers(comm, all);
    if (res == mkSuccess) d->coll_budget = node_budget(comm, all);
out:
    free(all);
    return res;
}

static mkResult_t alloc_workspace(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    mkResult_t res = mkSuccess;
    d->ws_bytes = comm->cfg.workspaceSize;
    CUDA_OR(cudaMalloc((void **)&d->ws, d->ws_bytes), comm, out, res);
    CUDA_OR(cudaMemset(d->ws, 0, MKI_WS_DATA), comm, out, res);
    CUDA_OR(cudaStreamCreateWithFlags(&d->side, cudaStreamNonBlocking), comm,
            out, res);
    CUDA_OR(cudaHostAlloc((void **)&d->rec, sizeof(*d->rec),
                          cudaHostAllocMapped), comm, out, res);
    memset((void *)d->rec, 0, sizeof(*d->rec));
    CUDA_OR(cudaHostGetDevicePointer((void **)&d->rec_dev, d->rec, 0), comm,
            out, res);
    CUDA_OR(cudaHostAlloc((void **)&d->pinned, 2 * sizeof(uint64_t),
                          cudaHostAllocDefault), comm, out, res);
    d->pinned[0] = d->pinned[1] = 0;
    CUDA_OR(cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount,
                                   d->dev), comm, out, res);
    CUDA_OR(cudaDeviceSynchronize(), comm, out, res);
out:
    return res;
}

static mkResult_t devrt_setup(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    d->dev = comm->cuda_dev;
    d->nlocal = comm->local_size;
    d->me = comm->local_rank;
    if (d->nlocal > MKI_MAXLOCAL)
        return mki_error(comm, mkErrUnsupported, "%d ranks on one node; the "
                         "device runtime supports at most %d (use "
                         "MK_NODE_SIZE to split the node)", d->nlocal,
                         MKI_MAXLOCAL);
    MKI_CHECK(alloc_workspace(comm));
    d->slot_bytes = mki_ws_slot_bytes(d->ws_bytes, d->nlocal);
    MKI_CHECK(exchange_and_map(comm));
    if (pthread_create(&d->watchdog, NULL, watchdog_main, comm) != 0)
        return mki_error(comm, mkErrSystem, "cannot start the watchdog "
                         "thread");
    d->watchdog_up = 1;
    MKI_INFO(MKI_SUB_MEM, "workspace %zu bytes at %p, %d local ranks (%d on "
             "CUDA device %d), slots of %llu bytes", d->ws_bytes,
             (void *)d->ws, d->nlocal, d->ranks_on_dev, d->dev,
             (unsigned long long)d->slot_bytes);
    return mkSuccess;
}

mkResult_t mki_devrt_create(struct mkComm *comm)
{
    if (comm->cuda_dev < 0) return mkSuccess;
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess) e = cudaSetDevice(comm->cuda_dev);
    if (e != cudaSuccess)
        return mki_error(comm, mkErrCuda, "cannot use CUDA device %d: %s",
                         comm->cuda_dev, cudaGetErrorString(e));
    comm->dev = calloc(1, sizeof(*comm->dev));
    if (!comm->dev) {
        (void)cudaSetDevice(prev);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    pthread_mutex_init(&comm->dev->reg_lock, NULL);
    mkResult_t res = devrt_setup(comm);
    (void)cudaSetDevice(prev);
    return res;
}

/* ---- teardown and abort -------------------------------------------- */

static void free_regs(struct mki_devrt *d)
{
    struct mki_reg *r = d->regs;
    while (r) {
        struct mki_reg *n = r->next;
        if (r->owned && !d->aborted) (void)cudaFree(r->ptr);
        free(r);
        r = n;
    }
    d->regs = NULL;
}

void mki_devrt_destroy(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (!d) return;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(d->dev);
    if (d->watchdog_up) {
        d->stop = 1;
        pthread_join(d->watchdog, NULL);
    }
    if (!d->aborted) {
        /* Our kernels end by deadline at worst; then nothing of ours
         * touches a peer's workspace. */
        (void)cudaDeviceSynchronize();
        for (int l = 0; l < MKI_MAXLOCAL; l++)
            if (d->opened[l]) (void)cudaIpcCloseMemHandle(d->peer_ws[l]);
        if (d->ws) (void)cudaFree(d->ws);
        if (d->side) (void)cudaStreamDestroy(d->side);
        if (d->rec) (void)cudaFreeHost((void *)d->rec);
        if (d->pinned) (void)cudaFreeHost(d->pinned);
    }
    free_regs(d);
    pthread_mutex_destroy(&d->reg_lock);
    (void)cudaGetLastError();
    (void)cudaSetDevice(prev);
    free(d);
    comm->dev = NULL;
}

void mki_devrt_abort(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (!d || !d->ws) return;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(d->dev);
    d->pinned[0] = (uint64_t)d->me + 1;
    for (int l = 0; l < d->nlocal; l++)
        if (d->peer_ws[l])
            (void)cudaMemcpyAsync(d->peer_ws[l] + MKI_WS_ABORT, &d->pinned[0],
                                  8, cudaMemcpyHostToDevice, d->side);
    /* Bounded wait for the writes to land (the copies do not depend on any
     * peer); then leave device memory to the process's exit. */
    uint64_t t0 = mki_now_ns();
    while (cudaStreamQuery(d->side) == cudaErrorNotReady &&
           mki_now_ns() - t0 < 1000000000ull)
        usleep(100);
    d->aborted = 1;
    (void)cudaGetLastError();
    (void)cudaSetDevice(prev);
}

mkResult_t mki_devrt_require(struct mkComm *comm, const char *func)
{
    if (comm->dev == NULL)
        return mki_error(comm, mkErrUnsupported, "%s: this process has no "
                         "GPU (the communicator was created without a CUDA "
                         "device); GPU operations are not available", func);
    return mkSuccess;
}

/* ---- registered buffers -------------------------------------------- */

int mki_devrt_is_registered(struct mkComm *comm, const void *ptr,
                            size_t bytes)
{
    struct mki_devrt *d = comm->dev;
    if (!d) return 0;
    int found = 0;
    uintptr_t p = (uintptr_t)ptr;
    pthread_mutex_lock(&d->reg_lock);
    for (struct mki_reg *r = d->regs; r && !found; r = r->next)
        found = p >= (uintptr_t)r->ptr && p + bytes <= (uintptr_t)r->ptr + r->bytes;
    pthread_mutex_unlock(&d->reg_lock);
    return found;
}

static mkResult_t reg_add(struct mkComm *comm, void *ptr, size_t bytes,
                          int owned)
{
    struct mki_reg *r = calloc(1, sizeof(*r));
    if (!r) return mki_error(comm, mkErrNoMemory, "out of host memory");
    r->ptr = ptr;
    r->bytes = bytes;
    r->owned = owned;
    pthread_mutex_lock(&comm->dev->reg_lock);
    r->next = comm->dev->regs;
    comm->dev->regs = r;
    pthread_mutex_unlock(&comm->dev->reg_lock);
    return mkSuccess;
}

/* Unlink the entry starting at ptr when its kind matches: 1 removed, 0 no
 * such entry, -1 an entry of the other kind (left in place). */
static int reg_remove(struct mkComm *comm, void *ptr, int owned)
{
    struct mki_devrt *d = comm->dev;
    int found = 0;
    pthread_mutex_lock(&d->reg_lock);
    for (struct mki_reg **pp = &d->regs; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == ptr) {
            struct mki_reg *r = *pp;
            if (r->owned != owned) {
                found = -1;
                break;
            }
            *pp = r->next;
            free(r);
            found = 1;
            break;
        }
    pthread_mutex_unlock(&d->reg_lock);
    return found;
}

MK_API mkResult_t mkMemAlloc(mkComm_t comm, size_t size, void **ptr)
{
    MKI_CHECK(mki_comm_check(comm, "mkMemAlloc"));
    if (ptr == NULL)
        return mki_error(comm, mkErrInvalidArgument, "mkMemAlloc: ptr is "
                         "NULL; pass the address of a void *");
    if (size == 0)
        return mki_error(comm, mkErrInvalidArgument, "mkMemAlloc: size is 0; "
                         "ask for at least one byte");
    MKI_CHECK(mki_devrt_require(comm, "mkMemAlloc"));
    int prev = 0;
    void *p = NULL;
    (void)cudaGetDevice(&prev);
    cudaError_t e = cudaSetDevice(comm->dev->dev);
    if (e == cudaSuccess) e = cudaMalloc(&p, size);
    (void)cudaSetDevice(prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mki_error(comm, e == cudaErrorMemoryAllocation ? mkErrNoMemory
                         : mkErrCuda, "mkMemAlloc(%zu bytes): %s", size,
                         cudaGetErrorString(e));
    }
    mkResult_t res = reg_add(comm, p, size, 1);
    if (res != mkSuccess) {
        (void)cudaFree(p);
        return res;
    }
    *ptr = p;
    return mkSuccess;
}

MK_API mkResult_t mkMemFree(mkComm_t comm, void *ptr)
{
    MKI_CHECK(mki_comm_check(comm, "mkMemFree"));
    if (ptr == NULL) return mkSuccess;
    MKI_CHECK(mki_devrt_require(comm, "mkMemFree"));
    if (reg_remove(comm, ptr, 1) != 1)
        return mki_error(comm, mkErrInvalidArgument, "mkMemFree: %p was not "
                         "returned by mkMemAlloc on this communicator", ptr);
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess)
        return mki_error(comm, mkErrCuda, "mkMemFree: cudaFree: %s",
                         cudaGetErrorString(e));
    return mkSuccess;
}

MK_API mkResult_t mkCommRegister(mkComm_t comm, void *buf, size_t size,
                                 void **handle)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommRegister"));
    if (buf == NULL || handle == NULL || size == 0)
        return mki_error(comm, mkErrInvalidArgument, "mkCommRegister: %s; "
                         "pass a device buffer, its size in bytes and the "
                         "address of a handle", buf == NULL ? "buf is NULL"
                         : handle == NULL ? "handle is NULL" : "size is 0");
    MKI_CHECK(mki_devrt_require(comm, "mkCommRegister"));
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, buf);
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice ||
        a.device != comm->dev->dev) {
        (void)cudaGetLastError();
        return mki_error(comm, mkErrInvalidArgument, "mkCommRegister: buf "
                         "%p is not device memory of CUDA device %d; register "
                         "cudaMalloc'ed memory of the communicator's device",
                         buf, comm->dev->dev);
    }
    MKI_CHECK(reg_add(comm, buf, size, 0));
    *handle = buf;
    return mkSuccess;
}

MK_API mkResult_t mkCommDeregister(mkComm_t comm, void *handle)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommDeregister"));
    if (handle == NULL)
        return mki_error(comm, mkErrInvalidArgument, "mkCommDeregister: "
                         "handle is NULL");
    MKI_CHECK(mki_devrt_require(comm, "mkCommDeregister"));
    int r = reg_remove(comm, handle, 0);
    if (r == -1)
        return mki_error(comm, mkErrInvalidArgument, "mkCommDeregister: %p "
                         "came from mkMemAlloc; release it with mkMemFree",
                         handle);
    if (r == 0)
        return mki_error(comm, mkErrInvalidArgument, "mkCommDeregister: "
                         "%p is not a handle from mkCommRegister on this "
                         "communicator", handle);
    return mkSuccess;
}
