/*
 * net.cu - mkbench for the inter-node path between two GPUs of one host:
 * a kernel pushes commands into the proxy FIFO, the proxy carries them
 * over the transport (socket: TCP over loopback) into the peer's device
 * workspace and raises the peer's signal, against plain TCP between the
 * same two processes.
 *
 *   mpirun -np 2 -x MK_NODE_SIZE=1 -x MK_TRANSPORT=socket \
 *       mkbench_net [--sizes 4K,16K,...] [--lat-sizes 8,4K,64K]
 *       [--iters N] [--warmup N] [--reps N] [--window N] [--bytes TOTAL]
 *       [--no-staged] [--device-region] [--tag NAME]
 *
 * Exactly two ranks on two (virtual) nodes, so that comm->net exists and
 * rank 1 is rank 0's only peer; one GPU each, or both on one GPU (under
 * MPS: two kernels that spin must run at the same time).
 *
 * (a) Latency, one kernel per rank, one thread each, N round trips after
 *     W warm-ups in one launch, median of R launches:
 *
 *       rank 0 kernel              proxies + TCP              rank 1 kernel
 *       push SIGNAL(ping = i) --> stage, send ... recv, H2D --> sees ping >= i
 *       sees pong >= i        <-- ... H2D, recv ... send     <-- push SIGNAL(pong = i)
 *
 *     one-way = (t_end - t_start) / N / 2 on rank 0's %globaltimer; also
 *     with WRITE_SIGNAL of 8 B .. 64 KB (the proxy copies the payload out
 *     of device memory, sends it, the peer's proxy copies it in, then
 *     raises the signal).  Baselines: an 8-byte (or same size) ping-pong
 *     over TCP between pinned host buffers, and the same with a
 *     cudaMemcpy to / from device memory on each side ("tcp+copy": what
 *     the proxy does besides TCP).  ours - tcp is what the FIFO and the
 *     proxy add per command.
 * (b) Bandwidth per message size: rank 0's kernel pushes `count`
 *     WRITE_SIGNAL commands back to back (ADD 1 to rank 1's data counter
 *     each: commands may land out of order over several connections),
 *     at most `window` not yet completed by its proxy (it waits on the
 *     FIFO's done counter; source and destination slots rotate over
 *     `window` buffers); rank 1's kernel waits for the count and answers
 *     with one SIGNAL; GB/s = count * size / (first push .. answer seen).
 *     Rank 1 then checks the received slots against the random source.
 *     Baselines: the same stream over one TCP connection (pinned host
 *     buffers, one ack at the end), and with the copies.
 *
 * Rank 0 prints the table and writes net.json (net-NAME.json) in
 * mkb_results_dir(): op "net_latency" (m = payload bytes, ours_ms = one
 * way) and "net_bw" (m = message bytes, n = messages, ours_ms = time per
 * message), baseline "tcp", the rest in extra fields.
 *
 * Memory: 4 KB of counters (only the proxy writes them: kernels read,
 * counters only grow, so nothing is reset between launches) and the data
 * areas (source and destination slots), at the same offsets on both
 * ranks.  By default in the heap's host segment (region 1 of the
 * transport, what the collectives send across nodes: the proxy moves it
 * with no CUDA call), borrowed from its start since this program runs no
 * collective; with --device-region two blocks of heap segment 0 (region
 * 0, device memory: the proxy goes through cudaMemcpy).
 * Every wait is the runtime's (kernels/rt/wait.cuh: abort word, the
 * proxy's error word, MK_TIMEOUT_MS without progress); a failure names
 * the rank, the wait, the counter's value, and ends the job
 * (mkCommAbort, exit 3).  The TCP baselines are in net_tcp.cu. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <string>
#include <vector>

#include "mkernel.h"
extern "C" {
#include "mki.h"   /* struct mkComm: boot, cfg, dev, net */
#include "mem/mem.h"   /* the heap: blocks for the counters and the data */
#include "net/net.h"   /* struct mki_net: fifo_dev, region, transport */
#include "param.h" /* MK_SOCKET_NCONN as the communicator read it, size parsing */
}
#include "rt/fifo.cuh"
#include "rt/wait.cuh"
#include "net.h"

