/*
 * copy.cuh - moving bytes inside a kernel: 16-byte register copies by the
 * threads of a role, and a TMA bulk-copy pipe (global -> shared ->
 * global) driven by one thread.
 *
 * Register stores move about 20 GB/s per CTA over NVLink and can combine
 * data on the way; TMA bulk copies about 43 GB/s per CTA from one thread,
 * leaving the CTA's other warps free (REFERENCE.md).
 */
#ifndef MKI_COPY_CUH
#define MKI_COPY_CUH

#include <stdint.h>

#include "ptx.cuh"

namespace mki {

/* Loads bypass L1: slots are rewritten by peers between uses. */
__device__ __forceinline__ uint4 ld16(const void *p) { return __ldcg(reinterpret_cast<const uint4 *>(p)); }

/* Copy n bytes (a multiple of 2) with the threads [tid, nthr) of a role:
 * 16-byte vectors, 8 in flight per thread, when both ends are 16-byte
 * aligned; 4-byte or 2-byte words otherwise. */
__device__ __forceinline__ void copy_bytes(char *dst, const char *src, uint64_t n, int tid, int nthr)
{
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const uint64_t nv = n / 16;
        const uint4 *s = reinterpret_cast<const uint4 *>(src);
        uint4 *d = reinterpret_cast<uint4 *>(dst);
        constexpr int U = 8;
        uint64_t i = tid;
        for (; i + (uint64_t)(U - 1) * nthr < nv; i += (uint64_t)U * nthr) {
            uint4 r[U];
#pragma unroll
            for (int u = 0; u < U; u++) r[u] = ld16(s + i + (uint64_t)u * nthr);
#pragma unroll
            for (int u = 0; u < U; u++) d[i + (uint64_t)u * nthr] = r[u];
        }
        for (; i < nv; i += nthr) d[i] = ld16(s + i);
        const uint64_t done = nv * 16;
        for (uint64_t j = done + 2 * (uint64_t)tid; j < n; j += 2 * (uint64_t)nthr)
            *reinterpret_cast<uint16_t *>(dst + j) = __ldcg(reinterpret_cast<const unsigned short *>(src + j));
    } else if ((((uintptr_t)dst | (uintptr_t)src | n) & 3) == 0) {
        for (uint64_t j = 4 * (uint64_t)tid; j < n; j += 4 * (uint64_t)nthr)
            *reinterpret_cast<uint32_t *>(dst + j) = __ldcg(reinterpret_cast<const unsigned int *>(src + j));
    } else {
        for (uint64_t j = 2 * (uint64_t)tid; j < n; j += 2 * (uint64_t)nthr)
            *reinterpret_cast<uint16_t *>(dst + j) = __ldcg(reinterpret_cast<const unsigned short *>(src + j));
    }
}

/* ---- TMA bulk copies (cp.async.bulk), issued by one thread ------------- */

/* A pipe of MKI_TMA_STAGES pieces in shared memory: loads run
 * MKI_TMA_AHEAD pieces ahead of the stores, and up to STAGES - AHEAD
 * stores are in flight (bytes in flight are what a CTA's NVLink rate is
 * made of: about 2 us x rate). */
#define MKI_TMA_STAGES 6
#define MKI_TMA_AHEAD 2
#define MKI_TMA_PIECE (32u << 10)
#define MKI_TMA_MAXPIPES 3
#define MKI_TMA_SMEM (MKI_TMA_STAGES * MKI_TMA_PIECE + MKI_TMA_MAXPIPES * 8 * MKI_TMA_STAGES)

struct tma_pipe {
    char *smem;      /* MKI_TMA_STAGES pieces of `piece` bytes */
    uint64_t *mbar;  /* MKI_TMA_STAGES mbarriers (shared) */
    uint32_t piece;
    uint32_t phase;  /* parity bit of each stage */
    uint32_t used;   /* pieces moved so far (stage = used % STAGES) */
    uint64_t *sig;   /* tma_copy_signal: the counter to raise once the
                      * last copy's stores complete (NULL: none pending) */
    uint64_t sigv;   /* ... and its value */
};

__device__ __forceinline__ void tma_init(tma_pipe &t, char *smem, uint64_t *mbar, uint32_t piece)
{
    t.smem = smem;
    t.mbar = mbar;
    t.piece = piece;
    t.phase = 0;
    t.used = 0;
    t.sig = NULL;
    t.sigv = 0;
    for (int s = 0; s < MKI_TMA_STAGES; s++) mbar_init(&t.mbar[s], 1);
    mbar_init_fence();
    fence_proxy_async_smem();
}

/* Raise the counter a tma_copy_signal left pending (its stores complete:
 * ordered before the release store).  One thread. */
__device__ __forceinline__ void tma_release_pending(tma_pipe &t)
{
    fence_proxy_async_global();
    __threadfence_system();
    st_release_sys(t.sig, t.sigv);
    t.sig = NULL;
}

