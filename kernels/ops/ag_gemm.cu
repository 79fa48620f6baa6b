/*
 * ag_gemm.cu - the device side of mkAllGatherGemm: the GEMM engine with
 * hooks that put this rank's rows first, make the producer wait for the
 * chunk signal of rows that come from a peer, and run the call's gate and
 * epoch bookkeeping (protocol: kernels/ops/ag_gemm.h).
 *
 *   every CTA            e = calls + 1 (shared memory)
 *   CTA 0, warp 1        the gate: cur = e; for each peer q, previous
 *   of the producer      ranks first: wait q.released >= e - 1, then
 *   warpgroup (idle      go[q][*] = 1 (the side streams' copies start)
 *   in the mainloop)
 *   producer thread      before a tile's first k-block, each chunk of
 *                        peer rows it needs: its flag raised (own rows:
 *                        none)
 *   consumers            the GEMM; thread 128 after the tiles: CTA 0
 *                        waits for every chunk of every peer; a failure
 *                        noted by the producer or the gate goes to fail()
 *   last CTA out         clears the call's flags, calls = e, released = e
 *                        (unless the gathered A is still to be copied
 *                        out: then a kernel after that copy releases)
 *
 * The all-gather inside the node uses no SM: the copy engines move the
 * chunks.  Across nodes the last nnet CTAs move the other nodes' rows
 * through the collectives' net channels (ag_gemm.h) and the others
 * compute:
 *
 *   net CTA c            (the last CTAs of the grid)
 *                        SEND: my rows' chunks on channel c to every rank
 *                        of another node; RECV: theirs from the net block
 *                        into the bank, then rsig[q][c]
 *   producer thread      also waits for rsig of the remote rows it needs
 *
 * Every wait has a deadline and watches the abort word
 * (kernels/rt/wait.cuh).
 *
 * Built with -DMKI_AGG_TRACE (a lab build; nothing of it otherwise), the
 * kernel prints globaltimer stamps of calls e % 20 == 10: each net CTA's
 * chunk arrivals, copy ends, credits and pushes, and the tile starts of
 * three compute CTAs (lines "AGGT ...").
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm/gemm_launch.h"
#include "ops/ag_gemm.h"
#include "rt/channel.cuh"
#include "rt/wait.cuh"

using namespace mki;
using namespace mki::gemm;

namespace {

static_assert(MKI_AGG_TILE_ROWS == BM, "ops/ag_gemm.h: tile rows");

/* This CTA's call and the first failure it noted (the producer and the
 * gate run on 40 registers: they only note; a consumer thread reports). */
struct AggCta {
    uint64_t e;
    cta_note note;
    uint64_t ne;       /* a net CTA's operation number on its channel */
#ifdef MKI_AGG_TRACE
    /* lab: globaltimer stamps of one call (net CTAs: RECV's arrival and
     * copy end per chunk in [0, 32), SEND's credit and push in [32, 64);
     * compute CTAs: each tile's start after its rows' wait) */
    uint64_t tt[64];
    uint32_t nt;
#endif
};
__shared__ AggCta agg;

#ifdef MKI_AGG_TRACE
__device__ __forceinline__ void trace_at(int i)
{
    if (i >= 0 && i < 64) agg.tt[i] = globaltimer();
}
#endif

struct AggHooks {
    static constexpr bool kWaitA = true;
    static constexpr bool kSignal = false;
    static constexpr bool kASrc = true;
    static constexpr bool kSideWork = true;
    CUtensorMap tm_own; /* the caller's A (m_local x K), when own_d1 > own_d0 */
    int own_lo, own_d0, own_d1;
    int nsrc, pm0, num_pm, split;
    int row_off[MKI_AGG_MAXSRC + 1]; /* by rank; 32-bit: M < 2^31, and the */
    int chunk_rows[MKI_MAXLOCAL];    /* producer runs on 40 registers */
    mki_agg_ctl *ctl;
    const mki_agg_ctl *peer_ctl[MKI_MAXLOCAL];
    int release;
    /* across nodes (nnet > 0): chunks of 1 << net_shift bytes, chunk j on
     * channel j % nnet (a power of two) */
    int nnet, nnet_shift, net_shift;
    int nnet_ctas;       /* CTAs after the compute ones (>= nnet: whole clusters) */
    uint64_t row_bytes;
    const char *net_src; /* my rows (the caller's A) */
    char *bank;          /* the gathered A (mine) */
    mki_chan_dev ch;
    mki_rt_dev rt;

