/*
 * hello.c - the smallest mkernel program: create a communicator for the
 * whole job, say what it looks like, release it.
 *
 *   cc hello.c -o hello $(pkg-config --cflags --libs mkernel)
 *   srun --mpi=pmix -n 4 ./hello      (or mpirun -np 4 ./hello)
 *
 * Started without a launcher it runs as a communicator of size 1.
 */
#include <stdio.h>

#include <mkernel.h>

/* On failure, the result name and mkernel's detail: which argument or
 * peer, and what to do. */
static int failed(const char *call, mkResult_t res, mkComm_t comm)
{
    fprintf(stderr, "hello: %s: %s: %s\n", call, mkGetErrorString(res),
            mkGetLastError(comm));
    return 1;
}

int main(void)
{
    mkComm_t comm;
    mkResult_t res = mkCommInit(&comm, NULL);
    if (res != mkSuccess) return failed("mkCommInit", res, NULL);

    int rank, size, local_rank, local_size, nodes, device;
    if ((res = mkCommRank(comm, &rank)) != mkSuccess ||
        (res = mkCommSize(comm, &size)) != mkSuccess ||
        (res = mkCommLocalRank(comm, &local_rank)) != mkSuccess ||
        (res = mkCommLocalSize(comm, &local_size)) != mkSuccess ||
        (res = mkCommNodeCount(comm, &nodes)) != mkSuccess ||
        (res = mkCommCuDevice(comm, &device)) != mkSuccess) {
        failed("query", res, comm);
        mkCommDestroy(comm);
        return 1;
    }
    printf("hello from rank %d of %d: local rank %d of %d, %d node(s), "
           "CUDA device %d\n", rank, size, local_rank, local_size, nodes,
           device);

    res = mkCommDestroy(comm);
    if (res != mkSuccess) return failed("mkCommDestroy", res, NULL);
    return 0;
}
