/*
 * coll.cu - all-gather, reduce-scatter, all-reduce and all-to-all as
 * persistent kernels over the credit/slot channels of the device runtime
 * (kernels/rt/channel.cuh): schedules and role splits only.
 *
 * Every rank pushes what a peer needs into that peer's slots; the peer
 * consumes it from there.  Data for peer q is split into nch channel parts
 * (one CTA each, 16-byte units) and each part into chunks of the call's
 * slot bytes:
 *
 *     rank r, CTA c                               rank q, CTA c
 *   SEND: wait credit(q) >= chunk k-4             RECV: wait arrive(r) >= k
 *         copy chunk k -> q.slot(r)[k%4]                copy slot -> dst (or reduce)
 *         release arrive(r) = k   ------------>         release credit(q) = k --> r
 *
 *   all-gather      SEND: my shard to every peer; RECV: peer shards -> dst
 *   all-to-all      SEND: block q to peer q;      RECV: block from q -> dst[q]
 *   reduce-scatter  SEND: block q to peer q;      REDUCE: own + sum(slots) in
 *                   fp32 -> dst
 *   all-reduce      SEND: block q to its owner q; REDUCE: own block in fp32,
 *                   result -> dst and (phase 1) into every peer's slot;
 *                   RECV (phase 1): reduced blocks of the peers -> dst
 *   all-reduce,     (small buffers, p.oneshot) as reduce-scatter with every
 *   one phase       block the whole buffer: SEND: everything to every peer;
 *                   REDUCE: every rank's copy in rank order -> dst, each
 *                   chunk only after SEND delivered it everywhere (in place,
 *                   dst is src)
 *
 * Peer after peer (p.peer_major, the plan's: all-gather and all-to-all
 * through the slots by TMA on one node of more than 2 ranks, and the
 * reductions there where a channel's part is a few chunks): each
 * channel sends all its chunks to rank me + 1, then to me + 2, ..., and
 * receives from me - 1, then me - 2, ...; every channel of every rank in
 * the same order, so a GPU writes to one peer at a time and is written by
 * one, as in a ring.  Deadlock-free: at step i every rank's SEND waits
 * only for the RECV of step i of me + i, and that RECV only for the SEND
 * of step i.  A reduction credits chunk k only once every peer's chunk k
 * arrived, so the plan takes this order for reduce-scatter and the
 * two-phase all-reduce (SEND, SEND2 and RECV alike) only when every part
 * has at most MKI_NSLOTS chunks: then no send waits for a credit of this
 * call.  Otherwise chunk k goes to every peer in turn.
 *
 * Staggered (p.stagger, the plan's: the two-phase all-reduce by TMA on one
 * node of 2 ranks where every part is one chunk): channel c + half waits
 * (bounded) for channel c to issue its phase-0 chunks before it sends its
 * own, so that one half sums and sends phase 1 while the other sends phase
 * 0, instead of every channel summing at once while the links idle.  The
 * go word (channel.h) is a hint: a late or stale one only moves the start.
 *
 * Small blocks on one node (p.ll) go as LL lines instead: the roles in
 * kernels/ops/coll_ll.cuh.
 *
 * Roles are thread ranges of one 512-thread CTA (p.roles, decided by the
 * plan), each with its own named barrier (1 + role).  Bytes move by
 * p.mover: tma-send (SEND is one warp whose lane 0 issues TMA bulk copies
 * global -> shared -> peer, the local copies are register copies), tma
 * (the local copies by TMA too) or reg (register loads and stores
 * everywhere).  A source that is not 16-byte aligned goes by registers.
 * A peer on another node is a slower source of chunks (the proxy); every
 * wait and role stays the same.
 *
 * Zero copy (p.direct: all-gather and all-to-all on one node, when the
 * communicator has registered buffers and the block is large enough; the
 * same on every rank).  At entry, CTA c of every rank q posts into each
 * peer r's channel block the address at which r writes into q's recvbuf
 * (as r maps it; 0 when q's recvbuf is not registered) and releases its
 * tag (e << 32) | 1.  r's SEND waits for the tag, then writes its part
 * straight into q's recvbuf, or through the slots when the address is 0,
 * and after the last byte releases done(r) in q; q's RECV waits for that
 * instead of copying chunks (a counter of its own: ranks that disagree on
 * the regime time out instead of reading slots as if they were the data).
 * The post is what makes this safe: q's kernel has started, so whatever
 * q's stream did with its recvbuf before the call is done.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>

#include "ops/coll.h"
#include "rt/channel.cuh"
#include "rt/ll.cuh"
#include "rt/num.cuh"

using namespace mki;

namespace {

#include "ops/coll_trace.cuh"

struct ctx {
    const mki_coll_params *p;
    chan k;
    char *smem;      /* TMA staging (dynamic shared memory), or NULL */
    int pipes;       /* TMA pipes sharing smem (at most MKI_TMA_MAXPIPES) */
    volatile uint32_t *reduced; /* all-reduce with TMA: chunks reduced */
    volatile uint32_t *sent;    /* one-shot all-reduce: chunks delivered */
    int tma_recv;    /* local copies by TMA too */
    char **to;       /* zero copy: where SEND writes for local rank l
                      * (shared; NULL entry: through the slots) */
};

