/* Host side of the GEMM engine: tensor maps, device checks, launch. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gemm_launch.h"
#include "rt/tmap.h"

namespace mki {
namespace gemm {

/* L2 sector promotion of the TMA loads (build-time knob for experiments):
 * 128B measured 20% faster than 256B where rows are not 128-byte aligned
 * (K = 4104) and the same elsewhere (bench/NOTES.md). */
#ifndef MKI_GEMM_L2_PROMOTION
#define MKI_GEMM_L2_PROMOTION CU_TENSOR_MAP_L2_PROMOTION_L2_128B
#endif

static int cuda_fail(cudaError_t e, const char *what, char *msg, size_t len)
{
    if (msg && len)
        snprintf(msg, len, "gemm: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return MKI_GEMM_ERR_CUDA;
}

int encode_2d(CUtensorMap *map, const void *ptr, mki_dtype_t dt, uint64_t inner, uint64_t outer,
              uint64_t ld, uint32_t box_inner, uint32_t box_outer, char *msg, size_t len)
{
    EncodeTiledFn fn = tmap_encoder("gemm", msg, len);
    if (!fn)
        return MKI_GEMM_ERR_CUDA;
    CUtensorMapDataType t = dt == MKI_DT_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                            : dt == MKI_DT_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    cuuint64_t dims[2] = {inner, outer};
    cuuint64_t strides[1] = {ld * mki_dtype_size(dt)};
    cuuint32_t box[2] = {box_inner, box_outer};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = fn(map, t, 2, const_cast<void *>(ptr), dims, strides, box, estr,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    MKI_GEMM_L2_PROMOTION, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        if (msg && len)
            snprintf(msg, len, "gemm: cuTensorMapEncodeTiled failed (CUresult %d) for a %llux%llu "
                     "tensor, ld %llu, box %ux%u",
                     (int)r, (unsigned long long)outer, (unsigned long long)inner,
                     (unsigned long long)ld, box_outer, box_inner);
        return MKI_GEMM_ERR_CUDA;
    }
    return MKI_GEMM_OK;
}

int encode_out_map(CUtensorMap *map, void *ptr, mki_dtype_t dt, uint64_t rows, uint64_t cols,
                   uint64_t ld, char *msg, size_t len)
{
    return encode_2d(map, ptr, dt, cols, rows, ld, (uint32_t)(128 / mki_dtype_size(dt)), 64, msg,
                     len);
}

int make_params(const mki_gemm_args *a, const mki_gemm_plan *pl, GemmParams *p, char *msg,
                size_t len)
{
    int r;
    memset(p, 0, sizeof(*p));
    if ((r = encode_2d(&p->tm_a, a->a, a->in_type, pl->k, pl->m, pl->lda, BK, BM, msg, len)))
        return r;
    if (a->trans_b)
        r = encode_2d(&p->tm_b, a->b, a->in_type, pl->k, pl->n, pl->ldb, BK, BN / 2, msg, len);
    else
        r = encode_2d(&p->tm_b, a->b, a->in_type, pl->n, pl->k, pl->ldb, 64, BK, msg, len);
    if (r)
        return r;
    if (!pl->epi_direct &&
        (r = encode_out_map(&p->tm_d, a->d, a->out_type, pl->m, pl->n, pl->ldd, msg, len)))
        return r;
    p->m = (int)pl->m;
    p->n = (int)pl->n;
    p->k = (int)pl->k;
    p->num_m_blk = pl->num_m_blk;
    p->num_n_blk = pl->num_n_blk;
    p->num_k_blk = pl->num_k_blk;
    p->num_tiles = pl->num_tiles;
    p->group_m = pl->group_m;
    set_cluster(*p, pl->cluster_m);
    p->alpha = a->alpha;
    p->beta = a->beta;
    p->c = a->c;
    p->ldc = pl->ldc;
    p->d = a->d;
    p->ldd = pl->ldd;
    p->out_type = (int)a->out_type;
    p->epi_direct = pl->epi_direct;
    return MKI_GEMM_OK;
}

int query_device(mki_gemm_device *dev, char *msg, size_t len)
{
    int d;
    cudaError_t e = cudaGetDevice(&d);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&dev->cc_major, cudaDevAttrComputeCapabilityMajor, d);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&dev->cc_minor, cudaDevAttrComputeCapabilityMinor, d);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&dev->sm_count, cudaDevAttrMultiProcessorCount, d);
    return e == cudaSuccess ? MKI_GEMM_OK : cuda_fail(e, "querying the device", msg, len);
}

