/*
 * wgmma.cuh - the Hopper warpgroup-MMA primitives the library's tensor-core
 * kernels share (the GEMM engine, the attention kernel): shared-memory
 * descriptors, the fence / commit / wait of wgmma groups, register
 * reallocation between warpgroups.  The instructions themselves, whose
 * operand lists depend on the shape, are generated per kernel
 * (kernels/gemm/wgmma_n256.h, kernels/attn/wgmma_attn.h).
 */
#ifndef MKI_WGMMA_CUH
#define MKI_WGMMA_CUH

#include <stdint.h>

namespace mki {

template <int R>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

template <int R>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

/* Until at most `Pending` wgmma groups of this warpgroup are in flight.
 * The accumulators d are named as operands so the compiler cannot move
 * reads of them above the wait. */
template <int Pending, int R>
__device__ __forceinline__ void wgmma_wait(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* wgmma shared-memory descriptor, 128-byte swizzle. K-major operands: rows of
 * 128 B, 8-row atoms 1024 B apart (SBO), LBO unused. N-major B: LBO is the
 * distance between 64-column blocks, SBO between 8-row (k) groups. */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

} /* namespace mki */

#endif /* MKI_WGMMA_CUH */
