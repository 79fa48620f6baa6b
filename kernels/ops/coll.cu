/*
 * collectives.cu - all-gather, reduce-scatter, all-reduce and all-to-all as
 * persistent kernels over the symmetric workspace of the local ranks.
 *
 * Schedule.  Every rank pushes what a peer needs into that peer's
 * workspace; the peer consumes it from there.  Data for peer q is split
 * into nch channel parts (one CTA each, 16-byte units) and each part into
 * chunks of slot_bytes that go through a ring of MKI_NSLOTS slots:
 *
 *     rank r, CTA c                               rank q, CTA c
 *   SEND role: wait credit[q][c] >= chunk k-4      RECV role: wait arrive[r][c] >= k
 *              copy chunk k -> q.slot[r][c][k%4]          copy slot -> dst (or reduce)
 *              release arrive[r][c] = k   ------>         release credit[q][c] = k  --> back to r
 *
 * The credit (the receiver's consumption counter) bounds the workspace, so
 * any count works.  A CTA ends after every chunk it sent has been
 * consumed, so the next call may reuse the slots without any reset.
 *
 *   all-gather      SEND: my shard to every peer; RECV: peer shards -> dst
 *   all-to-all      SEND: block q to peer q;      RECV: block from q -> dst[q]
 *   reduce-scatter  SEND: block q to peer q;      REDUCE: own + sum(slots) in
 *                   fp32 -> dst
 *   all-reduce      SEND: block q to its owner q; REDUCE: own block in fp32,
 *                   result -> dst and (phase 1) into every peer's slot;
 *                   RECV2: reduced blocks of the peers -> dst
 *   all-reduce,     (small buffers, p.oneshot) as reduce-scatter with every
 *   one phase       block the whole buffer: SEND: everything to every peer;
 *                   REDUCE: own + every peer's copy -> dst, each chunk only
 *                   after SEND delivered it everywhere (in place, dst is src)
 *
 * Roles are warp groups of one 512-thread CTA, each with its own named
 * barrier; see devrt.cuh for the waits and the failure path.  Bytes move
 * by MK_COLL_MOVER: tma-send (default; SEND is one warp whose lane 0
 * issues TMA bulk copies global -> shared -> peer, the local copies are
 * register copies), tma (the local copies by TMA too) or reg (register
 * loads/stores everywhere; SEND is 8 warps).  A source that is not 16-byte
 * aligned (odd counts) always goes by registers.
 *
 * A peer on another (virtual) node is a slower source of chunks: its
 * slots and counters are in the net buffer (host memory, devrt.h); SEND
 * copies a chunk into a staging slot there and pushes one
 * MKI_CMD_WRITE_SIGNAL to the proxy, credits go back as MKI_CMD_SIGNAL.
 * Every wait and role stays as on one node.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "rt/wait.cuh"
#include "rt/fifo.cuh"

using namespace mki;

#define MKI_COLL_THREADS 512

namespace {

struct ctx {
    const mki_coll_params *p;
    int c;           /* channel */
    uint64_t e;      /* operation number of this channel */
    volatile int *quit;
    char *smem;      /* TMA staging (dynamic shared memory), or NULL */
    int pipes;       /* TMA pipes sharing smem (at most MKI_TMA_MAXPIPES) */
    volatile uint32_t *reduced; /* all-reduce with TMA: chunks reduced */
    volatile uint32_t *sent;    /* one-shot all-reduce: chunks delivered */
    int tma_recv;    /* local copies by TMA too */
    char **to;       /* zero copy: where SEND writes for rank q (shared;
                      * NULL entry: through the slots) */
};

/* Pipe i of the CTA's dynamic shared memory (leader thread only). */
__device__ __forceinline__ void pipe_init(const ctx &x, int i, tma_pipe &t)
{
    const uint32_t piece = (MKI_TMA_PIECE / (uint32_t)x.pipes) & ~15u;
    uint64_t *mbar = reinterpret_cast<uint64_t *>(x.smem + MKI_TMA_STAGES * MKI_TMA_PIECE);
    tma_init(t, x.smem + (size_t)i * MKI_TMA_STAGES * piece, mbar + i * MKI_TMA_STAGES, piece);
}

/* The SEND role's copy into a peer's slot: TMA bulk copies by one thread
 * when the source is 16-byte aligned, register stores otherwise (and for
 * a tail under 16 bytes); then a system fence, so that the leader's
 * release after the role barrier covers every byte. */
