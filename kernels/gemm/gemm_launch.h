/* C++ host helpers around the GEMM engine for code that brings its own hooks
 * (fused kernels, tests). Plain callers use mki_gemm() from gemm.h. */
#pragma once

#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm.h"
#include "gemm_engine.cuh"

namespace mki {
namespace gemm {

/* Encodes a 2-D row-major tensor map ({inner, outer} elements, ld elements
 * between rows) with 128B swizzle and zero fill out of bounds. */
int encode_2d(CUtensorMap *map, const void *ptr, mki_dtype_t dt, uint64_t inner, uint64_t outer,
              uint64_t ld, uint32_t box_inner, uint32_t box_outer, char *msg, size_t len);

/* A tensor map the epilogue can store or add a tile through (EpiTarget):
 * rows x cols of dtype dt, ld elements per row, ptr 16-byte aligned and
 * ld * size a multiple of 16 bytes. ptr may be a peer's mapped memory. */
int encode_out_map(CUtensorMap *map, void *ptr, mki_dtype_t dt, uint64_t rows, uint64_t cols,
                   uint64_t ld, char *msg, size_t len);

/* Validated args + plan -> kernel parameters (tensor maps included). */
int make_params(const mki_gemm_args *a, const mki_gemm_plan *plan, GemmParams *p, char *msg,
                size_t len);

/* Fills the device description of the current device. */
int query_device(mki_gemm_device *dev, char *msg, size_t len);

/* Sets the work-unit fields of p for clusters of cm CTAs (1 or 2). */
inline void set_cluster(GemmParams &p, int cm)
{
    p.cluster_m = cm;
    p.num_units = mki_gemm_num_units(p.num_m_blk, p.num_n_blk, cm);
}

template <bool kF16, bool kTransB, int kCM, typename Hooks>
int launch_cm(const GemmParams &p, const Hooks &h, int grid, cudaStream_t s, char *msg,
              size_t len)
{
    auto kern = gemm_kernel<kF16, kTransB, kCM, Hooks>;
    static int max_clusters = -1; /* per instantiation */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = kCM;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t e = cudaSuccess;
    if (max_clusters < 0) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        cfg.gridDim = dim3(grid);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveClusters(&max_clusters, kern, &cfg);
    }
    if (e == cudaSuccess) {
        /* the persistent grid must be co-resident: no more clusters than fit */
        if (grid > max_clusters * kCM)
            grid = max_clusters * kCM;
        cfg.gridDim = dim3(grid);
        e = cudaLaunchKernelEx(&cfg, kern, p, h);
    }
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess) {
        if (msg && len)
            snprintf(msg, len, "gemm: launch failed: %s", cudaGetErrorString(e));
        return MKI_GEMM_ERR_CUDA;
    }
    return MKI_GEMM_OK;
}

/* The instance kern<kF16, kTransB, kCM> of a fused op's kernel template
 * for a call (cm: 1 or 2 CTAs per cluster), as a host handle. */
#define MKI_ENGINE_KERNEL(kern, f16, tb, cm)                                                   \
    ((f16) ? ((tb) ? ((cm) == 2 ? (const void *)kern<true, true, 2>                           \
                                : (const void *)kern<true, true, 1>)                          \
                   : ((cm) == 2 ? (const void *)kern<true, false, 2>                          \
                                : (const void *)kern<true, false, 1>))                        \
           : ((tb) ? ((cm) == 2 ? (const void *)kern<false, true, 2>                          \
                                : (const void *)kern<false, true, 1>)                         \
                   : ((cm) == 2 ? (const void *)kern<false, false, 2>                         \
                                : (const void *)kern<false, false, 1>)))

/* Load a fused op's kernels now (CUDA's lazy loading can deadlock a
 * launch beside a spinning stream): its 8 engine instances (the dynamic
 * shared memory attribute set) and its other kernels; 0, or
 * MKI_GEMM_ERR_CUDA with msg set ("op: loading ...: why"). */
inline int preload_engine(const void *const engine[8], const void *const *others, int nothers,
                          const char *op, char *msg, size_t len)
{
    for (int i = 0; i < 8 + nothers; i++) {
        const void *k = i < 8 ? engine[i] : others[i - 8];
        cudaFuncAttributes at;
        cudaError_t e = cudaFuncGetAttributes(&at, k);
        if (e == cudaSuccess && i < 8)
            e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e != cudaSuccess) {
            if (msg && len)
                snprintf(msg, len, "%s: loading the %s: %s", op,
                         i < 8 ? "fused kernel" : "protocol kernels", cudaGetErrorString(e));
            return MKI_GEMM_ERR_CUDA;
        }
    }
    return MKI_GEMM_OK;
}

/* Launches gemm_kernel with custom hooks on `grid` CTAs (<= SM count), in
 * clusters of cluster_m CTAs (2: the pair shares B tiles by multicast; used
 * only when grid is even, else 1). The hooks' tile() then numbers work units
 * (see mki_gemm_unit_of). */
template <bool kF16, bool kTransB, typename Hooks>
int launch(GemmParams p, const Hooks &h, int grid, int cluster_m, cudaStream_t s, char *msg,
           size_t len)
{
    if (cluster_m == 2 && grid % 2 == 0 && grid >= 2) {
        set_cluster(p, 2);
        return launch_cm<kF16, kTransB, 2>(p, h, grid, s, msg, len);
    }
    set_cluster(p, 1);
    return launch_cm<kF16, kTransB, 1>(p, h, grid, s, msg, len);
}

} // namespace gemm
} // namespace mki
