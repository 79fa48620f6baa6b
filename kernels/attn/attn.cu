/*
 * attn.cu - the attention core (interface: attn.h) and mkRingAttention's
 * fused kernel on one node (protocol: ops/attn.h): the host side (tensor
 * maps, the kernel's argument checks, launches and the ring's launch
 * description) over the device side in attn_kernel.cuh.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/attn.h"
#include "attn/attn_kernel.cuh"
#include "ops/attn.h"
#include "rt/tmap.h"

using namespace mki;
using namespace mki::attn;

namespace {

const void *kernel_for(int d, bool f16)
{
    if (d == 64) return f16 ? (const void *)attn_kernel<64, true> : (const void *)attn_kernel<64, false>;
    return f16 ? (const void *)attn_kernel<128, true> : (const void *)attn_kernel<128, false>;
}

int smem_for(int d) { return d == 64 ? Smem<64>::kBytes : Smem<128>::kBytes; }
int rows_for(int d) { return d == 64 ? Cfg<64>::BM : Cfg<128>::BM; } /* queries per tile */
bool o_by_tma(int d) { return d == 64 ? kStoreOByTma<64> : kStoreOByTma<128>; }
int threads_for(int d) { return d == 64 ? Cfg<64>::kThreads : Cfg<128>::kThreads; }

/* ---------------------------------------------------------------- host */

/* The 4-D map of a [batch, seq, heads, d] (BSHD) or [batch, heads, seq, d]
 * (BHSD) tensor: dims {d, seq, heads, batch}, box {64, rows, 1, 1}. */
int encode_4d(CUtensorMap *map, const void *ptr, int dtype, int layout, int64_t batch,
              int64_t seq, int64_t heads, int64_t d, int rows, char *msg, size_t len)
{
    EncodeTiledFn fn = tmap_encoder("attn", msg, len);
    if (!fn) return MKI_ATTN_ERR_CUDA;
    const cuuint64_t es = 2;
    cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)seq, (cuuint64_t)heads, (cuuint64_t)batch};
    cuuint64_t strides[3];
    if (layout == MKI_ATTN_BSHD) {
        strides[0] = (cuuint64_t)(heads * d) * es;       /* seq */
        strides[1] = (cuuint64_t)d * es;                 /* heads */
        strides[2] = (cuuint64_t)(seq * heads * d) * es; /* batch */
    } else {
        strides[0] = (cuuint64_t)d * es;
        strides[1] = (cuuint64_t)(seq * d) * es;
        strides[2] = (cuuint64_t)(heads * seq * d) * es;
    }
    cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1};
    cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = fn(map, dtype == MKI_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                    4, const_cast<void *>(ptr), dims, strides, box, estr,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        snprintf(msg, len, "attn: cuTensorMapEncodeTiled failed (CUresult %d) for a %lld x %lld x "
                 "%lld x %lld tensor", (int)r, (long long)batch, (long long)seq, (long long)heads,
                 (long long)d);
        return MKI_ATTN_ERR_CUDA;
    }
    return MKI_ATTN_OK;
}