__device__ __forceinline__ void send_bytes(tma_pipe *t, char *dst, const char *src,
                                           uint64_t n, int tid, int nthr)
{
    if (t && (((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
        const uint64_t body = n & ~15ull;
        if (tid == 0 && body) tma_copy(*t, dst, src, body);
        if (n > body) copy_bytes(dst + body, src + body, n - body, tid, nthr);
    } else {
        copy_bytes(dst, src, n, tid, nthr);
    }
    __threadfence_system();
}

/* A local copy (slot -> dst, own block -> dst): TMA by one thread when
 * both ends are 16-byte aligned, register copies otherwise. */
__device__ __forceinline__ void local_bytes(tma_pipe *t, char *dst, const char *src,
                                            uint64_t n, int tid, int nthr)
{
    if (t && (((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
        const uint64_t body = n & ~15ull;
        if (tid == 0 && body) tma_copy(*t, dst, src, body);
        if (n > body) copy_bytes(dst + body, src + body, n - body, tid, nthr);
    } else {
        copy_bytes(dst, src, n, tid, nthr);
    }
}

__device__ __forceinline__ uint64_t *sig(char *ws, uint64_t off)
{
    return reinterpret_cast<uint64_t *>(ws + off);
}

__device__ __forceinline__ bool remote(const mki_coll_params &p, int q)
{
    return (p.net_mask >> q) & 1u;
}

/* Where this rank keeps what it shares with rank q: the workspace for a
 * rank of this node, the net buffer for a remote one; and the offsets of
 * the credit counter written by q (q receives from me), the arrive
 * counter of chunks from q, and a slot of q (index = q, or nranks + q for
 * my staging towards a remote q). */
__device__ __forceinline__ char *home(const mki_coll_params &p, int q)
{
    return remote(p, q) ? p.nb : p.ws[p.me];
}
__device__ __forceinline__ uint64_t credit_at(const mki_coll_params &p, int q, int phase, int ch)
{
    return remote(p, q) ? mki_nb_credit(phase, q, ch) : mki_ws_credit(phase, q, ch);
}
__device__ __forceinline__ uint64_t arrive_at(const mki_coll_params &p, int q, int phase, int ch,
                                              int slot)
{
    return remote(p, q) ? mki_nb_arrive(phase, q, ch, slot) : mki_ws_arrive(phase, q, ch);
}
__device__ __forceinline__ uint64_t slot_at(const mki_coll_params &p, int q, int phase, int idx,
                                            int ch, int slot)
{
    return remote(p, q) ? mki_nb_slot(phase, idx, ch, slot, p.nranks, p.nb_slot)
                        : mki_ws_slot(phase, idx, ch, slot, p.nranks, p.slot_bytes);
}

/* Push one command to the proxy (one thread).  A full ring that never
 * drains or a failed proxy is recorded like a failed wait and quits the
 * CTA; the role sees quit at its next wait. */
__device__ __noinline__ bool net_push(const ctx &x, const mki_fifo_cmd &c,
                                      const wait_site &w)
{
    const mki_coll_params &p = *x.p;
    unsigned long long ticket;
    const int r = mki_fifo_push(p.fifo, c, globaltimer() + p.timeout_ns, &ticket);
    if (r == MKI_FIFO_OK) return true;
    fail(p, r == MKI_FIFO_TIMEOUT ? MKI_ERR_TIMEOUT : MKI_ERR_PROXY, w, 0, 0);
    *x.quit = 1;
    return false;
}

/* Tell rank q that I consumed its chunk `target` of (phase, ch) (one
 * thread): a release store over NVLink, a SIGNAL command for a remote q. */
__device__ __forceinline__ void raise_credit(const ctx &x, int q, int phase, uint64_t v,
                                             const wait_site &w)
{
    const mki_coll_params &p = *x.p;
    if (!remote(p, q)) {
        st_release_sys(sig(p.ws[q], mki_ws_credit(phase, p.me, x.c)), v);
        return;
    }
    const mki_fifo_cmd c = {MKI_CMD_SIGNAL, (uint32_t)q, MKI_SIG_MAX, 1, 0, 0, 0,
                            mki_nb_credit(phase, p.me, x.c), v};
    (void)net_push(x, c, w);
}

/* Deliver n bytes at src as chunk `target` into slot `slot` of phase
 * `phase` that rank q keeps for me, then raise q's arrive counter.  The
 * whole role calls it.  A remote q gets the bytes staged in my workspace
 * (source index nranks + q) and one WRITE_SIGNAL; the system fence of
 * send_bytes and the role barrier order the staging before the push. */
__device__ void deliver(const ctx &x, tma_pipe *tp, int tid, int nthr, int bar,
                        int phase, int q, int slot, const char *src, uint64_t n,
                        uint64_t target, const wait_site &w)
{
    const mki_coll_params &p = *x.p;
    if (!remote(p, q)) {
        send_bytes(tp, p.ws[q] + mki_ws_slot(phase, p.me, x.c, slot, p.nranks, p.slot_bytes),
                   src, n, tid, nthr);
        role_sync(bar, nthr);
        if (tid == 0) st_release_sys(sig(p.ws[q], mki_ws_arrive(phase, p.me, x.c)), target);
        return;
    }
    /* Register stores into mapped host memory (no TMA there). */
    const uint64_t loff = mki_nb_slot(phase, p.nranks + q, x.c, slot, p.nranks, p.nb_slot);
    copy_bytes(p.nb + loff, src, n, tid, nthr);
    __threadfence_system();
    role_sync(bar, nthr);
    if (tid == 0) {
        const mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, (uint32_t)q, MKI_SIG_MAX, 1, loff,
                                mki_nb_slot(phase, p.me, x.c, slot, p.nranks, p.nb_slot), n,
                                mki_nb_arrive(phase, p.me, x.c, slot), target};
        (void)net_push(x, c, w);
    }
}

/* Bytes and byte offset (in src for SEND, in dst for RECV) of the block
 * that travels between this rank and peer q. */
__device__ __forceinline__ void block_of(const mki_coll_params &p, int q,
                                         uint64_t *off, uint64_t *bytes)
{
    const uint64_t es = (uint64_t)p.esize;
    if (p.op == MKI_COLL_ALLREDUCE && p.oneshot) {
        *off = 0;
        *bytes = p.count * es;
    } else if (p.op == MKI_COLL_ALLREDUCE) {
        uint64_t first, elems;
        mki_ar_block(p.count, p.nranks, q, &first, &elems);
        *off = first * es;
        *bytes = elems * es;
    } else {
        *off = p.op == MKI_COLL_ALLGATHER ? 0 : (uint64_t)q * p.count * es;
        *bytes = p.count * es;
    }
}

/* Deferred slot reuse (devrt.h, owed): a role that sent through q's
 * phase slots does not wait at its end for q to consume the last chunks;
 * it notes the credit q owes, and the next call that sends through those
 * slots waits for it before its first chunk (by then it has normally come:
 * a call no longer ends on a round trip). */
__device__ __forceinline__ uint64_t *owed_at(const mki_coll_params &p, int phase, int q, int c)
{
    return sig(p.ws[p.me], mki_ws_owed(phase, q, c));
}
__device__ __forceinline__ wait_site owed_site(uint64_t owed, int q, int c, int phase)
{
    return wait_site{q, c, (int)(owed & 0xffffffffull) - 1, phase};
}

/* Leader waits, then the role meets; false when the CTA quits. */
__device__ __forceinline__ bool role_wait(const ctx &x, int bar, int nthr,
                                          int tid, const uint64_t *addr,
                                          uint64_t target, wait_site w)
{
    if (tid == 0) wait_geq(*x.p, addr, target, w, x.quit);
    role_sync(bar, nthr);
    return *x.quit == 0;
}

/* Zero copy: the leader waits for every peer's post of this call, then
 * the role reads where to write (x.to[q]: where my block starts in q's
 * recvbuf; NULL: through q's slots).  Only peers that get bytes from this
 * channel are waited for.  All-reduce: my reduced block, at its own
 * offset; all-gather, all-to-all: my block, at my index. */
__device__ __noinline__ bool read_posts(const ctx &x, char **to, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const bool ar = p.op == MKI_COLL_ALLREDUCE;
    if (tid == 0)
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me + j) % p.nranks;
            uint64_t boff, b, off, len;
            block_of(p, ar ? p.me : q, &boff, &b);
            mki_chan_part(b, p.nch, x.c, &off, &len);
            to[q] = NULL;
            if (len == 0) continue;
            const uint64_t *post = sig(p.ws[p.me], mki_ws_post(q, x.c));
            if (!wait_geq(p, post + 1, mki_sig_target(x.e, 0), wait_site{q, x.c, -1, 0}, x.quit))
                break;
            /* my block's place in q's recvbuf */
            const uint64_t a = *(volatile const uint64_t *)post;
            to[q] = a ? reinterpret_cast<char *>(a) + (ar ? boff : (uint64_t)p.me * b) : NULL;
        }
    role_sync(bar, nthr);
    return *x.quit == 0;
}

/* Zero copy: tell every peer written directly (to[q]) that my part of
 * this channel is in place (the writes were fenced; one thread). */
__device__ void raise_done(const ctx &x, char *const *to)
{
    const mki_coll_params &p = *x.p;
    for (int j = 1; j < p.nranks; j++) {
        const int q = (p.me + j) % p.nranks;
        if (to[q]) st_release_sys(sig(p.ws[q], mki_ws_done(p.me, x.c)), mki_sig_target(x.e, 0));
    }
}

/* SEND (phase 0): push block q of src into peer q's slots, or straight
 * into its recvbuf (zero copy). */
__device__ void send_role(const ctx &x, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const uint64_t S = p.slot_bytes;
    tma_pipe pipe, *tp = NULL;
    if (x.smem && tid == 0) pipe_init(x, 0, pipe);
    if (x.smem) tp = &pipe;
    if (x.to && !read_posts(x, x.to, tid, nthr, bar)) return;
    uint64_t maxk = 0;
    for (int q = 0; q < p.nranks; q++) {
        uint64_t boff, b, off, len;
        block_of(p, q, &boff, &b);
        mki_chan_part(b, p.nch, x.c, &off, &len);
        uint64_t nk = mki_nchunks(len, S);
        maxk = nk > maxk ? nk : maxk;
    }
    for (uint64_t k = 0; k < maxk; k++) {
        for (int j = 1; j < p.nranks; j++) {
            /* Zero copy: channels start on different peers, so that at
             * any time every peer receives from every rank. */
            const int q = x.to ? (p.me + 1 + (j - 1 + x.c) % (p.nranks - 1)) % p.nranks
                               : (p.me + j) % p.nranks;
            uint64_t boff, b, off, len;
            block_of(p, q, &boff, &b);
            mki_chan_part(b, p.nch, x.c, &off, &len);
            if (k >= mki_nchunks(len, S)) continue;
            const uint64_t at = off + k * S, n = len - k * S < S ? len - k * S : S;
            if (x.to && x.to[q]) {
                send_bytes(tp, x.to[q] + at, p.src + boff + at, n, tid, nthr);
                continue;
            }
            const uint64_t *cr = sig(home(p, q), credit_at(p, q, 0, x.c));
            if (k >= MKI_NSLOTS) {
                if (!role_wait(x, bar, nthr, tid, cr, mki_sig_target(x.e, k - MKI_NSLOTS),
                               wait_site{q, x.c, (int)k, 0}))
                    return;
            } else if (k == 0) {
                const uint64_t owed = *owed_at(p, 0, q, x.c);
                if (!role_wait(x, bar, nthr, tid, cr, owed, owed_site(owed, q, x.c, 0)))
                    return;
            }
            deliver(x, tp, tid, nthr, bar, 0, q, (int)(k % MKI_NSLOTS), p.src + boff + at, n,
                    mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, 0});
        }
        if (x.sent) { /* every copy of chunk k has read it: REDUCE may write */
            role_sync(bar, nthr);
            if (tid == 0) *x.sent = (uint32_t)k + 1;
        }
    }
    /* Zero copy: every byte is in place (send_bytes fenced it); say so. */
    if (x.to) {
        role_sync(bar, nthr);
        if (tid == 0) raise_done(x, x.to);
    }
    /* What each peer now owes for its slots (the next call waits). */
    if (tid == 0)
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me + j) % p.nranks;
            uint64_t boff, b, off, len;
            block_of(p, q, &boff, &b);
            mki_chan_part(b, p.nch, x.c, &off, &len);
            uint64_t nk = mki_nchunks(len, S);
            if (nk == 0 || (x.to && x.to[q])) continue;
            *owed_at(p, 0, q, x.c) = mki_sig_target(x.e, nk - 1);
        }
}

