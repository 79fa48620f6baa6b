/*
 * reg.c - user buffers the communicator's ranks map: mkMemAlloc/mkMemFree and
 * mkCommRegister/mkCommDeregister.
 *
 * mkMemAlloc and mkCommRegister are collective: every rank of the
 * communicator calls them in the same order, each with its own buffer.
 *   1. allgather {IPC handle of the buffer's allocation, offset, bytes,
 *      pid, ok} over all ranks (a rank that refuses its arguments still
 *      takes part, with ok = 0, so nobody waits for it);
 *   2. map every local peer's buffer (one cudaIpcOpenMemHandle per peer
 *      allocation, shared by the registrations inside it; a rank of my
 *      process is used as is);
 *   3. allgather {ok, where I map each local rank's buffer}: each rank
 *      learns where every peer sees its own buffer (seen_by), which is
 *      what a kernel tells a peer that writes into it.
 * Deregistration (mkCommDeregister, mkMemFree) is collective too: each
 * rank waits for its device, drops its mappings, then all meet at a
 * barrier, so no peer still maps a buffer that its owner frees.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "mem/mem.h"


struct reg_info {
    cudaIpcMemHandle_t handle;
    uint64_t base, off, bytes;
    uint64_t host_hash;
    int32_t pid, ok;
};

struct reg_view {
    uint64_t at[MKI_MAXLOCAL];  /* where I map local rank l's buffer */
    int32_t ok, pad;
};

typedef int (*range_fn)(unsigned long long *base, size_t *size,
                        unsigned long long ptr);

/* The allocation that holds p (cuMemGetAddressRange, from the driver). */
static int alloc_base(const void *p, char **base)
{
    static range_fn fn;
    if (!fn) {
        void *f = NULL;
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !f) {
            (void)cudaGetLastError();
            return -1;
        }
        fn = (range_fn)f;
    }
    unsigned long long b = 0;
    size_t n = 0;
    if (fn(&b, &n, (unsigned long long)(uintptr_t)p) != 0) return -1;
    *base = (char *)(uintptr_t)b;
    return 0;
}

static void map_put(struct mki_devrt *d, struct mki_ipc_map *m)
{
    if (!m || --m->refs > 0) return;
    for (struct mki_ipc_map **pp = &d->maps; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    (void)cudaIpcCloseMemHandle(m->base);
    (void)cudaGetLastError();
    free(m);
}

static mkResult_t map_get(struct mkComm *comm, int l,
                          const cudaIpcMemHandle_t *h, struct mki_ipc_map **out)
{
    struct mki_devrt *d = comm->dev;
    for (struct mki_ipc_map *m = d->maps; m; m = m->next)
        if (m->local == l && !memcmp(&m->handle, h, sizeof(*h))) {
            m->refs++;
            *out = m;
            return mkSuccess;
        }
    struct mki_ipc_map *m = calloc(1, sizeof(*m));
    if (!m) return mki_error(comm, mkErrNoMemory, "out of host memory");
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, *h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        free(m);
        return mki_error(comm, mkErrCuda, "cannot map the buffer of rank %d: "
                         "cudaIpcOpenMemHandle: %s", d->comm_rank[l],
                         cudaGetErrorString(e));
    }
    m->local = l;
    m->handle = *h;
    m->base = p;
    m->refs = 1;
    m->next = d->maps;
    d->maps = m;
    *out = m;
    return mkSuccess;
}

static void reg_unmap(struct mki_devrt *d, struct mki_reg *r)
{
    for (int l = 0; l < MKI_MAXLOCAL; l++) {
        map_put(d, r->map[l]);
        r->map[l] = NULL;
        r->peer_buf[l] = NULL;
    }
}

/* Steps 1-3 of the top for this rank's buffer (ptr may be NULL when
 * `why` already says what is wrong here: the rank takes part with ok = 0).
 * On failure nothing stays mapped and every rank returns an error. */
