/*
 * channel.h - the credit/slot channels between two ranks: signal targets,
 * how a transfer is cut into channels and chunks, and where the counters
 * and slots of every channel live.  C99 and CUDA C++ (host tests check
 * the arithmetic; kernels/rt/channel.cuh moves the bytes).
 *
 * A sender pushes chunk k of a channel into slot k % MKI_NSLOTS of the
 * receiver (across nodes (e + k) % MKI_NSLOTS, e below) and raises the
 * receiver's arrive counter; the receiver consumes it and raises the
 * sender's credit counter.  Counters only grow: channel
 * c of every rank runs the same sequence of operations, so its operation
 * number e (seq[c] + 1, kept in the channel block on the device) is equal
 * on all ranks for the same call, and chunk k of operation e has target
 * (e << 32) | (k + 1).  Nothing is reset between calls and the host passes
 * nothing that a CUDA graph replay would freeze.
 *
 * Three blocks of the symmetric heap hold a rank's channels (offsets from
 * the block's start; src/ops/coll.c allocates them):
 *
 *   channel block (device):
 *     0         seq[MKI_MAXCH]                   operation count per channel
 *     CH_ARRIVE arrive[2][MKI_MAXLOCAL][MKI_MAXCH]  written by local senders
 *     CH_CREDIT credit[2][MKI_MAXLOCAL][MKI_MAXCH]  written by local receivers
 *     CH_POST   post[MKI_MAXLOCAL][MKI_MAXCH]    {address, tag}: zero copy
 *     CH_DONE   done[MKI_MAXLOCAL][MKI_MAXCH]    zero copy: sender finished
 *     CH_OWED   owed[2][nranks][MKI_MAXCH]       the credit each peer still
 *                                                owes a channel's slots
 *     then      sent[2][nranks][MKI_NB_CH][MKI_NSLOTS]  across nodes: the
 *                                                target each slot last carried
 *     then      go[MKI_MAXCH]                    staggered all-reduce: channel
 *                                                c of the first half has sent
 *   slot block (device): slots[2][nlocal][MKI_MAXCH][MKI_NSLOTS] of
 *     slot_bytes, indexed by the sender's local index
 *   net block (host memory, region 1 of the transport; several nodes):
 *     0         credit[2][nranks][nbch]          from remote receivers
 *     NB_ARRIVE arrive[2][nranks][nbch][MKI_NSLOTS]  from remote senders
 *     NB_SLOTS  slots[2][2 nranks][nbch][MKI_NSLOTS] of stride bytes:
 *               index q < nranks receives from rank q, nranks + q stages
 *               what goes to rank q
 *
 * Phase 0 and 1 are two independent sets (all-reduce's reduced blocks
 * travel in phase 1).  A remote chunk lands out of order (several
 * connections, SRD), hence one arrive counter per slot: the sender waits
 * for the credit of the chunk NSLOTS before, so each counter grows in
 * order.  Local peers are indexed by local index, remote peers by
 * communicator rank: no table here depends on the number of ranks but
 * owed[] and the net block, which grow with it.
 */
#ifndef MKI_CHANNEL_H
#define MKI_CHANNEL_H

#include <stdint.h>

#include "rt.h"

#define MKI_MAXCH 64          /* channels (CTAs) of one operation, at most */
#define MKI_NSLOTS 4          /* pipeline depth of each (peer, channel) */
#define MKI_SLOT_MAX (1u << 20)
#define MKI_SLOT_ALIGN 4096
/* Channels across nodes: few, with large slots.  Every chunk is a command
 * to the proxy and frames on a socket or a NIC; the proxy moved 1 MiB chunks
 * on 4 channels at 1.2-1.5x the rate of 128 KiB chunks on 32 (socket
 * transport, 2 ranks, bench/NOTES.md, eighteenth session). */
#define MKI_NB_CH 4
#define MKI_NB_TARGET (128ull << 20) /* net block slot bytes, about */
#define MKI_NB_MINSLOT (16u << 10)   /* fewer channels before smaller slots */

/* Target of chunk k of operation number e (e >= 1). */
MKI_HD uint64_t mki_sig_target(uint64_t e, uint64_t k)
{
    return (e << 32) | ((k + 1) & 0xffffffffull);
}

/* Split `bytes` among nch channels in 16-byte units: channel c gets
 * [*off, *off + *len). */