    /* Spin until *addr >= target; false, with the failure noted, when the
     * CTA quits, a peer aborted or the deadline passed (q: the rank). */
    __device__ __forceinline__ bool wait(const uint64_t *addr, uint64_t target, int q, int chunk,
                                         int phase) const
    {
        return wait_noted(rt, agg.note, addr, target, q, chunk, phase);
    }

    /* A remote chunk's flag, written by this GPU's net CTAs milliseconds
     * apart: polled at GPU scope with pauses (wait.cuh's load_gpu). */
    __device__ __forceinline__ bool wait_net(const uint64_t *addr, uint64_t target, int q,
                                             int chunk) const
    {
        return wait_noted(rt, agg.note, addr, target, q, chunk, 0, pause_backoff(), load_gpu());
    }

    /* The grouped L2 order of the engine, rotated so that the first units
     * are this rank's rows, then the next rank's, and so on. */
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        TileCoord t;
        mki_gemm_unit_of(i, p.num_m_blk, p.num_n_blk, p.group_m, p.cluster_m, &t.m_blk,
                         &t.n_blk);
        int pm = t.m_blk / p.cluster_m + pm0;
        if (pm >= num_pm) pm -= num_pm;
        t.m_blk = pm * p.cluster_m;
        return t;
    }

    /* This rank's whole tiles come straight from the caller's A. */
    __device__ __forceinline__ const CUtensorMap *a_src(const GemmParams &p, int m_blk,
                                                        int *row) const
    {
        const int r0 = m_blk * BM;
        if (r0 >= own_d0 && r0 < own_d1) {
            *row = r0 - own_lo;
            return &tm_own;
        }
        *row = r0;
        return &p.tm_a;
    }

    /* Rows [r0, r1) of rank q are in the bank: the flags of their
     * chunks (q on this node: the copy engines'; on another: the net
     * CTAs', rsig). */
    __device__ __forceinline__ void wait_rows(int q, int r0, int r1) const
    {
        const int lo = row_off[q], hi = row_off[q + 1];
        if (r0 < lo) r0 = lo;
        if (r1 > hi) r1 = hi;
        if (r0 >= r1) return;
        const int l = rt.lof[q]; /* q < MKI_AGG_MAXSRC <= MKI_RT_LOF */
        if (l >= 0) {
            const unsigned cr = (unsigned)chunk_rows[l];
            const int c1 = (int)((unsigned)(r1 - 1 - lo) / cr);
            for (int c = (int)((unsigned)(r0 - lo) / cr); c <= c1; ++c)
                if (!wait(&ctl->sig[l][c], 1, q, c, 0)) return;
            return;
        }
        const unsigned j1 = (unsigned)(((uint64_t)(r1 - lo) * row_bytes - 1) >> net_shift);
        for (unsigned j = (unsigned)(((uint64_t)(r0 - lo) * row_bytes) >> net_shift); j <= j1; ++j)
            if (!wait_net(&ctl->rsig[q][j & (nnet - 1)], mki_sig_target(agg.e, j >> nnet_shift), q,
                          (int)j))
                return;
    }

    __device__ __forceinline__ void wait_a(const GemmParams &p, TileCoord t, int kb) const
    {
        if (kb != 0) return;
        const int r0 = t.m_blk * BM;
        const int r1 = r0 + BM < p.m ? r0 + BM : p.m;
        /* my own rows are in place before the kernel starts */
        for (int q = 0; q < nsrc; ++q)
            if (q != rt.rank) wait_rows(q, r0, r1);
#ifdef MKI_AGG_TRACE
        trace_at((int)agg.nt++);
#endif
    }

    /* Chunks of local rank l (one signal even for a rank with no rows). */
    __device__ __forceinline__ int nchunks(int l) const
    {
        const int q = rt.glob[l];
        const int m = row_off[q + 1] - row_off[q];
        const int n = (m + chunk_rows[l] - 1) / chunk_rows[l];
        return n < 1 ? 1 : n;
    }

    /* Every chunk of every local peer has landed (the tiles' producers
     * waited for all that hold rows; this also covers the rest, so that no
     * flag is still to come when the call clears them).  Rows from other
     * nodes need no such wait: rsig is never cleared, and the net CTAs
     * end after their last chunk. */
    __device__ __forceinline__ void wait_all() const
    {
        for (int l = 0; l < rt.nlocal; ++l) {
            if (l == rt.local) continue;
            for (int c = 0, n = nchunks(l); c < n; ++c)
                if (!wait(&ctl->sig[l][c], 1, rt.glob[l], c, 1)) return;
        }
    }

    /* The call's flags back to 0 (the last CTA out, before the release
     * lets the peers write the next call's). */
    __device__ __forceinline__ void clear_flags() const
    {
        for (int l = 0; l < rt.nlocal; ++l) {
            if (l == rt.local) continue;
            for (int c = 0, n = nchunks(l); c < n; ++c) ctl->sig[l][c] = 0;
        }
    }

    /* The gate (ag_gemm.h): the previous ranks first, the order in which
     * the host enqueued the copies. */
    __device__ __forceinline__ void gate() const
    {
        const uint64_t e = agg.e;
        st_relaxed_sys(&ctl->cur, e);
        for (int i = 1; i < rt.nlocal; ++i) {
            const int q = (rt.local - i + rt.nlocal) % rt.nlocal;
            if (e > 1) (void)wait(&peer_ctl[q]->released, e - 1, rt.glob[q], -1, 2);
            /* opened even after a failure: the side streams must end */
            for (int x = 0; x < split; ++x) st_release_sys(&ctl->go[q][x], 1);
        }
    }

    __device__ __forceinline__ void side_work(const GemmParams &, int cta, int t) const
    {
        if (cta == 0 && t == 32) gate();
    }

    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        return DefaultHooks().target(p, t);
    }
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord) const {}
};

