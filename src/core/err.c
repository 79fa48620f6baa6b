/*
 * err.c - result strings and the last-error detail.
 *
 * A failing call records one sentence that names the argument or peer at
 * fault and what to do.  With a communicator the detail is kept in it;
 * without one (mkCommInit, mkGetUniqueId, a bad handle) it is kept per
 * thread.  mkGetLastError(comm) reads the former, mkGetLastError(NULL) the
 * latter.
 */
#include <stdio.h>
#include <string.h>

#include "mki.h"

static __thread char thread_error[MKI_ERRMSG_LEN];

/* In the order of mkResult_t (mkernel.h): mkSuccess first. */
static const char *const result_strings[] = {
    "success", "invalid argument", "unsupported", "invalid usage", "CUDA error",
    "system error", "bootstrap error", "transport error", "timeout", "remote error",
    "out of memory", "internal error",
};
_Static_assert(sizeof(result_strings) / sizeof(result_strings[0]) == mkNumResults,
               "one string per mkResult_t");

MK_API const char *mkGetErrorString(mkResult_t result)
{
    if ((unsigned)result >= mkNumResults) return "unknown mkResult_t value";
    return result_strings[result];
}

const char *mki_thread_error(void) { return thread_error; }
void mki_thread_error_clear(void) { thread_error[0] = '\0'; }

static void store(struct mkComm *comm, const char *msg)
{
    if (comm) {
        pthread_mutex_lock(&comm->lock);
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", msg);
        pthread_mutex_unlock(&comm->lock);
    }
    /* The thread copy is always set too: a caller that only has the
     * thread's view (e.g. the bootstrap) can pass it on. */
    if (msg != thread_error)
        snprintf(thread_error, sizeof(thread_error), "%s", msg);
}

mkResult_t mki_verror(struct mkComm *comm, mkResult_t res, const char *fmt,
                      va_list ap)
{
    char msg[MKI_ERRMSG_LEN];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    store(comm, msg);
    MKI_WARN(MKI_SUB_ALL, "%s: %s", mkGetErrorString(res), msg);
    return res;
}

mkResult_t mki_error(struct mkComm *comm, mkResult_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mki_verror(comm, res, fmt, ap);
    va_end(ap);
    return res;
}

void mki_error_quiet(struct mkComm *comm, const char *fmt, ...)
{
    char msg[MKI_ERRMSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    store(comm, msg);
}

mkResult_t mki_cuda_error(struct mkComm *comm, cudaError_t e, const char *what,
                          const char *file, int line)
{
    (void)cudaGetLastError(); /* a non-sticky error must not leak into the next call */
    MKI_TRACE(MKI_SUB_ALL, "-> %s:%d (%s)", file, line, cudaGetErrorName(e));
    return mki_error(comm, e == cudaErrorMemoryAllocation ? mkErrNoMemory : mkErrCuda,
                     "%s: %s", what, cudaGetErrorString(e));
}

MK_API const char *mkGetLastError(mkComm_t comm)
{
    /* Copied under the lock into this thread's buffer: another thread may
     * be writing the communicator's detail at the same time. */
    static __thread char copy[MKI_ERRMSG_LEN];
    if (comm == NULL || comm->magic != MKI_COMM_MAGIC) return thread_error;
    pthread_mutex_lock(&comm->lock);
    snprintf(copy, sizeof(copy), "%s", comm->last_error);
    pthread_mutex_unlock(&comm->lock);
    return copy;
}
