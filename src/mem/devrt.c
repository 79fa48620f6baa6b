/*
 * devrt.c - the device runtime of a communicator: its symmetric heap, the
 * rank table the kernels read, the error record and the watchdog.
 *
 * Creation (collective over the bootstrap, after the topology grouped the
 * ranks into nodes and the plan sized things):
 *   1. the error record (host-mapped) and a private stream;
 *   2. the heap's first segment, mapped by every rank of the node, and
 *      (several nodes) its host segment (src/mem/heap.c);
 *   3. local_of[nranks] in the heap: the local index of every rank of this
 *      node, -1 for the others (how a kernel tells NVLink from proxy);
 *   4. the watchdog thread (src/mem/watchdog.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "mem/mem.h"
#include "topology/topo.h"

size_t mki_heap_default_bytes(size_t configured, int largest_node)
{
    if (configured) return configured;
    size_t n = largest_node > 0 ? (size_t)largest_node : 1;
    size_t b = n * ((size_t)128 << 20) + ((size_t)1 << 20);
    return b < ((size_t)256 << 20) ? ((size_t)256 << 20) : b;
}

static mkResult_t alloc_record(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    MKI_CUDA(comm, cudaStreamCreateWithFlags(&d->side, cudaStreamNonBlocking));
    MKI_CUDA(comm, cudaHostAlloc((void **)&d->rec, sizeof(*d->rec), cudaHostAllocMapped));
    memset((void *)d->rec, 0, sizeof(*d->rec));
    MKI_CUDA(comm, cudaHostGetDevicePointer((void **)&d->rec_dev, d->rec, 0));
    MKI_CUDA(comm, cudaHostAlloc((void **)&d->pinned, 3 * sizeof(uint64_t), cudaHostAllocDefault));
    d->pinned[0] = d->pinned[1] = d->pinned[2] = 0;
    MKI_CUDA(comm, cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, d->dev));
    return mkSuccess;
}

/* Which rank is which local index of my node, from the topology's grouping. */
static mkResult_t fill_ranks(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    const struct mki_topo *t = comm->topo;
    if (d->nlocal > MKI_MAXLOCAL)
        return mki_error(comm, mkErrUnsupported, "%d ranks on one node; the device runtime "
                         "supports at most %d (set MK_NODE_SIZE to split the node into "
                         "virtual nodes)", d->nlocal, MKI_MAXLOCAL);
    for (int r = 0; r < comm->nranks; r++)
        if (t->node_of[r] == comm->node) d->comm_rank[t->local_rank_of[r]] = r;
    return mkSuccess;
}

static mkResult_t fill_local_of(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    const struct mki_topo *t = comm->topo;
    MKI_CHECK(mki_heap_alloc(comm, 0, sizeof(int32_t) * (uint64_t)comm->nranks, 0,
                             "the rank table", &d->local_of));
    int32_t *h = malloc(sizeof(int32_t) * (size_t)comm->nranks);
    if (!h) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int q = 0; q < comm->nranks; q++)
        h[q] = t->node_of[q] == comm->node ? t->local_rank_of[q] : -1;
    for (int q = 0; q < MKI_RT_LOF; q++)
        d->lof_head[q] = (int8_t)(q < comm->nranks ? h[q] : -1);
    cudaError_t e = cudaMemcpy(mki_heap_ptr(comm, &d->local_of, d->me), h,
                               sizeof(int32_t) * (size_t)comm->nranks, cudaMemcpyHostToDevice);
    free(h);
    MKI_CUDA(comm, e);
    return mkSuccess;
}

static mkResult_t devrt_setup(struct mkComm *comm, size_t heap_bytes, size_t host_bytes)
{
    MKI_CHECK(fill_ranks(comm));
    MKI_CHECK(alloc_record(comm));
    MKI_CHECK(mki_heap_create(comm, heap_bytes, host_bytes));
    MKI_CHECK(fill_local_of(comm));
    MKI_CUDA(comm, cudaDeviceSynchronize());
    MKI_CHECK(mki_watchdog_start(comm));
    MKI_INFO(MKI_SUB_MEM, "symmetric heap of %zu MiB%s, %d ranks on this node, CUDA device %d",
             heap_bytes >> 20, host_bytes ? " and a host segment" : "", comm->dev->nlocal,
             comm->dev->dev);
    return mkSuccess;
}

