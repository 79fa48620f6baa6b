/*
 * gemm_rs.cu - the device side of mkGemmReduceScatter: the GEMM engine
 * with hooks that order the tiles by destination (kernels/ops/gemm_rs.h:
 * rounds over the peers, own rows lagged), store a peer's tiles as fp32
 * partials into its slot and raise its flag, and, for this rank's own
 * tiles, add the peers' partials (after its own, in rank order) before
 * storing C.
 *
 *   every CTA            e = calls + 1 (shared memory)
 *   a peer tile          consumers: the outbox tile it % MKI_GRS_RING is
 *                        free once the movers are past iteration
 *                        it - MKI_GRS_RING; the TMA store of the fp32
 *                        tile into it (local memory); MKI_GRS_SIGNAL_KB
 *                        k-blocks into their next tile's mainloop (or at
 *                        its epilogue, if shorter; the store has
 *                        completed): posted = it + 1
 *                        movers (warps 1-3 of the producer warpgroup):
 *                        once per peer, wait until it released e - 1; wait
 *                        posted > it; copy the tile into the peer's slot
 *                        (16-byte stores over NVLink); the peer's flag of
 *                        the tile's group += 1 (system scope); moved = it + 1
 *   an own tile          movers: once the producer has issued all but
 *                        the tile's last 8 k-blocks (pf_go > it), the rows
 *                        of every source's slot go into L2 (a bulk
 *                        prefetch; nothing waits for it)
 *                        consumer thread 128: every source's flag of the
 *                        group reaches its tile count (then cleared to 0);
 *                        all 256 consumer threads add the sources' slots
 *                        to their accumulators (their own partial first,
 *                        then the sources in rank order); store C
 *   last CTA out         calls = e, released = e (here and in the peers'
 *                        peer_released[me])
 *
 * Communication stays out of the mainloop and out of the epilogue: the
 * epilogue's store goes to local memory, and the link is driven by warps
 * that the mainloop leaves idle (measured on 2 H100s: storing the
 * partials straight over NVLink from the epilogue cost 1.39x the GEMM at
 * 8192^3, bench/NOTES.md).  The only waits of the consumers are in the
 * epilogue of own tiles, which the schedule puts about three waves after
 * the peers computed the same tiles.  Every wait on a peer has a deadline
 * and watches the abort word (kernels/rt/wait.cuh).
 */
#ifdef MKI_GRS_TRACE /* lab builds: the engine's timeline points (gemm_engine.cuh) */
#define MKI_LAB_TS(h, it, w) h.lab_ts(it, w)
#endif
#ifdef MKI_GRS_TE /* lab builds: the timeline in global memory (gemm_rs_te.cuh) */
#ifdef MKI_GRS_TRACE
#error "-DMKI_GRS_TE and -DMKI_GRS_TRACE are two lab builds: define one"
#endif
#include "ops/gemm_rs_te.cuh"
#define MKI_LAB_TS(h, it, w) grs_te_ts(it, w)
#endif
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm/gemm_launch.h"
#include "ops/gemm_rs.h"
#include "ops/gemm_rs_close.cuh"
#include "ops/gemm_rs_hooks.cuh"
#include "rt/wait.cuh"

using namespace mki;
using namespace mki::gemm;

