/*
 * test_badinput - every communicator call rejects bad input with an error
 * code and a message, and changes nothing (outputs stay untouched).
 */
#include <stdlib.h>
#include "mkernel.h"
#include "check.h"

int main(void)
{
    mkComm_t comm = NULL, sentinel = (mkComm_t)(uintptr_t)0x5a5a;
    mkUniqueId id;
    int v = -7;
    mkResult_t ar = (mkResult_t)-7;

    /* NULL outputs. */
    CHECK_RES(mkCommInit(NULL, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "comm is NULL");
    CHECK_RES(mkGetUniqueId(NULL), mkErrInvalidArgument);
    memset(&id, 0, sizeof(id));
    CHECK_RES(mkCommInitRank(NULL, 2, id, 0, NULL), mkErrInvalidArgument);

    /* NULL and garbage handles. */
    CHECK_RES(mkCommRank(NULL, &v), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "mkCommRank: comm is NULL");
    CHECK_RES(mkCommDestroy(NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommAbort(NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommGetAsyncError(NULL, &ar), mkErrInvalidArgument);
    CHECK_RES(mkCommSplit(NULL, 0, 0, &comm, NULL), mkErrInvalidArgument);
    CHECK(v == -7 && ar == (mkResult_t)-7 && comm == NULL);

    /* Sizes and ranks out of range; a unique id that is not one. */
    comm = sentinel;
    CHECK_RES(mkCommInitRank(&comm, 0, id, 0, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "nranks");
    CHECK_RES(mkCommInitRank(&comm, -5, id, 0, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommInitRank(&comm, 1 << 30, id, 0, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommInitRank(&comm, 4, id, 4, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "rank = 4");
    CHECK_RES(mkCommInitRank(&comm, 4, id, -1, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommInitRank(&comm, 4, id, 0, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "unique id");
    CHECK(comm == sentinel);

    /* A bad config is refused before anything starts. */
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    cfg.magic = 0;
    CHECK_RES(mkCommInit(&comm, &cfg), mkErrInvalidArgument);
    CHECK(comm == sentinel);

    /* A bad MK_BOOTSTRAP. */
    setenv("MK_BOOTSTRAP", "carrier-pigeon", 1);
    CHECK_RES(mkCommInit(&comm, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "MK_BOOTSTRAP");
    CHECK(comm == sentinel);

    /* MK_BOOTSTRAP=none: a communicator of size 1. */
    setenv("MK_BOOTSTRAP", "none", 1);
    CHECK_RES(mkCommInit(&comm, NULL), mkSuccess);
    CHECK(comm != sentinel && comm != NULL);
    CHECK_RES(mkCommSize(comm, &v), mkSuccess);
    CHECK(v == 1);
    CHECK_RES(mkCommRank(comm, &v), mkSuccess);
    CHECK(v == 0);
    CHECK_RES(mkCommNodeCount(comm, &v), mkSuccess);
    CHECK(v == 1);
    CHECK_RES(mkCommGetAsyncError(comm, &ar), mkSuccess);
    CHECK(ar == mkSuccess);
    /* NULL outputs on a live communicator. */
    CHECK_RES(mkCommRank(comm, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommCuDevice(comm, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommGetAsyncError(comm, NULL), mkErrInvalidArgument);
    mkComm_t sub = sentinel;
    CHECK_RES(mkCommSplit(comm, -9, 0, &sub, NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "color");
    CHECK(sub == sentinel);
    CHECK_RES(mkCommSplit(comm, 3, 0, NULL, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommSplit(comm, 3, 0, &sub, NULL), mkSuccess);
    CHECK_RES(mkCommSize(sub, &v), mkSuccess);
    CHECK(v == 1);
    CHECK_RES(mkCommDestroy(sub), mkSuccess);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);

    /* A config asking for a GPU this process does not have. */
    int dev = -1;
    comm = sentinel;
    cfg = (mkConfig_t)MK_CONFIG_INITIALIZER;
    cfg.cudaDev = 4096;
    CHECK_RES(mkCommInit(&comm, &cfg), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "cudaDev");
    CHECK(comm == sentinel);

    /* No launcher and MK_BOOTSTRAP=auto: size 1 as well. */
    unsetenv("MK_BOOTSTRAP");
    unsetenv("PMIX_SERVER_URI2");
    unsetenv("PMIX_SERVER_URI21");
    unsetenv("PMIX_NAMESPACE");
    CHECK_RES(mkCommInit(&comm, NULL), mkSuccess);
    CHECK_RES(mkCommSize(comm, &v), mkSuccess);
    CHECK(v == 1);
    CHECK_RES(mkCommCuDevice(comm, &dev), mkSuccess);
    CHECK(dev >= -1);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);

    /* MK_BOOTSTRAP=pmix without a launcher is an error that says what to do. */
    setenv("MK_BOOTSTRAP", "pmix", 1);
    comm = sentinel;
    CHECK_RES(mkCommInit(&comm, NULL), mkErrBootstrap);
    CHECK_CONTAINS(mkGetLastError(NULL), "srun");
    CHECK(comm == sentinel);
    TEST_DONE();
}