/* The call this CTA runs (one thread, before the CTA's first barrier). */
__device__ __forceinline__ void begin(const AggHooks &h)
{
    agg.note.quit = 0;
    agg.e = *reinterpret_cast<volatile const uint64_t *>(&h.ctl->calls) + 1;
#ifdef MKI_AGG_TRACE
    agg.nt = 0;
    for (int i = 0; i < 64; i++) agg.tt[i] = 0;
#endif
}

#ifdef MKI_AGG_TRACE
/* One call in 20 (e % 20 == 10), rank 0 and 1, every CTA that stamped. */
__device__ void trace_print(const AggHooks &h, int kind)
{
    if (agg.e % 20 != 10) return;
    for (int i = 0; i < 64; i++)
        if (agg.tt[i])
            printf("AGGT e %llu rank %d cta %d kind %d i %d t %llu\n",
                   (unsigned long long)agg.e, h.rt.rank, (int)blockIdx.x, kind, i,
                   (unsigned long long)agg.tt[i]);
}
#define AGG_TRACE_AT(i) trace_at(i)
#else
#define AGG_TRACE_AT(i) ((void)0)
#endif

/* One thread per CTA, after its work: report a noted failure, and the
 * last CTA out closes the call. */
__device__ void finish(const AggHooks &h)
{
    note_report(h.rt, agg.note, agg.e);
    __threadfence();
    if (atomicAdd(&h.ctl->exits, 1u) != gridDim.x - 1) return;
    h.ctl->exits = 0;
    if (!agg.note.quit) h.clear_flags();
    __threadfence_system();
    *reinterpret_cast<volatile uint64_t *>(&h.ctl->calls) = agg.e;
    if (h.release) st_release_sys(&h.ctl->released, agg.e);
}

/* ---- across nodes: the net CTAs (ag_gemm.h) -------------------------- */

/* A net CTA keeps the compute CTAs' register split (40 / 232 / 232) and
 * calls no out-of-line function (channel.cuh's waits and pushes are):
 * ptxas compiles those for one register count, and a call from the net
 * roles failed register allocation.  So the net roles note a failure like
 * the producer does (agg.note, reported by the kernel's tail), spin inline
 * and push commands inline.  SEND is warpgroup 1, RECV warpgroup 2. */
