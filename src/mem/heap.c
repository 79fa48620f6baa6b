/*
 * heap.c - the symmetric heap (heap.h): segments, their mapping inside the
 * node, and the blocks the ops carve from them.
 *
 * A device segment is one cudaMalloc; every rank of the node maps every
 * other rank's with cudaIpcOpenMemHandle (also another process on the
 * same GPU under MPS; a rank of the same process uses the pointer as is).
 * The handles go around the bootstrap (allgather over all ranks, mapped
 * by the ranks of the same node).  Blocks come from a first-fit free list
 * per segment; the list is the same on every rank, so is every block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "mem/mem.h"

struct seg_info {
    cudaIpcMemHandle_t handle;
    uint64_t ptr;
    uint64_t host_hash;
    int32_t pid, node, local, ok;
};

static int same_process(const struct seg_info *a, const struct seg_info *b)
{
    return a->pid == b->pid && a->host_hash == b->host_hash;
}

/* Map local rank l's segment described by `in`. */
static mkResult_t map_one(struct mkComm *comm, struct mki_heap_seg *s, int l,
                          const struct seg_info *in, const struct seg_info *me)
{
    if (same_process(in, me)) {
        s->peer[l] = (char *)(uintptr_t)in->ptr;
        return mkSuccess;
    }
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, in->handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mki_error(comm, mkErrCuda, "cannot map the symmetric heap of rank %d (pid "
                         "%d): cudaIpcOpenMemHandle: %s; ranks of one node need peer "
                         "access between their GPUs, or MPS when they share one",
                         comm->dev->comm_rank[l], in->pid, cudaGetErrorString(e));
    }
    s->peer[l] = p;
    s->opened[l] = 1;
    return mkSuccess;
}

/* Exchange segment s's handles and map the node's peers (collective). */
static mkResult_t share_segment(struct mkComm *comm, struct mki_heap_seg *s)
{
    struct mki_devrt *d = comm->dev;
    struct seg_info *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (!all) return mki_error(comm, mkErrNoMemory, "out of host memory");
    struct seg_info *me = &all[comm->rank];
    me->ptr = (uint64_t)(uintptr_t)s->base;
    me->pid = (int32_t)getpid();
    me->host_hash = comm->hosts[comm->rank].host_hash;
    me->node = comm->node;
    me->local = d->me;
    me->ok = cudaIpcGetMemHandle(&me->handle, s->base) == cudaSuccess;
    (void)cudaGetLastError();
    mkResult_t res = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    if (res != mkSuccess) {
        mki_error_quiet(comm, "exchanging the symmetric heap: %s", mki_thread_error());
        goto out;
    }
    for (int r = 0; r < comm->nranks && res == mkSuccess; r++) {
        if (all[r].node != comm->node) continue;
        if (!all[r].ok)
            res = mki_error(comm, mkErrCuda, "rank %d could not share its symmetric heap "
                            "(cudaIpcGetMemHandle failed there)", r);
        else if (r == comm->rank)
            s->peer[d->me] = s->base;
        else
            res = map_one(comm, s, all[r].local, &all[r], me);
    }
out:
    free(all);
    return res;
}

static void unmap_segment(struct mki_heap_seg *s)
{
    for (int l = 0; l < MKI_MAXLOCAL; l++) {
        if (s->opened[l]) (void)cudaIpcCloseMemHandle(s->peer[l]);
        s->opened[l] = 0;
        s->peer[l] = NULL;
    }
}

/* ---- the free list ------------------------------------------------------ */

static mkResult_t free_insert(struct mkComm *comm, struct mki_heap *h, int seg, uint64_t off,
                              uint64_t bytes)
{
    int i = 0;
    while (i < h->nfree && (h->free[i].seg < seg ||
                            (h->free[i].seg == seg && h->free[i].off < off)))
        i++;
    /* coalesce with the neighbours */
    if (i > 0 && h->free[i - 1].seg == seg && h->free[i - 1].off + h->free[i - 1].bytes == off) {
        h->free[i - 1].bytes += bytes;
        if (i < h->nfree && h->free[i].seg == seg && off + bytes == h->free[i].off) {
            h->free[i - 1].bytes += h->free[i].bytes;
            memmove(&h->free[i], &h->free[i + 1], sizeof(*h->free) * (size_t)(h->nfree - i - 1));
            h->nfree--;
        }
        return mkSuccess;
    }
    if (i < h->nfree && h->free[i].seg == seg && off + bytes == h->free[i].off) {
        h->free[i].off = off;
        h->free[i].bytes += bytes;
        return mkSuccess;
    }
    if (h->nfree == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        struct mki_heap_range *n = realloc(h->free, sizeof(*n) * (size_t)cap);
        if (!n) return mki_error(comm, mkErrNoMemory, "out of host memory");
        h->free = n;
        h->cap = cap;
    }
    memmove(&h->free[i + 1], &h->free[i], sizeof(*h->free) * (size_t)(h->nfree - i));
    h->free[i] = (struct mki_heap_range){seg, off, bytes};
    h->nfree++;
    return mkSuccess;
}