/* Pipe i of the CTA's dynamic shared memory (leader thread only). */
__device__ __forceinline__ void pipe_init(const ctx &x, int i, tma_pipe &t)
{
    const uint32_t piece = (MKI_TMA_PIECE / (uint32_t)x.pipes) & ~15u;
    uint64_t *mbar = reinterpret_cast<uint64_t *>(x.smem + MKI_TMA_STAGES * MKI_TMA_PIECE);
    tma_init(t, x.smem + (size_t)i * MKI_TMA_STAGES * piece, mbar + i * MKI_TMA_STAGES, piece);
}

/* Bytes and byte offset (in src for SEND, in dst for RECV) of the block
 * that travels between this rank and peer q. */
__device__ __forceinline__ void block_of(const mki_coll_params &p, int q, uint64_t *off,
                                         uint64_t *bytes)
{
    const uint64_t es = (uint64_t)p.esize;
    if (p.kind == MKI_COLL_ALLREDUCE && p.oneshot) {
        *off = 0;
        *bytes = p.count * es;
    } else if (p.kind == MKI_COLL_ALLREDUCE) {
        uint64_t first, elems;
        mki_ar_block(p.count, p.rt.nranks, q, &first, &elems);
        *off = first * es;
        *bytes = elems * es;
    } else {
        *off = p.kind == MKI_COLL_ALLGATHER ? 0 : (uint64_t)q * p.count * es;
        *bytes = p.count * es;
    }
}

/* This channel's part of the block exchanged with q. */
__device__ __forceinline__ void part_of(const ctx &x, int q, uint64_t *boff, uint64_t *b,
                                        uint64_t *off, uint64_t *len)
{
    block_of(*x.p, q, boff, b);
    mki_chan_part(*b, x.p->nch, x.k.c, off, len);
}

/* Chunks of the largest part any peer exchanges with this channel. */
__device__ __forceinline__ uint64_t max_chunks(const ctx &x)
{
    uint64_t maxk = 0, boff, b, off, len;
    for (int q = 0; q < x.p->rt.nranks; q++) {
        part_of(x, q, &boff, &b, &off, &len);
        const uint64_t nk = mki_nchunks(len, x.p->ch.slot_bytes);
        maxk = nk > maxk ? nk : maxk;
    }
    return maxk;
}

/* Zero copy: the leader waits for every peer's post of this call, then
 * the role reads where to write (to[l]: where my block starts in local
 * rank l's recvbuf; NULL: through its slots).  Only peers that get bytes
 * from this channel are waited for.  All-reduce: my reduced block, at its
 * own offset; all-gather, all-to-all: my block, at my index. */
static __device__ __noinline__ bool read_posts(const ctx &x, char **to, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const bool ar = p.kind == MKI_COLL_ALLREDUCE;
    const int me = p.rt.rank;
    if (tid == 0) for (int l = 0; l < MKI_MAXLOCAL; l++) to[l] = NULL;
    if (tid == 0)
        for (int j = 1; j < p.rt.nranks; j++) {
            const int q = (me + j) % p.rt.nranks, l = x.k.lof(q);
            uint64_t boff, b, off, len;
            part_of(x, ar ? me : q, &boff, &b, &off, &len);
            if (len == 0) continue;
            const uint64_t *post =
                reinterpret_cast<const uint64_t *>(x.k.my_ctl() + mki_ch_post(l, x.k.c));
            if (!wait_geq(p.rt, post + 1, x.k.target(0), wait_site{q, x.k.c, -1, 0}, x.k.e,
                          x.k.quit))
                break;
            const uint64_t a = *(volatile const uint64_t *)post;
            to[l] = a ? reinterpret_cast<char *>(a) + (ar ? boff : (uint64_t)me * b) : NULL;
        }
    role_sync(bar, nthr);
    return *x.k.quit == 0;
}

/* Zero copy: tell every peer written directly that my part of this
 * channel is in place (the writes were fenced; one thread). */
__device__ void raise_done(const ctx &x, char *const *to)
{
    const mki_rt_dev &rt = x.p->rt;
    for (int l = 0; l < rt.nlocal; l++)
        if (l != rt.local && to[l])
            st_release_sys(reinterpret_cast<uint64_t *>(x.p->ch.ctl[l] +
                                                        mki_ch_done(rt.local, x.k.c)),
                           x.k.target(0));
}

/* Staggered all-reduce (p.stagger): the bound on a second-half channel's
 * wait for its partner (a hint: a partner that never says go, e.g. not
 * resident, costs this much, never a hang). */
