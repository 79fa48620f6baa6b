/*
 * moe_sync.cuh - the MoE kernels' failures, waits and counters (the
 * protocol: moe.h), shared by the dispatch (moe_dispatch.cuh) and the
 * combine (moe_combine.cuh): an input error recorded and the node's abort
 * raised, the deadline waits on counters and inbox tags (reported at once,
 * or noted in shared memory inside the fused kernel), the dispatch's grid
 * barrier, the last-CTA-out counter and the ready rows per expert.
 *
 * Every wait goes through the runtime's deadline wait (wait.cuh).
 */
#pragma once

#include <stdint.h>

#include "ops/moe.h"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"

namespace mki {
namespace moe {

__device__ __forceinline__ uint64_t ld_vol(const uint64_t *p)
{
    return *reinterpret_cast<const volatile uint64_t *>(p);
}

/* A failure found by the kernel itself (bad input on the device): the
 * error record, and the node's abort words raised, so that the peers (who
 * may not have seen it) stop waiting for this rank. */
__device__ __noinline__ void fail_input(const mki_rt_dev &rt, int kind, int peer, int chunk,
                                        int phase, uint64_t expected, uint64_t seen, uint64_t e,
                                        bool raise)
{
    fail(rt, kind, wait_site{peer, (int)blockIdx.x, chunk, phase}, expected, seen, e);
    if (raise) {
        raise_node_abort(rt);
        __threadfence_system();
    }
}

/* Failures and waits in the two kernels.  mkMoEDispatch's report each
 * failure at once (wait.cuh's fail, an out-of-line call); inside
 * mkMoEDispatchGemm's kernel no out-of-line call may come before the GEMM
 * engine's register split (ptxas then cannot give the consumers their 232
 * registers), so there the CTA's first failure is noted in shared memory
 * (note != nullptr) and reported after the GEMM, as the engine's own
 * waits do.  Each sets *quit on failure. */
template <bool kNoted>
__device__ __forceinline__ bool wait_ge(const mki_rt_dev &rt, const uint64_t *addr,
                                        uint64_t target, int peer, int chunk, int phase,
                                        uint64_t e, volatile int *quit, cta_note *note)
{
    if constexpr (kNoted) {
        if (wait_noted(rt, *note, addr, target, peer, chunk, phase)) return true;
        *quit = 1;
        return false;
    }
    else
        return wait_geq(rt, addr, target, wait_site{peer, (int)blockIdx.x, chunk, phase}, e, quit);
}

/* At entry: a peer that failed before stops the call (enter_ok). */
template <bool kNoted>
__device__ __forceinline__ bool enter(const mki_rt_dev &rt, int b, uint64_t e, cta_note *note)
{
    if constexpr (!kNoted) return enter_ok(rt, b, e);
    const uint64_t ab = stop_value(rt, false);
    if (ab == 0) return true;
    note_fail(*note, MKI_ERR_REMOTE, (int)ab - 1, -1, -1, 0, 0);
    return false;
}

/* The grid barrier of the dispatch's G CTAs (every CTA is co-resident:
 * the launch shrinks the grid to what is). */
template <bool kNoted>
__device__ __forceinline__ bool grid_barrier(const mki_moe_params &p, uint64_t *ctr,
                                             uint64_t target, uint64_t e, volatile int *quit,
                                             cta_note *note)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(reinterpret_cast<unsigned long long *>(ctr), 1ull);
        wait_ge<kNoted>(p.rt, ctr, target, p.rt.rank, -1, 9, e, quit, note);
        __threadfence();
    }
    __syncthreads();
    return *quit == 0;
}

/* An inbox slot's tag equal to the call number e (a grown inbox is not
 * zeroed: its words may hold anything, so not >=), by lane 0 of a warp,
 * under the runtime's deadline and abort word; true unless quitting. */
__device__ __noinline__ void wait_tag_spin(const mki_rt_dev &rt, const uint64_t *tag, uint64_t e,
                                           int src, int slot, volatile int *quit)
{
    const uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        const uint64_t v = ld_acquire_sys(tag);
        if (v == e) return;
        if (n & 31) continue;
        if (*quit) return;
        const uint64_t w = stop_value(rt, hstop_due(n, t0));
        if (w || globaltimer() - t0 > rt.timeout_ns) {
            fail(rt, w ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT,
                 wait_site{w ? (int)w - 1 : src, (int)blockIdx.x, slot, 2}, e, v, e);
            *quit = 1;
            return;
        }
    }
}

/* The same, noted (mkMoEDispatchGemm's kernel: no out-of-line call). */
__device__ __forceinline__ void wait_tag_noted(const mki_rt_dev &rt, const uint64_t *tag, uint64_t e,
                                               int src, int slot, volatile int *quit, cta_note &n)
{
    const uint64_t t0 = globaltimer();
    for (uint32_t k = 1;; k++) {
        const uint64_t v = ld_acquire_sys(tag);
        if (v == e) return;
        if (k & 31) continue;
        if (*quit) return;
        const uint64_t w = stop_value(rt, hstop_due(k, t0));
        if (w || globaltimer() - t0 > rt.timeout_ns) {
            note_fail(n, w ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT, w ? (int)w - 1 : src, slot, 2, e, v);
            *quit = 1;
            return;
        }
    }
}

template <bool kNoted>
__device__ __forceinline__ bool warp_wait_tag(const mki_rt_dev &rt, const uint64_t *tag, uint64_t e,
                                              int src, int slot, volatile int *quit,
                                              cta_note *note)
{
    if ((threadIdx.x & 31) == 0 && ld_acquire_sys(tag) != e) {
        if constexpr (kNoted) wait_tag_noted(rt, tag, e, src, slot, quit, *note);
        else wait_tag_spin(rt, tag, e, src, slot, quit);
    }
    __syncwarp();
    return __all_sync(0xffffffffu, *quit == 0);
}

/* Last of G CTAs out of a counter: true in thread 0 of the last one. */
__device__ bool last_out(uint64_t *ctr, int G)
{
    __threadfence_system();
    return atomicAdd(reinterpret_cast<unsigned long long *>(ctr), 1ull) == (unsigned long long)G - 1;
}

/* Rows placed for local expert el: count them once they are visible (every
 * lane fenced its own stores of the rows, then the warp met). */
__device__ __forceinline__ void count_ready(uint64_t *ready, int el, int n)
{
    atomicAdd(reinterpret_cast<unsigned long long *>(ready + el), (unsigned long long)n);
}

} // namespace moe
} // namespace mki
