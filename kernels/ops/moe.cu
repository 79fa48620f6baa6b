/*
 * moe.cu - the kernels of mkMoEDispatch, mkMoECombine and
 * mkMoEDispatchGemm (the protocol: moe.h; the dispatch's work:
 * moe_dispatch.cuh; the combine's kernel: moe_combine.cuh; their shared
 * waits and counters: moe_sync.cuh; the lab trace: moe_trace.cuh).  The first two: one CTA of MKI_MOE_THREADS threads
 * per SM of the plan; the third: the GEMM engine's launch, its first CTAs
 * dispatching.  Every wait goes through the runtime's deadline wait
 * (wait.cuh).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "ops/moe.h"
#include "ops/moe_dispatch.cuh"
#include "rt/copy.cuh"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"

using namespace mki;

namespace {

using namespace mki::moe;
constexpr int NT = MKI_MOE_THREADS;
constexpr int NW = NT / 32;

#include "ops/moe_trace.cuh"

__global__ void __launch_bounds__(NT, 1) moe_dispatch_kernel(const __grid_constant__ mki_moe_params p)
{
    extern __shared__ int32_t dyn[];
    __shared__ dispatch_out out;
    (void)dispatch_cta<NT, false>(p, (int)gridDim.x, (int)blockIdx.x, dyn, &out, nullptr);
}

#include "ops/moe_combine.cuh"

const void *combine_for(int dtype)
{
    switch (dtype) {
    case MKI_BF16: return (const void *)moe_combine_kernel<__nv_bfloat16>;
    case MKI_F16: return (const void *)moe_combine_kernel<__half>;
    default: return (const void *)moe_combine_kernel<float>;
    }
}

/* ---- mkMoEDispatchGemm in one kernel (moe.h) ------------------------- */

using mki::gemm::GemmParams;
using mki::gemm::GroupedHooksT;
using mki::gemm::TileCoord;
using mki::gemm::EpiTarget;

/* The compute side's shared state: the first failed wait of the CTA, the
 * call number, whether the GEMM runs. */
struct MoeGemmCta {
    cta_note note;
    uint64_t e;
    int go;
    int past;    /* the producer took a unit past the last */
    int past2;   /* the same in mkMoEDispatchFfnCombine's down projection */
    int units2;  /* its units */
    int gated2;  /* its stores may go to the stage (the peers pulled the last combine) */
    uint64_t cc; /* the combine call the layer's stage is for */
    int push;    /* the down projection's rows go to their tokens' ranks' stages (moe.h) */
    int poster;  /* this CTA's producer takes the cluster's units */
    int ncl, cl; /* clusters, this CTA's */
    int units;   /* the GEMM's units (after the table) */
};
__shared__ MoeGemmCta mg;

/* The hooks' tile() on a schedule (MoeGemmHooks says how units are handed
 * out): its counter, slots and ends, the grouped hooks g that turn a unit
 * into a tile, units of it in all; *past (shared memory): the producer
 * took a unit past them. */
template <class G>
__device__ __forceinline__ TileCoord take_unit(const G &g, const mki_rt_dev &rt,
                                               const GemmParams &p, int i,
                                               unsigned long long *next, uint64_t *slots,
                                               uint64_t *ends, int *past, int units)
{
    /* the CTA's constants in shared memory (the producer has 40
     * registers) */
    const int cl = mg.cl, k = i / mg.ncl;
    const uint64_t e = mg.e & 0xffffffull;
    const uint64_t tag = e << 40 | (uint64_t)(k & 0xffff) << 24;
    uint64_t *slot = slots + (size_t)cl * 8 + (k & 7);
    int u;
    if (threadIdx.x == 0 && mg.poster) {
        if (*past) return g.tile(p, 1 << 30);
        u = (int)atomicAdd(next, 1ull);
        if (u >= units) {
            *past = 1;
            st_release_gpu(ends + cl, e << 40 | (uint64_t)(k & 0xffff) << 24 | 1);
            return g.tile(p, 1 << 30);
        }
        st_release_gpu(slot, tag | (uint64_t)u);
        return g.tile(p, u);
    }
    const uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        const uint64_t v = ld_acquire_gpu(slot);
        if ((v >> 24) == (tag >> 24)) {
            u = (int)(v & 0xffffff);
            break;
        }
        const uint64_t w = ld_acquire_gpu(ends + cl);
        if ((w >> 40) == e && (int)((w >> 24) & 0xffff) <= k) return g.tile(p, 1 << 30);
        if ((n & 1023) == 0 && globaltimer() - t0 > rt.timeout_ns) {
            note_fail(mg.note, MKI_ERR_TIMEOUT, rt.rank, k, 7, tag, v);
            return g.tile(p, 1 << 30);
        }
    }
    return g.tile(p, u);
}

