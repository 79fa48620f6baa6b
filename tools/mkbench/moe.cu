/*
 * moe.cu - mkbench for mkMoEDispatch, mkMoECombine and mkMoEDispatchGemm
 * (one process per rank, under mpirun): ours against the NCCL all-to-allv
 * sequence a framework runs, and against that all-to-allv alone, in the
 * same run, on the same random data and routing.
 *
 *   mkbench moe [--shapes TxHxExK,...] [--routing random,skewed]
 *               [--series dispatch,combine,dgemm] [--gemm-n N]
 *               [--iters N] [--rounds R] [--tag NAME] [--no-nccl]
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
 * Before timing, the baselines are checked against ours: the unpacked
 * rows must be ours' recv bit for bit, the combined outputs within bf16's
 * rounding; ours' dgemm expert_offsets against the host's, its y on every
 * real row within bf16's rounding of mk+blas's y and of the nccl
 * baseline's (a mismatch ends the run, status 3).
 *
 * Method as mkbench gemm_rs: R rounds (default 3) of N timed calls
 * (default 20) per series, each block after a bootstrap barrier and
 * warm-up calls; inputs and outputs rotate over sets whose bytes pass
 * twice the L2; per series the median of the R x N per-call CUDA event
 * times, the largest of the ranks' medians.  Dispatch GB/s: the bytes of
 * the unique (token, destination) rows that cross to other ranks, the
 * mean over the ranks, over the time (the combine's GB/s: the same bytes);
 * dgemm TFLOP/s: 2 N H times the mean real rows per rank over the time.
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

/* the series: dispatch ours, NCCL's, its all-to-allv alone; the same for
 * combine (ours + 1 is the baseline, ours + 2 the all-to-allv); dispatch +
 * GEMM ours, NCCL's dispatch + cuBLAS grouped, mkMoEDispatch + cuBLAS
 * grouped, cuBLAS grouped alone */
enum { D_OURS, D_NCCL, D_A2A, C_OURS, C_NCCL, C_A2A, G_OURS, G_NCCL, G_UNF, G_BLAS, G_LOOPN,
       G_LOOP, G_MKG, NSERIES };

/* --series: bits of the groups */
enum { S_DISPATCH = 1, S_COMBINE = 2, S_DGEMM = 4 };

int series_group(int what) { return what <= D_A2A ? S_DISPATCH : what <= C_A2A ? S_COMBINE : S_DGEMM; }
bool needs_nccl(int what)
{
    return what == D_NCCL || what == D_A2A || what == C_NCCL || what == C_A2A || what == G_NCCL ||
           what == G_LOOPN;
}
bool is_ours(int what)
{
    return what == D_OURS || what == C_OURS || what == G_OURS || what == G_MKG;
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
};

struct ctx {
    int what;
    std::vector<set> sets;
    int64_t T, H, E, K, cap;
    const int32_t *idx, *pack, *unpack, *cpos;
    const float *w;
    layout *L;
    /* dgemm */
    int64_t N = 0, capg = 0;
    const uint16_t *W = nullptr;  /* El x (N x H) */
    void **pw = nullptr;          /* cuBLAS's B pointers (device): W of each group */
    int G = 0;                    /* groups: the local experts with rows */
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> gm, gn, gk, ldw, lda, ldc, gsz;
    std::vector<float> alpha, beta;
    std::vector<int64_t> gexp;    /* the local experts with rows */
    int32_t *gtable = nullptr;    /* mki_gemm_grouped's table (our GEMM alone) */
};

