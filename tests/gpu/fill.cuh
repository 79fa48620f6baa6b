/*
 * fill.cuh - the GPU tests' inputs and poison: a hash of (seed, index) to
 * [-1, 1) rounded to bf16 or fp16 (the same on the host, so that every
 * rank can build any rank's inputs and a host reference), the value of
 * such 16 bits on the host, NaN poison for outputs, and the cuBLAS check.  The including file has g_rank.
 */
#ifndef MKT_GPU_FILL_CUH
#define MKT_GPU_FILL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CB(call)                                                                      \
    do {                                                                              \
        cublasStatus_t s_ = (call);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
            fprintf(stderr, "rank %d: %s:%d cublas %d\n", g_rank, __FILE__, __LINE__, \
                    (int)s_);                                                         \
            exit(4);                                                                  \
        }                                                                             \
    } while (0)

__host__ __device__ __forceinline__ float hash_val(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (float)(x >> 40) / (float)(1ull << 24) * 2.0f - 1.0f;
}

/* n elements of dtype dt (0 bf16, 1 fp16) from (seed, index). */
__global__ void fill(void *p, size_t n, uint64_t seed, int dt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = hash_val(seed * 0x9e3779b97f4a7c15ull + i);
        if (dt == 0) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
        else ((__half *)p)[i] = __float2half(v);
    }
}

/* The value 16 bits hold as bf16 (dt 0) or fp16 (dt 1), on the host. */
static inline float half_bits_val(uint16_t bits, int dt)
{
    if (dt == 0) {
        __nv_bfloat16_raw r;
        r.x = bits;
        return __bfloat162float(__nv_bfloat16(r));
    }
    __half_raw r;
    r.x = bits;
    return __half2float(__half(r));
}

__global__ void poison(uint16_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = 0x7fff; /* NaN in bf16 and fp16 */
}

#endif /* MKT_GPU_FILL_CUH */