/* What both MoE GEMMs' hooks take from the grouped GEMM's (g): A's rows,
 * B's rows per group, and the target, dropped (EPI_NONE) for a tile
 * whose rows did not all come (a wait failed) or of a CTA without the
 * call's table. */
template <class G>
struct MoeGroupedBase {
    static constexpr bool kBRow = true;
    static constexpr bool kBSplit = true;
    static constexpr bool kASrc = true;
    G g;
    __device__ __forceinline__ const CUtensorMap *a_src(const GemmParams &p, int m_blk,
                                                         int *row) const
    {
        return g.a_src(p, m_blk, row);
    }
    __device__ __forceinline__ int b_row(const GemmParams &p, TileCoord t) const
    {
        return g.b_row(p, t);
    }
    __device__ __forceinline__ bool b_split(const GemmParams &p, TileCoord u) const
    {
        return g.b_split(p, u);
    }
    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e = g.target(p, t);
        if (*(volatile int *)&mg.note.quit || !*(volatile int *)&mg.go)
            e.mode = mki::gemm::EPI_NONE;
        return e;
    }
};

/* The grouped GEMM's hooks, plus: a tile waits for its expert's rows, and
 * units go to clusters as they ask (tile()).  kGluT: SwiGLU in the
 * epilogue (mkMoEDispatchFfnCombine's gate and up projections). */
template <bool kGluT>
struct MoeGemmHooks : MoeGroupedBase<GroupedHooksT<kGluT>> {
    using MoeGroupedBase<GroupedHooksT<kGluT>>::g;
    static constexpr bool kGlu = kGluT;
    static constexpr bool kWaitA = true;
    static constexpr bool kSignal = false;
    int glu; /* kGluT: g.glu */
    int dcl; /* clusters that dispatch first */
    mki_moe_params mp;
    unsigned long long *gnext; /* the next unit of the schedule (zeroed by the dispatch) */
    uint64_t *gslot;           /* [clusters x 8]: a cluster's k-th unit, tagged */
    uint64_t *gend;            /* [clusters]: the cluster's first iteration past the units */

    /* Units are handed out in the schedule's order as clusters ask (a CTA
     * that dispatched first joins when it is done, a CTA slowed by a wait
     * takes fewer): the producer of the cluster's first CTA takes the next
     * with one atomic and posts it, tagged with the call and the iteration
     * k, in the cluster's slot k % 8; its consumers and the other CTA's
     * threads read it there (the producer is at most a unit or so ahead of
     * any of them: it waits for their stages, except past the last unit,
     * where it posts gend once and every later iteration reads as past).
     * Tags: call e (24 bits), k (16 bits), the unit (24 bits). */
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        return take_unit(g, mp.rt, p, i, gnext, gslot, gend, &mg.past, mg.units);
    }
    /* before a tile's first loads: every row of its expert is in place
     * (polled with a pause: a hundred producers polling the one counter
     * that every row of a skewed expert adds to slowed the dispatch five
     * times, bench/NOTES.md) */
    __device__ __forceinline__ void wait_a(const GemmParams &, TileCoord t, int kb) const
    {
        if (kb != t.kb0 || !*(volatile int *)&mg.go || t.m_blk >= __ldg(g.table)) return;
        const int x = g.group_of(t.m_blk);
        const uint64_t need = (uint64_t)(__ldg(g.off + x + 1) - __ldg(g.off + x));
        (void)wait_noted(mp.rt, mg.note, mp.ready + x, need, mp.rt.rank, x, 5, pause_backoff(),
                         load_gpu());
    }
};

