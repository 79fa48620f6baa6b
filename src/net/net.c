/*
 * net.c - wire the inter-node path into a communicator (net.h).
 *
 * Creation (after the device runtime):
 *   1. peers: every rank the plan reaches by MKI_PATH_NET;
 *   2. transport: MK_TRANSPORT / config->transports, parsed by the plan's
 *      list parser, tried in order by mki_transport_open (collective: the
 *      first transport that initialises on every rank wins);
 *   3. register region 0 (the workspace, or a host region without GPU)
 *      and region 1 (the net buffer), connect (collective);
 *   4. the FIFO (mapped pinned memory with a GPU, else plain host memory),
 *      the proxy thread pinned near the GPU, a monitor thread that turns a
 *      proxy failure into the communicator's async error.
 *
 * Region 0 is the symmetric heap's first segment (GPU memory), region 1
 * its host segment (page-locked, mapped into the GPU; src/mem/heap.h):
 * the kernels exchange everything with remote ranks in region 1, so the
 * proxy makes no CUDA call for them.  The CUDA hooks (copy_device,
 * raise_device_signal) serve region 0 (tools such as mkbench net
 * --device-region); they run in the proxy thread on a private
 * non-blocking stream, and can still wait behind the application's own
 * pageable copies (transport.h).  Tested on H200 hosts: the collectives
 * and mkAllGatherGemm across virtual nodes (tests/gpu/run.sh, ag_gemm.sh),
 * mkbench net, tests/net/test_comm_net.  Not tested: RDMA transports on
 * real NICs.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "mki.h"
#include "core/live.h"
#include "mem/mem.h"
#include "net/net.h"
#include "plan/plan.h"
#include "topology/topo.h"

/* ---- the CUDA hooks --------------------------------------------------- */

struct mki_net_dev {
    int dev;
    cudaStream_t stream;          /* non-blocking: never waits for kernels */
    uint64_t *word;               /* pinned: the signal value in flight */
    uint64_t *head;               /* device: producers' ticket counter, then
                                   * the largest tail they saw */
    int fifo_pinned;              /* the FIFO came from cudaHostAlloc */
    /* Last value raised at each counter of region 0's control block
     * (offsets below MKI_CTL_BYTES, zeroed at creation): the proxy is the
     * sole writer of the counters it raises, so it never reads them. */
    char *base;
    uint64_t shadow[MKI_CTL_BYTES / 8];
};

static __thread int hook_dev = -1;

/* The proxy thread uses the communicator's device (set once per thread);
 * relaxed capture mode so a user's global-mode capture on another thread
 * does not turn our copies into errors. */
static mkResult_t hook_enter(struct mki_net_dev *d)
{
    if (hook_dev == d->dev) return mkSuccess;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaSetDevice(d->dev);
    if (e != cudaSuccess)
        return mki_error(NULL, mkErrCuda, "proxy: cudaSetDevice(%d): %s",
                         d->dev, cudaGetErrorString(e));
    hook_dev = d->dev;
    return mkSuccess;
}

/* Copy on the private stream and wait: complete on return, as the
 * transport requires (a pageable cudaMemcpy may return before the DMA). */
static mkResult_t copy_sync(struct mki_net_dev *d, void *dst, const void *src,
                            size_t n, enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    if (e != cudaSuccess)
        return mki_error(NULL, mkErrCuda, "proxy: copy of %zu bytes %s the "
                         "GPU: %s", n, kind == cudaMemcpyHostToDevice ? "to"
                         : "from", cudaGetErrorString(e));
    return mkSuccess;
}

