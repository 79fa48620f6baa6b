/*
 * test_socket - the socket transport driven by the proxy thread, between
 * forked processes on this host (and, through netns.sh, between network
 * namespaces joined by a veth pair).
 *
 * Each rank's region:  [counters 4 KiB][inbox per source][outbox]
 * Every rank's main thread plays the GPU producer: it pushes commands to
 * each peer into the FIFO (WRITE_SIGNAL of odd sizes up to 16 MiB, then
 * unsignalled 128 KiB writes and a fence SIGNAL, then FLUSH); the proxy
 * forwards them.  The receiver checks each block the moment its counter
 * moves (the signal must follow the data), and that counters moved once.
 *
 * Usage: test_socket                 all cases (make check)
 *        test_socket netns RANK DIR  one rank of the namespace test
 *        test_socket --bench         throughput over loopback
 *        test_socket --lat [N]       one-way latency over loopback: an
 *                                    8-byte WRITE_SIGNAL ping-pong through
 *                                    the FIFO, the proxy and the receiving
 *                                    thread, beside a plain TCP ping-pong
 *                                    of the same frame (the floor); needs
 *                                    6 free cores (each rank spins 3
 *                                    threads)
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "common.h"
#include "net/proxy.h"
#include "../unit/check.h"

#define SIGS 4096ull
#define NSLOTS 64
#define FENCE_K 63
#define FENCE_N 8
#define FENCE_LEN (128ull << 10)

struct basic_arg {
    int big;
    int timeout_ms;
    int device;   /* region as device memory, through the copy hooks */
};

static const uint64_t big_sizes[] = {1, 100, 4096, 65539, 300000, 1 << 20,
                                     (5 << 20) + 17, 16 << 20};
static const uint64_t small_sizes[] = {1, 100, 4096, 65539, 300000, 1 << 20};

struct layout {
    const uint64_t *sizes;
    int nsizes;
    uint64_t inbox, size;
};

static struct layout make_layout(int big, int nranks)
{
    struct layout l;
    l.sizes = big ? big_sizes : small_sizes;
    l.nsizes = big ? 8 : 6;
    uint64_t sum = 0;
    for (int k = 0; k < l.nsizes; k++) sum += l.sizes[k];
    l.inbox = ((sum + FENCE_N * FENCE_LEN) + 4095) & ~4095ull;
    l.size = SIGS + l.inbox * (uint64_t)(nranks + 1);
    return l;
}

static uint64_t *counter(char *base, int src, int k)
{
    return (uint64_t *)(base + ((uint64_t)src * 64 + (uint64_t)k) * 8);
}

static uint64_t block_off(const struct layout *l, int k)
{
    uint64_t o = 0;
    for (int i = 0; i < k; i++) o += l->sizes[i];
    return o;
}

static uint64_t want(int k) { return k % 2 ? (uint64_t)k + 100 : 1; }

static mkResult_t push(struct mki_fifo_hdr *f, struct mki_fifo_cmd c,
                       uint64_t deadline, uint64_t *pushed)
{
    MKI_CHECK(mki_fifo_push_host(f, NSLOTS, &c, deadline));
    (*pushed)++;
    return mkSuccess;
}

/* Every command of this rank for peer p. */
static mkResult_t push_peer(struct mki_fifo_hdr *f, const struct layout *l,
                            int nranks, int me, int p, uint64_t deadline,
                            uint64_t *pushed)
{
    uint64_t out = SIGS + l->inbox * (uint64_t)nranks;
    uint64_t in = SIGS + l->inbox * (uint64_t)me; /* my inbox at the peer */
    for (int k = 0; k < l->nsizes; k++) {
        uint64_t o = block_off(l, k);
        struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, (uint32_t)p,
                                 k % 2 ? MKI_SIG_SET : MKI_SIG_ADD, 0,
                                 out + o, in + o, l->sizes[k],
                                 ((uint64_t)me * 64 + (uint64_t)k) * 8, want(k)};
        MKI_CHECK(push(f, c, deadline, pushed));
    }
    uint64_t fo = block_off(l, l->nsizes);
    for (int i = 0; i < FENCE_N; i++) {
        struct mki_fifo_cmd c = {MKI_CMD_WRITE, (uint32_t)p, 0, 0,
                                 out + fo + i * FENCE_LEN,
                                 in + fo + i * FENCE_LEN, FENCE_LEN, 0, 0};
        MKI_CHECK(push(f, c, deadline, pushed));
    }
    struct mki_fifo_cmd fence = {MKI_CMD_SIGNAL, (uint32_t)p, MKI_SIG_ADD, 0,
                                 0, 0, 0, ((uint64_t)me * 64 + FENCE_K) * 8, 1};
    return push(f, fence, deadline, pushed);
}