/* mkMoEDispatchFfnCombine's down projection in the first kernel's launch
 * (the engine's second problem): the grouped GEMM of the intermediate rows
 * with W2 on the same table, its units from a second schedule, each tile's
 * loads once its M-block's first-GEMM tiles are all stored (hdone[m_blk]
 * == need). */
struct MoeDownHooks : MoeGroupedBase<mki::gemm::GroupedHooks> {
    static constexpr bool kWaitA = true;
    static constexpr bool kSignal = false;
    static constexpr bool kRowPtr = true;
    char *stage[MKI_MAXLOCAL]; /* every rank's combine stage (push) */
    const int32_t *rsrc;       /* the dispatch's recv_src: each row's (rank, t * topk + j) */
    int64_t rb;                /* bytes of a row */
    mki_rt_dev rt;
    unsigned long long *gnext;
    uint64_t *gslot, *gend;
    uint64_t *hdone;
    mki_moe_ctl *ctl; /* this rank's control block */
    int need;         /* the first GEMM's N-blocks */
    int staged;       /* the outputs go into this rank's combine stage */
    int P, me;
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        return take_unit(g, rt, p, i, gnext, gslot, gend, &mg.past2, mg.units2);
    }
    /* The stages may take this call's rows once every peer has finished
     * the last combine (pulled from this rank's stage, or summed its own
     * when the layer pushed): one side thread waits (MoeLayerHooks) and
     * raises mg.gated2 (also when a wait failed: the failure is noted and
     * no tile is stored); the producer holds the CTA's first down tile's
     * loads until then, and the consumers store only what it loaded. */
    __device__ __forceinline__ void gate_stage() const
    {
        if (mg.cc > 1)
            for (int q = 0; q < P; q++)
                if (q != me && !wait_noted(rt, mg.note, &ctl->peer_pulled[q], mg.cc - 1,
                                           rt.glob[q], -1, 9, pause_backoff()))
                    break;
        __threadfence_block();
        *(volatile int *)&mg.gated2 = 1;
    }
    /* push (mg.push): each stored row goes straight to its token's slot
     * in the token's rank's stage (EPI_ROWS), instead of this rank's stage
     * in expert order */
    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e = MoeGroupedBase<mki::gemm::GroupedHooks>::target(p, t);
        if (e.mode != mki::gemm::EPI_NONE && *(volatile int *)&mg.push) {
            if (e.mode != mki::gemm::EPI_DIRECT) e.rows = mki::gemm::BM;
            e.mode = mki::gemm::EPI_ROWS;
        }
        return e;
    }
    /* the row's (rank, slot), written by this launch's dispatch before the
     * row's count (so read through L2, not the read-only path) */
    __device__ __forceinline__ char *row_ptr(int row) const
    {
        const int s = __ldcg(rsrc + 2 * (int64_t)row), slot = __ldcg(rsrc + 2 * (int64_t)row + 1);
        char *b = stage[0];
#pragma unroll
        for (int q = 1; q < MKI_MAXLOCAL; q++)
            if (s == q) b = stage[q];
        return b + (int64_t)slot * rb;
    }
    __device__ __forceinline__ void wait_a(const GemmParams &, TileCoord t, int kb) const
    {
        if (kb != t.kb0 || !*(volatile int *)&mg.go || t.m_blk >= __ldg(g.table)) return;
        if (staged)
            while (!*(volatile int *)&mg.gated2) __nanosleep(64);
        (void)wait_noted(rt, mg.note, hdone + t.m_blk, (uint64_t)need, rt.rank, t.m_blk, 8,
                         pause_backoff(), load_gpu());
    }
};

/* mkMoEDispatchFfnCombine's one launch: the first GEMM's hooks, and the
 * down projection as the engine's second problem (kTwoProblems). */