#define MKI_STAGGER_WAIT_NS 1000000ull

/* The go word of the first-half partner of second-half channel c. */
__device__ __forceinline__ volatile uint64_t *stagger_go(const mki_coll_params &p, int c)
{
    return reinterpret_cast<volatile uint64_t *>(p.ch.ctl[p.rt.local] +
                                                 mki_ch_go(p.rt.nranks, c));
}

/* SEND's leader, channel c of the second half: wait until its partner of
 * the first half has issued its phase-0 chunks, then clear its go.  Out of
 * line: no registers of the role's loop. */
static __device__ __noinline__ void stagger_wait(const mki_coll_params &p, int c,
                                                 volatile int *quit)
{
    volatile uint64_t *go = stagger_go(p, c - (p.nch + 1) / 2);
    const uint64_t t0 = globaltimer();
    while (*go == 0 && !*quit && globaltimer() - t0 < MKI_STAGGER_WAIT_NS) { }
    *go = 0;
}

/* SEND (phase 0): push block q of src into peer q's slots, or straight
 * into its recvbuf (zero copy). */
__device__ void send_role(const ctx &x, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const uint64_t S = p.ch.slot_bytes;
    tma_pipe pipe, *tp = NULL;
    if (x.smem && tid == 0) pipe_init(x, 0, pipe);
    if (x.smem) tp = &pipe;
    if (x.to && !read_posts(x, x.to, tid, nthr, bar)) return;
    const uint64_t maxk = max_chunks(x);
    if (tid == 0) CT(CT_S_START, (int)maxk);
    /* Register stores (small blocks): every local peer's chunk k signalled
     * at once; TMA (large blocks): each as soon as it is there, which keeps
     * the pipeline full (4 H200, 64 MB all-gather: 0.69 ms per peer, 0.81
     * batched). */
    const bool batched = p.mover == MKI_COLL_MOVER_REG;
    /* staggered: the second half of the channels a phase behind */
    const bool first_half = x.k.c < (p.nch + 1) / 2;
    if (p.stagger && !first_half) {
        if (tid == 0) stagger_wait(p, x.k.c, x.k.quit);
        role_sync(bar, nthr);
    }
    if (p.peer_major) {
        for (int j = 1; j < n; j++) {
            const int q = (me + j) % n;
            uint64_t boff, b, off, len;
            part_of(x, q, &boff, &b, &off, &len);
            const uint64_t nk = mki_nchunks(len, S);
            for (uint64_t k = 0; k < nk; k++) {
                const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
                if (!wait_slot(x.k, bar, nthr, tid, q, 0, k, tp)) return;
                if (tid == 0) CT(CT_S_CRED, q << 8 | (int)k);
                deliver(x.k, tp, tid, nthr, bar, 0, q, x.k.slot(q, k), p.src + boff + at,
                        nb, x.k.target(k), wait_site{q, x.k.c, (int)k, 0}, p.pipelined != 0);
                if (tid == 0) CT(CT_S_DLV, q << 8 | (int)k);
            }
        }
    } else
    for (uint64_t k = 0; k < maxk; k++) {
        uint32_t batch = 0; /* local peers given chunk k through their slots */
        bool direct_any = false;
        for (int j = 1; j < n; j++) {
            /* Zero copy: channels start on different peers, so that at
             * any time every peer receives from every rank. */
            const int q = x.to ? (me + 1 + (j - 1 + x.k.c) % (n - 1)) % n : (me + j) % n;
            uint64_t boff, b, off, len;
            part_of(x, q, &boff, &b, &off, &len);
            if (k >= mki_nchunks(len, S)) continue;
            const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
            char *direct = x.to ? x.to[x.k.lof(q)] : NULL;
            if (direct) {
                move_bytes(tp, direct + at, p.src + boff + at, nb, tid, nthr);
                direct_any = true;
                continue;
            }
            CT_OWED_AT(k, q, 0);
            if (!wait_slot(x.k, bar, nthr, tid, q, 0, k, tp)) return;
            if (tid == 0) CT(CT_S_CRED, q << 8 | (int)k);
            if (x.k.remote(q) || !batched) {
                deliver(x.k, tp, tid, nthr, bar, 0, q, x.k.slot(q, k), p.src + boff + at,
                        nb, x.k.target(k), wait_site{q, x.k.c, (int)k, 0}, p.pipelined != 0);
                if (tid == 0) CT(CT_S_DLV, q << 8 | (int)k);
                continue;
            }
            deliver_local(x.k, tp, tid, nthr, 0, q, (int)(k % MKI_NSLOTS), p.src + boff + at, nb);
            batch |= 1u << x.k.lof(q);
        }
        /* chunk k's copies to every local peer fenced at once, their
         * arrive counters raised together (channel.cuh) */
        if (direct_any && !batch) __threadfence_system();
        if (batch) publish_local(x.k, tid, nthr, bar, batch, 0, x.k.target(k));
        else if (x.sent) role_sync(bar, nthr);
        if (x.sent) { /* every copy of chunk k has read it: REDUCE may write */
            if (tid == 0) {
                __threadfence_block(); /* release: the role's reads of chunk k, then the count */
                *x.sent = (uint32_t)k + 1;
            }
        }
    }
    if (p.stagger && first_half && tid == 0) *stagger_go(p, x.k.c) = 1;
    /* The last arrive counter still pending in the pipe (deliver). */
    if (tp && tid == 0) tma_flush(*tp);
    if (tid == 0) CT(CT_S_END, 0);
    /* Zero copy: every byte is in place (fenced above); say so. */
    if (x.to) {
        role_sync(bar, nthr);
        if (tid == 0) raise_done(x, x.to);
    }
    if (tid == 0)
        for (int j = 1; j < n; j++) {
            const int q = (me + j) % n;
            uint64_t boff, b, off, len;
            part_of(x, q, &boff, &b, &off, &len);
            if (!(x.to && x.to[x.k.lof(q)])) note_owed(x.k, q, 0, mki_nchunks(len, S));
        }
}