namespace {

__device__ __forceinline__ void begin(const GrsHooks &h)
{
    grs.note.quit = 0;
    grs.gated = 0;
    grs.posted = 0;
    grs.moved = 0;
    grs.pf_go = 0;
    for (int i = 0; i < 4; ++i) mbar_init(&grs.cbar[i], 1); /* fenced by run_cta's init */
#ifdef MKI_GRS_TRACE
    for (int i = 0; i < 10; ++i) grs.ts[i] = 0;
    for (int i = 0; i < GRS_NSUM; ++i) grs.sum[i] = 0;
    grs.kind = 0;
    for (int i = 0; i < GRS_TL; ++i) grs.tl_k[i] = 0;
    GRS_STAMP(0);
#endif
#ifdef MKI_GRS_TE
    grs_te_cta_at(false);
#endif
    grs.e = *reinterpret_cast<volatile const uint64_t *>(&h.ctl[h.me]->calls) + 1;
    if (blockIdx.x == 0) st_relaxed_sys(&h.ctl[h.me]->cur, grs.e);
}

/* One thread per CTA, after its work: report a noted failure; the last
 * CTA out closes the call. */
__device__ void finish(const GrsHooks &h)
{
    mki_grs_ctl *ctl = h.ctl[h.me];
    note_report(h.rt, grs.note, grs.e);
#ifdef MKI_GRS_TE
    grs_te_cta_at(true);
#endif
#ifdef MKI_GRS_TRACE
    GRS_STAMP(8);
    if (grs.e == (uint64_t)(MKI_GRS_TRACE)) {
        long long d[10];
        for (int i = 1; i < 10; ++i) d[i] = grs.ts[i] ? (long long)(grs.ts[i] - grs.ts[0]) : -1;
        printf("TRACE rank %d cta %d kind %d t0 %llu comb_in %lld comb_ok %lld stored %lld "
               "done_in %lld gated %lld bcast %lld gather %lld end %lld summed %lld\n", h.me,
               (int)blockIdx.x, grs.kind, (unsigned long long)grs.ts[0], d[1], d[2], d[3], d[4],
               d[5], d[6], d[7], d[8], d[9]);
        const uint64_t *u = grs.sum;
        printf("TRACESUM rank %d cta %d own %llu peer %llu own_period %llu peer_period %llu "
               "flagwait %llu combine %llu outbox %llu mv_wait %llu mv_copy %llu\n", h.me,
               (int)blockIdx.x, (unsigned long long)u[GRS_S_NOWN],
               (unsigned long long)u[GRS_S_NPEER], (unsigned long long)u[GRS_S_OWN_PERIOD],
               (unsigned long long)u[GRS_S_PEER_PERIOD], (unsigned long long)u[GRS_S_FLAGWAIT],
               (unsigned long long)u[GRS_S_COMBINE], (unsigned long long)u[GRS_S_OUTBOX],
               (unsigned long long)u[GRS_S_MV_WAIT], (unsigned long long)u[GRS_S_MV_COPY]);
        for (int i = 0; i < GRS_TL; ++i)
            if (grs.tl_k[i])
                printf("TL %d %d %d %d %u %u %u %u %u\n", h.me, (int)blockIdx.x, i,
                       (int)grs.tl_k[i], grs.tl_in[i], grs.tl_out[i], grs.tl_x[0][i],
                       grs.tl_x[1][i], grs.tl_x[2][i]);
    }
#endif
    __threadfence();
    if (atomicAdd(&ctl->exits, 1u) != gridDim.x - 1) return;
    ctl->exits = 0;
    if (h.grp[h.me] > 1) { /* groups of several tiles: cleared here */
        const int ng = (h.nb[h.me] * h.nnb + h.grp[h.me] - 1) / h.grp[h.me];
        for (int j = 0; j < h.P; ++j)
            for (int g = 0; g < ng; ++g) ctl->flag[j][g] = 0;
    }
    for (int j = 0; h.ar && j < h.P - 1; ++j) { /* the inbox's, likewise */
        const int s = (h.me + j + 1) % h.P;
        if (h.grp[s] <= 1) continue;
        const int ng = (h.nb[s] * h.nnb + h.grp[s] - 1) / h.grp[s];
        for (int g = 0; g < ng; ++g) h.agflag[h.me][(size_t)j * MKI_GRS_MAXFLAGS + g] = 0;
    }
    grs_close(h.ctl, h.me, h.P, grs.e);
}

template <bool kF16, bool kTransB, int kCM, typename H>
__device__ __forceinline__ void grs_body(const GemmParams &p, const H &h)
{
    extern __shared__ char smem[];
    if (threadIdx.x == 0) begin(h); /* run_cta syncs before any use */
    run_cta<kF16, kTransB, kCM, H>(p, h, blockIdx.x, gridDim.x, smem);
    __syncwarp();
    __syncthreads();
    if (threadIdx.x == 128) finish(h);
}

template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    grs_kernel(const __grid_constant__ GemmParams p, const __grid_constant__ GrsHooks h)
{
    grs_body<kF16, kTransB, kCM>(p, h);
}

/* The plan's wide_movers: the same with GrsHooksTwo (its bytes a GrsHooks's). */
static_assert(sizeof(GrsHooksTwo) == sizeof(GrsHooks), "GrsHooksTwo adds no member");
template <bool kF16, bool kTransB, int kCM>
__global__ void __launch_bounds__(kThreads, 1)
    grs_kernel_two(const __grid_constant__ GemmParams p, const __grid_constant__ GrsHooksTwo h)
{
    grs_body<kF16, kTransB, kCM>(p, h);
}

/* Nothing to compute: the call still counts (calls, released). */
__global__ void grs_idle_kernel(const __grid_constant__ GrsHooks h)
{
    if (threadIdx.x == 0) {
        begin(h);
        finish(h);
    }
}

__global__ void grs_convert_kernel(const float *in, void *out, int dtype, size_t count)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        if (dtype == MKI_F16) static_cast<__half *>(out)[i] = __float2half_rn(in[i]);
        else static_cast<__nv_bfloat16 *>(out)[i] = __float2bfloat16_rn(in[i]);
    }
}

