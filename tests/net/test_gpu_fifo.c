/*
 * test_gpu_fifo - the device side of the FIFO (kernels/common/fifo.cuh)
 * against the host proxy: a kernel pushes n commands from many threads
 * into a ring in mapped pinned memory; the proxy forwards them to a null
 * transport that checks each arrives exactly once and intact; the kernel
 * waits for "done".  Then a proxy that fails: the kernel must give up
 * (status PROXY_FAILED) instead of spinning.  Prints commands per second.
 * Skips without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>

#include "mki.h"
#include "net/proxy.h"
#include "../unit/check.h"

int mki_fifo_probe_launch(const struct mki_fifo_dev *f, unsigned int n,
                          unsigned int peer, unsigned long long timeout_ns,
                          int *status, unsigned int blocks,
                          unsigned int threads, cudaStream_t s);

struct null_ctx {
    uint64_t n, got, pending, bad, fail_after;
    unsigned char *seen;
};

static mkResult_t nl_write(void *ctx, int peer, uint32_t region, uint64_t loff,
                           uint64_t roff, uint64_t bytes,
                           const struct mki_net_signal *sig, int *posted)
{
    struct null_ctx *c = ctx;
    uint64_t j = loff / 64;
    if (peer != 1 || region != 0 || bytes != 64 || roff != loff || loff % 64 ||
        j >= c->n || c->seen[j]++ || !sig || sig->op != MKI_SIG_ADD ||
        sig->value != 1)
        c->bad++;
    c->got++;
    c->pending++;
    *posted = 1;
    return mkSuccess;
}

static mkResult_t nl_progress(void *ctx, uint64_t *completed)
{
    struct null_ctx *c = ctx;
    if (c->bad)
        return mki_error(NULL, mkErrInternal, "%llu bad commands",
                         (unsigned long long)c->bad);
    if (c->fail_after && c->got >= c->fail_after)
        return mki_error(NULL, mkErrTransport, "null transport: failing on "
                         "purpose after %llu commands",
                         (unsigned long long)c->got);
    *completed += c->pending;
    c->pending = 0;
    return mkSuccess;
}

static const struct mki_transport_ops null_ops = {
    .name = "null", .post_write = nl_write, .progress = nl_progress};

#define CUDA_OK(call)                                                        \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            fprintf(stderr, "FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, \
                    cudaGetErrorString(e_));                                 \
            return -1;                                                       \
        }                                                                    \
    } while (0)

/* One run; returns commands/s (or -1), *status gets the kernel's status. */
static double run(unsigned nslots, unsigned n, unsigned blocks,
                  unsigned threads, uint64_t fail_after, int *status)
{
    struct mki_fifo_hdr *ring, *dring;
    unsigned long long *head;
    int *dstatus;
    struct null_ctx nc = {n, 0, 0, 0, fail_after, calloc(n, 1)};
    CUDA_OK(cudaHostAlloc((void **)&ring, mki_fifo_bytes(nslots),
                          cudaHostAllocMapped));
    memset(ring, 0, mki_fifo_bytes(nslots));
    CUDA_OK(cudaHostGetDevicePointer((void **)&dring, ring, 0));
    CUDA_OK(cudaMalloc((void **)&head, 8));
    CUDA_OK(cudaMalloc((void **)&dstatus, sizeof(int)));
    CUDA_OK(cudaMemset(head, 0, 8));
    CUDA_OK(cudaMemset(dstatus, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    struct mki_fifo_dev dev = {mki_fifo_slots(dring), dring, head, nslots};
    struct mki_proxy_args pa = {ring, nslots, &null_ops, &nc, NULL, 0, 10000,
                                1 << 20};
    struct mki_proxy *px;
    if (mki_proxy_start(&pa, &px) != mkSuccess) return -1;
    uint64_t t0 = mki_now_ns();
    CUDA_OK((cudaError_t)mki_fifo_probe_launch(&dev, n, 1, 10000000000ull,
                                               dstatus, blocks, threads, 0));
    CUDA_OK(cudaDeviceSynchronize());
    double s = (double)(mki_now_ns() - t0) / 1e9;
    CUDA_OK(cudaMemcpy(status, dstatus, sizeof(int), cudaMemcpyDeviceToHost));
    mkResult_t pr = mki_proxy_stop(px, 2000);
    int ok = fail_after ? pr == mkErrTransport
                        : pr == mkSuccess && nc.got == n && nc.bad == 0 &&
                              ring->done == n && *status == 0;
    if (!ok)
        fprintf(stderr, "run(%u slots, %u cmds, %u blocks): status %d, proxy "
                "%s, got %llu bad %llu done %llu\n", nslots, n, blocks, *status,
                mkGetErrorString(pr), (unsigned long long)nc.got,
                (unsigned long long)nc.bad, (unsigned long long)ring->done);
    cudaFreeHost(ring);
    cudaFree(head);
    cudaFree(dstatus);
    free(nc.seen);
    return ok ? n / s : -1;
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        SKIP("no CUDA device here; this test runs on the GPU machine");
    alarm(120);
    int st;
    CHECK(run(64, 1000, 1, 128, 0, &st) > 0); /* warm-up, small ring */
    printf("| ring slots | CTAs x threads (producers) | commands/s (GPU -> "
           "proxy) |\n|---|---|---|\n");
    unsigned cfg[][2] = {{1, 1}, {1, 128}, {8, 128}, {132, 1}, {132, 32},
                         {132, 128}};
    unsigned slots[] = {256, 4096};
    for (int si = 0; si < 2; si++)
        for (int b = 0; b < 6; b++) {
            unsigned n = cfg[b][0] * cfg[b][1] == 1 ? 1u << 17 : 1u << 20;
            double r = run(slots[si], n, cfg[b][0], cfg[b][1], 0, &st);
            CHECK(r > 0);
            printf("| %u | %u x %u | %.2f M |\n", slots[si], cfg[b][0],
                   cfg[b][1], r / 1e6);
        }
    /* The proxy fails after 5000 commands: producers must give up. */
    uint64_t t0 = mki_now_ns();
    CHECK(run(256, 1u << 20, 8, 128, 5000, &st) > 0);
    CHECK(st == 1); /* MKI_FIFO_PROXY_FAILED */
    CHECK(mki_now_ns() - t0 < 5000000000ull);
    TEST_DONE();
}
