/*
 * peer_red.cu - a lab measurement (not part of libmkernel): how fast the
 * threads of a few CTAs move fp32 tiles into another GPU's memory over
 * NVLink with 16-byte stores, and with 16-byte fp32 reductions
 * (red.global.add.v4.f32), against the same into local memory.  The
 * question behind it (bench/NOTES.md, fourteenth session, "Next for
 * mkGemmReduceScatter"): can the movers of the fused GEMM + reduce-scatter
 * add a peer's partial tile straight into its owner's fp32 slot at the
 * link's rate, instead of the owner reading and adding it in its epilogue?
 *
 *   peer_red [--mb MB] [--iters N]     (two GPUs: 0 runs, 1 is the peer)
 *
 * Each thread loads float4 from a local source (as the movers read the
 * outbox) and stores or reduces it into the target; every configuration
 * (target local / peer, store / reduce, CTAs x threads) is timed with CUDA
 * events over N passes after one warm-up pass, and the reductions' sums
 * are checked (the source holds 1.0, so every element must end at the
 * number of passes, exact in fp32).  Prints a table; exit status 1 on a
 * wrong sum or a CUDA error, 2 on bad usage, 77 (skip) with fewer than
 * two GPUs or no peer access.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "peer_red: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_),      \
                    __FILE__, __LINE__);                                                   \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* *p += v, four fp32 at once, performed where p lives */
__device__ __forceinline__ void red_add(float4 *p, float4 v)
{
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
                 "f"(v.z), "f"(v.w)
                 : "memory");
}

__global__ void move(const float4 *__restrict__ src, float4 *dst, size_t n, int reduce)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* two float4 in flight per thread, loads before stores */
    for (; i + stride < n; i += 2 * stride) {
        const float4 a = __ldcg(src + i), b = __ldcg(src + i + stride);
        if (reduce) {
            red_add(dst + i, a);
            red_add(dst + i + stride, b);
        } else {
            dst[i] = a;
            dst[i + stride] = b;
        }
    }
    if (i < n) {
        const float4 a = __ldcg(src + i);
        if (reduce)
            red_add(dst + i, a);
        else
            dst[i] = a;
    }
}

__global__ void fill(float4 *p, size_t n, float v)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_float4(v, v, v, v);
}

/* Elements of p not equal to want: counted on the device. */
__global__ void count_bad(const float *p, size_t n, float want, unsigned long long *bad)
{
    unsigned long long c = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c += p[i] != want;
    if (c) atomicAdd(bad, c);
}

int main(int argc, char **argv)
{
    size_t mb = 256;
    int iters = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: peer_red [--mb MB] [--iters N]\n");
            return 2;
        }
    }
    if (mb == 0 || mb > 16384 || iters < 1 || iters > 1000) {
        fprintf(stderr, "peer_red: --mb must be 1-16384 and --iters 1-1000\n");
        return 2;
    }
    int ndev = 0, can = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
        printf("SKIP: peer_red needs two GPUs (found %d)\n", ndev);
        return 77;
    }
    CK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) {
        printf("SKIP: GPU 0 cannot access GPU 1's memory\n");
        return 77;
    }
    const size_t bytes = mb << 20, n = bytes / sizeof(float4);
    float4 *src, *loc, *peer;
    unsigned long long *bad;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&peer, bytes));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&loc, bytes));
    CK(cudaMalloc(&bad, sizeof(*bad)));
    fill<<<264, 256>>>(src, n, 1.0f);
    CK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    char name[256] = "";
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(name, sizeof name, "%s", prop.name);
    printf("peer_red: %s, %zu MiB per pass, %d passes; GB/s of the target's bytes\n", name, mb,
           iters);
    printf("| target | op | CTAs | threads | GB/s | sums |\n|---|---|---|---|---|---|\n");
    static const int ctas[] = {16, 66, 132, 264}, threads[] = {96, 256};
    int fail = 0;
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++)
                for (int h = 0; h < 2; h++) {
                    float4 *dst = t ? peer : loc;
                    fill<<<264, 256>>>(dst, n, 0.0f); /* peer memory, written from GPU 0 */
                    CK(cudaGetLastError());
                    move<<<ctas[c], threads[h]>>>(src, dst, n, r); /* warm-up pass */
                    CK(cudaGetLastError());
                    CK(cudaEventRecord(e0));
                    for (int i = 0; i < iters; i++) move<<<ctas[c], threads[h]>>>(src, dst, n, r);
                    CK(cudaGetLastError());
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    float ms = 0;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    const char *sums = "-";
                    if (r) { /* every element: warm-up + iters additions of 1.0 */
                        CK(cudaMemset(bad, 0, sizeof(*bad)));
                        count_bad<<<264, 256>>>((const float *)dst, n * 4, (float)(iters + 1), bad);
                        CK(cudaGetLastError());
                        unsigned long long b = 0;
                        CK(cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost));
                        sums = b ? "WRONG" : "ok";
                        if (b) {
                            fprintf(stderr, "peer_red: %llu wrong sums (%s, %d x %d)\n", b,
                                    t ? "peer" : "local", ctas[c], threads[h]);
                            fail = 1;
                        }
                    }
                    printf("| %s | %s | %d | %d | %.0f | %s |\n", t ? "peer" : "local",
                           r ? "red.add.v4.f32" : "st.v4", ctas[c], threads[h],
                           (double)bytes * iters / (ms * 1e-3) / 1e9, sums);
                }
    CK(cudaDeviceSynchronize());
    return fail;
}