struct MoeLayerHooks : MoeGemmHooks<true> {
    static constexpr bool kTwoProblems = true;
    static constexpr bool kSideWork = true;
    /* each stored first-GEMM tile counted for the down projection
     * (after_store), one tile late (the stores are not waited for before
     * the next mainloop) */
    static constexpr bool kSignal = true;
    static constexpr bool kDeferSignal = true;
    typedef MoeDownHooks Second;
    GemmParams p2;
    MoeDownHooks second;
    uint64_t *hdone; /* [tiles of the table]: stored first-GEMM tiles per M-block */
    /* kSignal: tile t's stores are complete and fenced (the engine) */
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord t) const
    {
        if (t.m_blk < __ldg(g.table)) {
            __threadfence();
            atomicAdd(reinterpret_cast<unsigned long long *>(hdone + t.m_blk), 1ull);
        }
    }
    /* an idle thread of the producer warpgroup (not the producer's warp): the
     * stage's gate */
    __device__ __forceinline__ void side_work(const GemmParams &, int, int t) const
    {
        if (t == 32 && second.staged) second.gate_stage();
    }
};
static_assert(sizeof(GemmParams) + sizeof(MoeLayerHooks) + 64 <= MKI_LAUNCH_PARAM_BYTES,
              "the layer kernel's parameters must fit a launch");

/* Compute CTAs: the call's table (gemm_ready), one thread; false: no GEMM. */
template <class H>
__device__ bool wait_table(const H &h, uint64_t e)
{
    mki_moe_ctl *ctl = h.mp.ctl[h.mp.me];
    const uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        const uint64_t v = ld_acquire_sys(&ctl->gemm_ready);
        if (v == e) return true;
        if (v == (e | MKI_MOE_GEMM_FAILED)) return false;
        if (n & 31) continue;
        const uint64_t w = stop_value(h.mp.rt, hstop_due(n, t0));
        if (w || globaltimer() - t0 > h.mp.rt.timeout_ns) {
            note_fail(mg.note, w ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT, w ? (int)w - 1 : h.mp.rt.rank,
                      -1, 6, e, v);
            return false;
        }
    }
}

/* One thread, after the CTA's GEMM: its first failed wait reported, and
 * the kernel's last CTA out moves the call number (moe.h). */
template <class H>
__device__ __noinline__ void moe_gemm_exit(const H &h, bool staged = false)
{
    mki_moe_ctl *ctl = h.mp.ctl[h.mp.me];
    note_report(h.mp.rt, mg.note, mg.e);
    __threadfence();
    if (atomicAdd(reinterpret_cast<unsigned long long *>(&ctl->gexit), 1ull) ==
        (unsigned long long)gridDim.x - 1) {
        ctl->gexit = 0;
        const bool ok = ld_vol(&ctl->dok) == mg.e;
        if (ok) *reinterpret_cast<volatile uint64_t *>(&ctl->dcalls) = mg.e;
        __threadfence_system();
        /* the layer's outputs are in the stage: the combine's peers may
         * pull them (not after a failed dispatch: no combine follows) */
        if (staged && ok)
            for (int q = 0; q < h.mp.P; q++)
                if (q != h.mp.me) st_release_sys(&h.mp.ctl[q]->peer_staged[h.mp.me], mg.cc);
    }
}

/* The part of both kernels before the first GEMM: the dispatch in the
 * first D CTAs, the table. */