/* First fit among the segments of the kind asked for; -1 when none. */
static int free_take(struct mki_heap *h, int host, uint64_t bytes, struct mki_heap_blk *out)
{
    for (int i = 0; i < h->nfree; i++) {
        struct mki_heap_range *r = &h->free[i];
        if (h->seg[r->seg].host != host || r->bytes < bytes) continue;
        *out = (struct mki_heap_blk){r->seg, host, r->off, bytes};
        r->off += bytes;
        r->bytes -= bytes;
        if (r->bytes == 0) {
            memmove(r, r + 1, sizeof(*r) * (size_t)(h->nfree - i - 1));
            h->nfree--;
        }
        return 0;
    }
    return -1;
}

/* ---- segments -------------------------------------------------------------- */

/* A new zeroed device segment of `bytes`, mapped by the node (collective). */
static mkResult_t new_device_segment(struct mkComm *comm, size_t bytes)
{
    struct mki_devrt *d = comm->dev;
    struct mki_heap *h = &d->heap;
    if (h->nseg == MKI_HEAP_MAXSEG)
        return mki_error(comm, mkErrNoMemory, "the symmetric heap has %d segments already; "
                         "raise MK_WORKSPACE_SIZE so that fewer are added", MKI_HEAP_MAXSEG);
    struct mki_heap_seg *s = &h->seg[h->nseg];
    memset(s, 0, sizeof(*s));
    cudaError_t e = cudaMalloc((void **)&s->base, bytes);
    if (e == cudaSuccess) e = cudaMemsetAsync(s->base, 0, bytes, d->side);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->side);
    if (e != cudaSuccess) {
        if (s->base) (void)cudaFree(s->base);
        s->base = NULL;
        (void)cudaGetLastError();
        /* the others still exchange: meet them with a failed entry */
        (void)share_segment(comm, s);
        return mki_error(comm, e == cudaErrorMemoryAllocation ? mkErrNoMemory : mkErrCuda,
                         "cannot allocate %zu bytes of symmetric heap on CUDA device %d: %s",
                         bytes, d->dev, cudaGetErrorString(e));
    }
    s->dev = s->base;
    s->bytes = bytes;
    mkResult_t res = share_segment(comm, s);
    if (res != mkSuccess) {
        unmap_segment(s);
        (void)cudaFree(s->base);
        return res;
    }
    h->nseg++;
    MKI_INFO(MKI_SUB_MEM, "symmetric heap: segment %d of %zu MiB", h->nseg - 1, bytes >> 20);
    return free_insert(comm, h, h->nseg - 1, 0, bytes);
}

/* None of it is a stream operation, so a segment may be added while the
 * caller's stream is being captured: the thread's capture mode is relaxed
 * for the while (allocation, zeroing on the runtime's own stream, IPC). */
