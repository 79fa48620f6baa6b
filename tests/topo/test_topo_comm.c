/*
 * test_topo_comm - a communicator's topology and plan, with GPU facts
 * injected by MK_TOPO_FAKE_GPUS (this host has no GPU).
 *
 * tests/topo/mpirun.sh runs it under mpirun -np 4 (PMIx) in these modes:
 *   shared       4 ranks, 2 fake NV18 GPUs: ranks 0,2 share GPU 0 and 1,3
 *                GPU 1 (MPS-style): same-gpu and nvlink paths, SM budget
 *                halved;
 *   vnodes       the same with MK_NODE_SIZE=2: two virtual nodes, the
 *                other node's ranks over the socket transport;
 *   notransport  MK_NODE_SIZE=2 MK_TRANSPORT=ibverbs: no RDMA here, so
 *                mkCommInit fails with mkErrTransport, saying what to do;
 *   badsplit     MK_SM_SPLIT malformed: mkCommInit fails, naming it;
 *   mismatch     rank 3 alone sets MK_SM_SPLIT: every rank refuses (plans
 *                must agree);
 *   overbudget   MK_SM_BUDGET=100 with two ranks per 132-SM GPU: refused
 *                on every rank.
 * and alone (no launcher) in mode "self": mkCommGetInfo's contract.
 * Each rank prints "rank R: N passed, M failed"; alarm() ends a hang.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mki.h"
#include "plan/plan.h"
#include "topology/topo.h"
#include "../unit/check.h"

static int me = -1;

#define RCHECK(call, expect)                                                 \
    do {                                                                     \
        mkResult_t r_ = (call);                                              \
        if (r_ == (expect)) {                                                \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s: %s (%s)\n", me,        \
                    __FILE__, __LINE__, #call, mkGetErrorString(r_),         \
                    mkGetLastError(NULL));                                   \
        }                                                                    \
    } while (0)

static char *info(mkComm_t comm, const char *op)
{
    size_t size = 0;
    RCHECK(mkCommGetInfo(comm, op, 8192, 8192, 8192, mkBfloat16, NULL, &size),
           mkSuccess);
    char *buf = calloc(1, size + 1);
    RCHECK(mkCommGetInfo(comm, op, 8192, 8192, 8192, mkBfloat16, buf, &size),
           mkSuccess);
    CHECK(buf && strlen(buf) + 1 == size);
    return buf;
}

static void shared(void)
{
    mkComm_t comm;
    RCHECK(mkCommInit(&comm, NULL), mkSuccess);
    if (check_failed) return;
    me = comm->rank;
    const struct mki_topo *t = comm->topo;
    CHECK(comm->nranks == 4 && comm->nnodes == 1 && comm->local_size == 4);
    CHECK(t && t->my_gpu == comm->local_rank % 2 && t->gpu_sharers == 2);
    for (int p = 0; p < 4; p++) {
        enum mki_path want = p == me ? MKI_PATH_SELF
                           : (p % 2 == me % 2) ? MKI_PATH_SAME_GPU
                                               : MKI_PATH_NVLINK;
        CHECK(mki_plan_path(comm, p) == want);
        if (want == MKI_PATH_NVLINK) CHECK(t->path_nvlinks[p] == 18);
        CHECK(comm->hosts[p].node_key == comm->hosts[me].node_key);
    }
    /* Two ranks per GPU: each may use half of its SMs. */
    const struct mki_plan_ctx *c = mki_plan_context(comm);
    CHECK(c && c->sm_budget == 66 && c->sm_count == 132);
    CHECK(c->intra_path == MKI_PATH_NVLINK);
    struct mki_op_plan p;
    RCHECK(mki_plan_op(comm, MKI_OP_GEMM_RS, 8192, 8192, 8192, 2, &p), mkSuccess);
    CHECK(p.ctas <= 66 && p.split.compute >= 1 && p.split.inter_send == 0);
    struct mki_op_plan again;
    RCHECK(mki_plan_op(comm, MKI_OP_GEMM_RS, 8192, 8192, 8192, 2, &again),
           mkSuccess);
    CHECK(!memcmp(&p, &again, sizeof(p))); /* from the cache */
    char *text = info(comm, "gemm_rs");
    CHECK_CONTAINS(text, "same-gpu");
    CHECK_CONTAINS(text, "nvlink (NV18)");
    CHECK_CONTAINS(text, "plan of gemm_rs");
    free(text);
    RCHECK(mkCommDestroy(comm), mkSuccess);
}

