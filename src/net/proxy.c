/*
 * proxy.c - the FIFO consumer thread of the inter-node path (proxy.h).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "mki.h"
#include "net/proxy.h"
#include "bootstrap/sock.h"

struct mki_proxy {
    struct mki_proxy_args a;
    pthread_t thread;
    int started;
    int stop;                        /* atomic: 1 = drain and exit */
    int exited;                      /* atomic */
    uint64_t stop_deadline;
    /* owned by the thread */
    struct mki_fifo_cmd cur;
    int have_cur;
    uint64_t posted, completed, flushes_done, consumed, busy;
    uint64_t bytes;                  /* of the writes posted (stats) */
    uint64_t busy_since;             /* when the current post was refused */
    int flush_wait;
    /* read by others under lock */
    pthread_mutex_t lock;
    mkResult_t err;
    char msg[MKI_ERRMSG_LEN];
    int cpu;
};

/* ---- rings for host producers --------------------------------------- */

mkResult_t mki_fifo_alloc(uint32_t nslots, struct mki_fifo_hdr **out)
{
    if (nslots == 0 || (nslots & (nslots - 1)))
        return mki_error(NULL, mkErrInvalidArgument, "FIFO of %u slots: "
                         "give a power of two", nslots);
    void *p = NULL;
    if (posix_memalign(&p, 4096, mki_fifo_bytes(nslots)) != 0)
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    memset(p, 0, mki_fifo_bytes(nslots));
    *out = p;
    return mkSuccess;
}

void mki_fifo_free(struct mki_fifo_hdr *fifo) { free(fifo); }

mkResult_t mki_fifo_push_host(struct mki_fifo_hdr *f, uint32_t nslots,
                              const struct mki_fifo_cmd *cmd,
                              uint64_t deadline_ns)
{
    uint64_t t = __atomic_fetch_add(&f->host_head, 1, __ATOMIC_RELAXED);
    unsigned spins = 0;
    while (t - __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE) >= nslots) {
        if (__atomic_load_n(&f->error, __ATOMIC_ACQUIRE))
            return mki_error(NULL, mkErrRemote, "the proxy failed (%s)",
                             mkGetErrorString((mkResult_t)f->error));
        if (++spins % 1024 == 0) {
            if (mki_now_ns() > deadline_ns)
                return mki_error(NULL, mkErrTimeout, "FIFO full until the "
                                 "deadline: the proxy is stuck");
            sched_yield();
        }
    }
    struct mki_fifo_slot *s = &mki_fifo_slots(f)[t % nslots];
    mki_fifo_payload(cmd, s->w);
    __atomic_store_n(&s->w[0], mki_fifo_word0(cmd), __ATOMIC_RELEASE);
    return mkSuccess;
}

/* ---- the thread ------------------------------------------------------ */

/* The first error only, and the producers' word before anyone can read
 * it through mki_proxy_error: a later error (a timeout after a peer's
 * reset) changes neither (test_socket's death case saw them differ once). */
static void set_error(struct mki_proxy *p, mkResult_t res)
{
    pthread_mutex_lock(&p->lock);
    if (p->err == mkSuccess) {
        snprintf(p->msg, sizeof(p->msg), "%s", mki_thread_error());
        __atomic_store_n(&p->a.fifo->error, (uint64_t)res, __ATOMIC_RELEASE);
        p->err = res;
    }
    res = p->err;
    pthread_mutex_unlock(&p->lock);
    MKI_WARN(MKI_SUB_PROXY, "proxy stopped forwarding: %s: %s",
             mkGetErrorString(res), p->msg);
}

static mkResult_t post_cur(struct mki_proxy *p, int *posted)
{
    const struct mki_fifo_cmd *c = &p->cur;
    struct mki_net_signal sig = {c->sig_op, c->region, c->sig_off, c->sig_val};
    *posted = 0;
    MKI_TRACE(MKI_SUB_PROXY, "%llu us: command %llu: kind %u to rank %u, "
              "%llu bytes %llu -> %llu, signal op %u at %llu value 0x%llx",
              (unsigned long long)(mki_now_ns() / 1000),
              (unsigned long long)p->consumed, c->kind, c->peer,
              (unsigned long long)c->bytes, (unsigned long long)c->loff,
              (unsigned long long)c->roff, c->sig_op,
              (unsigned long long)c->sig_off, (unsigned long long)c->sig_val);
    if ((c->kind == MKI_CMD_SIGNAL && !p->a.tops->post_signal) ||
        (c->kind != MKI_CMD_SIGNAL && !p->a.tops->post_write))
        return mki_error(NULL, mkErrUnsupported, "the %s transport cannot "
                         "carry FIFO command kind %u", p->a.tops->name,
                         c->kind);
    switch (c->kind) {
    case MKI_CMD_WRITE:
    case MKI_CMD_WRITE_SIGNAL:
        return p->a.tops->post_write(p->a.tctx, (int)c->peer, c->region,
                                     c->loff, c->roff, c->bytes,
                                     c->kind == MKI_CMD_WRITE ? NULL : &sig,
                                     posted);
    case MKI_CMD_SIGNAL:
        return p->a.tops->post_signal(p->a.tctx, (int)c->peer, &sig, posted);
    default:
        return mki_error(NULL, mkErrInternal, "FIFO slot %llu holds command "
                         "kind %u: the ring is corrupt",
                         (unsigned long long)p->consumed, c->kind);
    }
}

