/*
 * validate.c - argument checks every op shares: element types, device
 * pointers, overlaps, and the first call of a shape checked on every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "mem/mem.h"
#include "ops/op.h"

int mki_dtype_bytes(mkDataType_t t)
{
    switch (t) {
    case mkBfloat16: return 2;
    case mkFloat16: return 2;
    case mkFloat32: return 4;
    default: return 0;
    }
}

int mki_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return a && b && na && nb && x < y + nb && y < x + na;
}

mkResult_t mki_check_dev_ptr(struct mkComm *comm, const char *func, const char *name,
                             const void *p, size_t align)
{
    const int dev = comm->dev->dev;
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (e != cudaSuccess || a.type != cudaMemoryTypeDevice)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is not device memory (%s); "
                         "pass memory from cudaMalloc or mkMemAlloc on CUDA device %d", func,
                         name, p, e != cudaSuccess ? cudaGetErrorString(e)
                         : a.type == cudaMemoryTypeHost ? "host memory"
                         : a.type == cudaMemoryTypeManaged ? "managed memory"
                         : "unregistered host memory", dev);
    if (a.device != dev)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is memory of CUDA device %d "
                         "but the communicator uses device %d", func, name, p, a.device, dev);
    if ((uintptr_t)p % align != 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: %s = %p is not aligned to %zu "
                         "bytes, which the kernel needs", func, name, p, align);
    return mkSuccess;
}

uint64_t mki_hash64(uint64_t h, uint64_t v)
{
    return (h ^ v) * 1099511628211ull;
}

uint64_t mki_hash_counts(const struct mkComm *comm, const int64_t *counts)
{
    uint64_t h = 0;
    for (int i = 0; counts && i < comm->nranks; i++) h = mki_hash64(h, (uint64_t)counts[i]) + 1;
    return h;
}

mkResult_t mki_check_gemm_args(struct mkComm *comm, const char *func, mkDataType_t dtype,
                               int trans_b, int64_t m, int64_t n, int64_t k, const char *kwhat,
                               int *es)
{
    if (dtype == mkFloat32)
        return mki_error(comm, mkErrUnsupported, "%s: dtype mkFloat32 is not supported; use "
                         "mkBfloat16 or mkFloat16 (accumulation is fp32 either way)", func);
    *es = mki_dtype_bytes(dtype);
    if (*es == 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: dtype = %d is not a mkDataType_t; "
                         "use mkBfloat16 or mkFloat16", func, (int)dtype);
    if (trans_b != 0 && trans_b != 1)
        return mki_error(comm, mkErrInvalidArgument, "%s: transB = %d; pass 0 (B is k x n) or "
                         "1 (B is n x k)", func, trans_b);
    if (m < 0 || n < 0 || k < 0)
        return mki_error(comm, mkErrInvalidArgument, "%s: negative size (m = %lld, n = %lld, "
                         "k = %lld)", func, (long long)m, (long long)n, (long long)k);
    if (k == 0 || k % 8 != 0 || (!trans_b && n % 8 != 0))
        return mki_error(comm, mkErrUnsupported, "%s: k = %lld and n = %lld: k (%s) must be a "
                         "positive multiple of 8, and so must n when transB = 0 (rows of A "
                         "and B are loaded by TMA, which needs 16-byte row strides); pad the "
                         "matrices with zeros", func, (long long)k, (long long)n, kwhat);
    return mkSuccess;
}

/* The other ranks' own verdicts on their arguments (the record's first
 * int32 is its rank's "ok"). */
static mkResult_t others_ok(struct mkComm *comm, const char *func, const char *all, size_t rec)
{
    for (int r = 0; r < comm->nranks; r++) {
        int32_t ok;
        memcpy(&ok, all + (size_t)r * rec, sizeof(ok));
        if (!ok)
            return mki_error(comm, mkErrInvalidArgument, "%s: rank %d rejected its arguments "
                             "for this shape (its mkGetLastError says why); no rank computed",
                             func, r);
    }
    return mkSuccess;
}

int mki_shape_known(const struct mki_shape_cache *cache, uint64_t hash)
{
    for (int i = 0; i < cache->n; i++)
        if (cache->hash[i] == hash) return 1;
    return 0;
}

void mki_shape_remember(struct mki_shape_cache *cache, uint64_t hash)
{
    if (cache->n < MKI_SHAPES) {
        cache->hash[cache->n++] = hash;
        return;
    }
    cache->hash[cache->next] = hash;
    cache->next = (cache->next + 1) % MKI_SHAPES;
}

mkResult_t mki_agree_shape(struct mkComm *comm, struct mki_shape_cache *cache,
                           const char *func, uint64_t hash, void *records, size_t rec,
                           mkResult_t local, mki_shape_cmp compare, const void *ctx)
{
    if (local == mkSuccess && cache && mki_shape_known(cache, hash)) return mkSuccess;
    char saved[MKI_ERRMSG_LEN];
    snprintf(saved, sizeof(saved), "%s", mkGetLastError(comm));
    const int32_t ok = local == mkSuccess;
    memcpy((char *)records + (size_t)comm->rank * rec, &ok, sizeof(ok));
    mkResult_t r = comm->boot->allgather(comm->boot_ctx, records, rec);
    if (r != mkSuccess)
        return mki_error(comm, r, "%s: the shape check with the other ranks failed (bootstrap "
                         "allgather: %s); is every rank making this call?", func,
                         mki_thread_error());
    /* Disagreement between ranks first, then this rank's own detail. */
    r = compare(comm, records, rec, ctx);
    if (r == mkSuccess && local != mkSuccess) {
        mki_error_quiet(comm, "%s", saved);
        r = local;
    }
    if (r == mkSuccess) r = others_ok(comm, func, records, rec);
    if (r != mkSuccess || !cache) return r;
    mki_shape_remember(cache, hash);
    return mkSuccess;
}
