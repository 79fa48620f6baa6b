/*
 * moe_dispatch.cuh - the dispatch of the MoE calls as the work of one CTA
 * (the protocol: moe.h), for two kernels of kernels/ops/moe.cu:
 *
 *   mkMoEDispatch: every CTA of its own launch (NT = MKI_MOE_THREADS);
 *   mkMoEDispatchGemm: the first dctas CTAs of the grouped GEMM's launch
 *     (NT = the engine's 384 threads, kFused), which then join the GEMM.
 *
 * What kFused adds, so that the GEMM of an expert's rows can start while
 * other experts' rows are still on their way:
 *   - the tokens' rows are placed where mkMoEDispatch places them (the same
 *     layout: send_rows, recv_src), but each CTA sends its (token,
 *     destination) pairs in the order of the pair's first expert on that
 *     destination (a counting sort into p.order), so that every rank's
 *     local experts fill up in turn, the first ones first;
 *   - the unpack takes each source's slots CTA by CTA of the sender in
 *     turn (slot k of every sender CTA, then slot k + 1), since each of
 *     those fills its own range in expert order; the counts per sender CTA
 *     ride in the records (moe.h, MKI_MOE_REC_WORDS_FUSED);
 *   - every row placed (copied locally or unpacked) counts in p.ready[el]
 *     (a fence first), which the GEMM's tiles of expert el wait for;
 *   - CTA 0 builds the grouped GEMM's table of tiles once expert_offsets is
 *     known and raises ctl->gemm_ready = e (or e | MKI_MOE_GEMM_FAILED:
 *     no GEMM, an input error).
 *
 * Every wait goes through the runtime's deadline wait (wait.cuh).
 */
#pragma once

#include <stdint.h>

#include "gemm/gemm_grouped.cuh"
#include "ops/moe.h"
#include "ops/moe_sync.cuh"
#include "rt/copy.cuh"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"

