/*
 * devrt.cuh - device primitives of the runtime: signals (release/acquire
 * at system scope), waits with a deadline and abort polling, the error
 * record, and 16-byte vector copies.
 *
 * A wait is done by one leader thread of a role; the role's other threads
 * meet it at a named barrier and then read the CTA's quit flag.  So a
 * failed wait stops the whole CTA within one barrier, and every role of
 * the CTA leaves its loop at its next wait.
 */
#ifndef MKI_DEVRT_CUH
#define MKI_DEVRT_CUH

#include <stdint.h>
#include "rt.h"

namespace mki {

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ld_relaxed_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Named barrier for `nthreads` threads (a multiple of 32) of one role. */
__device__ __forceinline__ void role_sync(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(nthreads) : "memory");
}

template <typename T>
__device__ __forceinline__ T *ws_at(char *ws, uint64_t off)
{
    return reinterpret_cast<T *>(ws + off);
}

/* What a failing wait reports. */
struct wait_site {
    int peer, channel, chunk, phase;
};

/* Record the failure once per rank (claim word in the local workspace),
 * then raise the abort word in every peer's workspace. */
__device__ __noinline__ void fail(const mki_coll_params &p, int kind,
                                  const wait_site &w, uint64_t expected,
                                  uint64_t seen)
{
    uint64_t *claim = ws_at<uint64_t>(p.ws[p.me], MKI_WS_CLAIM);
    if (atomicCAS(reinterpret_cast<unsigned long long *>(claim), 0ull, 1ull) == 0ull) {
        mki_err_record *r = p.err;
        r->kind = kind;
        r->op = p.op;
        r->rank = p.me;
        r->peer = w.peer;
        r->channel = w.channel;
        r->chunk = w.chunk;
        r->phase = w.phase;
        r->expected = expected;
        r->seen = seen;
        r->epoch = p.epoch;
        r->global = p.net_mask != 0;
        __threadfence_system();
        r->valid = 1;
        __threadfence_system();
    }
    /* Abort words hold local indices; ranks on other nodes (ws NULL) are
     * not reached: they time out waiting for this one. */
    if (kind == MKI_ERR_TIMEOUT || kind == MKI_ERR_PROXY) {
        const uint64_t who = (uint64_t)(p.net_mask ? p.me_local : p.me) + 1;
        for (int q = 0; q < p.nranks; q++) {
            if (p.ws[q] == NULL) continue;
            uint64_t *a = ws_at<uint64_t>(p.ws[q], MKI_WS_ABORT);
            if (ld_relaxed_sys(a) == 0) st_relaxed_sys(a, who);
        }
    }
    __threadfence_system();
}

/*
 * Spin until *addr >= target.  Returns false (and sets *quit) when the
 * CTA is quitting, when the local abort word is up (a peer failed or
 * aborted: record MKI_ERR_REMOTE naming it), or when the deadline passes
 * (record MKI_ERR_TIMEOUT, raise every peer's abort word).
 */
__device__ __noinline__ bool wait_geq(const mki_coll_params &p,
                                      const uint64_t *addr, uint64_t target,
                                      const wait_site &w, volatile int *quit)
{
    uint64_t v = ld_acquire_sys(addr);
    if (v >= target) return true;
    const uint64_t *abort_word = ws_at<uint64_t>(p.ws[p.me], MKI_WS_ABORT);
    uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        v = ld_acquire_sys(addr);
        if (v >= target) return true;
        if ((n & 31) != 0) continue;
        if (*quit) return false;
        uint64_t ab = ld_relaxed_sys(abort_word);
        if (ab != 0) {
            wait_site r = w;
            r.peer = (int)ab - 1;
            if (p.net_mask && r.peer >= 0 && r.peer < MKI_MAXLOCAL) r.peer = p.glob[r.peer];
            fail(p, MKI_ERR_REMOTE, r, target, v);
            *quit = 1;
            return false;
        }
        if (globaltimer() - t0 > p.timeout_ns) {
            fail(p, MKI_ERR_TIMEOUT, w, target, v);
            *quit = 1;
            return false;
        }
    }
}

