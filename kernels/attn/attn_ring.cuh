/*
 * attn_ring.cuh - the attention kernel's side of the ring (ops/attn.h):
 * its parameters, the CTA's call number and failure note, the waits on
 * peers' chunks, the gate that opens the copies, and the call's end.
 * Included by attn_kernel.cuh (inside namespace mki::attn), once.
 */
#pragma once

/* The ring's protocol (ops/attn.h); on = 0 for the core alone. */
struct RingParams {
    int on, nsrc, split;
    int seg_src[MKI_ATTN_MAXSEG];
    int nchunks;
    mki_ratt_ctl *ctl;
    const mki_ratt_ctl *peer_ctl[MKI_MAXLOCAL];
    mki_rt_dev rt;
};

struct CtaState {
    uint64_t e;
    cta_note note;
};
__shared__ CtaState cta;

/* ---------------------------------------------------------------- ring */

__device__ __forceinline__ bool ring_wait(const RingParams &r, const uint64_t *addr,
                                          uint64_t target, int local, int chunk, int phase)
{
    return wait_noted(r.rt, cta.note, addr, target, r.rt.glob[local], chunk, phase);
}

/* The gate (ops/attn.h): the previous ranks first, the order in which the
 * host enqueued the copies. */
__device__ void ring_gate(const RingParams &r)
{
    const uint64_t e = cta.e;
    st_relaxed_sys(&r.ctl->cur, e);
    for (int i = 1; i < r.nsrc; ++i) {
        const int q = (r.rt.local - i + r.nsrc) % r.nsrc;
        if (e > 1) (void)ring_wait(r, &r.peer_ctl[q]->released, e - 1, q, -1, 2);
        /* opened even after a failure: the side streams must end */
        for (int x = 0; x < r.split; ++x) st_release_sys(&r.ctl->go[q][x], 1);
    }
}

__device__ void ring_wait_all(const RingParams &r)
{
    for (int s = 0; s < r.nsrc; ++s) {
        if (s == r.rt.local) continue;
        for (int c = 0; c < r.nchunks; ++c)
            if (!ring_wait(r, &r.ctl->sig[s][c], 1, s, c, 1)) return;
    }
}

__device__ void ring_begin(const RingParams &r)
{
    cta.note.quit = 0;
    cta.e = r.on ? *reinterpret_cast<volatile const uint64_t *>(&r.ctl->calls) + 1 : 0;
}

__device__ void ring_finish(const RingParams &r)
{
    note_report(r.rt, cta.note, cta.e);
    __threadfence();
    if (atomicAdd(&r.ctl->exits, 1u) != gridDim.x - 1) return;
    r.ctl->exits = 0;
    if (!cta.note.quit)
        for (int s = 0; s < r.nsrc; ++s)
            if (s != r.rt.local)
                for (int c = 0; c < r.nchunks; ++c) r.ctl->sig[s][c] = 0;
    __threadfence_system();
    *reinterpret_cast<volatile uint64_t *>(&r.ctl->calls) = cta.e;
    st_release_sys(&r.ctl->released, cta.e);
}
