/* Argument validation for the GEMM engine: pure host C, no CUDA calls, so
 * tests/unit/test_gemm_args.c checks it on machines without a GPU. */
#include "gemm.h"
#include "gemm_sched.h"

#include <stdarg.h>
#include <stdio.h>

size_t mki_dtype_size(mki_dtype_t t)
{
    switch (t) {
    case MKI_DT_BF16:
    case MKI_DT_F16: return 2;
    case MKI_DT_F32: return 4;
    }
    return 0;
}

static int fail(int code, char *msg, size_t len, const char *fmt, ...)
{
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* TMA coordinates are int32 and global strides must stay under 2^40 bytes. */
#define MKI_MAX_DIM 2147483647LL
#define MKI_MAX_STRIDE_BYTES (1LL << 40)

/* [first byte, last byte + 1) of a row-major rows x cols matrix. */
static void extent(const void *p, int64_t rows, int64_t cols, int64_t ld, size_t es,
                   uintptr_t *lo, uintptr_t *hi)
{
    *lo = (uintptr_t)p;
    *hi = *lo + (uintptr_t)(((rows - 1) * ld + cols) * (int64_t)es);
}

static int overlaps(uintptr_t a0, uintptr_t a1, uintptr_t b0, uintptr_t b1)
{
    return a0 < b1 && b0 < a1;
}

static int check_types(const mki_gemm_args *a, char *msg, size_t len)
{
    if (a->in_type != MKI_DT_BF16 && a->in_type != MKI_DT_F16) {
        if (a->in_type == MKI_DT_F32)
            return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                        "gemm: in_type fp32 is not supported; convert A and B to bf16 or fp16");
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: in_type %d is not a dtype; use MKI_DT_BF16 or MKI_DT_F16",
                    (int)a->in_type);
    }
    if (a->out_type != MKI_DT_BF16 && a->out_type != MKI_DT_F16 && a->out_type != MKI_DT_F32)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: out_type %d is not a dtype; use MKI_DT_BF16, MKI_DT_F16 or MKI_DT_F32",
                    (int)a->out_type);
    return MKI_GEMM_OK;
}

static int check_sizes(const mki_gemm_args *a, char *msg, size_t len)
{
    if (a->m < 0 || a->n < 0 || a->k < 0)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: negative size (M=%lld N=%lld K=%lld)",
                    (long long)a->m, (long long)a->n, (long long)a->k);
    if (a->m > MKI_MAX_DIM || a->n > MKI_MAX_DIM || a->k > MKI_MAX_DIM)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: M, N and K must each be below 2^31 (M=%lld N=%lld K=%lld); split the product",
                    (long long)a->m, (long long)a->n, (long long)a->k);
    if (a->k == 0 || a->k % 8 != 0)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: K=%lld must be a positive multiple of 8: the TMA engine needs 16-byte "
                    "row strides; pad K with zeros to %lld",
                    (long long)a->k, (long long)(a->k > 0 ? (a->k + 7) / 8 * 8 : 8));
    return MKI_GEMM_OK;
}

/* ld: 0 -> default; otherwise >= minimum and its byte stride < 2^40. */
static int resolve_ld(const char *name, int64_t ld, int64_t min, size_t es, int64_t *out,
                      char *msg, size_t len)
{
    if (ld == 0)
        ld = min;
    if (ld < min)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: %s=%lld is smaller than the row length %lld", name,
                    (long long)ld, (long long)min);
    if (ld * (int64_t)es >= MKI_MAX_STRIDE_BYTES)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: %s=%lld gives a row stride of 2^40 bytes or more", name, (long long)ld);
    *out = ld;
    return MKI_GEMM_OK;
}

