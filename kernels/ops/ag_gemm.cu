/*
 * ag_gemm.cu - the device side of mkAllGatherGemm: the GEMM engine with
 * hooks that put this rank's rows first and make the producer wait for the
 * chunk signal of rows that come from a peer.
 *
 * The all-gather itself uses no SM: the copy engines move the chunks and
 * raise the signals (src/ops/ag_gemm.c enqueues them on side streams), so
 * every SM computes.  A chunk's rows are waited for once per tile, before
 * the tile's first k-block; the wait has a deadline and polls the abort
 * word (kernels/common/devrt.cuh).  After its tiles, CTA 0 waits for the
 * last chunk of every peer, so that a call never ends before every peer's
 * copies into this rank's bank have landed (the bank reuse rule in
 * src/ops/ag_gemm.h rests on it).
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm/gemm_launch.h"
#undef MKI_HD /* gemm_sched.h and devrt.h each define their own */
#include "ops/ag_gemm.h"
/* devrt.cuh defines functions with external linkage that collectives.cu
 * defines too: keep ours apart. */
namespace agg_rt {
#include "rt/wait.cuh"
}

namespace {

using namespace mki::gemm;

/* A failed wait of the CTA.  The producer thread, which runs with 40
 * registers (setmaxnreg), only notes it here and sets `quit` so that its
 * later waits return at once and the pipeline drains (garbage in, but the
 * kernel ends); a consumer thread records it after the tiles (agg_fail):
 * recording inline in the producer made ptxas spill. */
struct AggFailure {
    int quit, kind, peer, chunk, phase;
    unsigned long long expected, seen;
};
__shared__ AggFailure agg_failure;

/* MKT_AGG_PROF (measurements): when the CTA started and how long its
 * producer spun on chunk signals that were not there yet. */
struct AggProf {
    unsigned long long t0, wait_ns;
    unsigned nwait;
};
__shared__ AggProf agg_prof;

/* The protocol of kernels/common/devrt.cuh's fail(): the first failing
 * waiter of this rank writes the error record (claim word), a timeout
 * raises every local rank's abort word. */
__device__ __forceinline__ void agg_fail(const mki_coll_params &p, const AggFailure &f)
{
    unsigned long long *claim = (unsigned long long *)(p.ws[p.me] + MKI_WS_CLAIM);
    if (atomicCAS(claim, 0ull, 1ull) == 0ull) {
        mki_err_record *r = p.err;
        r->kind = f.kind;
        r->op = p.op;
        r->rank = p.me;
        r->peer = f.peer;
        r->channel = 0;
        r->chunk = f.chunk;
        r->phase = f.phase;
        r->expected = f.expected;
        r->seen = f.seen;
        r->epoch = p.epoch;
        __threadfence_system();
        r->valid = 1;
        __threadfence_system();
    }
    if (f.kind == MKI_ERR_TIMEOUT)
        for (int q = 0; q < p.nranks; q++) {
            uint64_t *a = (uint64_t *)(p.ws[q] + MKI_WS_ABORT);
            if (agg_rt::mki::ld_relaxed_sys(a) == 0)
                agg_rt::mki::st_relaxed_sys(a, (uint64_t)p.me + 1);
        }
    __threadfence_system();
}

/* Spin until *addr >= target, the local abort word rises (a peer failed:
 * MKI_ERR_REMOTE naming it) or the deadline passes (MKI_ERR_TIMEOUT). */
__device__ __forceinline__ bool agg_wait(const mki_coll_params &p, const uint64_t *addr,
                                         uint64_t target, int peer, int chunk, int phase)
{
    uint64_t v = agg_rt::mki::ld_acquire_sys(addr);
    if (v >= target) return true;
    if (agg_failure.quit) return false;
    const uint64_t *abort_word = (const uint64_t *)(p.ws[p.me] + MKI_WS_ABORT);
    const uint64_t t0 = agg_rt::mki::globaltimer();
    for (uint32_t n = 1;; n++) {
        v = agg_rt::mki::ld_acquire_sys(addr);
        if (v >= target) {
            agg_prof.wait_ns += agg_rt::mki::globaltimer() - t0;
            agg_prof.nwait++;
            return true;
        }
        if ((n & 31) != 0) continue;
        uint64_t ab = agg_rt::mki::ld_relaxed_sys(abort_word);
        if (ab != 0 || agg_rt::mki::globaltimer() - t0 > p.timeout_ns) {
            agg_failure.kind = ab ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT;
            agg_failure.peer = ab ? (int)ab - 1 : peer;
            agg_failure.chunk = chunk;
            agg_failure.phase = phase;
            agg_failure.expected = target;
            agg_failure.seen = v;
            agg_failure.quit = 1;
            return false;
        }
    }
}

static_assert(MKI_AGG_TILE_ROWS == BM, "src/ops/ag_gemm.h: tile rows");

struct AggHooks {
    static constexpr bool kWaitA = true;
    static constexpr bool kSignal = false;
    static constexpr bool kASrc = true;
    CUtensorMap tm_own; /* the caller's A (m_local x K), when own_d1 > own_d0 */
    int own_lo, own_d0, own_d1;
    int nsrc, pm0, num_pm;
    int row_off[MKI_MAXLOCAL + 1]; /* 32-bit: M < 2^31, and the producer */
    int chunk_rows[MKI_MAXLOCAL];  /* runs on 40 registers */
    uint64_t *sig;
    uint64_t tgt; /* call number: the value every signal of the call reaches */
    unsigned long long *prof; /* MKT_AGG_PROF: 4 words per CTA, or null */
    mki_coll_params cp;

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
        for (int c = (int)((unsigned)(r0 - lo) / cr); c <= c1; ++c) {
            if (!agg_wait(cp, sig + (uint64_t)s * MKI_AGG_MAXCHUNKS + c, tgt, s, (int)c, 0))
                return;
        }
    }