constexpr int kNetThreads = MKI_AGG_NET_THREADS;
static_assert(kNetThreads == 128 && kThreads == 384, "SEND and RECV: warpgroups 1 and 2");

/* The net roles' first failure (as wait_noted notes a spin's). */
__device__ __forceinline__ void net_note(int kind, const wait_site &w, uint64_t expected)
{
    note_fail(agg.note, kind, w.peer, w.chunk, w.phase, expected, 0);
}

__device__ __forceinline__ bool net_quit() { return *(volatile int *)&agg.note.quit != 0; }

/* The role's leader waits for *addr >= target, then the role meets;
 * false once the CTA quits. */
__device__ __forceinline__ bool net_wait(const AggHooks &h, int bar, int tid, const uint64_t *addr,
                                         uint64_t target, const wait_site &w)
{
    if (tid == 0) (void)wait_noted(h.rt, agg.note, addr, target, w.peer, w.chunk, w.phase);
    role_sync(bar, kNetThreads);
    return !net_quit();
}

/* One command to the proxy (one thread); false, noted, when the ring
 * stays full or the proxy failed. */
__device__ __forceinline__ bool net_push_noted(const AggHooks &h, const mki_fifo_cmd &c,
                                               const wait_site &w)
{
    unsigned long long t;
    const int r = fifo_push(h.rt.fifo, c, stops_of(h.rt), h.rt.timeout_ns, &t);
    if (r == MKI_FIFO_OK) return true;
    net_note(r == MKI_FIFO_PROXY_FAILED ? MKI_ERR_PROXY : MKI_ERR_TIMEOUT, w, 0);
    return false;
}

/* Bytes of rank q's rows, and chunk kk of channel c: its offset in them. */
__device__ __forceinline__ uint64_t rows_bytes(const AggHooks &h, int q)
{
    return (uint64_t)(h.row_off[q + 1] - h.row_off[q]) * h.row_bytes;
}
__device__ __forceinline__ uint64_t net_at(const AggHooks &h, int c, uint64_t kk)
{
    return ((kk << h.nnet_shift) + (uint64_t)c) << h.net_shift;
}

/* SEND: my rows to every rank of another node, the previous ranks first
 * (their GEMMs want my rows right after their own).  Chunk kk of channel
 * c goes to slot (e + kk) % MKI_NSLOTS of rank q once the credit of what
 * that slot last carried came back (sent[], channel.h), staged in my net
 * block, then one WRITE_SIGNAL (channel.cuh's deliver, inline). */
__device__ __forceinline__ void net_send(const AggHooks &h, const chan &k, int tid)
{
    const int P = h.nsrc, me = h.rt.rank;
    const uint64_t n = rows_bytes(h, me), S = 1ull << h.net_shift;
    const uint64_t nk = mki_agg_net_chunks(n, S, h.nnet, k.c);
    for (int i = 1; i < P; i++) {
        const int q = (me - i + P) % P;
        if (!k.remote(q)) continue;
        for (uint64_t kk = 0; kk < nk; kk++) {
            const uint64_t at = net_at(h, k.c, kk), nb = n - at < S ? n - at : S;
            const int sl = k.slot(q, kk);
            uint64_t *sent = k.sent(q, 0, sl);
            const wait_site w{q, k.c, (int)kk, 0};
            if (!net_wait(h, 1, tid, k.credit(q, 0), tid == 0 ? *sent : 0, w)) return;
            if (tid == 0) AGG_TRACE_AT(32 + 2 * (int)kk);
            const uint64_t stage = k.stage(q, 0, sl);
            copy_bytes(h.ch.nb + stage, h.net_src + at, nb, tid, kNetThreads);
            __threadfence_system();
            role_sync(1, kNetThreads);
            if (tid == 0) {
                if (net_push_noted(h, net_chunk_cmd(k, stage, q, 0, sl, nb, k.target(kk)), w))
                    *sent = k.target(kk);
                AGG_TRACE_AT(33 + 2 * (int)kk);
            }
        }
    }
}

/* RECV: the rows of every rank of another node, in the GEMM's order
 * (me + 1, me + 2, ...), each chunk from the net block into the bank,
 * then its credit back (channel.cuh's raise_credit, inline) and its flag
 * for the GEMM. */