const void *fused_kernel(bool f16, bool tb, int cm, bool two)
{
    if (two) return MKI_ENGINE_KERNEL(grs_kernel_two, f16, tb, cm);
    return MKI_ENGINE_KERNEL(grs_kernel, f16, tb, cm);
}

int cuda_fail(char *msg, size_t len, const char *what, cudaError_t e)
{
    if (msg && len) snprintf(msg, len, "gemm_rs: %s: %s", what, cudaGetErrorString(e));
    return MKI_GEMM_ERR_CUDA;
}

/* Everything but the tensor maps and the schedule. */
void fill_hooks(const mki_grs_launch *l, int cm, GrsHooks *h, int *units)
{
    memset(h, 0, sizeof(*h));
    h->P = l->nlocal;
    h->me = l->rt.local;
    h->nnb = (int)((l->n + BN - 1) / BN);
    h->group_m = MKI_GEMM_GROUP_M;
    h->n = (int)l->n;
    h->c_type = l->dtype; /* enum mki_dtype and mki_dtype_t agree */
    h->ld = l->ld;
    h->S = l->slices > 1 ? l->slices : 1;
    h->direct = h->S > 1;
    h->slot_elems = (long long)l->m_max * l->ld;
    if (h->S > 1) {
        h->sstep = mki_grs_slice_cols(l->n);
        h->sld = h->S * h->sstep;
        h->sslab = (long long)l->m_max * h->sld;
    } else {
        h->sstep = 0;
        h->sld = l->ld;
        h->sslab = h->slot_elems;
    }
    h->c = l->c;
    h->bank = (const float *)l->bank[h->me];
    h->ar = l->ar;
    h->nkb = (int)((l->k + BK - 1) / BK);
    h->es = l->dtype == MKI_F32 ? 4 : 2;
    h->c_full = (char *)l->c_full;
    h->vstart[0] = 0;
    for (int d = 0; d < h->P; ++d) {
        const int64_t rows = l->row_off[d + 1] - l->row_off[d];
        h->row_off[d] = (int)l->row_off[d];
        h->nb[d] = (int)((rows + BM - 1) / BM);
        h->vstart[d + 1] = h->vstart[d] + (h->nb[d] + cm - 1) / cm * cm;
        h->grp[d] = (int)mki_grs_group((int64_t)h->nb[d] * h->nnb);
        h->ctl[d] = l->ctl[d];
        h->inbox[d] = l->inbox[d];
        h->agflag[d] = l->agctl[d] ? &l->agctl[d]->agflag[0][0] : nullptr;
        units[d] = mki_gemm_num_units(h->nb[d], h->nnb, cm) * h->S;
    }
    h->row_off[h->P] = (int)l->row_off[h->P];
    h->rt = l->rt;
}

} // namespace

