// lab (not landed): can one kernel run the GEMM engine's run_cta twice, on two problems,
// a cluster sync between?  (setmaxnreg dec/inc to the counts the warps already hold, the
// barriers initialized again.)  Two grouped GEMMs (1 group each) computed by mki_gemm_grouped
// (reference: the engine's own launch) and by one kernel that runs both; results compared
// bit for bit.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "gemm_engine.cuh"
#include "gemm_grouped.cuh"
using namespace mki::gemm;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 2; } } while (0)

template <int kCM>
__global__ void __launch_bounds__(kThreads, 1) twice(const __grid_constant__ GemmParams p1, const __grid_constant__ GroupedHooks h1,
                                                     const __grid_constant__ GemmParams p2, const __grid_constant__ GroupedHooks h2)
{
    extern __shared__ __align__(1024) char smem[];
    run_cta<false, true, kCM, GroupedHooks>(p1, h1, blockIdx.x, gridDim.x, smem);
    __syncwarp();
    __syncthreads();
    run_cta<false, true, kCM, GroupedHooks>(p2, h2, blockIdx.x, gridDim.x, smem);
}

__global__ void fill(__nv_bfloat16 *p, size_t n, unsigned s)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)(i * 2654435761u) ^ s; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = __float2bfloat16(((h & 0xffff) / 32768.0f - 1.0f) * 0.5f);
    }
}

int main()
{
    const long long rows = 1000, n1 = 512, k1 = 768, n2 = 768, k2 = 512; // C2 = (A B1^T) B2^T shapes
    __nv_bfloat16 *a, *b1, *b2, *d1, *d2, *e1, *e2; int64_t *off; int32_t *t1, *t2;
    CK(cudaMalloc(&a, rows * k1 * 2)); CK(cudaMalloc(&b1, n1 * k1 * 2)); CK(cudaMalloc(&b2, n2 * k2 * 2));
    CK(cudaMalloc(&d1, rows * n1 * 2)); CK(cudaMalloc(&d2, rows * n2 * 2));
    CK(cudaMalloc(&e1, rows * n1 * 2)); CK(cudaMalloc(&e2, rows * n2 * 2));
    CK(cudaMalloc(&off, 16)); CK(cudaMalloc(&t1, 4 * MKI_GEMM_GROUP_TABLE(rows, 1))); CK(cudaMalloc(&t2, 4 * MKI_GEMM_GROUP_TABLE(rows, 1)));
    int64_t ho[2] = {0, rows}; CK(cudaMemcpy(off, ho, 16, cudaMemcpyHostToDevice));
    fill<<<256, 256>>>(a, rows * k1, 1); fill<<<256, 256>>>(b1, n1 * k1, 2); fill<<<256, 256>>>(b2, n2 * k2, 3);
    // reference: two launches of the engine; the second reads the first's output as A (k2 = n1)
    mki_gemm_grouped_args g1, g2; memset(&g1, 0, sizeof g1);
    g1.rows = rows; g1.n = n1; g1.k = k1; g1.groups = 1; g1.a = a; g1.b = b1; g1.d = d1; g1.offsets = off; g1.table = t1;
    g1.in_type = MKI_DT_BF16; g1.out_type = MKI_DT_BF16; g1.trans_b = 1; g1.num_ctas = 16;
    g2 = g1; g2.n = n2; g2.k = k2; g2.a = d1; g2.b = b2; g2.d = d2; g2.table = t2;
    char msg[512];
    if (mki_gemm_grouped(&g1, msg, sizeof msg) || mki_gemm_grouped(&g2, msg, sizeof msg)) { printf("ref: %s\n", msg); return 2; }
    CK(cudaDeviceSynchronize());
    // the same two problems in one kernel: independent here (the second reads the reference's d1,
    // written by the first launch above; this lab asks only whether run_cta can run twice)
    GemmParams p1, p2; GroupedHooks h1, h2; int grid1 = 0, grid2 = 0;
    mki_gemm_grouped_args q1 = g1, q2 = g2; q1.d = e1; q2.d = e2;
    if (grouped_params(&q1, &p1, &h1, &grid1, msg, sizeof msg) || grouped_params(&q2, &p2, &h2, &grid2, msg, sizeof msg)) { printf("params: %s\n", msg); return 2; }
    int cm = p1.cluster_m;
    printf("grid %d / %d, cluster %d / %d\n", grid1, grid2, p1.cluster_m, p2.cluster_m);
    if (p2.cluster_m != cm || grid1 != grid2) { printf("different plans: lab assumes the same\n"); return 2; }
    cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = cm; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kThreads); cfg.dynamicSmemBytes = kSmemBytes; cfg.attrs = at; cfg.numAttrs = 1; cfg.gridDim = dim3(grid1);
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaMemset(e1, 0xff, rows * n1 * 2)); CK(cudaMemset(e2, 0xff, rows * n2 * 2));
        if (cm == 2) { CK(cudaFuncSetAttribute(twice<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)); CK(cudaLaunchKernelEx(&cfg, twice<2>, p1, h1, p2, h2)); }
        else { CK(cudaFuncSetAttribute(twice<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)); CK(cudaLaunchKernelEx(&cfg, twice<1>, p1, h1, p2, h2)); }
        CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
        std::vector<unsigned short> r1(rows * n1), r2(rows * n2), s1(rows * n1), s2(rows * n2);
        CK(cudaMemcpy(r1.data(), d1, rows * n1 * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(s1.data(), e1, rows * n1 * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(r2.data(), d2, rows * n2 * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(s2.data(), e2, rows * n2 * 2, cudaMemcpyDeviceToHost));
        long long diff1 = 0, diff2 = 0;
        for (size_t i = 0; i < r1.size(); i++) diff1 += r1[i] != s1[i];
        for (size_t i = 0; i < r2.size(); i++) diff2 += r2[i] != s2[i];
        printf("rep %d: run_cta twice: %lld / %lld elements differ from the two launches  %s\n", rep, diff1, diff2, diff1 || diff2 ? "FAIL" : "ok");
    }
    return 0;
}