namespace mkb_net {

int g_rank, g_n;
mkComm_t g_comm;
cudaStream_t g_st, g_copy;

/* ---- failure: say what, tell the peers, end ----------------------- */

[[noreturn]] void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mkbench net: rank %d: ", g_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    if (g_comm) (void)mkCommAbort(g_comm);
    exit(3);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- device side -------------------------------------------------- */

/* The counters: words of a heap block of 4 KB in the region the run
 * uses (its offset, the same on both ranks, is nb_env::wbase). */
enum {
    W_PING = 0, /* rank 1: rank 0's latency signals */
    W_PONG = 1, /* rank 0: rank 1's latency answers */
    W_DATA = 2, /* rank 1: bandwidth writes landed (ADD 1 each) */
    W_ACK = 3   /* rank 0: rank 1 saw them all */
};
#define WOFF(w) (e.wbase + 8ull * (uint64_t)(w))

/* What a kernel reports (device memory; one thread writes it). */
struct nb_res {
    int status;                    /* enum nb_status */
    int word;                      /* the counter (or -1: FIFO done) */
    long long iter;                /* where it stopped */
    unsigned long long expected, seen, proxy_err;
    unsigned long long t0, t1;     /* %globaltimer, ns */
};
enum nb_status { NB_OK = 0, NB_PROXY = 1, NB_PUSH_TIMEOUT = 2,
                 NB_WAIT_TIMEOUT = 3, NB_ABORT = 4 };

struct nb_env {
    mki_fifo_dev f;
    const char *ws;                /* my region (heap segment 0 or host segment) */
    const uint64_t *abort;         /* my abort word (kernels/rt/rt.h) */
    uint64_t wbase;                /* offset of the counters in ws */
    uint32_t peer, region;
    unsigned long long timeout_ns; /* without progress */
    nb_res *res;
};

__device__ void nb_fail(const nb_env &e, int st, int word, long long iter,
                        unsigned long long expected, unsigned long long seen)
{
    nb_res *r = e.res;
    r->status = st;
    r->word = word;
    r->iter = iter;
    r->expected = expected;
    r->seen = seen;
    r->proxy_err = mki::ld_acquire_sys(reinterpret_cast<const uint64_t *>(&e.f.hdr->error));
}

/* A fixed pause between polls (the FIFO's done counter: a read over PCIe). */
struct pause_ns {
    unsigned ns;
    __device__ __forceinline__ void operator()(uint64_t, uint64_t) { __nanosleep(ns); }
};

/* Spin until *p >= target: the runtime's wait (abort word, the proxy's
 * error word, MK_TIMEOUT_MS), restarted while *p moves, so that a long
 * stream that keeps moving never expires. */
__device__ int nb_wait(const nb_env &e, const unsigned long long *p,
                       unsigned long long target, int word, long long iter,
                       unsigned sleep_ns)
{
    const uint64_t *a = reinterpret_cast<const uint64_t *>(p);
    const uint64_t *err = reinterpret_cast<const uint64_t *>(&e.f.hdr->error);
    uint64_t last = mki::ld_acquire_sys(a), seen, why;
    for (;;) {
        const int r = mki::spin_geq(a, target, mki::stop_words{e.abort, nullptr, nullptr}, err, e.timeout_ns, &seen, &why,
                                    pause_ns{sleep_ns});
        if (r == mki::SPIN_OK) return NB_OK;
        if (r == mki::SPIN_TIMEOUT && seen != last) {
            last = seen;
            continue;
        }
        const int st = r == mki::SPIN_PROXY ? NB_PROXY
                     : r == mki::SPIN_ABORT ? NB_ABORT : NB_WAIT_TIMEOUT;
        nb_fail(e, st, word, iter, target, seen);
        return st;
    }
}

__device__ int nb_wait_word(const nb_env &e, int word, unsigned long long target,
                            long long iter)
{
    return nb_wait(e, (const unsigned long long *)(e.ws + WOFF(word)), target,
                   word, iter, 0);
}

__device__ int nb_push(const nb_env &e, uint32_t kind, uint32_t sig_op,
                       uint64_t loff, uint64_t roff, uint64_t bytes, int word,
                       uint64_t val, long long iter, unsigned long long *ticket)
{
    mki_fifo_cmd c = {kind, e.peer, sig_op, e.region, loff, roff, bytes,
                      WOFF(word), val};
    const int r = mki::fifo_push(e.f, c, mki::stop_words{e.abort, nullptr, nullptr}, e.timeout_ns, ticket);
    if (r == mki::MKI_FIFO_OK) return NB_OK;
    const int st = r == mki::MKI_FIFO_PROXY_FAILED ? NB_PROXY
                 : r == mki::MKI_FIFO_ABORTED ? NB_ABORT : NB_PUSH_TIMEOUT;
    nb_fail(e, st, word, iter, val, 0);
    return st;
}

/* (a) N round trips after `warm`.  The payload (WRITE_SIGNAL) was written
 * by an earlier kernel on this stream, so it is in device memory before
 * this launch starts; a kernel that writes what it sends must
 * __threadfence_system() before the push (the proxy reads with a copy
 * engine).  Values base + i: SET suffices, one command is in flight. */
__global__ void pingpong_kernel(nb_env e, int initiator, uint32_t kind,
                                uint64_t loff, uint64_t roff, uint64_t bytes,
                                unsigned long long base, int warm, int iters)
{
    if (threadIdx.x || blockIdx.x) return;
    int mine = initiator ? W_PONG : W_PING, theirs = initiator ? W_PING : W_PONG;
    unsigned long long t;
    e.res->status = NB_OK;
    for (int i = 1; i <= warm + iters; i++) {
        unsigned long long v = base + (unsigned long long)i;
        if (initiator && i == warm + 1) e.res->t0 = mki::globaltimer();
        if (!initiator && nb_wait_word(e, mine, v, i)) return;
        if (nb_push(e, kind, MKI_SIG_SET, loff, roff, bytes, theirs, v, i, &t))
            return;
        if (initiator && nb_wait_word(e, mine, v, i)) return;
    }
    e.res->t1 = mki::globaltimer();
}

/* (b) sender: count writes of `bytes`, slot i % window, at most window
 * not completed (FIFO done counter), then wait for the receiver's ack. */
__global__ void stream_send_kernel(nb_env e, uint64_t src, uint64_t dst,
                                   uint64_t bytes, long long count, int window,
                                   unsigned long long ack)
{
    if (threadIdx.x || blockIdx.x) return;
    unsigned long long first = 0, t;
    e.res->status = NB_OK;
    e.res->t0 = mki::globaltimer();
    for (long long i = 0; i < count; i++) {
        if (i >= window &&
            nb_wait(e, (const unsigned long long *)&e.f.hdr->done,
                    first + (unsigned long long)(i - window) + 1, -1, i, 128))
            return;
        uint64_t slot = (uint64_t)(i % window) * bytes;
        if (nb_push(e, MKI_CMD_WRITE_SIGNAL, MKI_SIG_ADD, src + slot, dst + slot,
                    bytes, W_DATA, 1, i, &t))
            return;
        if (i == 0) first = t;
    }
    if (nb_wait_word(e, W_ACK, ack, count)) return;
    e.res->t1 = mki::globaltimer();
}

/* (b) receiver: wait until the data counter reaches target, answer. */
__global__ void stream_recv_kernel(nb_env e, unsigned long long target,
                                   unsigned long long ack)
{
    if (threadIdx.x || blockIdx.x) return;
    unsigned long long t;
    e.res->status = NB_OK;
    e.res->t0 = mki::globaltimer();
    if (nb_wait_word(e, W_DATA, target, 0)) return;
    e.res->t1 = mki::globaltimer();
    (void)nb_push(e, MKI_CMD_SIGNAL, MKI_SIG_SET, 0, 0, 0, W_ACK, ack, 0, &t);
}

/* Random bytes from a hash of the word index and the run's seed. */
/* Poison by a kernel: the region may be mapped host memory. */
__global__ void poison_kernel(unsigned long long *p, size_t words)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = 0xa5a5a5a5a5a5a5a5ull;
}

