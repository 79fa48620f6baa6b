/*
 * mkinfo - what this mkernel is: version, build configuration, the MK_*
 * parameters with their current values, and this process's view of the
 * job (rank, node, device) when run under a launcher.
 *
 *   mkinfo            everything
 *   mkinfo --params   the parameter table only
 *   mkinfo --comm     create a communicator and print what it sees
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "mki.h"

static void print_build(void)
{
    printf("mkernel %d.%d.%d (MK_VERSION_CODE %d)\n", MK_VERSION_MAJOR,
           MK_VERSION_MINOR, MK_VERSION_PATCH, MK_VERSION_CODE);
    printf("build configuration:\n");
    printf("  %-22s %s (nvcc %s), kernels for sm_90a\n", "CUDA", MK_CUDA_HOME,
           MK_NVCC_VERSION);
    printf("  %-22s %s\n", "PMIx launcher support", HAVE_PMIX ? "yes" : "no");
    printf("  %-22s %s\n", "hwloc topology", HAVE_HWLOC ? "yes" : "no");
    printf("  %-22s %s\n", "ibverbs transport", HAVE_VERBS ? "yes" : "no");
    printf("  %-22s %s\n", "EFA transport", HAVE_EFA ? "yes" : "no");
}

static void print_params(void)
{
    static const char *types[] = {"int", "size", "string"};
    printf("parameters (environment variables):\n");
    for (int i = 0; i < MKI_P_COUNT; i++) {
        const struct mki_param_desc *d = mki_param_desc((enum mki_param_id)i);
        int set = mki_param_is_set((enum mki_param_id)i);
        printf("  %-20s %-6s default \"%s\"%s%s%s\n      %s\n", d->name,
               types[d->type], d->def, set ? ", set to \"" : "",
               set ? mki_param_str((enum mki_param_id)i) : "", set ? "\"" : "",
               d->doc);
    }
}

static int print_comm(void)
{
    mkComm_t comm;
    mkResult_t r = mkCommInit(&comm, NULL);
    if (r != mkSuccess) {
        fprintf(stderr, "mkinfo: mkCommInit: %s: %s\n", mkGetErrorString(r),
                mkGetLastError(NULL));
        return 1;
    }
    int rank, size, lrank, lsize, nodes, dev;
    mkCommRank(comm, &rank);
    mkCommSize(comm, &size);
    mkCommLocalRank(comm, &lrank);
    mkCommLocalSize(comm, &lsize);
    mkCommNodeCount(comm, &nodes);
    mkCommCuDevice(comm, &dev);
    printf("rank %d of %d: %d node(s), local rank %d of %d, CUDA device "
           "%d%s\n", rank, size, nodes, lrank, lsize, dev,
           dev < 0 ? " (no GPU)" : "");
    mkCommDestroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    int only_params = 0, comm = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--params")) only_params = 1;
        else if (!strcmp(argv[i], "--comm")) comm = 1;
        else {
            fprintf(stderr, "usage: mkinfo [--params] [--comm]\n");
            return 2;
        }
    }
    if (comm) return print_comm();
    if (!only_params) {
        print_build();
        printf("\n");
    }
    print_params();
    return 0;
}