static mkResult_t reg_share(struct mkComm *comm, const char *func,
                            struct mki_reg *r, const char *why)
{
    struct mki_devrt *d = comm->dev;
    mkResult_t res = mkSuccess;
    char local_why[256] = "";
    struct reg_info *all = calloc((size_t)comm->nranks, sizeof(*all));
    struct reg_view *views = calloc((size_t)comm->nranks, sizeof(*views));
    if (!all || !views) {
        free(all);
        free(views);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    struct reg_info *me = &all[comm->rank];
    me->pid = (int32_t)getpid();
    me->host_hash = comm->hosts[comm->rank].host_hash;
    me->ok = why == NULL;
    if (me->ok) {
        char *base = NULL;
        cudaError_t e = cudaSuccess;
        if (alloc_base(r->ptr, &base) != 0)
            snprintf(local_why, sizeof local_why, "cannot find the allocation "
                     "holding %p (cuMemGetAddressRange)", r->ptr);
        else if ((e = cudaIpcGetMemHandle(&me->handle, base)) != cudaSuccess)
            snprintf(local_why, sizeof local_why, "cudaIpcGetMemHandle(%p): %s "
                     "(memory from cudaMallocAsync pools or VMM cannot be "
                     "shared this way; use cudaMalloc or mkMemAlloc)",
                     (void *)base, cudaGetErrorString(e));
        (void)cudaGetLastError();
        me->base = (uint64_t)(uintptr_t)base;
        me->off = (uint64_t)((char *)r->ptr - base);
        me->bytes = r->bytes;
        me->ok = local_why[0] == 0;
        if (!me->ok) why = local_why;
    }
    res = comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s: %s", func, mki_thread_error());
        goto out;
    }
    /* My own refusal first (it says why), else the first rank's. */
    for (int i = 0; i < comm->nranks; i++) {
        int q = (comm->rank + i) % comm->nranks;
        if (!all[q].ok) {
            if (q == comm->rank)
                res = mki_error(comm, mkErrInvalidArgument, "%s: %s (nothing "
                                "was registered on any rank)", func, why);
            else
                res = mki_error(comm, mkErrInvalidArgument, "%s: rank %d "
                                "refused its buffer (its own error says why; "
                                "every rank calls %s, in the same order); "
                                "nothing was registered", func, q, func);
            goto out;
        }
    }
    /* Step 2: map every local peer's buffer. */
    struct reg_view *mine = &views[comm->rank];
    mine->ok = 1;
    for (int l = 0; l < d->nlocal && mine->ok; l++) {
        int q = d->comm_rank[l];
        if (l == d->me) {
            mine->at[l] = (uint64_t)(uintptr_t)r->ptr;
            continue;
        }
        if (all[q].pid == me->pid && all[q].host_hash == me->host_hash) {
            r->peer_buf[l] = (char *)(uintptr_t)(all[q].base + all[q].off);
        } else {
            if (map_get(comm, l, &all[q].handle, &r->map[l]) != mkSuccess) {
                mine->ok = 0;
                snprintf(local_why, sizeof local_why, "%s", mkGetLastError(comm));
                break;
            }
            r->peer_buf[l] = r->map[l]->base + all[q].off;
        }
        mine->at[l] = (uint64_t)(uintptr_t)r->peer_buf[l];
    }
    /* Step 3. */
    res = comm->boot->allgather(comm->boot_ctx, views, sizeof(*views));
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s: %s", func, mki_thread_error());
        reg_unmap(d, r);
        goto out;
    }
    for (int q = 0; q < comm->nranks; q++)
        if (!views[q].ok) {
            reg_unmap(d, r);
            if (q == comm->rank)
                res = mki_error(comm, mkErrCuda, "%s: %s", func, local_why);
            else
                res = mki_error(comm, mkErrCuda, "%s: rank %d could not map "
                                "this rank's buffer (its own error says why); "
                                "nothing was registered", func, q);
            goto out;
        }
    for (int l = 0; l < d->nlocal; l++)
        r->seen_by[l] = views[d->comm_rank[l]].at[d->me];
out:
    free(all);
    free(views);
    return res;
}

static void reg_link(struct mki_devrt *d, struct mki_reg *r)
{
    pthread_mutex_lock(&d->reg_lock);
    r->next = d->regs;
    d->regs = r;
    d->nregs++;
    pthread_mutex_unlock(&d->reg_lock);
}

static struct mki_reg *reg_unlink(struct mki_devrt *d, void *ptr, int owned,
                                  int *wrong_kind)
{
    struct mki_reg *found = NULL;
    *wrong_kind = 0;
    pthread_mutex_lock(&d->reg_lock);
    for (struct mki_reg **pp = &d->regs; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == ptr) {
            if ((*pp)->owned != owned) {
                *wrong_kind = 1;
                break;
            }
            found = *pp;
            *pp = found->next;
            d->nregs--;
            break;
        }
    pthread_mutex_unlock(&d->reg_lock);
    return found;
}

