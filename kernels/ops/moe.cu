/*
 * moe.cu - the kernels of mkMoEDispatch and mkMoECombine (the protocol:
 * moe.h).  One CTA of MKI_MOE_THREADS threads per SM of the plan; every
 * wait goes through the runtime's deadline wait (wait.cuh).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "ops/moe.h"
#include "rt/copy.cuh"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"

using namespace mki;

namespace {

constexpr int NT = MKI_MOE_THREADS;
constexpr int NW = NT / 32;
constexpr int WIN = MKI_MOE_WINDOW;

/* Dynamic shared memory of the dispatch: hist/scan [E], cursor [E],
 * rows of the window [WIN * topk], slots of the window [WIN * P], the
 * window's destination masks [WIN]. */
__host__ __device__ inline size_t dispatch_smem(int E, int K)
{
    return sizeof(int32_t) * (2 * (size_t)E + (size_t)WIN * K + (size_t)WIN * MKI_MAXLOCAL + WIN);
}

__device__ __forceinline__ uint64_t ld_vol(const uint64_t *p)
{
    return *reinterpret_cast<const volatile uint64_t *>(p);
}

/* A failure found by the kernel itself (bad input on the device): the
 * error record, and the node's abort words raised, so that the peers (who
 * may not have seen it) stop waiting for this rank. */
__device__ __noinline__ void fail_input(const mki_rt_dev &rt, int kind, int peer, int chunk,
                                        int phase, uint64_t expected, uint64_t seen, uint64_t e,
                                        bool raise)
{
    fail(rt, kind, wait_site{peer, (int)blockIdx.x, chunk, phase}, expected, seen, e);
    if (raise) {
        raise_node_abort(rt);
        __threadfence_system();
    }
}

/* Exclusive prefix sum of a[0 .. n) in shared memory, in place, by the
 * whole CTA; returns the total (every thread). */
__device__ int64_t block_exscan(int32_t *a, int n, int64_t *tmp /* [NW + 1] */)
{
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

/* The grid barrier of the dispatch (every CTA is co-resident: the launch
 * shrinks the grid to what is). */
__device__ bool grid_barrier(const mki_moe_params &p, uint64_t *ctr, uint64_t target, uint64_t e,
                             volatile int *quit)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(reinterpret_cast<unsigned long long *>(ctr), 1ull);
        wait_geq(p.rt, ctr, target, wait_site{p.rt.rank, (int)blockIdx.x, -1, 9}, e, quit);
        __threadfence();
    }
    __syncthreads();
    return *quit == 0;
}

/* An inbox slot's tag equal to the call number e (a grown inbox is not
 * zeroed: its words may hold anything, so not >=), by lane 0 of a warp,
 * under the runtime's deadline and abort word; true unless quitting. */
__device__ __noinline__ void wait_tag_spin(const mki_rt_dev &rt, const uint64_t *tag, uint64_t e,
                                           int src, int slot, volatile int *quit)
{
    const uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        const uint64_t v = ld_acquire_sys(tag);
        if (v == e) return;
        if (n & 31) continue;
        if (*quit) return;
        const uint64_t w = stop_value(rt, hstop_due(n, t0));
        if (w || globaltimer() - t0 > rt.timeout_ns) {
            fail(rt, w ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT,
                 wait_site{w ? (int)w - 1 : src, (int)blockIdx.x, slot, 2}, e, v, e);
            *quit = 1;
            return;
        }
    }
}

__device__ __forceinline__ bool warp_wait_tag(const mki_rt_dev &rt, const uint64_t *tag, uint64_t e,
                                              int src, int slot, volatile int *quit)
{
    if ((threadIdx.x & 31) == 0 && ld_acquire_sys(tag) != e) wait_tag_spin(rt, tag, e, src, slot, quit);
    __syncwarp();
    return __all_sync(0xffffffffu, *quit == 0);
}