__global__ void fill_kernel(unsigned long long *p, size_t words,
                            unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        p[i] = x;
    }
}

__global__ void compare_kernel(const unsigned long long *a,
                               const unsigned long long *b, size_t words,
                               unsigned long long *bad)
{
    unsigned long long n = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
         i += (size_t)gridDim.x * blockDim.x)
        n += a[i] != b[i];
    if (n) atomicAdd(bad, n);
}

/* ---- host side of the GPU runs -------------------------------------- */

struct bench {
    nb_env e;
    char *ws;                      /* the region's device view */
    mki_heap_blk words, data_blk;  /* --device-region: counters; source +
                                    * destination slots (else borrowed) */
    uint64_t src, dst;             /* areas in the region (offsets) */
    uint64_t max_bytes;
    int window, peer;
    unsigned long long ping, data, ack; /* counters' last targets */
    nb_res *res;
};

const char *status_text(int s)
{
    switch (s) {
    case NB_PROXY: return "this rank's proxy failed (FIFO error word set)";
    case NB_PUSH_TIMEOUT: return "the FIFO stayed full until the deadline";
    case NB_WAIT_TIMEOUT: return "no progress until the deadline (MK_TIMEOUT_MS)";
    case NB_ABORT: return "the communicator's abort word was raised";
    default: return "unknown status";
    }
}