/* Take the slot at tail if it is published. */
static int acquire(struct mki_proxy *p)
{
    struct mki_fifo_slot *s =
        &mki_fifo_slots(p->a.fifo)[p->consumed % p->a.nslots];
    uint64_t w0 = __atomic_load_n(&s->w[0], __ATOMIC_ACQUIRE);
    if (!(w0 & MKI_FIFO_VALID)) return 0;
    mki_fifo_decode(w0, s->w, &p->cur);
    p->have_cur = 1;
    return 1;
}

static void release(struct mki_proxy *p)
{
    struct mki_fifo_slot *s =
        &mki_fifo_slots(p->a.fifo)[p->consumed % p->a.nslots];
    __atomic_store_n(&s->w[0], 0, __ATOMIC_RELAXED);
    p->consumed++;
    __atomic_store_n(&p->a.fifo->tail, p->consumed, __ATOMIC_RELEASE);
    p->have_cur = 0;
}

/* The transport had no room for the current command: fine for a while
 * (completions free room), an error once it lasted MK_TIMEOUT_MS (a peer
 * that stopped acknowledging, e.g. an SRD fence that never clears). */
static int refused_too_long(struct mki_proxy *p)
{
    uint64_t now = mki_now_ns();
    p->busy++;
    if (!p->busy_since) p->busy_since = now;
    if (now - p->busy_since <= (uint64_t)p->a.timeout_ms * 1000000ull)
        return 0;
    set_error(p, mki_error(NULL, mkErrTimeout, "proxy: the %s transport "
                           "took no command for %d ms (MK_TIMEOUT_MS); a peer "
                           "stopped acknowledging", p->a.tops->name,
                           p->a.timeout_ms));
    return 1;
}

/* One pass: progress, then forward at most a few commands.  Returns 1
 * when something happened. */
static int pass(struct mki_proxy *p)
{
    uint64_t before = p->completed;
    mkResult_t res = p->a.tops->progress(p->a.tctx, &p->completed);
    if (res != mkSuccess) { set_error(p, res); return 0; }
    int moved = p->completed != before;
    for (int n = 0; n < 64; n++) {
        if (!p->have_cur && !acquire(p)) break;
        if (p->cur.kind == MKI_CMD_FLUSH) {
            if (p->completed < p->posted) break; /* not all before it done */
            p->flushes_done++;
            release(p);
            moved = 1;
            continue;
        }
        int posted;
        res = post_cur(p, &posted);
        if (res != mkSuccess) { set_error(p, res); return 0; }
        if (!posted) {
            if (refused_too_long(p)) return 0;
            break;
        }
        p->busy_since = 0;
        p->posted++;
        if (p->cur.kind != MKI_CMD_SIGNAL)
            __atomic_store_n(&p->bytes, p->bytes + p->cur.bytes, __ATOMIC_RELAXED);
        release(p);
        moved = 1;
    }
    __atomic_store_n(&p->a.fifo->done, p->completed + p->flushes_done,
                     __ATOMIC_RELEASE);
    return moved;
}

static int drained(struct mki_proxy *p)
{
    struct mki_fifo_slot *s =
        &mki_fifo_slots(p->a.fifo)[p->consumed % p->a.nslots];
    return !p->have_cur && p->completed == p->posted &&
           !(__atomic_load_n(&s->w[0], __ATOMIC_ACQUIRE) & MKI_FIFO_VALID);
}

/* Spin while work came within spin_ns, then nap 20 us at a time.  By
 * time, not by passes: a pass that makes no system call (RDMA, or a
 * socket transport whose receiving is another thread's) takes tens of
 * nanoseconds, and a count of passes then slept between two calls 40 us
 * apart (each hop 60-100 us late; bench/NOTES.md, eighteenth session). */
