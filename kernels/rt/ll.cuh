/*
 * ll.cuh - LL lines on the device (the layout is in channel.h): every 8
 * payload bytes travel as one 16-byte line of two 64-bit words {4 data
 * bytes, 4 flag bytes}, each single-copy atomic, so a reader that sees the
 * flag in both words has the payload; the reader polls the line itself
 * and zeroes it once read.  kernels/ops/coll.cu's LL roles use these.
 */
#ifndef MKI_LL_CUH
#define MKI_LL_CUH

#include <stdint.h>

#include "ptx.cuh"
#include "wait.cuh"

namespace mki {

/* The flag of operation e: any nonzero value (lines are zeroed after
 * reading, so no older flag can be left in a buffer). */
__device__ __forceinline__ uint32_t ll_flag(uint64_t e)
{
    const uint32_t f = (uint32_t)e;
    return f ? f : 1u;
}

/* The 8 bytes at byte i of n (fewer at the end, the rest zero). */
__device__ __forceinline__ uint64_t ll_get(const char *p, uint64_t i, uint64_t n)
{
    if (i + 8 <= n && ((reinterpret_cast<uintptr_t>(p) + i) & 7) == 0)
        return __ldcg(reinterpret_cast<const unsigned long long *>(p + i));
    uint64_t v = 0;
    for (uint64_t b = 0; b < 8 && i + b < n; b++)
        v |= (uint64_t)(uint8_t)p[i + b] << (8 * b);
    return v;
}

/* Store the bytes of v that fall before n at byte i. */
__device__ __forceinline__ void ll_put(char *p, uint64_t i, uint64_t n, uint64_t v)
{
    if (i + 8 <= n && ((reinterpret_cast<uintptr_t>(p) + i) & 7) == 0) {
        *reinterpret_cast<uint64_t *>(p + i) = v;
        return;
    }
    for (uint64_t b = 0; b < 8 && i + b < n; b++) p[i + b] = (char)(v >> (8 * b));
}

/* One line: two 64-bit words {4 payload bytes, flag}, each single-copy
 * atomic, so a reader that sees the flag in both sees the payload. */
__device__ __forceinline__ void ll_store(char *line, uint64_t v, uint32_t flag)
{
    const uint64_t hi = (uint64_t)flag << 32;
    const uint64_t a = (v & 0xffffffffull) | hi, b = (v >> 32) | hi;
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(a), "l"(b)
                 : "memory");
}

__device__ __forceinline__ void ll_load(const char *line, uint64_t &a, uint64_t &b)
{
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(line)
                 : "memory");
}

__device__ __forceinline__ bool ll_ready(uint64_t a, uint64_t b, uint32_t flag)
{
    return (uint32_t)(a >> 32) == flag && (uint32_t)(b >> 32) == flag;
}

/* Why a poll that began at t0 must stop, at its n-th round: SPIN_ABORT
 * (*why: the stop word), SPIN_TIMEOUT, or SPIN_OK (go on); as spin_geq. */
__device__ __forceinline__ int ll_stop(const mki_rt_dev &rt, uint32_t n, uint64_t t0,
                                       uint64_t *why)
{
    const stop_words st = stops_of(rt);
    uint64_t w = ld_relaxed_sys(st.abort);
    if (!w && st.abort2) w = ld_relaxed_sys(st.abort2);
    if (!w && hstop_due(n, t0)) w = ld_relaxed_sys(st.hstop);
    *why = w;
    return w ? SPIN_ABORT : globaltimer() - t0 > rt.timeout_ns ? SPIN_TIMEOUT : SPIN_OK;
}

/* The poll of a line that was not there yet: the stop words and the
 * deadline every 64 polls, as spin_geq.  Inline: a call would spill the
 * other lines a thread holds. */
static __device__ __forceinline__ bool ll_wait_slow(const mki_rt_dev &rt, const char *line,
                                                 uint32_t flag, uint64_t *v, wait_site w,
                                                 uint64_t e, volatile int *quit)
{
    const uint64_t t0 = globaltimer();
    uint64_t a, b;
    for (uint32_t n = 1;; n++) {
        ll_load(line, a, b);
        if (ll_ready(a, b, flag)) {
            *v = (a & 0xffffffffull) | (b << 32);
            return true;
        }
        if (n & 63) continue;
        if (*quit) return false;
        uint64_t why = 0;
        const int r = ll_stop(rt, n, t0, &why);
        if (r != SPIN_OK) {
            fail_spin(rt, r, w, flag, a >> 32, why, e);
            *quit = 1;
            return false;
        }
    }
}

__device__ __forceinline__ void ll_zero(char *line)
{
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %1};" ::"l"(line), "l"(0ull) : "memory");
}

} /* namespace mki */

#endif /* MKI_LL_CUH */