const char *word_name(int w)
{
    static const char *n[] = {"ping", "pong", "data", "ack"};
    return w < 0 ? "FIFO done" : w < 4 ? n[w] : "?";
}

/* Wait for the launch and turn a kernel failure into a message. */
nb_res finish(bench &b, const char *what)
{
    nb_res r;
    MKB_CHECK(cudaGetLastError());
    cudaError_t err = cudaStreamSynchronize(g_st);
    if (err != cudaSuccess) die("%s: the kernel failed: %s", what, cudaGetErrorString(err));
    MKB_CHECK(cudaMemcpy(&r, b.res, sizeof r, cudaMemcpyDeviceToHost));
    if (r.status != NB_OK) {
        char why[MKI_ERRMSG_LEN] = "";
        if (r.status == NB_PROXY && g_comm->net->proxy)
            (void)mki_proxy_error(g_comm->net->proxy, why, sizeof why);
        die("%s: %s at iteration %lld waiting on the %s counter for %llu (it "
            "held %llu; FIFO error word %llu = %s)%s%s; the other rank then "
            "fails the same way or by its timeout", what, status_text(r.status),
            r.iter, word_name(r.word), r.expected, r.seen, r.proxy_err,
            r.proxy_err ? mkGetErrorString((mkResult_t)r.proxy_err) : "none",
            why[0] ? "; proxy: " : "", why);
    }
    return r;
}

void barrier(void)
{
    if (g_comm->boot->barrier(g_comm->boot_ctx) != mkSuccess)
        die("bootstrap barrier failed: %s", mki_thread_error());
}

/* One launch of (a); one-way latency in microseconds on rank 0. */
double pingpong_once(bench &b, uint32_t kind, uint64_t bytes, int warm, int iters)
{
    barrier();
    unsigned long long base = b.ping;
    b.ping += (unsigned long long)(warm + iters);
    pingpong_kernel<<<1, 1, 0, g_st>>>(b.e, g_rank == 0, kind, b.src, b.dst,
                                        bytes, base, warm, iters);
    nb_res r = finish(b, kind == MKI_CMD_SIGNAL ? "latency (SIGNAL)"
                                                : "latency (WRITE_SIGNAL)");
    return g_rank == 0 ? (double)(r.t1 - r.t0) / iters / 2.0 * 1e-3 : 0.0;
}

double pingpong(bench &b, uint32_t kind, uint64_t bytes, int warm, int iters, int reps)
{
    std::vector<double> v;
    for (int k = 0; k < reps; k++) v.push_back(pingpong_once(b, kind, bytes, warm, iters));
    return mkb_median(v.data(), reps);
}

/* One launch of (b); seconds on rank 0. */
double stream_once(bench &b, uint64_t bytes, long long count)
{
    barrier();
    unsigned long long target = b.data + (unsigned long long)count;
    unsigned long long ack = ++b.ack;
    b.data = target;
    if (g_rank == 0)
        stream_send_kernel<<<1, 1, 0, g_st>>>(b.e, b.src, b.dst, bytes, count,
                                               b.window, ack);
    else
        stream_recv_kernel<<<1, 1, 0, g_st>>>(b.e, target, ack);
    nb_res r = finish(b, "bandwidth");
    return g_rank == 0 ? (double)(r.t1 - r.t0) * 1e-9 : 0.0;
}

/* Rank 1: the last `window` (or fewer) slots must equal the source. */
unsigned long long check_slots(bench &b, uint64_t bytes, long long count)
{
    if (g_rank != 1) return 0;
    unsigned long long *bad;
    MKB_CHECK(cudaMalloc(&bad, 8));
    MKB_CHECK(cudaMemsetAsync(bad, 0, 8, g_st));
    uint64_t n = (uint64_t)std::min<long long>(count, b.window) * bytes;
    compare_kernel<<<256, 256, 0, g_st>>>((const unsigned long long *)(b.ws + b.src),
                                          (const unsigned long long *)(b.ws + b.dst),
                                          n / 8, bad);
    MKB_CHECK(cudaGetLastError());
    unsigned long long h = 0;
    MKB_CHECK(cudaMemcpyAsync(&h, bad, 8, cudaMemcpyDeviceToHost, g_st));
    MKB_CHECK(cudaStreamSynchronize(g_st));
    MKB_CHECK(cudaFree(bad));
    return h;
}

/* ---- the runs ------------------------------------------------------- */