    __device__ __forceinline__ void wait_a(const GemmParams &p, TileCoord t, int kb) const
    {
        if (kb != 0) return;
        const int r0 = t.m_blk * BM;
        const int r1 = r0 + BM < p.m ? r0 + BM : p.m;
        /* my own rows are in place before the kernel starts */
        for (int s = 0; s < nsrc; ++s)
            if (s != cp.me) wait_rows(s, r0, r1);
    }

    /* Every peer's last chunk (one signal even for a peer with no rows). */
    __device__ __forceinline__ void wait_all() const
    {
        for (int s = 0; s < nsrc; ++s) {
            if (s == cp.me) continue; /* in place before the kernel */
            const int m = row_off[s + 1] - row_off[s];
            int last = (m + chunk_rows[s] - 1) / chunk_rows[s] - 1;
            if (last < 0) last = 0;
            if (!agg_wait(cp, sig + (uint64_t)s * MKI_AGG_MAXCHUNKS + last, tgt, s, (int)last, 1))
                return;
        }
    }

    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        return DefaultHooks().target(p, t);
    }
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord) const {}
};

template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    agg_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ AggHooks h)
{
    extern __shared__ char smem[];
    if (threadIdx.x == 0) { /* run_cta syncs before use */
        agg_failure.quit = 0;
        agg_prof.t0 = agg_rt::mki::globaltimer();
        agg_prof.wait_ns = 0;
        agg_prof.nwait = 0;
    }
    run_cta<kF16, kTransB, kCM, AggHooks>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();    /* the producer lane rejoins its warp: bar.sync is .aligned */
    __syncthreads(); /* the producer's failure note, if any */
    /* Thread 128 leads a consumer warpgroup (232 registers). */
    if (threadIdx.x == 128) {
        if (!agg_failure.quit && blockIdx.x == 0) h.wait_all();
        if (agg_failure.quit) agg_fail(h.cp, agg_failure);
        if (h.prof) {
            unsigned long long *w = h.prof + 4ull * blockIdx.x;
            w[0] = agg_prof.t0;
            w[1] = agg_rt::mki::globaltimer();
            w[2] = agg_prof.wait_ns;
            w[3] = agg_prof.nwait;
        }
    }
}

/* No rows or no columns: nothing to compute, but the call still waits for
 * every rank's signal (the bank reuse rule). */
__global__ void agg_wait_kernel(const __grid_constant__ AggHooks h)
{
    if (threadIdx.x == 0) {
        agg_failure.quit = 0;
        h.wait_all();
        if (agg_failure.quit) agg_fail(h.cp, agg_failure);
    }
}

int fail(char *msg, size_t len, const char *what, cudaError_t e)
{
    if (msg && len) snprintf(msg, len, "ag_gemm: %s: %s", what, cudaGetErrorString(e));
    return MKI_GEMM_ERR_CUDA;
}

template <bool kF16, bool kTransB, int kCM>
int launch_cm(const GemmParams &p, const AggHooks &h, int grid, cudaStream_t s, char *msg,
              size_t len)
{
    auto kern = agg_kernel<kF16, kTransB, kCM>;
    static int max_clusters = -1; /* per instantiation */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = kCM;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cfg.gridDim = dim3(grid);
    cudaError_t e = cudaSuccess;
    if (max_clusters < 0) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e == cudaSuccess) e = cudaOccupancyMaxActiveClusters(&max_clusters, kern, &cfg);
        if (e != cudaSuccess) return fail(msg, len, "occupancy", e);
    }
    /* CTAs spin on chunk signals: the whole grid must be co-resident. */
    if (grid > max_clusters * kCM) grid = max_clusters * kCM;
    if (grid < kCM) grid = kCM;
    cfg.gridDim = dim3(grid);
    e = cudaLaunchKernelEx(&cfg, kern, p, h);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? MKI_GEMM_OK : fail(msg, len, "launch", e);
}