__device__ __forceinline__ void net_recv(const AggHooks &h, const chan &k, int tid)
{
    const int P = h.nsrc, me = h.rt.rank;
    const uint64_t S = 1ull << h.net_shift;
    for (int i = 1; i < P; i++) {
        const int q = (me + i) % P;
        if (!k.remote(q)) continue;
        const uint64_t n = rows_bytes(h, q), nk = mki_agg_net_chunks(n, S, h.nnet, k.c);
        char *dst = h.bank + (uint64_t)h.row_off[q] * h.row_bytes;
        for (uint64_t kk = 0; kk < nk; kk++) {
            const uint64_t at = net_at(h, k.c, kk), nb = n - at < S ? n - at : S;
            const int sl = k.slot(q, kk);
            const wait_site w{q, k.c, (int)kk, 0};
            if (!net_wait(h, 2, tid, k.arrive(q, 0, sl), k.target(kk), w)) return;
            if (tid == 0) AGG_TRACE_AT(2 * (int)kk);
            copy_bytes(dst + at, k.inbox(q, 0, sl), nb, tid, kNetThreads);
            __threadfence(); /* the bank's rows before the flag (the producer's
                              * proxy fence then orders them before its TMA) */
            role_sync(2, kNetThreads);
            if (tid == 0) AGG_TRACE_AT(2 * (int)kk + 1);
            if (tid == 0) {
                (void)net_push_noted(h, net_credit_cmd(k, q, 0, k.target(kk)), w);
                st_release_sys(&h.ctl->rsig[q][k.c], mki_sig_target(agg.e, kk));
            }
        }
    }
}

/* A net CTA (the last h.nnet_ctas of the launch, whole clusters; those
 * past h.nnet idle).  The channel's operation number as the collectives
 * keep it (coll.cu: enter, leave); thread 128 leads.  The roles run inside
 * the wide warpgroups' branch: code after the branches join runs on the
 * narrow count (ptxas takes the least). */
__device__ __forceinline__ void net_cta(const AggHooks &h)
{
    const int wg = (int)threadIdx.x / 128;
    if (wg == 0) {
        setmaxnreg_dec<40>();
        __syncthreads();
        __syncthreads();
        return;
    }
    setmaxnreg_inc<232>();
    const int c = (int)blockIdx.x - ((int)gridDim.x - h.nnet_ctas);
    uint64_t *seq = c < h.nnet ? reinterpret_cast<uint64_t *>(h.ch.ctl[h.rt.local] + mki_ch_seq(c))
                               : nullptr;
    if (threadIdx.x == 128) {
        agg.ne = seq ? *reinterpret_cast<volatile uint64_t *>(seq) + 1 : 0;
        const uint64_t ab = seq ? stop_value(h.rt, false) : 0;
        if (ab) net_note(MKI_ERR_REMOTE, wait_site{(int)ab - 1, c, -1, -1}, 0);
    }
    __syncthreads();
    if (seq && !net_quit()) {
        /* the channel's accessors only: its out-of-line waits and pushes are
         * replaced by the noted, inline ones above */
        const chan k{&h.rt, &h.ch, c, agg.ne, nullptr};
        if (wg == 1) net_send(h, k, (int)threadIdx.x - 128);
        else net_recv(h, k, (int)threadIdx.x - 256);
    }
    __syncthreads();
    if (threadIdx.x == 128 && seq && !net_quit())
        *reinterpret_cast<volatile uint64_t *>(seq) = agg.ne;
}

template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    agg_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ AggHooks h)
{
    extern __shared__ char smem[];
    if (threadIdx.x == 0) begin(h); /* run_cta and net_cta sync before any use */
    /* Net CTAs last (whole clusters), so that the compute CTAs' rank and
     * count stay blockIdx.x and a value the consumers need not keep: with
     * them first, ptxas ran out of the consumers' 232 registers. */
    const int ncomp = (int)gridDim.x - h.nnet_ctas;
    if ((int)blockIdx.x >= ncomp) net_cta(h);
    else run_cta<kF16, kTransB, kCM, AggHooks>(p, h, blockIdx.x, ncomp, smem);
    __syncwarp();    /* the producer lane rejoins its warp: bar.sync is .aligned */
    __syncthreads(); /* the producer's and the gate's notes */
    /* Thread 128 leads a consumer warpgroup (232 registers). */
    if (threadIdx.x == 128) {
        if (blockIdx.x == 0) h.wait_all();
#ifdef MKI_AGG_TRACE
        if ((int)blockIdx.x >= ncomp || blockIdx.x == 0 || (int)blockIdx.x == ncomp / 2 ||
            (int)blockIdx.x == ncomp - 1)
            trace_print(h, (int)blockIdx.x >= ncomp);
#endif
        finish(h);
    }
}