/* RECV: copy what peers pushed (phase 0 for all-gather / all-to-all, phase
 * 1 for the reduced blocks of all-reduce) into dst; the own block first. */
__device__ void recv_role(const ctx &x, int tid, int nthr, int bar, int phase, int pipe_idx)
{
    const mki_coll_params &p = *x.p;
    const uint64_t S = p.slot_bytes;
    tma_pipe pipe, *tp = NULL;
    if (x.smem && x.tma_recv && tid == 0) pipe_init(x, pipe_idx, pipe);
    if (x.smem && x.tma_recv) tp = &pipe;
    /* The own block first: it overlaps with the peers' first chunks in
     * flight (done last, it ran alone at the end: -25% at 256 MB). */
    if (p.op != MKI_COLL_ALLREDUCE) {
        uint64_t boff, b, off, len;
        block_of(p, p.me, &boff, &b);
        mki_chan_part(b, p.nch, x.c, &off, &len);
        const uint64_t doff = (uint64_t)p.me * b;
        if (len && p.dst + doff != p.src + boff)
            local_bytes(tp, p.dst + doff + off, p.src + boff + off, len, tid, nthr);
    }
    uint64_t maxk = 0;
    for (int q = 0; q < p.nranks; q++) {
        uint64_t boff, b, off, len;
        block_of(p, q, &boff, &b);
        mki_chan_part(b, p.nch, x.c, &off, &len);
        uint64_t nk = mki_nchunks(len, S);
        maxk = nk > maxk ? nk : maxk;
    }
    /* Zero copy: peers write into dst themselves (p.post[q] != 0). */
    const bool zc = p.direct != 0; /* phase 0: copy kernel; 1: all-reduce */
    for (uint64_t k = 0; k < maxk; k++)
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me - j + p.nranks) % p.nranks;
            if (zc && p.post[q]) continue;
            uint64_t boff, b, off, len;
            block_of(p, q, &boff, &b);
            mki_chan_part(b, p.nch, x.c, &off, &len);
            if (k >= mki_nchunks(len, S)) continue;
            const uint64_t at = off + k * S, n = len - k * S < S ? len - k * S : S;
            const int sl = (int)(k % MKI_NSLOTS);
            if (!role_wait(x, bar, nthr, tid, sig(home(p, q), arrive_at(p, q, phase, x.c, sl)),
                           mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, phase}))
                return;
            const uint64_t doff = p.op == MKI_COLL_ALLREDUCE ? boff : (uint64_t)q * b;
            const char *slot = home(p, q) + slot_at(p, q, phase, q, x.c, sl);
            /* from mapped host memory by registers, not TMA */
            local_bytes(remote(p, q) ? NULL : tp, p.dst + doff + at, slot, n, tid, nthr);
            role_sync(bar, nthr);
            if (tid == 0)
                raise_credit(x, q, phase, mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, phase});
        }
    if (!zc) return;
    for (int j = 1; j < p.nranks; j++) {
        const int q = (p.me - j + p.nranks) % p.nranks;
        uint64_t boff, b, off, len;
        block_of(p, q, &boff, &b);
        mki_chan_part(b, p.nch, x.c, &off, &len);
        if (!p.post[q] || len == 0) continue;
        if (!role_wait(x, bar, nthr, tid, sig(p.ws[p.me], mki_ws_done(q, x.c)),
                       mki_sig_target(x.e, 0), wait_site{q, x.c, -1, phase}))
            return;
    }
}