static int check_pointers(const mki_gemm_args *a, char *msg, size_t len)
{
    size_t os = mki_dtype_size(a->out_type);
    if (!a->a || !a->b || !a->d)
        return fail(MKI_GEMM_ERR_INVALID, msg, len, "gemm: %s is NULL",
                    !a->a ? "A" : !a->b ? "B" : "D");
    if (a->beta != 0.0f && !a->c)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: beta=%g but C is NULL; pass C or set beta to 0", (double)a->beta);
    if ((uintptr_t)a->a % 16 || (uintptr_t)a->b % 16)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: %s=%p is not 16-byte aligned, which the TMA loads need; "
                    "allocate it with cudaMalloc or offset it by a multiple of 8 elements",
                    (uintptr_t)a->a % 16 ? "A" : "B", (uintptr_t)a->a % 16 ? a->a : a->b);
    if ((uintptr_t)a->d % os || (a->beta != 0.0f && (uintptr_t)a->c % os))
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: %s is not aligned to its element size (%zu bytes)",
                    (uintptr_t)a->d % os ? "D" : "C", os);
    return MKI_GEMM_OK;
}

static int check_aliasing(const mki_gemm_args *a, const mki_gemm_plan *p, char *msg, size_t len)
{
    size_t is = mki_dtype_size(a->in_type), os = mki_dtype_size(a->out_type);
    uintptr_t a0, a1, b0, b1, d0, d1, c0, c1;
    extent(a->a, p->m, p->k, p->lda, is, &a0, &a1);
    if (a->trans_b)
        extent(a->b, p->n, p->k, p->ldb, is, &b0, &b1);
    else
        extent(a->b, p->k, p->n, p->ldb, is, &b0, &b1);
    extent(a->d, p->m, p->n, p->ldd, os, &d0, &d1);
    if (overlaps(d0, d1, a0, a1) || overlaps(d0, d1, b0, b1))
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: D overlaps %s; other tiles still read it while D is written, "
                    "use a separate output buffer", overlaps(d0, d1, a0, a1) ? "A" : "B");
    if (a->beta != 0.0f && a->c != (const void *)a->d) {
        extent(a->c, p->m, p->n, p->ldc, os, &c0, &c1);
        if (overlaps(d0, d1, c0, c1))
            return fail(MKI_GEMM_ERR_INVALID, msg, len,
                        "gemm: C partly overlaps D; pass C == D (same ld) or disjoint buffers");
    }
    if (a->beta != 0.0f && a->c == (const void *)a->d && p->ldc != p->ldd)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: C == D needs ldc == ldd (ldc=%lld ldd=%lld)",
                    (long long)p->ldc, (long long)p->ldd);
    return MKI_GEMM_OK;
}

static int check_device(const mki_gemm_args *a, const mki_gemm_device *dev, char *msg, size_t len)
{
    if (!dev)
        return fail(MKI_GEMM_ERR_INVALID, msg, len, "gemm: device description is NULL");
    if (dev->cc_major != 9 || dev->cc_minor != 0)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: compute capability %d.%d; the engine is built for sm_90a "
                    "(H100/H200) only", dev->cc_major, dev->cc_minor);
    if (a->num_ctas < 0 || a->num_ctas > dev->sm_count)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: num_ctas=%d must be 0 (all SMs) or 1..%d: the persistent grid "
                    "must be co-resident, one CTA per SM", a->num_ctas, dev->sm_count);
    if (a->cluster_m < 0 || a->cluster_m > 2)
        return fail(MKI_GEMM_ERR_INVALID, msg, len, "gemm: cluster_m=%d must be 0, 1 or 2",
                    a->cluster_m);
    if (a->cluster_m == 2 && (a->num_ctas ? a->num_ctas : dev->sm_count) % 2)
        return fail(MKI_GEMM_ERR_INVALID, msg, len,
                    "gemm: cluster_m=2 needs an even number of CTAs (num_ctas=%d)", a->num_ctas);
    if (a->group_m < 0)
        return fail(MKI_GEMM_ERR_INVALID, msg, len, "gemm: group_m=%d is negative", a->group_m);
    return MKI_GEMM_OK;
}