/* Last CTA out of a counter: true in thread 0 of the last one. */
__device__ bool last_out(uint64_t *ctr)
{
    __threadfence_system();
    const unsigned long long G = gridDim.x;
    return atomicAdd(reinterpret_cast<unsigned long long *>(ctr), 1ull) == G - 1;
}

__global__ void __launch_bounds__(NT, 1) moe_dispatch_kernel(const __grid_constant__ mki_moe_params p)
{
    extern __shared__ int32_t dyn[];
    __shared__ uint64_t s_e;
    __shared__ volatile int s_quit;
    __shared__ int s_bad;
    __shared__ int64_t s_tmp[NW + 1];
    __shared__ int32_t s_dcur[MKI_MAXLOCAL], s_rows_of[MKI_MAXLOCAL];
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x;
    const int P = p.P, me = p.me, E = p.experts, EL = p.el, K = p.topk;
    const int RW = MKI_MOE_REC_WORDS(E);
    mki_moe_ctl *ctl = p.ctl[me];
    int32_t *hist = dyn;                    /* [E]: counts, then the scan */
    int32_t *cur = dyn + E;                 /* [E]: this CTA's next row per expert */
    int32_t *wrows = cur + E;               /* [WIN * K] */
    int32_t *wslot = wrows + WIN * K;       /* [WIN * 8] */
    int32_t *wmask = wslot + WIN * MKI_MAXLOCAL; /* [WIN] */
    if (tid == 0) {
        s_e = ld_vol(&ctl->dcalls) + 1;
        s_quit = enter_ok(p.rt, b, s_e) ? 0 : 1;
        s_bad = INT32_MAX;
    }
    for (int i = tid; i < E; i += NT) hist[i] = 0;
    if (tid < MKI_MAXLOCAL) s_dcur[tid] = 0;
    __syncthreads();
    if (s_quit) return;
    const uint64_t e = s_e;
    const int64_t T = p.tokens;
    const int64_t t0 = T * b / G, t1 = T * (b + 1) / G;

    /* ---- count ---- */
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
    if (!grid_barrier(p, &ctl->dbar, (uint64_t)G, e, &s_quit)) return;

    /* ---- record: CTA 0 sums the CTAs' and stores it in every rank ---- */
    if (b == 0) {
        if (tid == 0)
            for (int q = 0; q < P; q++)
                if (q != me &&
                    !wait_geq(p.rt, &ctl->peer_unpacked[q], e - 1, wait_site{q, 0, -1, 0}, e, &s_quit))
                    break;
        __syncthreads();
        if (s_quit) return;
        for (int i = tid; i < RW; i += NT) {
            int32_t v = 0;
            if (i < E + MKI_MAXLOCAL) {
                for (int c = 0; c < G; c++) v += __ldcg(p.scratch + (size_t)c * RW + i);
            } else if (i == E + MKI_MAXLOCAL) { /* the first bad slot: the first CTA's */
                for (int c = 0; c < G && v == 0; c++) v = __ldcg(p.scratch + (size_t)c * RW + i);
            } else if (i == E + MKI_MAXLOCAL + 1) {
                v = (int32_t)T;
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
            if (!wait_geq(p.rt, &ctl->rec_tag[s], e, wait_site{s, b, -1, 1}, e, &s_quit)) break;
    __syncthreads();
    if (s_quit) return;
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
            if (b == 0) fail_input(p.rt, kind, peer, chunk, 0, need, have, e, false);
            s_quit = 1;
        }
    }
    __syncthreads();
    if (s_quit) return;

    /* ---- where this CTA's rows go ---- */
    block_exscan(hist, E, s_tmp);           /* hist[i]: rows of all experts before i */
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

    /* ---- send, a window of tokens at a time ---- */
    const int64_t rb = p.row_bytes;
    const char *x = static_cast<const char *>(p.x);
    char *recv = static_cast<char *>(p.recv);
    const int MW = MKI_MOE_META_WORDS(K);
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
                    st_release_sys(reinterpret_cast<uint64_t *>(m + MW - 2), MKI_MOE_TAG(p.tag_hi, e));
            }
        }
        __syncthreads();
    }

    /* ---- unpack every source's slots ---- */
    int64_t base = 0;
    for (int k = 1; k < P && !s_quit; k++) {
        const int s = (me + k) % P;
        base = 0;
        for (int q = 0; q < s; q++) base += R[(size_t)q * RW + E + me];
        const int64_t n_s = R[(size_t)s * RW + E + me];
        for (int64_t i = (int64_t)b * NW + wid; i < n_s; i += (int64_t)G * NW) {
            const int64_t slot = base + i;
            const int32_t *m = p.meta[me] + slot * MW;
            if (!warp_wait_tag(p.rt, reinterpret_cast<const uint64_t *>(m + MW - 2),
                               MKI_MOE_TAG(p.tag_hi, e), s,
                               (int)slot, &s_quit))
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

    /* ---- finish ---- */
    __syncthreads();
    if (s_quit) return;
    if (tid == 0 && last_out(&ctl->dexit)) {
        ctl->dbar = 0;
        ctl->dsent = 0;
        ctl->dexit = 0;
        *reinterpret_cast<volatile uint64_t *>(&ctl->dcalls) = e;
        __threadfence_system();
        for (int q = 0; q < P; q++) st_release_sys(&p.ctl[q]->peer_unpacked[me], e);
    }
}

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f(float v) { return v; }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f(float v) { return __float2half(v); }
template <> __device__ __forceinline__ float from_f(float v) { return v; }

template <typename T>
__global__ void __launch_bounds__(NT, 1) moe_combine_kernel(const __grid_constant__ mki_moe_params p)
{
    __shared__ uint64_t s_c;
    __shared__ volatile int s_quit;
    __shared__ int64_t s_rows;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x;
    const int P = p.P, me = p.me, E = p.experts, EL = p.el, K = p.topk;
    mki_moe_ctl *ctl = p.ctl[me];
    if (tid == 0) {
        s_c = ld_vol(&ctl->ccalls) + 1;
        s_quit = enter_ok(p.rt, b, s_c) ? 0 : 1;
        s_rows = p.off[EL];
        if (!s_quit && (s_rows < 0 || s_rows > p.cap || (s_rows > 0 && !p.y))) {
            if (b == 0)
                fail_input(p.rt, MKI_ERR_BADLAYOUT, me, -1, 0, (uint64_t)p.cap,
                           (uint64_t)s_rows, s_c, true);
            s_quit = 1;
        }
    }
    __syncthreads();
    if (s_quit) return;
    const uint64_t c = s_c;
    const int64_t rb = p.row_bytes;

    /* ---- stage y for the peers ---- */
    if (P > 1) {
        if (tid == 0)
            for (int q = 0; q < P; q++)
                if (q != me &&
                    !wait_geq(p.rt, &ctl->peer_pulled[q], c - 1, wait_site{q, b, -1, 0}, c, &s_quit))
                    break;
        __syncthreads();
        if (s_quit) return;
        const int64_t v = s_rows * rb / 16;
        const uint4 *src = static_cast<const uint4 *>(p.y);
        uint4 *dst = reinterpret_cast<uint4 *>(p.stage[me]);
        for (int64_t i = (int64_t)b * NT + tid; i < v; i += (int64_t)G * NT) dst[i] = __ldcs(src + i);
        __syncthreads();
        if (tid == 0 && last_out(&ctl->cstaged))
            for (int q = 0; q < P; q++)
                if (q != me) st_release_sys(&p.ctl[q]->peer_staged[me], c);
    }

    /* ---- pull and sum, a token per warp ---- */
    constexpr int V = 16 / sizeof(T);       /* elements per 16-byte piece */
    const int64_t pieces = rb / 16;
    const int64_t T_ = p.tokens;
    for (int64_t t = (int64_t)b * NW + wid; t < T_; t += (int64_t)G * NW) {
        int v = lane < K ? p.idx[t * K + lane] : -1;
        int row = lane < K && v >= 0 ? p.send_rows[t * K + lane] : -1;
        const float wt = lane < K && v >= 0 ? (p.w ? p.w[t * K + lane] : 1.0f) : 0.0f;
        const bool bad = lane < K && (v < -1 || v >= E || (v >= 0 && (row < 0 || row >= p.cap)));
        if (__any_sync(0xffffffffu, bad)) {
            const unsigned who = __ballot_sync(0xffffffffu, bad);
            if (bad && __ffs(who) - 1 == lane)
                fail_input(p.rt, MKI_ERR_BADLAYOUT, me, (int)(t * K + lane), 1,
                           (uint64_t)p.cap, (uint64_t)(int64_t)row, c, true);
            s_quit = 1;
            break;
        }
        /* wait for the stages this token reads */
        const int d = v >= 0 ? v / EL : -1;
        const bool remote = v >= 0 && d != me;
        if (remote && !wait_geq(p.rt, &ctl->peer_staged[d], c, wait_site{d, b, (int)t, 3}, c, &s_quit))
            row = -1;
        if (__any_sync(0xffffffffu, s_quit != 0)) break;
        const char *srcj = v >= 0 ? (d == me ? static_cast<const char *>(p.y) : p.stage[d]) + (int64_t)row * rb
                                  : nullptr;
        char *o = static_cast<char *>(p.out) + t * rb;
        /* every lane takes every pass (the shuffles need the whole warp);
         * lanes past the row's end load and store nothing */
        for (int64_t p0 = 0; p0 < pieces; p0 += 32) {
            const int64_t pc = p0 + lane;
            const bool in_row = pc < pieces;
            float acc[V];
#pragma unroll
            for (int q = 0; q < V; q++) acc[q] = 0.0f;
            for (int j = 0; j < K; j++) {
                const char *s = (const char *)(uintptr_t)__shfl_sync(
                    0xffffffffu, (unsigned long long)(uintptr_t)srcj, j);
                const float wj = __shfl_sync(0xffffffffu, wt, j);
                if (!s || !in_row) continue;
                union { uint4 u; T h[V]; } in;
                in.u = ld16(s + pc * 16);
#pragma unroll
                for (int q = 0; q < V; q++) acc[q] = fmaf(wj, to_f<T>(in.h[q]), acc[q]);
            }
            if (!in_row) continue;
            union { uint4 u; T h[V]; } res;
#pragma unroll
            for (int q = 0; q < V; q++) res.h[q] = from_f<T>(acc[q]);
            *reinterpret_cast<uint4 *>(o + pc * 16) = res.u;
        }
    }
    __syncthreads();
    if (s_quit) return;
    if (tid == 0 && last_out(&ctl->cexit)) {
        ctl->cstaged = 0;
        ctl->cexit = 0;
        *reinterpret_cast<volatile uint64_t *>(&ctl->ccalls) = c;
        __threadfence_system();
        for (int q = 0; q < P; q++)
            if (q != me) st_release_sys(&p.ctl[q]->peer_pulled[me], c);
    }
}

const void *combine_for(int dtype)
{
    switch (dtype) {
    case MKI_BF16: return (const void *)moe_combine_kernel<__nv_bfloat16>;
    case MKI_F16: return (const void *)moe_combine_kernel<__half>;
    default: return (const void *)moe_combine_kernel<float>;
    }
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

extern "C" int mki_moe_preload(char *msg, size_t len)
{
    const void *k[] = {(const void *)moe_dispatch_kernel, combine_for(MKI_BF16),
                       combine_for(MKI_F16), combine_for(MKI_F32)};
    for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        cudaFuncAttributes a;
        cudaError_t err = cudaFuncGetAttributes(&a, k[i]);
        if (err == cudaSuccess && i == 0)
            err = cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)dispatch_smem(MKI_MOE_MAXE, MKI_MOE_MAXK));
        if (err != cudaSuccess) {
            snprintf(msg, len, "loading the MoE kernels: %s", cudaGetErrorString(err));
            return (int)err;
        }
    }
    return 0;
}
