/*
 * moe_net.cu - the MoE calls on a communicator that spans nodes: the
 * kernels between the library's collectives (the sequence and its layout:
 * moe.h, "across nodes").  Every rank routes the gathered slots alike, so
 * that every rank finds the same bad id or the same rank over capacity and
 * stops before it writes anything.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/moe.h"
#include "rt/copy.cuh"
#include "rt/num.cuh"
#include "rt/ptx.cuh"
#include "rt/wait.cuh"

using namespace mki;

namespace {

constexpr int NT = 256;       /* count, copy, partial, convert */
constexpr int NT_SCAN = 1024;

using P_t = mki_moe_net_params;

__device__ __forceinline__ int64_t nslots(const P_t &p) { return (int64_t)p.P * p.tmax * p.topk; }

/* Slot i = (s, q): rank s's topk_idx[q] in the gathered blocks. */
__device__ __forceinline__ int32_t slot_id(const P_t &p, int64_t i)
{
    const int64_t tk = p.tmax * p.topk, s = i / tk;
    return p.gmeta[s * p.mwords + (i - s * tk)];
}

/* hist[c] = the slots of chunk c per expert, then the chunk's first bad id
 * (its offset in the chunk; INT32_MAX: none). */
__global__ void __launch_bounds__(NT) net_count(const __grid_constant__ P_t p)
{
    __shared__ int32_t h[MKI_MOE_MAXE];
    __shared__ int32_t s_bad;
    const int E = p.experts, tid = threadIdx.x;
    const int64_t S = nslots(p);
    for (int c = blockIdx.x; c < p.nchunk; c += gridDim.x) {
        for (int e = tid; e < E; e += NT) h[e] = 0;
        if (tid == 0) s_bad = INT32_MAX;
        __syncthreads();
        const int64_t lo = (int64_t)c * p.chunk, hi = lo + p.chunk < S ? lo + p.chunk : S;
        for (int64_t i = lo + tid; i < hi; i += NT) {
            const int32_t v = slot_id(p, i);
            if (v >= 0 && v < E) atomicAdd(&h[v], 1);
            else if (v != -1) atomicMin(&s_bad, (int)(i - lo));
        }
        __syncthreads();
        int32_t *row = p.hist + (size_t)c * (E + 1);
        for (int e = tid; e < E; e += NT) row[e] = h[e];
        if (tid == 0) row[E] = s_bad;
        __syncthreads();
    }
}