mkResult_t mki_devrt_create(struct mkComm *comm, size_t heap_bytes, size_t host_bytes)
{
    if (comm->cuda_dev < 0) return mkSuccess;
    int prev = 0;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess) e = cudaSetDevice(comm->cuda_dev);
    if (e != cudaSuccess)
        return mki_error(comm, mkErrCuda, "cannot use CUDA device %d: %s", comm->cuda_dev,
                         cudaGetErrorString(e));
    comm->dev = calloc(1, sizeof(*comm->dev));
    if (!comm->dev) {
        (void)cudaSetDevice(prev);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    struct mki_devrt *d = comm->dev;
    d->dev = comm->cuda_dev;
    d->nlocal = comm->local_size;
    d->me = comm->local_rank;
    d->heap.host_seg = -1;
    pthread_mutex_init(&d->reg_lock, NULL);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&d->call_lock, &ma);
    pthread_mutexattr_destroy(&ma);
    mkResult_t res = devrt_setup(comm, heap_bytes, host_bytes);
    (void)cudaSetDevice(prev);
    return res;
}

void mki_devrt_destroy(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (!d) return;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(d->dev);
    mki_watchdog_stop(d);
    if (!d->aborted) {
        /* Our kernels end by their deadline at worst; then nothing of ours
         * touches a peer's heap. */
        (void)cudaDeviceSynchronize();
        mki_heap_destroy(comm);
        if (d->side) (void)cudaStreamDestroy(d->side);
        if (d->rec) (void)cudaFreeHost((void *)d->rec);
        if (d->pinned) (void)cudaFreeHost(d->pinned);
        for (int i = 0; i < MKI_TAILS; i++)
            if (d->tail[i].ev) (void)cudaEventDestroy(d->tail[i].ev);
    }
    mki_reg_free_all(d);
    pthread_mutex_destroy(&d->reg_lock);
    pthread_mutex_destroy(&d->call_lock);
    (void)cudaGetLastError();
    (void)cudaSetDevice(prev);
    free(d);
    comm->dev = NULL;
}

void mki_devrt_tail(struct mki_devrt *d, cudaStream_t stream)
{
    struct mki_tail *t = NULL, *lru = &d->tail[0];
    for (int i = 0; i < MKI_TAILS && !t; i++) {
        if (d->tail[i].ev && d->tail[i].stream == stream) t = &d->tail[i];
        if (d->tail[i].used < lru->used) lru = &d->tail[i];
    }
    if (!t) {
        t = lru;
        if (!t->ev && cudaEventCreateWithFlags(&t->ev, cudaEventDisableTiming) != cudaSuccess) {
            t->ev = NULL; /* no tail: the watchdog's bound still holds */
            (void)cudaGetLastError();
            return;
        }
        t->stream = stream;
    }
    if (cudaEventRecord(t->ev, stream) != cudaSuccess) (void)cudaGetLastError();
    t->used = ++d->tail_clock;
}

int mki_devrt_drained(struct mki_devrt *d)
{
    for (int i = 0; i < MKI_TAILS; i++)
        if (d->tail[i].ev && cudaEventQuery(d->tail[i].ev) == cudaErrorNotReady) return 0;
    (void)cudaGetLastError();
    return 1;
}

void mki_devrt_drain_wait(struct mki_devrt *d, uint64_t max_ns)
{
    const uint64_t t0 = mki_now_ns();
    while (!mki_devrt_drained(d) && mki_now_ns() - t0 < max_ns) usleep(100);
}

mkResult_t mki_devrt_require(struct mkComm *comm, const char *func)
{
    if (comm->dev == NULL)
        return mki_error(comm, mkErrUnsupported, "%s: this process has no GPU (the "
                         "communicator was created without a CUDA device); GPU operations "
                         "are not available", func);
    return mkSuccess;
}