struct opts {
    std::vector<uint64_t> sizes, lat_sizes;
    int iters = 1000, warm = 100, reps = 5, window = 8, staged = 1;
    int device_region = 0;         /* 1: the GPU workspace (region 0) */
    uint64_t total = 64ull << 20;
    const char *tag = NULL;
};

struct lat_row {
    const char *what;
    uint64_t bytes;
    double ours, tcp, staged;      /* one-way us; staged < 0: not run */
};

struct bw_row {
    uint64_t bytes;
    long long count;
    double ours, tcp, staged;      /* seconds for count messages */
    unsigned long long bad;        /* mismatching words on rank 1 */
};

double median_of(std::vector<double> v)
{
    return mkb_median(v.data(), (int)v.size());
}

lat_row run_latency(bench &b, tcp &t, const opts &o, uint32_t kind, uint64_t bytes)
{
    lat_row r = {kind == MKI_CMD_SIGNAL ? "signal" : "write_signal", bytes, 0, 0, -1};
    r.ours = pingpong(b, kind, bytes, o.warm, o.iters, o.reps);
    r.tcp = tcp_pingpong(t, bytes ? bytes : 8, o.warm, o.iters, o.reps, 0);
    if (o.staged && bytes) r.staged = tcp_pingpong(t, bytes, o.warm, o.iters, o.reps, 1);
    return r;
}

bw_row run_bw(bench &b, tcp &t, const opts &o, uint64_t bytes)
{
    long long count = (long long)(o.total / bytes);
    count = std::max(16LL, std::min(count, 4096LL));
    bw_row r = {bytes, count, 0, 0, -1, 0};
    if (g_rank == 1) { /* poison what the writes must overwrite */
        poison_kernel<<<256, 256, 0, g_st>>>((unsigned long long *)(b.ws + b.dst),
                                             (size_t)b.window * bytes / 8);
        MKB_CHECK(cudaGetLastError());
        MKB_CHECK(cudaStreamSynchronize(g_st));
    }
    std::vector<double> ours, plain, staged;
    (void)stream_once(b, bytes, count); /* warm-up */
    for (int k = 0; k < o.reps; k++) ours.push_back(stream_once(b, bytes, count));
    r.bad = check_slots(b, bytes, count);
    (void)tcp_stream_once(t, bytes, count, 0);
    for (int k = 0; k < o.reps; k++) plain.push_back(tcp_stream_once(t, bytes, count, 0));
    for (int k = 0; o.staged && k < o.reps; k++)
        staged.push_back(tcp_stream_once(t, bytes, count, 1));
    r.ours = median_of(ours);
    r.tcp = median_of(plain);
    r.staged = o.staged ? median_of(staged) : -1;
    return r;
}

/* Every rank learns rank 1's verdict, so both exit the same way. */
unsigned long long share_bad(unsigned long long mine)
{
    unsigned long long all[2] = {0, 0};
    all[g_rank] = mine;
    if (g_comm->boot->allgather(g_comm->boot_ctx, all, sizeof all[0]) != mkSuccess)
        die("allgather of the check failed: %s", mki_thread_error());
    return all[0] + all[1];
}

/* ---- setup ------------------------------------------------------------ */

