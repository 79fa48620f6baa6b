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
 * The all-gather itself uses no SM: the copy engines move the chunks, so
 * every SM computes.  Every wait has a deadline and watches the abort
 * word (kernels/rt/wait.cuh).
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm/gemm_launch.h"
#include "ops/ag_gemm.h"
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
};
__shared__ AggCta agg;

struct AggHooks {
    static constexpr bool kWaitA = true;
    static constexpr bool kSignal = false;
    static constexpr bool kASrc = true;
    static constexpr bool kSideWork = true;
    CUtensorMap tm_own; /* the caller's A (m_local x K), when own_d1 > own_d0 */
    int own_lo, own_d0, own_d1;
    int nsrc, pm0, num_pm, split;
    int row_off[MKI_MAXLOCAL + 1]; /* 32-bit: M < 2^31, and the producer */
    int chunk_rows[MKI_MAXLOCAL];  /* runs on 40 registers */
    mki_agg_ctl *ctl;
    const mki_agg_ctl *peer_ctl[MKI_MAXLOCAL];
    int release;
    mki_rt_dev rt;

    /* Spin until *addr >= target; false, with the failure noted, when the
     * CTA quits, a peer aborted or the deadline passed. */
    __device__ __forceinline__ bool wait(const uint64_t *addr, uint64_t target, int s, int chunk,
                                         int phase) const
    {
        return wait_noted(rt, agg.note, addr, target, rt.glob[s], chunk, phase);
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

    __device__ __forceinline__ void wait_rows(int s, int r0, int r1) const
    {
        const int lo = row_off[s], hi = row_off[s + 1];
        if (r0 < lo) r0 = lo;
        if (r1 > hi) r1 = hi;
        if (r0 >= r1) return;
        const unsigned cr = (unsigned)chunk_rows[s];
        const int c1 = (int)((unsigned)(r1 - 1 - lo) / cr);
        for (int c = (int)((unsigned)(r0 - lo) / cr); c <= c1; ++c)
            if (!wait(&ctl->sig[s][c], 1, s, c, 0)) return;
    }

    __device__ __forceinline__ void wait_a(const GemmParams &p, TileCoord t, int kb) const
    {
        if (kb != 0) return;
        const int r0 = t.m_blk * BM;
        const int r1 = r0 + BM < p.m ? r0 + BM : p.m;
        /* my own rows are in place before the kernel starts */
        for (int s = 0; s < nsrc; ++s)
            if (s != rt.local) wait_rows(s, r0, r1);
    }

    /* Chunks of source s (one signal even for a source with no rows). */
    __device__ __forceinline__ int nchunks(int s) const
    {
        const int m = row_off[s + 1] - row_off[s];
        const int n = (m + chunk_rows[s] - 1) / chunk_rows[s];
        return n < 1 ? 1 : n;
    }

    /* Every chunk of every peer has landed (the tiles' producers waited
     * for all that hold rows; this also covers the rest, so that no flag
     * is still to come when the call clears them). */
    __device__ __forceinline__ void wait_all() const
    {
        for (int s = 0; s < nsrc; ++s) {
            if (s == rt.local) continue;
            for (int c = 0, n = nchunks(s); c < n; ++c)
                if (!wait(&ctl->sig[s][c], 1, s, c, 1)) return;
        }
    }

    /* The call's flags back to 0 (the last CTA out, before the release
     * lets the peers write the next call's). */
    __device__ __forceinline__ void clear_flags() const
    {
        for (int s = 0; s < nsrc; ++s) {
            if (s == rt.local) continue;
            for (int c = 0, n = nchunks(s); c < n; ++c) ctl->sig[s][c] = 0;
        }
    }

    /* The gate (ag_gemm.h): the previous ranks first, the order in which
     * the host enqueued the copies. */
    __device__ __forceinline__ void gate() const
    {
        const uint64_t e = agg.e;
        st_relaxed_sys(&ctl->cur, e);
        for (int i = 1; i < nsrc; ++i) {
            const int q = (rt.local - i + nsrc) % nsrc;
            if (e > 1) (void)wait(&peer_ctl[q]->released, e - 1, q, -1, 2);
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
}

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

template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    agg_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ AggHooks h)
{
    extern __shared__ char smem[];
    if (threadIdx.x == 0) begin(h); /* run_cta syncs before any use */
    run_cta<kF16, kTransB, kCM, AggHooks>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();    /* the producer lane rejoins its warp: bar.sync is .aligned */
    __syncthreads(); /* the producer's and the gate's notes */
    /* Thread 128 leads a consumer warpgroup (232 registers). */
    if (threadIdx.x == 128) {
        if (blockIdx.x == 0) h.wait_all();
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

void fill_hooks(const mki_agg_launch *l, AggHooks *h)
{
    memset(h, 0, sizeof(*h));
    h->nsrc = l->nsrc;
    h->split = l->split;
    h->release = l->release;
    for (int i = 0; i <= l->nsrc; ++i) h->row_off[i] = (int)l->row_off[i];
    for (int i = 0; i < l->nsrc; ++i) h->chunk_rows[i] = (int)l->chunk_rows[i];
    h->ctl = l->ctl;
    for (int i = 0; i < l->nsrc; ++i) h->peer_ctl[i] = l->peer_ctl[i];
    h->rt = l->rt;
}

/* This rank's whole tiles read from the caller's A (l->own). */
int own_map(const mki_agg_launch *l, const mki_gemm_args *a, AggHooks *h, char *msg, size_t len)
{
    const int64_t lo = l->row_off[l->rt.local], hi = l->row_off[l->rt.local + 1];
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
    fill_hooks(l, &h);
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
    int r = query_device(&dev, msg, len);
    if (!r) r = mki_gemm_validate(&a, &dev, &pl, msg, len);
    if (r) return r;
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    if (pl.noop || l->m == 0 || l->n == 0) {
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
    h.pm0 = (int)((l->row_off[l->rt.local] / BM) / p.cluster_m) % h.num_pm;
    /* Every CTA spins: the whole grid must be resident (the launch path
     * shrinks it to what fits, in whole clusters). */
    d->fn = fused_kernel(l->dtype == MKI_F16, l->trans_b != 0, p.cluster_m);
    d->grid = (unsigned)pl.grid;
    d->block = kThreads;
    d->cluster = (unsigned)p.cluster_m;
    d->smem = kSmemBytes;
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
