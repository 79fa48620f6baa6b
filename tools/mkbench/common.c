/* mkbench common helpers (see common.h). */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void mkb_device_name(char *name, size_t len, char *underscored, size_t ulen)
{
    int dev = 0;
    struct cudaDeviceProp prop;
    MKB_CHECK(cudaGetDevice(&dev));
    MKB_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(name, len, "%s", prop.name);
    if (underscored && ulen) {
        size_t i;
        for (i = 0; prop.name[i] && i + 1 < ulen; ++i)
            underscored[i] = isalnum((unsigned char)prop.name[i]) ? prop.name[i] : '_';
        underscored[i] = '\0';
    }
}

void mkb_git_commit(char *out, size_t len)
{
    const char *env = getenv("MK_GIT_COMMIT");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return;
    }
#ifdef MKB_GIT_COMMIT
    if (MKB_GIT_COMMIT[0]) {
        snprintf(out, len, "%s", MKB_GIT_COMMIT);
        return;
    }
#endif
    snprintf(out, len, "unknown");
    FILE *p = popen("git rev-parse --short=12 HEAD 2>/dev/null", "r");
    if (p) {
        char buf[64] = {0};
        if (fgets(buf, sizeof buf, p) && buf[0] != '\n') {
            buf[strcspn(buf, "\r\n")] = '\0';
            snprintf(out, len, "%s", buf);
        }
        pclose(p);
    }
}

void mkb_date_utc(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void mkdir_p(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; ++p) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) && errno != EEXIST)
        fprintf(stderr, "mkbench: mkdir %s: %s\n", tmp, strerror(errno));
}

void mkb_results_dir(char *out, size_t len)
{
    const char *o = getenv("OUT");
    if (o && *o) {
        snprintf(out, len, "%s", o);
        mkdir_p(out);
        return;
    }
    char name[128], us[128];
    mkb_device_name(name, sizeof name, us, sizeof us);
    snprintf(out, len, "bench/results/%s", us);
    mkdir_p(out);
}

int mkb_json_open(mkb_json *j, const char *path)
{
    memset(j, 0, sizeof(*j));
    j->f = fopen(path, "w");
    if (!j->f) {
        fprintf(stderr, "mkbench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    mkb_device_name(j->device, sizeof j->device, NULL, 0);
    mkb_git_commit(j->commit, sizeof j->commit);
    mkb_date_utc(j->date, sizeof j->date);
    fprintf(j->f, "[");
    return 0;
}

static void num_or_null(FILE *f, const char *key, double v, int last)
{
    if (v >= 0)
        fprintf(f, "\"%s\": %.6f%s", key, v, last ? "" : ", ");
    else
        fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
}

void mkb_json_add(mkb_json *j, const mkb_record *r)
{
    FILE *f = j->f;
    if (!f)
        return;
    double speedup = r->ours_ms > 0 && r->baseline_ms > 0 ? r->baseline_ms / r->ours_ms : -1;
    double over = r->ours_ms > 0 && r->limit_ms > 0 ? r->ours_ms / r->limit_ms : -1;
    fprintf(f, "%s\n  {\"op\": \"%s\", \"dtype\": \"%s\", \"world_size\": %d, \"nodes\": %d, ",
            j->count ? "," : "", r->op, r->dtype, r->world_size, r->nodes);
    fprintf(f, "\"device\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, ", j->device, r->m, r->n,
            r->k);
    num_or_null(f, "ours_ms", r->ours_ms, 0);
    fprintf(f, "\"baseline\": \"%s\", ", r->baseline ? r->baseline : "");
    num_or_null(f, "baseline_ms", r->baseline_ms, 0);
    num_or_null(f, "speedup", speedup, 0);
    num_or_null(f, "limit_ms", r->limit_ms, 0);
    num_or_null(f, "ours_over_limit", over, 0);
    num_or_null(f, "tflops", r->flops > 0 && r->ours_ms > 0 ? r->flops / r->ours_ms * 1e-9 : -1, 0);
    num_or_null(f, "baseline_tflops",
                r->flops > 0 && r->baseline_ms > 0 ? r->flops / r->baseline_ms * 1e-9 : -1, 0);
    fprintf(f, "\"sm_split\": \"%s\", \"ctas\": %d, \"commit\": \"%s\", \"date\": \"%s\"%s%s}",
            r->sm_split, r->ctas, j->commit, j->date, r->extra && *r->extra ? ", " : "",
            r->extra ? r->extra : "");
    j->count++;
    fflush(f);
}

void mkb_json_close(mkb_json *j)
{
    if (!j->f)
        return;
    fprintf(j->f, "\n]\n");
    fclose(j->f);
    j->f = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mkb_median(double *v, int n)
{
    if (n <= 0)
        return -1;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mkb_host_us;

static double wall_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

void mkb_time(mkb_fn fn, void *ctx, cudaStream_t stream, int warmup, int reps, double *ms)
{
    cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * (size_t)reps);
    for (int i = 0; i < 2 * reps; ++i)
        MKB_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < warmup; ++i)
        fn(ctx, i);
    const double t0 = wall_us();
    for (int i = 0; i < reps; ++i) {
        MKB_CHECK(cudaEventRecord(ev[2 * i], stream));
        fn(ctx, warmup + i);
        MKB_CHECK(cudaEventRecord(ev[2 * i + 1], stream));
    }
    mkb_host_us = (wall_us() - t0) / reps;
    MKB_CHECK(cudaStreamSynchronize(stream));
    MKB_CHECK(cudaGetLastError());
    for (int i = 0; i < reps; ++i) {
        float t;
        MKB_CHECK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
        ms[i] = t;
    }
    for (int i = 0; i < 2 * reps; ++i)
        MKB_CHECK(cudaEventDestroy(ev[i]));
    free(ev);
}