static void *net_host_alloc(void *ctx, size_t n)
{
    struct mki_net_dev *d = ctx;
    void *p = NULL;
    if (hook_enter(d) != mkSuccess) return NULL;
    cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        mki_error(NULL, mkErrNoMemory, "proxy: cudaHostAlloc(%zu): %s", n,
                  cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void net_host_free(void *ctx, void *p)
{
    (void)ctx;
    if (p) (void)cudaFreeHost(p);
}

static mkResult_t net_copy_device(void *ctx, void *dst, const void *src,
                                  size_t n, int to_device)
{
    struct mki_net_dev *d = ctx;
    MKI_CHECK(hook_enter(d));
    return copy_sync(d, dst, src, n, to_device ? cudaMemcpyHostToDevice
                                               : cudaMemcpyDeviceToHost);
}

/* The data copies before it completed on return (copy_sync), so one
 * aligned 8-byte copy after them is the release store.  ADD and MAX
 * compute the new value from the shadow of the counter (the last value
 * this proxy stored there): correct because this proxy is the sole writer
 * of the counters it raises (kernels only read them; a rank's signals all
 * arrive through its own proxy).  A counter outside the signal area (no
 * shadow) is read back first.  That a spinning ld.acquire.sys sees the
 * data once it sees this word is tested by the collectives across virtual
 * nodes (tests/gpu/run.sh). */
static mkResult_t net_raise_device_signal(void *ctx, void *addr, uint32_t op,
                                          uint64_t value)
{
    struct mki_net_dev *d = ctx;
    MKI_CHECK(hook_enter(d));
    if (op != MKI_SIG_SET && op != MKI_SIG_ADD && op != MKI_SIG_MAX)
        return mkSuccess;
    uintptr_t off = (uintptr_t)addr - (uintptr_t)d->base;
    uint64_t *sh = NULL;
    if (d->base && (uintptr_t)addr >= (uintptr_t)d->base && off < MKI_CTL_BYTES)
        sh = &d->shadow[off / 8];
    uint64_t cur = 0;
    if (sh) {
        cur = *sh;
    } else if (op != MKI_SIG_SET) {
        MKI_CHECK(copy_sync(d, d->word, addr, 8, cudaMemcpyDeviceToHost));
        cur = *d->word;
    }
    if (op == MKI_SIG_MAX && cur >= value) return mkSuccess;
    if (op == MKI_SIG_ADD) value += cur;
    *d->word = value;
    MKI_CHECK(copy_sync(d, addr, d->word, 8, cudaMemcpyHostToDevice));
    if (sh) *sh = value;
    return mkSuccess;
}

/* ---- CUDA resources (stream, pinned word, mapped FIFO) ---------------- */

#define CU(call, what)                                                        \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess)                                                \
            return mki_error(comm, mkErrCuda, "inter-node path: %s on "       \
                             "device %d: %s", what, comm->cuda_dev,           \
                             cudaGetErrorString(e_));                         \
    } while (0)

static mkResult_t dev_setup_on(struct mkComm *comm, struct mki_net *n)
{
    struct mki_net_dev *d = n->dev;
    CU(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
       "cudaStreamCreateWithFlags");
    CU(cudaHostAlloc((void **)&d->word, 8, cudaHostAllocPortable),
       "cudaHostAlloc (signal word)");
    CU(cudaHostAlloc((void **)&n->fifo, mki_fifo_bytes(n->nslots),
                     cudaHostAllocMapped | cudaHostAllocPortable),
       "cudaHostAlloc (FIFO)");
    d->fifo_pinned = 1;
    memset(n->fifo, 0, mki_fifo_bytes(n->nslots));
    struct mki_fifo_hdr *dring;
    CU(cudaHostGetDevicePointer((void **)&dring, n->fifo, 0),
       "cudaHostGetDevicePointer (FIFO)");
    /* the head, then the largest tail the producers saw */
    CU(cudaMalloc((void **)&d->head, 16), "cudaMalloc (FIFO head)");
    CU(cudaMemset(d->head, 0, 16), "cudaMemset (FIFO head)");
    CU(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    n->fifo_dev = (struct mki_fifo_dev){mki_fifo_slots(dring), dring,
                                        (unsigned long long *)d->head,
                                        n->nslots,
                                        (unsigned long long *)d->head + 1};
    return mkSuccess;
}

static mkResult_t dev_setup(struct mkComm *comm, struct mki_net *n)
{
    int prev = -1;
    n->dev = calloc(1, sizeof(*n->dev));
    if (!n->dev) return mki_error(comm, mkErrNoMemory, "out of host memory");
    n->dev->dev = comm->cuda_dev;
    CU(cudaGetDevice(&prev), "cudaGetDevice");
    CU(cudaSetDevice(comm->cuda_dev), "cudaSetDevice");
    mkResult_t res = dev_setup_on(comm, n);
    cudaError_t e = cudaSetDevice(prev);
    if (res == mkSuccess && e != cudaSuccess)
        res = mki_error(comm, mkErrCuda, "cudaSetDevice(%d): %s", prev,
                        cudaGetErrorString(e));
    return res;
}

static void dev_free(struct mki_net *n)
{
    struct mki_net_dev *d = n->dev;
    if (!d) return;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(d->dev) != cudaSuccess)
        prev = -1;
    if (d->stream) (void)cudaStreamDestroy(d->stream);
    if (d->word) (void)cudaFreeHost(d->word);
    if (d->fifo_pinned && n->fifo) (void)cudaFreeHost(n->fifo);
    if (d->head) (void)cudaFree(d->head);
    if (d->fifo_pinned) n->fifo = NULL;
    if (prev >= 0) (void)cudaSetDevice(prev);
    (void)cudaGetLastError();
    free(d);
    n->dev = NULL;
}

/* ---- region 0 ---------------------------------------------------------- */

/* Plain host memory (no GPU): zero pages on demand. */
static mkResult_t map_host(struct mkComm *comm, size_t bytes, char **out)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return mki_error(comm, mkErrNoMemory, "inter-node path: cannot map a host region of "
                         "%zu bytes: %s", bytes, strerror(errno));
    *out = p;
    return mkSuccess;
}