/* RECV: copy what peers pushed (phase 0 for all-gather / all-to-all, phase
 * 1 for the reduced blocks of all-reduce) into dst; the own block first. */
__device__ void recv_role(const ctx &x, int tid, int nthr, int bar, int phase, int pipe_idx)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const uint64_t S = p.ch.slot_bytes;
    tma_pipe pipe, *tp = NULL;
    if (x.smem && x.tma_recv && tid == 0) pipe_init(x, pipe_idx, pipe);
    if (x.smem && x.tma_recv) tp = &pipe;
    /* The own block first: it overlaps with the peers' first chunks in
     * flight (done last, it ran alone at the end: -25% at 256 MB). */
    if (p.kind != MKI_COLL_ALLREDUCE) {
        uint64_t boff, b, off, len;
        part_of(x, me, &boff, &b, &off, &len);
        const uint64_t doff = (uint64_t)me * b;
        if (len && p.dst + doff != p.src + boff)
            move_bytes(tp, p.dst + doff + off, p.src + boff + off, len, tid, nthr);
    }
    const uint64_t maxk = max_chunks(x);
    /* Zero copy: peers write into dst themselves (p.post[l] != 0). */
    const bool zc = p.direct != 0;
    /* credits batched as SEND batches its signals (register stores) */
    const bool batched = p.mover == MKI_COLL_MOVER_REG;
    if (p.peer_major) {
        for (int j = 1; j < n; j++) {
            const int q = (me - j + n) % n;
            uint64_t boff, b, off, len;
            part_of(x, q, &boff, &b, &off, &len);
            const uint64_t nk = mki_nchunks(len, S);
            for (uint64_t k = 0; k < nk; k++) {
                const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
                const int sl = x.k.slot(q, k);
                if (!role_wait(x.k, bar, nthr, tid, x.k.arrive(q, phase, sl), x.k.target(k),
                               wait_site{q, x.k.c, (int)k, phase}))
                    return;
                if (tid == 0) CT(CT_V_ARR, q << 8 | (int)k);
                const uint64_t doff = p.kind == MKI_COLL_ALLREDUCE ? boff : (uint64_t)q * b;
                move_bytes(tp, p.dst + doff + at, x.k.inbox(q, phase, sl), nb, tid, nthr);
                if (tid == 0) CT(CT_V_CPY, q << 8 | (int)k);
                role_sync(bar, nthr);
                if (tid == 0)
                    raise_credit(x.k, q, phase, x.k.target(k), wait_site{q, x.k.c, (int)k, phase});
            }
        }
        return;
    }
    for (uint64_t k = 0; k < maxk; k++) {
        uint32_t cmask = 0; /* local peers whose chunk k was consumed */
        for (int j = 1; j < n; j++) {
            const int q = (me - j + n) % n;
            if (zc && p.post[x.k.lof(q)]) continue;
            uint64_t boff, b, off, len;
            part_of(x, q, &boff, &b, &off, &len);
            if (k >= mki_nchunks(len, S)) continue;
            const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
            const int sl = x.k.slot(q, k);
            if (!role_wait(x.k, bar, nthr, tid, x.k.arrive(q, phase, sl), x.k.target(k),
                           wait_site{q, x.k.c, (int)k, phase}))
                return;
            if (tid == 0) CT(CT_V_ARR, q << 8 | (int)k);
            const uint64_t doff = p.kind == MKI_COLL_ALLREDUCE ? boff : (uint64_t)q * b;
            /* from mapped host memory by registers, not TMA */
            move_bytes(x.k.remote(q) ? NULL : tp, p.dst + doff + at, x.k.inbox(q, phase, sl), nb,
                       tid, nthr);
            if (tid == 0) CT(CT_V_CPY, q << 8 | (int)k);
            if (!x.k.remote(q) && batched) {
                cmask |= 1u << x.k.lof(q);
                continue;
            }
            role_sync(bar, nthr);
            if (tid == 0)
                raise_credit(x.k, q, phase, x.k.target(k), wait_site{q, x.k.c, (int)k, phase});
        }
        /* the credits of chunk k to every local peer together (channel.cuh) */
        if (cmask) {
            role_sync(bar, nthr);
            if (tid == 0) raise_local(x.k, 0, 0, 0, cmask, phase, x.k.target(k));
        }
    }
    if (tid == 0) CT(CT_V_END, 0);
    if (!zc) return;
    for (int j = 1; j < n; j++) {
        const int q = (me - j + n) % n, l = x.k.lof(q);
        uint64_t boff, b, off, len;
        part_of(x, q, &boff, &b, &off, &len);
        if (!p.post[l] || len == 0) continue;
        const uint64_t *done =
            reinterpret_cast<const uint64_t *>(x.k.my_ctl() + mki_ch_done(l, x.k.c));
        if (!role_wait(x.k, bar, nthr, tid, done, x.k.target(0), wait_site{q, x.k.c, -1, phase}))
            return;
    }
}

