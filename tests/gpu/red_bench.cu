/*
 * red_bench.cu - a lab micro-benchmark of the collectives' chunk sum
 * (kernels/ops/coll.cu, reduce_chunk) on one GPU: one CTA sums NIN bf16
 * inputs of a chunk in fp32 into one output, the way REDUCE does (each
 * thread U vectors of 16 bytes per input, the inputs one after the other;
 * or every input's W vectors at once), with the inputs resident in L2
 * (read just before) or not (a 256 MiB buffer streamed through L2 in
 * between).  Time: globaltimer around the sum inside the kernel, median of
 * 15 repetitions.  No library: the loops are written here the same way.
 *
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 \
 *        tests/gpu/red_bench.cu -o red_bench && ./red_bench
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                            \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));  \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static constexpr int NIN = 4;
typedef __nv_bfloat16 T;
static constexpr int V = 8;

__device__ __forceinline__ uint64_t gtimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ uint4 ld16(const void *p) { return __ldcg(reinterpret_cast<const uint4 *>(p)); }

struct ins {
    const T *in[NIN];
};

/* The inputs one after the other, U vectors in flight per thread. */
template <int U>
__device__ void sum_seq(T *out, const ins &io, uint64_t nv, int tid, int nthr)
{
    for (uint64_t i0 = tid; i0 < nv; i0 += (uint64_t)U * nthr) {
        float acc[U][V];
        uint4 w[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i0 + (uint64_t)u * nthr < nv) w[u] = ld16(io.in[0] + (i0 + (uint64_t)u * nthr) * V);
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int v = 0; v < V; v++) acc[u][v] = __bfloat162float(reinterpret_cast<const T *>(&w[u])[v]);
        for (int j = 1; j < NIN; j++) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (i0 + (uint64_t)u * nthr < nv) w[u] = ld16(io.in[j] + (i0 + (uint64_t)u * nthr) * V);
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int v = 0; v < V; v++) acc[u][v] += __bfloat162float(reinterpret_cast<const T *>(&w[u])[v]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint64_t i = i0 + (uint64_t)u * nthr;
            if (i >= nv) break;
            uint4 r;
#pragma unroll
            for (int v = 0; v < V; v++) reinterpret_cast<T *>(&r)[v] = __float2bfloat16(acc[u][v]);
            reinterpret_cast<uint4 *>(out)[i] = r;
        }
    }
}

/* Every input's W vectors loaded before the first add. */
template <int W>
__device__ void sum_all(T *out, const ins &io, uint64_t nv, int tid, int nthr)
{
    for (uint64_t i0 = tid; i0 < nv; i0 += (uint64_t)W * nthr) {
        uint4 w[NIN][W];
#pragma unroll
        for (int j = 0; j < NIN; j++)
#pragma unroll
            for (int u = 0; u < W; u++)
                if (i0 + (uint64_t)u * nthr < nv) w[j][u] = ld16(io.in[j] + (i0 + (uint64_t)u * nthr) * V);
#pragma unroll
        for (int u = 0; u < W; u++) {
            const uint64_t i = i0 + (uint64_t)u * nthr;
            if (i >= nv) break;
            uint4 r;
#pragma unroll
            for (int v = 0; v < V; v++) {
                float a = __bfloat162float(reinterpret_cast<const T *>(&w[0][u])[v]);
#pragma unroll
                for (int j = 1; j < NIN; j++) a += __bfloat162float(reinterpret_cast<const T *>(&w[j][u])[v]);
                reinterpret_cast<T *>(&r)[v] = __float2bfloat16(a);
            }
            reinterpret_cast<uint4 *>(out)[i] = r;
        }
    }
}

