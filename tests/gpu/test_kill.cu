/*
 * test_kill.cu - the kill drill on GPUs: one rank SIGKILLs itself in the
 * middle of a stream of calls; every survivor's communicator turns
 * mkErrRemote naming it within 1.0 s (MK_TIMEOUT_MS = 60000: the liveness
 * ring, not a deadline), its stream drains, and it destroys and exits
 * cleanly.
 *
 *   test_kill OP NRANKS [VICTIM]    OP: allreduce | allreduce_small | ag_gemm |
 *                                       gemm_rs | gemm_ar | moe | ring_attn
 *
 * allreduce_small: 3000 elements, LL lines on one node (the survivors'
 * kernels poll the dead rank's lines, not counters).
 * moe: a mkMoEDispatch + mkMoECombine pair per call (across nodes: their
 *      sequence).
 * ring_attn: mkRingAttention, zigzag causal, 2048 rows of 8 heads x 128
 * per rank.
 *
 * The program starts its own ranks (fork after mkGetUniqueId): a launcher
 * such as mpirun would end the whole job when a rank dies by a signal.
 * Ranks take GPU rank % device count (several per GPU: run it under MPS);
 * MK_NODE_SIZE makes virtual nodes as usual.
 *
 * Survivors keep at most 4 calls queued and poll mkCommGetAsyncError
 * every 200 us; a call that returns an error counts as the report too.
 * After the report the output buffer must not change: a copy taken at the
 * report is compared with the buffer after the stream has drained.
 * Prints one line per survivor and "PASS"/"FAIL" with the slowest delay.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mkernel.h"

struct Shared {
    volatile uint64_t t_dead;
    volatile uint64_t delay_ns[64];
    volatile int ok[64];
};
static Shared *g_sh;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define FAILR(...)                                                                 \
    do {                                                                           \
        printf("rank %d: FAIL ", rank);                                            \
        printf(__VA_ARGS__);                                                       \
        printf(" (%s)\n", comm ? mkGetLastError(comm) : mkGetLastError(NULL));     \
        fflush(stdout);                                                            \
        return 1;                                                                  \
    } while (0)
#define CK(x)                                                                      \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) FAILR("%s: %s", #x, cudaGetErrorString(e_));        \
    } while (0)

__global__ void fill(__nv_bfloat16 *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 15;
        p[i] = __float2bfloat16((float)(int)(x % 17u) / 64.0f - 0.125f);
    }
}

enum Op { ALLREDUCE, AG_GEMM, GEMM_RS, GEMM_AR, MOE, RING_ATTN, ALLREDUCE_SMALL };
static Op g_op;

/* Shapes large enough that a call takes a fraction of a millisecond. */
static const int64_t M_RANK = 1024, N = 2048, K = 2048;

/* Calls take their input in turn from NA buffers of different values, so
 * that consecutive calls leave different outputs: a call that writes
 * after the report changes what the survivor snapshotted there. */
#define NA 5

struct Bufs {
    __nv_bfloat16 *as[NA], *a, *b, *c, *ga;
    size_t c_elems;
    /* moe: x is a (M_RANK tokens of K), out is c; recv in ga.
     * ring_attn: q is a, k is ga, v is b, o is c (M_RANK x K elements each) */
    int32_t *idx, *src, *rows;
    float *w, *rw;
    int64_t *off;
};

/* moe: top-4 of 8 experts per rank, every token's slots on distinct experts. */
static const int64_t MOE_TOPK = 4;
/* The output copied aside by the SMs, not a copy engine: a survivor whose
 * copy engines still hold copies into the dead rank (under MPS) gets
 * through it, and the stamps then say whether its stream drains. */
__global__ void snapshot(__nv_bfloat16 *dst, const __nv_bfloat16 *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

__global__ void route(int32_t *idx, float *w, int64_t n, int64_t experts, int rank)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        idx[i] = (int32_t)((i / MOE_TOPK * 5 + i % MOE_TOPK + rank) % experts);
        w[i] = 0.25f;
    }
}

