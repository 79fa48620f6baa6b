/*
 * coll.c - the plan of the plain collectives (kernels/ops/coll.cu): CTAs,
 * mover, one or two phases, zero copy, chunk and the threads of each
 * role, from measured rules rather than the cost model (the model's
 * per-CTA rates describe the fused kernels' roles, not the slot
 * pipeline; bench/NOTES.md has the runs).  The same inputs give the same
 * answer on every rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "mki.h"
#include "plan/plan.h"
#include "mem/mem.h"

/* ---- the plain collectives (measured rules) ------------------------ */

/* Bytes of a peer block per CTA below the wide regime: small calls are
 * latency-bound, so more CTAs pay even at 16 KB each (1 MB per rank,
 * 16 -> 32 CTAs: reduce-scatter 21.3 -> 19.6 us; bench/NOTES.md). */
#define COLL_BYTES_PER_CTA (16u << 10)
#define COLL_NARROW_MAXCH 32
/* From this many bytes per peer block, on one node, a collective takes
 * every CTA it may (MKI_MAXCH = 64): a CTA moves about 8 GB/s through the
 * workspace, so the bandwidth grows with the count up to 64 (4 H200, 1 GB
 * per rank: all-gather 193 / 222 / 258 / 265 / 292 GB/s at 16 / 24 / 32 /
 * 48 / 64 CTAs; 2 H200: all-reduce 299 -> 342 GB/s). */
#define COLL_WIDE_MIN (4u << 20)
/* One-phase all-reduce from 1 MiB (2 H200, 1 MB: 18.7-18.8 us on 64 CTAs
 * against 18.9-19.1 on 32, three runs each). */
#define COLL_WIDE_MIN_ONESHOT (1u << 20)
/* All-gather, reduce-scatter and all-to-all on one node of more than 2
 * ranks from 2 MiB (4 H200, 2 MB per block, 64 CTAs against 32, two
 * rounds in turns: all-gather 47-49 against 52 us, reduce-scatter 41
 * against 46-47, all-to-all 43-48 against 52-53; at 1 MB, 48 CTAs were
 * 1-6% slower than 32; bench/NOTES.md, thirty-third session).  The
 * two-phase all-reduce keeps COLL_WIDE_MIN (not measured). */
#define COLL_WIDE_MIN_MANY (2u << 20)

int mki_plan_coll_ctas(enum mki_op op, uint64_t block, int oneshot, int nranks, int nnodes,
                       int budget)
{
    if (budget < 1) budget = 1;
    const uint64_t wide = oneshot ? COLL_WIDE_MIN_ONESHOT
                        : nranks > 2 && op != MKI_OP_ALLREDUCE ? COLL_WIDE_MIN_MANY
                        : COLL_WIDE_MIN;
    /* across nodes at most the net block's channels (its maxch), each a
     * stream of large chunks through the proxy */
    if (nnodes == 1 && block >= wide)
        return budget;
    int cap = budget < COLL_NARROW_MAXCH ? budget : COLL_NARROW_MAXCH;
    uint64_t n = (block + COLL_BYTES_PER_CTA - 1) / COLL_BYTES_PER_CTA;
    if (n < 1) n = 1;
    return n < (uint64_t)cap ? (int)n : cap;
}

/* One-phase all-reduce up to limit bytes at 2 ranks (MK_COLL_AR_ONESHOT),
 * limit x 2 / n at n ranks: it sends (n - 1) x S where two phases send
 * 2 (n - 1) / n x S, n / 2 times the bytes (8 H200, 4 MB: 194 us one phase
 * against 111 us in two; 1 MB: 104 against 97; 256 KB: 62 against 93). */
int mki_plan_coll_oneshot(uint64_t bytes, uint64_t limit, int nranks)
{
    if (limit == 0 || nranks < 2) return 0;
    if (nranks > 2) limit = limit / (uint64_t)nranks * 2;
    return bytes <= limit;
}

