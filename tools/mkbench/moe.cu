/*
 * moe.cu - mkbench for mkMoEDispatch, mkMoECombine, mkMoEDispatchGemm and
 * mkMoEDispatchFfnCombine (one process per rank, under mpirun): ours
 * against the NCCL all-to-allv + cuBLAS sequence a framework runs, and
 * against parts of it alone, in the same run, on the same random data and
 * routing.
 *
 *   mkbench moe [--shapes TxHxExK,...] [--routing random,skewed]
 *               [--series dispatch,combine,dgemm,layer] [--layer]
 *               [--gemm-n N] [--iters N] [--rounds R] [--tag NAME]
 *               [--no-nccl]
 *   (mkbench_moe [the same] standalone)
 *
 * Shapes: T tokens per rank, hidden H, E experts (a multiple of the
 * ranks), top-K; default DeepSeek-like 4096x7168x256x8 and
 * 16384x7168x256x8, Mixtral-like 8192x4096x8x2; bf16.  Routing: random
 * (every token's top-K of random scores, weights its normalized scores)
 * or skewed (expert 0 in min(1, 0.3 K) of the tokens: 30% of the slots
 * where K allows, every token at K >= 4, the rest top-(K-1) of random
 * scores).  Every rank builds every rank's routing from the seed, so the
 * baseline knows all counts on the host (it pays for no count exchange).
 *
 * Series, taking turns:
 *   dispatch  ours: mkMoEDispatch (recv_weights written, recv_src NULL);
 *             nccl: a pack kernel gathers each (token, destination rank)
 *             row once into a send buffer grouped by destination,
 *             ncclGroupStart + ncclSend/ncclRecv per peer (all-to-allv),
 *             an unpack kernel into the expert-grouped layout (ours');
 *             a2a:  that all-to-allv alone (the same bytes);
 *   combine   ours: mkMoECombine from ours' recv as y;
 *             nccl: all-to-allv back of every (t, j) row (the experts'
 *             outputs given grouped by source rank: no permutation
 *             charged) and a weighted-sum kernel (fp32, j in order, one
 *             rounding);
 *             a2a:  that all-to-allv alone;
 *   dgemm     the dispatch and the first GEMM of the experts' FFN, y_e =
 *             recv_e W_e^T with W_e N x H (stored Linear weights, transW
 *             1), N = 2 I: I = 2048 at H 7168 (DeepSeek-like), 14336 at
 *             H 4096 (Mixtral-like), else I = H (--gemm-n N sets N);
 *             ours: mkMoEDispatchGemm (y in mkMoEDispatch's layout);
 *             nccl: the dispatch baseline above unpacking into ours'
 *             layout, then cublasGemmGroupedBatchedEx over the local
 *             experts (a group per expert with rows, group size 1, its
 *             own m; bf16 in and out, fp32 compute);
 *             mk+blas: mkMoEDispatch then that grouped GEMM;
 *             blas: that grouped GEMM alone (the limit);
 *             nccl+loop: the dispatch baseline, then one cublasGemmEx per
 *             local expert with rows (the per-expert loop; at these
 *             shapes faster than cuBLAS's grouped call);
 *             loop: that loop alone;
 *             mkgemm: our grouped GEMM alone (mki_gemm_grouped, the
 *             engine mkMoEDispatchGemm runs) on ours' recv.
 *   layer     the whole expert layer (issue 20; --layer alone is --series
 *             layer, with --series it adds layer): out[t] = sum_j w_tj
 *             FFN_e(x[t]), FFN_e(x) = (silu(x Wg_e^T) * (x Wu_e^T)) Wd_e^T,
 *             inter I = N / 2 (2048 at H 7168, 14336 at H 4096, else H;
 *             --gemm-n N, a multiple of 16, sets it), W13 El x (2I x H)
 *             (gate rows, then up rows: dgemm's W, shared with it) and W2
 *             El x (H x I), stored Linear weights (transW 1);
 *             ours: mkMoEDispatchFfnCombine, recv_capacity the largest
 *             rank's rows (as dgemm);
 *             nccl+grp: the dgemm baseline's dispatch (pack, all-to-allv,
 *             unpack to the expert layout), cublasGemmGroupedBatchedEx
 *             with W13 (N = 2I; h13 in bf16, as a framework keeps it), a
 *             SwiGLU kernel (h = silu(g) * u from h13's halves, fp32,
 *             one rounding), cublasGemmGroupedBatchedEx with W2 (N = H),
 *             a permute kernel (the experts' output rows into the order
 *             of their source ranks, each source's (t, j) in order: the
 *             combine series' y, whose permutation that series does not
 *             charge), the all-to-allv back and the combine baseline's
 *             weighted-sum kernel; one stream;
 *             nccl+loop: the same with one cublasGemmEx per local expert
 *             with rows for each of the two GEMMs;
 *             grp gemms: the two grouped GEMMs and the SwiGLU alone, on
 *             the expert-layout rows (no communication);
 *             loop gemms: the same with the per-expert loops;
 *             mk gemms: our two grouped GEMMs alone (mki_gemm_grouped with
 *             W13 and SwiGLU in the epilogue, then with W2) on ours'
 *             recv and expert_offsets (what the call computes between its
 *             dispatch and its combine: issue 20's "within 1.10x").
 *             --no-nccl times ours and the GEMM-only series.
 * Before timing, the baselines are checked against ours: the unpacked
 * rows must be ours' recv bit for bit, the combined outputs within bf16's
 * rounding; ours' dgemm expert_offsets against the host's, its y on every
 * real row within bf16's rounding of mk+blas's y and of the nccl
 * baseline's; the layer's out against nccl+grp's, every element within
 * 1/32 of its row's largest |out| (the same math, h and y rounded to bf16
 * in both; the sums' orders differ, and the baseline also rounds g and u
 * to bf16 before the SwiGLU), the largest error over that row maximum
 * printed (a mismatch ends the run, status 3).  The layer's check needs
 * NCCL, or one rank (its all-to-allv then a copy); else it reads "-".
 *
 * Method as mkbench gemm_rs: R rounds (default 3) of N timed calls
 * (default 20) per series, each block after a bootstrap barrier and
 * warm-up calls; inputs and outputs rotate over sets whose bytes pass
 * twice the L2; per series the median of the R x N per-call CUDA event
 * times, the largest of the ranks' medians.  Dispatch GB/s: the bytes of
 * the unique (token, destination) rows that cross to other ranks, the
 * mean over the ranks, over the time (the combine's GB/s: the same bytes);
 * dgemm TFLOP/s: 2 N H times the mean real rows per rank over the time;
 * layer TFLOP/s: 6 H I times those rows.  The layer's table gives the
 * device memory in use after the checks (the library's buffers included;
 * the fullest GPU's; every process's under MPS).
 * Rank 0 prints the table and writes moe.json (moe-NAME.json with --tag)
 * and moe.tsv in mkb_results_dir.  --no-nccl times ours only (NCCL
 * refuses ranks that share a GPU: a run under MPS on one GPU).  NCCL runs
 * with NCCL_NVLS_ENABLE=0 unless the environment sets it.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <string>
#include <vector>

#include "mkernel.h"
#include "mki.h"
#include "gemm/gemm.h"
#include "common.h"
#include "multi.h"


namespace {

int g_rank, g_n;
mkComm_t g_comm;
ncclComm_t g_nccl;
cudaStream_t g_st;
int g_sms;
cublasHandle_t g_blas;
int g_have_nccl; /* 0: --no-nccl (a2av then only a copy at one rank) */

/* the series: dispatch ours, NCCL's, its all-to-allv alone; the same for
 * combine (ours + 1 is the baseline, ours + 2 the all-to-allv); dispatch +
 * GEMM ours, NCCL's dispatch + cuBLAS grouped, mkMoEDispatch + cuBLAS
 * grouped, cuBLAS grouped alone, ...; the layer ours, its NCCL + cuBLAS
 * grouped and per-expert loop sequences, their GEMMs + SwiGLU alone */
enum { D_OURS, D_NCCL, D_A2A, C_OURS, C_NCCL, C_A2A, G_OURS, G_NCCL, G_UNF, G_BLAS, G_LOOPN,
       G_LOOP, G_MKG, L_OURS, L_NCCL, L_LOOPN, L_BLAS, L_LOOP, L_MKG, NSERIES };

/* --series: bits of the groups */
enum { S_DISPATCH = 1, S_COMBINE = 2, S_DGEMM = 4, S_LAYER = 8 };

int series_group(int what)
{
    return what <= D_A2A ? S_DISPATCH : what <= C_A2A ? S_COMBINE : what <= G_MKG ? S_DGEMM : S_LAYER;
}
bool needs_nccl(int what)
{
    return what == D_NCCL || what == D_A2A || what == C_NCCL || what == C_A2A || what == G_NCCL ||
           what == G_LOOPN || what == L_NCCL || what == L_LOOPN;
}
bool is_ours(int what)
{
    return what == D_OURS || what == C_OURS || what == G_OURS || what == G_MKG || what == L_OURS ||
           what == L_MKG;
}

/* ---- routing (host) ---------------------------------------------------- */

uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct routing {
    std::vector<int32_t> idx; /* T * K */
    std::vector<float> w;     /* T * K */
};

/* Rank q's routing: top-K of random scores (skewed: expert 0 first in a
 * share of the tokens). */
routing make_routing(int skewed, int q, int64_t T, int64_t E, int64_t K, uint64_t seed)
{
    routing r;
    r.idx.assign((size_t)(T * K), -1);
    r.w.assign((size_t)(T * K), 0.0f);
    const double p_hot = std::min(1.0, 0.3 * (double)K);
    std::vector<float> best((size_t)K);
    std::vector<int32_t> arg((size_t)K);
    for (int64_t t = 0; t < T; t++) {
        const uint64_t base = mix(seed ^ mix((uint64_t)q * 0x100000001b3ull + (uint64_t)t));
        int n = 0; /* best[0..n) sorted, largest first */
        bool hot = skewed && (double)(mix(base) >> 11) / 9007199254740992.0 < p_hot;
        if (hot) {
            best[0] = 2.0f; /* above every random score */
            arg[0] = 0;
            n = 1;
        }
        for (int64_t e = skewed ? 1 : 0; e < E; e++) {
            const float s = (float)(mix(base + 1 + (uint64_t)e) >> 40) / (float)(1u << 24);
            if (n == K && s <= best[(size_t)(K - 1)]) continue;
            int i = n < K ? n++ : (int)K - 1;
            while (i > 0 && best[(size_t)(i - 1)] < s) {
                best[(size_t)i] = best[(size_t)(i - 1)];
                arg[(size_t)i] = arg[(size_t)(i - 1)];
                i--;
            }
            best[(size_t)i] = s;
            arg[(size_t)i] = (int32_t)e;
        }
        float sum = 0;
        for (int j = 0; j < n; j++) sum += std::min(best[(size_t)j], 1.0f);
        for (int j = 0; j < n; j++) {
            r.idx[(size_t)(t * K + j)] = arg[(size_t)j];
            r.w[(size_t)(t * K + j)] = std::min(best[(size_t)j], 1.0f) / sum;
        }
    }
    return r;
}

