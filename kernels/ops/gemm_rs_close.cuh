/*
 * gemm_rs_close.cuh - how the last CTA out of a call of
 * mkGemmReduceScatter's / mkGemmAllReduce's kernels (the engine's,
 * kernels/ops/gemm_rs.cu; the decode kernel, kernels/ops/gemm_dec.cu)
 * closes the call, once it has cleared what the next call needs cleared.
 */
#ifndef MKI_OPS_GEMM_RS_CLOSE_CUH
#define MKI_OPS_GEMM_RS_CLOSE_CUH

#include "ops/gemm_rs.h"
#include "rt/ptx.cuh"

namespace mki {

/* One system-scope fence, then plain stores of call number e: this
 * rank's calls and released, and each peer's copy of released (its
 * gate spins on local memory).  A fence followed by a relaxed store is
 * a release of everything this rank's CTAs did in the call (each fenced
 * before it counted its exit); release stores of their own would fence
 * again, each a round trip over the link. */
__device__ __forceinline__ void grs_close(mki_grs_ctl *const *ctl, int me, int P, uint64_t e)
{
    __threadfence_system();
    st_relaxed_sys(&ctl[me]->calls, e);
    st_relaxed_sys(&ctl[me]->released, e);
    for (int q = 0; q < P; ++q)
        if (q != me) st_relaxed_sys(&ctl[q]->peer_released[me], e);
}

} /* namespace mki */

#endif /* MKI_OPS_GEMM_RS_CLOSE_CUH */
