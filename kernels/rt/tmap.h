/*
 * tmap.h - the driver's cuTensorMapEncodeTiled for the host side of the
 * TMA kernels (the GEMM engine, the attention kernel), fetched through the
 * runtime so that nothing links libcuda.  C++ (host), CUDA headers.
 */
#ifndef MKI_TMAP_H
#define MKI_TMAP_H

#include <cuda.h> /* CUtensorMap and its enums: types only */
#include <cuda_runtime.h>
#include <stdio.h>

namespace mki {

typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The encoder, looked up once per object file; NULL with msg set (`who`
 * first: "gemm", "attn") when the driver lacks it. */
inline EncodeTiledFn tmap_encoder(const char *who, char *msg, size_t len)
{
    static EncodeTiledFn fn = nullptr;
    if (fn) return fn;
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p) {
        if (msg && len)
            snprintf(msg, len, "%s: cuTensorMapEncodeTiled not found in the driver (%s); "
                     "the driver must support CUDA 12.0 or newer",
                     who, cudaGetErrorString(e));
        return nullptr;
    }
    fn = (EncodeTiledFn)p;
    return fn;
}

} /* namespace mki */

#endif /* MKI_TMAP_H */