/* This rank's view of one shape and routing: ours' layout and the
 * baselines' index maps and counts (rows). */
struct layout {
    int64_t rows = 0, max_rows = 0;       /* received here; the largest rank's */
    std::vector<int64_t> off;             /* ours' expert_offsets, El + 1 */
    std::vector<int32_t> pack;            /* send-buffer row -> token */
    std::vector<size_t> scnt, sdis, rcnt, rdis;     /* dispatch all-to-allv, rows */
    std::vector<int32_t> unpack;          /* expert-layout row -> a2a receive row */
    std::vector<int32_t> ysrc;            /* combine send row -> expert-layout row */
    std::vector<size_t> cscnt, csdis, crcnt, crdis; /* combine all-to-allv, rows */
    std::vector<int32_t> cpos;            /* slot (t, j) -> combine receive row; -1 */
    double cross_rows_mean = 0;           /* unique (t, rank != source) rows, mean */
    double rows_mean = 0;                 /* rows received per rank, mean */
};

void prefix(const std::vector<size_t> &c, std::vector<size_t> &d)
{
    d.assign(c.size(), 0);
    for (size_t i = 1; i < c.size(); i++) d[i] = d[i - 1] + c[i - 1];
}

layout make_layout(const std::vector<routing> &rt, int64_t T, int64_t E, int64_t K)
{
    layout L;
    const int64_t El = E / g_n;
    const int me = g_rank;
    /* ours: rows per expert, per rank */
    std::vector<int64_t> cnt((size_t)E, 0);
    for (int q = 0; q < g_n; q++)
        for (int32_t g : rt[(size_t)q].idx)
            if (g >= 0) cnt[(size_t)g]++;
    L.off.assign((size_t)El + 1, 0);
    double total = 0;
    for (int d = 0; d < g_n; d++) {
        int64_t acc = 0;
        for (int64_t e = 0; e < El; e++) {
            if (d == me) L.off[(size_t)e] = acc;
            acc += cnt[(size_t)(d * El + e)];
        }
        if (d == me) L.off[(size_t)El] = acc;
        L.max_rows = std::max(L.max_rows, acc);
        total += (double)acc;
    }
    L.rows = L.off[(size_t)El];
    L.rows_mean = total / g_n;
    /* unique destinations of every rank's tokens */
    auto dests = [&](int q, int64_t t, std::vector<char> &to) {
        std::fill(to.begin(), to.end(), 0);
        for (int64_t j = 0; j < K; j++) {
            const int32_t g = rt[(size_t)q].idx[(size_t)(t * K + j)];
            if (g >= 0) to[(size_t)(g / El)] = 1;
        }
    };
    std::vector<char> to((size_t)g_n);
    double cross = 0;
    L.scnt.assign((size_t)g_n, 0);
    L.rcnt.assign((size_t)g_n, 0);
    std::vector<std::vector<int32_t>> sendlist((size_t)g_n);
    std::vector<std::vector<int32_t>> pos_here((size_t)g_n); /* q's token -> a2a row here */
    for (int q = 0; q < g_n; q++) {
        pos_here[(size_t)q].assign((size_t)T, -1);
        for (int64_t t = 0; t < T; t++) {
            dests(q, t, to);
            for (int d = 0; d < g_n; d++) cross += d != q && to[(size_t)d];
            if (q == me)
                for (int d = 0; d < g_n; d++)
                    if (to[(size_t)d]) sendlist[(size_t)d].push_back((int32_t)t);
            if (to[(size_t)me]) pos_here[(size_t)q][(size_t)t] = (int32_t)L.rcnt[(size_t)q]++;
        }
    }
    L.cross_rows_mean = cross / g_n;
    for (int d = 0; d < g_n; d++) {
        L.scnt[(size_t)d] = sendlist[(size_t)d].size();
        L.pack.insert(L.pack.end(), sendlist[(size_t)d].begin(), sendlist[(size_t)d].end());
    }
    prefix(L.scnt, L.sdis);
    prefix(L.rcnt, L.rdis);
    /* ours' expert layout here: by local expert, source rank, (t, j) */
    std::vector<std::vector<std::pair<int, int32_t>>> bucket((size_t)El);
    for (int q = 0; q < g_n; q++) {
        const std::vector<int32_t> &idx = rt[(size_t)q].idx;
        for (size_t i = 0; i < idx.size(); i++)
            if (idx[i] >= 0 && idx[i] / El == me)
                bucket[(size_t)(idx[i] - me * El)].push_back({q, (int32_t)i});
    }
    std::vector<std::vector<int32_t>> row_of((size_t)g_n); /* q's slot -> row here */
    for (int q = 0; q < g_n; q++) row_of[(size_t)q].assign((size_t)(T * K), -1);
    for (int64_t e = 0; e < El; e++)
        for (const auto &p : bucket[(size_t)e]) {
            row_of[(size_t)p.first][(size_t)p.second] = (int32_t)L.unpack.size();
            L.unpack.push_back((int32_t)(L.rdis[(size_t)p.first] +
                                         pos_here[(size_t)p.first][(size_t)(p.second / K)]));
        }
    /* combine: here (the experts' rank) rows go back grouped by source,
     * each source's in (t, j) order; the source reads slot (t, j) from
     * the block of its expert's rank */
    L.cscnt.assign((size_t)g_n, 0);
    L.crcnt.assign((size_t)g_n, 0);
    for (int q = 0; q < g_n; q++)
        for (size_t i = 0; i < (size_t)(T * K); i++)
            if (row_of[(size_t)q][i] >= 0) {
                L.ysrc.push_back(row_of[(size_t)q][i]);
                L.cscnt[(size_t)q]++;
            }
    const std::vector<int32_t> &mine = rt[(size_t)me].idx;
    for (int32_t g : mine)
        if (g >= 0) L.crcnt[(size_t)(g / El)]++;
    prefix(L.cscnt, L.csdis);
    prefix(L.crcnt, L.crdis);
    L.cpos.assign((size_t)(T * K), -1);
    std::vector<size_t> cur = L.crdis;
    for (size_t i = 0; i < mine.size(); i++)
        if (mine[i] >= 0) L.cpos[i] = (int32_t)cur[(size_t)(mine[i] / El)]++;
    return L;
}

/* ---- the baselines' kernels ------------------------------------------- */

/* dst row r = src row idx[r] (rows of vec 16-byte words). */
__global__ void gather_rows(uint4 *dst, const uint4 *src, const int32_t *idx, int64_t rows,
                            int64_t vec)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint4 *s = src + (int64_t)idx[r] * vec;
        uint4 *d = dst + r * vec;
        for (int64_t v = threadIdx.x; v < vec; v += blockDim.x) d[v] = s[v];
    }
}

/* out[t] = sum over j with pos >= 0 of w[t, j] * yb[pos[t, j]], fp32, j in
 * order, one rounding to bf16. */
__global__ void weighted_sum(__nv_bfloat16 *out, const __nv_bfloat16 *yb, const int32_t *pos,
                             const float *w, int64_t tokens, int64_t hidden, int topk)
{
    __shared__ int32_t sp[MK_MOE_MAX_TOPK];
    __shared__ float sw[MK_MOE_MAX_TOPK];
    const int64_t vec = hidden / 8;
    for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
        __syncthreads();
        if (threadIdx.x < (unsigned)topk) {
            sp[threadIdx.x] = pos[t * topk + threadIdx.x];
            sw[threadIdx.x] = w[t * topk + threadIdx.x];
        }
        __syncthreads();
        for (int64_t v = threadIdx.x; v < vec; v += blockDim.x) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = 0; j < topk; j++) {
                if (sp[j] < 0) continue;
                const uint4 u = ((const uint4 *)(yb + (int64_t)sp[j] * hidden))[v];
                const __nv_bfloat162 *b = (const __nv_bfloat162 *)&u;
                for (int i = 0; i < 4; i++) {
                    const float2 f = __bfloat1622float2(b[i]);
                    acc[2 * i] += sw[j] * f.x;
                    acc[2 * i + 1] += sw[j] * f.y;
                }
            }
            uint4 o;
            __nv_bfloat162 *ob = (__nv_bfloat162 *)&o;
            for (int i = 0; i < 4; i++) ob[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
            ((uint4 *)(out + t * hidden))[v] = o;
        }
    }
}

/* The checks of the baselines against ours. */
__global__ void count_neq(const uint4 *a, const uint4 *b, size_t n, unsigned long long *cnt)
{
    unsigned long long c = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c += a[i].x != b[i].x || a[i].y != b[i].y || a[i].z != b[i].z || a[i].w != b[i].w;
    if (c) atomicAdd(cnt, c);
}

__global__ void count_far(const __nv_bfloat16 *a, const __nv_bfloat16 *b, size_t n,
                          unsigned long long *cnt)
{
    unsigned long long c = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
        c += !(fabsf(x - y) <= fabsf(y) * (1.0f / 128) + 1e-3f);
    }
    if (c) atomicAdd(cnt, c);
}

/* Rows a[i] against b[i], i < rows, n columns of bf16: the count of elements apart by more than two bf16 roundings of
 * GEMM outputs (fp32 accumulation in both, in other orders). */
__global__ void count_far_rows(const __nv_bfloat16 *a, const __nv_bfloat16 *b, int64_t rows,
                               int64_t n, unsigned long long *cnt)
{
    unsigned long long c = 0;
    const size_t total = (size_t)rows * (size_t)n;
    for (size_t f = blockIdx.x * (size_t)blockDim.x + threadIdx.x; f < total;
         f += (size_t)gridDim.x * blockDim.x) {
        const int64_t i = (int64_t)(f / (size_t)n), j = (int64_t)(f % (size_t)n);
        const float x = __bfloat162float(a[i * n + j]);
        const float y = __bfloat162float(b[i * n + j]);
        c += !(fabsf(x - y) <= (fabsf(x) + fabsf(y)) * (1.0f / 256) + 1e-2f);
    }
    if (c) atomicAdd(cnt, c);
}

/* The layer baselines' SwiGLU: h[r][c] = silu(g) * u, g = gu[r][c], u =
 * gu[r][I + c] (gu rows of 2 I), silu(g) = g / (1 + exp(-g)), fp32, one
 * rounding to bf16; ivec = I / 8. */