void a2av(const uint16_t *s, uint16_t *r, const std::vector<size_t> &sc,
          const std::vector<size_t> &sd, const std::vector<size_t> &rc,
          const std::vector<size_t> &rd, int64_t H)
{
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
 * y_e = A_e W_e^T, i.e. column-major y_e^T (N x rows_e) = W_e^T A_e^T. */
void grouped_gemm(const ctx &x, void *const *pa, void *const *pc)
{
    if (x.G == 0) return;
    MKB_CB(cublasGemmGroupedBatchedEx(
        g_blas, x.ta.data(), x.tb.data(), x.gm.data(), x.gn.data(), x.gk.data(), x.alpha.data(),
        (const void *const *)x.pw, CUDA_R_16BF, x.ldw.data(), (const void *const *)pa,
        CUDA_R_16BF, x.lda.data(), x.beta.data(), pc, CUDA_R_16BF, x.ldc.data(), x.G,
        x.gsz.data(), CUBLAS_COMPUTE_32F));
}

/* The per-expert loop: one cublasGemmEx per local expert with rows, A and
 * y in the dispatch's layout (rows from L.off). */
void loop_gemm(const ctx &x, const uint16_t *A, uint16_t *C)
{
    const layout &L = *x.L;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t e : x.gexp) {
        const int64_t r0 = L.off[(size_t)e], rows = L.off[(size_t)e + 1] - r0;
        MKB_CB(cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)x.N, (int)rows, (int)x.H, &one,
                            x.W + (size_t)e * x.N * x.H, CUDA_R_16BF, (int)x.H,
                            A + (size_t)r0 * x.H, CUDA_R_16BF, (int)x.H, &zero,
                            C + (size_t)r0 * x.N, CUDA_R_16BF, (int)x.N, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    }
}

/* Our grouped GEMM alone (the engine mkMoEDispatchGemm runs after its
 * dispatch) over ours' recv and expert_offsets. */