template <int kCM, class H>
__device__ __forceinline__ void moe_gemm_prologue(const GemmParams &p, const H &h, char *smem,
                                                  dispatch_out *dout)
{
    const mki_moe_params &mp = h.mp;
    mki_moe_ctl *ctl = mp.ctl[mp.me];
    const int D = h.dcl * kCM;
    if (threadIdx.x == 0) {
        mg.note = cta_note{};
        mg.e = ld_vol(&ctl->dcalls) + 1;
        mg.go = 1;
        mg.past = 0;
    }
    __syncthreads();
    if ((int)blockIdx.x < D) {
        const bool ok = dispatch_cta<mki::gemm::kThreads, true>(
            mp, D, (int)blockIdx.x, reinterpret_cast<int32_t *>(smem), dout, &mg.note);
        __syncthreads();
        if (threadIdx.x == 0 && !ok) {
            mg.go = 0;
            if (blockIdx.x == 0 && !dout->table_set) {
                /* no table for this call: the other CTAs compute nothing */
                mp.table[0] = 0;
                mp.table[1] = 2;
                __threadfence();
                st_release_sys(&ctl->gemm_ready, mg.e | MKI_MOE_GEMM_FAILED);
            }
        }
    }
    /* the table, built by CTA 0 (a dispatch CTA may finish before it) */
    if (threadIdx.x == 0) {
        if (mg.go) mg.go = wait_table(h, mg.e) ? 1 : 0;
        mg.ncl = (int)gridDim.x / kCM;
        mg.cl = (int)blockIdx.x / kCM;
        mg.poster = kCM == 1 || mki::gemm::cluster_ctarank() == 0;
        /* the table's tiles (the last call's where the call stopped) */
        mg.units = (int)((__ldg(h.g.table) + kCM - 1) / kCM * p.num_n_blk);
    }
    __syncthreads();
}

template <bool kF16, bool kTransB, int kCM, bool kGlu>
__global__ void __launch_bounds__(mki::gemm::kThreads, 1)
    moe_gemm_kernel(const __grid_constant__ GemmParams p,
                    const __grid_constant__ MoeGemmHooks<kGlu> h)
{
    extern __shared__ __align__(1024) char smem[];
    __shared__ dispatch_out dout;
    moe_gemm_prologue<kCM>(p, h, smem, &dout);
    /* Every CTA runs the engine on the same units whatever happened (a
     * cluster's two CTAs meet in its barriers and share B): a CTA without
     * the call's table (mg.go == 0: an error; the table is then the last
     * call's, or none: its tiles past the end) waits for nothing and stores
     * nothing. */
    mki::gemm::run_cta<kF16, kTransB, kCM, MoeGemmHooks<kGlu>>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();
    __syncthreads();
    if (threadIdx.x == 0) moe_gemm_exit(h);
}

/* mkMoEDispatchFfnCombine's one launch (moe.h): the dispatch, then the
 * engine on two problems (kTwoProblems): the first GEMM (p), then the down
 * projection (h.p2).  A CTA takes down-projection units only once the
 * first GEMM's schedule is empty, so every first-GEMM tile that a
 * down-projection tile waits for is held by a running CTA. */
template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(mki::gemm::kThreads, 1)
    moe_layer_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ MoeLayerHooks h)
{
    extern __shared__ __align__(1024) char smem[];
    __shared__ dispatch_out dout;
    if (threadIdx.x == 0) KT_STAMP(0, KT_ENTRY);
    moe_gemm_prologue<kCM>(p, h, smem, &dout);
    if (threadIdx.x == 0) { /* the producer (thread 0) alone reads them */
        KT_STAMP(0, KT_PRO);
        mg.past2 = 0;
        mg.units2 = (int)((__ldg(h.g.table) + kCM - 1) / kCM * h.p2.num_n_blk);
        mg.gated2 = 0;
        mg.cc = ld_vol(&h.mp.ctl[h.mp.me]->ccalls) + 1;
        /* push: the dispatch found every rank's slots within its stage
         * (written before gemm_ready, which the prologue acquired) */
        mg.push = h.second.staged && h.second.rsrc && mg.go &&
                  ld_vol(&h.mp.ctl[h.mp.me]->push_e) == mg.e;
    }
    mki::gemm::run_cta<kF16, kTransB, kCM, MoeLayerHooks>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();
    /* the consumers' TMA stores (complete: run_cta waited) before the
     * generic release of peer_staged */
    if (h.second.staged && threadIdx.x >= 128 && threadIdx.x % 128 == 0)
        fence_proxy_async_global();
    /* push: the consumers' row copies into the peers' stages, before the
     * last CTA's release of peer_staged */
    if (mg.push && threadIdx.x >= 128) {
        fence_proxy_async_global(); /* the row copies (complete: run_cta waited) */
        __threadfence_system();
    }
    __syncthreads();
    if (threadIdx.x == 0) KT_DONE(0, h.mp.me, mg.e);
    if (threadIdx.x == 0) moe_gemm_exit(h, h.second.staged != 0);
}