static mkResult_t region_setup(struct mkComm *comm, struct mki_net *n, size_t host_bytes)
{
    const struct mki_devrt *d = comm->dev;
    if (d) {
        const struct mki_heap *h = &d->heap;
        n->region = h->seg[0].base;
        n->region_bytes = h->seg[0].bytes;
        n->kind = MKI_MEM_DEVICE;
        if (h->host_seg < 0)
            return mki_error(comm, mkErrInternal, "inter-node path: the heap has no host "
                             "segment");
        n->host_region = h->seg[h->host_seg].base;
        n->host_bytes = h->seg[h->host_seg].bytes;
        return mkSuccess;
    }
    n->region_bytes = mki_heap_default_bytes(comm->cfg.workspaceSize, comm->local_size);
    n->kind = MKI_MEM_HOST;
    MKI_CHECK(map_host(comm, n->region_bytes, &n->region));
    n->host_bytes = host_bytes ? host_bytes : MKI_CTL_BYTES;
    MKI_CHECK(map_host(comm, n->host_bytes, &n->host_region));
    n->host_mapped = 1;
    return mkSuccess;
}

static void region_free(struct mki_net *n)
{
    /* After mkCommAbort a kernel may still read them: leave them mapped. */
    if (n->aborted) return;
    if (n->region && n->kind == MKI_MEM_HOST) (void)munmap(n->region, n->region_bytes);
    if (n->host_region && n->host_mapped) (void)munmap(n->host_region, n->host_bytes);
    n->region = n->host_region = NULL;
}

/* ---- transport choice --------------------------------------------------- */

static mkResult_t find_peers(struct mkComm *comm, struct mki_net *n)
{
    n->peers = malloc(sizeof(int) * (size_t)comm->nranks);
    if (!n->peers) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int r = 0; r < comm->nranks; r++)
        if (r != comm->rank && mki_plan_path(comm, r) == MKI_PATH_NET)
            n->peers[n->npeers++] = r;
    return mkSuccess;
}