/* ---- reduction ------------------------------------------------------- */

/* One-shot all-reduce: REDUCE's leader waits for SEND's progress (same
 * CTA; SEND quits through *quit).  Out of line: it costs the reduction's
 * registers nothing. */
__device__ __noinline__ void wait_sent(volatile uint32_t *sent, uint32_t n,
                                       volatile int *quit)
{
    while (*sent < n && !*quit) { }
}

template <typename T> struct num;
template <> struct num<float> {
    static __device__ __forceinline__ float to(float v) { return v; }
    static __device__ __forceinline__ float from(float v) { return v; }
};
template <> struct num<__half> {
    static __device__ __forceinline__ float to(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
};
template <> struct num<__nv_bfloat16> {
    static __device__ __forceinline__ float to(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};

/* out[i] = own[i] + sum of in[j][i], accumulated in fp32, rounded once;
 * the result also goes to every rem[j] (peers' phase-1 slots, or their
 * recvbufs with zero copy).  16-byte vectors when vec (every rem[j]
 * 16-byte aligned) and out, own are aligned. */
template <typename T>
__device__ void reduce_chunk(T *out, const T *own, const T *const *in, int nin,
                             T *const *rem, int nrem, uint64_t n, int tid, int nthr,
                             bool vec)
{
    constexpr int V = 16 / sizeof(T);
    constexpr int U = 4; /* vectors in flight per thread and input */
    uint64_t start = 0;
    if (vec && (((uintptr_t)out | (uintptr_t)own) & 15) == 0) {
        const uint64_t nv = n / V;
        for (uint64_t i0 = tid; i0 < nv; i0 += (uint64_t)U * nthr) {
            float acc[U][V];
            uint4 w[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (i0 + (uint64_t)u * nthr < nv) w[u] = ld16(own + (i0 + (uint64_t)u * nthr) * V);
#pragma unroll
            for (int u = 0; u < U; u++) {
                const T *t = reinterpret_cast<const T *>(&w[u]);
#pragma unroll
                for (int v = 0; v < V; v++) acc[u][v] = num<T>::to(t[v]);
            }
            for (int j = 0; j < nin; j++) {
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (i0 + (uint64_t)u * nthr < nv) w[u] = ld16(in[j] + (i0 + (uint64_t)u * nthr) * V);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const T *t = reinterpret_cast<const T *>(&w[u]);
#pragma unroll
                    for (int v = 0; v < V; v++) acc[u][v] += num<T>::to(t[v]);
                }
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
                for (int j = 0; j < nrem; j++) reinterpret_cast<uint4 *>(rem[j])[i] = r;
            }
        }
        start = nv * V;
    }
    for (uint64_t i = start + tid; i < n; i += nthr) {
        float acc = num<T>::to(own[i]);
        for (int j = 0; j < nin; j++) acc += num<T>::to(__ldcg(in[j] + i));
        T r = num<T>::from(acc);
        out[i] = r;
        for (int j = 0; j < nrem; j++) rem[j][i] = r;
    }
}

/* REDUCE: the own block, summed over every rank's contribution.  For
 * all-reduce the result also goes to the peers: pushed here with register
 * stores (mover reg), or published to SEND2 through x.reduced (TMA). */
template <typename T, bool OS>
__device__ void reduce_role(const ctx &x, int tid, int nthr, int bar, char **to)
{
    const mki_coll_params &p = *x.p;
    const uint64_t S = p.slot_bytes;
    const bool ar = !OS && p.op == MKI_COLL_ALLREDUCE, push = ar && x.reduced == NULL;
    uint64_t boff, b, off, len;
    block_of(p, p.me, &boff, &b);
    mki_chan_part(b, p.nch, x.c, &off, &len);
    const uint64_t nk = mki_nchunks(len, S);
    const char *own = p.src + boff;
    char *out = p.dst + (ar ? boff : 0);
    const bool inplace = p.src == p.dst;
    /* Zero copy (all-reduce, register stores): results go straight into
     * the peers' recvbufs that are registered. */
    const bool zc = push && to != NULL;
    if (zc && !read_posts(x, to, tid, nthr, bar)) return;
    for (uint64_t k = 0; k < nk; k++) {
        const uint64_t at = off + k * S, n = len - k * S < S ? len - k * S : S;
        const int slot = (int)(k % MKI_NSLOTS);
        const T *in[MKI_MAXLOCAL];
        T *rem[MKI_MAXLOCAL];
        int nin = 0;
        bool vec = true;
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me + j) % p.nranks;
            if (tid == 0) wait_geq(p, sig(home(p, q), arrive_at(p, q, 0, x.c, slot)),
                                   mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, 0}, x.quit);
            const bool direct = zc && to[q] != NULL;
            if (tid == 0 && push && !direct && k >= MKI_NSLOTS)
                wait_geq(p, sig(home(p, q), credit_at(p, q, 1, x.c)),
                         mki_sig_target(x.e, k - MKI_NSLOTS), wait_site{q, x.c, (int)k, 1}, x.quit);
            if (tid == 0 && push && !direct && k == 0) {
                const uint64_t owed = *owed_at(p, 1, q, x.c);
                wait_geq(p, sig(home(p, q), credit_at(p, q, 1, x.c)), owed,
                         owed_site(owed, q, x.c, 1), x.quit);
            }
            in[nin] = reinterpret_cast<const T *>(home(p, q) + slot_at(p, q, 0, q, x.c, slot));
            if (direct) vec = vec && ((reinterpret_cast<uintptr_t>(to[q]) + at) & 15) == 0;
            /* push never runs across nodes (coll.c picks TMA there) */
            rem[nin] = direct ? reinterpret_cast<T *>(to[q] + at)
                     : push ? reinterpret_cast<T *>(p.ws[q] + mki_ws_slot(1, p.me, x.c, slot, p.nranks, S))
                            : NULL;
            nin++;
        }
        /* one shot in place (src is dst; any other overlap is refused):
         * chunk k is overwritten only after SEND copied it to every peer */
        if (OS && inplace && tid == 0) wait_sent(x.sent, (uint32_t)k + 1, x.quit);
        role_sync(bar, nthr);
        if (*x.quit) return;
        if (OS) {
            /* Every rank reduces the whole buffer: sum in rank order (own
             * at its place) so that every rank gets the same bits. */
            const T *ord[MKI_MAXLOCAL];
            for (int r = 0; r < p.nranks; r++)
                ord[r] = r == p.me ? reinterpret_cast<const T *>(own + at)
                                   : in[(r - p.me - 1 + p.nranks) % p.nranks];
            reduce_chunk<T>(reinterpret_cast<T *>(out + at), ord[0], ord + 1, p.nranks - 1,
                            rem, 0, n / sizeof(T), tid, nthr, true);
        } else {
            reduce_chunk<T>(reinterpret_cast<T *>(out + at), reinterpret_cast<const T *>(own + at),
                            in, nin, rem, push ? nin : 0, n / sizeof(T), tid, nthr, vec);
        }
        if (push) __threadfence_system();
        else asm volatile("fence.proxy.async.global;" ::: "memory"); /* SEND2 reads out by TMA */
        role_sync(bar, nthr);
        if (tid == 0) {
            for (int j = 1; j < p.nranks; j++) {
                const int q = (p.me + j) % p.nranks;
                raise_credit(x, q, 0, mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, 0});
                if (push && !(zc && to[q]))
                    st_release_sys(sig(p.ws[q], mki_ws_arrive(1, p.me, x.c)), mki_sig_target(x.e, k));
            }
            if (ar && !push) {
                __threadfence_block();
                *x.reduced = (uint32_t)k + 1;
            }
        }
    }
    if (!push || nk == 0) return;
    if (zc && tid == 0) raise_done(x, to); /* every result fenced above */
    if (tid == 0)
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me + j) % p.nranks;
            if (zc && to[q]) continue;
            *owed_at(p, 1, q, x.c) = mki_sig_target(x.e, nk - 1);
        }
}