__global__ void swiglu(uint4 *h, const uint4 *gu, int64_t rows, int64_t ivec)
{
    const size_t n = (size_t)rows * (size_t)ivec;
    for (size_t f = blockIdx.x * (size_t)blockDim.x + threadIdx.x; f < n;
         f += (size_t)gridDim.x * blockDim.x) {
        const size_t r = f / (size_t)ivec, v = f % (size_t)ivec;
        const uint4 g4 = gu[r * 2 * (size_t)ivec + v], u4 = gu[(r * 2 + 1) * (size_t)ivec + v];
        const __nv_bfloat162 *g = (const __nv_bfloat162 *)&g4, *u = (const __nv_bfloat162 *)&u4;
        uint4 o;
        __nv_bfloat162 *ob = (__nv_bfloat162 *)&o;
        for (int i = 0; i < 4; i++) {
            const float2 gf = __bfloat1622float2(g[i]), uf = __bfloat1622float2(u[i]);
            ob[i] = __floats2bfloat162_rn(gf.x / (1.0f + expf(-gf.x)) * uf.x,
                                          gf.y / (1.0f + expf(-gf.y)) * uf.y);
        }
        h[f] = o;
    }
}

/* The layer's check, a block per row of n: err = |a - b| / max over the
 * row of |b| (a zero row: |a - b| itself; NaN: infinity); counts the
 * elements with err > tol, the largest err in *maxbits (a float's bits:
 * non-negative floats order as their bits). */
__global__ void row_rel_err(const __nv_bfloat16 *a, const __nv_bfloat16 *b, int64_t rows,
                            int64_t n, float tol, unsigned long long *cnt, unsigned *maxbits)
{
    __shared__ float red[256];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const __nv_bfloat16 *ar = a + r * n, *br = b + r * n;
        float m = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            m = fmaxf(m, fabsf(__bfloat162float(br[i])));
        red[threadIdx.x] = m;
        __syncthreads();
        for (int k = blockDim.x / 2; k > 0; k /= 2) {
            if ((int)threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
            __syncthreads();
        }
        const float scale = red[0] > 0 ? 1.0f / red[0] : 1.0f;
        __syncthreads();
        unsigned long long c = 0;
        float worst = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float e = fabsf(__bfloat162float(ar[i]) - __bfloat162float(br[i])) * scale;
            if (!(e <= 3.0e38f)) e = INFINITY;
            c += !(e <= tol);
            worst = fmaxf(worst, e);
        }
        if (c) atomicAdd(cnt, c);
        if (worst > 0) atomicMax(maxbits, __float_as_uint(worst));
    }
}

/* ---- series ------------------------------------------------------------- */

struct set {
    uint16_t *x;                                       /* T x H */
    uint16_t *recv, *out;                              /* ours */
    float *rw;
    int64_t *off;
    int32_t *send_rows;
    uint16_t *sbuf, *rbuf, *ubuf, *ysrc, *yback, *outn; /* the baselines' */
    /* dgemm: ours' y, recv_weights, expert_offsets, send_rows; the NCCL
     * baseline's unpack buffer and y, mk+blas's y (all in the dispatch's
     * layout); cuBLAS's pointer arrays (device) of A and C */
    uint16_t *yg, *ubufp, *yn, *yu;
    float *rwg;
    int64_t *offg;
    int32_t *srg;
    void **pa_n, **pc_n, **pa_u, **pc_u;
    /* layer: the baselines' SwiGLU rows (rows x I) and expert outputs
     * (rows x H) in the dispatch's layout, the second GEMM's pointer
     * arrays (device); the first GEMM is dgemm's NCCL one (ubufp -> yn,
     * pa_n, pc_n), the all-to-allv back and the weighted sum the combine
     * baseline's buffers (ysrc, yback, outn); ours' out is out */
    uint16_t *hb, *ye;
    uint16_t *hmk, *ymk; /* our two grouped GEMMs alone: cap rows of I and of H */
    void **pa2, **pc2;
};

/* One cublasGemmGroupedBatchedEx call's arguments: a group of size 1 per
 * local expert with rows, row-major C_e (rows_e x n) = A_e (rows_e x k)
 * W_e^T with W_e n x k, i.e. column-major C_e^T = W_e^T A_e^T. */
struct blas_groups {
    int G = 0;
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> gm, gn, gk, ldw, lda, ldc, gsz;
    std::vector<float> alpha, beta;
    void **pw = nullptr; /* device: W_e of each group */
};

struct ctx {
    int what;
    std::vector<set> sets;
    int64_t T, H, E, K, cap;
    const int32_t *idx, *pack, *unpack, *cpos, *ysrc_idx;
    const float *w;
    layout *L;
    /* dgemm (and the layer's first GEMM) */
    int64_t N = 0, capg = 0;
    const uint16_t *W = nullptr;  /* El x (N x H); the layer's W13 */
    blas_groups g1;               /* y = A W^T */
    std::vector<int64_t> gexp;    /* the local experts with rows */
    int32_t *gtable = nullptr;    /* mki_gemm_grouped's table (our GEMM alone) */
    /* layer */
    int64_t I = 0;                /* inter, N / 2 */
    const uint16_t *W2 = nullptr; /* El x (H x I) */
    blas_groups g2;               /* y = h W2^T */
};

void a2av(const uint16_t *s, uint16_t *r, const std::vector<size_t> &sc,
          const std::vector<size_t> &sd, const std::vector<size_t> &rc,
          const std::vector<size_t> &rd, int64_t H)
{
    if (!g_have_nccl) { /* one rank without NCCL (the layer's check): a copy */
        if (g_n != 1) {
            fprintf(stderr, "rank %d: an all-to-allv without NCCL\n", g_rank);
            exit(3);
        }
        if (sc[0])
            MKB_CHECK(cudaMemcpyAsync(r + rd[0] * H, s + sd[0] * H, sc[0] * H * 2,
                                      cudaMemcpyDeviceToDevice, g_st));
        return;
    }
    MKB_NC(ncclGroupStart());
    for (int q = 0; q < g_n; q++) {
        if (sc[(size_t)q])
            MKB_NC(ncclSend(s + sd[(size_t)q] * H, sc[(size_t)q] * H, ncclBfloat16, q, g_nccl,
                            g_st));
        if (rc[(size_t)q])
            MKB_NC(ncclRecv(r + rd[(size_t)q] * H, rc[(size_t)q] * H, ncclBfloat16, q, g_nccl,
                            g_st));
    }
    MKB_NC(ncclGroupEnd());
}

void gather(uint16_t *dst, const uint16_t *src, const int32_t *idx, int64_t rows, int64_t H)
{
    if (rows <= 0) return;
    const int64_t blocks = std::min<int64_t>(rows, (int64_t)g_sms * 8);
    gather_rows<<<(unsigned)blocks, 256, 0, g_st>>>((uint4 *)dst, (const uint4 *)src, idx, rows,
                                                    H / 8);
    MKB_CHECK(cudaGetLastError());
}

/* cuBLAS's grouped GEMM of the local experts with rows: row-major
 * y_e = A_e W_e^T, i.e. column-major y_e^T (n x rows_e) = W_e^T A_e^T. */
void grouped_gemm(const blas_groups &g, void *const *pa, void *const *pc)
{
    if (g.G == 0) return;
    MKB_CB(cublasGemmGroupedBatchedEx(
        g_blas, g.ta.data(), g.tb.data(), g.gm.data(), g.gn.data(), g.gk.data(), g.alpha.data(),
        (const void *const *)g.pw, CUDA_R_16BF, g.ldw.data(), (const void *const *)pa,
        CUDA_R_16BF, g.lda.data(), g.beta.data(), pc, CUDA_R_16BF, g.ldc.data(), g.G,
        g.gsz.data(), CUBLAS_COMPUTE_32F));
}

/* The per-expert loop: one cublasGemmEx per local expert with rows, A and
 * y in the dispatch's layout (rows from L.off); W El x (n x k). */