namespace mki {
namespace moe {

constexpr int WIN = MKI_MOE_WINDOW;

/* Dynamic shared memory of the dispatch: hist/scan [E], cursor [E],
 * rows of the window [WIN * topk], slots of the window [WIN * P], the
 * window's destination masks [WIN]; kFused adds its own (fused_smem). */
__host__ __device__ inline size_t dispatch_smem(int E, int K)
{
    return sizeof(int32_t) * (2 * (size_t)E + (size_t)WIN * K + (size_t)WIN * MKI_MAXLOCAL + WIN);
}

/* kFused's shared memory after the dispatch's: the sort's counts [EL + 1],
 * the unpack's ranges [2 * P * dctas], the table's first [EL + 1], part
 * [NT] and order of groups [EL]. */
__host__ __device__ inline size_t fused_smem(int E, int K, int EL, int nt)
{
    return dispatch_smem(E, K) + sizeof(int32_t) * ((size_t)EL + 1 +
                                                    2 * MKI_MAXLOCAL * MKI_MOE_FUSED_MAXD +
                                                    EL + 1 + nt + EL);
}

/* Exclusive prefix sum of a[0 .. n) in shared memory, in place, by the
 * whole CTA of NT threads; returns the total (every thread). */
template <int NT>
__device__ int64_t block_exscan(int32_t *a, int n, int64_t *tmp /* [NT / 32 + 1] */)
{
    constexpr int NW = NT / 32;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int per = (n + NT - 1) / NT, lo = min(n, tid * per), hi = min(n, lo + per);
    int64_t s = 0;
    for (int i = lo; i < hi; i++) s += a[i];
    int64_t x = s;
    for (int o = 1; o < 32; o <<= 1) {
        const int64_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) tmp[wid] = x;
    __syncthreads();
    if (tid == 0) {
        int64_t r = 0;
        for (int w = 0; w < NW; w++) {
            const int64_t v = tmp[w];
            tmp[w] = r;
            r += v;
        }
        tmp[NW] = r;
    }
    __syncthreads();
    int64_t run = tmp[wid] + x - s;
    for (int i = lo; i < hi; i++) {
        const int32_t v = a[i];
        a[i] = (int32_t)run;
        run += v;
    }
    const int64_t total = tmp[NW];
    __syncthreads();
    return total;
}

/* Copy one row (bytes, a multiple of 16) from src to up to n
 * destinations, by one warp: each 16-byte piece loaded once. */
__device__ __forceinline__ void warp_copy_row(char *const *dst, int n, const char *src,
                                              int64_t bytes, int lane)
{
    const int64_t v = bytes / 16;
    int64_t i = lane;
    for (; i + 96 < v; i += 128) {
        uint4 a = ld16(src + i * 16), b = ld16(src + (i + 32) * 16);
        uint4 c = ld16(src + (i + 64) * 16), d = ld16(src + (i + 96) * 16);
        for (int k = 0; k < n; k++) {
            uint4 *o = reinterpret_cast<uint4 *>(dst[k]);
            o[i] = a;
            o[i + 32] = b;
            o[i + 64] = c;
            o[i + 96] = d;
        }
    }
    for (; i < v; i += 32) {
        uint4 a = ld16(src + i * 16);
        for (int k = 0; k < n; k++) reinterpret_cast<uint4 *>(dst[k])[i] = a;
    }
}

/* The local expert that row r of this rank's received rows belongs to:
 * hist[me * EL + el] is the first row of local expert el plus base. */
__device__ __forceinline__ int expert_of_row(const int32_t *first, int EL, int32_t r)
{
    int lo = 0, hi = EL - 1; /* the last el with first[el] <= r */
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (first[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* floor(T x / G) for 0 <= T < 2^31, 0 <= x <= G <= 2^10, without a
 * 64-bit division: T = hi 2^16 + lo, each part divided in 32 bits. */
__device__ __forceinline__ uint32_t mulhi_div(int64_t T, int x, int G)
{
    const uint32_t t = (uint32_t)T, hi = t >> 16, lo = t & 0xffffu;
    const uint32_t a = hi * (uint32_t)x;           /* < 2^25 */
    const uint32_t qa = a / (uint32_t)G, ra = a % (uint32_t)G;
    const uint32_t b = (ra << 16) + lo * (uint32_t)x; /* < 2^26 + 2^26 */
    return (qa << 16) + b / (uint32_t)G;
}

/* A heavy expert (kFused): more than four times the mean rows of its rank's
 * experts and more than 256 rows.  Its rows come from most tokens, so it
 * can only be complete when the dispatch ends: the sort ignores it and the
 * GEMM takes its tiles last, so that the other experts' tiles overlap the
 * dispatch.  scan: the rows of every expert before v (all ranks' experts in
 * turn); total: all rows; rows_of_d: the rows at v's rank. */
__device__ __forceinline__ bool heavy_expert(const int32_t *scan, int E, int64_t total, int v,
                                             int EL, int32_t rows_of_d)
{
    const int64_t r = (v + 1 < E ? (int64_t)scan[v + 1] : total) - scan[v];
    return r > 256 && r * EL > 4 * (int64_t)rows_of_d;
}

/* Per-CTA state of the dispatch kept for the caller (the fused kernel). */
struct dispatch_out {
    int table_set; /* CTA 0: gemm_ready was raised (either way) */
};

/* The dispatch of CTA b of G (every thread of the CTA calls it); dyn: the
 * dynamic shared memory (dispatch_smem, or fused_smem with kFused); note:
 * nullptr (failures reported at once), or the CTA's note (kFused: see
 * wait_ge).  Returns false when the CTA quit (an error was recorded or
 * noted). */
template <int NT, bool kFused>
__device__ __forceinline__ bool dispatch_cta(const mki_moe_params &p, int G, int b, int32_t *dyn,
                                             dispatch_out *out, cta_note *note)
{
    constexpr int NW = NT / 32;
    __shared__ uint64_t s_e;
    __shared__ volatile int s_quit;
    __shared__ int s_bad, s_tbad;
    __shared__ int64_t s_tmp[NW + 1];
    __shared__ int32_t s_dcur[MKI_MAXLOCAL], s_rows_of[MKI_MAXLOCAL];
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int P = p.P, me = p.me, E = p.experts, EL = p.el, K = p.topk;
    /* kFused: the same stride on every rank, whatever its G (the sender's
     * G rides in its record) */
    const int RW = kFused ? MKI_MOE_REC_WORDS_FUSED(E, MKI_MOE_FUSED_MAXD) : MKI_MOE_REC_WORDS(E);
    mki_moe_ctl *ctl = p.ctl[me];
    int32_t *hist = dyn;                    /* [E]: counts, then the scan */
    int32_t *cur = dyn + E;                 /* [E]: this CTA's next row per expert */
    int32_t *wrows = cur + E;               /* [WIN * K] */
    int32_t *wslot = wrows + WIN * K;       /* [WIN * 8] */
    int32_t *wmask = wslot + WIN * MKI_MAXLOCAL; /* [WIN] */
    int32_t *kcnt = wmask + WIN;            /* kFused: [EL + 1] */
    int32_t *rng = kcnt + EL + 1;           /* kFused: [2 * 8 * MAXD] */
    int32_t *tfirst = rng + 2 * MKI_MAXLOCAL * MKI_MOE_FUSED_MAXD; /* kFused: [EL + 1] */
    int32_t *tpart = tfirst + EL + 1;       /* kFused: [NT] */
    int32_t *tperm = tpart + NT;            /* kFused: [EL] */
    if (tid == 0) {
        s_e = ld_vol(&ctl->dcalls) + 1;
        s_quit = enter<kFused>(p.rt, b, s_e, note) ? 0 : 1;
        s_bad = INT32_MAX;
        out->table_set = 0;
    }
    for (int i = tid; i < E; i += NT) hist[i] = 0;
    if (tid < MKI_MAXLOCAL) s_dcur[tid] = 0;
    __syncthreads();
    if (s_quit) return false;
    const uint64_t e = s_e;
    const int64_t T = p.tokens;
    /* [T b / G, T (b + 1) / G) in 32-bit arithmetic (T < 2^31, G <= 2^10):
     * a 64-bit division is a subroutine call, which the GEMM engine's
     * register split in the same kernel cannot afford */
    const int64_t t0 = (int64_t)mulhi_div(T, b, G), t1 = (int64_t)mulhi_div(T, b + 1, G);

    /* ---- count ---- */
    if constexpr (kFused) { /* the row counts and the GEMM's unit counter */
        for (int i = b * NT + tid; i <= EL; i += G * NT) p.ready[i] = 0;
        if (p.zero2) /* the layer's second schedule (moe.h) */
            for (int64_t i = b * NT + tid; i < p.nzero2; i += G * NT) p.zero2[i] = 0;
    }
    for (int64_t i = t0 * K + tid; i < t1 * K; i += NT) {
        const int v = p.idx[i];
        if (v < -1 || v >= E) atomicMin(&s_bad, (int)i);
        else if (v >= 0) atomicAdd(&hist[v], 1);
    }
    for (int64_t t = t0 + tid; t < t1; t += NT) {
        unsigned m = 0;
        for (int j = 0; j < K; j++) {
            const int v = p.idx[t * K + j];
            if (v >= 0 && v < E) m |= 1u << (v / EL);
        }
        for (; m; m &= m - 1) atomicAdd(&s_dcur[__ffs(m) - 1], 1);
    }
    __syncthreads();
    {
        int32_t *mine = p.scratch + (size_t)b * RW;
        for (int i = tid; i < E; i += NT) mine[i] = hist[i];
        if (tid < MKI_MAXLOCAL) mine[E + tid] = tid < P ? s_dcur[tid] : 0;
        if (tid == 0) mine[E + MKI_MAXLOCAL] = s_bad == INT32_MAX ? 0 : s_bad + 1;
    }
    if (!grid_barrier<kFused>(p, &ctl->dbar, (uint64_t)G, e, &s_quit, note)) return false;

    /* ---- record: CTA 0 sums the CTAs' and stores it in every rank ---- */
    if (b == 0) {
        if (tid == 0)
            for (int q = 0; q < P; q++)
                if (q != me &&
                    !wait_ge<kFused>(p.rt, &ctl->peer_unpacked[q], e - 1, q, -1, 0, e, &s_quit, note))
                    break;
        __syncthreads();
        if (s_quit) return false;
        for (int i = tid; i < RW; i += NT) {
            int32_t v = 0;
            if (i < E + MKI_MAXLOCAL) {
                for (int c = 0; c < G; c++) v += __ldcg(p.scratch + (size_t)c * RW + i);
            } else if (i == E + MKI_MAXLOCAL) { /* the first bad slot: the first CTA's */
                for (int c = 0; c < G && v == 0; c++) v = __ldcg(p.scratch + (size_t)c * RW + i);
            } else if (i == E + MKI_MAXLOCAL + 1) {
                v = (int32_t)T;
            } else if (kFused && i == E + MKI_MAXLOCAL + 2) {
                v = G; /* the dispatch CTAs of this rank */
            } else if (kFused && i == E + MKI_MAXLOCAL + 3) {
                v = p.staged && p.recv_src; /* this rank's layer can push (moe.h) */
            } else if (kFused && i >= MKI_MOE_REC_WORDS(E)) {
                /* each CTA's (token, rank) pairs per destination */
                const int c = (i - MKI_MOE_REC_WORDS(E)) / MKI_MAXLOCAL;
                const int d = (i - MKI_MOE_REC_WORDS(E)) % MKI_MAXLOCAL;
                v = c < G ? __ldcg(p.scratch + (size_t)c * RW + E + d) : 0;
            }
            for (int q = 0; q < P; q++) p.rec[q][(size_t)me * RW + i] = v;
        }
        __syncthreads();
        if (tid == 0) {
            __threadfence_system();
            for (int q = 0; q < P; q++) st_release_sys(&p.ctl[q]->rec_tag[me], e);
        }
    }

    /* ---- verdict: every rank's record is here ---- */
    if (tid == 0)
        for (int s = 0; s < P; s++)
            if (!wait_ge<kFused>(p.rt, &ctl->rec_tag[s], e, s, -1, 1, e, &s_quit, note)) break;
    __syncthreads();
    if (s_quit) return false;
    const int32_t *R = p.rec[me];
    for (int i = tid; i < E; i += NT) {
        int32_t c = 0;
        for (int s = 0; s < P; s++) c += R[(size_t)s * RW + i];
        hist[i] = c;                        /* rows of expert i, all sources */
    }
    if (tid < MKI_MAXLOCAL) s_rows_of[tid] = 0;
    __syncthreads();
    for (int i = tid; i < E; i += NT) atomicAdd(&s_rows_of[i / EL], hist[i]);
    __syncthreads();
    if (tid == 0) {
        int kind = 0, peer = -1, chunk = -1;
        uint64_t need = 0, have = 0;
        for (int s = 0; s < P && !kind; s++) {
            const int32_t bad = R[(size_t)s * RW + E + MKI_MAXLOCAL];
            if (bad) kind = MKI_ERR_BADINDEX, peer = s, chunk = bad - 1;
        }
        for (int d = 0; d < P && !kind; d++)
            if ((int64_t)s_rows_of[d] > p.cap)
                kind = MKI_ERR_CAPACITY, peer = d, need = (uint64_t)s_rows_of[d],
                have = (uint64_t)p.cap;
        if (kind) {
            if (b == 0) {
                if constexpr (kFused) note_fail(*note, kind, peer, chunk, 0, need, have);
                else fail_input(p.rt, kind, peer, chunk, 0, need, have, e, false);
            }
            s_quit = 1;
        }
    }
    __syncthreads();
    if (s_quit) return false;

    /* ---- where this CTA's rows go ---- */
    block_exscan<NT>(hist, E, s_tmp);       /* hist[i]: rows of all experts before i */
    for (int i = tid; i < E; i += NT) {
        const int d = i / EL;
        int64_t c = hist[i] - hist[d * EL];  /* the expert's first row on rank d */
        for (int s = 0; s < me; s++) c += R[(size_t)s * RW + i];
        for (int q = 0; q < b; q++) c += __ldcg(p.scratch + (size_t)q * RW + i);
        cur[i] = (int32_t)c;
    }
    if (tid < P) {
        int64_t c = 0;
        for (int s = 0; s < me; s++) c += R[(size_t)s * RW + E + tid];
        for (int q = 0; q < b; q++) c += __ldcg(p.scratch + (size_t)q * RW + E + tid);
        s_dcur[tid] = (int32_t)c;
    }
    if (b == 0)
        for (int i = tid; i <= EL; i += NT)
            p.off[i] = i < EL ? (int64_t)hist[me * EL + i] - hist[me * EL]
                              : (int64_t)s_rows_of[me];
    __syncthreads();
    if constexpr (kFused) {
        /* the GEMM's table of tiles over this rank's experts, then its
         * signal: the compute CTAs start on it */
        if (b == 0) {
            /* the heavy experts last */
            if (tid == 0) {
                int64_t total = 0;
                for (int d = 0; d < P; d++) total += s_rows_of[d];
                int q = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int el = 0; el < EL; el++)
                        if (heavy_expert(hist, E, total, me * EL + el, EL, s_rows_of[me]) == (pass == 1))
                            tperm[q++] = el;
            }
            __syncthreads();
            gemm::group_table_build(p.off, EL, p.cap, p.table, false, tid, NT, tfirst, tpart,
                                    &s_tbad, tperm);
            if (tid == 0) {
                /* the layer's push (moe.h): every rank runs the one-launch
                 * layer (its grid may be refused on some ranks under MPS)
                 * and every rank's tokens' slots fit a stage of cap rows;
                 * the same verdict on every rank */
                bool push = true;
                for (int s = 0; s < P && push; s++)
                    push = R[(size_t)s * RW + E + MKI_MAXLOCAL + 3] != 0 &&
                           (int64_t)R[(size_t)s * RW + E + MKI_MAXLOCAL + 1] * K <= p.cap;
                *reinterpret_cast<volatile uint64_t *>(&ctl->push_e) = push ? e : 0;
                __threadfence();
                st_release_sys(&ctl->gemm_ready, e);
                out->table_set = 1;
            }
        }
    }

    const int64_t rb = p.row_bytes;
    const char *x = static_cast<const char *>(p.x);
    char *recv = static_cast<char *>(p.recv);
    const int MW = MKI_MOE_META_WORDS(K);
    if constexpr (!kFused) {
        /* ---- send, a window of tokens at a time ---- */
        for (int64_t w0 = t0; w0 < t1; w0 += WIN) {
            const int nt = (int)min((int64_t)WIN, t1 - w0);
            if (wid == 0) {
                for (int i = 0; i < nt; i++) {
                    const int64_t t = w0 + i;
                    const int v = lane < K ? p.idx[t * K + lane] : -1;
                    const bool ok = v >= 0;
                    const unsigned lt = (1u << lane) - 1u;
                    const unsigned same = __match_any_sync(0xffffffffu, ok ? v : -2 - lane);
                    int row = -1;
                    if (ok) row = cur[v] + __popc(same & lt);
                    __syncwarp();
                    if (ok && (same & lt) == 0) cur[v] += __popc(same);
                    if (lane < K) wrows[i * K + lane] = row;
                    const int d = ok ? v / EL : -1;
                    const unsigned sd = __match_any_sync(0xffffffffu, ok ? d : -2 - lane);
                    const unsigned dm = __reduce_or_sync(0xffffffffu, ok ? 1u << d : 0u);
                    if (ok && (sd & lt) == 0) {
                        wslot[i * MKI_MAXLOCAL + d] = s_dcur[d];
                        s_dcur[d] += 1;
                    }
                    if (lane == 0) wmask[i] = (int)dm;
                    __syncwarp();
                }
            }
            __syncthreads();
            for (int i = tid; i < nt * K; i += NT) p.send_rows[w0 * K + i] = wrows[i];
            for (int it = wid; it < nt * P; it += NW) {
                const int i = it / P, d = it % P;
                if (!((wmask[i] >> d) & 1)) continue;
                const int64_t t = w0 + i;
                char *dst[MKI_MOE_MAXK];
                int n = 0;
                const int my_j = lane < K ? (int)p.idx[t * K + lane] : -1;
                const unsigned here = __ballot_sync(0xffffffffu, my_j >= 0 && my_j / EL == d);
                if (d == me) {
                    for (unsigned m = here; m; m &= m - 1) {
                        const int j = __ffs(m) - 1, row = wrows[i * K + j];
                        dst[n++] = recv + (int64_t)row * rb;
                    }
                    warp_copy_row(dst, n, x + t * rb, rb, lane);
                    if (lane < K && ((here >> lane) & 1)) {
                        const int row = wrows[i * K + lane];
                        if (p.recv_src) {
                            p.recv_src[2 * (int64_t)row] = me;
                            p.recv_src[2 * (int64_t)row + 1] = (int32_t)(t * K + lane);
                        }
                        if (p.recv_w) p.recv_w[row] = p.w[t * K + lane];
                    }
                } else {
                    const int slot = wslot[i * MKI_MAXLOCAL + d];
                    dst[0] = p.inbox[d] + (int64_t)slot * rb;
                    warp_copy_row(dst, 1, x + t * rb, rb, lane);
                    int32_t *m = p.meta[d] + (int64_t)slot * MW;
                    const int r = __popc(here & ((1u << lane) - 1u));
                    if (lane < K && ((here >> lane) & 1)) {
                        m[2 + r] = wrows[i * K + lane];
                        m[2 + K + r] = lane;
                        m[2 + 2 * K + r] = p.w ? __float_as_int(p.w[t * K + lane]) : 0;
                    }
                    if (lane == 0) {
                        m[0] = (int32_t)t;
                        m[1] = __popc(here);
                    }
                    /* the row and metadata (each lane fences its own stores),
                     * then the slot's tag */
                    __threadfence_system();
                    __syncwarp();
                    if (lane == 0)
                        st_release_sys(reinterpret_cast<uint64_t *>(m + MW - 2),
                                       MKI_MOE_TAG(p.tag_hi, e));
                }
            }
            __syncthreads();
        }
    } else {
        /* ---- rows, in token order (the layout mkMoEDispatch gives) ---- */
        for (int64_t w0 = t0; w0 < t1; w0 += WIN) {
            const int nt = (int)min((int64_t)WIN, t1 - w0);
            if (wid == 0) {
                for (int i = 0; i < nt; i++) {
                    const int64_t t = w0 + i;
                    const int v = lane < K ? p.idx[t * K + lane] : -1;
                    const bool ok = v >= 0;
                    const unsigned lt = (1u << lane) - 1u;
                    const unsigned same = __match_any_sync(0xffffffffu, ok ? v : -2 - lane);
                    int row = -1;
                    if (ok) row = cur[v] + __popc(same & lt);
                    __syncwarp();
                    if (ok && (same & lt) == 0) cur[v] += __popc(same);
                    if (lane < K) wrows[i * K + lane] = row;
                    __syncwarp();
                }
            }
            __syncthreads();
            for (int i = tid; i < nt * K; i += NT) p.send_rows[w0 * K + i] = wrows[i];
            __syncthreads();
        }
        /* ---- the (token, rank) pairs by the pair's first local expert
         * that is not heavy (pairs of heavy experts only: last) ---- */
        for (int i = tid; i <= EL; i += NT) kcnt[i] = 0;
        int64_t total = 0;
        for (int d = 0; d < P; d++) total += s_rows_of[d];
        __syncthreads();
        for (int pass = 0; pass < 2; pass++) {
            for (int64_t t = t0 + tid; t < t1; t += NT) {
                int first[MKI_MAXLOCAL];
#pragma unroll
                for (int d = 0; d < MKI_MAXLOCAL; d++) first[d] = EL;
                for (int j = 0; j < K; j++) {
                    const int v = p.idx[t * K + j];
                    if (v < 0) continue;
                    const int d = v / EL;
                    const int el = heavy_expert(hist, E, total, v, EL, s_rows_of[d])
                                       ? EL - 1 : v - d * EL;
#pragma unroll
                    for (int q = 0; q < MKI_MAXLOCAL; q++)
                        if (q == d && el < first[q]) first[q] = el;
                }
#pragma unroll
                for (int d = 0; d < MKI_MAXLOCAL; d++) {
                    if (first[d] == EL) continue;
                    if (pass == 0) {
                        atomicAdd(&kcnt[first[d]], 1);
                    } else {
                        const int at = atomicAdd(&kcnt[first[d]], 1);
                        p.order[t0 * P + at] = (int32_t)((t - t0) * MKI_MAXLOCAL + d);
                    }
                }
            }
            __syncthreads();
            if (pass == 0) block_exscan<NT>(kcnt, EL + 1, s_tmp);
        }
        const int npairs = kcnt[EL]; /* the scan's total: this CTA's pairs */
        /* ---- send, pair by pair in that order ---- */
        for (int it = wid; it < npairs; it += NW) {
            const int32_t code = p.order[t0 * P + it];
            const int64_t t = t0 + code / MKI_MAXLOCAL;
            const int d = code % MKI_MAXLOCAL;
            char *dst[MKI_MOE_MAXK];
            int n = 0;
            const int my_j = lane < K ? (int)p.idx[t * K + lane] : -1;
            const unsigned here = __ballot_sync(0xffffffffu, my_j >= 0 && my_j / EL == d);
            const int my_row = lane < K && ((here >> lane) & 1) ? p.send_rows[t * K + lane] : -1;
            if (d == me) {
                for (unsigned m = here; m; m &= m - 1) {
                    const int j = __ffs(m) - 1;
                    dst[n++] = recv + (int64_t)__shfl_sync(0xffffffffu, my_row, j) * rb;
                }
                warp_copy_row(dst, n, x + t * rb, rb, lane);
                if (my_row >= 0) {
                    if (p.recv_src) {
                        p.recv_src[2 * (int64_t)my_row] = me;
                        p.recv_src[2 * (int64_t)my_row + 1] = (int32_t)(t * K + lane);
                    }
                    if (p.recv_w) p.recv_w[my_row] = p.w[t * K + lane];
                }
                __threadfence();
                __syncwarp();
                if (my_row >= 0) count_ready(p.ready, my_j - me * EL, 1);
            } else {
                int slot = 0;
                if (lane == 0) slot = atomicAdd(&s_dcur[d], 1);
                slot = __shfl_sync(0xffffffffu, slot, 0);
                dst[0] = p.inbox[d] + (int64_t)slot * rb;
                warp_copy_row(dst, 1, x + t * rb, rb, lane);
                int32_t *m = p.meta[d] + (int64_t)slot * MW;
                const int r = __popc(here & ((1u << lane) - 1u));
                if (my_row >= 0) {
                    m[2 + r] = my_row;
                    m[2 + K + r] = lane;
                    m[2 + 2 * K + r] = p.w ? __float_as_int(p.w[t * K + lane]) : 0;
                }
                if (lane == 0) {
                    m[0] = (int32_t)t;
                    m[1] = __popc(here);
                }
                __threadfence_system();
                __syncwarp();
                if (lane == 0)
                    st_release_sys(reinterpret_cast<uint64_t *>(m + MW - 2), MKI_MOE_TAG(p.tag_hi, e));
            }
        }
        __syncthreads();
    }

    /* ---- unpack every source's slots ---- */
    if constexpr (!kFused) {
        int64_t base = 0;
        for (int k = 1; k < P && !s_quit; k++) {
            const int s = (me + k) % P;
            base = 0;
            for (int q = 0; q < s; q++) base += R[(size_t)q * RW + E + me];
            const int64_t n_s = R[(size_t)s * RW + E + me];
            for (int64_t i = (int64_t)b * NW + wid; i < n_s; i += (int64_t)G * NW) {
                const int64_t slot = base + i;
                const int32_t *m = p.meta[me] + slot * MW;
                if (!warp_wait_tag<kFused>(p.rt, reinterpret_cast<const uint64_t *>(m + MW - 2),
                                   MKI_MOE_TAG(p.tag_hi, e), s, (int)slot, &s_quit, note))
                    break;
                const int t = __ldcg(m), n = __ldcg(m + 1);
                char *dst[MKI_MOE_MAXK];
                for (int r = 0; r < n; r++) dst[r] = recv + (int64_t)__ldcg(m + 2 + r) * rb;
                warp_copy_row(dst, n, p.inbox[me] + slot * rb, rb, lane);
                if (lane < n) {
                    const int row = __ldcg(m + 2 + lane);
                    if (p.recv_src) {
                        p.recv_src[2 * (int64_t)row] = s;
                        p.recv_src[2 * (int64_t)row + 1] = t * K + __ldcg(m + 2 + K + lane);
                    }
                    if (p.recv_w) p.recv_w[row] = __int_as_float(__ldcg(m + 2 + 2 * K + lane));
                }
            }
        }
    } else if (P > 1) {
        /* Each source's slots, sender CTA by sender CTA in turn: round k
         * takes slot k of every sender CTA of every source (each sender CTA
         * fills its own range in expert order).  rng: the start and count
         * of (source index si, sender CTA q) at [2 * (si * MAXD + q)]. */
        constexpr int MD = MKI_MOE_FUSED_MAXD;
        const int NS = P - 1;
        int32_t maxn = 0;
        for (int i = tid; i < NS * MD; i += NT) {
            const int si = i / MD, q = i % MD, s = (me + 1 + si) % P;
            const int Gs = R[(size_t)s * RW + E + MKI_MAXLOCAL + 2]; /* the sender's CTAs */
            int64_t base = 0;
            int32_t n = 0;
            if (q < Gs) {
                for (int u = 0; u < s; u++) base += R[(size_t)u * RW + E + me];
                for (int u = 0; u < q; u++)
                    base += R[(size_t)s * RW + MKI_MOE_REC_WORDS(E) + u * MKI_MAXLOCAL + me];
                n = R[(size_t)s * RW + MKI_MOE_REC_WORDS(E) + q * MKI_MAXLOCAL + me];
            }
            rng[2 * i] = (int32_t)base;
            rng[2 * i + 1] = n;
            maxn = max(maxn, n);
        }
        /* the largest count: a max over the CTA through s_tmp */
        maxn = __reduce_max_sync(0xffffffffu, maxn);
        if (lane == 0) s_tmp[wid] = maxn;
        __syncthreads();
        if (tid == 0) {
            int64_t mx = 0;
            for (int w = 0; w < NW; w++) mx = max(mx, s_tmp[w]);
            s_tmp[NW] = mx;
        }
        __syncthreads();
        const int rounds = (int)s_tmp[NW], per_round = NS * MD;
        /* the first row of each local expert (this rank's part of hist) */
        const int32_t *efirst = hist + me * EL;
        for (int i = b * NW + wid; i < rounds * per_round && !s_quit; i += G * NW) {
            const int k = i / per_round;
            const int c = i - k * per_round;
            if (k >= rng[2 * c + 1]) continue;
            const int s = (me + 1 + c / MD) % P;
            const int64_t slot = rng[2 * c] + k;
            const int32_t *m = p.meta[me] + slot * MW;
            if (!warp_wait_tag<kFused>(p.rt, reinterpret_cast<const uint64_t *>(m + MW - 2),
                               MKI_MOE_TAG(p.tag_hi, e), s, (int)slot, &s_quit, note))
                break;
            const int t = __ldcg(m), n = __ldcg(m + 1);
            char *dst[MKI_MOE_MAXK];
            for (int r = 0; r < n; r++) dst[r] = recv + (int64_t)__ldcg(m + 2 + r) * rb;
            warp_copy_row(dst, n, p.inbox[me] + slot * rb, rb, lane);
            int row = -1;
            if (lane < n) {
                row = __ldcg(m + 2 + lane);
                if (p.recv_src) {
                    p.recv_src[2 * (int64_t)row] = s;
                    p.recv_src[2 * (int64_t)row + 1] = t * K + __ldcg(m + 2 + K + lane);
                }
                if (p.recv_w) p.recv_w[row] = __int_as_float(__ldcg(m + 2 + 2 * K + lane));
            }
            __threadfence();
            __syncwarp();
            if (row >= 0) count_ready(p.ready, expert_of_row(efirst, EL, row + efirst[0]), 1);
        }
    }

    /* ---- finish ---- */
    __syncthreads();
    if (s_quit) return false;
    if (tid == 0 && last_out(&ctl->dexit, G)) {
        ctl->dbar = 0;
        ctl->dsent = 0;
        ctl->dexit = 0;
        /* kFused: the kernel's last CTA out moves dcalls (moe.h) */
        *reinterpret_cast<volatile uint64_t *>(kFused ? &ctl->dok : &ctl->dcalls) = e;
        __threadfence_system();
        for (int q = 0; q < P; q++) st_release_sys(&p.ctl[q]->peer_unpacked[me], e);
    }
    return true;
}

} // namespace moe
} // namespace mki