static void vnodes(void)
{
    mkComm_t comm;
    RCHECK(mkCommInit(&comm, NULL), mkSuccess);
    if (check_failed) return;
    me = comm->rank;
    const struct mki_topo *t = comm->topo;
    CHECK(comm->nnodes == 2 && comm->node == me / 2 && comm->local_size == 2);
    CHECK(comm->local_rank == me % 2 && t->my_gpu == me % 2);
    for (int p = 0; p < 4; p++) {
        CHECK(t->node_of[p] == p / 2 && t->local_rank_of[p] == p % 2);
        if (p == me) continue;
        if (p / 2 == me / 2) {
            CHECK(mki_plan_path(comm, p) == MKI_PATH_NVLINK);
        } else {
            CHECK(mki_plan_path(comm, p) == MKI_PATH_NET);
            CHECK(mki_plan_transport(comm, p) == MKI_TR_SOCKET);
        }
    }
    const char *nics[4];
    int ports[4];
    CHECK(mki_topo_my_nics(comm, nics, ports, 4) == 0); /* no RDMA here */
    /* Virtual nodes still share the physical GPUs. */
    CHECK(t->gpu_sharers == 2 && mki_plan_context(comm)->sm_budget == 66);
    struct mki_op_plan p;
    RCHECK(mki_plan_op(comm, MKI_OP_AG_GEMM, 8192, 8192, 8192, 2, &p), mkSuccess);
    CHECK(p.inter_bytes > 0 && p.split.inter_send >= 1);
    char *text = info(comm, NULL);
    CHECK_CONTAINS(text, "net (socket)");
    char want[32];
    snprintf(want, sizeof(want), "node %d of 2", me / 2);
    CHECK_CONTAINS(text, want);
    free(text);
    RCHECK(mkCommDestroy(comm), mkSuccess);
}

static void fails(mkResult_t want, const char *msg)
{
    mkComm_t comm = NULL;
    RCHECK(mkCommInit(&comm, NULL), want);
    CHECK(comm == NULL);
    CHECK_CONTAINS(mkGetLastError(NULL), msg);
}

static void self(void)
{
    mkComm_t comm;
    me = 0;
    RCHECK(mkCommInit(&comm, NULL), mkSuccess);
    if (check_failed) return;
    char *text = info(comm, "ag_gemm");
    CHECK_CONTAINS(text, "communicator: rank 0 of 1");
    CHECK_CONTAINS(text, "nothing to communicate");
    free(text);
    char small[8];
    size_t size = sizeof(small);
    memset(small, 'x', sizeof(small));
    RCHECK(mkCommGetInfo(comm, NULL, 0, 0, 0, mkBfloat16, small, &size),
           mkErrInvalidArgument);
    CHECK(size == sizeof(small) && small[0] == 'x'); /* nothing written */
    CHECK_CONTAINS(mkGetLastError(comm), "buf = NULL");
    RCHECK(mkCommGetInfo(comm, "gemm", 1, 1, 1, mkBfloat16, NULL, &size),
           mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "\"gemm\"");
    RCHECK(mkCommGetInfo(comm, "ag_gemm", 0, 1, 1, mkBfloat16, NULL, &size),
           mkErrInvalidArgument);
    RCHECK(mkCommGetInfo(comm, "ag_gemm", 1, 1, 1, (mkDataType_t)7, NULL, &size),
           mkErrInvalidArgument);
    RCHECK(mkCommGetInfo(comm, NULL, 0, 0, 0, mkBfloat16, NULL, NULL),
           mkErrInvalidArgument);
    RCHECK(mkCommGetInfo(NULL, NULL, 0, 0, 0, mkBfloat16, NULL, &size),
           mkErrInvalidArgument);
    RCHECK(mkCommDestroy(comm), mkSuccess);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    me = r ? atoi(r) : 0;
    alarm(60);
    if (!strcmp(mode, "shared")) shared();
    else if (!strcmp(mode, "vnodes")) vnodes();
    else if (!strcmp(mode, "notransport")) fails(mkErrTransport, "add socket");
    else if (!strcmp(mode, "badsplit")) fails(mkErrInvalidArgument, "MK_SM_SPLIT");
    else if (!strcmp(mode, "mismatch")) {
        /* One rank alone overrides the split: every rank must refuse. */
        if (me == 3) setenv("MK_SM_SPLIT", "intra=4", 1);
        fails(mkErrInvalidUsage, "give every rank the same values");
    } else if (!strcmp(mode, "overbudget"))
        fails(mkErrInvalidArgument, "cannot all be resident");
    else if (!strcmp(mode, "self")) self();
    else {
        fprintf(stderr, "usage: test_topo_comm shared|vnodes|notransport|"
                "badsplit|mismatch|overbudget|self\n");
        return 2;
    }
    printf("rank %d: %d passed, %d failed\n", me, check_passed, check_failed);
    return check_failed ? 1 : 0;
}