void loop_gemm(const ctx &x, const uint16_t *W, int64_t n, int64_t k, const uint16_t *A,
               uint16_t *C)
{
    const layout &L = *x.L;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t e : x.gexp) {
        const int64_t r0 = L.off[(size_t)e], rows = L.off[(size_t)e + 1] - r0;
        MKB_CB(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one,
                            W + (size_t)e * n * k, CUDA_R_16BF, (int)k, A + (size_t)r0 * k,
                            CUDA_R_16BF, (int)k, &zero, C + (size_t)r0 * n, CUDA_R_16BF, (int)n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

/* The layer baselines' SwiGLU over the real rows: s.yn (h13) -> s.hb. */
void swiglu_rows(const ctx &x, const set &s)
{
    const int64_t rows = x.L->rows, ivec = x.I / 8;
    if (rows <= 0) return;
    const unsigned blocks = (unsigned)std::max<int64_t>(
        1, std::min<int64_t>((int64_t)g_sms * 16, (rows * ivec + 255) / 256));
    swiglu<<<blocks, 256, 0, g_st>>>((uint4 *)s.hb, (const uint4 *)s.yn, rows, ivec);
    MKB_CHECK(cudaGetLastError());
}

/* The layer's expert FFN on the expert-layout rows s.ubufp: the grouped
 * GEMMs (loop 0) or the per-expert loops (1), the SwiGLU between; out in
 * s.ye. */
void ffn(const ctx &x, const set &s, int loop)
{
    if (loop) loop_gemm(x, x.W, x.N, x.H, s.ubufp, s.yn);
    else grouped_gemm(x.g1, s.pa_n, s.pc_n);
    swiglu_rows(x, s);
    if (loop) loop_gemm(x, x.W2, x.H, x.I, s.hb, s.ye);
    else grouped_gemm(x.g2, s.pa2, s.pc2);
}

/* One of our grouped GEMMs (mki_gemm_grouped) over ours' recv layout
 * (cap rows, s.off): d = a b^T per local expert, b El x (n x k); glu > 0:
 * SwiGLU in the epilogue (n = 2 glu, d glu columns). */
void mk_grouped_one(const ctx &x, const set &s, const void *a, const void *b, void *d,
                    int64_t n, int64_t k, int64_t glu)
{
    mki_gemm_grouped_args g;
    memset(&g, 0, sizeof g);
    g.rows = x.cap;
    g.n = n;
    g.k = k;
    g.glu = glu;
    g.groups = x.E / g_n;
    g.a = a;
    g.b = b;
    g.d = d;
    g.offsets = s.off;
    g.table = x.gtable;
    g.in_type = MKI_DT_BF16;
    g.out_type = MKI_DT_BF16;
    g.trans_b = 1;
    g.stream = g_st;
    char msg[512];
    if (mki_gemm_grouped(&g, msg, sizeof msg)) {
        fprintf(stderr, "rank %d: mki_gemm_grouped: %s\n", g_rank, msg);
        exit(3);
    }
}

/* Our grouped GEMM alone (the engine mkMoEDispatchGemm runs after its
 * dispatch) over ours' recv and expert_offsets. */
void mk_grouped(const ctx &x, const set &s) { mk_grouped_one(x, s, s.recv, x.W, s.yu, x.N, x.H, 0); }

/* Our two grouped GEMMs alone (what mkMoEDispatchFfnCombine computes
 * between its dispatch and its combine) over ours' recv and
 * expert_offsets: W13 with SwiGLU in the epilogue, then W2. */
void mk_grouped_layer(const ctx &x, const set &s)
{
    mk_grouped_one(x, s, s.recv, x.W, s.hmk, 2 * x.I, x.H, x.I);
    mk_grouped_one(x, s, s.hmk, x.W2, s.ymk, x.H, x.I, 0);
}

/* The dgemm baselines' dispatch: pack, all-to-allv, unpack into ours'
 * layout (ubufp, the real rows only). */
void nccl_dispatch(const ctx &x, const set &s)
{
    const layout &L = *x.L;
    gather(s.sbuf, s.x, x.pack, (int64_t)L.pack.size(), x.H);
    a2av(s.sbuf, s.rbuf, L.scnt, L.sdis, L.rcnt, L.rdis, x.H);
    gather(s.ubufp, s.rbuf, x.unpack, L.rows, x.H);
}

/* The combine baselines: the all-to-allv back of s.ysrc (rows by source
 * rank), then the weighted sum into s.outn. */
void nccl_combine(const ctx &x, const set &s)
{
    const layout &L = *x.L;
    a2av(s.ysrc, s.yback, L.cscnt, L.csdis, L.crcnt, L.crdis, x.H);
    if (x.T > 0) {
        weighted_sum<<<(unsigned)std::min<int64_t>(x.T, (int64_t)g_sms * 8), 128, 0, g_st>>>(
            (__nv_bfloat16 *)s.outn, (const __nv_bfloat16 *)s.yback, x.cpos, x.w, x.T, x.H,
            (int)x.K);
        MKB_CHECK(cudaGetLastError());
    }
}

void call(const ctx &x, const set &s)
{
    const layout &L = *x.L;
    switch (x.what) {
    case D_OURS:
        MKB_MK(mkMoEDispatch(s.x, x.idx, x.w, s.recv, s.rw, NULL, s.off, s.send_rows, x.T, x.H,
                             x.K, x.E, x.cap, mkBfloat16, g_comm, g_st));
        break;
    case D_NCCL:
        gather(s.sbuf, s.x, x.pack, (int64_t)L.pack.size(), x.H);
        a2av(s.sbuf, s.rbuf, L.scnt, L.sdis, L.rcnt, L.rdis, x.H);
        gather(s.ubuf, s.rbuf, x.unpack, (int64_t)L.unpack.size(), x.H);
        break;
    case D_A2A: a2av(s.sbuf, s.rbuf, L.scnt, L.sdis, L.rcnt, L.rdis, x.H); break;
    case C_OURS:
        MKB_MK(mkMoECombine(s.recv, s.off, x.idx, x.w, s.send_rows, s.out, x.T, x.H, x.K, x.E,
                            x.cap, mkBfloat16, g_comm, g_st));
        break;
    case C_NCCL: nccl_combine(x, s); break;
    case C_A2A: a2av(s.ysrc, s.yback, L.cscnt, L.csdis, L.crcnt, L.crdis, x.H); break;
    case G_OURS:
        MKB_MK(mkMoEDispatchGemm(s.x, x.idx, x.w, x.W, s.yg, s.rwg, NULL, s.offg, s.srg, x.T,
                                 x.H, x.N, x.K, x.E, x.capg, 1, mkBfloat16, g_comm, g_st));
        break;
    case G_NCCL:
        nccl_dispatch(x, s);
        grouped_gemm(x.g1, s.pa_n, s.pc_n);
        break;
    case G_UNF:
        MKB_MK(mkMoEDispatch(s.x, x.idx, x.w, s.recv, s.rw, NULL, s.off, s.send_rows, x.T, x.H,
                             x.K, x.E, x.cap, mkBfloat16, g_comm, g_st));
        grouped_gemm(x.g1, s.pa_u, s.pc_u);
        break;
    case G_LOOPN:
        nccl_dispatch(x, s);
        loop_gemm(x, x.W, x.N, x.H, s.ubufp, s.yn);
        break;
    case G_LOOP: loop_gemm(x, x.W, x.N, x.H, s.recv, s.yu); break;
    case G_MKG: mk_grouped(x, s); break;
    case G_BLAS: grouped_gemm(x.g1, s.pa_u, s.pc_u); break;
    case L_OURS:
        MKB_MK(mkMoEDispatchFfnCombine(s.x, x.idx, x.w, x.W, x.W2, s.out, x.T, x.H, x.I, x.K,
                                       x.E, x.capg, 1, mkBfloat16, g_comm, g_st));
        break;
    case L_NCCL:
    case L_LOOPN:
        nccl_dispatch(x, s);
        ffn(x, s, x.what == L_LOOPN);
        gather(s.ysrc, s.ye, x.ysrc_idx, (int64_t)L.ysrc.size(), x.H); /* sources' order */
        nccl_combine(x, s);
        break;
    case L_BLAS: ffn(x, s, 0); break;
    case L_LOOP: ffn(x, s, 1); break;
    case L_MKG: mk_grouped_layer(x, s); break;
    default: break;
    }
}

void run_fn(void *p, int rep)
{
    const ctx &x = *(const ctx *)p;
    call(x, x.sets[(size_t)rep % x.sets.size()]);
}

#define MOE_WARMUP_OURS 10
#define MOE_WARMUP 5

void time_block(ctx &x, int what, int iters, std::vector<double> &out)
{
    x.what = what;
    MKB_MK(g_comm->boot->barrier(g_comm->boot_ctx));
    std::vector<double> ms((size_t)iters);
    mkb_time(run_fn, &x, g_st, is_ours(what) ? MOE_WARMUP_OURS : MOE_WARMUP, iters, ms.data());
    out.insert(out.end(), ms.begin(), ms.end());
}

/* The largest of the ranks' values. */
double max_over_ranks(double v)
{
    std::vector<double> all((size_t)g_n);
    all[(size_t)g_rank] = v;
    MKB_MK(g_comm->boot->allgather(g_comm->boot_ctx, all.data(), sizeof(double)));
    return *std::max_element(all.begin(), all.end());
}

template <class P> P *dmalloc(size_t count)
{
    void *p;
    MKB_CHECK(cudaMalloc(&p, std::max<size_t>(count * sizeof(P), 16)));
    return (P *)p;
}

template <class P> P *upload(const std::vector<P> &v)
{
    P *d = dmalloc<P>(v.size());
    if (!v.empty())
        MKB_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(P), cudaMemcpyHostToDevice));
    return d;
}

/* The groups of the local experts with rows (gexp), W El x (n x k). */
void make_groups(blas_groups &g, const layout &L, const std::vector<int64_t> &gexp,
                 const uint16_t *W, int64_t n, int64_t k)
{
    g.G = (int)gexp.size();
    std::vector<void *> pw;
    for (int64_t e : gexp) {
        g.ta.push_back(CUBLAS_OP_T);
        g.tb.push_back(CUBLAS_OP_N);
        g.gm.push_back((int)n);
        g.gn.push_back((int)(L.off[(size_t)e + 1] - L.off[(size_t)e]));
        g.gk.push_back((int)k);
        g.ldw.push_back((int)k);
        g.lda.push_back((int)k);
        g.ldc.push_back((int)n);
        g.gsz.push_back(1);
        g.alpha.push_back(1.0f);
        g.beta.push_back(0.0f);
        pw.push_back((void *)(W + (size_t)e * n * k));
    }
    g.pw = upload(pw);
}

struct result {
    long long T, H, E, K;
    int skewed;
    long long rows_max;
    double cross_bytes;
    double t[NSERIES];
    int check_ok;
    /* dgemm */
    long long N;
    double rows_mean;
    int check_g;
    /* layer: its check (1 ok, 0 FAIL, -1 not run), the largest error over
     * the row maximum (-1: not run), the fullest GPU's memory in use (GB) */
    int check_l;
    double max_err, mem_gb;
};

#define MOE_LAYER_TOL (1.0f / 32)

void ms_or_null(char *out, size_t len, double ms)
{
    if (ms < 0) snprintf(out, len, "null");
    else snprintf(out, len, "%.4f", ms);
}

/* a / b to 4 decimals, "null" where either was not timed */
void ratio_or_null(char *out, size_t len, double a, double b)
{
    if (a > 0 && b > 0) snprintf(out, len, "%.4f", a / b);
    else snprintf(out, len, "null");
}

double gbs(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : -1; }

/* Table cells (b: 16 bytes): a time in ms, "-" when not measured; the
 * speed-up base / ours. */
char *cell_ms(double v, char *b)
{
    if (v < 0) snprintf(b, 16, "-");
    else snprintf(b, 16, "%.3f", v);
    return b;
}

char *cell_ratio(double base, double ours, char *b)
{
    if (base < 0 || ours <= 0) snprintf(b, 16, "-");
    else snprintf(b, 16, "%.3fx", base / ours);
    return b;
}

/* 2 N H per real row: the dispatch + GEMM's flops per call, per rank (the
 * mean rows) */
double dgemm_flops(const result &r) { return 2.0 * r.rows_mean * (double)r.N * (double)r.H; }

/* The layer's: 2 (2 I) H + 2 H I = 6 H I per real row, I = N / 2 */
double layer_flops(const result &r) { return 3.0 * r.rows_mean * (double)r.N * (double)r.H; }

const char *layer_check(const result &r)
{
    return r.check_l < 0 ? "-" : r.check_l ? "ok" : "FAIL";
}