static int block_ok(char *base, const struct layout *l, int src, uint64_t o,
                    uint64_t len)
{
    const unsigned char *in = (unsigned char *)base + SIGS + l->inbox * (uint64_t)src;
    for (uint64_t i = o; i < o + len; i++)
        if (in[i] != net_pattern(src, i)) return 0;
    return 1;
}

/* Wait for every block from src; check each as soon as its counter moves. */
static int check_from(char *base, const struct layout *l, int rank, int src,
                      uint64_t deadline)
{
    for (int k = 0; k < l->nsizes; k++) {
        EXPECT(net_wait_ge(counter(base, src, k), want(k), NULL, NULL,
                           deadline) == mkSuccess);
        EXPECT(block_ok(base, l, src, block_off(l, k), l->sizes[k]));
    }
    EXPECT(net_wait_ge(counter(base, src, FENCE_K), 1, NULL, NULL, deadline) ==
           mkSuccess);
    EXPECT(block_ok(base, l, src, block_off(l, l->nsizes),
                    FENCE_N * FENCE_LEN));
    for (int k = 0; k < l->nsizes; k++)
        EXPECT(*counter(base, src, k) == want(k)); /* raised once */
    EXPECT(*counter(base, src, FENCE_K) == 1);
    return 0;
}

/* Teardown: everyone received, every proxy stopped, then close (a running
 * proxy would take a peer's close for a failure). */
static int stop_and_close(struct net_rank *nr, struct mki_proxy *px,
                          struct mki_fifo_hdr *f)
{
    int rank = nr->rank;
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    EXPECT(mki_proxy_stop(px, 2000) == mkSuccess);
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    mki_transport_socket.close(nr->tctx);
    mki_fifo_free(f);
    return 0;
}

static int basic(struct net_rank *nr, void *argp)
{
    struct basic_arg *a = argp;
    int rank = nr->rank;
    struct layout l = make_layout(a->big, nr->nranks);
    char *base = calloc(1, l.size);
    EXPECT(base);
    unsigned char *out = (unsigned char *)base + SIGS + l.inbox * (uint64_t)nr->nranks;
    for (uint64_t i = 0; i < l.inbox; i++) out[i] = net_pattern(rank, i);
    EXPECT(net_socket_open(nr, base, l.size, a->timeout_ms, 0x1234,
                           a->device) == mkSuccess);
    struct mki_fifo_hdr *f;
    struct mki_proxy *px;
    EXPECT(mki_fifo_alloc(NSLOTS, &f) == mkSuccess);
    struct mki_proxy_args pa = {f, NSLOTS, &mki_transport_socket, nr->tctx,
                                NULL, 0, a->timeout_ms, 0};
    EXPECT(mki_proxy_start(&pa, &px) == mkSuccess);
    uint64_t deadline = mki_deadline_ms(a->timeout_ms), pushed = 0;
    for (int p = 0; p < nr->nranks; p++)
        if (p != rank)
            EXPECT(push_peer(f, &l, nr->nranks, rank, p, deadline, &pushed) ==
                   mkSuccess);
    struct mki_fifo_cmd flush = {MKI_CMD_FLUSH, 0, 0, 0, 0, 0, 0, 0, 0};
    EXPECT(push(f, flush, deadline, &pushed) == mkSuccess);
    for (int p = 0; p < nr->nranks; p++)
        if (p != rank) EXPECT(check_from(base, &l, rank, p, deadline) == 0);
    EXPECT(net_wait_ge(&f->done, pushed, NULL, NULL, deadline) == mkSuccess);
    struct mki_proxy_stats st;
    mki_proxy_get_stats(px, &st);
    EXPECT(st.commands == pushed);
    if (a->device) { /* every byte and signal went through the hooks */
        uint64_t per_peer = block_off(&l, l.nsizes) + FENCE_N * FENCE_LEN;
        EXPECT(net_dev_from == per_peer * (uint64_t)(nr->nranks - 1));
        EXPECT(net_dev_to == per_peer * (uint64_t)(nr->nranks - 1));
        EXPECT(net_dev_raised == (uint64_t)(l.nsizes + 1) * (nr->nranks - 1));
    }
    EXPECT(stop_and_close(nr, px, f) == 0);
    free(base);
    return 0;
}

