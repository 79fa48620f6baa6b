/*
 * probe.cu - the smallest kernel of the library, and the eager loading of
 * the runtime's own kernels.
 *
 * A communicator loads every kernel when it is created (src/core/comm.c:
 * these, then every op's through the op table): with CUDA's lazy loading,
 * the first launch of a kernel that is not loaded yet can block while
 * another stream spins on a flag that kernel would set (seen on the lent
 * H200s: a hang), so nothing may be loaded on first use.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

/* Writes a recognisable word: used by the GPU tests to prove that the
 * library's device code runs on the device at hand. */
__global__ void mki_probe_kernel(unsigned long long *out, unsigned long long v)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) *out = v ^ 0x6d6b65726e656cull;
}

extern "C" const void *mki_fifo_probe_kernel_handle(void); /* fifo_probe.cu */

extern "C" int mki_rt_preload(char *msg, size_t len)
{
    const void *kernels[] = {(const void *)mki_probe_kernel, mki_fifo_probe_kernel_handle()};
    for (unsigned i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
        cudaFuncAttributes attr;
        cudaError_t err = cudaFuncGetAttributes(&attr, kernels[i]);
        if (err != cudaSuccess) {
            snprintf(msg, len, "loading the runtime's kernels: %s", cudaGetErrorString(err));
            return (int)err;
        }
    }
    return 0;
}