static mkResult_t call(const Bufs &bfs, int nranks, mkComm_t comm, cudaStream_t st,
                       uint64_t i)
{
    Bufs bf = bfs;
    bf.a = bfs.as[i % NA];
    switch (g_op) {
    case ALLREDUCE:
    case ALLREDUCE_SMALL:
        return mkAllReduce(bf.a, bf.c, bf.c_elems, mkBfloat16, comm, st);
    case AG_GEMM:
        return mkAllGatherGemm(bf.a, bf.b, bf.c, bf.ga, M_RANK, NULL, N, K, 1, mkBfloat16, comm,
                               st);
    case GEMM_AR:
        return mkGemmAllReduce(bf.a, bf.b, bf.c, M_RANK * nranks, N, K, 1, mkBfloat16, comm,
                               st);
    case MOE: {
        const int64_t cap = M_RANK * nranks * MOE_TOPK, E = 8 * (int64_t)nranks;
        mkResult_t r = mkMoEDispatch(bf.a, bf.idx, bf.w, bf.ga, bf.rw, bf.src, bf.off, bf.rows,
                                     M_RANK, K, MOE_TOPK, E, cap, mkBfloat16, comm, st);
        if (r != mkSuccess) return r;
        return mkMoECombine(bf.ga, bf.off, bf.idx, bf.w, bf.rows, bf.c, M_RANK, K, MOE_TOPK, E,
                            cap, mkBfloat16, comm, st);
    }
    case RING_ATTN: /* 2048 rows of 8 heads x 128 = M_RANK x K elements */
        return mkRingAttention(bf.a, bf.ga, bf.b, bf.c, NULL, 1, 2048, 8, 8, 128, mkAttnBSHD,
                               mkAttnCausalZigzag, 0.088f, mkBfloat16, comm, st);
    default:
        return mkGemmReduceScatter(bf.a, bf.b, bf.c, NULL, M_RANK * nranks, N, K,
                                   1, mkBfloat16, comm, st);
    }
}

