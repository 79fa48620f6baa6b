/*
 * test_fakenic - the RC (ibverbs) and SRD (EFA) protocol engines, driven
 * through the transport ops table over the in-process fake NIC, which
 * places writes out of order and completes them late.
 *
 * Ranks are threads joined by a tiny in-process bootstrap.  Each rank
 * sends every peer M writes of odd sizes (1..5 chunks of the fake NIC's
 * 1000-byte messages), each raising its own counter (ADD 1, or SET k+100),
 * then unsignalled writes and a fence.  M exceeds the SRD slots, so slots
 * are recycled through acknowledgements.  Each receiver checks a block the
 * moment its counter moves, and at the end that every counter moved
 * exactly once.  Then error completions: a failed write turns into
 * mkErrTransport naming the status, and the error sticks; and a peer that
 * dies (its NIC closes) fails the survivor the same way.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "transports/rdma/fake_nic.h"
#include "../unit/check.h"

#define NR 4
#define M 300
#define FENCE_K 511
#define FENCE_N 6
#define FENCE_LEN 3000u
#define CTRS (NR * 512 * 8)

/* ---- in-process bootstrap ----------------------------------------------- */

struct tb_shared {
    pthread_barrier_t bar;
    void *slots[NR];
    int n;
    int done;                     /* ranks that finished (atomic) */
};

struct tb_ctx {
    struct tb_shared *s;
    int rank;
};

static mkResult_t tb_allgather(void *ctx, void *buf, size_t bytes)
{
    struct tb_ctx *c = ctx;
    c->s->slots[c->rank] = buf;
    pthread_barrier_wait(&c->s->bar);
    for (int r = 0; r < c->s->n; r++)
        if (r != c->rank)
            memcpy((char *)buf + (size_t)r * bytes,
                   (char *)c->s->slots[r] + (size_t)r * bytes, bytes);
    pthread_barrier_wait(&c->s->bar);
    return mkSuccess;
}

static mkResult_t tb_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    struct tb_ctx *c = ctx;
    c->s->slots[c->rank] = buf;
    pthread_barrier_wait(&c->s->bar);
    if (c->rank != root) memcpy(buf, c->s->slots[root], bytes);
    pthread_barrier_wait(&c->s->bar);
    return mkSuccess;
}

static mkResult_t tb_barrier(void *ctx)
{
    pthread_barrier_wait(&((struct tb_ctx *)ctx)->s->bar);
    return mkSuccess;
}

static void tb_close(void *ctx) { (void)ctx; }

static const struct mki_bootstrap_ops tb_ops = {"threads", tb_allgather,
                                                tb_bcast, tb_barrier, tb_close};

/* ---- one rank ------------------------------------------------------------ */

struct rank_arg {
    const struct mki_transport_ops *t;
    struct tb_shared *s;
    int rank, n;
    uint64_t inbox;               /* bytes per source */
    uint64_t sizes[M];            /* same sequence on every rank */
    int failures;
    uint64_t completed, posted;
    int device;                   /* register as device memory, use the hook */
    uint64_t hook_calls;
};

#define RFAIL(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s rank %d: FAIL %s:%d %s (%s)\n", a->t->name,  \
                    a->rank, __FILE__, __LINE__, #cond, mki_thread_error()); \
            a->failures++;                                                   \
            goto out;                                                        \
        }                                                                    \
    } while (0)

static unsigned char pat(int src, uint64_t off)
{
    return (unsigned char)((off * 131 + (uint64_t)src * 17 + (off >> 8)) & 0xff);
}

static uint64_t want(int k) { return k % 2 ? (uint64_t)k + 100 : 1; }

static uint64_t block_off(const struct rank_arg *a, int k)
{
    uint64_t o = 0;
    for (int i = 0; i < k; i++) o += a->sizes[i];
    return o;
}

static uint64_t *ctr(char *base, int src, int k)
{
    return (uint64_t *)(base + ((uint64_t)src * 512 + (uint64_t)k) * 8);
}

static int block_ok(const struct rank_arg *a, char *base, int src, uint64_t o,
                    uint64_t len)
{
    const unsigned char *in = (unsigned char *)base + CTRS + a->inbox * (uint64_t)src;
    for (uint64_t i = o; i < o + len; i++)
        if (in[i] != pat(src, i)) return 0;
    return 1;
}