template <bool kF16, bool kTransB, bool kGlu>
const void *moe_gemm_kernel_for(int cm)
{
    return cm == 2 ? (const void *)moe_gemm_kernel<kF16, kTransB, 2, kGlu>
                   : (const void *)moe_gemm_kernel<kF16, kTransB, 1, kGlu>;
}

template <bool kGlu>
const void *moe_gemm_kernel_of(bool f16, bool tb, int cm)
{
    return f16 ? (tb ? moe_gemm_kernel_for<true, true, kGlu>(cm)
                     : moe_gemm_kernel_for<true, false, kGlu>(cm))
               : (tb ? moe_gemm_kernel_for<false, true, kGlu>(cm)
                     : moe_gemm_kernel_for<false, false, kGlu>(cm));
}

} // namespace

extern "C" int mki_moe_describe(const struct mki_moe_params *p, int combine, int grid,
                                struct mki_launch_desc *d, char *msg, size_t len)
{
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    d->fn = combine ? combine_for(p->dtype) : (const void *)moe_dispatch_kernel;
    d->grid = (unsigned)(grid > 0 ? grid : 1);
    d->block = NT;
    d->cluster = 1;
    d->smem = combine ? 0 : dispatch_smem(p->experts, p->topk);
    d->exact = 0;
    if (mki_launch_arg(d, p, sizeof(*p)) != 0) {
        snprintf(msg, len, "the MoE kernel's parameters do not fit a launch");
        return -1;
    }
    return 0;
}

/* The first GEMM's parameters and hooks for a launch whose first CTAs
 * dispatch: *grid the launch's CTAs, *D the dispatching ones; the
 * schedule's words from mp->ready (mki_moe_gemm_sched_words).  0; 1 when
 * the grid is too small to split; or an MKI_GEMM_ERR_* with msg set. */
template <bool kGlu>
static int moe_gemm_setup(const struct mki_moe_params *mp, const mki_gemm_grouped_args *ga,
                          int dctas_max, GemmParams *gp, MoeGemmHooks<kGlu> *h, int *grid,
                          int *D, char *msg, size_t len)
{
    GroupedHooksT<kGlu> gh;
    *grid = 0;
    const int r = mki::gemm::grouped_params(ga, gp, &gh, grid, msg, len);
    if (r) return r;
    const int cm = gp->cluster_m;
    *D = (dctas_max + cm - 1) / cm * cm;
    if (*D > MKI_MOE_FUSED_MAXD) *D = MKI_MOE_FUSED_MAXD / cm * cm;
    if (*grid < *D + 2 * cm) return 1; /* too few CTAs to split */
    if (mki::moe::fused_smem(mp->experts, mp->topk, mp->el, mki::gemm::kThreads) >
        (size_t)mki::gemm::kSmemBytes) {
        snprintf(msg, len, "mkMoEDispatchGemm: %d experts and top-%d need more shared memory "
                 "than the GEMM's CTAs have", mp->experts, mp->topk);
        return MKI_GEMM_ERR_UNSUPPORTED;
    }
    memset(h, 0, sizeof(*h));
    h->g = gh;
    h->glu = gh.glu;
    h->mp = *mp;
    h->dcl = *D / cm;
    /* mp->ready: [el] row counts, the unit counter, then the clusters'
     * slots and ends (mki_moe_gemm_sched_words) */
    h->gnext = reinterpret_cast<unsigned long long *>(mp->ready + mp->el);
    h->gslot = mp->ready + mp->el + 1;
    h->gend = h->gslot + (size_t)(*grid / cm) * 8;
    /* every cluster iterates over num_units / clusters units at most:
     * enough for all when one cluster would take them all */
    const long long n = (long long)gp->num_units + *grid / cm;
    if (n > (1ll << 24)) {
        snprintf(msg, len, "mkMoEDispatchGemm: %lld work units (at most 2^24)", n);
        return MKI_GEMM_ERR_INVALID;
    }
    gp->num_units = (int)n;
    return 0;
}