template <int K>
__global__ void __launch_bounds__(512, 1) red_kernel(T *out, ins io, uint64_t nv, int nthr, uint64_t *ns)
{
    const int tid = threadIdx.x;
    __syncthreads();
    const uint64_t t0 = gtimer();
    if (tid < nthr) {
        if constexpr (K == 1) sum_seq<1>(out, io, nv, tid, nthr);
        else if constexpr (K == 2) sum_seq<2>(out, io, nv, tid, nthr);
        else if constexpr (K == 4) sum_seq<4>(out, io, nv, tid, nthr);
        else if constexpr (K == 8) sum_seq<8>(out, io, nv, tid, nthr);
        else if constexpr (K == 101) sum_all<1>(out, io, nv, tid, nthr);
        else if constexpr (K == 102) sum_all<2>(out, io, nv, tid, nthr);
        else if constexpr (K == 104) sum_all<4>(out, io, nv, tid, nthr);
    }
    __syncthreads();
    if (tid == 0) *ns = gtimer() - t0;
}

__global__ void touch(const uint4 *p, uint64_t n, uint4 *sink)
{
    uint4 a = make_uint4(0, 0, 0, 0);
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint4 b = __ldcg(p + i);
        a.x ^= b.x;
    }
    if (a.x == 0x12345678u) *sink = a;
}

template <int K>
static double run(const char *name, T *out, const ins &io, size_t bytes, int nthr, bool resident,
                  const uint4 *flush, uint64_t flush_n, uint4 *sink, uint64_t *dns)
{
    std::vector<double> us;
    for (int r = 0; r < 17; r++) {
        if (resident) {
            for (int j = 0; j < NIN; j++) touch<<<4, 512>>>(reinterpret_cast<const uint4 *>(io.in[j]), bytes / 16, sink);
        } else {
            touch<<<132, 512>>>(flush, flush_n, sink);
        }
        red_kernel<K><<<1, 512>>>(out, io, bytes / 16, nthr, dns);
        CK(cudaGetLastError());
        uint64_t ns;
        CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
        if (r >= 2) us.push_back(ns / 1000.0);
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    printf("%-14s %8zu B x %d  %3d thr  %-9s %8.2f us  %7.1f GB/s read\n", name, bytes, NIN, nthr,
           resident ? "L2" : "HBM", med, NIN * bytes / med / 1e3);
    return med;
}

int main()
{
    const size_t maxb = 256 << 10;
    T *in[NIN], *out;
    for (int j = 0; j < NIN; j++) {
        CK(cudaMalloc(&in[j], maxb));
        CK(cudaMemset(in[j], 0x3c, maxb));
    }
    CK(cudaMalloc(&out, maxb));
    const uint64_t flush_n = (256ull << 20) / 16;
    uint4 *flush, *sink;
    uint64_t *dns;
    CK(cudaMalloc(&flush, flush_n * 16));
    CK(cudaMemset(flush, 1, flush_n * 16));
    CK(cudaMalloc(&sink, 16));
    CK(cudaMalloc(&dns, 8));
    ins io;
    for (int j = 0; j < NIN; j++) io.in[j] = in[j];
    const size_t sizes[] = {64 << 10, 256 << 10};
    const int thrs[] = {320, 480};
    for (size_t b : sizes)
        for (int nthr : thrs)
            for (int res = 1; res >= 0; res--) {
                run<1>("seq U=1", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<2>("seq U=2", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<4>("seq U=4 (lib)", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<8>("seq U=8", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<101>("all W=1", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<102>("all W=2", out, io, b, nthr, res, flush, flush_n, sink, dns);
                run<104>("all W=4", out, io, b, nthr, res, flush, flush_n, sink, dns);
            }
    /* the result is the sum: 4 x the bf16 of 0x3c3c, checked once */
    T h;
    CK(cudaMemcpy(&h, out, sizeof(T), cudaMemcpyDeviceToHost));
    unsigned short bits = 0x3c3c;
    T one;
    memcpy(&one, &bits, 2);
    const float want = 4.0f * __bfloat162float(one), got = __bfloat162float(h);
    const T w16 = __float2bfloat16(want);
    const int ok = memcmp(&w16, &h, 2) == 0;
    printf("check: out[0] = %g, expected %g: %s\n", got, want, ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