MKI_HD void mki_chan_part(uint64_t bytes, int nch, int c, uint64_t *off,
                          uint64_t *len)
{
    uint64_t units = (bytes + 15) / 16;
    uint64_t per = (units + (uint64_t)nch - 1) / (uint64_t)nch * 16;
    uint64_t o = per * (uint64_t)c;
    *off = o < bytes ? o : bytes;
    *len = o < bytes ? (bytes - o < per ? bytes - o : per) : 0;
}

MKI_HD uint64_t mki_nchunks(uint64_t len, uint64_t chunk)
{
    return (len + chunk - 1) / chunk;
}

/* Elements of rank r's block when count elements are split among n ranks
 * for all-reduce (blocks of a multiple of 8 elements, the last shorter). */
MKI_HD void mki_ar_block(uint64_t count, int n, int r, uint64_t *first,
                         uint64_t *elems)
{
    uint64_t q = (count + (uint64_t)n - 1) / (uint64_t)n;
    q = (q + 7) / 8 * 8;
    uint64_t f = q * (uint64_t)r;
    *first = f < count ? f : count;
    *elems = f < count ? (count - f < q ? count - f : q) : 0;
}

/* ---- the channel block -------------------------------------------------- */

#define MKI_CH_SEQ 0
#define MKI_CH_ARRIVE (8ull * MKI_MAXCH)
#define MKI_CH_CREDIT (MKI_CH_ARRIVE + 16ull * MKI_MAXLOCAL * MKI_MAXCH)
#define MKI_CH_POST (MKI_CH_CREDIT + 16ull * MKI_MAXLOCAL * MKI_MAXCH)
#define MKI_CH_DONE (MKI_CH_POST + 16ull * MKI_MAXLOCAL * MKI_MAXCH)
#define MKI_CH_OWED (MKI_CH_DONE + 8ull * MKI_MAXLOCAL * MKI_MAXCH)

MKI_HD uint64_t mki_ch_seq(int ch) { return MKI_CH_SEQ + 8ull * (uint64_t)ch; }
/* 8 * ((phase * MAXLOCAL + l) * MAXCH + ch) past a counter array's start */
MKI_HD uint64_t mki_ch_index(int phase, int l, int ch)
{
    return 8ull * (((uint64_t)phase * MKI_MAXLOCAL + (uint64_t)l) * MKI_MAXCH + (uint64_t)ch);
}
/* Chunks from local sender l arrived (written by l). */
MKI_HD uint64_t mki_ch_arrive(int phase, int l, int ch) { return MKI_CH_ARRIVE + mki_ch_index(phase, l, ch); }
/* Chunks local receiver l consumed of mine (written by l). */
MKI_HD uint64_t mki_ch_credit(int phase, int l, int ch) { return MKI_CH_CREDIT + mki_ch_index(phase, l, ch); }
/* Zero copy: receiver l's post {address, tag} for channel ch. */
MKI_HD uint64_t mki_ch_post(int l, int ch) { return MKI_CH_POST + 2 * mki_ch_index(0, l, ch); }
/* Zero copy: sender l's part of channel ch is in place. */
MKI_HD uint64_t mki_ch_done(int l, int ch) { return MKI_CH_DONE + mki_ch_index(0, l, ch); }
/* The credit that the last operation of channel ch which sent through
 * rank q's phase slots waits for (stored at its end; the next one that
 * uses those slots waits for it first, so no call ends on that wait). */
MKI_HD uint64_t mki_ch_owed(int phase, int q, int nranks, int ch)
{
    return MKI_CH_OWED + 8ull * (((uint64_t)phase * (uint64_t)nranks + (uint64_t)q) * MKI_MAXCH + (uint64_t)ch);
}
/* Across nodes, chunk k of operation e goes to slot (e + k) % MKI_NSLOTS,
 * so that consecutive small calls take different slots and the next one
 * waits for the credit of the chunk MKI_NSLOTS sends before, not for the
 * last call's (a credit's round trip through the proxies is ~12 us).
 * sent[phase][q][ch][slot]: the target that slot last carried to rank q
 * (0: none yet); channels across nodes are fewer than MKI_NB_CH. */