int make_params(const mki_attn_args *a, AttnParams *p, char *msg, size_t len)
{
    int r = mki_attn_validate(a, msg, len);
    if (r) return r;
    memset(p, 0, sizeof(*p));
    if ((r = encode_4d(&p->tm_q, a->q, a->dtype, a->layout, a->batch, a->seq, a->heads,
                       a->head_dim, rows_for((int)a->head_dim), msg, len)))
        return r;
    if (kStoreOByTma<128> && a->head_dim == 128 &&
        (r = encode_4d(&p->tm_o, a->o, a->dtype, a->layout, a->batch, a->seq, a->heads,
                       a->head_dim, 64, msg, len)))
        return r;
    for (int s = 0; s < a->nseg; ++s) {
        if ((r = encode_4d(&p->tm_k[s], a->seg[s].k, a->dtype, a->layout, a->batch, a->seq,
                           a->kv_heads, a->head_dim, BN, msg, len)) ||
            (r = encode_4d(&p->tm_v[s], a->seg[s].v, a->dtype, a->layout, a->batch, a->seq,
                           a->kv_heads, a->head_dim, BN, msg, len)))
            return r;
        p->kpos[s].split = (int)a->seg[s].pos.split;
        p->kpos[s].off0 = (int)a->seg[s].pos.off0;
        p->kpos[s].off1 = (int)a->seg[s].pos.off1;
        p->flags[s] = a->seg[s].flags;
    }
    p->o = a->o;
    p->lse = a->lse;
    if (a->layout == MKI_ATTN_BSHD) {
        p->o_ss = a->heads * a->head_dim;
        p->o_sh = a->head_dim;
        p->o_sb = a->seq * a->heads * a->head_dim;
    } else {
        p->o_ss = a->head_dim;
        p->o_sh = a->seq * a->head_dim;
        p->o_sb = a->heads * a->seq * a->head_dim;
    }
    p->batch = (int)a->batch;
    p->seq = (int)a->seq;
    p->heads = (int)a->heads;
    p->kv_heads = (int)a->kv_heads;
    p->group = (int)(a->heads / a->kv_heads);
    const int bm = rows_for((int)a->head_dim);
    p->nqb = (int)((a->seq + bm - 1) / bm);
    p->num_tiles = (int)(a->batch * a->heads * p->nqb);
    /* a TMA store of O takes no negative row (an illegal instruction):
     * where O goes out by TMA the partial block stays the last */
    p->qshift = o_by_tma((int)a->head_dim) ? 0 : p->nqb * bm - (int)a->seq;
    p->layout = a->layout;
    p->causal = a->causal != 0;
    p->nseg = a->nseg;
    p->scale_log2 = a->scale * 1.4426950408889634f;
    p->qpos.split = (int)a->qpos.split;
    p->qpos.off0 = (int)a->qpos.off0;
    p->qpos.off1 = (int)a->qpos.off1;
    p->chunk_rows = (int)(a->chunk_rows > 0 ? a->chunk_rows : BN);
    p->nsc = (int)mki_attn_nsc(a->seq, p->chunk_rows);
    p->flag_target = a->flag_target;
    return MKI_ATTN_OK;
}

int grid_for(const mki_attn_args *a, int num_tiles, char *msg, size_t len)
{
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) {
        snprintf(msg, len, "attn: %s", cudaGetErrorString(e));
        return -1;
    }
    int g = a->ctas > 0 && a->ctas < sms ? a->ctas : sms;
    if (g > num_tiles) g = num_tiles;
    return g < 1 ? 1 : g;
}

static_assert(sizeof(AttnParams) + sizeof(RingParams) + 128 <= MKI_LAUNCH_PARAM_BYTES,
              "attn: kernel parameters over the launch descriptor's room");

} // namespace