/* ---- reduction ------------------------------------------------------- */

/* One-shot all-reduce: REDUCE's leader waits for SEND's progress (same
 * CTA; SEND quits through *quit).  Out of line: it costs the reduction's
 * registers nothing. */
static __device__ __noinline__ void wait_sent(volatile uint32_t *sent, uint32_t n,
                                              volatile int *quit)
{
    while (*sent < n && !*quit) { }
    __threadfence_block(); /* acquire: the count, then REDUCE's writes over the chunk */
}

#include "ops/coll_sum.cuh"

/* Leader of REDUCE, chunk k: every peer's chunk arrived, and (push) the
 * phase-1 slot the result goes to is free. */
__device__ void reduce_waits(const ctx &x, char *const *to, uint64_t k, bool push)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    for (int j = 1; j < n; j++) {
        const int q = (me + j) % n;
        wait_geq(p.rt, x.k.arrive(q, 0, x.k.slot(q, k)), x.k.target(k),
                 wait_site{q, x.k.c, (int)k, 0}, x.k.e, x.k.quit);
        if (!push || (to && to[x.k.lof(q)])) continue;
        if (k >= MKI_NSLOTS)
            wait_geq(p.rt, x.k.credit(q, 1), x.k.target(k - MKI_NSLOTS),
                     wait_site{q, x.k.c, (int)k, 1}, x.k.e, x.k.quit);
        if (k == 0) {
            const uint64_t owed = *x.k.owed(q, 1);
            wait_geq(p.rt, x.k.credit(q, 1), owed, owed_site(owed, q, x.k.c, 1), x.k.e, x.k.quit);
        }
    }
}

/* REDUCE: the own block, summed over every rank's contribution.  For
 * all-reduce the result also goes to the peers: pushed here with register
 * stores (mover reg), or published to SEND2 through x.reduced (TMA). */