/* One CTA: the verdict (every rank alike), then the layout. */
__global__ void __launch_bounds__(NT_SCAN) net_scan(const __grid_constant__ P_t p)
{
    __shared__ int s_badc, s_over;
    const int E = p.experts, EL = p.el, tid = threadIdx.x;
    const int64_t tk = p.tmax * p.topk;
    int64_t *need = p.state + 2;
    if (tid == 0) s_badc = s_over = INT32_MAX;
    __syncthreads();
    /* an error recorded here already (a collective of this sequence that
     * failed, an earlier call): the gathered data may be stale; nothing
     * is written */
    if (claimed(p.rt)) {
        if (tid == 0) p.state[1] = 1;
        return;
    }
    for (int c = tid; c < p.nchunk; c += NT_SCAN)
        if (p.hist[(size_t)c * (E + 1) + E] != INT32_MAX) atomicMin(&s_badc, c);
    __syncthreads();
    if (s_badc != INT32_MAX) {
        if (tid == 0) {
            const int64_t i = (int64_t)s_badc * p.chunk + p.hist[(size_t)s_badc * (E + 1) + E];
            fail(p.rt, MKI_ERR_BADINDEX, wait_site{(int)(i / tk), 0, (int)(i % tk), 0}, 0, 0,
                 p.epoch);
            p.state[1] = 1;
        }
        return;
    }
    /* each expert's chunks made exclusive; start[e] its total for now */
    for (int e = tid; e < E; e += NT_SCAN) {
        int64_t run = 0;
        for (int c = 0; c < p.nchunk; c++) {
            int32_t *h = p.hist + (size_t)c * (E + 1) + e;
            const int32_t v = *h;
            *h = (int32_t)(run < INT32_MAX ? run : INT32_MAX);
            run += v;
        }
        p.start[e] = (int32_t)(run < INT32_MAX ? run : INT32_MAX); /* over: fails below */
    }
    __syncthreads();
    /* rank d's rows: its experts one after the other */
    for (int d = tid; d < p.P; d += NT_SCAN) {
        int64_t run = 0;
        for (int e = d * EL; e < (d + 1) * EL; e++) {
            const int64_t v = p.start[e];
            p.start[e] = (int32_t)(run < INT32_MAX ? run : INT32_MAX);
            run += v;
        }
        need[d] = run;
        if (run > p.cap) atomicMin(&s_over, d);
    }
    __syncthreads();
    if (s_over != INT32_MAX) {
        if (tid == 0) {
            fail(p.rt, MKI_ERR_CAPACITY, wait_site{s_over, 0, -1, 0}, (uint64_t)need[s_over],
                 (uint64_t)p.cap, p.epoch);
            p.state[1] = 1;
        }
        return;
    }
    for (int l = tid; l <= EL; l += NT_SCAN)
        p.off[l] = l < EL ? (int64_t)p.start[p.me * EL + l] : need[p.me];
    if (tid == 0) {
        p.state[0] = need[p.me];
        p.state[1] = 0;
    }
}

/* A warp per chunk, in order: each slot its row on its expert's rank. */
__global__ void __launch_bounds__(32) net_place(const __grid_constant__ P_t p)
{
    __shared__ int32_t cnt[MKI_MOE_MAXE];
    if (p.state[1]) return;
    const int E = p.experts, EL = p.el, lane = threadIdx.x;
    const int64_t S = nslots(p), tk = p.tmax * p.topk, mine = p.tokens * p.topk;
    for (int c = blockIdx.x; c < p.nchunk; c += gridDim.x) {
        const int32_t *h = p.hist + (size_t)c * (E + 1);
        for (int e = lane; e < E; e += 32) cnt[e] = p.start[e] + h[e];
        __syncwarp();
        const int64_t lo = (int64_t)c * p.chunk, hi = lo + p.chunk < S ? lo + p.chunk : S;
        for (int64_t base = lo; base < hi; base += 32) {
            const int64_t i = base + lane;
            const int32_t v = i < hi ? slot_id(p, i) : -1;
            const bool ok = v >= 0;
            const unsigned same = __match_any_sync(0xffffffffu, ok ? v : -1 - lane);
            const int r = __popc(same & ((1u << lane) - 1u));
            const int32_t row = ok ? cnt[v] + r : -1;
            __syncwarp();
            if (ok && r == 0) cnt[v] += __popc(same);
            __syncwarp();
            if (i < hi) {
                const int64_t s = i / tk, q = i - s * tk;
                if (ok && v / EL == p.me) p.src_of[row] = i;
                if (s == p.me && q < mine) p.send_rows[q] = row;
            }
        }
        __syncwarp();
    }
}

/* The rows received here, out of the gathered tokens. */
__global__ void __launch_bounds__(NT) net_copy(const __grid_constant__ P_t p)
{
    if (p.state[1]) return;
    const int64_t rows = p.state[0], tk = p.tmax * p.topk;
    const int lane = threadIdx.x & 31;
    const int64_t nw = (int64_t)gridDim.x * (NT / 32);
    for (int64_t r = (int64_t)blockIdx.x * (NT / 32) + (threadIdx.x >> 5); r < rows; r += nw) {
        const int64_t i = p.src_of[r], s = i / tk, q = i - s * tk, t = q / p.topk;
        const char *src = p.gx + (size_t)(s * p.tmax + t) * (size_t)p.row_bytes;
        char *dst = static_cast<char *>(p.recv) + (size_t)r * (size_t)p.row_bytes;
        for (int64_t o = (int64_t)lane * 16; o < p.row_bytes; o += 32 * 16)
            *reinterpret_cast<uint4 *>(dst + o) = ld16(src + o);
        if (lane == 0) {
            if (p.recv_w) p.recv_w[r] = __int_as_float(p.gmeta[s * p.mwords + tk + q]);
            if (p.recv_src) {
                p.recv_src[2 * r] = (int32_t)s;
                p.recv_src[2 * r + 1] = (int32_t)q;
            }
        }
    }
}