/* SEND2 (all-reduce with TMA): push each reduced chunk of my block from
 * dst into every peer's phase-1 slots, as soon as REDUCE publishes it. */
__device__ void send2_role(const ctx &x, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const uint64_t S = p.slot_bytes;
    tma_pipe pipe;
    if (tid == 0) pipe_init(x, 1, pipe);
    uint64_t boff, b, off, len;
    block_of(p, p.me, &boff, &b);
    mki_chan_part(b, p.nch, x.c, &off, &len);
    const uint64_t nk = mki_nchunks(len, S);
    for (uint64_t k = 0; k < nk; k++) {
        const uint64_t at = off + k * S, n = len - k * S < S ? len - k * S : S;
        if (tid == 0)
            while (*x.reduced < k + 1 && !*x.quit) { }
        role_sync(bar, nthr);
        if (*x.quit) return;
        __threadfence_block();
        for (int j = 1; j < p.nranks; j++) {
            const int q = (p.me + j) % p.nranks;
            const uint64_t *cr = sig(home(p, q), credit_at(p, q, 1, x.c));
            if (k >= MKI_NSLOTS &&
                !role_wait(x, bar, nthr, tid, cr, mki_sig_target(x.e, k - MKI_NSLOTS),
                           wait_site{q, x.c, (int)k, 1}))
                return;
            if (k == 0) {
                const uint64_t owed = *owed_at(p, 1, q, x.c);
                if (!role_wait(x, bar, nthr, tid, cr, owed, owed_site(owed, q, x.c, 1)))
                    return;
            }
            deliver(x, &pipe, tid, nthr, bar, 1, q, (int)(k % MKI_NSLOTS), p.dst + boff + at, n,
                    mki_sig_target(x.e, k), wait_site{q, x.c, (int)k, 1});
        }
    }
    if (tid == 0)
        for (int j = 1; j < p.nranks && nk > 0; j++)
            *owed_at(p, 1, (p.me + j) % p.nranks, x.c) = mki_sig_target(x.e, nk - 1);
}