void mki_reg_free_all(struct mki_devrt *d)
{
    struct mki_reg *r = d->regs;
    while (r) {
        struct mki_reg *n = r->next;
        if (!d->aborted) {
            reg_unmap(d, r);
            if (r->owned) (void)cudaFree(r->ptr);
        }
        free(r);
        r = n;
    }
    d->regs = NULL;
    if (!d->aborted)
        while (d->maps) map_put(d, d->maps);
}

int mki_devrt_is_registered(struct mkComm *comm, const void *ptr,
                            size_t bytes, uint64_t *seen_by)
{
    struct mki_devrt *d = comm->dev;
    if (!d) return 0;
    int found = 0;
    uintptr_t p = (uintptr_t)ptr;
    pthread_mutex_lock(&d->reg_lock);
    for (struct mki_reg *r = d->regs; r && !found; r = r->next) {
        found = p >= (uintptr_t)r->ptr && bytes <= r->bytes &&
                p - (uintptr_t)r->ptr <= r->bytes - bytes;
        if (found && seen_by)
            for (int l = 0; l < MKI_MAXLOCAL; l++)
                seen_by[l] = l < d->nlocal ? r->seen_by[l] + (p - (uintptr_t)r->ptr) : 0;
    }
    pthread_mutex_unlock(&d->reg_lock);
    return found;
}

/* Everything a rank checks before it takes part; NULL when all is well,
 * otherwise the reason (the rank still takes part, with ok = 0). */
static const char *check_buffer(struct mkComm *comm, const void *buf,
                                char *why, size_t len)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, buf);
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice ||
        a.device != comm->dev->dev) {
        (void)cudaGetLastError();
        snprintf(why, len, "buf %p is not device memory of CUDA device %d; "
                 "register cudaMalloc'ed memory of the communicator's device",
                 buf, comm->dev->dev);
        return why;
    }
    if (mki_devrt_is_registered(comm, buf, 1, NULL)) {
        snprintf(why, len, "buf %p lies in a buffer registered already; "
                 "deregister that one first", buf);
        return why;
    }
    return NULL;
}

/* A rank that cannot take part at all (no GPU) still meets the others
 * in both exchanges, so they fail instead of waiting for it. */
static mkResult_t reg_absent(struct mkComm *comm, const char *func,
                             const char *bad)
{
    struct reg_info *all = calloc((size_t)comm->nranks, sizeof(*all));
    if (all) (void)comm->boot->allgather(comm->boot_ctx, all, sizeof(*all));
    free(all);
    if (bad) return mki_error(comm, mkErrInvalidArgument, "%s: %s", func, bad);
    return mki_devrt_require(comm, func);
}

MK_API mkResult_t mkMemAlloc(mkComm_t comm, size_t size, void **ptr)
{
    MKI_CHECK(mki_comm_check(comm, "mkMemAlloc"));
    char why[256];
    const char *bad = NULL;
    if (ptr == NULL) bad = "ptr is NULL; pass the address of a void *";
    else if (size == 0) bad = "size is 0; ask for at least one byte";
    if (comm->dev == NULL) return reg_absent(comm, "mkMemAlloc", bad);
    struct mki_reg *r = calloc(1, sizeof(*r));
    if (!r) return mki_error(comm, mkErrNoMemory, "out of host memory");
    int prev = 0;
    (void)cudaGetDevice(&prev);
    cudaError_t e = cudaSuccess;
    if (!bad) {
        e = cudaSetDevice(comm->dev->dev);
        if (e == cudaSuccess) e = cudaMalloc(&r->ptr, size);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, sizeof why, "cudaMalloc(%zu bytes): %s", size,
                     cudaGetErrorString(e));
            bad = why;
            r->ptr = NULL;
        }
    }
    r->bytes = size;
    r->owned = 1;
    mkResult_t res = reg_share(comm, "mkMemAlloc", r, bad);
    if (res != mkSuccess && e == cudaErrorMemoryAllocation)
        res = mki_error(comm, mkErrNoMemory, "mkMemAlloc: %s", why);
    if (res == mkSuccess) {
        reg_link(comm->dev, r);
        *ptr = r->ptr;
    } else {
        if (r->ptr) (void)cudaFree(r->ptr);
        free(r);
    }
    (void)cudaSetDevice(prev);
    return res;
}