static void engine_launch(struct mki_launch_desc *d, const void *fn, int grid, int cm)
{
    d->fn = fn;
    d->grid = (unsigned)grid;
    d->block = mki::gemm::kThreads;
    d->cluster = (unsigned)cm;
    d->smem = mki::gemm::kSmemBytes;
    d->exact = 1; /* every CTA spins, and the split counts them */
}

template <bool kGlu>
static int moe_gemm_describe(const struct mki_moe_params *mp, const mki_gemm_grouped_args *ga,
                             int dctas_max, struct mki_launch_desc *d, int *dctas, char *msg,
                             size_t len)
{
    GemmParams gp;
    MoeGemmHooks<kGlu> h;
    int grid = 0, D = 0;
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    *dctas = 0;
    const int r = moe_gemm_setup<kGlu>(mp, ga, dctas_max, &gp, &h, &grid, &D, msg, len);
    if (r) return r;
    const int cm = gp.cluster_m;
    engine_launch(d, moe_gemm_kernel_of<kGlu>(ga->in_type == MKI_DT_F16, ga->trans_b != 0, cm),
                  grid, cm);
    if (mki_launch_arg(d, &gp, sizeof(gp)) || mki_launch_arg(d, &h, sizeof(h))) {
        snprintf(msg, len, "mkMoEDispatchGemm: kernel parameters of %zu bytes do not fit",
                 sizeof(gp) + sizeof(h));
        return MKI_GEMM_ERR_INVALID;
    }
    *dctas = D;
    return 0;
}

template <bool kF16, bool kTransB>
const void *moe_layer_kernel_for(int cm)
{
    return cm == 2 ? (const void *)moe_layer_kernel<kF16, kTransB, 2>
                   : (const void *)moe_layer_kernel<kF16, kTransB, 1>;
}

const void *moe_layer_kernel_of(bool f16, bool tb, int cm)
{
    return f16 ? (tb ? moe_layer_kernel_for<true, true>(cm) : moe_layer_kernel_for<true, false>(cm))
               : (tb ? moe_layer_kernel_for<false, true>(cm)
                     : moe_layer_kernel_for<false, false>(cm));
}

extern "C" int mki_moe_gemm_describe(const struct mki_moe_params *mp,
                                     const mki_gemm_grouped_args *ga, int dctas_max,
                                     struct mki_launch_desc *d, int *dctas, char *msg,
                                     size_t len)
{
    return ga->glu > 0 ? moe_gemm_describe<true>(mp, ga, dctas_max, d, dctas, msg, len)
                       : moe_gemm_describe<false>(mp, ga, dctas_max, d, dctas, msg, len);
}