static int rank_main(int rank, int nranks, int victim, mkUniqueId id)
{
    mkComm_t comm = NULL;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    if (mkCommInitRank(&comm, nranks, id, rank, NULL) != mkSuccess) FAILR("mkCommInitRank");
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    Bufs bf = {};
    size_t a_elems, c_elems;
    switch (g_op) {
    case ALLREDUCE: a_elems = c_elems = (size_t)4 << 20; break;
    case ALLREDUCE_SMALL: a_elems = c_elems = 3000; break;
    case AG_GEMM: a_elems = (size_t)M_RANK * K; c_elems = (size_t)M_RANK * nranks * N; break;
    case GEMM_AR: a_elems = (size_t)M_RANK * nranks * K; c_elems = (size_t)M_RANK * nranks * N; break;
    case MOE: a_elems = (size_t)M_RANK * K; c_elems = (size_t)M_RANK * K; break;
    case RING_ATTN: a_elems = (size_t)M_RANK * K; c_elems = (size_t)M_RANK * K; break;
    default: a_elems = (size_t)M_RANK * nranks * K; c_elems = (size_t)M_RANK * N; break;
    }
    bf.c_elems = c_elems;
    for (int i = 0; i < NA; i++) CK(cudaMalloc(&bf.as[i], a_elems * 2));
    CK(cudaMalloc(&bf.b, (size_t)N * K * 2));
    CK(cudaMalloc(&bf.c, c_elems * 2));
    CK(cudaMalloc(&bf.ga, (size_t)M_RANK * nranks * K * 2 * (g_op == MOE ? MOE_TOPK : 1)));
    if (g_op == MOE) {
        const size_t slots = (size_t)M_RANK * MOE_TOPK, cap = slots * nranks;
        CK(cudaMalloc(&bf.idx, slots * 4));
        CK(cudaMalloc(&bf.w, slots * 4));
        CK(cudaMalloc(&bf.rows, slots * 4));
        CK(cudaMalloc(&bf.rw, cap * 4));
        CK(cudaMalloc(&bf.src, cap * 8));
        CK(cudaMalloc(&bf.off, (8 + 1) * 8));
        route<<<64, 256, 0, st>>>(bf.idx, bf.w, (int64_t)slots, 8 * (int64_t)nranks, rank);
    }
    for (int i = 0; i < NA; i++)
        fill<<<256, 256, 0, st>>>(bf.as[i], a_elems, 11u + 97u * (unsigned)i + rank);
    fill<<<256, 256, 0, st>>>(bf.b, (size_t)N * K, 7u);
    if (g_op == RING_ATTN) fill<<<256, 256, 0, st>>>(bf.ga, (size_t)M_RANK * K, 13u + rank);
    CK(cudaGetLastError());
    for (int i = 0; i < 3; i++)
        if (call(bf, nranks, comm, st, (uint64_t)i) != mkSuccess) FAILR("warm-up call %d", i);
    CK(cudaStreamSynchronize(st));
    mkResult_t ae = mkSuccess;
    if (mkCommGetAsyncError(comm, &ae) != mkSuccess || ae != mkSuccess) FAILR("warm-up broke");
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++) CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    const uint64_t t_start = now_ns();
    uint64_t calls = 0, t_seen = 0;
    /* The victim dies 300 ms in (mid-stream, calls queued); survivors go on
     * until the report, 10 s at most. */
    for (;;) {
        if (rank == victim && now_ns() - t_start > 300000000ull) {
            g_sh->t_dead = now_ns();
            __sync_synchronize();
            raise(SIGKILL);
        }
        cudaEvent_t e = ev[calls % 4];
        if (calls >= 4)
            while (cudaEventQuery(e) == cudaErrorNotReady) {
                if (mkCommGetAsyncError(comm, &ae) != mkSuccess) FAILR("mkCommGetAsyncError");
                if (ae != mkSuccess) break;
                if (now_ns() - t_start > 10000000000ull) FAILR("no report in 10 s");
                usleep(200);
            }
        if (ae != mkSuccess) break;
        mkResult_t r = call(bf, nranks, comm, st, calls);
        if (r != mkSuccess) {
            ae = r;
            break;
        }
        CK(cudaEventRecord(e, st));
        calls++;
        if (mkCommGetAsyncError(comm, &ae) != mkSuccess) FAILR("mkCommGetAsyncError");
        if (ae != mkSuccess) break;
    }
    t_seen = now_ns();
    while (!g_sh->t_dead) usleep(100);
    const uint64_t delay = t_seen - g_sh->t_dead;
    g_sh->delay_ns[rank] = delay;
    char want[32];
    snprintf(want, sizeof(want), "rank %d ", victim);
    const char *msg = mkGetLastError(comm);
    printf("rank %d: %s after %.1f ms (%llu calls): %s\n", rank, mkGetErrorString(ae),
           delay / 1e6, (unsigned long long)calls, msg);
    fflush(stdout);
    if (ae != mkErrRemote) FAILR("expected mkErrRemote");
    if (!strstr(msg, want)) FAILR("the message does not name rank %d", victim);
    if (delay >= 1000000000ull) FAILR("noticed after %.1f ms, not within 1 s", delay / 1e6);
    /* What the output holds now, copied on another stream. */
    cudaStream_t side;
    CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    __nv_bfloat16 *snap;
    CK(cudaMalloc(&snap, c_elems * 2));
    snapshot<<<64, 256, 0, side>>>(snap, bf.c, c_elems);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(side));
    /* Where a survivor that does not end spends its time (MKT_STAMPS=1). */
    const bool stamps = getenv("MKT_STAMPS") != NULL;
    if (stamps) {
        printf("rank %d: +%.1f ms: output copied; draining the stream\n", rank,
               (now_ns() - g_sh->t_dead) / 1e6);
        fflush(stdout);
    }
    /* The stream drains (kernels stop at their next wait or at entry). */
    const uint64_t t1 = now_ns();
    cudaError_t se = cudaStreamSynchronize(st);
    if (stamps) {
        printf("rank %d: +%.1f ms: drained (%s)\n", rank, (now_ns() - g_sh->t_dead) / 1e6,
               cudaGetErrorString(se));
        fflush(stdout);
    }
    if (se != cudaSuccess) FAILR("stream: %s", cudaGetErrorString(se));
    if (now_ns() - t1 > 2000000000ull) FAILR("the stream took %.1f s to drain", (now_ns() - t1) / 1e9);
    /* A later call fails at once, naming the rank. */
    if (call(bf, nranks, comm, st, calls) != mkErrRemote || !strstr(mkGetLastError(comm), want))
        FAILR("a later call did not return mkErrRemote naming rank %d", victim);
    int changed = 0;
    {
        __nv_bfloat16 *h0 = (__nv_bfloat16 *)malloc(c_elems * 2);
        __nv_bfloat16 *h1 = (__nv_bfloat16 *)malloc(c_elems * 2);
        CK(cudaMemcpy(h0, snap, c_elems * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h1, bf.c, c_elems * 2, cudaMemcpyDeviceToHost));
        changed = memcmp(h0, h1, c_elems * 2) != 0;
        free(h0);
        free(h1);
    }
    if (changed) FAILR("the output changed after the report: a call enqueued before it wrote "
                       "after it");
    const uint64_t t2 = now_ns();
    if (mkCommDestroy(comm) != mkSuccess) FAILR("mkCommDestroy");
    comm = NULL;
    if (now_ns() - t2 > 3000000000ull) FAILR("mkCommDestroy took %.1f s", (now_ns() - t2) / 1e9);
    g_sh->ok[rank] = 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_kill allreduce|allreduce_small|ag_gemm|gemm_rs|gemm_ar|moe|"
                "ring_attn NRANKS [VICTIM]\n");
        return 2;
    }
    g_op = !strcmp(argv[1], "allreduce") ? ALLREDUCE
         : !strcmp(argv[1], "allreduce_small") ? ALLREDUCE_SMALL
         : !strcmp(argv[1], "ag_gemm")   ? AG_GEMM
         : !strcmp(argv[1], "gemm_ar")   ? GEMM_AR
         : !strcmp(argv[1], "moe")       ? MOE
         : !strcmp(argv[1], "ring_attn") ? RING_ATTN
                                         : GEMM_RS;
    if (g_op == GEMM_RS && strcmp(argv[1], "gemm_rs")) {
        fprintf(stderr, "test_kill: unknown op %s\n", argv[1]);
        return 2;
    }
    const int n = atoi(argv[2]);
    const int victim = argc > 3 ? atoi(argv[3]) : n - 1;
    if (n < 2 || n > 64 || victim < 0 || victim >= n) {
        fprintf(stderr, "test_kill: 2 <= NRANKS <= 64, 0 <= VICTIM < NRANKS\n");
        return 2;
    }
    /* 60 s: a report must come from the liveness ring, not a deadline
     * (MKT_TIMEOUT_MS overrides it for experiments). */
    setenv("MK_TIMEOUT_MS", getenv("MKT_TIMEOUT_MS") ? getenv("MKT_TIMEOUT_MS") : "60000", 1);
    signal(SIGPIPE, SIG_IGN);
    g_sh = (Shared *)mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) return 1;
    mkUniqueId id;
    if (mkGetUniqueId(&id) != mkSuccess) {
        fprintf(stderr, "mkGetUniqueId: %s\n", mkGetLastError(NULL));
        return 1;
    }
    pid_t pid[64];
    for (int r = 0; r < n; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(90);
            _exit(rank_main(r, n, victim, id));
        }
    }
    if (getenv("MKT_STAMPS")) { /* to read the MPS server's log by */
        for (int r = 0; r < n; r++) printf("rank %d is pid %d\n", r, (int)pid[r]);
        fflush(stdout);
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int stt = 0;
        if (pid[r] < 0 || waitpid(pid[r], &stt, 0) < 0) {
            bad++;
            continue;
        }
        const int ok = r == victim ? WIFSIGNALED(stt) && WTERMSIG(stt) == SIGKILL
                                   : WIFEXITED(stt) && WEXITSTATUS(stt) == 0 && g_sh->ok[r];
        if (!ok) {
            printf("rank %d ended badly (status 0x%x)\n", r, stt);
            bad++;
        }
    }
    uint64_t worst = 0;
    for (int r = 0; r < n; r++)
        if (r != victim && g_sh->delay_ns[r] > worst) worst = g_sh->delay_ns[r];
    printf("%s kill drill %s, %d ranks, rank %d killed: slowest survivor noticed after %.1f ms\n",
           bad ? "FAIL" : "PASS", argv[1], n, victim, worst / 1e6);
    return bad ? 1 : 0;
}