void mk_grouped(const ctx &x, const set &s)
{
    mki_gemm_grouped_args g;
    memset(&g, 0, sizeof g);
    g.rows = x.cap;
    g.n = x.N;
    g.k = x.H;
    g.groups = x.E / g_n;
    g.a = s.recv;
    g.b = x.W;
    g.d = s.yu;
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

/* The dgemm baselines' dispatch: pack, all-to-allv, unpack into ours'
 * layout (ubufp, the real rows only). */
void nccl_dispatch(const ctx &x, const set &s)
{
    const layout &L = *x.L;
    gather(s.sbuf, s.x, x.pack, (int64_t)L.pack.size(), x.H);
    a2av(s.sbuf, s.rbuf, L.scnt, L.sdis, L.rcnt, L.rdis, x.H);
    gather(s.ubufp, s.rbuf, x.unpack, L.rows, x.H);
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
    case C_NCCL:
        a2av(s.ysrc, s.yback, L.cscnt, L.csdis, L.crcnt, L.crdis, x.H);
        if (x.T > 0) {
            weighted_sum<<<(unsigned)std::min<int64_t>(x.T, (int64_t)g_sms * 8), 128, 0, g_st>>>(
                (__nv_bfloat16 *)s.outn, (const __nv_bfloat16 *)s.yback, x.cpos, x.w, x.T, x.H,
                (int)x.K);
            MKB_CHECK(cudaGetLastError());
        }
        break;
    case C_A2A: a2av(s.ysrc, s.yback, L.cscnt, L.csdis, L.crcnt, L.crdis, x.H); break;
    case G_OURS:
        MKB_MK(mkMoEDispatchGemm(s.x, x.idx, x.w, x.W, s.yg, s.rwg, NULL, s.offg, s.srg, x.T,
                                 x.H, x.N, x.K, x.E, x.capg, 1, mkBfloat16, g_comm, g_st));
        break;
    case G_NCCL:
        nccl_dispatch(x, s);
        grouped_gemm(x, s.pa_n, s.pc_n);
        break;
    case G_UNF:
        MKB_MK(mkMoEDispatch(s.x, x.idx, x.w, s.recv, s.rw, NULL, s.off, s.send_rows, x.T, x.H,
                             x.K, x.E, x.cap, mkBfloat16, g_comm, g_st));
        grouped_gemm(x, s.pa_u, s.pc_u);
        break;
    case G_LOOPN:
        nccl_dispatch(x, s);
        loop_gemm(x, s.ubufp, s.yn);
        break;
    case G_LOOP: loop_gemm(x, s.recv, s.yu); break;
    case G_MKG: mk_grouped(x, s); break;
    default: grouped_gemm(x, s.pa_u, s.pc_u); break; /* G_BLAS */
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
};

void ms_or_null(char *out, size_t len, double ms)
{
    if (ms < 0) snprintf(out, len, "null");
    else snprintf(out, len, "%.4f", ms);
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
        if (r.t[G_UNF] > 0 && r.t[G_OURS] > 0)
            snprintf(vs, sizeof vs, "%.4f", r.t[G_UNF] / r.t[G_OURS]);
        else
            snprintf(vs, sizeof vs, "null");
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
    mkb_json_close(&js);
    snprintf(path, sizeof path, "%s/moe%s%s.tsv", dir, tag ? "-" : "", tag ? tag : "");
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "shape\trouting\tdispatch_ms\tdispatch_nccl_ms\tdispatch_a2a_ms\tcombine_ms\t"
               "combine_nccl_ms\tcombine_a2a_ms\tdispatch_gbs\tcross_bytes\tgemm_n\t"
               "dgemm_ms\tdgemm_nccl_cublas_ms\tdgemm_mk_cublas_ms\tcublas_grouped_ms\t"
               "dgemm_nccl_loop_ms\tcublas_loop_ms\tmk_grouped_gemm_ms\n");
    for (const result &r : res)
        fprintf(f, "%lldx%lldx%lldx%lld\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.2f\t%.0f\t"
                   "%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n",
                r.T, r.H, r.E, r.K, r.skewed ? "skewed" : "random", r.t[D_OURS], r.t[D_NCCL],
                r.t[D_A2A], r.t[C_OURS], r.t[C_NCCL], r.t[C_A2A], gbs(r.cross_bytes, r.t[D_OURS]),
                r.cross_bytes, r.N, r.t[G_OURS], r.t[G_NCCL], r.t[G_UNF], r.t[G_BLAS],
                r.t[G_LOOPN], r.t[G_LOOP], r.t[G_MKG]);
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
    const bool dg = (series & S_DGEMM) != 0;
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
    /* dgemm: W (El x (N x H), the same in every set), cuBLAS's groups */
    const int64_t N = r.N;
    uint16_t *W = nullptr;
    std::vector<int64_t> gexp; /* the local experts with rows */
    if (dg) {
        x.N = N;
        x.capg = L.max_rows;
        W = dmalloc<uint16_t>((size_t)El * N * H);
        mkb_fill_rand<<<1024, 256, 0, g_st>>>(W, (size_t)El * N * H, seed + 77777 + 131 * g_rank, 0);
        MKB_CHECK(cudaGetLastError());
        x.W = W;
        for (int64_t e = 0; e < El; e++)
            if (L.off[(size_t)e + 1] > L.off[(size_t)e]) gexp.push_back(e);
        x.G = (int)gexp.size();
        x.gexp = gexp;
        x.gtable = dmalloc<int32_t>((size_t)MKI_GEMM_GROUP_TABLE(x.cap, El));
        for (int64_t e : gexp) {
            x.ta.push_back(CUBLAS_OP_T);
            x.tb.push_back(CUBLAS_OP_N);
            x.gm.push_back((int)N);
            x.gn.push_back((int)(L.off[(size_t)e + 1] - L.off[(size_t)e]));
            x.gk.push_back((int)H);
            x.ldw.push_back((int)H);
            x.lda.push_back((int)H);
            x.ldc.push_back((int)N);
            x.gsz.push_back(1);
            x.alpha.push_back(1.0f);
            x.beta.push_back(0.0f);
        }
        std::vector<void *> pw;
        for (int64_t e : gexp) pw.push_back(W + (size_t)e * N * H);
        x.pw = upload(pw);
    }
    const size_t rb = (size_t)H * 2; /* bytes per row */
    const size_t ns = L.pack.size(), nr = L.rdis.back() + L.rcnt.back(), nu = L.unpack.size(),
                 ny = L.ysrc.size(), nb = L.crdis.back() + L.crcnt.back();
    size_t per = rb * ((size_t)T * 3 + (size_t)x.cap + (nccl ? ns + nr + nu + ny + nb : 0));
    if (dg)
        per += (size_t)N * 2 * ((size_t)x.capg + (size_t)x.cap + (nccl ? (size_t)x.capg : 0)) +
               (nccl ? rb * (size_t)L.rows : 0);
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
        if (nccl) {
            s.sbuf = dmalloc<uint16_t>(ns * H);
            s.rbuf = dmalloc<uint16_t>(nr * H);
            s.ubuf = dmalloc<uint16_t>(nu * H);
            s.ysrc = dmalloc<uint16_t>(ny * H);
            s.yback = dmalloc<uint16_t>(nb * H);
            s.outn = dmalloc<uint16_t>((size_t)T * H);
        }
        if (dg) {
            s.yg = dmalloc<uint16_t>((size_t)x.capg * N);
            s.rwg = dmalloc<float>((size_t)x.capg);
            s.offg = dmalloc<int64_t>((size_t)(El + 1));
            s.srg = dmalloc<int32_t>((size_t)(T * K));
            s.yu = dmalloc<uint16_t>((size_t)x.cap * N);
            std::vector<void *> pa, pc;
            for (int64_t e : gexp) {
                pa.push_back(s.recv + (size_t)L.off[(size_t)e] * H);
                pc.push_back(s.yu + (size_t)L.off[(size_t)e] * N);
            }
            s.pa_u = upload(pa);
            s.pc_u = upload(pc);
            if (nccl) {
                s.ubufp = dmalloc<uint16_t>((size_t)L.rows * H);
                s.yn = dmalloc<uint16_t>((size_t)x.capg * N);
                pa.clear();
                pc.clear();
                for (int64_t e : gexp) {
                    pa.push_back(s.ubufp + (size_t)L.off[(size_t)e] * H);
                    pc.push_back(s.yn + (size_t)L.off[(size_t)e] * N);
                }
                s.pa_n = upload(pa);
                s.pc_n = upload(pc);
            }
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
                        (void *)s.pa_u, (void *)s.pc_u})
            if (p) cudaFree(p);
    for (void *p : {(void *)idx, (void *)pack, (void *)unpack, (void *)cpos, (void *)ysrc_idx,
                    (void *)w, (void *)cnt, (void *)W,
                    (void *)x.pw, (void *)x.gtable})
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
    int iters = 20, rounds = 3, nccl = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--routing") && i + 1 < argc) routings = argv[++i];
        else if (!strcmp(argv[i], "--series") && i + 1 < argc) series_list = argv[++i];
        else if (!strcmp(argv[i], "--gemm-n") && i + 1 < argc) gemm_n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
        else if (!strcmp(argv[i], "--no-nccl")) nccl = 0;
        else {
            fprintf(stderr, "usage: mkbench moe [--shapes TxHxExK,...] [--routing random,skewed] "
                            "[--series dispatch,combine,dgemm] [--gemm-n N] [--iters N] "
                            "[--rounds R] [--tag NAME] [--no-nccl]\n"
                            "  T tokens per rank, H hidden, E experts, K top-k; bf16; dgemm: "
                            "mkMoEDispatchGemm with N = 2 I columns (I 2048 at H 7168, 14336 "
                            "at H 4096, else H), W N x H per expert\n");
            return 2;
        }
    }
    const int series = (strstr(series_list, "dispatch") ? S_DISPATCH : 0) |
                       (strstr(series_list, "combine") ? S_COMBINE : 0) |
                       (strstr(series_list, "dgemm") ? S_DGEMM : 0);
    std::vector<result> list;
    if (parse_shapes(shapes, list) || iters < 1 || rounds < 1 ||
        (!strstr(routings, "random") && !strstr(routings, "skewed")) || !series ||
        gemm_n < 0 || gemm_n % 8) {
        fprintf(stderr, "mkbench moe: bad --shapes, --routing, --series, --gemm-n (a multiple "
                        "of 8), --iters or --rounds\n");
        return 2;
    }
    for (result &r : list) /* the first GEMM of the FFN: gate and up, 2 I columns */
        r.N = gemm_n ? gemm_n : 2 * (r.H == 7168 ? 2048 : r.H == 4096 ? 14336 : r.H);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const int dev = mkb_start(&g_comm, &g_rank, &g_n, &g_st);
    MKB_CHECK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    if (series & S_DGEMM) {
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
    for (const result &r : res) all_ok &= r.check_ok && r.check_g;
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
        write_out(res, tag, iters * rounds, series);
    }
    if (series & S_DGEMM) cublasDestroy(g_blas);
    if (nccl) ncclCommDestroy(g_nccl);
    MKB_MK(mkCommDestroy(g_comm));
    return all_ok ? 0 : 3;
}

#ifdef MKB_MOE_MAIN
int main(int argc, char **argv) { return mkb_moe_main(argc, argv); }
#endif
