/*
 * probe.cu - the smallest kernel of the library, and eager module loading.
 *
 * mki_kernels_preload() touches every kernel of the library through
 * cudaFuncGetAttributes at communicator creation.  With CUDA's lazy
 * loading, the first launch of a kernel that is not loaded yet can block
 * while another stream spins on a flag that kernel would set (seen on the
 * lent H200s: a hang), so nothing may be loaded on first use.
 */
#include <cuda_runtime_api.h>

/* Writes a recognisable word: used by the GPU tests to prove that the
 * library's device code runs on the device at hand. */
__global__ void mki_probe_kernel(unsigned long long *out, unsigned long long v)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) *out = v ^ 0x6d6b65726e656cull;
}

extern "C" int mki_coll_preload(const char **failed); /* collectives.cu */

extern "C" const void *mki_fifo_probe_kernel_handle(void);

extern "C" int mki_gemm_preload(char *msg, size_t msg_len); /* gemm/gemm.cu */
extern "C" int mki_agg_preload(char *msg, size_t msg_len);  /* ag_gemm.cu */

extern "C" int mki_kernels_preload(const char **failed)
{
    static char gemm_msg[256];
    if (mki_gemm_preload(gemm_msg, sizeof(gemm_msg)) != 0 ||
        mki_agg_preload(gemm_msg, sizeof(gemm_msg)) != 0) {
        *failed = gemm_msg;
        return -1;
    }
    const void *kernels[] = {(const void *)mki_probe_kernel,
                             mki_fifo_probe_kernel_handle()};
    for (unsigned i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
        cudaFuncAttributes attr;
        cudaError_t err = cudaFuncGetAttributes(&attr, kernels[i]);
        if (err != cudaSuccess) {
            *failed = cudaGetErrorString(err);
            return (int)err;
        }
    }
    return mki_coll_preload(failed);
}