template <typename T, bool OS>
__device__ void reduce_role(const ctx &x, int tid, int nthr, int bar, char **to)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const uint64_t S = p.ch.slot_bytes;
    const bool ar = !OS && p.kind == MKI_COLL_ALLREDUCE, push = ar && x.reduced == NULL;
    uint64_t boff, b, off, len;
    part_of(x, me, &boff, &b, &off, &len);
    const uint64_t nk = mki_nchunks(len, S);
    const char *own = p.src + boff;
    char *out = p.dst + (ar ? boff : 0);
    const bool inplace = p.src == p.dst;
    /* Zero copy (all-reduce, register stores): results go straight into
     * the peers' recvbufs that are registered. */
    const bool zc = push && to != NULL;
    if (zc && !read_posts(x, to, tid, nthr, bar)) return;
    if (!zc) to = NULL;
    for (uint64_t k = 0; k < nk; k++) {
        const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
        if (tid == 0) reduce_waits(x, to, k, push);
        /* one shot in place (src is dst; any other overlap is refused):
         * chunk k is overwritten only after SEND copied it to every peer */
        if (OS && inplace && tid == 0) wait_sent(x.sent, (uint32_t)k + 1, x.k.quit);
        bool vec = true;
        for (int l = 0; zc && l < p.rt.nlocal; l++)
            if (to[l] && ((reinterpret_cast<uintptr_t>(to[l]) + at) & 15)) vec = false;
        role_sync(bar, nthr);
        if (*x.k.quit) return;
        if (tid == 0) CT(CT_R_ARR, (int)k);
        const chunk_io<T> io{&x, to, reinterpret_cast<const T *>(own + at), k, at, OS};
        reduce_chunk<T>(reinterpret_cast<T *>(out + at), io, n, push, nb / sizeof(T), tid, nthr,
                        vec);
        if (push) __threadfence_system();
        else fence_proxy_async_global(); /* SEND2 reads out by TMA */
        role_sync(bar, nthr);
        if (tid == 0) CT(CT_R_RED, (int)k);
        /* SEND2 needs only the sum in dst seen by its bulk copies (the
         * proxy fence and the barrier above): told before the system
         * fence of the credits, which free slots for later chunks only */
        if (tid == 0 && ar && !push) {
            __threadfence_block();
            *x.reduced = (uint32_t)k + 1;
        }
        if (tid == 0) {
            /* every counter of chunk k after one fence (channel.cuh):
             * credits to the peers whose chunk was summed, and with push
             * the arrive counters of the results in their phase-1 slots */
            uint32_t cmask = 0, amask = 0;
            for (int j = 1; j < n; j++) {
                const int q = (me + j) % n;
                const int l = x.k.lof(q);
                if (l < 0) {
                    raise_credit(x.k, q, 0, x.k.target(k), wait_site{q, x.k.c, (int)k, 0});
                    continue;
                }
                cmask |= 1u << l;
                if (push && !(zc && to[l])) amask |= 1u << l;
            }
            raise_local(x.k, amask, 1, x.k.target(k), cmask, 0, x.k.target(k));
            CT(CT_R_SUM, (int)k);
        }
    }
    if (!push || nk == 0) return;
    if (zc && tid == 0) raise_done(x, to); /* every result fenced above */
    if (tid == 0)
        for (int j = 1; j < n; j++) {
            const int q = (me + j) % n;
            if (!(zc && to[x.k.lof(q)])) note_owed(x.k, q, 1, nk);
        }
}

/* SEND2 (all-reduce with TMA): push each reduced chunk of my block from
 * dst into every peer's phase-1 slots, as soon as REDUCE publishes it
 * (p.pipelined: each peer's counter raised as the next copy starts;
 * otherwise the local peers' together after one fence). */
__device__ void send2_role(const ctx &x, int tid, int nthr, int bar)
{
    const mki_coll_params &p = *x.p;
    const int n = p.rt.nranks, me = p.rt.rank;
    const uint64_t S = p.ch.slot_bytes;
    tma_pipe pipe;
    if (tid == 0) pipe_init(x, 1, pipe);
    uint64_t boff, b, off, len;
    part_of(x, me, &boff, &b, &off, &len);
    const uint64_t nk = mki_nchunks(len, S);
    /* Chunk after chunk (every peer gets chunk k before chunk k + 1 goes
     * out), or peer after peer (always pipelined): every chunk to me + 1
     * as it is reduced, then to me + 2, ... */
    const uint64_t G = p.peer_major && p.pipelined ? nk : 1;
    for (uint64_t g0 = 0; g0 < nk; g0 += G) {
        const uint64_t ke = nk < g0 + G ? nk : g0 + G;
        uint32_t batch = 0; /* not pipelined: local peers signalled together */
        for (int j = 1; j < n; j++) {
            const int q = (me + j) % n;
            for (uint64_t k = g0; k < ke; k++) {
                const uint64_t at = off + k * S, nb = len - k * S < S ? len - k * S : S;
                if (j == 1) {
                    if (tid == 0) {
                        /* nothing pending while waiting */
                        if (*x.reduced < k + 1) tma_flush(pipe);
                        while (*x.reduced < k + 1 && !*x.k.quit) { }
                    }
                    role_sync(bar, nthr);
                    if (*x.k.quit) return;
                    if (tid == 0) CT(CT_T_GO, (int)k);
                    __threadfence_block();
                }
                CT_OWED_AT(k, q, 1);
                if (!wait_slot(x.k, bar, nthr, tid, q, 1, k, &pipe)) return;
                if (x.k.remote(q) || p.pipelined) {
                    deliver(x.k, &pipe, tid, nthr, bar, 1, q, x.k.slot(q, k), p.dst + boff + at,
                            nb, x.k.target(k), wait_site{q, x.k.c, (int)k, 1},
                            p.pipelined != 0);
                    if (tid == 0) CT(CT_T_DLV, q << 8 | (int)k);
                    continue;
                }
                deliver_local(x.k, &pipe, tid, nthr, 1, q, (int)(k % MKI_NSLOTS),
                              p.dst + boff + at, nb);
                batch |= 1u << x.k.lof(q);
            }
        }
        publish_local(x.k, tid, nthr, bar, batch, 1, x.k.target(ke - 1));
    }
    if (tid == 0) tma_flush(pipe);
    if (tid == 0) CT(CT_T_END, 0);
    if (tid == 0)
        for (int j = 1; j < n; j++) note_owed(x.k, (me + j) % n, 1, nk);
}

