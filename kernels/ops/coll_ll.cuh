/*
 * coll_ll.cuh - the LL roles of the collectives (kernels/ops/coll.cu):
 * small blocks on one node as 16-byte lines with the flag in every word
 * (kernels/rt/ll.cuh, the LL block in kernels/rt/channel.h).  Not a
 * header of its own: coll.cu includes it inside its anonymous namespace,
 * after ctx, part_of and the slot roles, so that the LL roles use them.
 */
#ifndef MKI_OPS_COLL_LL_CUH
#define MKI_OPS_COLL_LL_CUH

/* What an LL role computes once per call (no division in its loops:
 * with one CTA doing a whole small call, integer work is its time). */
struct ll_geo {
    uint64_t off, len;   /* this channel's part of every block */
    uint64_t lines;      /* 16-byte lines of the part */
    uint64_t bstride;    /* bytes between blocks of src (reduce-scatter,
                          * all-to-all) or 0 (the same block to all) */
    char *inbox0;        /* my buffer's lines from local sender 0 */
    uint64_t buf;        /* offset of my lines in a peer's LL block */
    uint32_t flag;
};

/* Bytes between the lines from local senders l and l + 1. */
#define LL_LSTRIDE ((uint64_t)MKI_LL_MAXCH * 2ull * MKI_LL_PART)

__device__ __forceinline__ ll_geo ll_geo_of(const ctx &x)
{
    const mki_coll_params &p = *x.p;
    ll_geo g;
    uint64_t boff, b;
    part_of(x, p.rt.rank, &boff, &b, &g.off, &g.len); /* every block has b bytes */
    g.lines = (g.len + 7) / 8;
    g.bstride = p.kind == MKI_COLL_REDUCESCATTER || p.kind == MKI_COLL_ALLTOALL ? b : 0;
    const int par = (int)(x.k.e & 1);
    g.inbox0 = p.llb[p.rt.local] + mki_ll_buf(par, 0, x.k.c, p.rt.nlocal);
    g.buf = mki_ll_buf(par, p.rt.local, x.k.c, p.rt.nlocal);
    g.flag = ll_flag(x.k.e);
    return g;
}

/* Line i of my buffer that rank q (local) writes. */
__device__ __forceinline__ char *ll_line(const ctx &x, const ll_geo &g, int q, uint64_t i)
{
    return g.inbox0 + (uint64_t)x.k.lof(q) * LL_LSTRIDE + 16 * i;
}

/* Ranks me + j and me - j (0 <= j < n) without a division. */
__device__ __forceinline__ int ll_up(int me, int j, int n) { return me + j < n ? me + j : me + j - n; }
__device__ __forceinline__ int ll_down(int me, int j, int n) { return me >= j ? me - j : me - j + n; }

/* Every role thread handles line i0 of its round (the plan cuts parts of a
 * line per thread where it can), all inputs at once: loops over peers are
 * unrolled to MKI_MAXLOCAL so that the lines live in registers; more
 * lines per thread would spill with 7 peers at 128 registers. */

/* SEND: once each receiver acknowledged the call that last wrote the
 * buffer this one writes (two calls back), my part of its block as lines.
 * All-gather and all-reduce send the same bytes to every peer: loaded
 * once.  Every load of a round is issued before its stores. */
__device__ void ll_send(const ctx &x, const ll_geo &g, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank, par = (int)(x.k.e & 1);
    if (g.len == 0) return;
    char *mine = p.llb[p.rt.local];
    /* thread j checks peer me + j (the loads of all peers at once) */
    if (tid >= 1 && tid < n) {
        const int q = ll_up(me, tid, n), l = x.k.lof(q);
        uint64_t *last = reinterpret_cast<uint64_t *>(mine + mki_ll_last(par, l, x.k.c));
        const uint64_t *ack = reinterpret_cast<const uint64_t *>(mine + mki_ll_ack(l, x.k.c));
        const uint64_t lv = *last, av = ld_acquire_sys(ack);
        if (av >= lv || wait_geq(p.rt, ack, lv, wait_site{q, x.k.c, -1, 0}, x.k.e, x.k.quit))
            *last = x.k.e;
    }
    role_sync(bar, nthr);
    if (*x.k.quit) return;
    const bool same = g.bstride == 0;
    const char *src = p.src + g.off;
    for (uint64_t i = tid; i < g.lines; i += (uint64_t)nthr) {
        uint64_t v[MKI_MAXLOCAL];
#pragma unroll
        for (int j = 1; j < MKI_MAXLOCAL; j++)
            if (j < n && !(same && j > 1))
                v[j] = ll_get(src + (uint64_t)ll_up(me, j, n) * g.bstride, 8 * i, g.len);
#pragma unroll
        for (int j = 1; j < MKI_MAXLOCAL; j++)
            if (j < n)
                ll_store(p.llb[x.k.lof(ll_up(me, j, n))] + g.buf + 16 * i, same ? v[1] : v[j],
                         g.flag);
    }
    if (x.sent) { /* one-phase all-reduce in place: src may be overwritten now */
        role_sync(bar, nthr);
        if (tid == 0) {
            __threadfence_block();
            *x.sent = 1;
        }
    }
}

/* After RECV or REDUCE read (and zeroed) every line of the call: tell each
 * sender.  The zeroing is ordered before the acknowledgement (each thread
 * fences at GPU scope, the role meets, the leader fences at system scope),
 * so a sender's next write of a line lands after its zero. */