/* The pipe's loop: n bytes (a multiple of 16, both ends 16-byte aligned)
 * global -> shared -> global, the loads MKI_TMA_AHEAD pieces ahead of the
 * stores, one bulk group per stored piece; returns with the last stores
 * in flight.  A counter left pending by an earlier tma_copy_signal is
 * raised once this copy's first piece is stored (the earlier stores
 * complete by then, while this copy's next pieces load).  The pipe's
 * fields are read once into registers and written back at the end (the
 * pipe itself lives in local memory). */
__device__ __forceinline__ void tma_pipe_run(tma_pipe &t, char *dst, const char *src, uint64_t n)
{
    char *const smem = t.smem;
    uint64_t *const mbar = t.mbar;
    const uint32_t pb = t.piece, base = t.used;
    uint32_t phase = t.phase;
    const uint64_t np = (n + pb - 1) / pb;
    /* Order the generic accesses before (the acquire of a signal, stores
     * of the source) with the bulk copies' async-proxy accesses. */
    fence_proxy_async_global();
    for (uint64_t j = 0; j < np + MKI_TMA_AHEAD; j++) {
        if (j < np) {
            /* load piece base + j; its stage was last read by the store of
             * piece base + j - STAGES.  Stores issued: base + j - AHEAD
             * (base while j < AHEAD, when an earlier tma_copy_signal's may
             * still be reading), so allowing STAGES - AHEAD - 1 of them
             * pending covers both */
            static_assert(MKI_TMA_STAGES - MKI_TMA_AHEAD - 1 == 3, "wait_group.read count");
            bulk_wait_read<3>();
            const uint64_t r = n - j * pb;
            const uint32_t len = r < pb ? (uint32_t)r : pb;
            const int s = (int)((base + j) % MKI_TMA_STAGES);
            mbar_expect_tx(&mbar[s], len);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                         "[%0], [%1], %2, [%3];"
                         ::"r"(smem_u32(smem + (size_t)s * pb)), "l"(src + j * pb), "r"(len),
                         "r"(smem_u32(&mbar[s]))
                         : "memory");
        }
        if (j >= MKI_TMA_AHEAD) {
            /* store piece i = j - AHEAD once it has landed */
            const uint64_t i = j - MKI_TMA_AHEAD;
            const uint64_t r = n - i * pb;
            const uint32_t len = r < pb ? (uint32_t)r : pb;
            const int s = (int)((base + i) % MKI_TMA_STAGES);
            mbar_wait(&mbar[s], (int)((phase >> s) & 1u));
            phase ^= 1u << s;
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                         ::"l"(dst + i * pb), "r"(smem_u32(smem + (size_t)s * pb)), "r"(len)
                         : "memory");
            bulk_commit();
            if (i == 0 && t.sig) {
                bulk_wait_done<1>();
                tma_release_pending(t);
            }
        }
    }
    t.used = base + (uint32_t)np;
    t.phase = phase;
}

/* Copy n bytes (n > 0, a multiple of 16, both ends 16-byte aligned)
 * global -> shared -> global.  Returns with every store complete and
 * ordered before later generic stores of this thread (for the release
 * that follows), and nothing pending. */
static __device__ __noinline__ void tma_copy(tma_pipe &t, char *dst, const char *src, uint64_t n)
{
    tma_pipe_run(t, dst, src, n);
    bulk_wait_all();
    fence_proxy_async_global();
}

/* Every copy's stores complete, and the pending counter raised. */
static __device__ __noinline__ void tma_flush(tma_pipe &t)
{
    if (!t.sig) return;
    bulk_wait_all();
    tma_release_pending(t);
}

/* Copy like tma_copy, then raise *sig to v once these stores complete,
 * without waiting for them: the pipe keeps the release pending until the
 * next copy's first piece is stored (its loads overlap these last stores
 * instead of starting on an empty pipe, and the counter goes out about
 * one store latency later than after a drain), or until tma_flush.  The
 * caller flushes before anything that may wait for the receiver (a
 * credit) and at its end.  This copy's loads have all landed when it
 * returns: the source may be reused. */
static __device__ __noinline__ void tma_copy_signal(tma_pipe &t, char *dst, const char *src,
                                                    uint64_t n, uint64_t *sig, uint64_t v)
{
    tma_pipe_run(t, dst, src, n);
    t.sig = sig;
    t.sigv = v;
}

/* n bytes by TMA (one thread) when a pipe is given and both ends are
 * 16-byte aligned, the tail and unaligned copies by the role's threads. */
__device__ __forceinline__ void move_bytes(tma_pipe *t, char *dst, const char *src, uint64_t n,
                                           int tid, int nthr)
{
    if (t && (((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
        const uint64_t body = n & ~15ull;
        if (tid == 0 && body) tma_copy(*t, dst, src, body);
        if (n > body) copy_bytes(dst + body, src + body, n - body, tid, nthr);
    } else {
        copy_bytes(dst, src, n, tid, nthr);
    }
}

} /* namespace mki */

#endif /* MKI_COPY_CUH */
