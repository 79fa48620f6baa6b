/*
 * channel.cuh - the credit/slot channel protocol on the device (the
 * layout and the arithmetic are in channel.h).
 *
 *     sender, channel c                          receiver q, channel c
 *     wait credit(q) >= chunk k - NSLOTS          wait arrive(me, slot) >= k
 *     copy chunk k -> q's slot k % NSLOTS         consume the slot
 *     release arrive(me) = k      ------------>   release credit(q) = k  --> back
 *
 * A peer of this node is reached through its mapped heap (stores over
 * NVLink or inside the GPU, release stores of the counters); a peer on
 * another node through the proxy: the sender stages the chunk in its net
 * block and pushes one WRITE_SIGNAL (the proxy writes it into the
 * receiver's slot, then raises its arrive counter of that slot with
 * MAX), credits go back as SIGNAL commands (MAX too).
 *
 * Waits are done by one leader thread of a role; the role's other threads
 * meet it at a named barrier and then read the CTA's quit flag, so a
 * failed wait stops the whole CTA within one barrier and every role
 * leaves at its next wait.
 */
#ifndef MKI_CHANNEL_CUH
#define MKI_CHANNEL_CUH

#include "channel.h"
#include "copy.cuh"
#include "fifo.cuh"
#include "wait.cuh"

namespace mki {

/* One channel (CTA) of one call. */
struct chan {
    const mki_rt_dev *rt;
    const mki_chan_dev *ch;
    int c;                /* channel */
    uint64_t e;           /* operation number of this channel (>= 1) */
    volatile int *quit;   /* the CTA's quit flag (shared memory) */

    __device__ __forceinline__ int lof(int q) const
    {
        return q < MKI_RT_LOF ? rt->lof[q] : __ldg(rt->local_of + q);
    }
    __device__ __forceinline__ bool remote(int q) const { return lof(q) < 0; }
    __device__ __forceinline__ char *my_ctl() const { return ch->ctl[rt->local]; }
    __device__ __forceinline__ uint64_t target(uint64_t k) const { return mki_sig_target(e, k); }