/* Register stores for zero copy (4 H200, 1 GB per rank: 312 GB/s against
 * 281 with TMA; 2 H200, 16 CTAs: 311 against 259) and below COLL_WIDE_MIN
 * per block (a chunk's bulk copies end with a wait for their completion
 * that register stores and a fence do not pay: 2 H200, 1 MB per rank,
 * all-reduce 20.3 -> 19.0 us, all-to-all 19.9 -> 17.9 us); TMA bulk copies
 * to the peers otherwise (256 MB, 64 CTAs: 333 against 317 GB/s).  An
 * all-gather or all-to-all through the slots of more than 2 ranks of one
 * node below COLL_TMA_RECV_MAX per block also copies what arrives by TMA
 * (RECV drains several peers' slots at once, and its register copies bound
 * the call at mid sizes).  4 H200, three rounds in turns, per call:
 * all-gather 4 / 8 / 16 / 32 MB -3 / -17 / -5 / -4%, all-to-all -7 / -12 /
 * -2 / 0%, level at 64-128 MB, +1.5% at 256 MB and 1 GB (so not there);
 * bench/NOTES.md, thirty-third session. */
#define COLL_TMA_RECV_MAX (128ull << 20)
enum mki_coll_mover mki_plan_coll_mover(enum mki_op op, uint64_t block, int zero_copy,
                                        int nranks, int nnodes)
{
    if (zero_copy || block < COLL_WIDE_MIN) return MKI_COLL_MOVER_REG;
    if (nnodes == 1 && nranks > 2 && block < COLL_TMA_RECV_MAX &&
        (op == MKI_OP_ALLGATHER || op == MKI_OP_ALLTOALL))
        return MKI_COLL_MOVER_TMA;
    return MKI_COLL_MOVER_TMA_SEND;
}


/* Bytes of one peer block: the whole buffer, except for all-reduce in two
 * phases (a rank's block of the sum). */
static uint64_t block_bytes(const struct mki_coll_in *in, int oneshot)
{
    if (in->op != MKI_OP_ALLREDUCE || oneshot) return in->count * (uint64_t)in->esize;
    uint64_t first, elems;
    mki_ar_block(in->count, in->nranks, 0, &first, &elems);
    return elems * (uint64_t)in->esize;
}

/* Zero copy (kernels/ops/coll.cu): all-gather, all-to-all, and all-reduce
 * in two phases with register stores (REDUCE pushes the reduced blocks
 * into the peers' recvbufs; on 2 H200 at 64 MB - 1 GB it measured 232-284
 * GB/s against 257-300 for TMA through the slots, so only when
 * MK_COLL_MOVER=reg asks), on one node, when the communicator has
 * registered buffers (collective calls: every rank counts the same) and a
 * block is at least MK_COLL_ZCOPY_MIN. */
static int zero_copy(const struct mki_coll_in *in, int oneshot, int mover, uint64_t block)
{
    if (in->op == MKI_OP_REDUCESCATTER || oneshot || in->nnodes != 1 || !in->registered)
        return 0;
    if (in->op == MKI_OP_ALLREDUCE && mover != MKI_COLL_MOVER_REG) return 0;
    return in->zcopy_min > 0 && block >= in->zcopy_min;
}

/* The threads of each role, in the order of the kernel (ops/coll.h). */
static struct mki_roles coll_roles(enum mki_op op, int mover, int oneshot, int direct,
                                   int nranks)
{
    /* SEND: one warp issuing TMA bulk copies, or half the CTA with
     * register stores; zero copy leaves RECV only the own block to copy:
     * with 3 or more peers in flight SEND takes 384 threads (4 H200: 312
     * -> 320 GB/s at 1 GB); with one peer 256 stay better (2 H200: 316 vs
     * 279). */
    const int send = mover != MKI_COLL_MOVER_REG ? 32 : direct && nranks > 2 ? 384 : 256;
    struct mki_roles r = {2, {send, MKI_COLL_THREADS, 0, 0}};
    if (op == MKI_OP_ALLREDUCE && !oneshot) {
        /* TMA: SEND 1 warp, SEND2 1 warp, REDUCE 10, RECV 4; registers:
         * SEND 6 warps, REDUCE 6 (pushing the results), RECV 4 */
        const struct mki_roles tma = {4, {32, 64, 384, MKI_COLL_THREADS}};
        const struct mki_roles reg = {3, {192, 384, MKI_COLL_THREADS, 0}};
        r = mover != MKI_COLL_MOVER_REG ? tma : reg;
    }
    return r;
}

