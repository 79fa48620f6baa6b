/*
 * pmix.c - the PMIx bootstrap, for jobs started by srun, mpirun or prterun.
 *
 * allgather: each rank Puts its slot under a key unique to (communicator
 * instance, op sequence), Commits, and a Fence that collects data makes
 * every key visible; then each rank Gets every other rank's key.
 * bcast is the same with one Put, barrier a Fence without data.  Every
 * Fence carries PMIX_TIMEOUT so a rank that never arrives turns into
 * mkErrTimeout, not a hang.  Only the whole job (the namespace) takes part,
 * so only mkCommInit uses this bootstrap; subcommunicators use tcp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mki.h"

#if HAVE_PMIX
#include <pmix.h>

struct pmix_ctx {
    pmix_proc_t me;
    int nranks;
    int timeout_ms;
    unsigned instance;
    uint64_t seq;
};

static pthread_mutex_t pmix_lock = PTHREAD_MUTEX_INITIALIZER;
static int pmix_inited;      /* PMIx_Init succeeded, no PMIx_Finalize yet */
static int pmix_live;        /* open bootstrap contexts */
static int pmix_atexit_set;
static pmix_proc_t pmix_me;
static unsigned pmix_instances;

int mki_bootstrap_pmix_available(void) { return 1; }

static mkResult_t pmix_fail(const char *what, pmix_status_t rc)
{
    mkResult_t res = rc == PMIX_ERR_TIMEOUT ? mkErrTimeout : mkErrBootstrap;
    return mki_error(NULL, res, "%s failed: %s%s", what, PMIx_Error_string(rc),
                     rc == PMIX_ERR_TIMEOUT
                         ? " (a rank did not arrive within MK_TIMEOUT_MS)" : "");
}

static mkResult_t fence(struct pmix_ctx *c, int collect)
{
    pmix_info_t info[2];
    int secs = (int)(((int64_t)c->timeout_ms + 999) / 1000);
    bool yes = collect ? true : false;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(NULL, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Fence", rc);
    return mkSuccess;
}

static mkResult_t put(struct pmix_ctx *c, const char *key, const void *buf,
                      size_t bytes)
{
    pmix_value_t v;
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)buf;
    v.data.bo.size = bytes;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Put", rc);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Commit", rc);
    (void)c;
    return mkSuccess;
}

static mkResult_t get(struct pmix_ctx *c, int rank, const char *key, void *buf,
                      size_t bytes)
{
    pmix_proc_t p;
    pmix_value_t *v = NULL;
    PMIX_PROC_CONSTRUCT(&p);
    PMIX_LOAD_PROCID(&p, c->me.nspace, (pmix_rank_t)rank);
    pmix_status_t rc = PMIx_Get(&p, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Get", rc);
    mkResult_t res = mkSuccess;
    if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != bytes)
        res = mki_error(NULL, mkErrInvalidUsage, "bootstrap mismatch: rank %d "
                        "sent %zu bytes for %s, this rank expected %zu; every "
                        "rank must make the same collective calls", rank,
                        v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0, key,
                        bytes);
    else
        memcpy(buf, v->data.bo.bytes, bytes);
    PMIX_VALUE_RELEASE(v);
    return res;
}

static void key_name(struct pmix_ctx *c, char *key, size_t len)
{
    snprintf(key, len, "mki.%u.%llu", c->instance, (unsigned long long)c->seq++);
}

static mkResult_t pmix_allgather(void *ctx, void *buf, size_t bytes)
{
    struct pmix_ctx *c = ctx;
    char key[64];
    key_name(c, key, sizeof(key));
    char *b = buf;
    MKI_CHECK(put(c, key, b + (size_t)c->me.rank * bytes, bytes));
    MKI_CHECK(fence(c, 1));
    for (int r = 0; r < c->nranks; r++)
        if (r != (int)c->me.rank)
            MKI_CHECK(get(c, r, key, b + (size_t)r * bytes, bytes));
    return mkSuccess;
}