extern "C" int mki_attn_validate(const struct mki_attn_args *a, char *msg, size_t len)
{
    if (a->head_dim != 64 && a->head_dim != 128) {
        snprintf(msg, len, "attn: head_dim %lld is not supported (64 or 128)", (long long)a->head_dim);
        return MKI_ATTN_ERR_UNSUPPORTED;
    }
    if (a->dtype != MKI_BF16 && a->dtype != MKI_F16) {
        snprintf(msg, len, "attn: dtype %d is not supported (bf16 or fp16)", a->dtype);
        return MKI_ATTN_ERR_UNSUPPORTED;
    }
    if (a->layout != MKI_ATTN_BSHD && a->layout != MKI_ATTN_BHSD) {
        snprintf(msg, len, "attn: layout %d is not BSHD (0) or BHSD (1)", a->layout);
        return MKI_ATTN_ERR_INVALID;
    }
    if (a->batch < 0 || a->seq < 0 || a->heads < 1 || a->kv_heads < 1 || a->heads % a->kv_heads) {
        snprintf(msg, len, "attn: batch %lld, seq %lld, heads %lld, kv_heads %lld: sizes must be "
                 "non-negative and heads a positive multiple of kv_heads", (long long)a->batch,
                 (long long)a->seq, (long long)a->heads, (long long)a->kv_heads);
        return MKI_ATTN_ERR_INVALID;
    }
    if (a->nseg < 1 || a->nseg > MKI_ATTN_MAXSEG) {
        snprintf(msg, len, "attn: %d key segments (1 to %d)", a->nseg, MKI_ATTN_MAXSEG);
        return MKI_ATTN_ERR_INVALID;
    }
    /* 32-bit tile counts, positions and TMA coordinates */
    const int64_t lim = (int64_t)1 << 31;
    const int64_t bm = rows_for((int)a->head_dim);
    const int64_t nqb = (a->seq + bm - 1) / bm;
    if (a->seq >= lim / 2 || a->batch >= lim || a->heads >= 65536 ||
        (a->batch && a->heads && nqb && a->batch * a->heads > (lim - 1) / nqb)) {
        snprintf(msg, len, "attn: batch %lld x heads %lld x seq %lld is too large for the kernel "
                 "(tiles and positions are 32-bit)", (long long)a->batch, (long long)a->heads,
                 (long long)a->seq);
        return MKI_ATTN_ERR_UNSUPPORTED;
    }
    const struct mki_attn_pos *ps[MKI_ATTN_MAXSEG + 1];
    ps[0] = &a->qpos;
    for (int s = 0; s < a->nseg; ++s) ps[s + 1] = &a->seg[s].pos;
    for (int s = 0; s <= a->nseg; ++s) {
        const struct mki_attn_pos *x = ps[s];
        if (x->split < 0 || x->off0 < 0 || x->off1 < 0 || x->off0 + a->seq >= lim ||
            x->off1 + a->seq >= lim) {
            snprintf(msg, len, "attn: positions out of the 32-bit range");
            return MKI_ATTN_ERR_UNSUPPORTED;
        }
    }
    const void *ptrs[2] = {a->q, a->o};
    const char *names[2] = {"q", "o"};
    for (int i = 0; i < 2; ++i) {
        if (!ptrs[i]) {
            snprintf(msg, len, "attn: %s is NULL", names[i]);
            return MKI_ATTN_ERR_INVALID;
        }
        if ((uintptr_t)ptrs[i] & 15) {
            snprintf(msg, len, "attn: %s = %p is not aligned to 16 bytes (the tensor maps and the "
                     "stores need it)", names[i], ptrs[i]);
            return MKI_ATTN_ERR_INVALID;
        }
    }
    for (int s = 0; s < a->nseg; ++s) {
        if (!a->seg[s].k || !a->seg[s].v) {
            snprintf(msg, len, "attn: k or v of key segment %d is NULL", s);
            return MKI_ATTN_ERR_INVALID;
        }
        if (((uintptr_t)a->seg[s].k & 15) || ((uintptr_t)a->seg[s].v & 15)) {
            snprintf(msg, len, "attn: k or v of key segment %d is not aligned to 16 bytes (the "
                     "tensor maps need it)", s);
            return MKI_ATTN_ERR_INVALID;
        }
    }
    if (a->chunk_rows < 0 || (a->chunk_rows % BN)) {
        snprintf(msg, len, "attn: chunk_rows %lld is not a multiple of %d", (long long)a->chunk_rows, BN);
        return MKI_ATTN_ERR_INVALID;
    }
    return MKI_ATTN_OK;
}

extern "C" int mki_attn_run(const struct mki_attn_args *a, void *stream, char *msg, size_t len)
{
    for (int s = 0; s < a->nseg && s < MKI_ATTN_MAXSEG; ++s)
        if (a->seg[s].flags) {
            snprintf(msg, len, "attn: the core alone waits for no flags");
            return MKI_ATTN_ERR_INVALID;
        }
    AttnParams p;
    int r = make_params(a, &p, msg, len);
    if (r) return r;
    if (p.num_tiles == 0) return MKI_ATTN_OK;
    RingParams rp;
    memset(&rp, 0, sizeof(rp));
    const int grid = grid_for(a, p.num_tiles, msg, len);
    if (grid < 0) return MKI_ATTN_ERR_CUDA;
    const void *fn = kernel_for((int)a->head_dim, a->dtype == MKI_F16);
    const int smem = smem_for((int)a->head_dim);
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess) {
        void *args[2] = {&p, &rp};
        e = cudaLaunchKernel(fn, dim3(grid), dim3(threads_for((int)a->head_dim)), args,
                             (size_t)smem, (cudaStream_t)stream);
    }
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(msg, len, "attn: launch failed: %s", cudaGetErrorString(e));
        return MKI_ATTN_ERR_CUDA;
    }
    return MKI_ATTN_OK;
}