/* "Not device memory" is an argument error: TMA cannot read host memory. */
static int check_device_ptr(const void *ptr, const char *name, char *msg, size_t len)
{
    cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, ptr);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaPointerGetAttributes", msg, len);
    if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged) {
        if (msg && len)
            snprintf(msg, len, "gemm: %s=%p is not device memory; allocate it with cudaMalloc",
                     name, ptr);
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

} // namespace gemm
} // namespace mki

using namespace mki::gemm;

/* Validated arguments -> kernel parameters and the plan (0 or an error). */
static int prepare(const mki_gemm_args *a, mki_gemm_plan *plan, GemmParams *p, char *msg,
                   size_t len)
{
    mki_gemm_device dev;
    int r;
    if ((r = query_device(&dev, msg, len)) || (r = mki_gemm_validate(a, &dev, plan, msg, len)))
        return r;
    if (plan->noop)
        return MKI_GEMM_OK;
    if ((r = check_device_ptr(a->a, "A", msg, len)) || (r = check_device_ptr(a->b, "B", msg, len)) ||
        (r = check_device_ptr(a->d, "D", msg, len)) ||
        (a->beta != 0.0f && (r = check_device_ptr(a->c, "C", msg, len))))
        return r;
    if ((r = make_params(a, plan, p, msg, len)))
        return r;
    /* pairs of CTAs share B tiles only when the grid splits into pairs */
    set_cluster(*p, p->cluster_m == 2 && plan->grid % 2 == 0 && plan->grid >= 2 ? 2 : 1);
    return MKI_GEMM_OK;
}

template <bool kF16, bool kTransB>
static const void *kernel_for(int cm)
{
    return cm == 2 ? (const void *)gemm_kernel<kF16, kTransB, 2, DefaultHooks>
                   : (const void *)gemm_kernel<kF16, kTransB, 1, DefaultHooks>;
}