static mkResult_t pmix_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    struct pmix_ctx *c = ctx;
    char key[64];
    key_name(c, key, sizeof(key));
    if ((int)c->me.rank == root) MKI_CHECK(put(c, key, buf, bytes));
    MKI_CHECK(fence(c, 1));
    if ((int)c->me.rank != root) MKI_CHECK(get(c, root, key, buf, bytes));
    return mkSuccess;
}

static mkResult_t pmix_barrier(void *ctx) { return fence(ctx, 0); }

/* PMIx stays initialised until the process exits: a PMIx_Init after a
 * PMIx_Finalize in the same process is not reliable (seen here with PMIx
 * 4.2: the next communicator's PMIx_Get failed with NOT-FOUND now and
 * then), and programs may create and destroy communicators many times. */
static void finalize_locked(void)
{
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        MKI_WARN(MKI_SUB_BOOT, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    pmix_inited = 0;
}

static void pmix_atexit(void)
{
    pthread_mutex_lock(&pmix_lock);
    if (pmix_inited) finalize_locked();
    pthread_mutex_unlock(&pmix_lock);
}

/* After mkCommAbort the process usually leaves at once, maybe through
 * _exit: tell the launcher now, unless another communicator still uses
 * PMIx, so that the exit is not taken for a crash. */
void mki_bootstrap_pmix_release(void)
{
    pthread_mutex_lock(&pmix_lock);
    if (pmix_inited && pmix_live == 0) finalize_locked();
    pthread_mutex_unlock(&pmix_lock);
}

static void pmix_close(void *ctx)
{
    free(ctx);
    pthread_mutex_lock(&pmix_lock);
    pmix_live--;
    pthread_mutex_unlock(&pmix_lock);
}

static const struct mki_bootstrap_ops pmix_ops = {
    "pmix", pmix_allgather, pmix_bcast, pmix_barrier, pmix_close,
};

mkResult_t mki_bootstrap_pmix_init(int timeout_ms, int *rank, int *nranks,
                                   int *no_launcher, const struct mki_bootstrap_ops **ops,
                                   void **out)
{
    struct pmix_ctx *c = calloc(1, sizeof(*c));
    *no_launcher = 0;
    if (!c) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    pthread_mutex_lock(&pmix_lock);
    pmix_status_t rc = pmix_inited ? PMIX_SUCCESS : PMIx_Init(&c->me, NULL, 0);
    if (pmix_inited) c->me = pmix_me; /* already connected: same identity */
    if (rc != PMIX_SUCCESS) {
        pthread_mutex_unlock(&pmix_lock);
        free(c);
        *no_launcher = (rc == PMIX_ERR_UNREACH);
        mki_error_quiet(NULL, "PMIx_Init failed: %s", PMIx_Error_string(rc));
        return mkErrBootstrap;
    }
    if (!pmix_inited) {
        pmix_inited = 1;
        pmix_me = c->me;
        if (!pmix_atexit_set) atexit(pmix_atexit);
        pmix_atexit_set = 1;
    }
    pmix_live++;
    c->instance = pmix_instances++;
    pthread_mutex_unlock(&pmix_lock);

    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_PROCID(&wild, c->me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS) {
        mkResult_t res = pmix_fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
        pmix_close(c);
        return res;
    }
    c->nranks = (int)v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    c->timeout_ms = timeout_ms;
    *rank = (int)c->me.rank;
    *nranks = c->nranks;
    *ops = &pmix_ops;
    *out = c;
    return mkSuccess;
}

#else /* !HAVE_PMIX */

int mki_bootstrap_pmix_available(void) { return 0; }
void mki_bootstrap_pmix_release(void) {}

mkResult_t mki_bootstrap_pmix_init(int timeout_ms, int *rank, int *nranks,
                                   int *no_launcher, const struct mki_bootstrap_ops **ops,
                                   void **out)
{
    (void)timeout_ms; (void)rank; (void)nranks; (void)ops; (void)out;
    *no_launcher = 1;
    mki_error_quiet(NULL, "libmkernel was built without PMIx (configure "
                    "--with-pmix)");
    return mkErrBootstrap;
}

#endif