/* Zero copy: tell every peer where its block goes in my recvbuf (or 0:
 * through my slots); this call has started here (thread 0). */
__device__ void post_recvbuf(const mki_coll_params &p, int c, uint64_t e)
{
    for (int l = 0; l < p.rt.nlocal; l++) {
        if (l == p.rt.local) continue;
        uint64_t *post = reinterpret_cast<uint64_t *>(p.ch.ctl[l] + mki_ch_post(p.rt.local, c));
        st_relaxed_sys(post, p.post[l]);
        st_release_sys(post + 1, mki_sig_target(e, 0));
    }
}

/* ---- LL: small blocks with the flag in every word --------------------- */

#include "ops/coll_ll.cuh"

/* What a CTA keeps in static shared memory (the TMA staging is dynamic). */
struct frame {
    volatile int quit;
    uint64_t e;              /* this call's operation number on the channel */
    volatile uint32_t count; /* chunks reduced (all-reduce with TMA) or
                              * delivered (one-shot all-reduce) */
    char *to[MKI_MAXLOCAL];  /* zero copy: the peers' posted recvbufs */
};

/* The operation number of this channel, and the abort check at entry. */
__device__ bool enter(const mki_coll_params &p, frame &f)
{
    if (threadIdx.x == 0) {
        f.quit = 0;
        f.count = 0;
        /* the operation number into a register, stored after enter_ok's
         * loads are issued: the three loads overlap */
        const uint64_t e = *reinterpret_cast<volatile uint64_t *>(p.ch.ctl[p.rt.local] +
                                                                  mki_ch_seq(blockIdx.x)) + 1;
        if (!enter_ok(p.rt, blockIdx.x, e)) f.quit = 1;
        else if (p.direct) post_recvbuf(p, blockIdx.x, e);
        f.e = e;
        ct_begin(e);
    }
    __syncthreads();
    return f.quit == 0;
}

__device__ void leave(const mki_coll_params &p, frame &f, uint64_t e)
{
    __syncthreads();
    if (threadIdx.x == 0 && f.quit == 0)
        *reinterpret_cast<volatile uint64_t *>(p.ch.ctl[p.rt.local] + mki_ch_seq(blockIdx.x)) = e;
    if (threadIdx.x == 0) ct_print(p.rt.rank, e);
}

} /* namespace */

extern __shared__ __align__(128) char mki_coll_shm[];

/* The CTA's context: one TMA pipe, no counter, no zero copy (each kernel
 * sets what it uses). */
static __device__ ctx cta_ctx(const mki_coll_params &p, frame &f)
{
    return ctx{&p, chan{&p.rt, &p.ch, (int)blockIdx.x, f.e, &f.quit},
               p.mover != MKI_COLL_MOVER_REG ? mki_coll_shm : NULL, 1, NULL, NULL, 0, NULL};
}

/* The kernel shapes (one instantiation each, and per type). */
enum shape { COPY, REDUCE, ONESHOT, LL };

/* All-gather and all-to-all: SEND, then RECV. */
__device__ __forceinline__ void copy_body(ctx &x, frame &f, int role, int tid, int nthr)
{
    x.tma_recv = x.p->mover == MKI_COLL_MOVER_TMA;
    x.pipes = x.tma_recv ? 2 : 1;
    x.to = x.p->direct ? f.to : NULL;
    if (role == MKI_CR_SEND) send_role(x, tid, nthr, 1);
    else recv_role(x, tid, nthr, 2, 0, 1);
}

/* Reduce-scatter: SEND, REDUCE.  All-reduce with TMA: SEND, SEND2,
 * REDUCE, RECV (phase 1); with register stores: SEND, REDUCE (which also
 * pushes the results), RECV. */
template <typename T>
__device__ __forceinline__ void reduce_body(ctx &x, frame &f, int role, int tid, int nthr)
{
    const mki_coll_params &p = *x.p;
    const bool tma = p.mover != MKI_COLL_MOVER_REG, ar = p.kind == MKI_COLL_ALLREDUCE;
    x.tma_recv = ar && p.mover == MKI_COLL_MOVER_TMA;
    x.pipes = ar ? 2 + x.tma_recv : 1;
    x.reduced = ar && tma ? &f.count : NULL;
    /* zero copy: all-reduce with register stores only (src/ops/coll.c);
     * REDUCE writes the results into the recvbufs */
    char **zc = p.direct ? f.to : NULL;
    if (role == MKI_CR_SEND) send_role(x, tid, nthr, 1);
    else if (!ar) reduce_role<T, false>(x, tid, nthr, 2, NULL);
    else if (tma && role == 1) send2_role(x, tid, nthr, 4);
    else if (role == (tma ? 2 : 1)) reduce_role<T, false>(x, tid, nthr, 2, zc);
    else recv_role(x, tid, nthr, 3, 1, 2);
}