MKI_HD uint64_t mki_ch_sent(int phase, int q, int nranks, int ch, int slot)
{
    return MKI_CH_OWED + 16ull * (uint64_t)nranks * MKI_MAXCH +
           8ull * ((((uint64_t)phase * (uint64_t)nranks + (uint64_t)q) * MKI_NB_CH + (uint64_t)ch) *
                       MKI_NSLOTS + (uint64_t)slot);
}
/* Two-phase all-reduce with half of the channels a phase behind
 * (mki_coll_params.stagger): channel c of the first half sets go[c] once
 * its phase-0 chunks are issued; channel c + half waits for it (bounded)
 * and clears it.  A hint, never a dependence: a late or stale go only
 * moves when the second half starts. */
MKI_HD uint64_t mki_ch_go(int nranks, int ch)
{
    return mki_ch_sent(2, 0, nranks, 0, 0) + 8ull * (uint64_t)ch;
}
MKI_HD uint64_t mki_ch_block_bytes(int nranks)
{
    return mki_ch_go(nranks, MKI_MAXCH);
}

/* ---- the slot block ----------------------------------------------------- */

/* Slot `slot` of channel ch that receives from local sender l. */
MKI_HD uint64_t mki_ch_slot(int phase, int l, int ch, int slot, int nlocal, uint64_t slot_bytes)
{
    uint64_t i = (((uint64_t)phase * (uint64_t)nlocal + (uint64_t)l) * MKI_MAXCH + (uint64_t)ch) *
                     MKI_NSLOTS + (uint64_t)slot;
    return i * slot_bytes;
}
/* Slot bytes of a slot block of `bytes` for nlocal ranks: at most
 * MKI_SLOT_MAX, 4 KiB aligned; 0 when the block is too small. */
MKI_HD uint64_t mki_ch_slot_bytes(uint64_t bytes, int nlocal)
{
    if (nlocal < 1) return 0;
    uint64_t n = 2ull * (uint64_t)nlocal * MKI_MAXCH * MKI_NSLOTS;
    uint64_t s = bytes / n / MKI_SLOT_ALIGN * MKI_SLOT_ALIGN;
    return s > MKI_SLOT_MAX ? MKI_SLOT_MAX : s;
}

/* ---- the LL block: small blocks with the flag in every word --------------
 *
 * Below a few KiB per channel a call is latency: a chunk through the
 * slots costs a system fence (a round trip over NVLink) before its arrive
 * counter, and the next call's first chunk waits for the credit (another
 * one).  An LL transfer instead stores each 8 payload bytes as a 16-byte
 * line of two 64-bit words {4 data bytes, 4 flag bytes} (each word is
 * written and read at once), so the receiver polls the data itself: no
 * fence, no counter.  The receiver zeroes every line it read and then
 * acknowledges the call; a sender reuses one of two buffers (by the
 * parity of the operation number) only after the receiver acknowledged
 * the call that last wrote it, two calls back in a stream of small calls.
 *
 *   LL block (device, one node only):
 *     0          ack[MKI_MAXLOCAL][MKI_LL_MAXCH]  the last LL operation
 *                                                 receiver l finished of
 *                                                 mine (written by l)
 *     LL_LAST    last[2][MKI_MAXLOCAL][MKI_LL_MAXCH] the operation that last
 *                                                 wrote buffer (parity,
 *                                                 receiver l) (mine)
 *     LL_BUFS    bufs[2][nlocal][MKI_LL_MAXCH] of MKI_LL_PART * 2 bytes,
 *                indexed by the sender's local index
 */
#define MKI_LL_MAXCH 64                /* channels of an LL call, at most */
#define MKI_LL_PART (4u << 10)         /* payload bytes of a channel's part,
                                        * at most (its buffer) */
#define MKI_LL_PART_FAST (2u << 10)    /* ... one line per thread of a
                                        * 256-thread role: the plan's cut
                                        * while there are channels */
#define MKI_LL_LAST (8ull * MKI_MAXLOCAL * MKI_LL_MAXCH)
#define MKI_LL_BUFS 16384ull

MKI_HD uint64_t mki_ll_ack(int l, int ch)
{
    return 8ull * ((uint64_t)l * MKI_LL_MAXCH + (uint64_t)ch);
}
MKI_HD uint64_t mki_ll_last(int parity, int l, int ch)
{
    return MKI_LL_LAST + 8ull * (((uint64_t)parity * MKI_MAXLOCAL + (uint64_t)l) * MKI_LL_MAXCH +
                                 (uint64_t)ch);
}
/* Lines of channel ch from local sender l in buffer `parity`. */
MKI_HD uint64_t mki_ll_buf(int parity, int l, int ch, int nlocal)
{
    return MKI_LL_BUFS + (((uint64_t)parity * (uint64_t)nlocal + (uint64_t)l) * MKI_LL_MAXCH +
                          (uint64_t)ch) * (2ull * MKI_LL_PART);
}
MKI_HD uint64_t mki_ll_block_bytes(int nlocal)
{
    return mki_ll_buf(2, 0, 0, nlocal);
}