    /* The credit rank q raised for what I sent it. */
    __device__ __forceinline__ const uint64_t *credit(int q, int phase) const
    {
        const int l = lof(q);
        return reinterpret_cast<const uint64_t *>(
            l < 0 ? ch->nb + mki_nb_credit(&ch->nbg, phase, q, c)
                  : my_ctl() + mki_ch_credit(phase, l, c));
    }
    /* The arrive counter of chunks from rank q (per slot across nodes). */
    __device__ __forceinline__ const uint64_t *arrive(int q, int phase, int slot) const
    {
        const int l = lof(q);
        return reinterpret_cast<const uint64_t *>(
            l < 0 ? ch->nb + mki_nb_arrive(&ch->nbg, phase, q, c, slot)
                  : my_ctl() + mki_ch_arrive(phase, l, c));
    }
    /* Where chunks from rank q land here. */
    __device__ __forceinline__ const char *inbox(int q, int phase, int slot) const
    {
        const int l = lof(q);
        return l < 0 ? ch->nb + mki_nb_slot(&ch->nbg, phase, q, c, slot)
                     : ch->slots[rt->local] +
                           mki_ch_slot(phase, l, c, slot, rt->nlocal, ch->slot_bytes);
    }
    /* The slot of chunk k to or from rank q (channel.h: across nodes the
     * slots continue from call to call). */
    __device__ __forceinline__ int slot(int q, uint64_t k) const
    {
        return (int)((remote(q) ? e + k : k) % MKI_NSLOTS);
    }
    /* Across nodes: the target that slot `s` of rank q's phase slots last
     * carried from this channel. */
    __device__ __forceinline__ uint64_t *sent(int q, int phase, int s) const
    {
        return reinterpret_cast<uint64_t *>(my_ctl() + mki_ch_sent(phase, q, rt->nranks, c, s));
    }
    /* Across nodes: where a chunk for rank q waits in my net block for
     * the proxy (offset in the block). */
    __device__ __forceinline__ uint64_t stage(int q, int phase, int s) const
    {
        return mki_nb_slot(&ch->nbg, phase, rt->nranks + q, c, s);
    }
    /* The credit rank q still owes this channel's use of its slots. */
    __device__ __forceinline__ uint64_t *owed(int q, int phase) const
    {
        return reinterpret_cast<uint64_t *>(my_ctl() + mki_ch_owed(phase, q, rt->nranks, c));
    }
};

__device__ __forceinline__ wait_site owed_site(uint64_t owed, int q, int c, int phase)
{
    return wait_site{q, c, (int)(owed & 0xffffffffull) - 1, phase};
}

/* Across nodes: the WRITE_SIGNAL that moves n bytes staged for rank q at
 * `stage` (chan::stage) into its slot `slot` of phase and raises that
 * slot's arrive counter to target (MAX). */
__device__ __forceinline__ mki_fifo_cmd net_chunk_cmd(const chan &k, uint64_t stage, int q,
                                                      int phase, int slot, uint64_t n,
                                                      uint64_t target)
{
    const uint64_t base = k.ch->nb_off;
    return mki_fifo_cmd{MKI_CMD_WRITE_SIGNAL, (uint32_t)q, MKI_SIG_MAX, 1, base + stage,
                        base + mki_nb_slot(&k.ch->nbg, phase, k.rt->rank, k.c, slot), n,
                        base + mki_nb_arrive(&k.ch->nbg, phase, k.rt->rank, k.c, slot), target};
}

/* Across nodes: the credit v for rank q's chunks of (phase, channel), a
 * zero-byte WRITE_SIGNAL (raise_credit says why not a SIGNAL). */
__device__ __forceinline__ mki_fifo_cmd net_credit_cmd(const chan &k, int q, int phase, uint64_t v)
{
    return mki_fifo_cmd{MKI_CMD_WRITE_SIGNAL, (uint32_t)q, MKI_SIG_MAX, 1, 0, 0, 0,
                        k.ch->nb_off + mki_nb_credit(&k.ch->nbg, phase, k.rt->rank, k.c), v};
}

/* A command the FIFO did not take (r: fifo_reserve's, not MKI_FIFO_OK): a
 * full ring that never drains or a failed proxy is recorded like a failed
 * wait and quits the CTA; the role sees quit at its next wait. */
static __device__ __noinline__ void net_failed(const chan &k, int r, const wait_site &w)
{
    fail(*k.rt, r == MKI_FIFO_PROXY_FAILED ? MKI_ERR_PROXY : MKI_ERR_TIMEOUT, w, 0, 0, k.e);
    *k.quit = 1;
}

/* Push one command to the proxy (one thread); false when it failed
 * (net_failed). */
static __device__ __noinline__ bool net_push(const chan &k, const mki_fifo_cmd &c,
                                             const wait_site &w)
{
    unsigned long long ticket;
    const int r = fifo_push(k.rt->fifo, c, stops_of(*k.rt), k.rt->timeout_ns, &ticket);
    if (r == MKI_FIFO_OK) return true;
    net_failed(k, r, w);
    return false;
}

/* Tell rank q that I consumed its chunks of (phase, channel) up to the
 * target v (one thread).  Across nodes a zero-byte WRITE_SIGNAL, not a
 * SIGNAL: a credit carries no data of mine that q must see first, and a
 * SIGNAL is a fence (the socket transport sends a frame on every
 * connection, EFA waits for every command in flight): 4 connections made
 * a small call 15-20 us slower (bench/NOTES.md, eighteenth session). */
__device__ __forceinline__ void raise_credit(const chan &k, int q, int phase, uint64_t v,
                                             const wait_site &w)
{
    const int l = k.lof(q);
    if (l >= 0) {
        st_release_sys(reinterpret_cast<uint64_t *>(
                           k.ch->ctl[l] + mki_ch_credit(phase, k.rt->local, k.c)), v);
        return;
    }
    (void)net_push(k, net_credit_cmd(k, q, phase, v), w);
}

/* Chunks across nodes of at most this many bytes are staged and pushed by
 * one thread (net_small): 8 loads of 16 bytes in flight, one fence. */
#define MKI_NET_SMALL 128

/* A small chunk across nodes, by one thread: the FIFO slot claimed before
 * the data is written (no system-scope fence while stores to host memory
 * are in flight), then the data, then the command, whose release orders
 * both: one fence where the role's copy, fence and barrier, then the
 * push's own, cost two (bench/NOTES.md, twenty-third session). */
__device__ __forceinline__ void net_small(const chan &k, uint64_t stage, int q, int phase, int slot,
                                          const char *src, uint64_t n, uint64_t target,
                                          const wait_site &w)
{
    const mki_rt_dev &rt = *k.rt;
    unsigned long long t;
    const int r = fifo_reserve(rt.fifo, stops_of(rt), rt.timeout_ns, &t);
    if (r != MKI_FIFO_OK) {
        net_failed(k, r, w);
        return;
    }
    copy_bytes(k.ch->nb + stage, src, n, 0, 1);
    fifo_fill(rt.fifo, t, net_chunk_cmd(k, stage, q, phase, slot, n, target));
    *k.sent(q, phase, slot) = target;
}

/* Deliver n bytes at src as chunk `target` into slot `slot` of phase
 * `phase` that rank q keeps for me, then raise q's arrive counter.  The
 * whole role calls it.  A local q with a TMA pipe and 16-byte multiples:
 * the counter is left pending in the pipe (tma_copy_signal), raised by the
 * next such delivery or by tma_flush, which the role calls before any wait
 * (wait_slot does) and at its end.  A remote q gets the bytes staged in my
 * net block (index nranks + q) and one WRITE_SIGNAL; the system fence and
 * the role barrier order the staging before the push. */
__device__ __forceinline__ void deliver(const chan &k, tma_pipe *tp, int tid, int nthr,
                                            int bar, int phase, int q, int slot,
                                            const char *src, uint64_t n, uint64_t target,
                                            const wait_site &w, bool pipelined = false)
{
    const mki_rt_dev &rt = *k.rt;
    const int l = k.lof(q);
    if (l >= 0) {
        char *const to = k.ch->slots[l] + mki_ch_slot(phase, rt.local, k.c, slot, rt.nlocal,
                                                      k.ch->slot_bytes);
        uint64_t *const arr = reinterpret_cast<uint64_t *>(
            k.ch->ctl[l] + mki_ch_arrive(phase, rt.local, k.c));
        if (pipelined && tp && n &&
            ((reinterpret_cast<uintptr_t>(to) | reinterpret_cast<uintptr_t>(src) | n) & 15) == 0) {
            /* all by TMA: the arrive counter is raised when the stores
             * complete, while the next chunk is already being copied */
            if (tid == 0) tma_copy_signal(*tp, to, src, n, arr, target);
            return;
        }
        move_bytes(tp, to, src, n, tid, nthr);
        __threadfence_system();
        role_sync(bar, nthr);
        if (tid == 0) st_release_sys(arr, target);
        return;
    }
    /* Register stores into mapped host memory (no TMA there). */
    const uint64_t stage = k.stage(q, phase, slot);
    if (n <= MKI_NET_SMALL) {
        if (tid == 0) net_small(k, stage, q, phase, slot, src, n, target, w);
        return;
    }
    copy_bytes(k.ch->nb + stage, src, n, tid, nthr);
    __threadfence_system();
    role_sync(bar, nthr);
    if (tid == 0 && net_push(k, net_chunk_cmd(k, stage, q, phase, slot, n, target), w))
        *k.sent(q, phase, slot) = target;
}

/* Batched signals for local peers.  A release store to a peer is a
 * system fence, and a fence waits until every store the thread issued
 * before it is acknowledged, so signals raised one peer after the other
 * cost one NVLink round trip each (with 3 peers most of a small call's
 * time).  Instead the chunks of a batch are copied with no fence
 * (deliver_local), then every role thread fences once, the role meets,
 * and the leader fences and raises every counter of the batch with plain
 * system-scope stores, which go out together. */

/* Copy n bytes at src into slot `slot` of `phase` that local peer q keeps
 * for me; signalled later by publish_local.  The whole role calls it. */
__device__ __forceinline__ void deliver_local(const chan &k, tma_pipe *tp, int tid, int nthr,
                                              int phase, int q, int slot, const char *src,
                                              uint64_t n)
{
    const mki_rt_dev &rt = *k.rt;
    move_bytes(tp, k.ch->slots[k.lof(q)] + mki_ch_slot(phase, rt.local, k.c, slot, rt.nlocal,
                                                      k.ch->slot_bytes),
               src, n, tid, nthr);
}

/* The leader's half of a batch (after the role met): one fence, then the
 * arrive counters of `phase` of the local peers in mask (bit l: local
 * index l) to target, and their credit counters of cphase to ctarget
 * (cmask; what this rank consumed from them). */
__device__ __forceinline__ void raise_local(const chan &k, uint32_t mask, int phase,
                                            uint64_t target, uint32_t cmask, int cphase,
                                            uint64_t ctarget)
{
    if ((mask | cmask) == 0) return;
    __threadfence_system();
    const mki_rt_dev &rt = *k.rt;
    for (int l = 0; l < rt.nlocal; l++) {
        if (cmask >> l & 1)
            st_relaxed_sys(reinterpret_cast<uint64_t *>(
                               k.ch->ctl[l] + mki_ch_credit(cphase, rt.local, k.c)), ctarget);
        if (mask >> l & 1)
            st_relaxed_sys(reinterpret_cast<uint64_t *>(
                               k.ch->ctl[l] + mki_ch_arrive(phase, rt.local, k.c)), target);
    }
}

/* Signal a batch of deliver_local copies: every thread's stores fenced,
 * the role met, the leader raises the counters.  The whole role calls it
 * (also with mask 0: it is the role's barrier). */
__device__ __forceinline__ void publish_local(const chan &k, int tid, int nthr, int bar,
                                              uint32_t mask, int phase, uint64_t target)
{
    if (mask) __threadfence_system();
    role_sync(bar, nthr);
    if (tid == 0) raise_local(k, mask, phase, target, 0, 0, 0);
}

/* Leader waits, then the role meets; false when the CTA quits. */
__device__ __forceinline__ bool role_wait(const chan &k, int bar, int nthr, int tid,
                                          const uint64_t *addr, uint64_t target, wait_site w)
{
    if (tid == 0) wait_geq(*k.rt, addr, target, w, k.e, k.quit);
    role_sync(bar, nthr);
    return *k.quit == 0;
}

/* Before chunk k to rank q of a phase: the slot it reuses is free (the
 * credit of chunk k - NSLOTS; for chunk 0, what the last call that used
 * q's slots left owed; across nodes, of the chunk that slot last carried,
 * maybe a few calls back).  The whole role calls it. */
__device__ __forceinline__ bool wait_slot(const chan &k, int bar, int nthr, int tid, int q,
                                          int phase, uint64_t chunk, tma_pipe *tp = NULL)
{
    const uint64_t *cr = k.credit(q, phase);
    uint64_t t = 0;
    wait_site w{q, k.c, (int)chunk, phase};
    if (k.remote(q)) {
        /* One read over PCIe serves both checks below, and the slot's
         * last target (device memory) is read beside it, not before it. */
        if (tid == 0) {
            t = *k.sent(q, phase, k.slot(q, chunk));
            const uint64_t v = ld_acquire_sys(cr);
            if (v < t) {
                if (tp && tp->sig) tma_flush(*tp);
                (void)wait_geq(*k.rt, cr, t, w, k.e, k.quit);
            }
        }
        role_sync(bar, nthr);
        return *k.quit == 0;
    } else if (chunk >= MKI_NSLOTS) {
        t = k.target(chunk - MKI_NSLOTS);
    } else if (chunk == 0) {
        t = *k.owed(q, phase);
        w = owed_site(t, q, k.c, phase);
    } else {
        return *k.quit == 0;
    }
    /* a counter still pending in the pipe may be what q waits for before it
     * gives the credit: raised first unless the credit is already there */
    if (tid == 0 && tp && tp->sig && *reinterpret_cast<const volatile uint64_t *>(cr) < t)
        tma_flush(*tp);
    return role_wait(k, bar, nthr, tid, cr, t, w);
}

/* At the end of a role that sent nk chunks to local peer q through a
 * phase's slots: what q owes (the next call waits for it before reusing
 * them).  Remote peers: sent[] says it per slot. */
__device__ __forceinline__ void note_owed(const chan &k, int q, int phase, uint64_t nk)
{
    if (nk > 0 && !k.remote(q)) *k.owed(q, phase) = k.target(nk - 1);
}

} /* namespace mki */

#endif /* MKI_CHANNEL_CUH */
