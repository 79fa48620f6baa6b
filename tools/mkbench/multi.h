/* multi.h - what the multi-rank benchmarks (mkbench ag_gemm, gemm_rs,
 * moe, attn) share: their start, the NCCL baseline's communicator, random
 * inputs, the cuBLAS check, the GEMMs' list of shapes and the slowest
 * rank's median.  C++ (the benchmarks are .cu files); the bootstrap of the
 * communicator carries the exchange. */
#ifndef MKB_MULTI_H
#define MKB_MULTI_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#include "common.h"
#include "mkernel.h"
#include "mki.h" /* comm->boot */

/* A failed cuBLAS call ends the rank (the file has g_rank). */
#define MKB_CB(call)                                                              \
    do {                                                                          \
        cublasStatus_t s_ = (call);                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                        \
            fprintf(stderr, "rank %d: %s: cublas %d\n", g_rank, #call, (int)s_);  \
            exit(2);                                                              \
        }                                                                         \
    } while (0)

/* A multi-rank benchmark's start: the communicator from the environment,
 * this rank and the size, this rank's GPU (returned), a non-blocking
 * stream. */
inline int mkb_start(mkComm_t *comm, int *rank, int *nranks, cudaStream_t *st)
{
    int g_rank = -1; /* what MKB_MK names */
    mkComm_t g_comm = NULL;
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    MKB_MK(mkCommInit(&g_comm, &cfg));
    MKB_MK(mkCommRank(g_comm, &g_rank));
    MKB_MK(mkCommSize(g_comm, nranks));
    int dev = 0;
    MKB_MK(mkCommCuDevice(g_comm, &dev));
    MKB_CHECK(cudaSetDevice(dev));
    MKB_CHECK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    *comm = g_comm;
    *rank = g_rank;
    return dev;
}

/* An NCCL communicator over comm's ranks (the baseline of the series), its
 * id sent from rank 0 through our bootstrap.  Collective over comm. */
inline ncclComm_t mkb_nccl_init(mkComm_t comm, int rank, int nranks)
{
    const int g_rank = rank;       /* what MKB_NC and MKB_MK name */
    const mkComm_t g_comm = comm;
    ncclUniqueId id;
    if (g_rank == 0) MKB_NC(ncclGetUniqueId(&id));
    MKB_MK(comm->boot->bcast(comm->boot_ctx, &id, sizeof id, 0));
    ncclComm_t nc;
    MKB_NC(ncclCommInitRank(&nc, nranks, id, rank));
    return nc;
}

/* n random values in [-1, 1) from seed, as bf16 (f16 = 0) or fp16 bits. */
static __global__ void mkb_fill_rand(uint16_t *p, size_t n, uint64_t seed, int f16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        float v = (float)(x >> 40) / (float)(1ull << 24) * 2.0f - 1.0f;
        if (f16) {
            __half h = __float2half(v);
            p[i] = *(uint16_t *)&h;
        } else {
            __nv_bfloat16 b = __float2bfloat16(v);
            p[i] = *(uint16_t *)&b;
        }
    }
}

/* "MxNxK,MxNxK,...": one R (with long long m, n, k; zeroed first) per
 * shape; -1 on a malformed list. */
template <class R>
int mkb_parse_shapes(const char *s, std::vector<R> &out)
{
    std::string str(s);
    size_t pos = 0;
    while (pos < str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        R r;
        memset(&r, 0, sizeof(r));
        if (sscanf(str.substr(pos, end - pos).c_str(), "%lldx%lldx%lld", &r.m, &r.n, &r.k) != 3)
            return -1;
        out.push_back(r);
        pos = end + 1;
    }
    return 0;
}

/* The median of this rank's per-call times, the largest over the ranks: a
 * call over all ranks is only as fast as its slowest rank, and the GEMM
 * alone is the limit only on the slowest GPU.  Every rank calls it. */
inline double mkb_worst_median(mkComm_t comm, int rank, int nranks, std::vector<double> &v)
{
    std::vector<double> all(nranks);
    all[rank] = mkb_median(v.data(), (int)v.size());
    mkResult_t r = comm->boot->allgather(comm->boot_ctx, all.data(), sizeof(double));
    if (r != mkSuccess) {
        fprintf(stderr, "rank %d: the ranks' medians: %s\n", rank, mkGetLastError(comm));
        exit(2);
    }
    double worst = all[0];
    for (int q = 1; q < nranks; q++)
        if (all[q] > worst) worst = all[q];
    return worst;
}

/* One JSON record of a fused GEMM op against its unfused baseline: the
 * op and baseline names, the global shape, ours, the baseline and the
 * limit (negative: null), the plan's split, extra key/value pairs. */
inline void mkb_add_gemm_record(mkb_json *js, const char *op, const char *baseline, int f16,
                                int world, int nodes, long long m, long long n, long long k,
                                double ours, double base, double limit, const char *split,
                                int ctas, const char *extra)
{
    mkb_record rec;
    memset(&rec, 0, sizeof(rec));
    rec.op = op;
    rec.dtype = f16 ? "fp16" : "bf16";
    rec.baseline = baseline;
    rec.world_size = world;
    rec.nodes = nodes;
    rec.m = m;
    rec.n = n;
    rec.k = k;
    rec.ours_ms = ours;
    rec.baseline_ms = base;
    rec.limit_ms = limit;
    rec.flops = 2.0 * m * n * k;
    snprintf(rec.sm_split, sizeof rec.sm_split, "%s", split);
    rec.ctas = ctas;
    rec.extra = extra;
    mkb_json_add(js, &rec);
}

#endif
