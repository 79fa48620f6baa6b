/* gemm_epilogue.cuh - the GEMM engine's epilogue: a tile's accumulators
 * (alpha, beta, a hook's combine, the gated unit) stored through swizzled
 * shared-memory chunks by TMA (store or add) or by direct stores, and the
 * deferred signal of a stored tile.  Included by gemm_engine.cuh only,
 * after the parameters, targets and hook flags it uses.
 */
#pragma once

namespace mki {
namespace gemm {

/* The output type of an epilogue (mki_dtype_t): its element, loads and
 * stores through fp32, and (16-bit types) two values packed in a word. */
template <typename TT>
struct OutOf {
    typedef TT T;
    static __device__ __forceinline__ float ld(const void *p) { return num<T>::to(*(const T *)p); }
    static __device__ __forceinline__ void st(void *p, float a) { *(T *)p = num<T>::from(a); }
    static __device__ __forceinline__ uint32_t pack(float a, float b) { return pack2<T>(a, b); }
};
template <int OT>
struct OutT;
template <> struct OutT<MKI_DT_BF16> : OutOf<__nv_bfloat16> {};
template <> struct OutT<MKI_DT_F16> : OutOf<__half> {};
template <> struct OutT<MKI_DT_F32> : OutOf<float> {};

/* Fragment of m64n256 accumulators held by one thread: d[4j + {0,1,2,3}] is
 * (r, 8j + q), (r, 8j + q + 1), (r + 8, 8j + q), (r + 8, 8j + q + 1) with
 * r = 16 * warp + lane / 4 and q = 2 * (lane % 4). */

/* acc = alpha * acc + beta * C for the 128 elements of this thread. */
template <int OT>
__device__ __forceinline__ void apply_alpha_beta(float (&acc)[128], const GemmParams &p, int row,
                                                 int col)
{
    const char *c = (const char *)p.c;
    const int es = (int)sizeof(typename OutT<OT>::T);
    /* Groups of 4 between compiler barriers: hoisting all 128 loads of C
     * ahead of their use would need 128 more registers (spills). */
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const int i = 4 * j + x;
            int r = row + (x >> 1) * 8;
            int cc = col + j * 8 + (x & 1);
            float v = p.alpha * acc[i];
            if (p.beta != 0.0f && r < p.m && cc < p.n)
                v += p.beta * OutT<OT>::ld(c + ((long long)r * p.ldc + cc) * es);
            acc[i] = v;
        }
        asm volatile("" ::: "memory");
    }
}

/* Writes the accumulators of one 64 x (128 B) chunk into a swizzled staging
 * buffer laid out as the TMA box expects (16-byte unit u of row r is stored
 * at unit u ^ (r % 8)): the 8 rows a warp writes at once fall in 8 different
 * bank groups.  kSwizzle false: each row's 128 bytes in order (EPI_ROWS's
 * bulk copies; 8-way bank conflicts on these writes). */
template <int OT, int CH, bool kSwizzle = true>
__device__ __forceinline__ void write_chunk(const float (&acc)[128], char *buf, int wrow, int q)
{
    /* 128 B of a row: 32 fp32 columns (j = 4 CH .. 4 CH + 3) or 64 of 16
     * bits (j = 8 CH .. 8 CH + 7); each thread stores 2 adjacent columns. */
    constexpr bool f32 = OT == MKI_DT_F32;
    constexpr int es = f32 ? 4 : 2, js = f32 ? 4 : 8;
#pragma unroll
    for (int jj = 0; jj < js; ++jj) {
        const int j = CH * js + jj;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = wrow + h * 8;
            const int byte = (jj * 8 + q) * es; /* within the 128-B row */
            const int off = kSwizzle ? r * 128 + (((byte >> 4) ^ (r & 7)) << 4) + (byte & 15)
                                     : r * 128 + byte;
            const float a = acc[4 * j + 2 * h], b = acc[4 * j + 2 * h + 1];
            if constexpr (f32) *reinterpret_cast<float2 *>(buf + off) = make_float2(a, b);
            else *reinterpret_cast<uint32_t *>(buf + off) = OutT<OT>::pack(a, b);
        }
    }
}

template <int OT, int CH>
__device__ __forceinline__ void tma_chunk(const float (&acc)[128], const EpiTarget &e, char *bufs,
                                          int wg, int t, int wrow, int q)
{
    constexpr int kCols = OT == MKI_DT_F32 ? 32 : 64;
    char *buf = bufs + (CH & 1) * kEpiChunkBytes;
    /* The store that last read this buffer (chunk CH-2, or the previous tile)
     * must be done reading it; at most the other buffer's store may pend. */
    if (t == 0)
        bulk_wait_read<1>();
    role_sync(1 + wg, 128);
    write_chunk<OT, CH>(acc, buf, wrow, q);
    fence_proxy_async_smem(); /* generic writes -> visible to the TMA engine */
    role_sync(1 + wg, 128);
    if (t == 0) {
        int c0 = e.col0 + CH * kCols, c1 = e.row0 + wg * 64;
        if (e.mode == EPI_TMA_ADD)
            tma_add_2d(e.tmap, c0, c1, buf);
        else
            tma_store_2d(e.tmap, c0, c1, buf);
        bulk_commit();
    }
}

