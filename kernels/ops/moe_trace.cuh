/*
 * moe_trace.cuh - a lab trace of the MoE kernels (kernels/ops/moe.cu),
 * built only with -DMKI_MOE_TRACE (MK_BUILD_DEFS with tests/gpu/moe.sh
 * build; nothing of it otherwise): per call and rank, the first and last
 * CTA's globaltimer at points of the layer's first kernel (k 0: entry,
 * end of the dispatch prologue, exit) and of the combine (k 1: entry,
 * first wait for a peer passed, exit), printed by the kernel's last CTA
 * out ("MKT ..." lines; tools/moe_trace.py reads them).  Stamps of one
 * rank compare; the GPUs' timers differ.  Not a header of its own: moe.cu
 * includes it inside its anonymous namespace.
 */
#ifndef MKI_OPS_MOE_TRACE_CUH
#define MKI_OPS_MOE_TRACE_CUH

#ifdef MKI_MOE_TRACE
enum { KT_ENTRY, KT_PRO, KT_END, KT_NPT };
__device__ unsigned long long kt_min[2][KT_NPT] = {{~0ull, ~0ull, ~0ull}, {~0ull, ~0ull, ~0ull}};
__device__ unsigned long long kt_max[2][KT_NPT];
__device__ unsigned long long kt_wsum[2];
__device__ unsigned int kt_cnt[2];
__device__ __forceinline__ void kt_stamp(int k, int i)
{
    const unsigned long long t = globaltimer();
    atomicMin(&kt_min[k][i], t);
    atomicMax(&kt_max[k][i], t);
}
__device__ void kt_done(int k, int me, unsigned long long call)
{
    kt_stamp(k, KT_END);
    __threadfence();
    if (atomicAdd(&kt_cnt[k], 1u) != gridDim.x - 1) return;
    __threadfence();
    const unsigned long long t0 = kt_min[k][KT_ENTRY];
    printf("MKT %s rank %d call %llu t0 %llu entry_max %.1f pro %.1f %.1f end %.1f %.1f wsum %.1f us\n",
           k ? "C" : "L", me, call, t0, (kt_max[k][KT_ENTRY] - t0) * 1e-3,
           (kt_min[k][KT_PRO] - t0) * 1e-3, (kt_max[k][KT_PRO] - t0) * 1e-3,
           (kt_min[k][KT_END] - t0) * 1e-3, (kt_max[k][KT_END] - t0) * 1e-3, kt_wsum[k] * 1e-3);
    for (int i = 0; i < KT_NPT; i++) {
        kt_min[k][i] = ~0ull;
        kt_max[k][i] = 0;
    }
    kt_wsum[k] = 0;
    kt_cnt[k] = 0;
    __threadfence();
}
#define KT_STAMP(k, i) kt_stamp(k, i)
#define KT_DONE(k, me, call) kt_done(k, me, call)
#define KT_WAIT(k, ns) atomicAdd(&kt_wsum[k], (unsigned long long)(ns))
#else
#define KT_STAMP(k, i) ((void)0)
#define KT_DONE(k, me, call) ((void)0)
#define KT_WAIT(k, ns) ((void)0)
#endif

#endif /* MKI_OPS_MOE_TRACE_CUH */