MK_API mkResult_t mkCommRegister(mkComm_t comm, void *buf, size_t size,
                                 void **handle)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommRegister"));
    char why[256];
    const char *bad = NULL;
    if (buf == NULL) bad = "buf is NULL; pass a device buffer";
    else if (handle == NULL) bad = "handle is NULL; pass the address of a void *";
    else if (size == 0) bad = "size is 0; pass the buffer's size in bytes";
    if (comm->dev == NULL) return reg_absent(comm, "mkCommRegister", bad);
    if (!bad) bad = check_buffer(comm, buf, why, sizeof why);
    struct mki_reg *r = calloc(1, sizeof(*r));
    if (!r) return mki_error(comm, mkErrNoMemory, "out of host memory");
    r->ptr = buf;
    r->bytes = size;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(comm->dev->dev);
    mkResult_t res = reg_share(comm, "mkCommRegister", r, bad);
    (void)cudaSetDevice(prev);
    if (res != mkSuccess) {
        free(r);
        return res;
    }
    reg_link(comm->dev, r);
    *handle = buf;
    return mkSuccess;
}

/* Collective end of a registration: wait for my device (no kernel of
 * mine still writes into a peer's buffer), drop my mappings, meet every
 * rank (then no peer maps mine), free what mkMemAlloc allocated. */
static mkResult_t reg_drop(struct mkComm *comm, const char *func, void *ptr,
                           int owned)
{
    struct mki_devrt *d = comm->dev;
    int wrong = 0;
    struct mki_reg *r = d && ptr ? reg_unlink(d, ptr, owned, &wrong) : NULL;
    int prev = 0;
    cudaError_t e = cudaSuccess;
    if (d) {
        (void)cudaGetDevice(&prev);
        e = cudaSetDevice(d->dev);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) (void)cudaGetLastError();
        if (r) reg_unmap(d, r);
    }
    mkResult_t res = comm->boot->barrier(comm->boot_ctx);
    if (res != mkSuccess)
        res = mki_error(comm, res, "%s: %s", func, mki_thread_error());
    /* Freed only once every rank has met: a peer may map it until then
     * (a failed barrier leaves it allocated). */
    if (r && owned && res == mkSuccess) {
        cudaError_t f = cudaFree(r->ptr);
        if (f != cudaSuccess && res == mkSuccess)
            res = mki_error(comm, mkErrCuda, "%s: cudaFree: %s", func,
                            cudaGetErrorString(f));
    }
    free(r);
    if (d) (void)cudaSetDevice(prev);
    if (res != mkSuccess) return res;
    if (!ptr)
        return mki_error(comm, mkErrInvalidArgument, "%s: the handle is "
                         "NULL", func);
    if (!d) return mki_devrt_require(comm, func);
    if (wrong)
        return mki_error(comm, mkErrInvalidArgument, owned
                         ? "%s: %p was registered with mkCommRegister; "
                           "release it with mkCommDeregister"
                         : "%s: %p came from mkMemAlloc; release it with "
                           "mkMemFree", func, ptr);
    if (!r)
        return mki_error(comm, mkErrInvalidArgument, owned
                         ? "%s: %p was not returned by mkMemAlloc on this "
                           "communicator"
                         : "%s: %p is not a handle from mkCommRegister on "
                           "this communicator", func, ptr);
    if (e != cudaSuccess)
        return mki_error(comm, mkErrCuda, "%s: waiting for the device: %s",
                         func, cudaGetErrorString(e));
    return mkSuccess;
}

MK_API mkResult_t mkMemFree(mkComm_t comm, void *ptr)
{
    MKI_CHECK(mki_comm_check(comm, "mkMemFree"));
    if (ptr == NULL) return mkSuccess; /* as free(NULL); not collective */
    return reg_drop(comm, "mkMemFree", ptr, 1);
}

MK_API mkResult_t mkCommDeregister(mkComm_t comm, void *handle)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommDeregister"));
    return reg_drop(comm, "mkCommDeregister", handle, 0);
}