/* The next command for peer index p, k in [0, M + FENCE_N + 1). */
static mkResult_t post_one(struct rank_arg *a, void *ctx, int peer, int k,
                           int *posted)
{
    uint64_t out = CTRS + a->inbox * (uint64_t)a->n;
    uint64_t in = CTRS + a->inbox * (uint64_t)a->rank;
    if (k < M) {
        uint64_t o = block_off(a, k);
        /* odd k: SET or MAX of k + 100 into a zero counter; even: ADD 1 */
        uint32_t op = k % 2 ? (k % 4 == 1 ? MKI_SIG_SET : MKI_SIG_MAX)
                            : MKI_SIG_ADD;
        struct mki_net_signal s = {op, 0,
                                   ((uint64_t)a->rank * 512 + (uint64_t)k) * 8,
                                   want(k)};
        return a->t->post_write(ctx, peer, 0, out + o, in + o, a->sizes[k], &s,
                                posted);
    }
    uint64_t fo = block_off(a, M) + (uint64_t)(k - M) * FENCE_LEN;
    if (k < M + FENCE_N)
        return a->t->post_write(ctx, peer, 0, out + fo, in + fo, FENCE_LEN,
                                NULL, posted);
    struct mki_net_signal f = {MKI_SIG_ADD, 0,
                               ((uint64_t)a->rank * 512 + FENCE_K) * 8, 1};
    return a->t->post_signal(ctx, peer, &f, posted);
}

/* Check whatever arrived; returns the number of blocks verified so far. */
static int check_arrivals(struct rank_arg *a, char *base, int *seen)
{
    int ok = 0;
    for (int src = 0; src < a->n; src++) {
        if (src == a->rank) continue;
        for (int k = 0; k <= M; k++) {
            int *sk = &seen[src * (M + 1) + k];
            if (*sk) { ok++; continue; }
            int kk = k == M ? FENCE_K : k;
            uint64_t v = __atomic_load_n(ctr(base, src, kk), __ATOMIC_ACQUIRE);
            if (!v) continue;
            int good = k == M ? v == 1 &&
                                block_ok(a, base, src, block_off(a, M),
                                         FENCE_N * FENCE_LEN)
                              : v == want(k) &&
                                block_ok(a, base, src, block_off(a, k),
                                         a->sizes[k]);
            if (!good) {
                fprintf(stderr, "%s rank %d: counter %d from %d = %llu before "
                        "its data was complete\n", a->t->name, a->rank, k, src,
                        (unsigned long long)v);
                a->failures++;
            }
            *sk = 1;
            ok++;
        }
    }
    return ok;
}

/* The runtime's hook for signals in device memory (here: host memory). */
static mkResult_t raise_hook(void *h, void *addr, uint32_t op, uint64_t v)
{
    struct rank_arg *a = h;
    struct mki_net_signal s = {op, 0, 0, v};
    mki_signal_apply(addr, &s);
    a->hook_calls++;
    return mkSuccess;
}

static void *rank_main(void *argp)
{
    struct rank_arg *a = argp;
    struct tb_ctx bc = {a->s, a->rank};
    int peers[NR], np = 0, next[NR] = {0}, done_me = 0, region;
    for (int r = 0; r < a->n; r++)
        if (r != a->rank) peers[np++] = r;
    uint64_t size = CTRS + a->inbox * (uint64_t)(a->n + 1);
    char *base = calloc(1, size);
    int *seen = calloc((size_t)a->n * (M + 1), sizeof(int));
    void *ctx = NULL;
    RFAIL(base && seen);
    unsigned char *out = (unsigned char *)base + CTRS + a->inbox * (uint64_t)a->n;
    for (uint64_t i = 0; i < a->inbox; i++) out[i] = pat(a->rank, i);
    struct mki_net_args na = {&tb_ops, &bc, a->rank, a->n, peers, np, 20000,
                              42, NULL, 0, a->device ? raise_hook : NULL, NULL,
                              a};
    RFAIL(a->t->init(&na, &ctx) == mkSuccess);
    RFAIL(a->t->reg_mem(ctx, base, size, a->device ? MKI_MEM_DEVICE
                                                   : MKI_MEM_HOST,
                        &region) == mkSuccess);
    RFAIL(a->t->connect(ctx) == mkSuccess);
    uint64_t deadline = mki_now_ns() + 30000000000ull;
    int total = (a->n - 1) * (M + 1), ncmd = M + FENCE_N + 1;
    while (__atomic_load_n(&a->s->done, __ATOMIC_ACQUIRE) < a->n) {
        RFAIL(mki_now_ns() < deadline);
        for (int p = 0; p < np; p++) {
            int posted = 1;
            while (next[p] < ncmd && posted) {
                RFAIL(post_one(a, ctx, peers[p], next[p], &posted) == mkSuccess);
                if (posted) { next[p]++; a->posted++; }
            }
        }
        RFAIL(a->t->progress(ctx, &a->completed) == mkSuccess);
        if (!done_me && check_arrivals(a, base, seen) == total &&
            a->completed == a->posted && a->posted == (uint64_t)(np * ncmd)) {
            done_me = 1;
            __atomic_fetch_add(&a->s->done, 1, __ATOMIC_RELEASE);
        }
    }
    for (int src = 0; src < a->n; src++) /* each counter moved exactly once */
        for (int k = 0; src != a->rank && k < M; k++)
            RFAIL(*ctr(base, src, k) == want(k));
    if (a->device) /* SRD raises through the hook, once per signal */
        RFAIL(a->hook_calls == (uint64_t)np * (M + 1));
out:
    if (!done_me) __atomic_fetch_add(&a->s->done, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&a->s->bar); /* nobody closes under a poller */
    if (ctx) a->t->close(ctx);
    free(base);
    free(seen);
    return NULL;
}

