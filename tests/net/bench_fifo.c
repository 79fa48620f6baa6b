/*
 * bench_fifo - how many commands per second one proxy thread forwards
 * from a host producer, over a transport that costs nothing (so the
 * figure is the FIFO + proxy loop alone).  The null transport checks
 * that commands arrive exactly once and in ring order.
 *
 * Usage: bench_fifo           quick check (make check), 200k commands
 *        bench_fifo --bench   the figures for bench/NOTES.md
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "net/proxy.h"
#include "bootstrap/sock.h"
#include "../unit/check.h"

struct null_ctx {
    uint64_t next, pending, bad;
};

static mkResult_t nl_write(void *ctx, int peer, uint32_t region, uint64_t loff,
                           uint64_t roff, uint64_t bytes,
                           const struct mki_net_signal *sig, int *posted)
{
    struct null_ctx *c = ctx;
    if (loff != c->next || roff != ~loff || peer != 1 || !sig ||
        sig->value != loff)
        c->bad++;
    c->next++;
    c->pending++;
    *posted = 1;
    return mkSuccess;
}

static mkResult_t nl_progress(void *ctx, uint64_t *completed)
{
    struct null_ctx *c = ctx;
    if (c->bad)
        return mki_error(NULL, mkErrInternal, "%llu commands out of order",
                         (unsigned long long)c->bad);
    *completed += c->pending;
    c->pending = 0;
    return mkSuccess;
}

static const struct mki_transport_ops null_ops = {
    .name = "null", .post_write = nl_write, .progress = nl_progress};

struct producer {
    struct mki_fifo_hdr *f;
    uint32_t nslots;
    uint64_t n;
    int cpu;
    mkResult_t res;
};

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static void *produce(void *arg)
{
    struct producer *p = arg;
    if (p->cpu >= 0) pin(p->cpu);
    uint64_t deadline = mki_deadline_ms(60000);
    for (uint64_t i = 0; i < p->n && p->res == mkSuccess; i++) {
        struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, 1, MKI_SIG_ADD, 0, i,
                                 ~i, 64, 0, i};
        p->res = mki_fifo_push_host(p->f, p->nslots, &c, deadline);
    }
    return NULL;
}

/* Returns commands per second, or -1 on failure. */
static double run(uint32_t nslots, uint64_t n, int pinned)
{
    struct mki_fifo_hdr *f;
    struct null_ctx nc = {0, 0, 0};
    struct mki_proxy *px;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(0, &cs);
    if (mki_fifo_alloc(nslots, &f) != mkSuccess) return -1;
    struct mki_proxy_args pa = {f, nslots, &null_ops, &nc, pinned ? &cs : NULL,
                                sizeof(cs), 10000, 0};
    struct producer pr = {f, nslots, n, pinned ? 1 : -1, mkSuccess};
    pthread_t th;
    if (mki_proxy_start(&pa, &px) != mkSuccess) return -1;
    uint64_t t0 = mki_now_ns();
    pthread_create(&th, NULL, produce, &pr);
    pthread_join(th, NULL);
    while (__atomic_load_n(&f->done, __ATOMIC_ACQUIRE) < n &&
           mki_now_ns() - t0 < 60000000000ull && !f->error)
        sched_yield();
    double s = (double)(mki_now_ns() - t0) / 1e9;
    struct mki_proxy_stats st;
    mki_proxy_get_stats(px, &st);
    mkResult_t r = mki_proxy_stop(px, 5000);
    int ok = pr.res == mkSuccess && r == mkSuccess && nc.next == n &&
             f->done == n && nc.bad == 0 && st.commands == n &&
             (!pinned || st.cpu == 0);
    if (!ok)
        fprintf(stderr, "run(%u slots, %llu): producer %s, proxy %s, got %llu "
                "done %llu bad %llu cpu %d\n", nslots, (unsigned long long)n,
                mkGetErrorString(pr.res), mkGetErrorString(r),
                (unsigned long long)nc.next, (unsigned long long)f->done,
                (unsigned long long)nc.bad, st.cpu);
    mki_fifo_free(f);
    return ok ? (double)n / s : -1;
}

/* A transport that never has room: the proxy must give up after
 * MK_TIMEOUT_MS, and a producer waiting on the full ring must see it. */
static mkResult_t full_write(void *ctx, int peer, uint32_t region,
                             uint64_t loff, uint64_t roff, uint64_t bytes,
                             const struct mki_net_signal *sig, int *posted)
{
    *posted = 0;
    return mkSuccess;
}

static mkResult_t full_progress(void *ctx, uint64_t *completed)
{
    return mkSuccess;
}

static const struct mki_transport_ops full_ops = {
    .name = "full", .post_write = full_write, .progress = full_progress};

static int refusing_transport(void)
{
    struct mki_fifo_hdr *f;
    struct mki_proxy *px;
    int dummy = 0;
    if (mki_fifo_alloc(4, &f) != mkSuccess) return 0;
    struct mki_proxy_args pa = {f, 4, &full_ops, &dummy, NULL, 0, 300, 0};
    if (mki_proxy_start(&pa, &px) != mkSuccess) return 0;
    uint64_t t0 = mki_now_ns();
    mkResult_t r = mkSuccess;
    for (int i = 0; i < 10 && r == mkSuccess; i++) {
        struct mki_fifo_cmd c = {MKI_CMD_WRITE, 1, 0, 0, 0, 0, 8, 0, 0};
        r = mki_fifo_push_host(f, 4, &c, mki_deadline_ms(5000));
    }
    double s = (double)(mki_now_ns() - t0) / 1e9;
    mkResult_t pr = mki_proxy_stop(px, 1000);
    int ok = r == mkErrRemote && pr == mkErrTimeout && s < 2.0 &&
             f->error == (uint64_t)mkErrTimeout;
    if (!ok)
        fprintf(stderr, "refusing transport: producer %s, proxy %s, %.2f s\n",
                mkGetErrorString(r), mkGetErrorString(pr), s);
    mki_fifo_free(f);
    return ok;
}

int main(int argc, char **argv)
{
    alarm(300);
    int bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (!bench) {
        CHECK(run(64, 200000, 0) > 0);
        CHECK(run(8, 50000, 0) > 0);      /* a ring full most of the time */
        if (ncpu >= 2) CHECK(run(256, 100000, 1) > 0);
        CHECK(refusing_transport());
        TEST_DONE();
    }
    printf("| slots | pinned (proxy cpu0, producer cpu1) | commands/s (median of 5) |\n");
    printf("|---|---|---|\n");
    uint32_t slots[] = {64, 256, 4096};
    for (int pin_it = 0; pin_it <= (ncpu >= 2); pin_it++)
        for (int i = 0; i < 3; i++) {
            double v[5];
            for (int k = 0; k < 5; k++) v[k] = run(slots[i], 2000000, pin_it);
            for (int a = 0; a < 5; a++) /* sort */
                for (int b = a + 1; b < 5; b++)
                    if (v[b] < v[a]) { double t = v[a]; v[a] = v[b]; v[b] = t; }
            printf("| %u | %s | %.2f M |\n", slots[i], pin_it ? "yes" : "no",
                   v[2] / 1e6);
        }
    return 0;
}