extern "C" int mki_gemm_describe(const mki_gemm_args *a, struct mki_launch_desc *d, char *msg,
                                 size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    int r = prepare(a, &plan, &p, msg, len);
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    if (r || plan.noop)
        return r;
    const bool f16 = a->in_type == MKI_DT_F16;
    d->fn = f16 ? (a->trans_b ? kernel_for<true, true>(p.cluster_m)
                              : kernel_for<true, false>(p.cluster_m))
                : (a->trans_b ? kernel_for<false, true>(p.cluster_m)
                              : kernel_for<false, false>(p.cluster_m));
    d->grid = (unsigned)plan.grid;
    d->block = kThreads;
    d->cluster = (unsigned)p.cluster_m;
    d->smem = kSmemBytes;
    DefaultHooks h;
    if (mki_launch_arg(d, &p, sizeof(p)) || mki_launch_arg(d, &h, sizeof(h))) {
        snprintf(msg, len, "gemm: kernel parameters do not fit the launch descriptor");
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

template <bool kF16, bool kTransB>
static int launch_default(const GemmParams &p, int grid, cudaStream_t s, char *msg, size_t len)
{
    return launch<kF16, kTransB>(p, DefaultHooks{}, grid, p.cluster_m, s, msg, len);
}

extern "C" int mki_gemm(const mki_gemm_args *a, char *msg, size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    int r = prepare(a, &plan, &p, msg, len);
    if (r || plan.noop)
        return r;
    cudaStream_t s = (cudaStream_t)a->stream;
    bool f16 = a->in_type == MKI_DT_F16;
    if (f16)
        return a->trans_b ? launch_default<true, true>(p, plan.grid, s, msg, len)
                          : launch_default<true, false>(p, plan.grid, s, msg, len);
    return a->trans_b ? launch_default<false, true>(p, plan.grid, s, msg, len)
                      : launch_default<false, false>(p, plan.grid, s, msg, len);
}

/* ---- the grouped GEMM ---------------------------------------------------- */

namespace mki {
namespace gemm {

/* table[0]: the tiles in use (0 when the offsets are bad), table[1]: 1
 * when they are, table[2 + 2 i], table[3 + 2 i]: the group of tile i and
 * its 128-row block inside the group; tiles go group after group. */
struct GroupTableArgs {
    const int64_t *off;
    int64_t groups, rows;
    int32_t *table;
    const uint64_t *halt;
};

__global__ void __launch_bounds__(1024) group_table_kernel(const GroupTableArgs ga)
{
    __shared__ int bad;
    __shared__ int32_t first[MKI_GEMM_MAX_GROUPS + 1]; /* each group's first tile */
    __shared__ int32_t part[1024];
    const int64_t *off = ga.off;
    const int G = (int)ga.groups;
    const int tid = threadIdx.x, nt = blockDim.x;
    if (tid == 0) {
        bad = 0;
        if (ga.halt && (((volatile const uint64_t *)ga.halt)[0] != 0 ||
                        ((volatile const uint64_t *)ga.halt)[1] != 0))
            bad = 2; /* an error before: the offsets may be stale */
    }
    __syncthreads();
    for (int g = tid; g <= G && bad != 2; g += nt) {
        const int64_t o = off[g];
        if (o < 0 || o > ga.rows || (g == 0 && o != 0) || (g > 0 && o < off[g - 1])) bad = 1;
    }
    __syncthreads();
    if (bad == 2) {
        if (tid == 0) {
            ga.table[0] = 0;
            ga.table[1] = 2;
        }
        return;
    }
    /* tiles per group, scanned: each thread a contiguous run of groups */
    const int per = (G + nt - 1) / nt, g0 = min(G, tid * per), g1 = min(G, g0 + per);
    int32_t sum = 0;
    for (int g = g0; g < g1; g++) {
        const int64_t r = off[g + 1] - off[g];
        first[g] = sum;
        sum += r > 0 ? (int32_t)((r + BM - 1) / BM) : 0;
    }
    part[tid] = sum;
    __syncthreads();
    if (tid == 0) {
        int32_t run = 0;
        for (int i = 0; i < nt; i++) {
            const int32_t v = part[i];
            part[i] = run;
            run += v;
        }
        first[G] = run;
    }
    __syncthreads();
    for (int g = g0; g < g1; g++) first[g] += part[tid];
    __syncthreads();
    if (!bad)
        for (int g = 0; g < G; g++) { /* groups in turn, their tiles by all threads */
            const int32_t n = first[g + 1] - first[g];
            for (int j = tid; j < n; j += nt) {
                ga.table[2 + 2 * (first[g] + j)] = g;
                ga.table[3 + 2 * (first[g] + j)] = j;
            }
        }
    if (tid == 0) {
        ga.table[0] = bad ? 0 : first[G];
        ga.table[1] = bad;
    }
}

/* Units are the tiles in use (groups in turn), in pairs of consecutive
 * tiles when the launch has clusters of 2 (cm); the units past them cost a
 * tile() call each (an M-block past M, no k-block), and a pair's second
 * tile past the last computes rows that are never stored.  A pair whose
 * tiles are of one group shares its B tile by multicast; one whose tiles
 * straddle two groups loads each CTA's own (b_split).  A tile's A rows
 * start at its group's first row plus 128 per block, its B tile is its
 * group's, and the group's last tile is stored row by row up to the
 * group's end. */
struct GroupedHooks {
    static constexpr bool kWaitA = false;
    static constexpr bool kSignal = false;
    static constexpr bool kBRow = true;
    static constexpr bool kBSplit = true;
    static constexpr bool kASrc = true;
    const int32_t *table;
    const int64_t *off;
    int brows; /* rows of B per group: n (transB) or k */
    int cm;    /* CTAs per cluster: 1 or 2 */
    __device__ __forceinline__ TileCoord tile(const GemmParams &p, int i) const
    {
        const int tiles = __ldg(table);
        TileCoord t;
        if (i >= (tiles + cm - 1) / cm * p.num_n_blk) {
            t.m_blk = p.num_m_blk; /* past M: never stored */
            t.n_blk = 0;
            t.kb0 = 0;
            t.kb1 = 0;
            return t;
        }
        mki_gemm_unit_of(i, tiles, p.num_n_blk, p.group_m, cm, &t.m_blk, &t.n_blk);
        return t;
    }
    __device__ __forceinline__ int group_of(int m_blk) const { return __ldg(table + 2 + 2 * m_blk); }
    __device__ __forceinline__ int64_t first_row(int m_blk) const
    {
        return __ldg(off + group_of(m_blk)) + (int64_t)__ldg(table + 3 + 2 * m_blk) * BM;
    }
    __device__ __forceinline__ const CUtensorMap *a_src(const GemmParams &p, int m_blk,
                                                         int *row) const
    {
        *row = m_blk < __ldg(table) ? (int)first_row(m_blk) : 0;
        return &p.tm_a;
    }
    __device__ __forceinline__ int b_row(const GemmParams &, TileCoord t) const
    {
        return t.m_blk < __ldg(table) ? group_of(t.m_blk) * brows : 0;
    }
    __device__ __forceinline__ bool b_split(const GemmParams &, TileCoord u) const
    {
        const int tiles = __ldg(table);
        return u.m_blk + 1 < tiles && group_of(u.m_blk) != group_of(u.m_blk + 1);
    }
    __device__ __forceinline__ void wait_a(const GemmParams &, TileCoord, int) const {}
    __device__ __forceinline__ EpiTarget target(const GemmParams &p, TileCoord t) const
    {
        EpiTarget e;
        e.col0 = t.n_blk * BN;
        e.ptr = p.d;
        e.ld = p.ldd;
        e.tmap = &p.tm_d;
        if (t.m_blk >= __ldg(table)) { /* a pair's second tile past the last */
            e.row0 = 0;
            e.mode = EPI_DIRECT;
            e.rows = 0;
            return e;
        }
        const int g = group_of(t.m_blk);
        const int64_t r0 = first_row(t.m_blk), rem = __ldg(off + g + 1) - r0;
        e.row0 = (int)r0;
        e.mode = rem >= BM ? EPI_TMA_STORE : EPI_DIRECT;
        if (rem < BM) e.rows = (int)rem;
        return e;
    }
    __device__ __forceinline__ void after_store(const GemmParams &, TileCoord) const {}
};


} // namespace gemm
} // namespace mki

/* Checks, plans, and fills the GEMM's parameters (B: every group's matrix,
 * stacked) and hooks; 0 or an error with msg set; *noop when nothing to
 * compute. */
static int grouped_prepare(const mki_gemm_grouped_args *g, mki_gemm_plan *plan, GemmParams *p,
                           GroupedHooks *h, char *msg, size_t len)
{
    if (!g || g->groups < 1 || g->groups > MKI_GEMM_MAX_GROUPS || g->rows < 0 ||
        g->rows > (1ll << 30) || !g->offsets || !g->table) {
        snprintf(msg, len, "gemm grouped: groups (%lld) must be 1 .. %d, rows (%lld) 0 .. 2^30, "
                 "offsets and table device memory", g ? (long long)g->groups : 0LL,
                 MKI_GEMM_MAX_GROUPS, g ? (long long)g->rows : 0LL);
        return MKI_GEMM_ERR_INVALID;
    }
    if (!g->trans_b && g->k % BK != 0) {
        snprintf(msg, len, "gemm grouped: k = %lld with B not transposed must be a multiple of "
                 "%d (a k-block of one group must not reach the next group's rows)",
                 (long long)g->k, BK);
        return MKI_GEMM_ERR_INVALID;
    }
    if ((double)g->groups * (double)(g->trans_b ? g->n : g->k) > 2147483647.0) {
        snprintf(msg, len, "gemm grouped: groups x %s = %lld x %lld rows of B is over 2^31",
                 g->trans_b ? "n" : "k", (long long)g->groups,
                 (long long)(g->trans_b ? g->n : g->k));
        return MKI_GEMM_ERR_INVALID;
    }
    /* the plain GEMM of all rows with group 0's B validates and plans */
    mki_gemm_args a;
    memset(&a, 0, sizeof(a));
    a.m = g->rows;
    a.n = g->n;
    a.k = g->k;
    a.a = g->a;
    a.b = g->b;
    a.d = g->d;
    a.in_type = g->in_type;
    a.out_type = g->out_type;
    a.trans_b = g->trans_b;
    a.alpha = 1.0f;
    a.num_ctas = g->num_ctas;
    a.cluster_m = 0; /* pairs whenever the CTAs pair up: tiles of one group share B */
    a.stream = g->stream;
    int r = prepare(&a, plan, p, msg, len);
    if (r || plan->noop) return r;
    if (plan->epi_direct) {
        snprintf(msg, len, "gemm grouped: D must take TMA stores (16-byte aligned, n x the "
                 "element size a multiple of 16 bytes)");
        return MKI_GEMM_ERR_UNSUPPORTED;
    }
    if (g->trans_b)
        r = encode_2d(&p->tm_b, g->b, g->in_type, (uint64_t)g->k, (uint64_t)(g->groups * g->n),
                      (uint64_t)g->k, BK, BN / 2, msg, len);
    else
        r = encode_2d(&p->tm_b, g->b, g->in_type, (uint64_t)g->n, (uint64_t)(g->groups * g->k),
                      (uint64_t)g->n, 64, BK, msg, len);
    if (r) return r;
    /* tiles are numbered over the groups: at most one partial tile each */
    p->num_m_blk = (int)(g->rows / BM + g->groups);
    p->m = p->num_m_blk * BM; /* the direct epilogue's row bound: never reached */
    set_cluster(*p, p->cluster_m);
    h->cm = p->cluster_m;
    h->table = g->table;
    h->off = g->offsets;
    h->brows = (int)(g->trans_b ? g->n : g->k);
    return MKI_GEMM_OK;
}

template <bool kF16, bool kTransB>
static const void *grouped_kernel_for(int cm)
{
    return cm == 2 ? (const void *)gemm_kernel<kF16, kTransB, 2, GroupedHooks>
                   : (const void *)gemm_kernel<kF16, kTransB, 1, GroupedHooks>;
}

static const void *grouped_kernel(bool f16, bool tb, int cm)
{
    return f16 ? (tb ? grouped_kernel_for<true, true>(cm) : grouped_kernel_for<true, false>(cm))
               : (tb ? grouped_kernel_for<false, true>(cm) : grouped_kernel_for<false, false>(cm));
}

extern "C" int mki_gemm_grouped_describe(const mki_gemm_grouped_args *g,
                                         struct mki_launch_desc *table,
                                         struct mki_launch_desc *gemm, char *msg, size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    GroupedHooks h;
    memset(table, 0, offsetof(struct mki_launch_desc, param));
    memset(gemm, 0, offsetof(struct mki_launch_desc, param));
    int r = grouped_prepare(g, &plan, &p, &h, msg, len);
    if (r || plan.noop) return r;
    const GroupTableArgs ga = {g->offsets, g->groups, g->rows, g->table, g->halt};
    table->fn = (const void *)group_table_kernel;
    table->grid = 1;
    table->block = 1024;
    table->cluster = 1;
    table->exact = 1;
    gemm->fn = grouped_kernel(g->in_type == MKI_DT_F16, g->trans_b != 0, p.cluster_m);
    gemm->grid = (unsigned)plan.grid;
    gemm->block = kThreads;
    gemm->cluster = (unsigned)p.cluster_m;
    gemm->smem = kSmemBytes;
    if (mki_launch_arg(table, &ga, sizeof(ga)) || mki_launch_arg(gemm, &p, sizeof(p)) ||
        mki_launch_arg(gemm, &h, sizeof(h))) {
        snprintf(msg, len, "gemm grouped: kernel parameters do not fit the launch descriptor");
        return MKI_GEMM_ERR_INVALID;
    }
    return MKI_GEMM_OK;
}

extern "C" int mki_gemm_grouped(const mki_gemm_grouped_args *g, char *msg, size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    GroupedHooks h;
    int r = grouped_prepare(g, &plan, &p, &h, msg, len);
    if (r || plan.noop) return r;
    cudaStream_t s = (cudaStream_t)g->stream;
    const GroupTableArgs ga = {g->offsets, g->groups, g->rows, g->table, g->halt};
    group_table_kernel<<<1, 1024, 0, s>>>(ga);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(e, "launching the group table kernel", msg, len);
    const bool f16 = g->in_type == MKI_DT_F16;
    if (f16)
        return g->trans_b ? launch<true, true>(p, h, plan.grid, p.cluster_m, s, msg, len)
                          : launch<true, false>(p, h, plan.grid, p.cluster_m, s, msg, len);
    return g->trans_b ? launch<false, true>(p, h, plan.grid, p.cluster_m, s, msg, len)
                      : launch<false, false>(p, h, plan.grid, p.cluster_m, s, msg, len);
}

template <bool kF16, bool kTransB, int kCM, class Hooks>
static cudaError_t preload_cm()
{
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, gemm_kernel<kF16, kTransB, kCM, Hooks>);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(gemm_kernel<kF16, kTransB, kCM, Hooks>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    return e;
}

template <bool kF16, bool kTransB>
static cudaError_t preload_one()
{
    cudaError_t e = preload_cm<kF16, kTransB, 1, DefaultHooks>();
    if (e == cudaSuccess) e = preload_cm<kF16, kTransB, 2, DefaultHooks>();
    if (e == cudaSuccess) e = preload_cm<kF16, kTransB, 1, GroupedHooks>();
    if (e == cudaSuccess) e = preload_cm<kF16, kTransB, 2, GroupedHooks>();
    if (e == cudaSuccess) {
        cudaFuncAttributes at;
        e = cudaFuncGetAttributes(&at, group_table_kernel);
    }
    return e;
}

extern "C" int mki_gemm_preload(char *msg, size_t len)
{
    cudaError_t e = preload_one<false, false>();
    if (e == cudaSuccess)
        e = preload_one<false, true>();
    if (e == cudaSuccess)
        e = preload_one<true, false>();
    if (e == cudaSuccess)
        e = preload_one<true, true>();
    return e == cudaSuccess ? MKI_GEMM_OK : cuda_fail(e, "loading the GEMM kernels", msg, len);
}