static int run_protocol(const struct mki_transport_ops *t, int n, int device)
{
    struct mki_fake_params fp = {12345, 1000, 64, 64, 6};
    struct mki_fake_fabric *f = mki_fake_fabric_create(&fp);
    struct tb_shared s = {.n = n};
    struct rank_arg a[NR];
    pthread_t th[NR];
    pthread_barrier_init(&s.bar, NULL, (unsigned)n);
    mki_fake_fabric_use(f);
    uint64_t sizes[M], sum = 0, x = 88172645463325252ull;
    for (int k = 0; k < M; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sizes[k] = 1 + x % 5000;
        sum += sizes[k];
    }
    for (int r = 0; r < n; r++) {
        a[r] = (struct rank_arg){t, &s, r, n, sum + FENCE_N * FENCE_LEN, {0}, 0,
                                 0, 0, device, 0};
        memcpy(a[r].sizes, sizes, sizeof(sizes));
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    int fails = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        fails += a[r].failures;
    }
    struct mki_fake_stats st;
    mki_fake_stats(f, &st);
    printf("%s: %d ranks, %llu writes placed, %llu out of order, %llu "
           "completions late, %llu receiver-not-ready\n", t->name, n,
           (unsigned long long)st.delivered, (unsigned long long)st.reordered,
           (unsigned long long)st.late, (unsigned long long)st.rnr);
    CHECK(st.reordered > 100); /* the fabric did reorder */
    CHECK(st.late > 100);
    pthread_barrier_destroy(&s.bar);
    mki_fake_fabric_destroy(f);
    return fails;
}

/* ---- error completions --------------------------------------------------- */

struct err_arg {
    const struct mki_transport_ops *t;
    struct tb_shared *s;
    struct mki_fake_fabric *f;
    int rank, status;
    const char *expect;
    int failures;
};