/* Hierarchical all-reduce: each rank's bytes that cross the network fall
 * from 2 (P - L) / P x S (the flat two phases: every block to its owner,
 * then the owners' sums back) to 2 (N - 1) / N x S / L (its share, between
 * the N ranks of its local index), half at 2 x 2; the price is two more
 * kernels inside the node (~20 us each at small sizes).  All-gather and
 * reduce-scatter (S: the whole buffer, P blocks): from (P - L) / P x S to
 * (N - 1) / P x S, for two more steps inside the node (a call and a
 * strided copy).  1 MiB by default:
 * predicted, not yet measured (socket path ~3 GB/s: the saved bytes pay
 * from ~64 KiB; RDMA at ~25-50 GB/s per rank from ~1-4 MiB). */
int mki_plan_coll_hier(enum mki_op op, uint64_t count, int esize, int nranks, int nnodes,
                       int local_size, uint64_t hier_min)
{
    if (nnodes < 2 || local_size < 2 || hier_min == 0 ||
        (uint64_t)nnodes * (uint64_t)local_size != (uint64_t)nranks)
        return 0;
    if (op == MKI_OP_ALLREDUCE)
        return count * (uint64_t)esize >= hier_min && count >= (uint64_t)local_size;
    /* a rank's block: the whole buffer is nranks of them */
    if (op == MKI_OP_ALLGATHER || op == MKI_OP_REDUCESCATTER)
        return count > 0 && count * (uint64_t)esize * (uint64_t)nranks >= hier_min;
    return 0;
}

/* LL (kernels/rt/channel.h) for blocks up to ll_max bytes, on one node of
 * several ranks: all-gather, reduce-scatter, all-to-all, and all-reduce in
 * one phase; one channel per MKI_LL_PART_FAST bytes of the block (a line
 * per thread: one round of loads), fewer where the CTAs run out (at most
 * MKI_LL_MAXCH) as long as no part exceeds MKI_LL_PART.  Returns the
 * channels, 0 for no LL. */
int mki_plan_coll_ll(enum mki_op op, int oneshot, uint64_t block, int nnodes, int nranks,
                     uint64_t ll_max, int cap)
{
    if (ll_max == 0 || nnodes != 1 || nranks < 2 || block > ll_max) return 0;
    if (op == MKI_OP_ALLREDUCE && !oneshot) return 0;
    if (cap > MKI_LL_MAXCH) cap = MKI_LL_MAXCH;
    if (cap < 1) return 0;
    const uint64_t want = block == 0 ? 1 : (block + MKI_LL_PART_FAST - 1) / MKI_LL_PART_FAST;
    const int nch = want <= (uint64_t)cap ? (int)want : cap;
    return (uint64_t)nch * MKI_LL_PART >= block ? nch : 0;
}

/* Chunks of the largest channel part of a block (channel 0's). */
static uint64_t part_chunks(const struct mki_coll_plan *out)
{
    uint64_t off, part;
    mki_chan_part(out->block, out->nch, 0, &off, &part);
    return mki_nchunks(part, out->chunk);
}