/* ---- a peer dies (or hangs) in the middle of a transfer ----------------- */

struct death_arg {
    int sig;          /* SIGKILL or SIGSTOP for rank 1 */
    int timeout_ms;
};

static int death(struct net_rank *nr, void *argp)
{
    struct death_arg *a = argp;
    int rank = nr->rank;
    uint64_t size = 96ull << 20;
    char *base = calloc(1, size);
    EXPECT(base);
    EXPECT(net_socket_open(nr, base, size, a->timeout_ms, 77, 0) == mkSuccess);
    struct mki_fifo_hdr *f;
    struct mki_proxy *px;
    EXPECT(mki_fifo_alloc(NSLOTS, &f) == mkSuccess);
    struct mki_proxy_args pa = {f, NSLOTS, &mki_transport_socket, nr->tctx,
                                NULL, 0, a->timeout_ms, 0};
    EXPECT(mki_proxy_start(&pa, &px) == mkSuccess);
    /* Both push 32 MiB writes, so both are mid-frame when rank 1 goes. */
    struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, (uint32_t)(1 - rank),
                             MKI_SIG_ADD, 0, 64ull << 20, 4096, 32ull << 20,
                             0, 1};
    uint64_t deadline = mki_deadline_ms(a->timeout_ms);
    EXPECT(mki_fifo_push_host(f, NSLOTS, &c, deadline) == mkSuccess);
    EXPECT(mki_fifo_push_host(f, NSLOTS, &c, deadline) == mkSuccess);
    if (rank == 1) {
        usleep(30000);
        raise(a->sig);
        for (;;) pause(); /* stopped: the runner kills it */
    }
    uint64_t t0 = mki_now_ns();
    char msg[MKI_ERRMSG_LEN];
    mkResult_t r = mkSuccess;
    while ((r = mki_proxy_error(px, msg, sizeof(msg))) == mkSuccess &&
           mki_now_ns() - t0 < (uint64_t)(a->timeout_ms + 3000) * 1000000ull)
        usleep(1000);
    double s = (double)(mki_now_ns() - t0) / 1e9;
    fprintf(stderr, "rank 0 saw %s after %.2f s: %s\n", mkGetErrorString(r),
            s, msg);
    EXPECT(r == mkErrRemote || r == mkErrTransport || r == mkErrTimeout);
    EXPECT(s < a->timeout_ms / 1000.0 + 1.5);
    EXPECT(f->error == (uint64_t)r); /* producers can see it */
    /* A producer waiting on a full ring gives up instead of hanging. */
    for (int i = 0; i < NSLOTS + 1; i++) {
        mkResult_t pr = mki_fifo_push_host(f, NSLOTS, &c, mki_deadline_ms(2000));
        if (pr != mkSuccess) {
            EXPECT(pr == mkErrRemote);
            break;
        }
    }
    EXPECT(mki_proxy_stop(px, 1000) == r);
    mki_transport_socket.close(nr->tctx);
    return 0;
}

/* ---- choosing a transport: the first that works on every rank ----------- */

static int rdma_here(void)
{
    FILE *p = popen("ls /sys/class/infiniband 2>/dev/null | wc -l", "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = 0;
        pclose(p);
    }
    return n > 0;
}