/* The combine's call count (state[0]), the same on every rank (every
 * rank makes the same calls, graph replays included): its stamp. */
__global__ void net_tick(const __grid_constant__ P_t p)
{
    if (threadIdx.x == 0) p.state[0] = p.state[0] % (1 << 20) + 1;
}

/* Eight elements of dtype T at p, as floats. */
template <typename T> __device__ __forceinline__ void load8(const T *p, float *f)
{
    if constexpr (sizeof(T) == 4) {
        const float4 a = *reinterpret_cast<const float4 *>(p);
        const float4 b = *reinterpret_cast<const float4 *>(p + 4);
        f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
        f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
    } else {
        const uint4 u = *reinterpret_cast<const uint4 *>(p);
        const T *h = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int k = 0; k < 8; k++) f[k] = num<T>::to(h[k]);
    }
}

/* This rank's column of every block's flags (cleared before the kernel):
 * -1 when it stopped, whenever that is found (net_convert names it), else
 * the call's stamp, which does not overwrite a -1 already there. */
__device__ void net_flags(const P_t &p, float v)
{
    const size_t fo = (size_t)p.tmax * (size_t)p.hidden;
    for (int d = 0; d < p.P; d++) {
        unsigned *w = reinterpret_cast<unsigned *>(p.partial + (size_t)d * p.pstride + fo + p.me);
        if (v < 0.0f) atomicExch(w, __float_as_uint(v));
        else atomicCAS(w, 0u, __float_as_uint(v));
    }
}

/* A layout this rank cannot read: its error record (no abort: the
 * reduce-scatter must still run everywhere), and -1 in its flags, so that
 * every rank stops before it writes out.  phase 0: expert_offsets (seen
 * rows against the capacity); 2: rank `peer`'s topk_idx / send_rows at
 * position chunk name row `seen` of this rank's `expected` rows. */
__device__ __noinline__ void net_bad_layout(const P_t &p, int peer, int chunk, int phase,
                                            uint64_t expected, int64_t seen)
{
    fail(p.rt, MKI_ERR_BADLAYOUT, wait_site{peer, (int)blockIdx.x, chunk, phase}, expected,
         (uint64_t)seen, p.epoch);
    net_flags(p, -1.0f);
}

/* For every gathered token, the sum of its slots that name this rank's
 * experts, w * y[row] in fp32, j in order, into block s of partial. */