__device__ void ll_ack(const ctx &x, const ll_geo &g, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    __threadfence();
    role_sync(bar, nthr);
    if (tid != 0 || *x.k.quit || g.len == 0) return;
    __threadfence_system();
    for (int l = 0; l < p.rt.nlocal; l++)
        if (l != p.rt.local)
            st_relaxed_sys(reinterpret_cast<uint64_t *>(p.llb[l] + mki_ll_ack(p.rt.local, x.k.c)),
                           x.k.e);
}

/* Line i of every input j < n (from rank rank_of(j); the own rank
 * skipped): all loaded at once, then waited for where not there yet;
 * val(j) is the payload.  gather() is false when the CTA quits (recorded). */
struct ll_round {
    uint64_t a[MKI_MAXLOCAL], b[MKI_MAXLOCAL];
    __device__ __forceinline__ uint64_t val(int j) const
    {
        return (a[j] & 0xffffffffull) | (b[j] << 32);
    }
    template <typename RankOf>
    __device__ __forceinline__ bool gather(const ctx &x, const ll_geo &g, uint64_t i, int n,
                                           RankOf rank_of)
    {
        const int me = x.p->rt.rank;
#pragma unroll
        for (int j = 0; j < MKI_MAXLOCAL; j++)
            if (j < n && rank_of(j) != me) ll_load(ll_line(x, g, rank_of(j), i), a[j], b[j]);
#pragma unroll
        for (int j = 0; j < MKI_MAXLOCAL; j++) {
            const int q = rank_of(j);
            if (j >= n || q == me || ll_ready(a[j], b[j], g.flag)) continue;
            uint64_t v;
            if (!ll_wait_slow(*x.k.rt, ll_line(x, g, q, i), g.flag, &v,
                              wait_site{q, x.k.c, -1, 0}, x.k.e, x.k.quit))
                return false;
            a[j] = v & 0xffffffffull;
            b[j] = v >> 32;
        }
        return true;
    }
};

/* RECV (all-gather, all-to-all): the own block, then each peer's lines
 * into dst, each line zeroed once read. */
__device__ void ll_recv(const ctx &x, const ll_geo &g, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const uint64_t b = p.count * (uint64_t)p.esize;
    const char *own = p.src + (uint64_t)me * g.bstride + g.off;
    if (g.len && p.dst + (uint64_t)me * b + g.off != own)
        copy_bytes(p.dst + (uint64_t)me * b + g.off, own, g.len, tid, nthr);
    auto rank_of = [&](int j) { return ll_down(me, j, n); }; /* j = 0: me, skipped */
    for (uint64_t i = tid; i < g.lines; i += (uint64_t)nthr) {
        ll_round r;
        if (!r.gather(x, g, i, n, rank_of)) break;
#pragma unroll
        for (int j = 1; j < MKI_MAXLOCAL; j++) {
            if (j >= n) continue;
            const int q = rank_of(j);
            ll_put(p.dst + (uint64_t)q * b + g.off, 8 * i, g.len, r.val(j));
            ll_zero(ll_line(x, g, q, i));
        }
    }
    ll_ack(x, g, tid, nthr, bar);
}

/* REDUCE (reduce-scatter, one-phase all-reduce): each line of my block
 * summed in fp32 over the own input and every peer's line, rounded once;
 * reduce-scatter in the slots' order (own, then ring order), all-reduce in
 * rank order so that every rank gets the same bits. */
template <typename T>
__device__ void ll_reduce(const ctx &x, const ll_geo &g, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const bool ar = p.kind == MKI_COLL_ALLREDUCE;
    constexpr int E = 8 / sizeof(T);
    const char *own = p.src + (uint64_t)me * g.bstride + g.off;
    char *out = p.dst + g.off;
    if (x.sent && g.len) { /* in place: SEND has read src (a channel with
                            * no part, MK_COLL_CTAS above the parts, has
                            * nothing to wait for: SEND left at once) */
        if (tid == 0)
            while (*x.sent == 0 && !*x.k.quit) { }
        role_sync(bar, nthr);
        __threadfence_block();
    }
    auto rank_of = [&](int j) { return ar ? j : ll_up(me, j, n); };
    for (uint64_t i = tid; i < g.lines && !*x.k.quit; i += (uint64_t)nthr) {
        const uint64_t mine = ll_get(own, 8 * i, g.len);
        ll_round r;
        if (!r.gather(x, g, i, n, rank_of)) break;
        float acc[E];
#pragma unroll
        for (int j = 0; j < MKI_MAXLOCAL; j++) {
            if (j >= n) continue;
            const int q = rank_of(j);
            const uint64_t v = q == me ? mine : r.val(j);
            const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
            for (int k = 0; k < E; k++)
                acc[k] = j == 0 ? num<T>::to(e[k]) : acc[k] + num<T>::to(e[k]);
            if (q != me) ll_zero(ll_line(x, g, q, i));
        }
        uint64_t res;
        T *o = reinterpret_cast<T *>(&res);
#pragma unroll
        for (int k = 0; k < E; k++) o[k] = num<T>::from(acc[k]);
        ll_put(out, 8 * i, g.len, res);
    }
    ll_ack(x, g, tid, nthr, bar);
}

#endif /* MKI_OPS_COLL_LL_CUH */
