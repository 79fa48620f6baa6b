/*
 * coll_trace.cuh - a lab trace of the collectives (kernels/ops/coll.cu),
 * built only with -DMKI_COLL_TRACE=N (tests/gpu/coll_build.sh; nothing of
 * it otherwise): the leaders of CTAs 0, nch / 2 and nch - 1 stamp
 * globaltimer at each step of calls e % N == N / 2 (codes below, arg =
 * peer << 8 | chunk) and print them at the end ("COLLT ..." lines;
 * tools/coll_trace.py reads them).  Stamps of one rank compare; the GPUs'
 * timers differ.  Not a header of its own: coll.cu includes it inside its
 * anonymous namespace.
 */
#ifndef MKI_OPS_COLL_TRACE_CUH
#define MKI_OPS_COLL_TRACE_CUH

#ifdef MKI_COLL_TRACE
enum { CT_ENTER = 1, CT_S_CRED, CT_S_DLV, CT_S_END, CT_R_ARR, CT_R_SUM, CT_T_GO, CT_T_DLV,
       CT_T_END, CT_V_ARR, CT_V_CPY, CT_V_END, CT_LEAVE, CT_S_START, CT_R_RED, CT_OWED,
       CT_R_ROUND };
#define CT_MAX 96
struct coll_tr {
    uint64_t t[CT_MAX];
    uint32_t ev[CT_MAX];
    uint32_t n;
    int on;
};
__shared__ coll_tr ctr;
__device__ __forceinline__ void ct_stamp(int code, int arg)
{
    if (!ctr.on) return;
    const uint32_t i = atomicAdd(&ctr.n, 1u);
    if (i < CT_MAX) {
        ctr.t[i] = globaltimer();
        ctr.ev[i] = (uint32_t)code << 16 | ((uint32_t)arg & 0xffffu);
    }
}
#define CT(code, arg) ct_stamp(code, arg)
/* Before chunk 0 to local peer q of a phase: whether the credit the last
 * call owes is already there (arg = q << 8 | 1 when it is). */
#define CT_OWED_AT(k, q, phase)                                                              \
    do {                                                                                     \
        if (tid == 0 && (k) == 0 && !x.k.remote(q))                                          \
            CT(CT_OWED, (q) << 8 | (*reinterpret_cast<const volatile uint64_t *>(             \
                                        x.k.credit(q, phase)) >= *x.k.owed(q, phase)));      \
    } while (0)

/* Thread 0 at the CTA's entry: whether this call is traced here. */
__device__ __forceinline__ void ct_begin(uint64_t e)
{
    ctr.n = 0;
    ctr.on = e % MKI_COLL_TRACE == MKI_COLL_TRACE / 2 &&
             (blockIdx.x == 0 || blockIdx.x == gridDim.x / 2 || blockIdx.x == gridDim.x - 1);
    CT(CT_ENTER, 0);
}

/* Thread 0 at the CTA's exit: the stamps. */
__device__ __forceinline__ void ct_print(int rank, uint64_t e)
{
    if (!ctr.on) return;
    CT(CT_LEAVE, 0);
    const uint32_t n = ctr.n < CT_MAX ? ctr.n : CT_MAX;
    for (uint32_t i = 0; i < n; i++)
        printf("COLLT e %llu rank %d cta %d nch %d ev %u arg %u t %llu\n", (unsigned long long)e,
               rank, (int)blockIdx.x, (int)gridDim.x, ctr.ev[i] >> 16, ctr.ev[i] & 0xffffu,
               (unsigned long long)ctr.t[i]);
}
#else
#define CT(code, arg) ((void)0)
#define CT_OWED_AT(k, q, phase) ((void)0)
__device__ __forceinline__ void ct_begin(uint64_t) {}
__device__ __forceinline__ void ct_print(int, uint64_t) {}
#endif

#endif /* MKI_OPS_COLL_TRACE_CUH */
