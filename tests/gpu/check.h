/*
 * check.h - the GPU tests' checks of CUDA and mkernel calls: on failure,
 * the rank, the file and line, the call and why, then exit (2; a failed
 * mkernel call MKT_EXIT_MK, 2 unless the test defines it first).  The
 * including file has g_rank and g_comm.
 */
#ifndef MKT_GPU_CHECK_H
#define MKT_GPU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

#endif /* MKT_GPU_CHECK_H */