void write_out(const std::vector<result> &res, const char *tag, int calls, int series)
{
    char dir[512], path[700];
    mkb_results_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/moe%s%s.json", dir, tag ? "-" : "", tag ? tag : "");
    mkb_json js;
    if (mkb_json_open(&js, path)) return;
    int nv = 0;
    ncclGetVersion(&nv);
    for (const result &r : res)
        for (int comb = 0; comb < 2; comb++) {
            if (!(series & (comb ? S_COMBINE : S_DISPATCH))) continue;
            const int o = comb ? C_OURS : D_OURS;
            char extra[1024], a2a[32], bg[32], ag[32];
            ms_or_null(a2a, sizeof a2a, r.t[o + 2]);
            const double bgv = gbs(r.cross_bytes, r.t[o + 1]), agv = gbs(r.cross_bytes, r.t[o + 2]);
            if (bgv < 0) snprintf(bg, sizeof bg, "null");
            else snprintf(bg, sizeof bg, "%.2f", bgv);
            if (agv < 0) snprintf(ag, sizeof ag, "null");
            else snprintf(ag, sizeof ag, "%.2f", agv);
            snprintf(extra, sizeof extra,
                     "\"tokens_per_rank\": %lld, \"hidden\": %lld, \"experts\": %lld, "
                     "\"topk\": %lld, \"routing\": \"%s\", \"a2a_alone_ms\": %s, "
                     "\"gbs\": %.2f, \"baseline_gbs\": %s, \"a2a_gbs\": %s, "
                     "\"cross_bytes_per_rank\": %.0f, \"max_rows_per_rank\": %lld, "
                     "\"calls_per_series\": %d, \"check\": \"%s\", \"nccl\": \"%d.%d.%d\", "
                     "\"baseline_desc\": \"%s\"",
                     r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", a2a,
                     gbs(r.cross_bytes, r.t[o]), bg, ag, r.cross_bytes, r.rows_max, calls,
                     r.check_ok ? "ok" : "FAIL", nv / 10000, nv / 100 % 100, nv % 100,
                     comb ? "ncclSend/ncclRecv all-to-allv of every (t, j) row back, "
                            "weighted-sum kernel (fp32), one stream"
                          : "pack kernel, ncclSend/ncclRecv all-to-allv of unique (token, "
                            "rank) rows, unpack kernel to the expert layout, one stream");
            mkb_record rec;
            memset(&rec, 0, sizeof(rec));
            rec.op = comb ? "moe_combine" : "moe_dispatch";
            rec.dtype = "bf16";
            rec.baseline = comb ? "nccl_alltoallv+weighted_sum" : "pack+nccl_alltoallv+unpack";
            rec.world_size = g_n;
            rec.nodes = g_comm->nnodes;
            rec.m = r.T;
            rec.n = r.H;
            rec.k = r.K;
            rec.ours_ms = r.t[o];
            rec.baseline_ms = r.t[o + 1];
            rec.limit_ms = r.t[o + 2];
            rec.flops = 0;
            snprintf(rec.sm_split, sizeof rec.sm_split, "moe");
            rec.extra = extra;
            mkb_json_add(&js, &rec);
        }
    for (const result &r : res) {
        if (!(series & S_DGEMM)) break;
        char extra[1600], unf[32], blas[32], vs[32], lpn[32], lp[32], mkg[32];
        ms_or_null(unf, sizeof unf, r.t[G_UNF]);
        ms_or_null(lpn, sizeof lpn, r.t[G_LOOPN]);
        ms_or_null(lp, sizeof lp, r.t[G_LOOP]);
        ms_or_null(mkg, sizeof mkg, r.t[G_MKG]);
        ms_or_null(blas, sizeof blas, r.t[G_BLAS]);
        ratio_or_null(vs, sizeof vs, r.t[G_UNF], r.t[G_OURS]);
        snprintf(extra, sizeof extra,
                 "\"tokens_per_rank\": %lld, \"hidden\": %lld, \"experts\": %lld, "
                 "\"topk\": %lld, \"routing\": \"%s\", \"gemm_n\": %lld, \"transW\": 1, "
                 "\"mk_dispatch_cublas_ms\": %s, \"cublas_grouped_ms\": %s, "
                 "\"speedup_vs_mk_dispatch_cublas\": %s, \"nccl_cublas_loop_ms\": %s, "
                 "\"cublas_loop_ms\": %s, \"mk_grouped_gemm_ms\": %s, "
                 "\"rows_per_rank_mean\": %.1f, "
                 "\"max_rows_per_rank\": %lld, "
                 "\"calls_per_series\": %d, \"check\": \"%s\", \"nccl\": \"%d.%d.%d\", "
                 "\"baseline_desc\": \"pack kernel, ncclSend/ncclRecv all-to-allv of unique "
                 "(token, rank) rows, unpack kernel to the expert layout, "
                 "cublasGemmGroupedBatchedEx (a group of size 1 per local expert with rows, "
                 "bf16, fp32 compute), one stream\", \"limit_desc\": \"that grouped GEMM "
                 "alone\"",
                 r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", r.N, unf, blas, vs, lpn,
                 lp, mkg, r.rows_mean, r.rows_max, calls, r.check_g ? "ok" : "FAIL",
                 nv / 10000, nv / 100 % 100, nv % 100);
        mkb_record rec;
        memset(&rec, 0, sizeof(rec));
        rec.op = "moe_dispatch_gemm";
        rec.dtype = "bf16";
        rec.baseline = "pack+nccl_alltoallv+unpack+cublas_grouped";
        rec.world_size = g_n;
        rec.nodes = g_comm->nnodes;
        rec.m = r.T;
        rec.n = r.N;
        rec.k = r.H;
        rec.ours_ms = r.t[G_OURS];
        rec.baseline_ms = r.t[G_NCCL];
        rec.limit_ms = r.t[G_BLAS];
        rec.flops = dgemm_flops(r);
        snprintf(rec.sm_split, sizeof rec.sm_split, "moe");
        rec.extra = extra;
        mkb_json_add(&js, &rec);
    }
    for (const result &r : res) {
        if (!(series & S_LAYER)) break;
        char extra[2600], lpn[32], lg[32], ll[32], vg[32], vl[32], err[32], lm[32];
        ms_or_null(lpn, sizeof lpn, r.t[L_LOOPN]);
        ms_or_null(lm, sizeof lm, r.t[L_MKG]);
        ms_or_null(lg, sizeof lg, r.t[L_BLAS]);
        ms_or_null(ll, sizeof ll, r.t[L_LOOP]);
        ratio_or_null(vg, sizeof vg, r.t[L_NCCL], r.t[L_OURS]);
        ratio_or_null(vl, sizeof vl, r.t[L_LOOPN], r.t[L_OURS]);
        if (r.max_err < 0) snprintf(err, sizeof err, "null");
        else snprintf(err, sizeof err, "%.3g", r.max_err);
        snprintf(extra, sizeof extra,
                 "\"tokens_per_rank\": %lld, \"hidden\": %lld, \"inter\": %lld, "
                 "\"experts\": %lld, \"topk\": %lld, \"routing\": \"%s\", \"transW\": 1, "
                 "\"recv_capacity\": %lld, \"speedup_vs_nccl_cublas_grouped\": %s, "
                 "\"nccl_cublas_loop_ms\": %s, \"speedup_vs_nccl_cublas_loop\": %s, "
                 "\"cublas_grouped_gemms_ms\": %s, \"cublas_loop_gemms_ms\": %s, "
                 "\"mk_grouped_gemms_ms\": %s, "
                 "\"max_err\": %s, \"tolerance\": %.5f, \"rows_per_rank_mean\": %.1f, "
                 "\"max_rows_per_rank\": %lld, \"device_mem_used_gb\": %.2f, "
                 "\"calls_per_series\": %d, \"check\": \"%s\", \"nccl\": \"%d.%d.%d\", "
                 "\"baseline_desc\": \"pack kernel, ncclSend/ncclRecv all-to-allv of unique "
                 "(token, rank) rows, unpack kernel to the expert layout, "
                 "cublasGemmGroupedBatchedEx with W13 (a group of size 1 per local expert with "
                 "rows, N 2 I, bf16 out, fp32 compute), SwiGLU kernel (fp32, one rounding), "
                 "cublasGemmGroupedBatchedEx with W2 (N H), permute kernel to the sources' "
                 "order, ncclSend/ncclRecv all-to-allv back, weighted-sum kernel (fp32), one "
                 "stream\", \"limit_desc\": \"the two grouped GEMMs and the SwiGLU alone "
                 "(no communication)\"",
                 r.T, r.H, r.N / 2, r.E, r.K, r.skewed ? "skewed" : "random", r.rows_max, vg,
                 lpn, vl, lg, ll, lm, err, (double)MOE_LAYER_TOL, r.rows_mean, r.rows_max, r.mem_gb,
                 calls, r.check_l < 0 ? "unchecked" : r.check_l ? "ok" : "FAIL",
                 nv / 10000, nv / 100 % 100, nv % 100);
        mkb_record rec;
        memset(&rec, 0, sizeof(rec));
        rec.op = "moe_layer";
        rec.dtype = "bf16";
        rec.baseline = "pack+nccl_alltoallv+unpack+cublas_grouped+swiglu+cublas_grouped+permute+"
                       "nccl_alltoallv+weighted_sum";
        rec.world_size = g_n;
        rec.nodes = g_comm->nnodes;
        rec.m = r.T;
        rec.n = r.H;
        rec.k = r.N / 2;
        rec.ours_ms = r.t[L_OURS];
        rec.baseline_ms = r.t[L_NCCL];
        rec.limit_ms = r.t[L_BLAS];
        rec.flops = layer_flops(r);
        snprintf(rec.sm_split, sizeof rec.sm_split, "moe");
        rec.extra = extra;
        mkb_json_add(&js, &rec);
    }
    mkb_json_close(&js);
    snprintf(path, sizeof path, "%s/moe%s%s.tsv", dir, tag ? "-" : "", tag ? tag : "");
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "shape\trouting\tdispatch_ms\tdispatch_nccl_ms\tdispatch_a2a_ms\tcombine_ms\t"
               "combine_nccl_ms\tcombine_a2a_ms\tdispatch_gbs\tcross_bytes\tgemm_n\t"
               "dgemm_ms\tdgemm_nccl_cublas_ms\tdgemm_mk_cublas_ms\tcublas_grouped_ms\t"
               "dgemm_nccl_loop_ms\tcublas_loop_ms\tmk_grouped_gemm_ms\tinter\tlayer_ms\t"
               "layer_nccl_grouped_ms\tlayer_nccl_loop_ms\tlayer_grouped_gemms_ms\t"
               "layer_loop_gemms_ms\tlayer_vs_nccl_grouped\tlayer_vs_nccl_loop\t"
               "layer_max_err\tlayer_check\tlayer_mem_gb\tlayer_mk_gemms_ms\n");
    for (const result &r : res)
        fprintf(f, "%lldx%lldx%lldx%lld\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.2f\t%.0f\t"
                   "%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%lld\t%.4f\t%.4f\t%.4f\t"
                   "%.4f\t%.4f\t%.4f\t%.4f\t%.3g\t%s\t%.2f\t%.4f\n",
                r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", r.t[D_OURS], r.t[D_NCCL],
                r.t[D_A2A], r.t[C_OURS], r.t[C_NCCL], r.t[C_A2A], gbs(r.cross_bytes, r.t[D_OURS]),
                r.cross_bytes, r.N, r.t[G_OURS], r.t[G_NCCL], r.t[G_UNF], r.t[G_BLAS],
                r.t[G_LOOPN], r.t[G_LOOP], r.t[G_MKG], r.N / 2, r.t[L_OURS], r.t[L_NCCL],
                r.t[L_LOOPN], r.t[L_BLAS], r.t[L_LOOP],
                r.t[L_NCCL] > 0 && r.t[L_OURS] > 0 ? r.t[L_NCCL] / r.t[L_OURS] : -1.0,
                r.t[L_LOOPN] > 0 && r.t[L_OURS] > 0 ? r.t[L_LOOPN] / r.t[L_OURS] : -1.0,
                r.max_err, layer_check(r), r.mem_gb, r.t[L_MKG]);
    fclose(f);
    printf("results: %s (and .json)\n", path);
}

