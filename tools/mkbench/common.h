/* mkbench common helpers: timing with CUDA events, medians, run metadata
 * (device, commit, date) and the JSON records every benchmark writes.
 *
 * JSON (stable; other tools read it): an array of objects with at least
 *   op, dtype, world_size, nodes, device, m, n, k, ours_ms, baseline,
 *   baseline_ms, speedup (= baseline_ms / ours_ms), limit_ms, ours_over_limit
 *   (null where no limit is defined), tflops, baseline_tflops, sm_split,
 *   ctas, commit, date.
 */
#ifndef MKB_COMMON_H
#define MKB_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MKB_CHECK(call)                                                              \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                    cudaGetErrorString(e_));                                         \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

/* Multi-rank benchmarks (under mpirun): a failed mkernel or NCCL call ends
 * the rank with a message naming it.  The file using them defines g_rank
 * and g_comm. */
#define MKB_MK(call)                                                          \
    do {                                                                      \
        mkResult_t r_ = (call);                                               \
        if (r_ != mkSuccess) {                                                \
            fprintf(stderr, "rank %d: %s: %s: %s\n", g_rank, #call,           \
                    mkGetErrorString(r_), mkGetLastError(g_comm));            \
            exit(2);                                                          \
        }                                                                     \
    } while (0)
#define MKB_NC(call)                                                          \
    do {                                                                      \
        ncclResult_t r_ = (call);                                             \
        if (r_ != ncclSuccess) {                                              \
            fprintf(stderr, "rank %d: %s: %s\n", g_rank, #call,               \
                    ncclGetErrorString(r_));                                  \
            exit(2);                                                          \
        }                                                                     \
    } while (0)

/* One benchmark record. Negative *_ms / limit_ms mean "not defined" (null). */
typedef struct {
    const char *op, *dtype, *baseline;
    int world_size, nodes;
    long long m, n, k;
    double ours_ms, baseline_ms, limit_ms;
    double flops; /* per call; 0: no tflops fields */
    char sm_split[64];
    int ctas;
    const char *extra; /* optional: more "key": value pairs, appended as is */
} mkb_record;

typedef struct {
    FILE *f;
    int count;
    char device[128], commit[64], date[32];
} mkb_json;

/* Device name of the current device ("NVIDIA H100 80GB HBM3"); `underscored`
 * gets the same with every non-alphanumeric character as '_'. */
void mkb_device_name(char *name, size_t len, char *underscored, size_t ulen);
/* $MK_GIT_COMMIT, else the MKB_GIT_COMMIT macro, else `git rev-parse`, else
 * "unknown". */
void mkb_git_commit(char *out, size_t len);
/* UTC, ISO 8601 ("2026-11-22T05:30:00Z"). */
void mkb_date_utc(char *out, size_t len);
/* Directory for results: $OUT when set, else bench/results/<device>/
 * (created). */
void mkb_results_dir(char *out, size_t len);

int mkb_json_open(mkb_json *j, const char *path);
void mkb_json_add(mkb_json *j, const mkb_record *r);
void mkb_json_close(mkb_json *j);

double mkb_median(double *v, int n); /* sorts v */

/* Times `reps` calls of fn(ctx, rep) on `stream`, one event pair per call,
 * after `warmup` untimed calls; fills ms[reps]. fn must only enqueue work. */
typedef void (*mkb_fn)(void *ctx, int rep);
/* The host's wall time per call of the last mkb_time's timed loop, in
 * microseconds (the enqueue alone, before the stream is waited for): near
 * the event times, the series is bound by the host, not the GPU. */
extern double mkb_host_us;
void mkb_time(mkb_fn fn, void *ctx, cudaStream_t stream, int warmup, int reps, double *ms);

#ifdef __cplusplus
}
#endif
#endif
