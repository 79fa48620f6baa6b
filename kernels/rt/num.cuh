/*
 * num.cuh - the element types of the library on the device: bf16, fp16
 * and fp32 to and from fp32 (round to nearest even), and two values
 * packed into one 32-bit word.  Reductions accumulate in fp32 and round
 * once, with these.
 */
#ifndef MKI_NUM_CUH
#define MKI_NUM_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace mki {

template <typename T> struct num;
template <> struct num<float> {
    static __device__ __forceinline__ float to(float v) { return v; }
    static __device__ __forceinline__ float from(float v) { return v; }
};
template <> struct num<__half> {
    static __device__ __forceinline__ float to(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ __half2 from2(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct num<__nv_bfloat16> {
    using T2 = __nv_bfloat162;
    static __device__ __forceinline__ float to(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ T2 from2(float a, float b) { return __floats2bfloat162_rn(a, b); }
};

/* a and b rounded to T and packed into one word (a in the low half). */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b)
{
    auto v = num<T>::from2(a, b);
    return *reinterpret_cast<uint32_t *>(&v);
}

} /* namespace mki */

#endif /* MKI_NUM_CUH */