static int choose(struct net_rank *nr, void *argp)
{
    int rank = nr->rank;
    const struct mki_transport_ops *t = NULL;
    void *ctx = NULL;
    struct mki_net_args a = {nr->boot, nr->bctx, rank, nr->nranks, nr->peers,
                             nr->nranks - 1, 5000, 99, NULL, 0, NULL, NULL, NULL};
    EXPECT(mki_transport_open("ibverbs,efa,socket", &a, &t, &ctx) == mkSuccess);
    if (!rdma_here()) EXPECT(strcmp(t->name, "socket") == 0);
    t->close(ctx);
    if (!rdma_here()) {
        EXPECT(mki_transport_open("^socket", &a, &t, &ctx) == mkErrUnsupported);
        EXPECT(strstr(mki_thread_error(), "ibverbs: ") != NULL);
        EXPECT(strstr(mki_thread_error(), "efa: ") != NULL);
    }
    EXPECT(mki_transport_open("socket,tcp", &a, &t, &ctx) ==
           mkErrInvalidArgument); /* local: no collective was entered */
    EXPECT(strstr(mki_thread_error(), "\"tcp\"") != NULL);
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    return 0;
}

/* ---- throughput (test_socket --bench) ------------------------------------ */

struct bw_arg {
    uint64_t bytes, count;
};

static int bandwidth(struct net_rank *nr, void *argp)
{
    struct bw_arg *a = argp;
    int rank = nr->rank;
    uint64_t win = 64ull << 20, size = SIGS + win;
    char *base = calloc(1, size);
    EXPECT(base);
    EXPECT(net_socket_open(nr, base, size, 30000, 5, 0) == mkSuccess);
    struct mki_fifo_hdr *f;
    struct mki_proxy *px;
    EXPECT(mki_fifo_alloc(256, &f) == mkSuccess);
    struct mki_proxy_args pa = {f, 256, &mki_transport_socket, nr->tctx, NULL,
                                0, 30000, 0};
    EXPECT(mki_proxy_start(&pa, &px) == mkSuccess);
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    uint64_t t0 = mki_now_ns(), deadline = mki_deadline_ms(60000);
    if (rank == 0) {
        for (uint64_t i = 0, o = 0; i < a->count; i++) {
            if (o + a->bytes > win) o = 0;
            struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, 1, MKI_SIG_ADD, 0,
                                     SIGS + o, SIGS + o, a->bytes, 0, 1};
            EXPECT(mki_fifo_push_host(f, 256, &c, deadline) == mkSuccess);
            o += a->bytes;
        }
        EXPECT(net_wait_ge(&f->done, a->count, NULL, NULL, deadline) ==
               mkSuccess);
    } else {
        EXPECT(net_wait_ge((uint64_t *)base, a->count, NULL, NULL, deadline) ==
               mkSuccess);
        double s = (double)(mki_now_ns() - t0) / 1e9;
        printf("| %s | %llu B | %.0f k/s | %.2f GB/s |\n",
               mki_param_str(MKI_P_SOCKET_NCONN),
               (unsigned long long)a->bytes, a->count / s / 1e3,
               (double)(a->bytes * a->count) / s / 1e9);
        fflush(stdout);
    }
    EXPECT(stop_and_close(nr, px, f) == 0);
    free(base);
    return 0;
}

static int bench(void)
{
    struct bw_arg small = {64, 200000}, large = {4ull << 20, 512};
    printf("| MK_SOCKET_NCONN | write size | commands/s | GB/s |\n"
           "|---|---|---|---|\n");
    fflush(stdout);
    const char *nconn[] = {"1", "2", "4"};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        setenv("MK_SOCKET_NCONN", nconn[i], 1);
        bad += net_run(2, 30000, bandwidth, &small, 120, -1);
        bad += net_run(2, 30000, bandwidth, &large, 120, -1);
    }
    return bad != 0;
}

/* ---- one-way latency (--lat) --------------------------------------------- */

struct lat_arg {
    int n; /* timed round trips (after n / 10 warm-up ones) */
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Spin (no sleep: the figure is the path's, not a nap's) until *p >= v. */
static int spin_ge(const uint64_t *p, uint64_t v, uint64_t deadline)
{
    unsigned k = 0;
    while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < v)
        if (++k % 4096 == 0 && mki_now_ns() > deadline) return -1;
    return 0;
}

static void lat_print(const char *what, uint64_t *rtt, int n)
{
    qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
    printf("| %s | %.2f | %.2f | %.2f |\n", what, rtt[n / 2] / 2e3, rtt[n / 10] / 2e3,
           rtt[n * 99 / 100] / 2e3);
    fflush(stdout);
}