extern "C" int mki_ratt_describe(const struct mki_ratt_launch *l, struct mki_launch_desc *d,
                                 char *msg, size_t len)
{
    RingParams rp;
    memset(&rp, 0, sizeof(rp));
    rp.on = 1;
    rp.nsrc = l->nsrc;
    rp.split = l->split;
    for (int i = 0; i < MKI_ATTN_MAXSEG; ++i) rp.seg_src[i] = l->seg_src[i];
    rp.nchunks = (int)mki_attn_nchunks(l->core.layout, l->core.batch, l->core.kv_heads,
                                       l->core.seq, l->core.chunk_rows);
    rp.ctl = l->ctl;
    for (int i = 0; i < MKI_MAXLOCAL; ++i) rp.peer_ctl[i] = l->peer_ctl[i];
    rp.rt = l->rt;
    if (rp.nchunks > MKI_ATTN_MAXCHUNKS) {
        snprintf(msg, len, "attn: %d chunks per rank, more than %d", rp.nchunks, MKI_ATTN_MAXCHUNKS);
        return MKI_ATTN_ERR_INVALID;
    }
    memset(d, 0, offsetof(struct mki_launch_desc, param));
    AttnParams p;
    int r = make_params(&l->core, &p, msg, len);
    if (r) return r;
    if (p.num_tiles == 0) {
        d->fn = (const void *)ratt_idle_kernel;
        d->grid = 1;
        d->block = 32;
        d->cluster = 1;
        d->exact = 1;
        return mki_launch_arg(d, &rp, sizeof(rp)) ? MKI_ATTN_ERR_INVALID : MKI_ATTN_OK;
    }
    const int grid = grid_for(&l->core, p.num_tiles, msg, len);
    if (grid < 0) return MKI_ATTN_ERR_CUDA;
    d->fn = kernel_for((int)l->core.head_dim, l->core.dtype == MKI_F16);
    d->grid = (unsigned)grid;
    d->block = (unsigned)threads_for((int)l->core.head_dim);
    d->cluster = 1;
    d->smem = (size_t)smem_for((int)l->core.head_dim);
    d->exact = 0; /* every CTA spins on flags: the launch path keeps it co-resident */
    if (mki_launch_arg(d, &p, sizeof(p)) || mki_launch_arg(d, &rp, sizeof(rp))) {
        snprintf(msg, len, "attn: kernel parameters of %zu bytes do not fit", sizeof(p) + sizeof(rp));
        return MKI_ATTN_ERR_INVALID;
    }
    return MKI_ATTN_OK;
}

extern "C" int mki_attn_preload(char *msg, size_t len)
{
    const int ds[2] = {64, 128};
    for (int i = 0; i < 4; ++i) {
        const void *k = kernel_for(ds[i & 1], (i >> 1) != 0);
        cudaFuncAttributes at;
        cudaError_t e = cudaFuncGetAttributes(&at, k);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_for(ds[i & 1]));
        if (e != cudaSuccess) {
            snprintf(msg, len, "attn: loading the attention kernels: %s", cudaGetErrorString(e));
            return MKI_ATTN_ERR_CUDA;
        }
    }
    return MKI_ATTN_OK;
}

extern "C" int mki_ratt_preload(char *msg, size_t len)
{
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, (const void *)ratt_idle_kernel);
    if (e != cudaSuccess) {
        snprintf(msg, len, "attn: loading the ring's protocol kernel: %s", cudaGetErrorString(e));
        return MKI_ATTN_ERR_CUDA;
    }
    return MKI_ATTN_OK;
}
