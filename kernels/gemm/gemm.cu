/* Host side of the GEMM engine: tensor maps, device checks, launch. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gemm_launch.h"
#include "gemm_grouped.cuh"
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

struct GroupTableArgs {
    const int64_t *off;
    int64_t groups, rows;
    int32_t *table;
    const uint64_t *halt;
};

/* The table by one CTA of 1024 threads (gemm_grouped.cuh). */
__global__ void __launch_bounds__(1024) group_table_kernel(const GroupTableArgs ga)
{
    __shared__ int32_t first[MKI_GEMM_MAX_GROUPS + 1];
    __shared__ int32_t part[1024];
    __shared__ int bad;
    const bool halted = ga.halt && (((volatile const uint64_t *)ga.halt)[0] != 0 ||
                                    ((volatile const uint64_t *)ga.halt)[1] != 0);
    group_table_build(ga.off, (int)ga.groups, ga.rows, ga.table, halted, threadIdx.x, blockDim.x,
                      first, part, &bad);
}

} // namespace gemm
} // namespace mki

/* Checks, plans, and fills the GEMM's parameters (B: every group's matrix,
 * stacked) and hooks; 0 or an error with msg set; *noop when nothing to
 * compute. */
template <class H>
static int grouped_prepare(const mki_gemm_grouped_args *g, mki_gemm_plan *plan, GemmParams *p,
                           H *h, char *msg, size_t len)
{
    if (!g || g->groups < 1 || g->groups > MKI_GEMM_MAX_GROUPS || g->rows < 0 ||
        g->rows > (1ll << 30) || !g->offsets || !g->table) {
        snprintf(msg, len, "gemm grouped: groups (%lld) must be 1 .. %d, rows (%lld) 0 .. 2^30, "
                 "offsets and table device memory", g ? (long long)g->groups : 0LL,
                 MKI_GEMM_MAX_GROUPS, g ? (long long)g->rows : 0LL);
        return MKI_GEMM_ERR_INVALID;
    }
    if (g->glu < 0 || (g->glu > 0 && (g->glu % 8 != 0 || g->n != 2 * g->glu))) {
        snprintf(msg, len, "gemm grouped: glu = %lld, n = %lld: a gated unit needs glu a "
                 "positive multiple of 8 and n = 2 glu", (long long)g->glu, (long long)g->n);
        return MKI_GEMM_ERR_INVALID;
    }
    if ((g->glu > 0) != H::kGlu) {
        snprintf(msg, len, "gemm grouped: glu = %lld with the wrong kernel", (long long)g->glu);
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
    a.n = g->glu > 0 ? g->glu : g->n; /* D's columns (a gated unit's: glu) */
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
    if (g->glu > 0) {
        /* planned with D's glu columns (p->n, its map and ld); a tile's BN
         * columns of B give BN / 2 of D */
        p->num_n_blk = (int)((g->n + BN - 1) / BN);
        h->glu = (int)g->glu;
    }
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

template <bool kF16, bool kTransB, class H>
static const void *grouped_kernel_for(int cm)
{
    return cm == 2 ? (const void *)gemm_kernel<kF16, kTransB, 2, H>
                   : (const void *)gemm_kernel<kF16, kTransB, 1, H>;
}

template <class H>
static const void *grouped_kernel(bool f16, bool tb, int cm)
{
    return f16 ? (tb ? grouped_kernel_for<true, true, H>(cm) : grouped_kernel_for<true, false, H>(cm))
               : (tb ? grouped_kernel_for<false, true, H>(cm)
                     : grouped_kernel_for<false, false, H>(cm));
}

template <class H>
static int grouped_describe(const mki_gemm_grouped_args *g, struct mki_launch_desc *table,
                            struct mki_launch_desc *gemm, char *msg, size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    H h;
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
    gemm->fn = grouped_kernel<H>(g->in_type == MKI_DT_F16, g->trans_b != 0, p.cluster_m);
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

extern "C" int mki_gemm_grouped_describe(const mki_gemm_grouped_args *g,
                                         struct mki_launch_desc *table,
                                         struct mki_launch_desc *gemm, char *msg, size_t len)
{
    return g && g->glu > 0 ? grouped_describe<GroupedGluHooks>(g, table, gemm, msg, len)
                           : grouped_describe<GroupedHooks>(g, table, gemm, msg, len);
}

namespace mki {
namespace gemm {
template <class H>
static int grouped_params_of(const mki_gemm_grouped_args *g, GemmParams *p, H *h, int *grid,
                             char *msg, size_t len)
{
    mki_gemm_plan plan;
    const int r = grouped_prepare(g, &plan, p, h, msg, len);
    *grid = r || plan.noop ? 0 : plan.grid;
    return r;
}
int grouped_params(const mki_gemm_grouped_args *g, GemmParams *p, GroupedHooks *h, int *grid,
                   char *msg, size_t len)
{
    return grouped_params_of(g, p, h, grid, msg, len);
}
int grouped_params(const mki_gemm_grouped_args *g, GemmParams *p, GroupedGluHooks *h, int *grid,
                   char *msg, size_t len)
{
    return grouped_params_of(g, p, h, grid, msg, len);
}
} // namespace gemm
} // namespace mki

template <class H>
static int grouped_run(const mki_gemm_grouped_args *g, char *msg, size_t len)
{
    mki_gemm_plan plan;
    GemmParams p;
    H h;
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

extern "C" int mki_gemm_grouped(const mki_gemm_grouped_args *g, char *msg, size_t len)
{
    return g && g->glu > 0 ? grouped_run<GroupedGluHooks>(g, msg, len)
                           : grouped_run<GroupedHooks>(g, msg, len);
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
    if (e == cudaSuccess) e = preload_cm<kF16, kTransB, 1, GroupedGluHooks>();
    if (e == cudaSuccess) e = preload_cm<kF16, kTransB, 2, GroupedGluHooks>();
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