static void fill_plan(const mki_gemm_args *a, const mki_gemm_device *dev, mki_gemm_plan *p)
{
    size_t os = mki_dtype_size(a->out_type);
    int ctas = a->num_ctas ? a->num_ctas : dev->sm_count;
    p->num_m_blk = (int)mki_gemm_cdiv(p->m, MKI_GEMM_BM);
    p->num_n_blk = (int)mki_gemm_cdiv(p->n, MKI_GEMM_BN);
    p->num_k_blk = (int)mki_gemm_cdiv(p->k, MKI_GEMM_BK);
    p->num_tiles = p->num_m_blk * p->num_n_blk;
    /* Pairs of CTAs share B tiles (multicast) when the grid splits into pairs
     * and few pair slots go to waste on an odd last M-block. */
    p->cluster_m = (ctas % 2 == 0 && (p->num_m_blk % 2 == 0 || p->num_m_blk >= 16)) ? 2 : 1;
    if (a->cluster_m)
        p->cluster_m = a->cluster_m;
    p->num_units = mki_gemm_num_units(p->num_m_blk, p->num_n_blk, p->cluster_m);
    p->grid = ctas < p->num_units * p->cluster_m ? ctas : p->num_units * p->cluster_m;
    p->group_m = a->group_m ? a->group_m : MKI_GEMM_GROUP_M;
    /* TMA stores need a 16-byte aligned base and 16-byte row strides, and
     * they clip at 16-byte granularity (measured: a 2600-byte row got 8 bytes
     * written past its end), so rows must also be whole 16-byte units. */
    p->epi_direct = ((uintptr_t)a->d % 16 != 0) || ((p->ldd * (int64_t)os) % 16 != 0) ||
                    ((p->n * (int64_t)os) % 16 != 0);
}

int mki_gemm_validate(const mki_gemm_args *a, const mki_gemm_device *dev,
                      mki_gemm_plan *plan, char *msg, size_t len)
{
    mki_gemm_plan p;
    size_t is, os;
    int r;
    if (msg && len)
        msg[0] = '\0';
    if (!a)
        return fail(MKI_GEMM_ERR_INVALID, msg, len, "gemm: args is NULL");
    if ((r = check_types(a, msg, len)) || (r = check_device(a, dev, msg, len)))
        return r;
    if (a->m < 0 || a->n < 0 || a->k < 0)
        return check_sizes(a, msg, len);
    if (a->m == 0 || a->n == 0) { /* empty product: nothing to do */
        p = (mki_gemm_plan){0};
        p.noop = 1;
        if (plan)
            *plan = p;
        return MKI_GEMM_OK;
    }
    if ((r = check_sizes(a, msg, len)))
        return r;
    is = mki_dtype_size(a->in_type);
    os = mki_dtype_size(a->out_type);
    p = (mki_gemm_plan){0};
    p.m = a->m; p.n = a->n; p.k = a->k;
    if ((r = resolve_ld("lda", a->lda, a->k, is, &p.lda, msg, len)) ||
        (r = resolve_ld("ldb", a->ldb, a->trans_b ? a->k : a->n, is, &p.ldb, msg, len)) ||
        (r = resolve_ld("ldd", a->ldd, a->n, os, &p.ldd, msg, len)) ||
        (r = resolve_ld("ldc", a->ldc, a->n, os, &p.ldc, msg, len)))
        return r;
    if ((p.lda * (int64_t)is) % 16)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: lda=%lld is not a multiple of 8 elements (16 bytes), which TMA "
                    "needs; pad the rows of A", (long long)p.lda);
    if ((p.ldb * (int64_t)is) % 16)
        return fail(MKI_GEMM_ERR_UNSUPPORTED, msg, len,
                    "gemm: ldb=%lld is not a multiple of 8 elements (16 bytes), which TMA "
                    "needs; pad the rows of B (ldb >= %s, rounded up to 8)",
                    (long long)p.ldb, a->trans_b ? "K" : "N");
    if ((r = check_pointers(a, msg, len)) || (r = check_aliasing(a, &p, msg, len)))
        return r;
    fill_plan(a, dev, &p);
    if (plan)
        *plan = p;
    return MKI_GEMM_OK;
}
