/*
 * ag_gemm.c - the all-gather + GEMM of a sequence-parallel layer in one
 * call: every rank holds m_local rows of the activations A and the whole
 * weight B; mkAllGatherGemm gives every rank C = [A_0; A_1; ...] x B.
 *
 *   cc ag_gemm.c -o ag_gemm $(pkg-config --cflags --libs mkernel) -lcudart
 *   mpirun -np 2 ./ag_gemm          (or srun --mpi=pmix -n 2 ./ag_gemm)
 *
 * Each rank fills its rows with small integers (exact in bf16 and in the
 * fp32 sums), then checks a few entries of C against the host.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <mkernel.h>

enum { M_LOCAL = 512, N = 1024, K = 768 };

/* bf16 of a float, rounded to nearest even as the GPU rounds C. */
static uint16_t bf16(float f)
{
    union { float f; uint32_t u; } v = {f};
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t h)
{
    union { float f; uint32_t u; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

/* Entries of A of rank r and of B: integers in [-2, 2]. */
static float a_val(int r, long i, long j) { return (float)((r + 3 * i + j) % 5 - 2); }
static float b_val(long i, long j) { return (float)((2 * i + j) % 5 - 2); }

static int failed(const char *what, const char *detail)
{
    fprintf(stderr, "ag_gemm: %s: %s\n", what, detail);
    return 1;
}

int main(void)
{
    mkComm_t comm;
    mkResult_t res = mkCommInit(&comm, NULL);
    if (res != mkSuccess) return failed("mkCommInit", mkGetLastError(NULL));
    int rank, size, dev;
    mkCommRank(comm, &rank);
    mkCommSize(comm, &size);
    mkCommCuDevice(comm, &dev);
    if (dev < 0) return failed("mkCommCuDevice", "this process has no GPU");
    cudaSetDevice(dev);
    const long m = (long)M_LOCAL * size;

    uint16_t *ha = malloc(sizeof(uint16_t) * M_LOCAL * K);
    uint16_t *hb = malloc(sizeof(uint16_t) * K * N);
    uint16_t *hc = malloc(sizeof(uint16_t) * m * N);
    if (!ha || !hb || !hc) return failed("malloc", "out of memory");
    for (long i = 0; i < M_LOCAL; i++)
        for (long j = 0; j < K; j++) ha[i * K + j] = bf16(a_val(rank, i, j));
    for (long i = 0; i < K; i++)
        for (long j = 0; j < N; j++) hb[i * N + j] = bf16(b_val(i, j));

    void *a, *b, *c;
    cudaStream_t stream;
    if (cudaMalloc(&a, sizeof(uint16_t) * M_LOCAL * K) != cudaSuccess ||
        cudaMalloc(&b, sizeof(uint16_t) * K * N) != cudaSuccess ||
        cudaMalloc(&c, sizeof(uint16_t) * m * N) != cudaSuccess ||
        cudaStreamCreate(&stream) != cudaSuccess)
        return failed("cudaMalloc", "no device memory");
    cudaMemcpy(a, ha, sizeof(uint16_t) * M_LOCAL * K, cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb, sizeof(uint16_t) * K * N, cudaMemcpyHostToDevice);

    /* B is K x N row-major (transB = 0); every rank holds M_LOCAL rows. */
    res = mkAllGatherGemm(a, b, c, NULL, M_LOCAL, NULL, N, K, 0, mkBfloat16,
                          comm, stream);
    if (res != mkSuccess) return failed("mkAllGatherGemm", mkGetLastError(comm));
    if (cudaStreamSynchronize(stream) != cudaSuccess)
        return failed("cudaStreamSynchronize", "the call failed on the device");
    mkResult_t async;
    mkCommGetAsyncError(comm, &async);
    if (async != mkSuccess) return failed("mkAllGatherGemm", mkGetLastError(comm));
    cudaMemcpy(hc, c, sizeof(uint16_t) * m * N, cudaMemcpyDeviceToHost);

    /* Row i of C comes from rank i / M_LOCAL's row i % M_LOCAL. */
    int bad = 0;
    for (long i = 0; i < m; i += 97)
        for (long j = 0; j < N; j += 89) {
            float want = 0;
            for (long t = 0; t < K; t++)
                want += a_val((int)(i / M_LOCAL), i % M_LOCAL, t) * b_val(t, j);
            bad += from_bf16(hc[i * N + j]) != from_bf16(bf16(want));
        }
    printf("rank %d of %d: C is %ld x %d, %s\n", rank, size, m, N,
           bad ? "WRONG" : "checked");
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    free(ha);
    free(hb);
    free(hc);
    mkCommDestroy(comm);
    return bad != 0;
}