/* Direct stores (rows not TMA-storable, e.g. odd ld): the chunk goes through
 * the same swizzled buffer, then each warp writes whole 128-byte row pieces
 * (16 rows per warp), so a warp's stores are contiguous instead of 8 rows
 * of 16 bytes each. */
template <int OT, int CH>
__device__ __forceinline__ void direct_chunk(const float (&acc)[128], const GemmParams &p,
                                             const EpiTarget &e, char *bufs, int wg, int t,
                                             int wrow, int q, int tr, int tc)
{
    typedef typename OutT<OT>::T T;
    constexpr int kEs = (int)sizeof(T);
    constexpr int kCols = 128 / kEs;
    char *buf = bufs + (CH & 1) * kEpiChunkBytes;
    role_sync(1 + wg, 128); /* chunk CH-2 was read out of this buffer */
    write_chunk<OT, CH>(acc, buf, wrow, q);
    role_sync(1 + wg, 128);
    const int warp = t >> 5, lane = t & 31;
    const int byte = lane * 4;
    const int lc = CH * kCols + byte / kEs; /* column inside the tile */
#pragma unroll 4
    for (int i = 0; i < 16; ++i) {
        const int r = warp * 16 + i;
        const int lr = wg * 64 + r; /* row inside the tile */
        uint32_t v = *reinterpret_cast<const uint32_t *>(buf + r * 128 +
                                                         ((((byte >> 4) ^ (r & 7))) << 4) +
                                                         (byte & 15));
        if (tr + lr >= p.m || (e.rows >= 0 && lr >= e.rows))
            continue;
        const long long o = (long long)(e.row0 + lr) * e.ld + (e.col0 + lc);
        T *d = (T *)e.ptr + o;
        if constexpr (kEs == 4) {
            if (tc + lc < p.n)
                *reinterpret_cast<uint32_t *>(d) = v;
        } else {
            const bool two = tc + lc + 1 < p.n;
            if (two && ((uintptr_t)d & 3) == 0) {
                *reinterpret_cast<uint32_t *>(d) = v;
            } else {
                if (tc + lc < p.n)
                    *reinterpret_cast<uint16_t *>(d) = (uint16_t)(v & 0xFFFF);
                if (two)
                    *reinterpret_cast<uint16_t *>(d + 1) = (uint16_t)(v >> 16);
            }
        }
    }
}

/* EPI_ROWS: row r of the tile goes to h.row_ptr(e.row0 + r) (a row of n
 * elements; nullptr: skipped), which thread r % 64 of the row's warpgroup
 * looked up once for the tile (myrow).  The chunk is staged in shared
 * memory without the swizzle (whole 128-byte row pieces), and each of
 * those threads stores its row's piece with a bulk copy of its own
 * (asynchronous, like the TMA stores: the consumers go on to the next
 * tile while the rows travel, to another GPU's memory too). */
template <int OT, int CH>
__device__ __forceinline__ void rows_chunk(const float (&acc)[128], const GemmParams &p,
                                          char *myrow, char *bufs, int wg, int t, int wrow, int q,
                                          int col0)
{
    typedef typename OutT<OT>::T T;
    constexpr int kEs = (int)sizeof(T);
    constexpr int kCols = 128 / kEs;
    char *buf = bufs + (CH & 1) * kEpiChunkBytes;
    /* this thread's copy that last read this buffer (chunk CH-2, or the
     * previous tile's) is done reading it */
    if (t < 64)
        bulk_wait_read<1>();
    role_sync(1 + wg, 128);
    write_chunk<OT, CH, false>(acc, buf, wrow, q);
    fence_proxy_async_smem(); /* generic writes -> visible to the bulk copies */
    role_sync(1 + wg, 128);
    const int c = col0 + CH * kCols; /* the piece's first column */
    if (t < 64 && myrow && c < p.n) {
        const int left = (p.n - c) * kEs; /* a multiple of 16 (n * element, moe.c) */
        const uint32_t bytes = left < 128 ? (uint32_t)left : 128u;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                     ::"l"(myrow + (size_t)c * kEs), "r"(smem_u32(buf + t * 128)), "r"(bytes)
                     : "memory");
    }
    if (t < 64)
        bulk_commit();
}