/* Zero copy: tell every peer where its block goes in my recvbuf (or 0:
 * through my slots); this call has started here (thread 0). */
__device__ void post_recvbuf(const mki_coll_params &p, int c, uint64_t e)
{
    for (int q = 0; q < p.nranks; q++) {
        if (q == p.me) continue;
        uint64_t *post = sig(p.ws[q], mki_ws_post(p.me, c));
        st_relaxed_sys(post, p.post[q]);
        st_release_sys(post + 1, mki_sig_target(e, 0));
    }
}

/* The operation number of this channel, and the abort check at entry. */
__device__ bool enter(const mki_coll_params &p, int c, volatile int *quit, uint64_t *e_sh)
{
    if (threadIdx.x == 0) {
        *quit = 0;
        *e_sh = *sig(p.ws[p.me], MKI_WS_SEQ + 8ull * (uint64_t)c) + 1;
        uint64_t ab = ld_relaxed_sys(sig(p.ws[p.me], MKI_WS_ABORT));
        if (ab != 0) {
            int who = (int)ab - 1;
            if (p.net_mask && who >= 0 && who < MKI_MAXLOCAL) who = p.glob[who];
            fail(p, MKI_ERR_REMOTE, wait_site{who, c, -1, -1}, 0, 0);
            *quit = 1;
        }
    }
    __syncthreads();
    return *quit == 0;
}