template <typename T>
__global__ void __launch_bounds__(NT) net_partial(const __grid_constant__ P_t p)
{
    __shared__ int s_stop;
    __shared__ int64_t s_rows;
    const int tid = threadIdx.x, lane = tid & 31, K = p.topk, E = p.experts, EL = p.el;
    if (tid == 0) {
        /* an error recorded here (the dispatch stopped, a collective
         * failed): no sums, and the flags say so */
        s_stop = claimed(p.rt) ? 1 : 0;
        if (s_stop && blockIdx.x == 0) net_flags(p, -1.0f);
        s_rows = p.off_in[EL];
        if (!s_stop && (s_rows < 0 || s_rows > p.cap || (s_rows > 0 && !p.y))) {
            if (blockIdx.x == 0) net_bad_layout(p, p.me, -1, 0, (uint64_t)p.cap, s_rows);
            s_stop = 1;
        }
        /* block 0 stamps this rank's column; a CTA that finds the layout
         * wrong, before or after, leaves -1 there (net_flags) */
        if (!s_stop && blockIdx.x == 0) net_flags(p, (float)p.state[0]);
    }
    __syncthreads();
    if (s_stop) return;
    const int64_t rows = s_rows, tk = p.tmax * p.topk, H = p.hidden;
    const int64_t ntok = (int64_t)p.P * p.tmax;
    const int64_t nw = (int64_t)gridDim.x * (NT / 32);
    const T *y = static_cast<const T *>(p.y);
    for (int64_t g = (int64_t)blockIdx.x * (NT / 32) + (tid >> 5); g < ntok; g += nw) {
        const int64_t s = g / p.tmax, t = g - s * p.tmax;
        const int32_t *m = p.gmeta + s * p.mwords;
        int32_t v = -1, row = -1;
        float w = 1.0f;
        if (lane < K) {
            v = m[t * K + lane];
            row = m[2 * tk + t * K + lane];
            if (p.has_w) w = __int_as_float(m[tk + t * K + lane]);
        }
        const bool own = v >= EL * p.me && v < EL * (p.me + 1);
        const bool badid = s == p.me && t < p.tokens && (v < -1 || v >= E);
        const bool bad = badid || (own && (row < 0 || row >= rows));
        const unsigned badm = __ballot_sync(0xffffffffu, bad);
        if (badm) {
            if (lane == __ffs(badm) - 1)
                net_bad_layout(p, (int)s, (int)(t * K + lane), badid ? 1 : 2,
                               badid ? (uint64_t)p.cap : (uint64_t)rows, row);
            return;
        }
        const unsigned mask = __ballot_sync(0xffffffffu, own);
        float *dst = p.partial + (size_t)s * p.pstride + (size_t)t * H;
        /* the whole warp through every pass (the shuffles), each lane's 8
         * columns where they lie within the row */
        for (int64_t base = 0; base < H; base += 32 * 8) {
            const int64_t c0 = base + lane * 8;
            const bool in = c0 < H;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (unsigned mm = mask; mm; mm &= mm - 1) {
                const int j = __ffs(mm) - 1;
                const float wj = __shfl_sync(0xffffffffu, w, j, 32);
                const int32_t rj = __shfl_sync(0xffffffffu, row, j, 32);
                if (in) {
                    float f[8];
                    load8<T>(y + (size_t)rj * H + c0, f);
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[k] = fmaf(wj, f[k], acc[k]);
                }
            }
            if (in) {
                *reinterpret_cast<float4 *>(dst + c0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
                *reinterpret_cast<float4 *>(dst + c0 + 4) =
                    make_float4(acc[4], acc[5], acc[6], acc[7]);
            }
        }
    }
}

/* This rank's reduced sums, rounded once into out; nothing unless every
 * rank's column holds this call's stamp (-1: that rank stopped, and is
 * named; anything else: its sums did not arrive) or when this rank
 * stopped. */
template <typename T>
__global__ void __launch_bounds__(NT) net_convert(const __grid_constant__ P_t p)
{
    __shared__ int s_stop;
    const int tid = threadIdx.x;
    const size_t n = (size_t)p.tokens * (size_t)p.hidden;
    if (tid == 0) {
        s_stop = claimed(p.rt) ? 1 : 0;
        const float *flag = p.red + (size_t)p.tmax * (size_t)p.hidden;
        const float stamp = (float)p.state[0];
        for (int r = 0; !s_stop && r < p.P; r++)
            if (flag[r] != stamp) {
                if (blockIdx.x == 0)
                    fail(p.rt, MKI_ERR_REMOTE, wait_site{r, 0, -1, 0}, 0, 0, p.epoch);
                s_stop = 1;
            }
    }
    __syncthreads();
    if (s_stop) return;
    T *out = static_cast<T *>(p.out);
    for (size_t e = ((size_t)blockIdx.x * NT + tid) * 8; e < n; e += (size_t)gridDim.x * NT * 8) {
        const float4 a = *reinterpret_cast<const float4 *>(p.red + e);
        const float4 b = *reinterpret_cast<const float4 *>(p.red + e + 4);
        const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int k = 0; k < 8; k++) out[e + k] = num<T>::from(f[k]);
    }
}