static void *err_main(void *argp)
{
    struct err_arg *e = argp;
    struct rank_arg aa = {.t = e->t, .rank = e->rank}, *a = &aa;
    struct tb_ctx bc = {e->s, e->rank};
    int peer = 1 - e->rank, region, posted;
    uint64_t done = 0;
    char *base = calloc(1, 65536);
    void *ctx = NULL;
    struct mki_net_args na = {&tb_ops, &bc, e->rank, 2, &peer, 1, 5000, 7,
                              NULL, 0, NULL, NULL, NULL};
    RFAIL(base && e->t->init(&na, &ctx) == mkSuccess);
    RFAIL(e->t->reg_mem(ctx, base, 65536, MKI_MEM_HOST, &region) == mkSuccess);
    RFAIL(e->t->connect(ctx) == mkSuccess);
    struct mki_net_signal s = {MKI_SIG_ADD, 0, 0, 1};
    if (e->status == 0) { /* rank 1 dies after connect, rank 0 keeps going */
        if (e->rank == 1) {
            e->t->close(ctx);
            ctx = NULL;
            pthread_barrier_wait(&e->s->bar);
            goto out;
        }
        pthread_barrier_wait(&e->s->bar);
        mkResult_t r = mkSuccess;
        uint64_t t0 = mki_now_ns();
        for (int i = 0; r == mkSuccess && mki_now_ns() - t0 < 5000000000ull;
             i++) {
            r = e->t->post_write(ctx, 1, 0, 0, 4096, 3000, &s, &posted);
            if (r == mkSuccess) r = e->t->progress(ctx, &done);
        }
        RFAIL(r == mkErrTransport);
        RFAIL(strstr(mki_thread_error(), e->expect) != NULL);
        RFAIL(mki_now_ns() - t0 < 2000000000ull);
        goto out;
    }
    if (e->rank == 0) {
        /* caller errors are refused up front and do not stick */
        RFAIL(e->t->post_write(ctx, 1, 0, 0, 65000, 1000, &s, &posted) ==
              mkErrInvalidArgument);
        struct mki_net_signal bad = {MKI_SIG_ADD, 0, 65536, 1};
        RFAIL(e->t->post_signal(ctx, 1, &bad, &posted) == mkErrInvalidArgument);
        mki_fake_fail_next(e->f, 1, e->status);
        RFAIL(e->t->post_write(ctx, 1, 0, 0, 4096, 3000, &s, &posted) ==
              mkSuccess && posted);
        mkResult_t r = mkSuccess;
        uint64_t d = mki_now_ns() + 5000000000ull;
        while (r == mkSuccess && mki_now_ns() < d)
            r = e->t->progress(ctx, &done);
        RFAIL(r == mkErrTransport);
        RFAIL(strstr(mki_thread_error(), e->expect) != NULL);
        fprintf(stderr, "%s: %s\n", e->t->name, mki_thread_error());
        RFAIL(e->t->post_write(ctx, 1, 0, 0, 0, 8, NULL, &posted) ==
              mkErrTransport);
        RFAIL(e->t->progress(ctx, &done) == mkErrTransport);
    }
out:
    pthread_barrier_wait(&e->s->bar);
    if (ctx) e->t->close(ctx);
    free(base);
    e->failures = a->failures;
    return NULL;
}

static int run_error(const struct mki_transport_ops *t, int status,
                     const char *expect)
{
    struct mki_fake_params fp = {777, 1000, 64, 64, 3};
    struct mki_fake_fabric *f = mki_fake_fabric_create(&fp);
    struct tb_shared s = {.n = 2};
    struct err_arg e[2];
    pthread_t th[2];
    pthread_barrier_init(&s.bar, NULL, 2);
    mki_fake_fabric_use(f);
    for (int r = 0; r < 2; r++) {
        e[r] = (struct err_arg){t, &s, f, r, status, expect, 0};
        pthread_create(&th[r], NULL, err_main, &e[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&s.bar);
    mki_fake_fabric_destroy(f);
    return e[0].failures + e[1].failures;
}

int main(void)
{
    alarm(120);
    /* MAX keeps the greatest value whatever the arrival order */
    uint64_t word = 0;
    struct mki_net_signal m5 = {MKI_SIG_MAX, 0, 0, 5}, m3 = {MKI_SIG_MAX, 0, 0, 3};
    mki_signal_apply(&word, &m5);
    mki_signal_apply(&word, &m3);
    CHECK(word == 5);
    m3.value = 9;
    mki_signal_apply(&word, &m3);
    CHECK(word == 9);
    uint64_t sz = 64;
    struct mki_net_signal m7 = {MKI_SIG_MAX, 0, 8, 7}, bad = {4, 0, 8, 7};
    CHECK(mki_signal_ok(&m7, &sz, 1) == 1);
    CHECK(mki_signal_ok(&bad, &sz, 1) == 0);
    CHECK(run_protocol(&mki_transport_fake_rc, 4, 0) == 0);
    CHECK(run_protocol(&mki_transport_fake_srd, 4, 0) == 0);
    /* SRD into "device" memory: signals go through the runtime's hook */
    CHECK(run_protocol(&mki_transport_fake_srd, 2, 1) == 0);
    CHECK(run_error(&mki_transport_fake_rc, MKI_FAKE_RETRY_EXC_ERR,
                    "transport retry counter exceeded") == 0);
    CHECK(run_error(&mki_transport_fake_srd, MKI_FAKE_REM_ACCESS_ERR,
                    "remote access error") == 0);
    /* status 0: the peer dies instead */
    CHECK(run_error(&mki_transport_fake_rc, 0, "retry counter exceeded") == 0);
    CHECK(run_error(&mki_transport_fake_srd, 0, "retry counter exceeded") == 0);
    TEST_DONE();
}