/* Rank 0 writes 8 bytes with a signal into rank 1's region; rank 1's main
 * thread (the "GPU" polling its counter) answers the same way. */
static int latency(struct net_rank *nr, void *argp)
{
    const struct lat_arg *a = argp;
    const int rank = nr->rank, n = a->n, warm = n / 10 + 1;
    const uint64_t size = SIGS + 4096;
    char *base = calloc(1, size);
    uint64_t *rtt = calloc((size_t)n, sizeof(*rtt));
    EXPECT(base && rtt);
    EXPECT(net_socket_open(nr, base, size, 30000, 5, 0) == mkSuccess);
    struct mki_fifo_hdr *f;
    struct mki_proxy *px;
    EXPECT(mki_fifo_alloc(256, &f) == mkSuccess);
    struct mki_proxy_args pa = {f, 256, &mki_transport_socket, nr->tctx, NULL, 0, 30000, 0};
    EXPECT(mki_proxy_start(&pa, &px) == mkSuccess);
    EXPECT(nr->boot->barrier(nr->bctx) == mkSuccess);
    const uint64_t deadline = mki_deadline_ms(60000);
    uint64_t *mine = (uint64_t *)base; /* counter 0: the peer's pings */
    for (int i = 1; i <= warm + n; i++) {
        struct mki_fifo_cmd c = {MKI_CMD_WRITE_SIGNAL, (uint32_t)!rank, MKI_SIG_SET, 0,
                                 SIGS + 8, SIGS, 8, 0, (uint64_t)i};
        memcpy(base + SIGS + 8, &i, sizeof(i));
        if (rank == 0) {
            const uint64_t t0 = mki_now_ns();
            EXPECT(mki_fifo_push_host(f, 256, &c, deadline) == mkSuccess);
            EXPECT(spin_ge(mine, (uint64_t)i, deadline) == 0);
            if (i > warm) rtt[i - warm - 1] = mki_now_ns() - t0;
        } else {
            EXPECT(spin_ge(mine, (uint64_t)i, deadline) == 0);
            int got;
            memcpy(&got, base + SIGS, sizeof(got));
            EXPECT(got == i); /* the data came before its signal */
            EXPECT(mki_fifo_push_host(f, 256, &c, deadline) == mkSuccess);
        }
    }
    if (rank == 0) {
        char what[96];
        snprintf(what, sizeof(what), "FIFO + proxy + socket (MK_SOCKET_NCONN=%s)",
                 mki_param_str(MKI_P_SOCKET_NCONN));
        lat_print(what, rtt, n);
    }
    EXPECT(stop_and_close(nr, px, f) == 0);
    free(rtt);
    free(base);
    return 0;
}

/* Read exactly n bytes, spinning on a non-blocking socket. */
static int spin_read(int fd, char *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, b + got, n - got, MSG_DONTWAIT);
        if (r > 0) got += (size_t)r;
        else if (r == 0 || (errno != EAGAIN && errno != EINTR)) return -1;
    }
    return 0;
}

/* The floor: a TCP ping-pong of one 72-byte frame (a 64-byte header and 8
 * bytes) over loopback between two processes, receives spinning. */
static int tcp_floor(int n)
{
    const int warm = n / 10 + 1;
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof(sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        perror("tcp floor: listen");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        char b[72];
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) _exit(1);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        for (int i = 0; i < warm + n; i++)
            if (spin_read(fd, b, sizeof(b)) != 0 || send(fd, b, sizeof(b), MSG_NOSIGNAL) != 72)
                _exit(1);
        _exit(0);
    }
    int fd = accept(ls, NULL, NULL);
    uint64_t *rtt = calloc((size_t)n, sizeof(*rtt));
    char b[72] = {0};
    int bad = fd < 0 || !rtt;
    if (!bad) (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int i = 0; !bad && i < warm + n; i++) {
        const uint64_t t0 = mki_now_ns();
        bad = send(fd, b, sizeof(b), MSG_NOSIGNAL) != 72 || spin_read(fd, b, sizeof(b)) != 0;
        if (!bad && i >= warm) rtt[i - warm] = mki_now_ns() - t0;
    }
    if (!bad) lat_print("TCP ping-pong, 72-byte frames (the floor)", rtt, n);
    int st = 0;
    waitpid(pid, &st, 0);
    if (fd >= 0) close(fd);
    close(ls);
    free(rtt);
    return bad || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