static mkResult_t add_device_segment(struct mkComm *comm, size_t bytes)
{
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    MKI_CUDA(comm, cudaThreadExchangeStreamCaptureMode(&mode));
    mkResult_t res = new_device_segment(comm, bytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    return res;
}

static mkResult_t add_host_segment(struct mkComm *comm, size_t bytes)
{
    struct mki_heap *h = &comm->dev->heap;
    struct mki_heap_seg *s = &h->seg[h->nseg];
    memset(s, 0, sizeof(*s));
    MKI_CUDA(comm, cudaHostAlloc((void **)&s->base, bytes,
                                 cudaHostAllocMapped | cudaHostAllocPortable));
    memset(s->base, 0, bytes);
    MKI_CUDA(comm, cudaHostGetDevicePointer((void **)&s->dev, s->base, 0));
    s->bytes = bytes;
    s->host = 1;
    h->host_seg = h->nseg++;
    return free_insert(comm, h, h->host_seg, 0, bytes);
}

mkResult_t mki_heap_create(struct mkComm *comm, size_t dev_bytes, size_t host_bytes)
{
    struct mki_heap *h = &comm->dev->heap;
    h->host_seg = -1;
    dev_bytes = (dev_bytes + MKI_HEAP_ALIGN - 1) / MKI_HEAP_ALIGN * MKI_HEAP_ALIGN;
    MKI_CHECK(add_device_segment(comm, dev_bytes));
    /* the control block (abort and claim words) is never handed out */
    struct mki_heap_blk ctl;
    if (free_take(h, 0, MKI_CTL_BYTES, &ctl) != 0 || ctl.off != 0)
        return mki_error(comm, mkErrInternal, "symmetric heap: no room for the control block");
    if (host_bytes)
        MKI_CHECK(add_host_segment(comm, (host_bytes + MKI_HEAP_ALIGN - 1) / MKI_HEAP_ALIGN *
                                               MKI_HEAP_ALIGN));
    return mkSuccess;
}

void mki_heap_destroy(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    struct mki_heap *h = &d->heap;
    for (int i = 0; i < h->nseg && !d->aborted; i++) {
        struct mki_heap_seg *s = &h->seg[i];
        if (s->host) {
            (void)cudaFreeHost(s->base);
            continue;
        }
        unmap_segment(s);
        (void)cudaFree(s->base);
    }
    free(h->free);
    memset(h, 0, sizeof(*h));
    h->host_seg = -1;
}

mkResult_t mki_heap_alloc(struct mkComm *comm, int host, uint64_t bytes, int zero,
                          const char *what, struct mki_heap_blk *out)
{
    struct mki_devrt *d = comm->dev;
    struct mki_heap *h = &d->heap;
    bytes = (bytes + MKI_HEAP_ALIGN - 1) / MKI_HEAP_ALIGN * MKI_HEAP_ALIGN;
    if (bytes == 0) bytes = MKI_HEAP_ALIGN;
    if (host && h->host_seg < 0)
        return mki_error(comm, mkErrInternal, "%s: no host segment in this communicator's "
                         "heap (one node)", what);
    if (free_take(h, host, bytes, out) != 0) {
        if (host)
            return mki_error(comm, mkErrNoMemory, "%s: %llu bytes do not fit the host "
                             "segment of the symmetric heap", what, (unsigned long long)bytes);
        size_t seg = bytes < MKI_HEAP_GRAIN ? MKI_HEAP_GRAIN : bytes;
        MKI_CHECK(add_device_segment(comm, seg));
        if (free_take(h, 0, bytes, out) != 0)
            return mki_error(comm, mkErrInternal, "%s: the new heap segment has no room", what);
    }
    if (zero && host) memset(h->seg[out->seg].base + out->off, 0, bytes);
    if (zero && !host) {
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        (void)cudaThreadExchangeStreamCaptureMode(&mode);
        cudaError_t e = cudaMemsetAsync(h->seg[out->seg].base + out->off, 0, bytes, d->side);
        if (e == cudaSuccess) e = cudaStreamSynchronize(d->side);
        (void)cudaThreadExchangeStreamCaptureMode(&mode);
        if (e != cudaSuccess) {
            mki_heap_free(comm, out);
            return mki_cuda_error(comm, e, what, __FILE__, __LINE__);
        }
    }
    /* Peers write into a zeroed block (counters) as soon as they start an
     * op that uses it: every rank's zeroing must be done before any rank
     * goes on, or a fast peer's first signal is wiped by a slow rank's
     * memset (seen on 2 H200: the first call of a communicator timed out
     * on one rank, its arrive counter back at 0). */
    if (zero) {
        mkResult_t r = comm->boot->barrier(comm->boot_ctx);
        if (r != mkSuccess) {
            mki_heap_free(comm, out);
            return mki_error(comm, r, "%s: the barrier after zeroing it failed: %s", what,
                             mki_thread_error());
        }
    }
    MKI_TRACE(MKI_SUB_MEM, "heap: %s: %llu bytes at segment %d offset %llu", what,
              (unsigned long long)bytes, out->seg, (unsigned long long)out->off);
    return mkSuccess;
}

void mki_heap_free(struct mkComm *comm, const struct mki_heap_blk *b)
{
    if (!comm->dev || b->bytes == 0) return;
    if (free_insert(comm, &comm->dev->heap, b->seg, b->off, b->bytes) != mkSuccess)
        MKI_WARN(MKI_SUB_MEM, "heap: a block of %llu bytes is lost (out of host memory)",
                 (unsigned long long)b->bytes);
}

char *mki_heap_ptr(const struct mkComm *comm, const struct mki_heap_blk *b, int l)
{
    const struct mki_heap_seg *s = &comm->dev->heap.seg[b->seg];
    if (s->host) return l == comm->dev->me ? s->dev + b->off : NULL;
    return s->peer[l] ? s->peer[l] + b->off : NULL;
}

char *mki_heap_host(const struct mkComm *comm, const struct mki_heap_blk *b)
{
    const struct mki_heap_seg *s = &comm->dev->heap.seg[b->seg];
    return s->host ? s->base + b->off : NULL;
}
