/*
 * check.h - the one family of check macros of the host runtime.
 *
 *   MKI_CHECK(call)                  an mkResult_t call: return its error,
 *                                    adding one "-> file:line" frame at TRACE
 *   MKI_CHECK_GOTO(call, res, label) the same, into res, then goto label
 *   MKI_CUDA(comm, call)             a CUDA runtime call: return mkErrCuda
 *                                    (mkErrNoMemory for an allocation) with
 *                                    "call: CUDA's message" as the detail
 *   MKI_CUDA_GOTO(comm, call, res, label)
 *   MKI_SYS(comm, call)              a system call that returns -1 and sets
 *                                    errno: mkErrSystem with strerror(errno)
 *
 * Where a failure must say more than the call's text (which argument,
 * which peer, what to do), call mki_error() directly.
 */
#ifndef MKI_CHECK_H
#define MKI_CHECK_H

#include <errno.h>
#include <string.h>

#include <cuda_runtime_api.h>

struct mkComm;

#define MKI_CHECK(call)                                                    \
    do {                                                                   \
        mkResult_t mki_res_ = (call);                                      \
        if (mki_res_ != mkSuccess) {                                       \
            MKI_TRACE(MKI_SUB_ALL, "-> %s:%d (%s)", __FILE__, __LINE__,    \
                      mkGetErrorString(mki_res_));                         \
            return mki_res_;                                               \
        }                                                                  \
    } while (0)

#define MKI_CHECK_GOTO(call, res, label)                                   \
    do {                                                                   \
        (res) = (call);                                                    \
        if ((res) != mkSuccess) {                                          \
            MKI_TRACE(MKI_SUB_ALL, "-> %s:%d (%s)", __FILE__, __LINE__,    \
                      mkGetErrorString(res));                              \
            goto label;                                                    \
        }                                                                  \
    } while (0)

/* The mkResult_t of a failed CUDA call (after clearing CUDA's sticky-free
 * last error), with its detail recorded for comm. */
mkResult_t mki_cuda_error(struct mkComm *comm, cudaError_t e, const char *what,
                          const char *file, int line);

#define MKI_CUDA(comm, call)                                               \
    do {                                                                   \
        cudaError_t mki_e_ = (call);                                       \
        if (mki_e_ != cudaSuccess)                                         \
            return mki_cuda_error((comm), mki_e_, #call, __FILE__, __LINE__); \
    } while (0)

#define MKI_CUDA_GOTO(comm, call, res, label)                              \
    do {                                                                   \
        cudaError_t mki_e_ = (call);                                       \
        if (mki_e_ != cudaSuccess) {                                       \
            (res) = mki_cuda_error((comm), mki_e_, #call, __FILE__, __LINE__); \
            goto label;                                                    \
        }                                                                  \
    } while (0)

#define MKI_SYS(comm, call)                                                \
    do {                                                                   \
        if ((call) == -1)                                                  \
            return mki_error((comm), mkErrSystem, "%s: %s", #call,         \
                             strerror(errno));                             \
    } while (0)

#endif /* MKI_CHECK_H */