__device__ void leave(const mki_coll_params &p, int c, volatile int *quit, uint64_t e)
{
    __syncthreads();
    if (threadIdx.x == 0 && *quit == 0) *sig(p.ws[p.me], MKI_WS_SEQ + 8ull * (uint64_t)c) = e;
}

} /* namespace */

extern __shared__ __align__(128) char mki_coll_smem[];

/* Threads of the SEND role: one warp issuing TMA bulk copies, or half
 * the CTA with register stores (three quarters with zero copy). */
__device__ __forceinline__ int send_threads(const mki_coll_params &p)
{
    /* Zero copy leaves RECV only the own block to copy: with 3 or more
     * peers in flight SEND takes 384 threads (4 H200: 312 -> 320 GB/s at
     * 1 GB); with one peer 256 stay better (2 H200: 316 vs 279). */
    return p.mover != MKI_COLL_MOVER_REG ? 32 : p.direct && p.nranks > 2 ? 384 : 256;
}

/* All-gather and all-to-all: SEND, then RECV on the other warps. */
__global__ void __launch_bounds__(MKI_COLL_THREADS, 1)
mki_coll_copy_kernel(const __grid_constant__ mki_coll_params p)
{
    __shared__ volatile int quit;
    __shared__ uint64_t e_sh;
    __shared__ char *to[MKI_MAXLOCAL];
    const int c = blockIdx.x;
    if (!enter(p, c, &quit, &e_sh)) return;
    if (p.direct && threadIdx.x == 0) post_recvbuf(p, c, e_sh);
    ctx x{&p, c, e_sh, &quit, p.mover != MKI_COLL_MOVER_REG ? mki_coll_smem : NULL,
          p.mover == MKI_COLL_MOVER_TMA ? 2 : 1, NULL, NULL, p.mover == MKI_COLL_MOVER_TMA,
          p.direct ? to : NULL};
    const int t = threadIdx.x, ns = send_threads(p);
    if (t < ns) send_role(x, t, ns, 1);
    else recv_role(x, t - ns, MKI_COLL_THREADS - ns, 2, 0, 1);
    leave(p, c, &quit, x.e);
}

/* Reduce-scatter: SEND, then REDUCE on the other warps.  All-reduce with
 * TMA: SEND warp 0, SEND2 warp 1, REDUCE warps 2-11, RECV (phase 1)
 * warps 12-15; with register stores: SEND warps 0-5, REDUCE 6-11 (which
 * also pushes the results), RECV 12-15. */
