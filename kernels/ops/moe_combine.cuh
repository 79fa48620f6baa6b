/*
 * moe_combine.cuh - mkMoECombine's kernel (the protocol: moe.h): one CTA
 * of MKI_MOE_THREADS threads per SM of the plan stages y for the peers
 * (unless the layer's first kernel did) and then a warp per token sums its
 * top-k rows in fp32, read from the peers' stages, or, where the layer
 * pushed them, from this rank's own.  Not a header of its own: moe.cu
 * includes it inside its anonymous namespace (NT, NW, the trace).
 */
#ifndef MKI_OPS_MOE_COMBINE_CUH
#define MKI_OPS_MOE_COMBINE_CUH

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
    __shared__ int s_push;
    /* peer d's stage: 1 seen by this CTA, 2 its wait failed; s_poll[d]: one
     * thread of the CTA polls for it, the others read s_staged */
    __shared__ volatile int s_staged[MKI_MAXLOCAL];
    __shared__ int s_poll[MKI_MAXLOCAL];
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int G = gridDim.x, b = blockIdx.x;
    const int P = p.P, me = p.me, E = p.experts, EL = p.el, K = p.topk;
    mki_moe_ctl *ctl = p.ctl[me];
    if (tid < MKI_MAXLOCAL) s_staged[tid] = s_poll[tid] = 0;
    if (tid == 0) {
        KT_STAMP(1, KT_ENTRY);
        s_c = ld_vol(&ctl->ccalls) + 1;
        s_quit = enter_ok(p.rt, b, s_c) ? 0 : 1;
        /* an error already recorded on this rank (the dispatch this
         * combine answers stopped: capacity, expert ids; every rank found
         * it): nothing to sum, nothing written */
        if (!s_quit && claimed(p.rt)) s_quit = 1;
        s_rows = p.off[EL];
        /* the layer pushed every row to its token's slot in this rank's
         * stage (moe.h) */
        s_push = p.staged && ld_vol(&ctl->push_e) == ld_vol(&ctl->dcalls) && ld_vol(&ctl->push_e) != 0;
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

    /* ---- stage y for the peers (the layer's first kernel did: staged) ---- */
    if (P > 1 && !p.staged) {
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
        if (tid == 0 && last_out(&ctl->cstaged, G))
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
        /* wait for the stages this token reads: one thread of the CTA
         * polls a peer's flag, with pauses (a peer may still be computing
         * for milliseconds: a thousand threads polling the flag took the
         * memory system from the ranks that share the GPU, bench/NOTES.md),
         * the others watch shared memory */
        const int d = v >= 0 ? v / EL : -1;
        const bool remote = v >= 0 && d != me;
        if (remote && s_staged[d] == 0) {
            if (atomicCAS(&s_poll[d], 0, 1) == 0) {
#ifdef MKI_MOE_TRACE
                const uint64_t kw0 = globaltimer();
#endif
                const bool ok = wait_geq_paused(p.rt, &ctl->peer_staged[d], c,
                                                wait_site{d, b, (int)t, 3}, c, &s_quit);
                KT_STAMP(1, KT_PRO);
                KT_WAIT(1, globaltimer() - kw0);
                __threadfence_block(); /* the system-scope acquire, passed on */
                s_staged[d] = ok ? 1 : 2;
            } else {
                while (s_staged[d] == 0) __nanosleep(64);
            }
        }
        if (remote) {
            if (s_staged[d] == 1) __threadfence_block(); /* acquire, CTA scope */
            else row = -1;
        }
        if (__any_sync(0xffffffffu, s_quit != 0)) break;
        const char *srcj = v < 0 ? nullptr
                           : s_push ? p.stage[me] + (t * K + lane) * rb
                           : (d == me ? static_cast<const char *>(p.y) : p.stage[d]) + (int64_t)row * rb;
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
    if (tid == 0) KT_DONE(1, me, c);
    if (tid == 0 && last_out(&ctl->cexit, G)) {
        ctl->cstaged = 0;
        ctl->cexit = 0;
        *reinterpret_cast<volatile uint64_t *>(&ctl->ccalls) = c;
        __threadfence_system();
        for (int q = 0; q < P; q++)
            if (q != me) st_release_sys(&p.ctl[q]->peer_pulled[me], c);
    }
}

#endif /* MKI_OPS_MOE_COMBINE_CUH */