/* The same list on every rank (the plan checked that every rank has the
 * same MK_TRANSPORT), spelled as mki_transport_open wants it. */
static mkResult_t transport_spec(struct mkComm *comm, char *spec, size_t len)
{
    enum mki_transport order[MKI_TR_COUNT];
    int cnt;
    if (mki_transport_list(comm->cfg.transports, "MK_TRANSPORT", order,
                           &cnt) != mkSuccess)
        return mki_error(comm, mkErrInvalidArgument, "%s", mki_thread_error());
    size_t o = 0;
    spec[0] = '\0';
    for (int i = 0; i < cnt && o < len; i++)
        o += (size_t)snprintf(spec + o, len - o, "%s%s", i ? "," : "",
                              mki_transport_name(order[i]));
    return mkSuccess;
}

/* The plan's model assumed a transport per peer from the topology; say
 * so when the one that really started differs (its rates are then off). */
static void compare_with_plan(struct mkComm *comm, const struct mki_net *n)
{
    for (int i = 0; i < n->npeers; i++) {
        const char *want = mki_transport_name(mki_plan_transport(comm,
                                                                 n->peers[i]));
        if (strcmp(want, n->tops->name) == 0) continue;
        MKI_WARN(MKI_SUB_NET, "the plan assumed the %s transport to rank %d "
                 "(from the topology) but %s is the first of MK_TRANSPORT="
                 "\"%s\" that started on every rank; inter-node estimates "
                 "are off (run with MK_DEBUG=INFO MK_DEBUG_SUBSYS=NET to see "
                 "why %s was skipped)", want, n->peers[i], n->tops->name,
                 comm->cfg.transports, want);
        return;
    }
}

static mkResult_t open_transport(struct mkComm *comm, struct mki_net *n)
{
    char spec[64];
    const char *nic[4];
    int ports[4];
    MKI_CHECK(transport_spec(comm, spec, sizeof(spec)));
    int nnics = mki_topo_my_nics(comm, nic, ports, 4);
    struct mki_net_args a = {
        .boot = comm->boot, .boot_ctx = comm->boot_ctx,
        .rank = comm->rank, .nranks = comm->nranks,
        .peers = n->peers, .npeers = n->npeers,
        .timeout_ms = comm->cfg.timeoutMs, .cookie = comm->cookie,
        .device = nnics > 0 ? nic[0] : NULL, .port = nnics > 0 ? ports[0] : 0,
    };
    if (n->dev) {
        a.copy_device = net_copy_device;
        a.raise_device_signal = net_raise_device_signal;
        a.host_alloc = net_host_alloc;
        a.host_free = net_host_free;
        a.dev_ctx = n->dev;
    }
    MKI_INFO(MKI_SUB_NET, "inter-node path: trying MK_TRANSPORT=\"%s\" for %d "
             "ranks on other nodes (NIC %s)", spec, n->npeers,
             nnics > 0 ? nic[0] : "none from the topology");
    if (mki_transport_open(spec, &a, &n->tops, &n->tctx) != mkSuccess)
        return mki_error(comm, mkErrUnsupported, "inter-node path: %s; set "
                         "MK_TRANSPORT (or config->transports) to a "
                         "transport every node has, e.g. socket",
                         mki_thread_error());
    return mkSuccess;
}

static mkResult_t wire(struct mkComm *comm, struct mki_net *n)
{
    if (n->tops->reg_mem(n->tctx, n->region, n->region_bytes, n->kind,
                         &n->region_id) != mkSuccess)
        return mki_error(comm, mkErrTransport, "inter-node path: the %s "
                         "transport cannot register the %zu-byte %s region: "
                         "%s", n->tops->name, n->region_bytes,
                         n->kind == MKI_MEM_DEVICE ? "GPU" : "host",
                         mki_thread_error());
    int id = -1;
    if (n->tops->reg_mem(n->tctx, n->host_region, n->host_bytes, MKI_MEM_HOST,
                         &id) != mkSuccess || id != 1)
        return mki_error(comm, mkErrTransport, "inter-node path: the %s "
                         "transport cannot register the %zu-byte host segment "
                         "as region 1: %s", n->tops->name, n->host_bytes,
                         mki_thread_error());
    if (n->tops->connect(n->tctx) != mkSuccess)
        return mki_error(comm, mkErrTransport, "inter-node path: %s connect: "
                         "%s", n->tops->name, mki_thread_error());
    return mkSuccess;
}