int parse_shapes(const char *s, std::vector<result> &out)
{
    std::string str(s);
    size_t pos = 0;
    while (pos < str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        result r;
        memset(&r, 0, sizeof(r));
        if (sscanf(str.substr(pos, end - pos).c_str(), "%lldx%lldx%lldx%lld", &r.T, &r.H, &r.E,
                   &r.K) != 4)
            return -1;
        out.push_back(r);
        pos = end + 1;
    }
    return 0;
}

/* One shape and routing: set up, check the baselines against ours, time
 * the series in turns. */
void bench_one(result &r, int nccl, int iters, int rounds, int l2, uint64_t seed, int series)
{
    const int64_t T = r.T, H = r.H, E = r.E, K = r.K, El = E / g_n;
    const bool dg = (series & S_DGEMM) != 0, ly = (series & S_LAYER) != 0;
    /* the layer's NCCL + cuBLAS sequence runs (checked, not timed) at one
     * rank without NCCL too: the combine baseline's buffers then too */
    const bool lbase = ly && (nccl || g_n == 1);
    std::vector<routing> rt;
    for (int q = 0; q < g_n; q++)
        rt.push_back(make_routing(r.skewed, q, T, E, K, seed + 977ull * (uint64_t)r.skewed));
    layout L = make_layout(rt, T, E, K);
    r.rows_max = L.max_rows;
    r.cross_bytes = L.cross_rows_mean * (double)H * 2;
    r.rows_mean = L.rows_mean;
    ctx x;
    x.T = T;
    x.H = H;
    x.E = E;
    x.K = K;
    x.cap = (L.max_rows + 63) / 64 * 64;
    x.L = &L;
    int32_t *idx = upload(rt[(size_t)g_rank].idx), *pack = upload(L.pack),
            *unpack = upload(L.unpack), *cpos = upload(L.cpos), *ysrc_idx = upload(L.ysrc);
    float *w = upload(rt[(size_t)g_rank].w);
    x.idx = idx;
    x.w = w;
    x.pack = pack;
    x.unpack = unpack;
    x.cpos = cpos;
    x.ysrc_idx = ysrc_idx;
    /* dgemm and the layer: W (El x (N x H), the same in every set; the
     * layer's W13), the layer's W2 (El x (H x I)), cuBLAS's groups */
    const int64_t N = r.N, I = N / 2;
    uint16_t *W = nullptr, *W2 = nullptr;
    std::vector<int64_t> gexp; /* the local experts with rows */
    if (dg || ly) {
        x.N = N;
        x.capg = L.max_rows;
        W = dmalloc<uint16_t>((size_t)El * N * H);
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(W, (size_t)El * N * H, seed + 77777 + 131 * g_rank, 0);
        MKB_CHECK(cudaGetLastError());
        x.W = W;
        for (int64_t e = 0; e < El; e++)
            if (L.off[(size_t)e + 1] > L.off[(size_t)e]) gexp.push_back(e);
        x.gexp = gexp;
        make_groups(x.g1, L, gexp, W, N, H);
    }
    if (dg || ly) x.gtable = dmalloc<int32_t>((size_t)MKI_GEMM_GROUP_TABLE(x.cap, El));
    if (ly) {
        x.I = I;
        W2 = dmalloc<uint16_t>((size_t)El * H * I);
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(W2, (size_t)El * H * I, seed + 88888 + 131 * g_rank, 0);
        MKB_CHECK(cudaGetLastError());
        x.W2 = W2;
        make_groups(x.g2, L, gexp, W2, H, I);
    }
    /* What a set allocates: x, out (T rows of H), ours' recv (cap rows of
     * H); with NCCL (or the layer's check at one rank) the baselines'
     * pack, receive, unpack, combine send and receive buffers and outn
     * (ns + nr + nu + ny + nb + T rows of H; ny = the rows received here,
     * nb = T K); dgemm: ours' y and mk+blas's (capg and cap rows of N =
     * 2 I); dgemm with NCCL or the layer: the unpacked rows (rows of H)
     * and the NCCL baseline's y (capg rows of N, the layer's h13); the
     * layer: h (rows of I) and the experts' outputs (rows of H).  Once a
     * shape: W El x N x H (the layer's W13) and W2 El x H x I; inside the
     * library the dispatch's inbox and the combine's stage (cap rows of H
     * each) and mkMoEDispatchFfnCombine's capg x (2 H + I).  Per GPU at 2
     * ranks, all four series (--layer alone) on the fuller rank of the
     * skewed routing (random: a few % less), the expected rows, not
     * counting the CUDA context, NCCL and cuBLAS (1-2 GB):
     *   4096x7168x256x8   rows 36.8k (32.8k random), El 128: W13 7.5 GB,
     *     W2 3.8 GB, the set 4.6 GB (4.0), the library 2.3 GB: 18 GB (17.5)
     *   16384x7168x256x8  rows 147k (131k random): the weights 11.3 GB,
     *     the set 18.3 GB (15.9), the library 9.0 GB: 39 GB (36)
     *   8192x4096x8x2     rows 19.7k (16.4k random), El 4, I 14336: W13
     *     0.94 GB, W2 0.47 GB, the set 5.3 GB (3.1; h13 rows of 28672),
     *     the library 1.2 GB: 8 GB (5.7)
     * At one rank (El = E, rows T K) 28, 45 and 6.4 GB with --layer alone
     * (measured on an H200: 29.9, 47.5 and 16.3 GB in use, the last with
     * the library's buffers kept at the 16384-token shape's size); ranks
     * sharing a GPU under MPS add theirs up.  The layer's table prints what
     * is in use (the library keeps its buffers at the largest shape's). */
    const size_t rb = (size_t)H * 2; /* bytes per row */
    const size_t ns = L.pack.size(), nr = L.rdis.back() + L.rcnt.back(), nu = L.unpack.size(),
                 ny = L.ysrc.size(), nb = L.crdis.back() + L.crcnt.back();
    size_t per = rb * ((size_t)T * 3 + (size_t)x.cap + (nccl ? nu : 0) +
                       (nccl || lbase ? ns + nr + ny + nb : 0));
    if (dg) per += (size_t)N * 2 * ((size_t)x.capg + (size_t)x.cap);
    if ((dg && nccl) || ly) per += (size_t)N * 2 * (size_t)x.capg + rb * (size_t)L.rows;
    if (ly) per += ((size_t)I * 2 + rb) * ((size_t)L.rows + (size_t)x.cap);
    size_t nsets = (2 * (size_t)l2 + per - 1) / per;
    nsets = std::max<size_t>(1, std::min<size_t>(nsets, 8));
    for (size_t i = 0; i < nsets; i++) {
        set s;
        memset(&s, 0, sizeof(s));
        s.x = dmalloc<uint16_t>((size_t)T * H);
        s.recv = dmalloc<uint16_t>((size_t)x.cap * H);
        s.out = dmalloc<uint16_t>((size_t)T * H);
        s.rw = dmalloc<float>((size_t)x.cap);
        s.off = dmalloc<int64_t>((size_t)(E / g_n + 1));
        s.send_rows = dmalloc<int32_t>((size_t)(T * K));
        if (nccl || lbase) {
            s.sbuf = dmalloc<uint16_t>(ns * H);
            s.rbuf = dmalloc<uint16_t>(nr * H);
            if (nccl) s.ubuf = dmalloc<uint16_t>(nu * H);
            s.ysrc = dmalloc<uint16_t>(ny * H);
            s.yback = dmalloc<uint16_t>(nb * H);
            s.outn = dmalloc<uint16_t>((size_t)T * H);
        }
        /* cuBLAS's grouped GEMMs: each local expert's first row of a (lda
         * elements a row) and of c (ldc), on the device */
        auto expert_rows = [&](uint16_t *a, int64_t lda, uint16_t *c, int64_t ldc, void ***da,
                               void ***dc) {
            std::vector<void *> pa, pc;
            for (int64_t e : gexp) {
                pa.push_back(a + (size_t)L.off[(size_t)e] * (size_t)lda);
                pc.push_back(c + (size_t)L.off[(size_t)e] * (size_t)ldc);
            }
            *da = upload(pa);
            *dc = upload(pc);
        };
        if (dg) {
            s.yg = dmalloc<uint16_t>((size_t)x.capg * N);
            s.rwg = dmalloc<float>((size_t)x.capg);
            s.offg = dmalloc<int64_t>((size_t)(El + 1));
            s.srg = dmalloc<int32_t>((size_t)(T * K));
            s.yu = dmalloc<uint16_t>((size_t)x.cap * N);
            expert_rows(s.recv, H, s.yu, N, &s.pa_u, &s.pc_u);
        }
        if ((dg && nccl) || ly) { /* the NCCL baselines' unpacked rows and first GEMM's y */
            s.ubufp = dmalloc<uint16_t>((size_t)L.rows * H);
            s.yn = dmalloc<uint16_t>((size_t)x.capg * N);
            expert_rows(s.ubufp, H, s.yn, N, &s.pa_n, &s.pc_n);
            /* the GEMM-only series' input where no dispatch fills it */
            mkb_fill_rand<<<1024, 256, 0, g_st>>>(s.ubufp, (size_t)L.rows * H,
                                                   seed + 5000 + 17 * i + 131 * g_rank, 0);
            MKB_CHECK(cudaGetLastError());
        }
        if (ly) {
            s.hb = dmalloc<uint16_t>((size_t)L.rows * I);
            s.ye = dmalloc<uint16_t>((size_t)L.rows * H);
            expert_rows(s.hb, I, s.ye, H, &s.pa2, &s.pc2);
            s.hmk = dmalloc<uint16_t>((size_t)x.cap * I);
            s.ymk = dmalloc<uint16_t>((size_t)x.cap * H);
        }
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(s.x, (size_t)T * H, seed + 1000 + 17 * i + 131 * g_rank, 0);
        MKB_CHECK(cudaGetLastError());
        x.sets.push_back(s);
    }
    /* one call of each kind per set, untimed: ours' layout against the
     * host's, the baselines' results against ours' */
    unsigned long long *cnt = dmalloc<unsigned long long>(2), hc[2] = {0, 0};
    MKB_CHECK(cudaMemsetAsync(cnt, 0, 16, g_st));
    int bad_off = 0;
    for (set &s : x.sets) {
        x.what = D_OURS;
        call(x, s);
        std::vector<int64_t> off(L.off.size());
        MKB_CHECK(cudaMemcpyAsync(off.data(), s.off, off.size() * 8, cudaMemcpyDeviceToHost, g_st));
        MKB_CHECK(cudaStreamSynchronize(g_st));
        bad_off += off != L.off;
        if (!nccl) continue;
        x.what = D_NCCL;
        call(x, s);
        if (L.rows > 0)
            count_neq<<<1024, 256, 0, g_st>>>((const uint4 *)s.recv, (const uint4 *)s.ubuf,
                                              (size_t)L.rows * H / 8, cnt);
        gather(s.ysrc, s.recv, ysrc_idx, (int64_t)ny, H); /* y = ours' recv, by source */
        x.what = C_OURS;
        call(x, s);
        x.what = C_NCCL;
        call(x, s);
        if (T > 0)
            count_far<<<1024, 256, 0, g_st>>>((const __nv_bfloat16 *)s.out,
                                              (const __nv_bfloat16 *)s.outn, (size_t)T * H,
                                              cnt + 1);
        MKB_CHECK(cudaGetLastError());
    }
    MKB_CHECK(cudaMemcpyAsync(hc, cnt, 16, cudaMemcpyDeviceToHost, g_st));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    if (bad_off || hc[0] || hc[1])
        fprintf(stderr, "rank %d: %lldx%lldx%lldx%lld %s: expert_offsets %s, %llu words of recv "
                        "differ from the baseline's, %llu outputs differ beyond bf16 rounding\n",
                g_rank, r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random",
                bad_off ? "WRONG" : "right", hc[0], hc[1]);
    r.check_ok = max_over_ranks(bad_off || hc[0] || hc[1] ? 1.0 : 0.0) == 0.0;
    /* dgemm: ours' expert_offsets against the host's; its y on every
     * real row against mk+blas's y (mkMoEDispatch's layout) and against
     * the NCCL baseline's (ours' layout) */
    r.check_g = 1;
    if (dg) {
        unsigned long long *gc = dmalloc<unsigned long long>(2), hg[2] = {0, 0};
        MKB_CHECK(cudaMemsetAsync(gc, 0, 16, g_st));
        int bad_goff = 0;
        const int64_t nreal = L.rows; /* y's rows: every one real (no padding) */
        const unsigned blocks = (unsigned)std::max<int64_t>(
            1, std::min<int64_t>((int64_t)g_sms * 16, (nreal * N + 255) / 256));
        for (set &s : x.sets) {
            x.what = G_OURS;
            call(x, s);
            std::vector<int64_t> off(L.off.size());
            MKB_CHECK(cudaMemcpyAsync(off.data(), s.offg, off.size() * 8, cudaMemcpyDeviceToHost,
                                      g_st));
            MKB_CHECK(cudaStreamSynchronize(g_st));
            bad_goff += off != L.off;
            x.what = G_UNF;
            call(x, s);
            if (nreal > 0)
                count_far_rows<<<blocks, 256, 0, g_st>>>((const __nv_bfloat16 *)s.yg,
                                                         (const __nv_bfloat16 *)s.yu, nreal, N,
                                                         gc);
            if (nccl) {
                x.what = G_NCCL;
                call(x, s);
                if (nreal > 0)
                    count_far_rows<<<blocks, 256, 0, g_st>>>((const __nv_bfloat16 *)s.yg,
                                                             (const __nv_bfloat16 *)s.yn, nreal,
                                                             N, gc + 1);
            }
            MKB_CHECK(cudaGetLastError());
        }
        MKB_CHECK(cudaMemcpyAsync(hg, gc, 16, cudaMemcpyDeviceToHost, g_st));
        MKB_CHECK(cudaStreamSynchronize(g_st));
        if (bad_goff || hg[0] || hg[1])
            fprintf(stderr, "rank %d: %lldx%lldx%lldx%lld %s, dispatch + GEMM N %lld: "
                            "expert_offsets %s, %llu outputs differ from mkMoEDispatch + cuBLAS's "
                            "beyond bf16 rounding, %llu from the NCCL + cuBLAS baseline's%s\n",
                    g_rank, r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", r.N,
                    bad_goff ? "WRONG" : "right", hg[0], hg[1], nccl ? "" : " (not run)");
        r.check_g = max_over_ranks(bad_goff || hg[0] || hg[1] ? 1.0 : 0.0) == 0.0;
        cudaFree(gc);
    }
    /* the layer: ours' out against the NCCL + grouped cuBLAS sequence's,
     * every element within MOE_LAYER_TOL of its row's largest |out| */
    r.check_l = -1;
    r.max_err = -1;
    if (ly) {
        unsigned long long *lc = dmalloc<unsigned long long>(1), hl = 0;
        unsigned *lm = dmalloc<unsigned>(1), hm = 0;
        MKB_CHECK(cudaMemsetAsync(lc, 0, 8, g_st));
        MKB_CHECK(cudaMemsetAsync(lm, 0, 4, g_st));
        for (set &s : x.sets) {
            x.what = L_OURS;
            call(x, s);
            if (!lbase) continue;
            x.what = L_NCCL;
            call(x, s);
            if (T > 0)
                row_rel_err<<<(unsigned)std::min<int64_t>(T, (int64_t)g_sms * 8), 256, 0, g_st>>>(
                    (const __nv_bfloat16 *)s.out, (const __nv_bfloat16 *)s.outn, T, H,
                    MOE_LAYER_TOL, lc, lm);
            MKB_CHECK(cudaGetLastError());
        }
        MKB_CHECK(cudaMemcpyAsync(&hl, lc, 8, cudaMemcpyDeviceToHost, g_st));
        MKB_CHECK(cudaMemcpyAsync(&hm, lm, 4, cudaMemcpyDeviceToHost, g_st));
        MKB_CHECK(cudaStreamSynchronize(g_st));
        if (lbase) {
            float e;
            memcpy(&e, &hm, 4);
            r.max_err = max_over_ranks((double)e);
            if (hl)
                fprintf(stderr, "rank %d: %lldx%lldx%lldx%lld %s, layer I %lld: %llu outputs of "
                                "mkMoEDispatchFfnCombine differ from the NCCL + cuBLAS "
                                "sequence's by more than %g of their row's largest (largest "
                                "error %.3g)\n",
                        g_rank, r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", (long long)I,
                        hl, (double)MOE_LAYER_TOL, (double)e);
            r.check_l = max_over_ranks(hl ? 1.0 : 0.0) == 0.0;
        }
        cudaFree(lc);
        cudaFree(lm);
    }
    { /* the memory in use, every buffer of ours and of the library there */
        size_t fr = 0, tot = 0;
        MKB_CHECK(cudaMemGetInfo(&fr, &tot));
        r.mem_gb = max_over_ranks((double)(tot - fr) / 1e9);
    }
    std::vector<double> t[NSERIES];
    auto timed = [&](int what) {
        return (series & series_group(what)) && (nccl || !needs_nccl(what));
    };
    for (int round = 0; round < rounds; round++)
        for (int what = 0; what < NSERIES; what++)
            if (timed(what)) time_block(x, what, iters, t[what]);
    for (int what = 0; what < NSERIES; what++)
        r.t[what] = timed(what) ? mkb_worst_median(g_comm, g_rank, g_n, t[what]) : -1;
    mkResult_t ae;
    MKB_MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) {
        fprintf(stderr, "rank %d: async error %s: %s\n", g_rank, mkGetErrorString(ae),
                mkGetLastError(g_comm));
        exit(3);
    }
    MKB_CHECK(cudaStreamSynchronize(g_st));
    for (set &s : x.sets)
        for (void *p : {(void *)s.x, (void *)s.recv, (void *)s.out, (void *)s.rw, (void *)s.off,
                        (void *)s.send_rows, (void *)s.sbuf, (void *)s.rbuf, (void *)s.ubuf,
                        (void *)s.ysrc, (void *)s.yback, (void *)s.outn, (void *)s.yg,
                        (void *)s.ubufp, (void *)s.yn, (void *)s.yu, (void *)s.rwg,
                        (void *)s.offg, (void *)s.srg, (void *)s.pa_n, (void *)s.pc_n,
                        (void *)s.pa_u, (void *)s.pc_u, (void *)s.hb, (void *)s.ye,
                        (void *)s.pa2, (void *)s.pc2, (void *)s.hmk, (void *)s.ymk})
            if (p) cudaFree(p);
    for (void *p : {(void *)idx, (void *)pack, (void *)unpack, (void *)cpos, (void *)ysrc_idx,
                    (void *)w, (void *)cnt, (void *)W, (void *)W2,
                    (void *)x.g1.pw, (void *)x.g2.pw, (void *)x.gtable})
        if (p) cudaFree(p);
}

} // namespace

