/*
 * check.h - the GPU tests' checks of CUDA and mkernel calls: on failure,
 * the rank, the file and line, the call and why, then exit (2; a failed
 * mkernel call MKT_EXIT_MK, 2 unless the test defines it first).  The
 * including file has g_rank and g_comm (and mkernel.h before this).
 * Then the pieces the multi-rank tests share: their start (communicator,
 * GPU, stream), one seed for every rank, and the two sides of the "a
 * rank never calls" drill.
 */
#ifndef MKT_GPU_CHECK_H
#define MKT_GPU_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MKT_EXIT_MK
#define MKT_EXIT_MK 2
#endif

#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "rank %d: %s:%d %s: %s\n", g_rank, __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                               \
            exit(2);                                                                       \
        }                                                                                  \
    } while (0)
#define MK(call)                                                                           \
    do {                                                                                   \
        mkResult_t r_ = (call);                                                            \
        if (r_ != mkSuccess) {                                                             \
            fprintf(stderr, "rank %d: %s:%d %s: %s: %s\n", g_rank, __FILE__, __LINE__,    \
                    #call, mkGetErrorString(r_), mkGetLastError(g_comm));                 \
            exit(MKT_EXIT_MK);                                                             \
        }                                                                                  \
    } while (0)

/* A multi-rank test's start: the communicator (g_comm, g_rank, *n) from
 * the environment, this rank's GPU (returned), a non-blocking stream *st. */
static inline int mkt_start(int *n, cudaStream_t *st)
{
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    MK(mkCommInit(&g_comm, &cfg));
    MK(mkCommRank(g_comm, &g_rank));
    MK(mkCommSize(g_comm, n));
    int dev = 0;
    MK(mkCommCuDevice(g_comm, &dev));
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    return dev;
}

/* The run's seed: MK_SEED, else the clock; rank 0's on every rank,
 * through an all-reduce of our own (the value summed with zeros
 * elsewhere; below 10^6, exact in fp32). */
static inline uint64_t mkt_seed(cudaStream_t st)
{
    const char *env = getenv("MK_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    float *sd;
    CK(cudaMalloc(&sd, 2 * sizeof(float)));
    float h[2] = {g_rank == 0 ? (float)(seed % 1000000) : 0.0f, 0.0f};
    CK(cudaMemcpy(sd, h, sizeof(h), cudaMemcpyHostToDevice));
    MK(mkAllReduce(sd, sd, 2, mkFloat32, g_comm, st));
    CK(cudaMemcpyAsync(h, sd, sizeof(h), cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    CK(cudaFree(sd));
    return (uint64_t)h[0];
}

/* The "nocall" drill, on a rank that made the call rank 1 skips: its
 * communicator must report mkErrTimeout naming rank 1 (polled for up to
 * 10 s), and `later`, the result of a call made after that report, must
 * be mkErrTimeout too.  Prints a line for each; nonzero on a failure. */
static inline int mkt_nocall_report(void)
{
    mkResult_t ae = mkSuccess;
    for (int i = 0; i < 200 && ae == mkSuccess; i++) {
        MK(mkCommGetAsyncError(g_comm, &ae));
        if (ae == mkSuccess) usleep(50000);
    }
    const char *msg = mkGetLastError(g_comm);
    const int bad = ae != mkErrTimeout || strstr(msg, "rank 1") == NULL;
    printf("rank %d nocall: async error %s: \"%s\"  %s\n", g_rank, mkGetErrorString(ae), msg,
           bad ? "FAIL" : "ok");
    return bad;
}
static inline int mkt_nocall_later(mkResult_t later)
{
    if (later == mkErrTimeout) return 0;
    printf("rank %d nocall: a later call returned %s, expected mkErrTimeout FAIL\n", g_rank,
           mkGetErrorString(later));
    return 1;
}
/* Rank 1's side: alive but not calling, past the others' deadline
 * (MK_TIMEOUT_MS, default 20 s) and 3 s more. */
static inline void mkt_nocall_sit_out(const char *what)
{
    const char *t = getenv("MK_TIMEOUT_MS");
    sleep((t ? atoi(t) / 1000 : 20) + 3);
    printf("rank 1 nocall: skipped the %s\n", what);
}

#endif /* MKT_GPU_CHECK_H */