/* ---- proxy and monitor ------------------------------------------------ */

/* The proxy inherits the affinity of the thread that creates it: bind
 * this thread near the GPU for the start, then restore it. */
static mkResult_t start_proxy(struct mkComm *comm, struct mki_net *n)
{
    cpu_set_t saved;
    int have = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    if (have && mki_topo_bind_thread(comm->topo) != mkSuccess)
        MKI_WARN(MKI_SUB_NET, "proxy thread left unpinned: %s",
                 mki_thread_error());
    struct mki_proxy_args pa = {
        .fifo = n->fifo, .nslots = n->nslots, .tops = n->tops,
        .tctx = n->tctx, .timeout_ms = comm->cfg.timeoutMs,
    };
    mkResult_t res = mki_proxy_start(&pa, &n->proxy);
    if (have) (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    if (res != mkSuccess)
        return mki_error(comm, res, "inter-node path: %s", mki_thread_error());
    return mkSuccess;
}

static void *monitor_main(void *arg)
{
    struct mkComm *comm = arg;
    struct mki_net *n = comm->net;
    char msg[MKI_ERRMSG_LEN];
    const struct timespec tick = {0, 2000000}; /* 2 ms */
    while (!__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE)) {
        nanosleep(&tick, NULL);
        mkResult_t res = mki_proxy_error(n->proxy, msg, sizeof(msg));
        if (res == mkSuccess) continue;
        /* A failed connection is most often a peer's death: the liveness
         * ring names the rank (and reports it) within a few ms. */
        const uint64_t t0 = mki_now_ns();
        while (comm->live && mki_live_dead(comm, NULL, 0) < 0 &&
               mki_now_ns() - t0 < 200000000ull)
            nanosleep(&tick, NULL);
        if (mki_live_dead(comm, NULL, 0) >= 0) break;
        /* The detail first: set_async_error copies the last error. */
        mki_error(comm, res, "rank %d: the inter-node proxy (%s) failed: %s; "
                  "destroy the communicator", comm->rank, n->tops->name, msg);
        mki_comm_set_async_error(comm, res);
        break;
    }
    return NULL;
}

static mkResult_t start_monitor(struct mkComm *comm, struct mki_net *n)
{
    int rc = pthread_create(&n->monitor, NULL, monitor_main, comm);
    if (rc != 0)
        return mki_error(comm, mkErrSystem, "inter-node path: cannot start "
                         "the monitor thread: %s", strerror(rc));
    n->monitor_up = 1;
    return mkSuccess;
}

/* Bounded: the monitor sleeps 2 ms between polls and never blocks. */
static void stop_monitor(struct mki_net *n)
{
    if (!n->monitor_up) return;
    __atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    int rc = pthread_timedjoin_np(n->monitor, NULL, &ts);
    if (rc != 0)
        MKI_WARN(MKI_SUB_NET, "the inter-node monitor thread did not stop "
                 "within 2 s: %s (left running)", strerror(rc));
    n->monitor_up = 0;
}

/* ---- create / destroy ------------------------------------------------- */

static void say_ready(struct mkComm *comm, const struct mki_net *n)
{
    const struct mki_topo *t = comm->topo;
    const char *cpus = t && t->my_gpu >= 0 ? t->host.gpu[t->my_gpu].cpuset : "";
    MKI_INFO(MKI_SUB_NET, "inter-node path ready: %s transport to %d ranks on "
             "%d other nodes, %zu-byte %s region, FIFO of %u slots, proxy %s%s",
             n->tops->name, n->npeers, comm->nnodes - 1, n->region_bytes,
             n->kind == MKI_MEM_DEVICE ? "GPU" : "host", n->nslots,
             cpus[0] ? "on CPUs " : "unpinned (CPUs near the GPU unknown)",
             cpus);
}