extern "C" int mki_grs_describe(const struct mki_grs_launch *l, struct mki_launch_desc *d,
                                char *msg, size_t len)
{
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    const bool idle = l->m == 0 || l->n == 0;
    /* CTAs in pairs (B tiles shared by multicast) when the grid is even,
     * unless the padding tiles (an owner's odd last M-block) would be
     * over an eighth of the work: a decode-sized M (one block per owner)
     * would compute twice its tiles and need two waves. */
    int cm = !idle && l->ctas >= 2 && l->ctas % 2 == 0 ? 2 : 1;
    if (cm == 2) {
        int64_t real = 0, pad = 0;
        for (int q = 0; q < l->nlocal; ++q) {
            const int64_t nb = (l->row_off[q + 1] - l->row_off[q] + BM - 1) / BM;
            real += nb;
            pad += nb % 2;
        }
        if (pad * 8 > real) cm = 1;
    }
    GrsHooks hh;
    int units[MKI_MAXLOCAL] = {0};
    fill_hooks(l, cm, &hh, units);
    if (idle) {
        d->fn = (const void *)grs_idle_kernel;
        d->grid = 1;
        d->block = 32;
        d->cluster = 1;
        d->exact = 1;
        return mki_launch_arg(d, &hh, sizeof(hh)) ? MKI_GEMM_ERR_INVALID : MKI_GEMM_OK;
    }
    /* The peers' partials of own unit k come from their round k, are
     * posted to the movers a few k-blocks into the next unit of the CTA
     * that computed one (kEarlySignal; at its end before: the movers sat
     * idle a whole mainloop), then copied and flagged: a lag of
     * about three waves of units over the P slots of a round lets them
     * land first (gemm_rs.h; with the stores in the epilogue, one wave
     * measured 1.31x our GEMM alone at 2048x8192x4096 against 1.25x for
     * two, 2 ranks on one H100).  A
     * flag of g > 1 tiles also covers tiles of
     * units up to (g - 1) bands of columns later (grouped order: group_m
     * / cm units per column): the lag must pass them too, so that every
     * wait is on an earlier (round, slot) than its own. */
    const int wave = l->ctas / cm;
    int lag = 3 * ((wave + hh.P - 1) / hh.P) + 2;
    if (hh.grp[hh.me] > 1) lag += hh.grp[hh.me] * (MKI_GEMM_GROUP_M / cm) + 1;
    hh.lag = lag;
    mki_grs_make_sched(hh.P, hh.me, units, lag, &hh.sched);

    mki_gemm_args a;
    memset(&a, 0, sizeof(a));
    a.m = l->m;
    a.n = l->n;
    a.k = l->k;
    a.a = l->a;
    a.b = l->b;
    a.d = l->bank[hh.me]; /* a descriptor only: every tile has its own target */
    a.ldd = l->ld;
    a.in_type = (mki_dtype_t)l->dtype;
    a.out_type = MKI_DT_F32;
    a.trans_b = l->trans_b;
    a.alpha = 1.0f;
    a.num_ctas = l->ctas;
    a.cluster_m = cm;
    mki_gemm_device dev;
    mki_gemm_plan pl;
    int r = query_device(&dev, msg, len);
    if (!r) r = mki_gemm_validate(&a, &dev, &pl, msg, len);
    GemmParams p;
    if (!r) r = make_params(&a, &pl, &p, msg, len);
    if (r) return r;
    p.num_m_blk = hh.vstart[hh.P];
    p.num_tiles = p.num_m_blk * p.num_n_blk;
    p.cluster_m = cm;
    p.num_units = hh.sched.pos0[hh.sched.nseg];
    p.m = p.num_m_blk * BM;
    int grid = l->ctas;
    if (grid > p.num_units * cm) grid = p.num_units * cm;
    if (grid < cm) grid = cm;
    for (int q = 0; q < hh.P; ++q)
        hh.dst[q] = (float *)(l->bank[q] + (size_t)(q != hh.me ? mki_grs_slot(hh.me, q, hh.P)
                                                                : hh.P - 1) *
                                               (size_t)hh.sslab * 4);
    if (!l->outbox || ((uintptr_t)l->outbox % 16) != 0) {
        snprintf(msg, len, "gemm_rs: no outbox (%p) for the fp32 tiles", l->outbox);
        return MKI_GEMM_ERR_INVALID;
    }
    hh.outbox = (const float *)l->outbox;
    for (int q = 0; hh.direct && q < hh.P; ++q) {
        /* rows: the owner's (the store clips there); columns: its slices */
        const int64_t rows = l->row_off[q + 1] - l->row_off[q];
        if (rows == 0) continue; /* never a target */
        if ((r = encode_out_map(&hh.tm_slot[q], hh.dst[q], MKI_DT_F32, (uint64_t)rows,
                                (uint64_t)hh.sld, (uint64_t)hh.sld, msg, len)))
            return r;
    }
    if ((r = encode_out_map(&hh.tm_out, l->outbox, MKI_DT_F32,
                            (uint64_t)grid * MKI_GRS_RING * BM, (uint64_t)BN, (uint64_t)BN, msg,
                            len)))
        return r;
    /* Whole tiles: the combine loads the sources' partials by TMA (slot
     * rows of ld = n rounded to 4 fp32: 16-byte strides); it needs a
     * source (one rank runs the unfused sequence: src/ops/gemm_rs.c) */
    hh.m_max = (int)l->m_max;
    if (!hh.direct && hh.P < 2) {
        snprintf(msg, len, "gemm_rs: the fused kernel needs 2 or more ranks (%d)", hh.P);
        return MKI_GEMM_ERR_INVALID;
    }
    if (!hh.direct && l->m_max > 0 &&
        (r = encode_out_map(&hh.tm_bank, l->bank[hh.me], MKI_DT_F32,
                            (uint64_t)(hh.P - 1) * (uint64_t)l->m_max, (uint64_t)l->n,
                            (uint64_t)l->ld, msg, len)))
        return r;
    const int64_t m_me = l->row_off[hh.me + 1] - l->row_off[hh.me];
    if (m_me > 0 && (((uintptr_t)l->c % 16) != 0 || l->n % 8 != 0)) {
        snprintf(msg, len, "gemm_rs: C (%p, rows of %lld elements) cannot take TMA stores: "
                 "16-byte aligned rows needed", l->c, (long long)l->n);
        return MKI_GEMM_ERR_INVALID;
    }
    if (m_me > 0 &&
        (r = encode_out_map(&hh.tm_c, l->c, (mki_dtype_t)l->dtype, (uint64_t)m_me,
                            (uint64_t)l->n, (uint64_t)l->n, msg, len)))
        return r;
    d->fn = fused_kernel(l->dtype == MKI_F16, l->trans_b != 0, cm, l->two_rows != 0);
    d->grid = (unsigned)grid;
    d->block = kThreads;
    d->cluster = (unsigned)cm;
    d->smem = kSmemBytes;
    if (mki_launch_arg(d, &p, sizeof(p)) || mki_launch_arg(d, &hh, sizeof(hh))) {
        snprintf(msg, len, "gemm_rs: kernel parameters of %zu bytes do not fit",
                 sizeof(p) + sizeof(hh));
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

extern "C" int mki_grs_convert(const float *in, void *out, int dtype, size_t count, void *stream,
                               char *msg, size_t len)
{
    if (count == 0) return MKI_GEMM_OK;
    size_t blocks = (count + 255) / 256;
    if (blocks > 1024) blocks = 1024;
    grs_convert_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(in, out, dtype, count);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? MKI_GEMM_OK : cuda_fail(msg, len, "the conversion kernel", e);
}

extern "C" int mki_grs_preload(char *msg, size_t len)
{
    const void *engine[2][8];
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 8; i++)
            engine[t][i] = fused_kernel(i & 1, (i >> 1) & 1, (i >> 2) & 1 ? 2 : 1, t != 0);
    const void *others[] = {(const void *)grs_idle_kernel, (const void *)grs_convert_kernel};
    int r = preload_engine(engine[0], others, 2, "gemm_rs", msg, len);
    return r ? r : preload_engine(engine[1], others, 0, "gemm_rs", msg, len);
}

#ifdef MKI_GRS_TE
/* Lab builds: the last call's records (gemm_rs_te.cuh) as TE lines on
 * stdout, once per process: rank, CTA, SM, start, end (ns), then each
 * tile as kind:first_stage:mainloop_end:first_load. */
extern "C" void mki_grs_te_dump(int rank)
{
    static int done;
    if (done) return;
    done = 1;
    static unsigned long long tl[GRS_TE_CTAS][GRS_TE_IT][3], cta[GRS_TE_CTAS][3];
    static unsigned char kind[GRS_TE_CTAS][GRS_TE_IT];
    if (cudaMemcpyFromSymbol(tl, grs_te_tl, sizeof tl) != cudaSuccess ||
        cudaMemcpyFromSymbol(cta, grs_te_cta, sizeof cta) != cudaSuccess ||
        cudaMemcpyFromSymbol(kind, grs_te_kind_of, sizeof kind) != cudaSuccess) {
        printf("TE %d: the records could not be read\n", rank);
        return;
    }
    for (int c = 0; c < GRS_TE_CTAS; ++c) {
        if (!cta[c][0]) continue;
        printf("TE %d %d %llu %llu %llu", rank, c, cta[c][2], cta[c][0], cta[c][1]);
        for (int i = 0; i < GRS_TE_IT && tl[c][i][1]; ++i)
            printf(" %d:%llu:%llu:%llu", (int)kind[c][i], tl[c][i][0], tl[c][i][1], tl[c][i][2]);
        printf("\n");
    }
    fflush(stdout);
}
#endif