extern "C" int mki_moe_layer_describe(const struct mki_moe_params *mp,
                                      const mki_gemm_grouped_args *ga,
                                      const mki_gemm_grouped_args *down, int dctas_max,
                                      struct mki_launch_desc *d, int *dctas, char *msg,
                                      size_t len)
{
    GemmParams gp, gp2;
    MoeLayerHooks h;
    mki::gemm::GroupedHooks gh2;
    int grid = 0, D = 0, grid2 = 0;
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    memset(&h, 0, sizeof(h));
    *dctas = 0;
    int r = moe_gemm_setup<true>(mp, ga, dctas_max, &gp, &h, &grid, &D, msg, len);
    if (r) return r;
    const int cm = gp.cluster_m;
    r = mki::gemm::grouped_params(down, &gp2, &gh2, &grid2, msg, len);
    if (r) return r;
    /* the plans differ, or not the same table and offsets: two launches */
    if (gp2.cluster_m != cm || gh2.table != h.g.table || gh2.off != h.g.off) return 1;
    /* mp->ready past mkMoEDispatchGemm's words: the second schedule's
     * counter, a count per tile (both zeroed by the dispatch), the slots
     * and ends (mki_moe_layer_sched_words) */
    const size_t tiles = (size_t)MKI_GEMM_GROUP_TABLE(down->rows, down->groups) / 2;
    uint64_t *base = mp->ready + mki_moe_gemm_sched_words(mp->el, grid);
    h.hdone = base + 1;
    h.mp.zero2 = base;
    h.mp.nzero2 = (int64_t)(1 + tiles);
    MoeDownHooks &h2 = h.second;
    h2.g = gh2;
    h2.rt = mp->rt;
    h2.hdone = h.hdone;
    h2.ctl = mp->ctl[mp->me];
    h2.staged = mp->staged;
    for (int l = 0; l < MKI_MAXLOCAL; l++) h2.stage[l] = mp->stage[l];
    h2.rsrc = mp->staged ? mp->recv_src : nullptr;
    h2.rb = mp->row_bytes;
    h2.P = mp->P;
    h2.me = mp->me;
    h2.need = gp.num_n_blk;
    h2.gnext = reinterpret_cast<unsigned long long *>(base);
    h2.gslot = base + 1 + tiles;
    h2.gend = h2.gslot + (size_t)(grid / cm) * 8;
    const long long n = (long long)gp2.num_units + grid / cm;
    if (n > (1ll << 24)) {
        snprintf(msg, len, "mkMoEDispatchFfnCombine: %lld work units (at most 2^24)", n);
        return MKI_GEMM_ERR_INVALID;
    }
    gp2.num_units = (int)n;
    h.p2 = gp2;
    engine_launch(d, moe_layer_kernel_of(ga->in_type == MKI_DT_F16, ga->trans_b != 0, cm), grid,
                  cm);
    if (mki_launch_arg(d, &gp, sizeof(gp)) || mki_launch_arg(d, &h, sizeof(h))) {
        snprintf(msg, len, "mkMoEDispatchFfnCombine: kernel parameters of %zu bytes do not fit",
                 sizeof(gp) + sizeof(h));
        return MKI_GEMM_ERR_INVALID;
    }
    *dctas = D;
    return 0;
}

extern "C" int mki_moe_preload(char *msg, size_t len)
{
    const void *k[] = {(const void *)moe_dispatch_kernel, combine_for(MKI_BF16),
                       combine_for(MKI_F16), combine_for(MKI_F32),
                       moe_gemm_kernel_of<false>(false, false, 1),
                       moe_gemm_kernel_of<false>(false, true, 1),
                       moe_gemm_kernel_of<false>(true, false, 1),
                       moe_gemm_kernel_of<false>(true, true, 1),
                       moe_gemm_kernel_of<false>(false, false, 2),
                       moe_gemm_kernel_of<false>(false, true, 2),
                       moe_gemm_kernel_of<false>(true, false, 2),
                       moe_gemm_kernel_of<false>(true, true, 2),
                       moe_gemm_kernel_of<true>(false, false, 1),
                       moe_gemm_kernel_of<true>(false, true, 1),
                       moe_gemm_kernel_of<true>(true, false, 1),
                       moe_gemm_kernel_of<true>(true, true, 1),
                       moe_gemm_kernel_of<true>(false, false, 2),
                       moe_gemm_kernel_of<true>(false, true, 2),
                       moe_gemm_kernel_of<true>(true, false, 2),
                       moe_gemm_kernel_of<true>(true, true, 2),
                       moe_layer_kernel_of(false, false, 1), moe_layer_kernel_of(false, true, 1),
                       moe_layer_kernel_of(true, false, 1), moe_layer_kernel_of(true, true, 1),
                       moe_layer_kernel_of(false, false, 2), moe_layer_kernel_of(false, true, 2),
                       moe_layer_kernel_of(true, false, 2), moe_layer_kernel_of(true, true, 2)};
    for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        cudaFuncAttributes a;
        cudaError_t err = cudaFuncGetAttributes(&a, k[i]);
        if (err == cudaSuccess && i == 0)
            err = cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)dispatch_smem(MKI_MOE_MAXE, MKI_MOE_MAXK));
        if (err == cudaSuccess && i >= 4)
            err = cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       mki::gemm::kSmemBytes);
        if (err != cudaSuccess) {
            snprintf(msg, len, "loading the MoE kernels: %s", cudaGetErrorString(err));
            return (int)err;
        }
    }
    return mki_moe_net_preload(msg, len);
}