void mki_plan_coll_model(const struct mki_coll_in *in, struct mki_coll_plan *out)
{
    memset(out, 0, sizeof(*out));
    out->hier = mki_plan_coll_hier(in->op, in->count, in->esize, in->nranks, in->nnodes,
                                   in->local_size, in->hier_min);
    const uint64_t bytes = in->count * (uint64_t)in->esize;
    out->oneshot = in->op == MKI_OP_ALLREDUCE &&
                   mki_plan_coll_oneshot(bytes, in->oneshot_limit, in->nranks);
    out->block = block_bytes(in, out->oneshot);
    int mover = in->mover >= 0 ? in->mover : MKI_COLL_MOVER_TMA_SEND;
    out->direct = zero_copy(in, out->oneshot, mover, out->block);
    if (in->mover < 0)
        mover = mki_plan_coll_mover(in->op, out->block, out->direct, in->nranks, in->nnodes);
    /* Register stores push all-reduce results straight into peers'
     * slots, which a remote rank does not have: TMA (SEND2) there. */
    if (in->nnodes > 1 && in->op == MKI_OP_ALLREDUCE && !out->oneshot &&
        mover == MKI_COLL_MOVER_REG)
        mover = MKI_COLL_MOVER_TMA_SEND;
    out->mover = mover;
    int cap = in->budget < MKI_MAXCH ? in->budget : MKI_MAXCH;
    if (in->maxch > 0 && cap > in->maxch) cap = in->maxch;
    if (cap < 1) cap = 1;
    out->nch = in->ctas > 0 ? (in->ctas < cap ? in->ctas : cap)
                            : mki_plan_coll_ctas(in->op, out->block, out->oneshot, in->nranks,
                                                 in->nnodes, cap);
    out->chunk = in->slot_bytes;
    out->roles = coll_roles(in->op, mover, out->oneshot, out->direct, in->nranks);
    const int ll = mki_plan_coll_ll(in->op, out->oneshot, out->block, in->nnodes, in->nranks,
                                    in->ll_max, cap);
    if (ll > 0) {
        /* SEND writes lines, RECV or REDUCE polls them: half the CTA each */
        const struct mki_roles r = {2, {MKI_COLL_THREADS / 2, MKI_COLL_THREADS, 0, 0}};
        out->ll = 1;
        out->direct = 0;
        out->mover = MKI_COLL_MOVER_REG;
        /* MK_COLL_CTAS may add channels, up to what the call may use
         * and the LL block has (fewer would overfill the parts) */
        int nch = ll;
        if (in->ctas > nch) nch = in->ctas;
        if (nch > cap) nch = cap;
        if (nch > MKI_LL_MAXCH) nch = MKI_LL_MAXCH;
        out->nch = nch;
        out->chunk = MKI_LL_PART;
        out->roles = r;
    }
    /* Copies through the slots by TMA on one node go peer after peer: one
     * destination per GPU at a time (4 H200, all-gather 64 MB - 1 GB:
     * +7-11%, bench/NOTES.md); register stores batch their signals over
     * the peers of a chunk, and a reduction needs every source's chunk at
     * once, so they stay chunk after chunk. */
    out->peer_major = !out->ll && !out->direct && out->mover != MKI_COLL_MOVER_REG &&
                      in->nnodes == 1 && in->nranks > 2 &&
                      (in->op == MKI_OP_ALLGATHER || in->op == MKI_OP_ALLTOALL);
    /* The reductions too, where every channel's part of a block is a few
     * chunks (never more than MKI_NSLOTS: a sum needs every peer's chunk,
     * so peer after peer is deadlock-free only while no send waits for a
     * credit of the same call; kernels/ops/coll.cu): the two-phase
     * all-reduce up to MKI_NSLOTS chunks (4 H100: 16 / 64 / 256 MB -1 to
     * -3% / -2% / -6 to -11%; 1 GB, 16 chunks in groups of 4: level),
     * reduce-scatter at one (16 MB -8 to -15%; 64 MB, 4 chunks: +6 to
     * +20%, the sums no longer overlap the sends); bench/NOTES.md,
     * twenty-second session. */
    if (!out->ll && !out->direct && out->mover != MKI_COLL_MOVER_REG && in->nnodes == 1 &&
        in->nranks > 2 && out->chunk > 0 &&
        ((in->op == MKI_OP_ALLREDUCE && !out->oneshot) || in->op == MKI_OP_REDUCESCATTER))
        out->peer_major = part_chunks(out) <= (in->op == MKI_OP_ALLREDUCE ? MKI_NSLOTS : 1);
    /* TMA chunks to the node's peers signalled once the next chunk's first
     * piece is stored instead of after a drain (4 H100: all-reduce 16 / 64
     * MB -10 to -17% / -8%, reduce-scatter 4 MB -14%; 2 ranks all-reduce
     * 4-16 MB -4 to -10%).  Not for the copies peer after peer (all-gather
     * and all-to-all at 64 MB took 0.87 ms instead of 0.63 in most runs)
     * nor for reduce-scatter on 2 ranks (+2% at 256 MB - 1 GB); across
     * nodes not measured: off (bench/NOTES.md, twentieth session). */
    out->pipelined = !out->ll && !out->direct && out->mover != MKI_COLL_MOVER_REG &&
                     in->nnodes == 1 &&
                     ((in->op == MKI_OP_ALLREDUCE && !out->oneshot) ||
                      (in->op == MKI_OP_REDUCESCATTER && in->nranks > 2));
    /* Where every channel's part is one chunk, the two-phase all-reduce's
     * channels all send, then all sum, then all send again: the links idle
     * while every channel sums.  With half of them a phase behind, one
     * half's sums and second phase overlap the other's sends.  At 2 ranks
     * (one destination) that pays: 2 H100, 8 / 16 / 32 MB -5 to -7% / -9 to
     * -10% / -12%; with 2 chunks per part (64 MB) +7 to +11%, the chunks
     * already overlap; at 4 ranks a half alone moves 75% of what all the
     * channels move and the stagger loses (16 MB +5%); bench/NOTES.md,
     * twenty-second session. */
    if (in->op == MKI_OP_ALLREDUCE && !out->oneshot && !out->ll && in->nnodes == 1 &&
        in->nranks == 2 && out->mover != MKI_COLL_MOVER_REG && out->nch >= 2 && out->chunk > 0)
        out->stagger = part_chunks(out) == 1;
}