void setup(bench &b, const opts &o, unsigned long long seed)
{
    struct mkComm *c = g_comm;
    if (g_n != 2 || !c->net || c->net->npeers != 1 || c->net->peers[0] != 1 - g_rank)
        die("needs exactly 2 ranks on 2 (virtual) nodes joined by a transport "
            "(%d ranks, %d nodes, inter-node path %s): run with MK_NODE_SIZE=1 "
            "MK_TRANSPORT=socket", g_n, c->nnodes, c->net ? "up" : "absent");
    if (!c->dev || c->net->kind != MKI_MEM_DEVICE || !c->net->fifo_dev.slots ||
        c->dev->heap.host_seg < 0)
        die("the inter-node path has no GPU heap, no host segment or no device FIFO");
    b.window = o.window;
    b.peer = 1 - g_rank;
    b.max_bytes = 0;
    for (uint64_t s : o.sizes) b.max_bytes = std::max(b.max_bytes, s);
    for (uint64_t s : o.lat_sizes) b.max_bytes = std::max(b.max_bytes, s);
    const int host = !o.device_region;
    const uint64_t area = (uint64_t)o.window * b.max_bytes;
    const mki_heap_seg &seg = c->dev->heap.seg[host ? c->dev->heap.host_seg : 0];
    if (host) {
        /* The host segment is sized to what the ops send across nodes (the
         * collectives' net block): this program runs no collective, so it
         * borrows the segment from its start, the same on both ranks. */
        b.words.off = 0;
        b.src = 4096;
        if (b.src + 2 * area > seg.bytes)
            die("window %d x %llu bytes (twice) need %llu bytes of the heap's host "
                "segment; it has %zu: lower --window or the largest size", o.window,
                (unsigned long long)b.max_bytes, (unsigned long long)(b.src + 2 * area),
                seg.bytes);
    } else {
        /* Segment 0 (region 0): two blocks, allocated alike on both ranks. */
        if (mki_heap_alloc(c, 0, 4096, 1, "mkbench net counters", &b.words) != mkSuccess ||
            mki_heap_alloc(c, 0, 2 * area, 0, "mkbench net data", &b.data_blk) != mkSuccess)
            die("window %d x %llu bytes (twice) do not fit the heap: %s; lower --window or "
                "the largest size, or raise MK_WORKSPACE_SIZE", o.window,
                (unsigned long long)b.max_bytes, mki_thread_error());
        if (b.words.seg != 0 || b.data_blk.seg != 0)
            die("the blocks landed in an added heap segment, which the transport does not "
                "know (region 0 is segment 0): raise MK_WORKSPACE_SIZE");
        b.src = b.data_blk.off;
    }
    b.ws = seg.dev;
    b.dst = b.src + area;
    MKB_CHECK(cudaMalloc(&b.res, sizeof(nb_res)));
    /* my abort word: the control block at the start of segment 0 */
    b.e = nb_env{c->net->fifo_dev, b.ws,
                 reinterpret_cast<const uint64_t *>(c->dev->heap.seg[0].base + MKI_CTL_ABORT),
                 b.words.off, (uint32_t)b.peer, (uint32_t)(host ? 1 : c->net->region_id),
                 (unsigned long long)c->cfg.timeoutMs * 1000000ull, b.res};
    b.ping = b.data = b.ack = 0;
    /* The same random bytes on both ranks: rank 1 checks what arrived
     * against its own copy of the source. */
    fill_kernel<<<1024, 256, 0, g_st>>>((unsigned long long *)(b.ws + b.src),
                                        (size_t)(b.dst - b.src) / 8, seed);
    MKB_CHECK(cudaGetLastError());
    MKB_CHECK(cudaStreamSynchronize(g_st));
}

/* "4K,64K,1M" -> bytes (multiples of 8, >= 8). */
int parse_sizes(const char *s, std::vector<uint64_t> &out)
{
    std::string str(s);
    out.clear();
    size_t pos = 0;
    while (pos <= str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        int64_t v;
        if (mki_parse_size(str.substr(pos, end - pos).c_str(), &v) || v < 8 || v % 8)
            return -1;
        out.push_back((uint64_t)v);
        pos = end + 1;
    }
    return out.empty() ? -1 : 0;
}

int usage(void)
{
    fprintf(stderr,
            "usage: mkbench net [--sizes 4K,16K,...] [--lat-sizes 8,4K,64K] [--iters N]\n"
            "                   [--warmup N] [--reps N] [--window N] [--bytes TOTAL]\n"
            "                   [--no-staged] [--device-region] [--tag NAME]\n"
            "  under mpirun -np 2 with MK_NODE_SIZE=1 MK_TRANSPORT=socket; sizes are\n"
            "  multiples of 8 bytes (K, M suffixes); --bytes: per bandwidth launch\n");
    return 2;
}

int parse(int argc, char **argv, opts &o)
{
    if (parse_sizes("4K,16K,64K,256K,1M,4M", o.sizes) ||
        parse_sizes("8,4K,64K", o.lat_sizes))
        return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "--no-staged")) { o.staged = 0; continue; }
        if (!strcmp(a, "--device-region")) { o.device_region = 1; continue; }
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--sizes")) { if (parse_sizes(v, o.sizes)) return -1; }
        else if (!strcmp(a, "--lat-sizes")) { if (parse_sizes(v, o.lat_sizes)) return -1; }
        else if (!strcmp(a, "--iters")) o.iters = atoi(v);
        else if (!strcmp(a, "--warmup")) o.warm = atoi(v);
        else if (!strcmp(a, "--reps")) o.reps = atoi(v);
        else if (!strcmp(a, "--window")) o.window = atoi(v);
        else if (!strcmp(a, "--bytes")) {
            if (mki_parse_size(v, &x) || x < 1) return -1;
            o.total = (uint64_t)x;
        } else if (!strcmp(a, "--tag")) o.tag = v;
        else return -1;
    }
    if (o.iters < 1 || o.warm < 0 || o.reps < 1 || o.window < 1 || o.window > 1024)
        return -1;
    return 0;
}

