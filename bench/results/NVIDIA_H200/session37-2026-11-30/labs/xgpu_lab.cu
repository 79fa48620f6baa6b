// s37 lab: do another GPU's NVLink stores into this GPU's memory (or its reads of it) slow this
// GPU's own HBM loads?  GPU 0: loaders (nload CTAs streaming 2 GB); GPU 1: writers storing
// 16-byte values into a GPU-0 buffer (or reading it) for a fixed time.  Each loader run is
// reported with whether it lay inside the writers' window.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
__device__ __forceinline__ unsigned long long gt() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void __launch_bounds__(512) loaders(const int4 *buf, size_t per_cta, unsigned long long *t, int *sink)
{
    const int4 *p = buf + per_cta * blockIdx.x;
    int acc = 0;
    __syncthreads();
    unsigned long long t0 = gt();
    for (size_t i = threadIdx.x; i + 7 * blockDim.x < per_cta; i += blockDim.x * 8) {
        int4 v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = __ldcs(p + i + j * blockDim.x);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].w;
    }
    __syncthreads();
    if (threadIdx.x == 0) { t[2 * blockIdx.x] = t0; t[2 * blockIdx.x + 1] = gt(); }
    if (acc == 0x12345678) sink[0] = acc;
}

// mode 1: 16-byte stores to dst (remote); 2: 16-byte loads from dst; 3: fp32 red.add to dst
__global__ void __launch_bounds__(512) writers(int4 *dst, size_t n16, unsigned long long ns, int mode, unsigned long long *win, int *sink)
{
    const unsigned long long t0 = gt();
    if (blockIdx.x == 0 && threadIdx.x == 0) win[0] = t0;
    int acc = 0; int it = 0;
    while (gt() - t0 < ns) {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x * 4) {
            if (mode == 1) {
#pragma unroll
                for (int j = 0; j < 4; ++j) if (i + j * gridDim.x * blockDim.x < n16) dst[i + j * gridDim.x * blockDim.x] = make_int4(it, j, 1, 2);
            } else if (mode == 2) {
#pragma unroll
                for (int j = 0; j < 4; ++j) if (i + j * gridDim.x * blockDim.x < n16) { int4 v = __ldcv(dst + i + j * gridDim.x * blockDim.x); acc ^= v.x; }
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) if (i + j * gridDim.x * blockDim.x < n16) atomicAdd((float *)(dst + i + j * gridDim.x * blockDim.x), 1.0f);
            }
        }
        ++it;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) win[1] = gt();
    if (acc == 0x12345678) sink[0] = acc;
}

