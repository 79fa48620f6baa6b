/*
 * fifo_probe.cu - the smallest user of the FIFO producer: the grid pushes
 * n WRITE_SIGNAL commands (command j: offsets j * 64, 64 bytes, ADD 1 to
 * counter 0 of the peer), then thread 0 waits until the proxy reports
 * them done.  Compiled in every build so fifo.cuh stays valid for sm_90a;
 * tests/net/test_gpu_fifo runs it against a host proxy (no communicator,
 * so no abort word: each wait ends by the proxy's error or its deadline).
 */
#include <cuda_runtime_api.h>

#include "rt/fifo.cuh"

using namespace mki;

__global__ void mki_fifo_probe_kernel(mki_fifo_dev f, unsigned int n, unsigned int peer,
                                      unsigned long long timeout_ns, int *status)
{
    const unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
        mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, peer, MKI_SIG_ADD, 0, (uint64_t)j * 64,
                          (uint64_t)j * 64, 64, 0, 1};
        unsigned long long t;
        const int r = fifo_push(f, c, stop_words{}, timeout_ns, &t);
        if (r != MKI_FIFO_OK) {
            atomicMax(status, r);
            return;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const int r = fifo_wait_done(f, n, stop_words{}, timeout_ns);
        if (r != MKI_FIFO_OK) atomicMax(status, r);
    }
}

/* For the kernel preload of the runtime (rt/probe.cu). */
extern "C" const void *mki_fifo_probe_kernel_handle(void)
{
    return (const void *)mki_fifo_probe_kernel;
}

/* Launch the probe (tests); returns the launch's cudaError_t. */
extern "C" int mki_fifo_probe_launch(const mki_fifo_dev *f, unsigned int n, unsigned int peer,
                                     unsigned long long timeout_ns, int *status,
                                     unsigned int blocks, unsigned int threads, cudaStream_t s)
{
    mki_fifo_probe_kernel<<<blocks, threads, 0, s>>>(*f, n, peer, timeout_ns, status);
    return (int)cudaGetLastError();
}