/* ---- output (rank 0) ---------------------------------------------- */

double gbps(uint64_t bytes, long long count, double s)
{
    return s > 0 ? (double)bytes * (double)count / s * 1e-9 : -1;
}

void print_tables(const std::vector<lat_row> &lat, const std::vector<bw_row> &bw,
                  const opts &o, int nconn, const char *tname)
{
    char dev[128], u[128];
    mkb_device_name(dev, sizeof dev, u, sizeof u);
    printf("mkbench net: %s transport (MK_SOCKET_NCONN=%d) between 2 ranks on 2 "
           "virtual nodes, %s\n", tname, nconn, dev);
    printf("latency, one way (us): median of %d launches x %d round trips\n", o.reps, o.iters);
    printf("%-13s %8s %9s %9s %9s %9s %8s\n", "what", "bytes", "ours", "tcp", "tcp+copy",
           "ours-tcp", "ours/tcp");
    for (const lat_row &r : lat) {
        printf("%-13s %8llu %9.2f %9.2f ", r.what, (unsigned long long)r.bytes, r.ours, r.tcp);
        if (r.staged >= 0) printf("%9.2f ", r.staged);
        else printf("%9s ", "-");
        printf("%9.2f %8.2f\n", r.ours - r.tcp, r.ours / r.tcp);
    }
    printf("bandwidth (GB/s): window %d, about %llu MiB per launch, median of %d\n",
           o.window, (unsigned long long)(o.total >> 20), o.reps);
    printf("%-9s %6s %9s %9s %9s %8s %10s %6s\n", "bytes", "msgs", "ours", "tcp",
           "tcp+copy", "ours/tcp", "msgs/s", "check");
    for (const bw_row &r : bw) {
        printf("%-9llu %6lld %9.3f %9.3f ", (unsigned long long)r.bytes, r.count,
               gbps(r.bytes, r.count, r.ours), gbps(r.bytes, r.count, r.tcp));
        if (r.staged >= 0) printf("%9.3f ", gbps(r.bytes, r.count, r.staged));
        else printf("%9s ", "-");
        printf("%8.2f %10.0f %6s\n", r.tcp / r.ours, r.count / r.ours, r.bad ? "FAIL" : "ok");
    }
}

/* A JSON number, or null when not measured (negative). */
const char *jnum(char *buf, size_t len, double v)
{
    if (v < 0) snprintf(buf, len, "null");
    else snprintf(buf, len, "%.4f", v);
    return buf;
}

void write_json(const std::vector<lat_row> &lat, const std::vector<bw_row> &bw,
                const opts &o, int nconn, const char *tname, int gpus)
{
    char dir[512], path[700], extra[640], n1[32], n2[32];
    mkb_results_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/net%s%s.json", dir, o.tag ? "-" : "", o.tag ? o.tag : "");
    mkb_json js;
    if (mkb_json_open(&js, path)) die("cannot write %s", path);
    mkb_record rec;
    memset(&rec, 0, sizeof rec);
    rec.dtype = "bytes";
    rec.baseline = "tcp";
    rec.world_size = 2;
    rec.nodes = g_comm->nnodes;
    rec.limit_ms = -1;
    snprintf(rec.sm_split, sizeof rec.sm_split, "1 thread per rank");
    rec.ctas = 1;
    rec.extra = extra;
    for (const lat_row &r : lat) {
        snprintf(extra, sizeof extra, "\"command\": \"%s\", \"transport\": \"%s\", "
                 "\"nconn\": %d, \"gpus\": %d, \"one_way_us\": %.3f, \"tcp_us\": %.3f, "
                 "\"tcp_copy_us\": %s, \"proxy_added_us\": %.3f, \"round_trips\": %d, "
                 "\"launches\": %d", r.what, tname, nconn, gpus, r.ours, r.tcp,
                 jnum(n1, sizeof n1, r.staged), r.ours - r.tcp, o.iters, o.reps);
        rec.op = "net_latency";
        rec.m = (long long)r.bytes;
        rec.n = o.iters;
        rec.k = 0;
        rec.ours_ms = r.ours * 1e-3;
        rec.baseline_ms = r.tcp * 1e-3;
        mkb_json_add(&js, &rec);
    }
    for (const bw_row &r : bw) {
        snprintf(extra, sizeof extra, "\"transport\": \"%s\", \"nconn\": %d, \"gpus\": %d, "
                 "\"window\": %d, \"gbps\": %.4f, \"tcp_gbps\": %.4f, "
                 "\"tcp_copy_gbps\": %s, \"tcp_copy_ms\": %s, \"check\": \"%s\"", tname,
                 nconn, gpus, o.window, gbps(r.bytes, r.count, r.ours),
                 gbps(r.bytes, r.count, r.tcp), jnum(n1, sizeof n1, gbps(r.bytes, r.count, r.staged)),
                 jnum(n2, sizeof n2, r.staged >= 0 ? r.staged / r.count * 1e3 : -1.0),
                 r.bad ? "fail" : "ok");
        rec.op = "net_bw";
        rec.m = (long long)r.bytes;
        rec.n = r.count;
        rec.k = 0;
        rec.ours_ms = r.ours / r.count * 1e3;
        rec.baseline_ms = r.tcp / r.count * 1e3;
        mkb_json_add(&js, &rec);
    }
    mkb_json_close(&js);
    printf("results: %s\n", path);
}

} // namespace

