/*
 * clock.cuh - the SM clock right now, measured on the GPU: one warp spins
 * for `us` microseconds of the global timer and counts SM cycles.  Called
 * right after a timed series, it tells the clock the series ended at
 * (under a power cap the clock falls within milliseconds of a heavy kernel
 * and rises again when the GPU idles, which nvidia-smi's 100 ms samples
 * cannot resolve for a series of a few hundred milliseconds).
 *
 *   double mhz = mkb_sm_mhz(stream, 200);   (-1 on a CUDA error)
 *
 * Synchronizes the stream: call it outside the timed region.
 */
#ifndef MKB_CLOCK_CUH
#define MKB_CLOCK_CUH

#include <cuda_runtime.h>
#include <stdint.h>

static __global__ void mkb_clock_probe(uint64_t ns, unsigned long long *out)
{
    uint64_t t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const long long c0 = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
    const long long c1 = clock64();
    if (threadIdx.x == 0) {
        out[0] = (unsigned long long)(c1 - c0);
        out[1] = t1 - t0;
    }
}

static inline double mkb_sm_mhz(cudaStream_t st, int us)
{
    unsigned long long *d = NULL, h[2] = {0, 0};
    if (cudaMalloc(&d, sizeof h) != cudaSuccess) return -1;
    mkb_clock_probe<<<1, 32, 0, st>>>((uint64_t)us * 1000, d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    cudaFree(d);
    return e == cudaSuccess && h[1] ? (double)h[0] * 1e3 / (double)h[1] : -1;
}

#endif
