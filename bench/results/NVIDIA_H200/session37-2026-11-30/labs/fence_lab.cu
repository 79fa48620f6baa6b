// s37 lab: do system-scope fences (or sys-scope release atomics) issued by a
// few CTAs slow down HBM loads of the other CTAs on the same GPU?
// Loaders: CTAs [0, nload) stream their slice of a large buffer R times.
// Others ("fencers"): loop until the loaders are done doing op `mode`.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ unsigned long long gt() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void __launch_bounds__(512) lab(const int4 *buf, size_t per_cta, int reps, int nload, int mode,
                                           int fthreads, int *remote, int *local, unsigned long long *t,
                                           volatile int *left, int *sink)
{
    if ((int)blockIdx.x < nload) {
        const int4 *p = buf + per_cta * blockIdx.x;
        int acc = 0;
        __syncthreads();
        unsigned long long t0 = gt();
        for (int r = 0; r < reps; ++r)
            for (size_t i = threadIdx.x; i + 7 * blockDim.x < per_cta; i += blockDim.x * 8) {
                int4 v[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) v[j] = __ldcs(p + i + j * blockDim.x);
#pragma unroll
                for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].w;
            }
        __syncthreads();
        if (threadIdx.x == 0) { t[2 * blockIdx.x] = t0; t[2 * blockIdx.x + 1] = gt(); atomicSub((int *)left, 1); }
        if (acc == 0x12345678) sink[0] = acc;
        return;
    }
    if (mode == 0) return;
    const int f = blockIdx.x - nload;
    unsigned long long n = 0;
    while (*left > 0) {
        if ((int)threadIdx.x < fthreads) {
            switch (mode) {
            case 1: __threadfence_system(); break;                       // fence only
            case 2: __threadfence(); break;                              // gpu fence
            case 3: local[(f * 512 + threadIdx.x) * 32] = (int)n; __threadfence_system(); break;  // local store + sys fence
            case 4: remote[(f * 512 + threadIdx.x) * 32] = (int)n; __threadfence_system(); break; // peer store + sys fence
            case 5: { int *a = remote + f * 32; asm volatile("red.release.sys.global.add.s32 [%0], 1;" :: "l"(a) : "memory"); } break;
            case 6: { int v; asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(remote + f * 32) : "memory"); n += v; } break;
            case 7: { int v; asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(local + f * 32) : "memory"); n += v; } break;
            }
        }
        ++n;
        __syncwarp();
    }
    if (threadIdx.x == 0) sink[1 + f] = (int)n;
}

int main(int argc, char **argv)
{
    int peer = argc > 1 ? atoi(argv[1]) : -1;
    CK(cudaSetDevice(0));
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = 4ull << 30;
    int4 *buf; CK(cudaMalloc(&buf, bytes)); CK(cudaMemset(buf, 1, bytes));
    int *local; CK(cudaMalloc(&local, 64 << 20)); CK(cudaMemset(local, 0, 64 << 20));
    int *remote = local;
    if (peer >= 0) {
        int ok; CK(cudaDeviceCanAccessPeer(&ok, 0, peer));
        if (ok) { CK(cudaDeviceEnablePeerAccess(peer, 0)); CK(cudaSetDevice(peer)); CK(cudaMalloc(&remote, 64 << 20)); CK(cudaMemset(remote, 0, 64 << 20)); CK(cudaSetDevice(0)); }
        else printf("no peer access to %d: remote = local\n", peer);
    }
    unsigned long long *t; CK(cudaMalloc(&t, 2 * sms * sizeof(*t)));
    int *left; CK(cudaMalloc(&left, 4));
    int *sink; CK(cudaMalloc(&sink, 4 * (sms + 1)));
    std::vector<unsigned long long> h(2 * sms);
    const char *names[] = {"none", "fence.sys", "fence.gpu", "st+fence.sys", "st peer+fence.sys", "red.release.sys peer", "ld.acquire.sys peer", "ld.acquire.sys local"};
    int nloads[] = {sms - 8, 30, 64};
    printf("%-22s %6s %6s %6s  %10s %10s\n", "mode", "nload", "nfence", "fthr", "GB/s", "us");
    for (int nl : nloads)
        for (int mode = 0; mode < 8; ++mode)
            for (int fth : {1, 96}) {
                if (mode == 0 && fth == 96) continue;
                if ((mode == 5 || mode == 6 || mode == 7) && fth == 96) continue;
                const int nf = std::min(8, sms - nl);
                const int grid = nl + nf;
                const size_t per = bytes / 16 / nl / 2; // half the buffer: 2 GB of loads spread
                std::vector<double> v;
                for (int rep = 0; rep < 5; ++rep) {
                    CK(cudaMemcpy(left, &nl, 4, cudaMemcpyHostToDevice));
                    lab<<<grid, 512>>>(buf + (rep & 1) * (bytes / 32), per, 1, nl, mode, fth, remote, local, t, left, sink);
                    CK(cudaGetLastError());
                    CK(cudaDeviceSynchronize());
                    CK(cudaMemcpy(h.data(), t, 2 * nl * sizeof(*t), cudaMemcpyDeviceToHost));
                    unsigned long long a = ~0ull, b = 0;
                    for (int i = 0; i < nl; ++i) { a = std::min(a, h[2 * i]); b = std::max(b, h[2 * i + 1]); }
                    v.push_back((double)(b - a));
                }
                std::sort(v.begin(), v.end());
                const double ns = v[2];
                printf("%-22s %6d %6d %6d  %10.1f %10.1f\n", names[mode], nl, mode ? nf : 0, fth,
                       (double)per * 16 * nl / ns, ns / 1e3);
            }
    return 0;
}