template <int OT, typename Hooks, int... CH>
__device__ __forceinline__ void rows_chunks(const float (&acc)[128], const GemmParams &p,
                                           const Hooks &h, const EpiTarget &e, char *bufs, int wg,
                                           int t, int wrow, int q, std::integer_sequence<int, CH...>)
{
    /* the tile's row pointers, one lookup per thread, before the chunks */
    const int lr = wg * 64 + t;
    char *myrow = t >= 64 || (e.rows >= 0 && lr >= e.rows) ? nullptr : h.row_ptr(e.row0 + lr);
    (rows_chunk<OT, CH>(acc, p, myrow, bufs, wg, t, wrow, q, e.col0), ...);
}

template <int OT, int... CH>
__device__ __forceinline__ void direct_chunks(const float (&acc)[128], const GemmParams &p,
                                              const EpiTarget &e, char *bufs, int wg, int t,
                                              int wrow, int q, int tr, int tc,
                                              std::integer_sequence<int, CH...>)
{
    (direct_chunk<OT, CH>(acc, p, e, bufs, wg, t, wrow, q, tr, tc), ...);
}

template <int OT, int... CH>
__device__ __forceinline__ void tma_chunks(const float (&acc)[128], const EpiTarget &e, char *bufs,
                                           int wg, int t, int wrow, int q,
                                           std::integer_sequence<int, CH...>)
{
    (tma_chunk<OT, CH>(acc, e, bufs, wg, t, wrow, q), ...);
}

template <int OT, bool kGlu, typename Hooks>
__device__ __forceinline__ void epilogue(float (&acc)[128], const GemmParams &p, const Hooks &h,
                                         TileCoord tc, const EpiTarget &e, char *bufs, int wg,
                                         int t)
{
    const int warp = t >> 5, lane = t & 31;
    const int wrow = warp * 16 + (lane >> 2), q = (lane & 3) * 2;
    const int row = tc.m_blk * BM + wg * 64 + wrow; /* problem coordinates */
    const int col = tc.n_blk * BN + q;
    if (p.alpha != 1.0f || p.beta != 0.0f)
        apply_alpha_beta<OT>(acc, p, row, col);
    if constexpr (HooksHaveCombine<Hooks>::value)
        h.combine(acc, p, tc, wg, t, wrow, q, bufs);
    if constexpr (kGlu) {
        /* columns 8j + q (+1) for j < 16 are the gate's, j + 16 the up
         * projection's of the same output column */
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            const float g = acc[i];
            acc[i] = g / (1.0f + __expf(-g)) * acc[i + 64];
        }
    }
    constexpr int kChunks = (OT == MKI_DT_F32 ? 8 : 4) / (kGlu ? 2 : 1);
    bool rows = false;
    if constexpr (HooksHaveRowPtr<Hooks>::value) {
        rows = e.mode == EPI_ROWS;
        if (rows)
            rows_chunks<OT>(acc, p, h, e, bufs, wg, t, wrow, q,
                            std::make_integer_sequence<int, kChunks>{});
        else if (t > 0 && t < 64) /* an earlier tile's row copies (thread 0: below) */
            bulk_wait_read<0>();
    }
    if (rows) {
    } else if (e.mode == EPI_DIRECT) {
        /* The TMA chunks' stores may still read the buffers (previous tile). */
        if (t == 0)
            bulk_wait_read<0>();
        direct_chunks<OT>(acc, p, e, bufs, wg, t, wrow, q, tc.m_blk * BM,
                          tc.n_blk * (kGlu ? BN / 2 : BN),
                          std::make_integer_sequence<int, kChunks>{});
    } else {
        tma_chunks<OT>(acc, e, bufs, wg, t, wrow, q, std::make_integer_sequence<int, kChunks>{});
    }
    if constexpr (Hooks::kSignal && !HooksDeferSignal<Hooks>::value) {
        if (e.mode != EPI_DIRECT && e.mode != EPI_ROWS && t == 0)
            bulk_wait_all();
        if (t == 0) /* this warpgroup's TMA writes, then the barrier */
            fence_proxy_async_global();
        role_sync(3, 256); /* both consumer warpgroups' stores are done */
        if (wg == 0 && t == 0)
            h.after_store(p, tc);
    }
}

/* A deferred signal (kDeferSignal): tile t's stores have completed (they
 * were issued one mainloop ago), then after_store(t). All 256 consumer
 * threads. */
template <typename Hooks>
__device__ __forceinline__ void flush_signal(const GemmParams &p, const Hooks &h, TileCoord t,
                                             int wg, int th)
{
    if (th == 0) {
        bulk_wait_all();
        fence_proxy_async_global();
    }
    role_sync(3, 256);
    if (wg == 0 && th == 0)
        h.after_store(p, t);
}

} // namespace gemm
} // namespace mki