/* ---- the net block -------------------------------------------------------- */

struct mki_nb_geom {
    int32_t nranks, nbch;   /* ranks of the communicator, channels */
    uint64_t stride;        /* bytes of one slot */
    uint64_t arrive, slots; /* offsets of the arrays */
    uint64_t bytes;         /* the whole block */
};

/* The net block of a communicator of nranks ranks: MKI_NB_CH channels, or
 * as many as keep slots of at least MKI_NB_MINSLOT within about
 * MKI_NB_TARGET bytes (1 at least); slots as large as the block allows,
 * 4 KiB aligned, at most MKI_SLOT_MAX (1 MiB at 2 ranks).  The same on
 * every rank. */
MKI_HD struct mki_nb_geom mki_nb_geometry(int nranks)
{
    struct mki_nb_geom g;
    uint64_t per_ch = 4ull * (uint64_t)nranks * MKI_NSLOTS; /* slots per channel */
    uint64_t ch = MKI_NB_TARGET / (per_ch * MKI_NB_MINSLOT);
    g.nranks = nranks;
    g.nbch = ch < 1 ? 1 : ch > MKI_NB_CH ? MKI_NB_CH : (int32_t)ch;
    uint64_t s = MKI_NB_TARGET / (per_ch * (uint64_t)g.nbch) / MKI_SLOT_ALIGN * MKI_SLOT_ALIGN;
    g.stride = s < MKI_SLOT_ALIGN ? MKI_SLOT_ALIGN : s > MKI_SLOT_MAX ? MKI_SLOT_MAX : s;
    g.arrive = 16ull * (uint64_t)nranks * (uint64_t)g.nbch;
    g.slots = g.arrive + 16ull * (uint64_t)nranks * (uint64_t)g.nbch * MKI_NSLOTS;
    g.slots = (g.slots + MKI_SLOT_ALIGN - 1) / MKI_SLOT_ALIGN * MKI_SLOT_ALIGN;
    g.bytes = g.slots + per_ch * (uint64_t)g.nbch * g.stride;
    return g;
}
/* Credit of (phase, remote receiver q, ch). */
MKI_HD uint64_t mki_nb_credit(const struct mki_nb_geom *g, int phase, int q, int ch)
{
    return 8ull * (((uint64_t)phase * (uint64_t)g->nranks + (uint64_t)q) * (uint64_t)g->nbch + (uint64_t)ch);
}
/* Arrive counter of (phase, remote sender q, ch, slot). */
MKI_HD uint64_t mki_nb_arrive(const struct mki_nb_geom *g, int phase, int q, int ch, int slot)
{
    return g->arrive + 8ull * ((((uint64_t)phase * (uint64_t)g->nranks + (uint64_t)q) * (uint64_t)g->nbch +
                                (uint64_t)ch) * MKI_NSLOTS + (uint64_t)slot);
}
/* Slot idx (q: receives from q; nranks + q: stages for q). */
MKI_HD uint64_t mki_nb_slot(const struct mki_nb_geom *g, int phase, int idx, int ch, int slot)
{
    uint64_t i = ((((uint64_t)phase * 2ull * (uint64_t)g->nranks + (uint64_t)idx) * (uint64_t)g->nbch +
                   (uint64_t)ch) * MKI_NSLOTS + (uint64_t)slot);
    return g->slots + i * g->stride;
}

/* The channels of one call as a kernel sees them (part of its
 * parameters). */
struct mki_chan_dev {
    char *ctl[MKI_MAXLOCAL];    /* channel block of local index l, mapped here */
    char *slots[MKI_MAXLOCAL];  /* slot block of local index l, mapped here */
    uint64_t slot_bytes;        /* chunk (and local slot) bytes of this call */
    char *nb;                   /* my net block, device view (several nodes) */
    uint64_t nb_off;            /* its offset in the transport's region 1 */
    struct mki_nb_geom nbg;
};

#endif /* MKI_CHANNEL_H */