// GPU 1: one thread per CTA spinning on a GPU-1-local word: 5 ld.acquire.sys, 6 fence.sc.sys,
// 7 ld.relaxed.sys, 8 ld.acquire.gpu, 9 ld.acquire.sys with 256 ns sleeps
__global__ void spinners(unsigned long long *word, unsigned long long ns, int mode, unsigned long long *win, int *sink)
{
    if (threadIdx.x) return;
    const unsigned long long t0 = gt();
    if (blockIdx.x == 0) win[0] = t0;
    unsigned long long acc = 0, v;
    while (gt() - t0 < ns) {
        for (int i = 0; i < 64; ++i) {
            if (mode == 5 || mode == 9) { asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory"); acc += v; if (mode == 9) __nanosleep(256); }
            else if (mode == 6) { asm volatile("fence.sc.sys;" ::: "memory"); }
            else if (mode == 7) { asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory"); acc += v; }
            else { asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory"); acc += v; }
        }
    }
    if (blockIdx.x == 0) win[1] = gt();
    if (acc == 12345) sink[0] = (int)acc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--writer")) { // --writer SECONDS MODE NW: GPU 1 writes into a GPU-0 buffer
        const double sec = atof(argv[2]); const int mode = atoi(argv[3]), nw = atoi(argv[4]);
        CK(cudaSetDevice(0)); int4 *tg; CK(cudaMalloc(&tg, 256ull << 20)); CK(cudaMemset(tg, 0, 256ull << 20)); CK(cudaDeviceSynchronize());
        CK(cudaSetDevice(1)); CK(cudaDeviceEnablePeerAccess(0, 0));
        unsigned long long *w; CK(cudaMallocHost(&w, 16)); int *sk; CK(cudaMalloc(&sk, 64));
        writers<<<nw, 512>>>(tg, (256ull << 20) / 16, (unsigned long long)(sec * 1e9), mode, w, sk);
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
        printf("writer: mode %d, %d CTAs, %.3f s\n", mode, nw, (w[1] - w[0]) / 1e9);
        return 0;
    }
    int ok; CK(cudaDeviceCanAccessPeer(&ok, 1, 0));
    if (!ok) { printf("no peer access 1 -> 0\n"); return 1; }
    CK(cudaSetDevice(0));
    const size_t bytes = 4ull << 30, tbytes = 256ull << 20;
    int4 *buf, *target; CK(cudaMalloc(&buf, bytes)); CK(cudaMemset(buf, 1, bytes));
    CK(cudaMalloc(&target, tbytes)); CK(cudaMemset(target, 0, tbytes));
    unsigned long long *t; CK(cudaMalloc(&t, 2 * 132 * 8));
    int *sink0; CK(cudaMalloc(&sink0, 64));
    cudaStream_t s0; CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    cudaStream_t s0w; CK(cudaStreamCreateWithFlags(&s0w, cudaStreamNonBlocking));
    int *sink0w; CK(cudaMalloc(&sink0w, 64));
    CK(cudaSetDevice(1)); CK(cudaDeviceEnablePeerAccess(0, 0));
    unsigned long long *win; CK(cudaMallocHost(&win, 16));
    int *sink1; CK(cudaMalloc(&sink1, 64));
    cudaStream_t s1; CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    int4 *target1; CK(cudaMalloc(&target1, tbytes)); CK(cudaMemset(target1, 0, tbytes)); CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0)); CK(cudaDeviceEnablePeerAccess(1, 0));
    std::vector<unsigned long long> h(2 * 132);
    const char *mn[] = {"none", "peer stores", "peer loads", "peer red.add", "own stores out",
                        "peer acq.sys spin", "peer fence.sys spin", "peer rlx.sys spin", "peer acq.gpu spin", "peer acq.sys+sleep"};
    unsigned long long *word1; CK(cudaSetDevice(1)); CK(cudaMalloc(&word1, 4096)); CK(cudaMemset(word1, 0, 4096)); CK(cudaSetDevice(0));
    printf("%-14s %6s %6s  %8s %8s %8s  (GB/s of GPU 0's loaders, runs inside the writers' window)\n", "peer mode", "nload", "nwrite", "min", "med", "max");
    for (int nl : {30, 64, 124})
        for (int mode = 0; mode < 10; ++mode)
            for (int nw : {16, 132}) {
                if (mode == 0 && nw == 132) continue;
                const size_t per = bytes / 16 / nl / 2;
                ((volatile unsigned long long *)win)[0] = 0; ((volatile unsigned long long *)win)[1] = 0;
                if (mode == 4) {
                    if (nw + nl > 132) continue;
                    writers<<<nw, 512, 0, s0w>>>(target1, tbytes / 16, 30000000ull, 1, win, sink0w);
                    CK(cudaGetLastError());
                    while (((volatile unsigned long long *)win)[0] == 0) {}
                } else if (mode >= 5) {
                    if (nw != 132) continue;
                    CK(cudaSetDevice(1));
                    spinners<<<nw, 32, 0, s1>>>(word1, 30000000ull, mode, win, sink1);
                    CK(cudaGetLastError());
                    CK(cudaSetDevice(0));
                    while (((volatile unsigned long long *)win)[0] == 0) {}
                } else if (mode) {
                    CK(cudaSetDevice(1));
                    writers<<<nw, 512, 0, s1>>>(target, tbytes / 16, 30000000ull, mode, win, sink1); // 30 ms
                    CK(cudaGetLastError());
                    CK(cudaSetDevice(0));
                    while (((volatile unsigned long long *)win)[0] == 0) {}
                }
                std::vector<double> v; std::vector<unsigned long long> st, en;
                for (int rep = 0; rep < 12; ++rep) {
                    loaders<<<nl, 512, 0, s0>>>(buf + (rep & 1) * (bytes / 32), per, t, sink0);
                    CK(cudaGetLastError());
                    CK(cudaStreamSynchronize(s0));
                    CK(cudaMemcpy(h.data(), t, 2 * nl * 8, cudaMemcpyDeviceToHost));
                    unsigned long long a = ~0ull, b = 0;
                    for (int i = 0; i < nl; ++i) { a = std::min(a, h[2 * i]); b = std::max(b, h[2 * i + 1]); }
                    st.push_back(a); en.push_back(b);
                    v.push_back((double)per * 16 * nl / (double)(b - a));
                }
                const bool inside = !mode || ((volatile unsigned long long *)win)[1] == 0;
                if (mode == 4) CK(cudaStreamSynchronize(s0w));
                else if (mode) { CK(cudaSetDevice(1)); CK(cudaStreamSynchronize(s1)); CK(cudaSetDevice(0)); }
                std::vector<double> in;
                for (size_t i = 0; i < v.size(); ++i)
                    if (inside) in.push_back(v[i]);
                std::sort(in.begin(), in.end());
                if (in.empty()) { printf("%-14s %6d %6d  no run inside the window\n", mn[mode], nl, mode ? nw : 0); continue; }
                printf("%-14s %6d %6d  %8.1f %8.1f %8.1f  (%zu runs)\n", mn[mode], nl, mode ? nw : 0, in.front(), in[in.size() / 2], in.back(), in.size());
            }
    return 0;
}