template <typename T>
__global__ void __launch_bounds__(MKI_COLL_THREADS, 1)
mki_coll_reduce_kernel(const __grid_constant__ mki_coll_params p)
{
    __shared__ volatile int quit;
    __shared__ uint64_t e_sh;
    __shared__ volatile uint32_t reduced;
    __shared__ char *to[MKI_MAXLOCAL];
    const int c = blockIdx.x;
    if (threadIdx.x == 0) reduced = 0;
    if (!enter(p, c, &quit, &e_sh)) return;
    /* zero copy: all-reduce with register stores only (coll.c) */
    if (p.direct && threadIdx.x == 0) post_recvbuf(p, c, e_sh);
    const int t = threadIdx.x, tma = p.mover != MKI_COLL_MOVER_REG;
    const bool ar = p.op == MKI_COLL_ALLREDUCE;
    const int trecv = ar && p.mover == MKI_COLL_MOVER_TMA;
    ctx x{&p, c, e_sh, &quit, tma ? mki_coll_smem : NULL, ar ? 2 + trecv : 1,
          ar && tma ? &reduced : NULL, NULL, trecv};
    if (!ar) {
        const int ns = send_threads(p);
        if (t < ns) send_role(x, t, ns, 1);
        else reduce_role<T, false>(x, t - ns, MKI_COLL_THREADS - ns, 2, NULL);
    } else if (tma) {
        if (t < 32) send_role(x, t, 32, 1);
        else if (t < 64) send2_role(x, t - 32, 32, 4);
        else if (t < 384) reduce_role<T, false>(x, t - 64, 320, 2, NULL);
        else recv_role(x, t - 384, 128, 3, 1, 2);
    } else {
        if (t < 192) send_role(x, t, 192, 1);
        else if (t < 384) reduce_role<T, false>(x, t - 192, 192, 2, p.direct ? to : NULL);
        else recv_role(x, t - 384, 128, 3, 1, 0);
    }
    leave(p, c, &quit, x.e);
}

/* One-shot all-reduce (p.oneshot): SEND as for reduce-scatter with every
 * block the whole buffer, then REDUCE of the whole buffer, each chunk
 * after SEND delivered it everywhere. */
template <typename T>
__global__ void __launch_bounds__(MKI_COLL_THREADS, 1)
mki_coll_oneshot_kernel(const __grid_constant__ mki_coll_params p)
{
    __shared__ volatile int quit;
    __shared__ uint64_t e_sh;
    __shared__ volatile uint32_t sent;
    const int c = blockIdx.x;
    if (threadIdx.x == 0) sent = 0;
    if (!enter(p, c, &quit, &e_sh)) return;
    const int t = threadIdx.x, tma = p.mover != MKI_COLL_MOVER_REG;
    ctx x{&p, c, e_sh, &quit, tma ? mki_coll_smem : NULL, 1, NULL, &sent, 0};
    const int ns = send_threads(p);
    if (t < ns) send_role(x, t, ns, 1);
    else reduce_role<T, true>(x, t - ns, MKI_COLL_THREADS - ns, 2, NULL);
    leave(p, c, &quit, x.e);
}

static const void *kernel_for(int op, int dtype, int oneshot)
{
    if (op == MKI_COLL_ALLGATHER || op == MKI_COLL_ALLTOALL)
        return (const void *)mki_coll_copy_kernel;
    if (op == MKI_COLL_ALLREDUCE && oneshot) switch (dtype) {
    case MKI_BF16: return (const void *)mki_coll_oneshot_kernel<__nv_bfloat16>;
    case MKI_F16: return (const void *)mki_coll_oneshot_kernel<__half>;
    case MKI_F32: return (const void *)mki_coll_oneshot_kernel<float>;
    default: return NULL;
    }
    switch (dtype) {
    case MKI_BF16: return (const void *)mki_coll_reduce_kernel<__nv_bfloat16>;
    case MKI_F16: return (const void *)mki_coll_reduce_kernel<__half>;
    case MKI_F32: return (const void *)mki_coll_reduce_kernel<float>;
    }
    return NULL;
}

extern "C" int mki_coll_launch(const struct mki_coll_params *p, cudaStream_t s,
                               const char **why)
{
    const void *k = kernel_for(p->op, p->dtype, p->oneshot);
    if (!k) {
        *why = "no kernel for this operation and type";
        return -1;
    }
    void *args[] = {(void *)p};
    const size_t smem = p->mover != MKI_COLL_MOVER_REG ? MKI_TMA_SMEM : 0;
    cudaError_t err = cudaLaunchKernel(k, dim3((unsigned)p->nch), dim3(MKI_COLL_THREADS), args, smem, s);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) {
        *why = cudaGetErrorString(err);
        return (int)err;
    }
    return 0;
}

/* Load every collective kernel now (see probe.cu: never lazily). */
extern "C" int mki_coll_preload(const char **why)
{
    const int ops[] = {MKI_COLL_ALLGATHER, MKI_COLL_REDUCESCATTER, MKI_COLL_ALLREDUCE};
    for (int o = 0; o < 3; o++)
        for (int d = MKI_BF16; d <= MKI_F32; d++) {
            const void *k = kernel_for(ops[o], d, o == 2);
            cudaFuncAttributes a;
            cudaError_t err = cudaFuncGetAttributes(&a, k);
            if (err == cudaSuccess)
                err = cudaFuncSetAttribute(k,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           MKI_TMA_SMEM);
            if (err != cudaSuccess) {
                *why = cudaGetErrorString(err);
                return (int)err;
            }
        }
    return 0;
}