/* One-shot all-reduce (p.oneshot): SEND as for reduce-scatter with every
 * block the whole buffer, then REDUCE of the whole buffer, each chunk
 * after SEND delivered it everywhere. */
template <typename T>
__device__ __forceinline__ void oneshot_body(ctx &x, frame &f, int role, int tid, int nthr)
{
    x.sent = &f.count;
    if (role == MKI_CR_SEND) send_role(x, tid, nthr, 1);
    else reduce_role<T, true>(x, tid, nthr, 2, NULL);
}

/* LL (p.ll): SEND, then RECV (all-gather, all-to-all) or REDUCE
 * (reduce-scatter, one-phase all-reduce). */
template <typename T>
__device__ __forceinline__ void ll_body(ctx &x, frame &f, int role, int tid, int nthr)
{
    const mki_coll_params &p = *x.p;
    const bool reduce = p.kind == MKI_COLL_REDUCESCATTER || p.kind == MKI_COLL_ALLREDUCE;
    (void)reduce;
    if (p.kind == MKI_COLL_ALLREDUCE && p.src == p.dst) x.sent = &f.count;
    const ll_geo g = ll_geo_of(x);
    if (role == MKI_CR_SEND) ll_send(x, g, tid, nthr, 1);
    else if constexpr (sizeof(T) == 1) ll_recv(x, g, tid, nthr, 2); /* the copies' instance */
    else if (reduce) ll_reduce<T>(x, g, tid, nthr, 2);
}

/* One persistent CTA per channel: enter (abort check, operation number),
 * the CTA's roles from the plan, leave (the channel's number advanced). */
template <int S, typename T>
__global__ void __launch_bounds__(MKI_COLL_THREADS, 1)
mki_coll_kernel_of(const __grid_constant__ mki_coll_params p)
{
    __shared__ frame f;
    if (!enter(p, f)) return;
    ctx x = cta_ctx(p, f);
    int tid, nthr;
    const int role = mki_role_of(&p.roles, threadIdx.x, &tid, &nthr);
    if constexpr (S == COPY) copy_body(x, f, role, tid, nthr);
    else if constexpr (S == REDUCE) reduce_body<T>(x, f, role, tid, nthr);
    else if constexpr (S == LL) ll_body<T>(x, f, role, tid, nthr);
    else oneshot_body<T>(x, f, role, tid, nthr);
    leave(p, f, x.k.e);
}

template <int S>
static const void *typed(int dtype)
{
    switch (dtype) {
    case MKI_BF16: return (const void *)mki_coll_kernel_of<S, __nv_bfloat16>;
    case MKI_F16: return (const void *)mki_coll_kernel_of<S, __half>;
    case MKI_F32: return (const void *)mki_coll_kernel_of<S, float>;
    }
    return NULL;
}

static const void *kernel_for(int kind, int dtype, int oneshot, int ll)
{
    /* the copies do not look at the type: one instantiation */
    if (kind == MKI_COLL_ALLGATHER || kind == MKI_COLL_ALLTOALL)
        return ll ? (const void *)mki_coll_kernel_of<LL, char>
                  : (const void *)mki_coll_kernel_of<COPY, char>;
    if (ll) return typed<LL>(dtype);
    return kind == MKI_COLL_ALLREDUCE && oneshot ? typed<ONESHOT>(dtype) : typed<REDUCE>(dtype);
}

extern "C" const void *mki_coll_kernel(const struct mki_coll_params *p)
{
    return kernel_for(p->kind, p->dtype, p->oneshot, p->ll);
}

extern "C" size_t mki_coll_smem(const struct mki_coll_params *p)
{
    return p->mover != MKI_COLL_MOVER_REG && !p->ll ? MKI_TMA_SMEM : 0;
}

/* Load every collective kernel now (never lazily: REFERENCE.md). */
extern "C" int mki_coll_preload(char *msg, size_t len)
{
    const int kinds[] = {MKI_COLL_ALLGATHER, MKI_COLL_REDUCESCATTER, MKI_COLL_ALLREDUCE};
    for (int o = 0; o < 6; o++)
        for (int d = MKI_BF16; d <= MKI_F32; d++) {
            /* o: all-gather, reduce-scatter, all-reduce, one phase; then
             * LL copies and LL reductions */
            const void *k = o < 4 ? kernel_for(kinds[o < 3 ? o : 2], d, o == 3, 0)
                                  : kernel_for(o == 4 ? MKI_COLL_ALLGATHER : MKI_COLL_ALLREDUCE,
                                               d, 1, 1);
            cudaFuncAttributes a;
            cudaError_t err = cudaFuncGetAttributes(&a, k);
            if (err == cudaSuccess)
                err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           MKI_TMA_SMEM);
            if (err != cudaSuccess) {
                snprintf(msg, len, "loading the collective kernels: %s", cudaGetErrorString(err));
                return (int)err;
            }
        }
    return 0;
}
