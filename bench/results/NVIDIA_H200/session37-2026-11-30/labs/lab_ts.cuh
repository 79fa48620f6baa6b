// s37 lab: the engine's MKI_LAB_TS points for the plain GEMM (pre-included
// into kernels/gemm/gemm.cu); mki_lab_dump() prints the last call's timeline.
#pragma once
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define LAB_IT 24
#define MKI_LAB_TS(h, it, w) mki_plain_lab_ts(it, w)
__device__ unsigned long long mki_plain_tl[512][LAB_IT][3];
__device__ long long mki_plain_ck[512][LAB_IT][2];
__device__ __forceinline__ void mki_plain_lab_ts(int it, int w)
{
    if (it < LAB_IT && blockIdx.x < 512) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        mki_plain_tl[blockIdx.x][it][w] = t;
        if (w < 2) mki_plain_ck[blockIdx.x][it][w] = clock64();
    }
}
extern "C" void mki_lab_dump(long long m, long long n, long long k)
{
    static std::vector<unsigned long long> h(512 * LAB_IT * 3);
    if (cudaMemcpyFromSymbol(h.data(), mki_plain_tl, h.size() * 8) != cudaSuccess) { printf("lab: copy failed\n"); return; }
    static std::vector<long long> ck(512 * LAB_IT * 2);
    if (cudaMemcpyFromSymbol(ck.data(), mki_plain_ck, ck.size() * 8) != cudaSuccess) { printf("lab: copy failed\n"); return; }
    std::vector<unsigned long long> z(h.size(), 0);
    cudaMemcpyToSymbol(mki_plain_tl, z.data(), z.size() * 8);
    auto mhz = [&](int c, int i) { double dt = (double)(h[((size_t)c * LAB_IT + i) * 3 + 1] - h[((size_t)c * LAB_IT + i) * 3]);
        return dt > 0 ? (ck[((size_t)c * LAB_IT + i) * 2 + 1] - ck[((size_t)c * LAB_IT + i) * 2]) / dt * 1e3 : -1.0; };
    std::vector<double> fmid, flast;
    auto at = [&](int c, int i, int w) { return h[((size_t)c * LAB_IT + i) * 3 + w]; };
    unsigned long long t0 = ~0ull;
    for (int c = 0; c < 512; ++c) if (at(c, 0, 2)) t0 = std::min(t0, at(c, 0, 2));
    std::vector<double> mid, last, ends;
    struct L { double d, s, e; int c, i; };
    std::vector<L> ls;
    for (int c = 0; c < 512; ++c) {
        int ni = 0;
        while (ni < LAB_IT && at(c, ni, 1)) ++ni;
        if (!ni) continue;
        for (int i = 0; i < ni; ++i) {
            double d = (at(c, i, 1) - (double)at(c, i, 0)) / 1e3;
            printf("PL %lldx%lldx%lld cta %d it %d MHz %.0f first_load %.1f first_stage %.1f end %.1f\n", m, n, k, c, i, mhz(c, i),
                   (at(c, i, 2) - (double)t0) / 1e3, (at(c, i, 0) - (double)t0) / 1e3, (at(c, i, 1) - (double)t0) / 1e3);
            (i + 1 < ni ? mid : last).push_back(d);
            (i + 1 < ni ? fmid : flast).push_back(mhz(c, i));
            if (i + 1 == ni) ls.push_back({d, (at(c, i, 0) - (double)t0) / 1e3, (at(c, i, 1) - (double)t0) / 1e3, c, i});
        }
        ends.push_back((at(c, ni - 1, 1) - (double)t0) / 1e3);
    }
    auto med = [](std::vector<double> v) { if (v.empty()) return -1.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    auto mx = [](const std::vector<double> &v) { return v.empty() ? -1.0 : *std::max_element(v.begin(), v.end()); };
    std::sort(ls.begin(), ls.end(), [](const L &a, const L &b) { return a.d > b.d; });
    int slow = 0;
    for (auto &l : ls) slow += l.d > 1.5 * med(mid);
    std::vector<double> e2 = ends; std::sort(e2.begin(), e2.end());
    printf("LAB %lldx%lldx%lld: %zu CTAs; mainloop mid n %zu med %.1f max %.1f; last n %zu med %.1f max %.1f; "
           "last > 1.5x mid median: %d; CTA ends min %.1f med %.1f max %.1f us\n", m, n, k, ends.size(), mid.size(),
           med(mid), mx(mid), last.size(), med(last), mx(last), slow, e2.empty() ? -1 : e2[0], med(ends), mx(ends));
    printf("LAB   SM clock over mainloops (MHz): mid med %.0f min %.0f; last med %.0f min %.0f\n", med(fmid),
           fmid.empty() ? -1.0 : *std::min_element(fmid.begin(), fmid.end()), med(flast),
           flast.empty() ? -1.0 : *std::min_element(flast.begin(), flast.end()));
    for (size_t j = 0; j < ls.size() && j < 6; ++j)
        printf("LAB   slow last: %.1f us cta %d it %d MHz %.0f (first stage %.1f end %.1f)\n", ls[j].d, ls[j].c, ls[j].i, mhz(ls[j].c, ls[j].i), ls[j].s, ls[j].e);
}