/* No rows or no columns: nothing to compute, but the call still takes
 * part in the protocol (gate, every peer's signal, the epoch). */
__global__ void agg_idle_kernel(const __grid_constant__ AggHooks h)
{
    if (threadIdx.x == 0) {
        begin(h);
        h.gate();
        h.wait_all();
        finish(h);
    }
}

/* After the gathered A was copied out of the bank (stream order): the
 * bank may be written again. */
__global__ void agg_release_kernel(mki_agg_ctl *ctl)
{
    if (threadIdx.x == 0)
        st_release_sys(&ctl->released, *reinterpret_cast<volatile const uint64_t *>(&ctl->calls));
}

const void *fused_kernel(bool f16, bool tb, int cm)
{
    return MKI_ENGINE_KERNEL(agg_kernel, f16, tb, cm);
}

int log2_exact(uint64_t v)
{
    int s = 0;
    while (s < 63 && (1ull << s) < v) s++;
    return (1ull << s) == v ? s : -1;
}

/* 0, or an error with msg set: the net fields are not what the kernel
 * can take (powers of two, ranks within the parameters). */
int fill_hooks(const mki_agg_launch *l, AggHooks *h, char *msg, size_t len)
{
    memset(h, 0, sizeof(*h));
    if (l->nsrc < 1 || l->nsrc > MKI_AGG_MAXSRC || l->rt.nlocal > MKI_MAXLOCAL) {
        snprintf(msg, len, "ag_gemm: %d ranks (%d on this node): at most %d (%d)", l->nsrc,
                 l->rt.nlocal, MKI_AGG_MAXSRC, MKI_MAXLOCAL);
        return MKI_GEMM_ERR_INVALID;
    }
    h->nsrc = l->nsrc;
    h->split = l->split;
    h->release = l->release;
    for (int i = 0; i <= l->nsrc; ++i) h->row_off[i] = (int)l->row_off[i];
    for (int i = 0; i < l->rt.nlocal; ++i) h->chunk_rows[i] = (int)l->chunk_rows[i];
    h->ctl = l->ctl;
    for (int i = 0; i < l->rt.nlocal; ++i) h->peer_ctl[i] = l->peer_ctl[i];
    h->rt = l->rt;
    if (l->nnet > 0) {
        const int ns = log2_exact((uint64_t)l->nnet), cs = log2_exact(l->net_chunk);
        if (ns < 0 || cs < 4 || l->nnet > MKI_NB_CH || l->nnet > l->ch.nbg.nbch ||
            l->net_chunk > l->ch.nbg.stride) {
            snprintf(msg, len, "ag_gemm: %d net channels of %llu bytes (the net block has %d "
                     "of %llu): powers of two within it expected", l->nnet,
                     (unsigned long long)l->net_chunk, (int)l->ch.nbg.nbch,
                     (unsigned long long)l->ch.nbg.stride);
            return MKI_GEMM_ERR_INVALID;
        }
        h->nnet = l->nnet;
        h->nnet_shift = ns;
        h->net_shift = cs;
        h->row_bytes = (uint64_t)l->k * (l->dtype == MKI_F32 ? 4 : 2);
        h->net_src = (const char *)l->net_src;
        h->bank = (char *)const_cast<void *>(l->a);
        h->ch = l->ch;
    }
    return MKI_GEMM_OK;
}