static mkResult_t build(struct mkComm *comm, struct mki_net *n, size_t host_bytes)
{
    n->nslots = MKI_NET_FIFO_SLOTS;
    MKI_CHECK(find_peers(comm, n));
    if (comm->dev) MKI_CHECK(dev_setup(comm, n));
    MKI_CHECK(open_transport(comm, n));
    MKI_CHECK(region_setup(comm, n, host_bytes));
    if (n->dev && n->kind == MKI_MEM_DEVICE) n->dev->base = n->region;
    MKI_CHECK(wire(comm, n));
    if (!n->fifo && mki_fifo_alloc(n->nslots, &n->fifo) != mkSuccess)
        return mki_error(comm, mkErrNoMemory, "%s", mki_thread_error());
    MKI_CHECK(start_proxy(comm, n));
    MKI_CHECK(start_monitor(comm, n));
    compare_with_plan(comm, n);
    say_ready(comm, n);
    return mkSuccess;
}

mkResult_t mki_net_create(struct mkComm *comm, size_t host_bytes)
{
    if (comm->nnodes <= 1) {
        MKI_INFO(MKI_SUB_NET, "one node: no inter-node path");
        return mkSuccess;
    }
    struct mki_net *n = calloc(1, sizeof(*n));
    if (!n) return mki_error(comm, mkErrNoMemory, "out of host memory");
    comm->net = n;
    mkResult_t res = build(comm, n, host_bytes);
    if (res != mkSuccess) {
        mki_net_destroy(comm); /* not ready: no barrier, peers see EOF */
        return res;
    }
    n->ready = 1;
    return mkSuccess;
}

void mki_net_abort(struct mkComm *comm)
{
    struct mki_net *n = comm->net;
    if (!n) return;
    n->aborted = 1;
    stop_monitor(n);
    if (n->proxy) (void)mki_proxy_stop(n->proxy, 0);
    n->proxy = NULL;
}

/* Drain this rank's commands, then meet every rank so that nobody closes
 * a connection a peer still sends on (the transports' requirement). */
static void drain_and_meet(struct mkComm *comm, struct mki_net *n)
{
    int healthy = n->ready && !n->aborted &&
                  mki_comm_async_error(comm) == mkSuccess;
    if (n->proxy) {
        struct mki_proxy_stats st;
        mki_proxy_get_stats(n->proxy, &st);
        MKI_INFO(MKI_SUB_NET, "this rank wrote %llu bytes to other nodes in %llu commands",
                 (unsigned long long)st.bytes, (unsigned long long)st.commands);
        mkResult_t r = mki_proxy_stop(n->proxy, healthy ? comm->cfg.timeoutMs : 0);
        if (r != mkSuccess && healthy)
            MKI_WARN(MKI_SUB_NET, "inter-node proxy at destroy: %s: %s",
                     mkGetErrorString(r), mki_thread_error());
        n->proxy = NULL;
    }
    if (healthy && comm->boot->barrier(comm->boot_ctx) != mkSuccess)
        MKI_WARN(MKI_SUB_NET, "barrier before closing the %s transport failed "
                 "(%s); closing anyway", n->tops->name, mki_thread_error());
}

void mki_net_destroy(struct mkComm *comm)
{
    struct mki_net *n = comm ? comm->net : NULL;
    if (!n) return;
    stop_monitor(n);
    drain_and_meet(comm, n);
    if (n->tctx) n->tops->close(n->tctx);
    region_free(n);
    dev_free(n);
    if (n->fifo) mki_fifo_free(n->fifo);
    free(n->peers);
    free(n);
    comm->net = NULL;
}