using namespace mkb_net;

extern "C" int mkb_net_main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, o)) return usage();
    MKB_MK(mkCommInit(&g_comm, NULL));
    MKB_MK(mkCommRank(g_comm, &g_rank));
    MKB_MK(mkCommSize(g_comm, &g_n));
    int dev = -1;
    MKB_MK(mkCommCuDevice(g_comm, &dev));
    if (dev < 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    MKB_CHECK(cudaSetDevice(dev));
    MKB_CHECK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    MKB_CHECK(cudaStreamCreateWithFlags(&g_copy, cudaStreamNonBlocking));
    unsigned long long seed = (unsigned long long)time(NULL) * 2654435761ull;
    if (g_comm->boot->bcast(g_comm->boot_ctx, &seed, sizeof seed, 0) != mkSuccess)
        die("bcast of the seed failed: %s", mki_thread_error());
    bench b{};
    setup(b, o, seed);
    int64_t nconn = 0;
    nconn = mki_params_int(&g_comm->params, MKI_P_SOCKET_NCONN);
    int devs[2] = {0, 0};
    devs[g_rank] = dev;
    if (g_comm->boot->allgather(g_comm->boot_ctx, devs, sizeof devs[0]) != mkSuccess)
        die("allgather of the devices failed: %s", mki_thread_error());
    int gpus = devs[0] == devs[1] ? 1 : 2; /* devices of one host (virtual nodes) */
    if (g_rank == 0)
        printf("mkbench net: seed %llu, GPUs %d and %d, timeout %d ms\n", seed, devs[0],
               devs[1], g_comm->cfg.timeoutMs);
    tcp t;
    memset(&t, 0, sizeof t);
    t.timeout_ms = g_comm->cfg.timeoutMs;
    tcp_connect(t, b.max_bytes);
    std::vector<lat_row> lat;
    lat.push_back(run_latency(b, t, o, MKI_CMD_SIGNAL, 0));
    for (uint64_t s : o.lat_sizes) lat.push_back(run_latency(b, t, o, MKI_CMD_WRITE_SIGNAL, s));
    std::vector<bw_row> bw;
    for (uint64_t s : o.sizes) bw.push_back(run_bw(b, t, o, s));
    unsigned long long bad = 0;
    for (bw_row &r : bw) bad += r.bad = share_bad(r.bad);
    mkResult_t ae;
    MKB_MK(mkCommGetAsyncError(g_comm, &ae));
    if (ae != mkSuccess) die("async error %s: %s", mkGetErrorString(ae), mkGetLastError(g_comm));
    if (g_rank == 0) {
        const char *tname = g_comm->net->tops->name;
        print_tables(lat, bw, o, (int)nconn, tname);
        write_json(lat, bw, o, (int)nconn, tname, gpus);
    }
    close(t.fd);
    MKB_CHECK(cudaFreeHost(t.hsend));
    MKB_CHECK(cudaFreeHost(t.hrecv));
    MKB_CHECK(cudaFree(t.dbuf));
    MKB_CHECK(cudaFree(b.res));
    if (o.device_region) {
        mki_heap_free(g_comm, &b.data_blk);
        mki_heap_free(g_comm, &b.words);
    }
    MKB_MK(mkCommDestroy(g_comm));
    if (bad) {
        fprintf(stderr, "mkbench net: rank %d: %llu words arrived wrong in the bandwidth "
                "runs (see the check column)\n", g_rank, bad);
        return 1;
    }
    return 0;
}

#ifdef MKB_NET_MAIN
int main(int argc, char **argv) { return mkb_net_main(argc, argv); }
#endif