/* ---- copies ----------------------------------------------------------- */

/* Loads bypass L1: slots are rewritten by peers between uses. */
__device__ __forceinline__ uint4 ld16(const void *p) { return __ldcg(reinterpret_cast<const uint4 *>(p)); }

/* Copy n bytes (a multiple of 2) with the threads [tid, nthr) of a role:
 * 16-byte vectors, 8 in flight per thread, when both ends are 16-byte
 * aligned; 4-byte or 2-byte words otherwise. */
__device__ __forceinline__ void copy_bytes(char *dst, const char *src,
                                           uint64_t n, int tid, int nthr)
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
    char *smem;          /* MKI_TMA_STAGES pieces of `piece` bytes */
    uint64_t *mbar;      /* MKI_TMA_STAGES mbarriers (shared) */
    uint32_t piece;
    uint32_t phase;      /* parity bit of each stage */
    uint32_t used;       /* pieces moved so far (stage = used % STAGES) */
};

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void tma_init(tma_pipe &t, char *smem, uint64_t *mbar,
                                         uint32_t piece)
{
    t.smem = smem;
    t.mbar = mbar;
    t.piece = piece;
    t.phase = 0;
    t.used = 0;
    for (int s = 0; s < MKI_TMA_STAGES; s++)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&t.mbar[s])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void tma_load(tma_pipe &t, int s, const char *src, uint32_t n)
{
    uint32_t bar = smem_u32(&t.mbar[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(n) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_u32(t.smem + (size_t)s * t.piece)), "l"(src), "r"(n), "r"(bar) : "memory");
}

__device__ __forceinline__ void tma_wait_load(tma_pipe &t, int s)
{
    uint32_t bar = smem_u32(&t.mbar[s]), parity = (t.phase >> s) & 1u, done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    t.phase ^= 1u << s;
}

__device__ __forceinline__ void tma_store(tma_pipe &t, int s, char *dst, uint32_t n)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(dst), "r"(smem_u32(t.smem + (size_t)s * t.piece)), "r"(n) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Copy n bytes (a multiple of 16, both ends 16-byte aligned) global ->
 * shared -> global.  Returns with every store complete and ordered before
 * later generic stores of this thread (for the release that follows). */
__device__ __noinline__ void tma_copy(tma_pipe &t, char *dst, const char *src, uint64_t n)
{
    const uint64_t np = (n + t.piece - 1) / t.piece;
    const uint32_t base = t.used;
    /* Order the generic accesses before (the acquire of a signal, stores
     * of the source) with the bulk copies' async-proxy accesses. */
    asm volatile("fence.proxy.async.global;" ::: "memory");
    auto piece = [&](uint64_t j) -> uint32_t {
        uint64_t r = n - j * t.piece;
        return r < t.piece ? (uint32_t)r : t.piece;
    };
    /* Every store of earlier chunks has completed (see the end), so every
     * stage is free here. */
    for (uint64_t j = 0; j < np && j < MKI_TMA_AHEAD; j++)
        tma_load(t, (int)((base + j) % MKI_TMA_STAGES), src + j * t.piece, piece(j));
    for (uint64_t j = 0; j < np; j++) {
        const uint64_t l = j + MKI_TMA_AHEAD;
        if (l < np) {
            /* The stage of piece l was last read by the store of piece
             * l - STAGES; j stores are issued: allow STAGES - AHEAD - 1
             * of them to be pending. */
            static_assert(MKI_TMA_STAGES - MKI_TMA_AHEAD - 1 == 3, "wait_group.read count");
            asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");
            tma_load(t, (int)((base + l) % MKI_TMA_STAGES), src + l * t.piece, piece(l));
        }
        const int s = (int)((base + j) % MKI_TMA_STAGES);
        tma_wait_load(t, s);
        tma_store(t, s, dst + j * t.piece, piece(j));
    }
    t.used = base + (uint32_t)np;
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

} /* namespace mki */

#endif /* MKI_DEVRT_CUH */