static void idle(uint64_t *idle_since, uint64_t spin_ns)
{
    const uint64_t now = mki_now_ns();
    if (!*idle_since) *idle_since = now;
    if (now - *idle_since < spin_ns) return;
    struct timespec ts = {0, 20000}; /* 20 us: nothing came for a while */
    nanosleep(&ts, NULL);
}

static void *proxy_main(void *arg)
{
    struct mki_proxy *p = arg;
    uint64_t idle_since = 0;
    const uint64_t spin_ns = (uint64_t)(p->a.spin_us > 0 ? p->a.spin_us : 1000) * 1000ull;
    /* naps of 20 us, not the default slack's 50 us more */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    for (;;) {
        int failed = p->err != mkSuccess;
        int moved = failed ? 0 : pass(p);
        if (moved) idle_since = 0;
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE) &&
            (failed || drained(p) || mki_now_ns() > p->stop_deadline))
            break;
        if (!moved) idle(&idle_since, failed ? 0 : spin_ns);
        else p->cpu = sched_getcpu();
    }
    __atomic_store_n(&p->exited, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- control --------------------------------------------------------- */

mkResult_t mki_proxy_start(const struct mki_proxy_args *args,
                           struct mki_proxy **out)
{
    if (!args || !args->fifo || !args->tops || !args->tctx ||
        args->nslots == 0 || (args->nslots & (args->nslots - 1)))
        return mki_error(NULL, mkErrInvalidArgument, "proxy: needs a FIFO of "
                         "a power-of-two slots and a connected transport");
    struct mki_proxy *p = calloc(1, sizeof(*p));
    if (!p) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    p->a = *args;
    p->cpu = -1;
    p->consumed = __atomic_load_n(&args->fifo->tail, __ATOMIC_ACQUIRE);
    pthread_mutex_init(&p->lock, NULL);
    pthread_attr_t at;
    pthread_attr_init(&at);
    int rc = args->cpus ? pthread_attr_setaffinity_np(&at, args->cpus_size,
                                                      args->cpus) : 0;
    if (rc == 0) rc = pthread_create(&p->thread, &at, proxy_main, p);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return mki_error(NULL, mkErrSystem, "proxy: cannot start the thread%s: "
                         "%s", args->cpus ? " on the given CPUs" : "",
                         strerror(rc));
    }
    p->started = 1;
    MKI_INFO(MKI_SUB_PROXY, "proxy started on %s (%u slots)",
             args->tops->name, args->nslots);
    *out = p;
    return mkSuccess;
}

mkResult_t mki_proxy_stop(struct mki_proxy *p, int timeout_ms)
{
    if (!p) return mkSuccess;
    p->stop_deadline = mki_deadline_ms(timeout_ms);
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    /* The thread exits by the deadline itself; allow it one more second. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000 + 1;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    int rc = pthread_timedjoin_np(p->thread, NULL, &ts);
    if (rc != 0)
        return mki_error(NULL, mkErrInternal, "proxy thread did not stop: %s",
                         strerror(rc)); /* leaked rather than freed under it */
    mkResult_t res = p->err;
    if (res != mkSuccess)
        mki_error_quiet(NULL, "%s", p->msg);
    else if (!drained(p))
        res = mki_error(NULL, mkErrTimeout, "proxy: %llu commands were not "
                        "completed within %d ms of the stop request",
                        (unsigned long long)(p->posted - p->completed),
                        timeout_ms);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return res;
}

mkResult_t mki_proxy_error(struct mki_proxy *p, char *msg, size_t len)
{
    pthread_mutex_lock(&p->lock);
    mkResult_t res = p->err;
    if (msg && len) snprintf(msg, len, "%s", res == mkSuccess ? "" : p->msg);
    pthread_mutex_unlock(&p->lock);
    return res;
}

void mki_proxy_get_stats(struct mki_proxy *p, struct mki_proxy_stats *s)
{
    s->commands = __atomic_load_n(&p->consumed, __ATOMIC_RELAXED);
    s->bytes = __atomic_load_n(&p->bytes, __ATOMIC_RELAXED);
    s->done = __atomic_load_n(&p->a.fifo->done, __ATOMIC_ACQUIRE);
    s->busy = __atomic_load_n(&p->busy, __ATOMIC_RELAXED);
    s->cpu = __atomic_load_n(&p->cpu, __ATOMIC_RELAXED);
}