extern "C" int mkb_moe_main(int argc, char **argv)
{
    const char *shapes = "4096x7168x256x8,16384x7168x256x8,8192x4096x8x2";
    const char *routings = "random,skewed";
    const char *tag = NULL;
    const char *series_list = "dispatch,combine,dgemm";
    long long gemm_n = 0; /* 0: 2 I from the hidden size */
    int iters = 20, rounds = 3, nccl = 1, layer = 0, series_given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--routing") && i + 1 < argc) routings = argv[++i];
        else if (!strcmp(argv[i], "--series") && i + 1 < argc) {
            series_list = argv[++i];
            series_given = 1;
        } else if (!strcmp(argv[i], "--layer")) layer = 1;
        else if (!strcmp(argv[i], "--gemm-n") && i + 1 < argc) gemm_n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(argv[i], "--no-nccl")) nccl = 0;
        else {
            fprintf(stderr, "usage: mkbench moe [--shapes TxHxExK,...] [--routing random,skewed] "
                            "[--series dispatch,combine,dgemm,layer] [--layer] [--gemm-n N] "
                            "[--iters N] [--rounds R] [--tag NAME] [--no-nccl]\n"
                            "  T tokens per rank, H hidden, E experts, K top-k; bf16; dgemm: "
                            "mkMoEDispatchGemm with N = 2 I columns (I 2048 at H 7168, 14336 "
                            "at H 4096, else H), W N x H per expert; layer (--layer: --series "
                            "layer, or adds it to --series): mkMoEDispatchFfnCombine, inter "
                            "I = N / 2, W13 2I x H and W2 H x I per expert, against NCCL + "
                            "cuBLAS grouped / per-expert GEMMs + SwiGLU\n");
            return 2;
        }
    }
    int series = (strstr(series_list, "dispatch") ? S_DISPATCH : 0) |
                 (strstr(series_list, "combine") ? S_COMBINE : 0) |
                 (strstr(series_list, "dgemm") ? S_DGEMM : 0) |
                 (strstr(series_list, "layer") ? S_LAYER : 0);
    if (layer) series = series_given ? series | S_LAYER : S_LAYER;
    std::vector<result> list;
    if (parse_shapes(shapes, list) || iters < 1 || rounds < 1 ||
        (!strstr(routings, "random") && !strstr(routings, "skewed")) || !series ||
        gemm_n < 0 || gemm_n % ((series & S_LAYER) ? 16 : 8)) {
        fprintf(stderr, "mkbench moe: bad --shapes, --routing, --series, --gemm-n (a multiple "
                        "of 8, of 16 with the layer), --iters or --rounds\n");
        return 2;
    }
    for (result &r : list) /* the first GEMM of the FFN: gate and up, 2 I columns */
        r.N = gemm_n ? gemm_n : 2 * (r.H == 7168 ? 2048 : r.H == 4096 ? 14336 : r.H);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const int dev = mkb_start(&g_comm, &g_rank, &g_n, &g_st);
    MKB_CHECK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    if (series & (S_DGEMM | S_LAYER)) {
        MKB_CB(cublasCreate(&g_blas));
        MKB_CB(cublasSetStream(g_blas, g_st));
    }
    for (const result &r : list)
        if (r.T < 0 || r.H < 8 || r.H % 8 || r.E < g_n || r.E % g_n || r.E > MK_MOE_MAX_EXPERTS ||
            r.K < 1 || r.K > MK_MOE_MAX_TOPK || r.K > r.E) {
            if (g_rank == 0)
                fprintf(stderr, "mkbench moe: %lldx%lldx%lldx%lld: hidden a multiple of 8, "
                        "experts a multiple of %d ranks (at most %d), top-k in [1, %d] and at "
                        "most the experts\n", r.T, r.H, r.E, r.K, g_n, MK_MOE_MAX_EXPERTS,
                        MK_MOE_MAX_TOPK);
            return 2;
        }
    if (nccl) g_nccl = mkb_nccl_init(g_comm, g_rank, g_n);
    g_have_nccl = nccl;
    uint64_t seed = (uint64_t)time(NULL) * 2654435761ull;
    MKB_MK(g_comm->boot->bcast(g_comm->boot_ctx, &seed, sizeof seed, 0));
    if (g_rank == 0) printf("random inputs and routing, seed %llu\n", (unsigned long long)seed);
    int l2 = 0;
    MKB_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    std::vector<result> res;
    for (const result &shape : list)
        for (int skewed = 0; skewed < 2; skewed++) {
            if (!strstr(routings, skewed ? "skewed" : "random")) continue;
            result r = shape;
            r.skewed = skewed;
            bench_one(r, nccl, iters, rounds, l2, seed, series);
            res.push_back(r);
        }
    int all_ok = 1;
    for (const result &r : res) all_ok &= r.check_ok && r.check_g && r.check_l != 0;
    if (g_rank == 0) {
        char devname[128], u[128];
        mkb_device_name(devname, sizeof devname, u, sizeof u);
        printf("mkMoEDispatch / mkMoECombine bf16, %d ranks, %s (ms: median of %d calls in %d "
               "rounds, slowest rank; GB/s: unique (token, rank) rows crossing to other ranks, "
               "mean bytes per rank / time)\n", g_n, devname, iters * rounds, rounds);
        printf("%-20s %-6s %8s %8s %8s %7s %7s %7s | %8s %8s %8s %7s %7s  %s\n", "T x H x E top-K",
               "route", "disp", "nccl", "a2a", "speedup", "GB/s", "nccl", "comb", "nccl", "a2a",
               "speedup", "GB/s", "check");
        for (const result &r : res) {
            char sh[64];
            snprintf(sh, sizeof sh, "%lldx%lldx%lld top-%lld", r.T, r.H, r.E, r.K);
            char b[10][16];
            printf("%-20s %-6s %8s %8s %8s %7s %7.1f %7s | %8s %8s %8s %7s %7.1f  %s\n", sh,
                   r.skewed ? "skewed" : "random", cell_ms(r.t[D_OURS], b[0]),
                   cell_ms(r.t[D_NCCL], b[1]), cell_ms(r.t[D_A2A], b[2]),
                   cell_ratio(r.t[D_NCCL], r.t[D_OURS], b[3]), gbs(r.cross_bytes, r.t[D_OURS]),
                   r.t[D_NCCL] < 0 ? "-" : (snprintf(b[4], 16, "%.1f", gbs(r.cross_bytes, r.t[D_NCCL])), b[4]),
                   cell_ms(r.t[C_OURS], b[5]), cell_ms(r.t[C_NCCL], b[6]),
                   cell_ms(r.t[C_A2A], b[7]), cell_ratio(r.t[C_NCCL], r.t[C_OURS], b[8]),
                   gbs(r.cross_bytes, r.t[C_OURS]),
                   r.check_ok ? "ok" : (nccl ? "FAIL" : "offsets only"));
        }
        if (series & S_DGEMM) {
            printf("mkMoEDispatchGemm bf16, transW 1 (W_e N x H), N = 2 I, %d ranks, %s (ms: "
                   "median of %d calls in %d rounds, slowest rank; nccl+blas: pack, all-to-allv, "
                   "unpack to the expert layout, cuBLAS grouped GEMM; mk+blas: mkMoEDispatch, "
                   "the same GEMM; blas: that GEMM alone; TFLOP/s: 2 N H x mean real rows per "
                   "rank / time)\n", g_n, devname, iters * rounds, rounds);
            printf("%-20s %-6s %6s %8s %9s %8s %8s %9s %8s %8s %8s %8s %7s  %s\n",
                   "T x H x E top-K", "route", "N", "dgemm", "nccl+blas", "mk+blas", "blas",
                   "nccl+loop", "loop", "mkgemm", "vs nccl", "vs loop", "TFLOP/s", "check");
            for (const result &r : res) {
                char sh[64], b[9][16];
                snprintf(sh, sizeof sh, "%lldx%lldx%lld top-%lld", r.T, r.H, r.E, r.K);
                printf("%-20s %-6s %6lld %8s %9s %8s %8s %9s %8s %8s %8s %8s %7.1f  %s\n", sh,
                       r.skewed ? "skewed" : "random", r.N, cell_ms(r.t[G_OURS], b[0]),
                       cell_ms(r.t[G_NCCL], b[1]), cell_ms(r.t[G_UNF], b[2]),
                       cell_ms(r.t[G_BLAS], b[3]), cell_ms(r.t[G_LOOPN], b[6]),
                       cell_ms(r.t[G_LOOP], b[7]), cell_ms(r.t[G_MKG], b[8]),
                       cell_ratio(r.t[G_NCCL], r.t[G_OURS], b[4]),
                       cell_ratio(r.t[G_LOOPN], r.t[G_OURS], b[5]),
                       r.t[G_OURS] > 0 ? dgemm_flops(r) / (r.t[G_OURS] * 1e-3) / 1e12 : 0.0,
                       r.check_g ? "ok" : "FAIL");
            }
        }
        if (series & S_LAYER) {
            printf("mkMoEDispatchFfnCombine bf16, transW 1 (W13 2I x H, W2 H x I per expert), "
                   "%d ranks, %s (ms: median of %d calls in %d rounds, slowest rank; nccl+grp: "
                   "pack, all-to-allv, unpack, cuBLAS grouped GEMM W13, SwiGLU, grouped GEMM "
                   "W2, permute, all-to-allv back, weighted sum; nccl+loop: the same with a "
                   "cublasGemmEx per expert; grp/loop gemms: those GEMMs and the SwiGLU alone; "
                   "mk gemms: our two grouped GEMMs alone (SwiGLU in the first's epilogue); "
                   "TFLOP/s: 6 H I x mean real rows per rank / time; GB: device memory in use, "
                   "fullest GPU; err: largest |ours - nccl+grp| / its row's largest |out|, "
                   "tolerance %g)\n",
                   g_n, devname, iters * rounds, rounds, (double)MOE_LAYER_TOL);
            printf("%-20s %-6s %6s %8s %9s %9s %9s %9s %8s %8s %8s %7s %6s %8s  %s\n",
                   "T x H x E top-K", "route", "I", "layer", "nccl+grp", "nccl+loop",
                   "grp gemms", "loop gemm", "mk gemms", "vs grp", "vs loop", "TFLOP/s", "GB",
                   "err", "check");
            for (const result &r : res) {
                char sh[64], b[9][16];
                snprintf(sh, sizeof sh, "%lldx%lldx%lld top-%lld", r.T, r.H, r.E, r.K);
                if (r.max_err < 0) snprintf(b[7], 16, "-");
                else snprintf(b[7], 16, "%.2e", r.max_err);
                printf("%-20s %-6s %6lld %8s %9s %9s %9s %9s %8s %8s %8s %7.1f %6.1f %8s  %s\n",
                       sh, r.skewed ? "skewed" : "random", r.N / 2, cell_ms(r.t[L_OURS], b[0]),
                       cell_ms(r.t[L_NCCL], b[1]), cell_ms(r.t[L_LOOPN], b[2]),
                       cell_ms(r.t[L_BLAS], b[3]), cell_ms(r.t[L_LOOP], b[4]),
                       cell_ms(r.t[L_MKG], b[8]),
                       cell_ratio(r.t[L_NCCL], r.t[L_OURS], b[5]),
                       cell_ratio(r.t[L_LOOPN], r.t[L_OURS], b[6]),
                       r.t[L_OURS] > 0 ? layer_flops(r) / (r.t[L_OURS] * 1e-3) / 1e12 : 0.0,
                       r.mem_gb, b[7], layer_check(r));
            }
        }
        write_out(res, tag, iters * rounds, series);
    }
    if (series & (S_DGEMM | S_LAYER)) cublasDestroy(g_blas);
    if (nccl) ncclCommDestroy(g_nccl);
    MKB_MK(mkCommDestroy(g_comm));
    return all_ok ? 0 : 3;
}

#ifdef MKB_MOE_MAIN
int main(int argc, char **argv) { return mkb_moe_main(argc, argv); }
#endif