template <template <typename> class Kern> const void *by_dtype(int dtype)
{
    switch (dtype) {
    case MKI_BF16: return (const void *)Kern<__nv_bfloat16>::fn;
    case MKI_F16: return (const void *)Kern<__half>::fn;
    default: return (const void *)Kern<float>::fn;
    }
}
template <typename T> struct PartialOf { static constexpr auto fn = net_partial<T>; };
template <typename T> struct ConvertOf { static constexpr auto fn = net_convert<T>; };

} /* namespace */

extern "C" int mki_moe_net_describe(const struct mki_moe_net_params *p, int which, int sm_count,
                                    struct mki_launch_desc *d, char *msg, size_t len)
{
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    const int64_t sm = sm_count > 0 ? sm_count : 1;
    const int64_t nch = p->nchunk > 0 ? p->nchunk : 1;
    const int64_t ntok = (int64_t)p->P * p->tmax;
    int64_t grid = 1;
    d->block = NT;
    switch (which) {
    case MKI_MOE_NET_COUNT: d->fn = (const void *)net_count; grid = nch < 4 * sm ? nch : 4 * sm; break;
    case MKI_MOE_NET_SCAN: d->fn = (const void *)net_scan; d->block = NT_SCAN; break;
    case MKI_MOE_NET_PLACE:
        d->fn = (const void *)net_place;
        d->block = 32;
        grid = nch < 16 * sm ? nch : 16 * sm;
        break;
    case MKI_MOE_NET_COPY: d->fn = (const void *)net_copy; grid = 2 * sm; break;
    case MKI_MOE_NET_TICK: d->fn = (const void *)net_tick; d->block = 32; break;
    case MKI_MOE_NET_PARTIAL:
        d->fn = by_dtype<PartialOf>(p->dtype);
        grid = (ntok + NT / 32 - 1) / (NT / 32);
        if (grid > 4 * sm) grid = 4 * sm;
        break;
    case MKI_MOE_NET_CONVERT: d->fn = by_dtype<ConvertOf>(p->dtype); grid = 2 * sm; break;
    default: snprintf(msg, len, "no MoE kernel %d across nodes", which); return -1;
    }
    d->grid = (unsigned)(grid > 0 ? grid : 1);
    d->cluster = 1;
    d->exact = 0;
    if (mki_launch_arg(d, p, sizeof(*p)) != 0) {
        snprintf(msg, len, "the MoE kernels' parameters do not fit a launch");
        return -1;
    }
    return 0;
}

/* Loaded with the other MoE kernels (mki_moe_preload). */
extern "C" int mki_moe_net_preload(char *msg, size_t len)
{
    const void *k[] = {(const void *)net_count, (const void *)net_scan, (const void *)net_place,
                       (const void *)net_copy, (const void *)net_tick,
                       by_dtype<PartialOf>(MKI_BF16),
                       by_dtype<PartialOf>(MKI_F16), by_dtype<PartialOf>(MKI_F32),
                       by_dtype<ConvertOf>(MKI_BF16), by_dtype<ConvertOf>(MKI_F16),
                       by_dtype<ConvertOf>(MKI_F32)};
    for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        cudaFuncAttributes a;
        const cudaError_t err = cudaFuncGetAttributes(&a, k[i]);
        if (err != cudaSuccess) {
            snprintf(msg, len, "loading the MoE kernels across nodes: %s", cudaGetErrorString(err));
            return (int)err;
        }
    }
    return 0;
}
