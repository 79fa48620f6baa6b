/*
 * coll_sum.cuh - the sum of one chunk's inputs for the collectives' REDUCE
 * role (kernels/ops/coll.cu): which inputs, where the result goes, and the
 * element loops (fp32, input order, one rounding).  Not a header of its
 * own: coll.cu includes it inside its anonymous namespace, after ctx.
 */
#ifndef MKI_OPS_COLL_SUM_CUH
#define MKI_OPS_COLL_SUM_CUH

/* The inputs of one chunk's reduction.  One phase: every rank's copy in
 * rank order (own at its place), so that every rank adds in the same
 * order and gets the same bits.  Two phases: the own block first, then
 * the peers' in ring order.  rem(j): where result j goes besides out
 * (all-reduce with register stores: peer j's phase-1 slot, or its
 * recvbuf with zero copy). */
template <typename T>
struct chunk_io {
    const ctx *x;
    char *const *to; /* zero copy: peers' recvbufs by local index, or NULL */
    const T *own;    /* this rank's input at the chunk */
    uint64_t k;      /* the chunk */
    uint64_t at;     /* the chunk's byte offset in the block */
    bool oneshot;

    __device__ __forceinline__ int peer(int j) const
    {
        const int n = x->p->rt.nranks, me = x->p->rt.rank;
        return oneshot ? j : (me + j) % n;
    }
    /* input j: 0 .. nranks - 1 */
    __device__ __forceinline__ const T *in(int j) const
    {
        const int q = peer(j);
        if (q == x->p->rt.rank) return own;
        return reinterpret_cast<const T *>(x->k.inbox(q, 0, x->k.slot(q, k)));
    }
    /* result copy for input j = 1 .. nranks - 1 (two phases) */
    __device__ __forceinline__ T *rem(int j) const
    {
        const mki_coll_params &p = *x->p;
        const int l = x->k.lof(peer(j));
        if (to && to[l]) return reinterpret_cast<T *>(to[l] + at);
        /* a local peer's phase-1 slot (results are pushed on the node only) */
        return reinterpret_cast<T *>(p.ch.slots[l] + mki_ch_slot(1, p.rt.local, x->k.c,
                                                                  (int)(k % MKI_NSLOTS),
                                                                  p.rt.nlocal, p.ch.slot_bytes));
    }
};

/* out[i] = the sum of every input's element i, in input order,
 * accumulated in fp32 and rounded once; with push, the result also goes to every rem(j).  16-byte
 * vectors when vec (every result pointer 16-byte aligned) and out, own are
 * aligned. */
template <typename T>
__device__ void reduce_chunk(T *out, const chunk_io<T> &io, int nin, bool push, uint64_t n,
                             int tid, int nthr, bool vec)
{
    constexpr int V = 16 / sizeof(T);
    constexpr int U = 4; /* vectors in flight per thread and input */
    uint64_t start = 0;
    if (vec && (((uintptr_t)out | (uintptr_t)io.own) & 15) == 0) {
        const uint64_t nv = n / V;
        for (uint64_t i0 = tid; i0 < nv; i0 += (uint64_t)U * nthr) {
            float acc[U][V];
            uint4 w[U];
            auto load = [&](int j) {
                const T *src = io.in(j);
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (i0 + (uint64_t)u * nthr < nv) w[u] = ld16(src + (i0 + (uint64_t)u * nthr) * V);
            };
            load(0);
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int v = 0; v < V; v++) acc[u][v] = num<T>::to(reinterpret_cast<const T *>(&w[u])[v]);
            for (int j = 1; j < nin; j++) {
                load(j);
#pragma unroll
                for (int u = 0; u < U; u++)
#pragma unroll
                    for (int v = 0; v < V; v++)
                        acc[u][v] += num<T>::to(reinterpret_cast<const T *>(&w[u])[v]);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t i = i0 + (uint64_t)u * nthr;
                if (i >= nv) break;
                uint4 r;
                T *o = reinterpret_cast<T *>(&r);
#pragma unroll
                for (int v = 0; v < V; v++) o[v] = num<T>::from(acc[u][v]);
                reinterpret_cast<uint4 *>(out)[i] = r;
                for (int j = 1; push && j < nin; j++) reinterpret_cast<uint4 *>(io.rem(j))[i] = r;
            }
            if (tid == 0) CT(CT_R_ROUND, (int)(i0 / ((uint64_t)U * nthr)));
        }
        start = nv * V;
    }
    for (uint64_t i = start + tid; i < n; i += nthr) {
        float acc = num<T>::to(__ldcg(io.in(0) + i));
        for (int j = 1; j < nin; j++) acc += num<T>::to(__ldcg(io.in(j) + i));
        const T r = num<T>::from(acc);
        out[i] = r;
        for (int j = 1; push && j < nin; j++) io.rem(j)[i] = r;
    }
}

#endif /* MKI_OPS_COLL_SUM_CUH */