template <bool kF16, bool kTransB>
int launch_t(const GemmParams &p, const AggHooks &h, int grid, cudaStream_t s, char *msg,
             size_t len)
{
    if (p.cluster_m == 2) return launch_cm<kF16, kTransB, 2>(p, h, grid, s, msg, len);
    return launch_cm<kF16, kTransB, 1>(p, h, grid, s, msg, len);
}

template <bool kF16, bool kTransB, int kCM>
int preload_one(char *msg, size_t len)
{
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, agg_kernel<kF16, kTransB, kCM>);
    return e == cudaSuccess ? 0 : fail(msg, len, "loading the fused kernel", e);
}

} // namespace

extern "C" int mki_agg_preload(char *msg, size_t len)
{
    int r = 0;
    if (!r) r = preload_one<false, false, 1>(msg, len);
    if (!r) r = preload_one<false, false, 2>(msg, len);
    if (!r) r = preload_one<false, true, 1>(msg, len);
    if (!r) r = preload_one<false, true, 2>(msg, len);
    if (!r) r = preload_one<true, false, 1>(msg, len);
    if (!r) r = preload_one<true, false, 2>(msg, len);
    if (!r) r = preload_one<true, true, 1>(msg, len);
    if (!r) r = preload_one<true, true, 2>(msg, len);
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, agg_wait_kernel);
    if (!r && e != cudaSuccess) r = fail(msg, len, "loading the wait kernel", e);
    return r;
}

extern "C" int mki_agg_launch(const struct mki_agg_launch *l, void *stream, char *msg,
                              size_t len)
{
    cudaStream_t s = (cudaStream_t)stream;
    AggHooks h;
    memset(&h, 0, sizeof(h));
    h.nsrc = l->nsrc;
    for (int i = 0; i <= l->nsrc; ++i) h.row_off[i] = (int)l->row_off[i];
    for (int i = 0; i < l->nsrc; ++i) h.chunk_rows[i] = (int)l->chunk_rows[i];
    h.sig = l->sig;
    h.tgt = l->target;
    h.prof = (unsigned long long *)l->prof;
    h.cp = l->cp;

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
    a.beta = 0.0f;
    a.num_ctas = l->ctas;
    a.stream = stream;
    mki_gemm_device dev;
    mki_gemm_plan pl;
    int r = query_device(&dev, msg, len);
    if (!r) r = mki_gemm_validate(&a, &dev, &pl, msg, len);
    if (r) return r;
    if (pl.noop || l->m == 0 || l->n == 0) {
        agg_wait_kernel<<<1, 32, 0, s>>>(h);
        cudaError_t e = cudaGetLastError();
        return e == cudaSuccess ? 0 : fail(msg, len, "launch of the wait kernel", e);
    }
    GemmParams p;
    if ((r = make_params(&a, &pl, &p, msg, len))) return r;
    const int64_t lo = l->row_off[l->cp.me], hi = l->row_off[l->cp.me + 1];
    if (l->own && l->own_d1 > l->own_d0) {
        /* the rows [own_d0, own_d1) must be whole tiles of mine */
        if (l->own_d0 < lo || l->own_d1 > hi || l->own_d0 % BM || l->own_d1 % BM) {
            snprintf(msg, len, "ag_gemm: own rows [%lld, %lld) are not whole tiles of "
                     "[%lld, %lld)", (long long)l->own_d0, (long long)l->own_d1,
                     (long long)lo, (long long)hi);
            return MKI_GEMM_ERR_INVALID;
        }
        if ((r = encode_2d(&h.tm_own, l->own, a.in_type, (uint64_t)l->k, (uint64_t)(hi - lo),
                           (uint64_t)l->k, BK, BM, msg, len)))
            return r;
        h.own_lo = (int)lo;
        h.own_d0 = (int)l->own_d0;
        h.own_d1 = (int)l->own_d1;
    }
    h.num_pm = (p.num_m_blk + p.cluster_m - 1) / p.cluster_m;
    h.pm0 = (int)((l->row_off[l->cp.me] / BM) / p.cluster_m) % h.num_pm;
    /* Every CTA of the grid may spin: use the validated grid (<= SMs). */
    const bool f16 = l->dtype == MKI_F16;
    if (f16)
        return l->trans_b ? launch_t<true, true>(p, h, pl.grid, s, msg, len)
                          : launch_t<true, false>(p, h, pl.grid, s, msg, len);
    return l->trans_b ? launch_t<false, true>(p, h, pl.grid, s, msg, len)
                      : launch_t<false, false>(p, h, pl.grid, s, msg, len);
}