/* This rank's whole tiles read from the caller's A (l->own). */
int own_map(const mki_agg_launch *l, const mki_gemm_args *a, AggHooks *h, char *msg, size_t len)
{
    const int64_t lo = l->row_off[l->rt.rank], hi = l->row_off[l->rt.rank + 1];
    if (!l->own || l->own_d1 <= l->own_d0) return MKI_GEMM_OK;
    if (l->own_d0 < lo || l->own_d1 > hi || l->own_d0 % BM || l->own_d1 % BM) {
        snprintf(msg, len, "ag_gemm: own rows [%lld, %lld) are not whole tiles of [%lld, %lld)",
                 (long long)l->own_d0, (long long)l->own_d1, (long long)lo, (long long)hi);
        return MKI_GEMM_ERR_INVALID;
    }
    int r = encode_2d(&h->tm_own, l->own, a->in_type, (uint64_t)l->k, (uint64_t)(hi - lo),
                      (uint64_t)l->k, BK, BM, msg, len);
    h->own_lo = (int)lo;
    h->own_d0 = (int)l->own_d0;
    h->own_d1 = (int)l->own_d1;
    return r;
}

} // namespace

extern "C" int mki_agg_describe(const struct mki_agg_launch *l, struct mki_launch_desc *d,
                                char *msg, size_t len)
{
    AggHooks h;
    int r = fill_hooks(l, &h, msg, len);
    if (r) return r;
    mki_gemm_args a;
    memset(&a, 0, sizeof(a));
    a.m = l->m;
    a.n = l->n;
    a.k = l->k;
    a.a = l->a;
    a.b = l->b;
    a.d = l->c;
    a.in_type = (mki_dtype_t)l->dtype;
    a.out_type = (mki_dtype_t)l->dtype;
    a.trans_b = l->trans_b;
    a.alpha = 1.0f;
    a.num_ctas = l->ctas;
    mki_gemm_device dev;
    mki_gemm_plan pl;
    r = query_device(&dev, msg, len);
    if (!r) r = mki_gemm_validate(&a, &dev, &pl, msg, len);
    if (r) return r;
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    if (pl.noop || l->m == 0 || l->n == 0) {
        if (l->nnet > 0) { /* src/ops/ag_gemm.c runs such calls unfused across nodes */
            snprintf(msg, len, "ag_gemm: no tiles, and rows to move across nodes");
            return MKI_GEMM_ERR_INVALID;
        }
        d->fn = (const void *)agg_idle_kernel;
        d->grid = 1;
        d->block = 32;
        d->cluster = 1;
        d->exact = 1;
        return mki_launch_arg(d, &h, sizeof(h)) ? MKI_GEMM_ERR_INVALID : MKI_GEMM_OK;
    }
    GemmParams p;
    if ((r = make_params(&a, &pl, &p, msg, len)) || (r = own_map(l, &a, &h, msg, len))) return r;
    h.num_pm = (p.num_m_blk + p.cluster_m - 1) / p.cluster_m;
    h.pm0 = (int)((l->row_off[l->rt.rank] / BM) / p.cluster_m) % h.num_pm;
    /* Every CTA spins: the whole grid must be resident (the launch path
     * shrinks it to what fits, in whole clusters; with net CTAs it must
     * fit as asked: the launch path would drop the net CTAs).  Net CTAs
     * come last, in whole clusters. */
    if (l->nnet > 0)
        h.nnet_ctas = (l->nnet + p.cluster_m - 1) / p.cluster_m * p.cluster_m;
    d->fn = fused_kernel(l->dtype == MKI_F16, l->trans_b != 0, p.cluster_m);
    d->grid = (unsigned)(pl.grid + h.nnet_ctas);
    d->block = kThreads;
    d->cluster = (unsigned)p.cluster_m;
    d->smem = kSmemBytes;
    d->exact = h.nnet_ctas > 0;
    if (mki_launch_arg(d, &p, sizeof(p)) || mki_launch_arg(d, &h, sizeof(h))) {
        snprintf(msg, len, "ag_gemm: kernel parameters of %zu bytes do not fit",
                 sizeof(p) + sizeof(h));
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

extern "C" const void *mki_agg_release_kernel(void)
{
    return (const void *)agg_release_kernel;
}

extern "C" int mki_agg_preload(char *msg, size_t len)
{
    const void *engine[8];
    for (int i = 0; i < 8; i++) engine[i] = fused_kernel(i & 1, (i >> 1) & 1, (i >> 2) & 1 ? 2 : 1);
    const void *others[] = {(const void *)agg_idle_kernel, (const void *)agg_release_kernel};
    return preload_engine(engine, others, 2, "ag_gemm", msg, len);
}
