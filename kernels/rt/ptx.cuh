/*
 * ptx.cuh - the PTX the device runtime and the kernels share: system-scope
 * loads and stores of signals, the global timer, named barriers,
 * mbarriers, bulk-copy groups and proxy fences.  Each exists once, here;
 * the GEMM engine keeps only what is its own (tensor TMA, wgmma).
 */
#ifndef MKI_PTX_CUH
#define MKI_PTX_CUH

#include <stdint.h>

namespace mki {

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* For a flag that only threads of this GPU write: no system-scope
 * ordering, which many spinning threads make the GPU's reads of host
 * memory pay for (bench/NOTES.md, nineteenth session). */
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
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
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* A word that only threads of this GPU read (with ld_acquire_gpu). */
__device__ __forceinline__ void st_release_gpu(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void st_relaxed_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Max into a device word that only this GPU's threads read (with
 * ld_acquire_gpu): a release at GPU scope, no system-scope fence. */
__device__ __forceinline__ void red_max_release_gpu(unsigned long long *p, unsigned long long v)
{
    asm volatile("red.release.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
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
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* ---- mbarriers -------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

/* Make mbarrier inits visible to the async proxy and the cluster. */
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

/* Until the phase of `parity` completed.  Only TMA transfers of this CTA
 * (or of its cluster) complete these phases: no deadline needed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, int parity)
{
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
}

/* ---- bulk copies and proxies ------------------------------------------ */

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* The smem source of all but the newest `N` store groups may be reused. */
template <int N>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Every store group but the newest `N` has finished writing global memory
 * (its source may be reused too). */
template <int N>
__device__ __forceinline__ void bulk_wait_done()
{
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

/* Warm L2 with bytes [p, p + bytes) (16-byte aligned, a multiple of 16):
 * a hint, nothing waits for it. */
__device__ __forceinline__ void bulk_prefetch_l2(const void *p, uint32_t bytes)
{
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/* Every store group has finished writing global memory. */
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

/* Generic-proxy writes to shared memory -> visible to the TMA engine. */
__device__ __forceinline__ void fence_proxy_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Generic-proxy accesses to global memory ordered with the async proxy's
 * (TMA loads of what a peer stored, stores read by a later TMA copy). */
__device__ __forceinline__ void fence_proxy_async_global()
{
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* Publish: everything this thread's CTA stored (generic or TMA, already
 * complete) becomes visible to any GPU before *sig grows by v (an
 * epilogue's per-tile signal). */
__device__ __forceinline__ void signal_fence()
{
    fence_proxy_async_global();
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* *sig += v at system scope, ordered only by a signal_fence before it
 * (one fence for several signals of the same stores). */
__device__ __forceinline__ void signal_add(uint64_t *sig, uint64_t v)
{
    asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(sig), "l"(v) : "memory");
}

__device__ __forceinline__ void signal_add_release(uint64_t *sig, uint64_t v)
{
    signal_fence();
    signal_add(sig, v);
}

} /* namespace mki */

#endif /* MKI_PTX_CUH */