static int lat_bench(int n)
{
    printf("| one-way latency, us (half a round trip) | median | p10 | p99 |\n"
           "|---|---|---|---|\n");
    fflush(stdout);
    int bad = tcp_floor(n);
    struct lat_arg a = {n};
    const char *nconn[] = {"1", "4"};
    for (int i = 0; i < 2; i++) {
        setenv("MK_SOCKET_NCONN", nconn[i], 1);
        bad += net_run(2, 30000, latency, &a, 120, -1);
    }
    return bad != 0;
}

/* ---- the namespace test's ranks ----------------------------------------- */

static int netns_rank(int rank, const char *dir)
{
    char path[512], tmp[520];
    struct mki_unique_id id;
    struct basic_arg a = {1, 30000, 0};
    snprintf(path, sizeof(path), "%s/id", dir);
    if (rank == 0) {
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        if (mki_tcp_root_start(&id, a.timeout_ms) != mkSuccess) return 1;
        FILE *fp = fopen(tmp, "wb");
        if (!fp || fwrite(&id, sizeof(id), 1, fp) != 1 || fclose(fp) != 0 ||
            rename(tmp, path) != 0) {
            perror(tmp);
            return 1;
        }
    } else {
        FILE *fp = NULL;
        for (int i = 0; i < 200 && !(fp = fopen(path, "rb")); i++) usleep(50000);
        if (!fp || fread(&id, sizeof(id), 1, fp) != 1) {
            fprintf(stderr, "rank 1: no id at %s\n", path);
            return 1;
        }
        fclose(fp);
    }
    alarm(60);
    int rc = net_child(&id, rank, 2, a.timeout_ms, basic, &a);
    printf("rank %d: %s\n", rank, rc ? "FAILED" : "moved and checked all blocks");
    return rc;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 4 && strcmp(argv[1], "netns") == 0)
        return netns_rank(atoi(argv[2]), argv[3]);
    if (argc == 2 && strcmp(argv[1], "--bench") == 0) {
        setenv("MK_SOCKET_IFNAME", "lo", 1);
        setenv("MK_BOOTSTRAP_IFNAME", "lo", 1);
        return bench();
    }
    if (argc >= 2 && strcmp(argv[1], "--lat") == 0) {
        setenv("MK_SOCKET_IFNAME", "lo", 1);
        setenv("MK_BOOTSTRAP_IFNAME", "lo", 1);
        return lat_bench(argc > 2 ? atoi(argv[2]) : 20000);
    }
    alarm(240);
    setenv("MK_SOCKET_IFNAME", "lo", 1);
    setenv("MK_BOOTSTRAP_IFNAME", "lo", 1);
    struct basic_arg big = {1, 30000, 0}, small = {0, 30000, 0};
    struct basic_arg dev = {1, 30000, 1};
    setenv("MK_SOCKET_NCONN", "1", 1);
    CHECK(net_run(2, 30000, basic, &big, 90, -1) == 0);
    setenv("MK_SOCKET_NCONN", "4", 1);
    CHECK(net_run(2, 30000, basic, &big, 90, -1) == 0);
    /* The same through the device-memory path (bounce buffers, hooks). */
    CHECK(net_run(2, 30000, basic, &dev, 90, -1) == 0);
    setenv("MK_SOCKET_NCONN", "2", 1);
    CHECK(net_run(4, 30000, basic, &small, 90, -1) == 0);
    CHECK(net_run(2, 10000, choose, NULL, 30, -1) == 0);
    /* A dead peer, then a hung one: the survivor fails within the timeout. */
    struct death_arg killed = {SIGKILL, 3000}, stopped = {SIGSTOP, 3000};
    CHECK(net_run(2, 10000, death, &killed, 30, 1) == 0);
    CHECK(net_run(2, 10000, death, &stopped, 30, 1) == 0);
    TEST_DONE();
}
