/*
 * attn_ref.h - one query row of attention in double, for the GPU tests
 * of mkRingAttention (test_attn, test_scale's soak), with the tolerance
 * of the kernel's arithmetic: inputs rounded to bf16 or fp16 (unit
 * roundoff u), scores and sums in fp32, P rounded to the input type
 * before P V.  Per element of o:
 *
 *   |o - ref| <= 2 u (A + |ref|) + 2 ds A + [fp16] sub + 1e-6
 *
 * with A = sum p |v| / l (the magnitude the sum of P V carries), ds the
 * largest error of a score (scale sum |q k| d 2^-23: fp32 dot products),
 * and, for fp16, sub = sum min(p, 2^-25) |v| / l (P values that fp16
 * flushes below its subnormals); lse within 1e-3 + ds.
 */
#ifndef MK_TESTS_GPU_ATTN_REF_H
#define MK_TESTS_GPU_ATTN_REF_H

#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <vector>

struct AttnRef {
    std::vector<double> o, tol; /* one row of o, and each element's tolerance */
    double lse, tol_lse;
};

/* softmax(scale q k^T) v over keys j < nk for which keep(j) holds; k and
 * v are nk rows of d floats (the inputs' values); f16: fp16 inputs. */
template <class Keep>
static AttnRef attn_ref_row(const std::vector<double> &q, const float *k, const float *v,
                            int64_t nk, int64_t d, double scale, int f16, Keep keep)
{
    const double u = f16 ? ldexp(1.0, -11) : ldexp(1.0, -8), sub_lim = ldexp(1.0, -25);
    std::vector<double> s((size_t)nk);
    double m = -INFINITY, ds = 0;
    for (int64_t j = 0; j < nk; j++) {
        if (!keep(j)) continue;
        const float *kr = &k[(size_t)(j * d)];
        double dot = 0, mag = 0;
        for (int64_t e = 0; e < d; e++) {
            dot += q[(size_t)e] * kr[e];
            mag += fabs(q[(size_t)e] * kr[e]);
        }
        s[(size_t)j] = scale * dot;
        m = std::max(m, s[(size_t)j]);
        ds = std::max(ds, scale * mag * (double)d * ldexp(1.0, -23));
    }
    AttnRef r;
    r.o.assign((size_t)d, 0.0);
    std::vector<double> a((size_t)d, 0.0), sub((size_t)d, 0.0);
    double l = 0;
    for (int64_t j = 0; j < nk; j++) {
        if (!keep(j)) continue;
        const double p = exp(s[(size_t)j] - m), ps = std::min(p, sub_lim);
        const float *vr = &v[(size_t)(j * d)];
        l += p;
        for (int64_t e = 0; e < d; e++) {
            r.o[(size_t)e] += p * vr[e];
            a[(size_t)e] += p * fabs(vr[e]);
            sub[(size_t)e] += ps * fabs(vr[e]);
        }
    }
    r.tol.resize((size_t)d);
    for (int64_t e = 0; e < d; e++) {
        const double o = r.o[(size_t)e] / l, am = a[(size_t)e] / l;
        r.o[(size_t)e] = o;
        r.tol[(size_t)e] = 2 * u * (am + fabs(o)) + 2 * ds * am + (f16 ? sub[(size_t)e] / l : 0.0) +
                           1e-6;
    }
    r.lse = m + log(l);
    r.tol_lse = 1e-3 + ds;
    return r;
}

#endif