/* Heap bytes of the first segment that the collectives leave to the other
 * blocks (control, rank table, channel counters, the fused ops' control). */
#define COLL_HEAP_RESERVE (1ull << 20)

void mki_plan_coll_slots(const struct mki_plan_ctx *c, uint64_t *slot_bytes, int *net_ch)
{
    /* The largest node sizes it, so that every rank chunks alike. */
    const uint64_t heap = c->workspace;
    *slot_bytes = heap > COLL_HEAP_RESERVE
                      ? mki_ch_slot_bytes(heap - COLL_HEAP_RESERVE, c->local_size) : 0;
    *net_ch = MKI_MAXCH;
    if (c->nnodes > 1) {
        const struct mki_nb_geom g = mki_nb_geometry(c->nranks);
        *net_ch = g.nbch;
        if (*slot_bytes > g.stride) *slot_bytes = g.stride;
    }
}

mkResult_t mki_plan_coll_ctx(const struct mki_plan_ctx *c, const struct mki_params *pr,
                             int mover, int registered, enum mki_op op, uint64_t count,
                             int esize, struct mki_coll_plan *out)
{
    struct mki_coll_in in;
    memset(&in, 0, sizeof(in));
    in.op = op;
    in.count = count;
    in.esize = esize;
    in.nranks = c->nranks;
    in.nnodes = c->nnodes;
    in.local_size = c->local_size;
    in.budget = c->sm_budget;
    mki_plan_coll_slots(c, &in.slot_bytes, &in.maxch);
    in.registered = registered;
    in.ctas = (int)mki_params_int(pr, MKI_P_COLL_CTAS);
    in.mover = mover;
    in.oneshot_limit = (uint64_t)mki_params_int(pr, MKI_P_COLL_AR_ONESHOT);
    in.zcopy_min = (uint64_t)mki_params_int(pr, MKI_P_COLL_ZCOPY_MIN);
    in.hier_min = (uint64_t)mki_params_int(pr, MKI_P_COLL_HIER_MIN);
    in.ll_max = (uint64_t)mki_params_int(pr, MKI_P_COLL_LL_MAX);
    mki_plan_coll_model(&in, out);
    if (out->chunk == 0)
        return mki_error(NULL, mkErrUnsupported, "%s: the symmetric heap (MK_WORKSPACE_SIZE) "
                         "is too small for the slots of %d ranks per node; raise "
                         "MK_WORKSPACE_SIZE", mki_op_api_name(op), c->local_size);
    return mkSuccess;
}

mkResult_t mki_plan_coll(struct mkComm *comm, enum mki_op op, uint64_t count, int esize,
                         struct mki_coll_plan *out)
{
    const struct mki_plan *pl = comm->plan;
    mkResult_t r = mki_plan_coll_ctx(&pl->ctx, &comm->params, pl->coll_mover,
                                     comm->dev && comm->dev->nregs > 0, op, count, esize, out);
    if (r != mkSuccess) mki_error_quiet(comm, "%s", mki_thread_error());
    return r;
}

/* MK_COLL_MOVER, checked once: a typo must not silently measure another
 * mover. */
mkResult_t mki_plan_coll_mover_param(const char *v, int set, int *mover)
{
    *mover = -1;
    if (!set) return mkSuccess;
    if (!strcmp(v, "reg")) *mover = MKI_COLL_MOVER_REG;
    else if (!strcmp(v, "tma")) *mover = MKI_COLL_MOVER_TMA;
    else if (!strcmp(v, "tma-send")) *mover = MKI_COLL_MOVER_TMA_SEND;
    else
        return mki_error(NULL, mkErrInvalidArgument, "MK_COLL_MOVER=%s; use tma-send, tma "
                         "or reg", v);
    return mkSuccess;
}
