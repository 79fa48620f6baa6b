/*
 * comm.c - communicator lifecycle, queries and the async error state.
 *
 * Creation, whatever the bootstrap:
 *   1. read the MK_* parameters once and resolve the config (user struct
 *      of any version + those parameters); the communicator keeps both;
 *   2. bring up a bootstrap (pmix for the job, tcp for a unique id or a
 *      split, "self" for a size-1 communicator);
 *   3. agree on a job cookie (rank 0 draws it, bcast); a job started by a
 *      launcher then moves onto a tcp ring made through PMIx (one
 *      allgather of addresses): every later PMIx allgather would cost more
 *      than the one before (keys accumulate: 0.9 ms per op at first, 99 ms
 *      after 2,000 ops, 2 ranks on one host);
 *   4. allgather host facts; group ranks into nodes (same PMIx node id or
 *      host hash, then MK_NODE_SIZE consecutive local ranks per virtual
 *      node: topology/nodes.c);
 *   5. pick the CUDA device (config, else local rank % device count; none
 *      in a process without GPUs);
 *   6. topology, plan, device runtime (symmetric heap), inter-node path,
 *      then every op of the op table (its state, its kernels loaded now):
 *      the core names no op.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "config.h"
#include "mki.h"
#include "core/live.h"
#include "mem/mem.h"
#include "net/net.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "topology/topo.h"

MK_API mkResult_t mkGetVersion(int *version)
{
    if (version == NULL)
        return mki_error(NULL, mkErrInvalidArgument, "version is NULL; pass "
                         "the address of an int");
    *version = MK_VERSION_CODE;
    return mkSuccess;
}

/* ---- the size-1 bootstrap ----------------------------------------- */
static mkResult_t self_allgather(void *c, void *b, size_t n)
{ (void)c; (void)b; (void)n; return mkSuccess; }
static mkResult_t self_bcast(void *c, void *b, size_t n, int r)
{ (void)c; (void)b; (void)n; (void)r; return mkSuccess; }
static mkResult_t self_barrier(void *c) { (void)c; return mkSuccess; }
static void self_close(void *c) { (void)c; }
static const struct mki_bootstrap_ops self_ops = {
    "self", self_allgather, self_bcast, self_barrier, self_close,
};

/* ---- handle checks and error state -------------------------------- */

mkResult_t mki_comm_check(mkComm_t comm, const char *func)
{
    if (comm == NULL)
        return mki_error(NULL, mkErrInvalidArgument, "%s: comm is NULL; "
                         "create one with mkCommInit or mkCommInitRank", func);
    if (comm->magic != MKI_COMM_MAGIC)
        return mki_error(NULL, mkErrInvalidArgument, "%s: comm is not a live "
                         "communicator (destroyed, or not made by mkernel)",
                         func);
    return mkSuccess;
}

#define CHECK_OUT(ptr, func) CHECK_OUT_C(NULL, ptr, func)
/* A NULL output pointer: the detail goes to comm when there is one. */
#define CHECK_OUT_C(comm, ptr, func)                                         \
    do {                                                                     \
        if ((ptr) == NULL)                                                   \
            return mki_error(comm, mkErrInvalidArgument,                     \
                             "%s: %s is NULL; pass the address of the "      \
                             "output", func, #ptr);                          \
    } while (0)

void mki_comm_set_async_error(struct mkComm *comm, mkResult_t res)
{
    pthread_mutex_lock(&comm->lock);
    if (comm->async_error == mkSuccess) {
        comm->async_error = res;
        snprintf(comm->async_detail, sizeof(comm->async_detail), "%s",
                 comm->last_error);
    }
    pthread_mutex_unlock(&comm->lock);
}

mkResult_t mki_comm_async_error(struct mkComm *comm)
{
    pthread_mutex_lock(&comm->lock);
    mkResult_t res = comm->async_error;
    pthread_mutex_unlock(&comm->lock);
    return res;
}

mkResult_t mki_comm_broken(struct mkComm *comm, mkResult_t res,
                           const char *func)
{
    char detail[MKI_ERRMSG_LEN];
    pthread_mutex_lock(&comm->lock);
    snprintf(detail, sizeof(detail), "%s", comm->async_detail);
    pthread_mutex_unlock(&comm->lock);
    return mki_error(comm, res, "%s: the communicator is broken (%s: %s); "
                     "destroy it", func, mkGetErrorString(res), detail);
}

mkResult_t mki_comm_adopt(struct mkComm *comm, struct mkComm *kid, int *name_of)
{
    pthread_mutex_lock(&comm->lock);
    int i = 0;
    while (i < MKI_KIDS && comm->kids[i]) i++;
    if (i < MKI_KIDS) comm->kids[i] = kid;
    const int full = i == MKI_KIDS;
    pthread_mutex_unlock(&comm->lock);
    if (full) {
        free(name_of);
        return mki_error(comm, mkErrInternal, "too many internal communicators");
    }
    kid->name_of = name_of;
    kid->parent = comm;
    return mkSuccess;
}

void mki_comm_disown(struct mkComm *comm, struct mkComm *kid)
{
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < MKI_KIDS; i++)
        if (comm->kids[i] == kid) comm->kids[i] = NULL;
    pthread_mutex_unlock(&comm->lock);
}

void mki_comm_break_kids(struct mkComm *comm, mkResult_t res, const char *msg)
{
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < MKI_KIDS; i++) {
        struct mkComm *kid = comm->kids[i];
        if (!kid) continue;
        mki_devrt_stop_kernels(kid, 0);
        mki_error(kid, res, "%s", msg);
        mki_comm_set_async_error(kid, res);
    }
    pthread_mutex_unlock(&comm->lock);
}

/* Run a bootstrap op for the communicator; a failure breaks it. */
static mkResult_t comm_boot(struct mkComm *comm, mkResult_t res)
{
    if (res != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        mki_comm_set_async_error(comm, res);
    }
    return res;
}

/* ---- creation ----------------------------------------------------- */

int mki_rt_preload(char *msg, size_t len); /* kernels/rt/probe.cu */

/* Load every kernel now, on the communicator's device (REFERENCE.md: lazy
 * loading can deadlock a launch beside a spinning stream): the runtime's
 * own, then every op's. */
static mkResult_t preload_kernels(struct mkComm *comm)
{
    if (comm->cuda_dev < 0) return mkSuccess;
    int prev;
    char msg[256];
    cudaError_t err = cudaGetDevice(&prev);
    if (err == cudaSuccess) err = cudaSetDevice(comm->cuda_dev);
    if (err != cudaSuccess)
        return mki_error(comm, mkErrCuda, "cannot use CUDA device %d: %s",
                         comm->cuda_dev, cudaGetErrorString(err));
    mkResult_t res = mkSuccess;
    if (mki_rt_preload(msg, sizeof(msg)) != 0)
        res = mki_error(comm, mkErrCuda, "cannot load mkernel's kernels on device %d: %s (the "
                        "library is built for sm_90a: Hopper GPUs only)", comm->cuda_dev, msg);
    if (res == mkSuccess) res = mki_ops_preload(comm);
    (void)cudaSetDevice(prev);
    return res;
}

static mkResult_t pick_device(struct mkComm *comm)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError(); /* clear the sticky-free error state */
        if (comm->cfg.cudaDev >= 0)
            return mki_error(comm, mkErrInvalidArgument, "config->cudaDev = "
                             "%d but this process sees no GPU (%s)",
                             comm->cfg.cudaDev, err != cudaSuccess
                                 ? cudaGetErrorString(err) : "0 devices");
        comm->cuda_dev = -1;
        MKI_INFO(MKI_SUB_INIT, "no GPU found (%s): the communicator supports "
                 "bootstrap and queries; GPU operations return "
                 "mkErrUnsupported", err != cudaSuccess
                     ? cudaGetErrorString(err) : "0 devices");
        return mkSuccess;
    }
    if (comm->cfg.cudaDev >= count)
        return mki_error(comm, mkErrInvalidArgument, "config->cudaDev = %d "
                         "but this process sees %d GPU(s) (check "
                         "CUDA_VISIBLE_DEVICES)", comm->cfg.cudaDev, count);
    /* By the rank's index among the ranks of its host, not of its
     * (virtual) node: with MK_NODE_SIZE, ranks of one host would otherwise
     * pile onto the first GPUs. */
    int host_rank = 0;
    for (int q = 0; q < comm->rank; q++)
        host_rank += comm->hosts[q].host_hash == comm->hosts[comm->rank].host_hash;
    comm->cuda_dev = comm->cfg.cudaDev >= 0 ? comm->cfg.cudaDev
                                            : host_rank % count;
    return preload_kernels(comm);
}

/* The device runtime with a heap sized by the plan (the largest node) and
 * a host segment for what the ops send across nodes. */
static mkResult_t devrt_create(struct mkComm *comm)
{
    const size_t heap = mki_heap_default_bytes(comm->cfg.workspaceSize,
                                               mki_plan_context(comm)->local_size);
    return mki_devrt_create(comm, heap, comm->nnodes > 1 ? mki_ops_host_bytes(comm) : 0);
}

/* Every op's state, on the communicator's device. */
static mkResult_t ops_create(struct mkComm *comm)
{
    int prev = -1;
    if (comm->cuda_dev >= 0 && (cudaGetDevice(&prev) != cudaSuccess ||
                                cudaSetDevice(comm->cuda_dev) != cudaSuccess))
        return mki_error(comm, mkErrCuda, "cannot use CUDA device %d", comm->cuda_dev);
    mkResult_t res = mki_ops_create(comm);
    if (prev >= 0) (void)cudaSetDevice(prev);
    return res;
}

static void comm_free(struct mkComm *comm)
{
    if (!comm) return;
    /* Undo the later stages in reverse order (network, device runtime,
     * topology + plan) before the bootstrap goes. */
    mki_net_destroy(comm); /* drains, then a barrier: bootstrap still up */
    if (comm->dev) {       /* the ops' streams and buffers, on their device */
        int prev = -1;
        if (cudaGetDevice(&prev) == cudaSuccess) (void)cudaSetDevice(comm->dev->dev);
        mki_ops_destroy(comm);
        if (prev >= 0) (void)cudaSetDevice(prev);
    } else {
        mki_ops_destroy(comm);
    }
    mki_devrt_destroy(comm); /* the watchdog, the liveness's reader, stops here */
    mki_live_destroy(comm);  /* BYE: neighbours do not take this for a death */
    mki_plan_free(comm);
    mki_topo_free(comm);
    if (comm->boot && comm->boot_ctx) comm->boot->close(comm->boot_ctx);
    free(comm->hosts);
    free(comm->name_of);
    pthread_mutex_destroy(&comm->lock);
    comm->magic = 0;
    free(comm);
}

mkResult_t mki_comm_create(const struct mki_config *cfg, const struct mki_params *params,
                           const struct mki_bootstrap_ops *boot, void *ctx,
                           int rank, int nranks, uint64_t cookie,
                           mkComm_t *out)
{
    struct mkComm *comm = calloc(1, sizeof(*comm));
    if (!comm) {
        boot->close(ctx);
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    }
    mkResult_t res;
    pthread_mutex_init(&comm->lock, NULL);
    comm->magic = MKI_COMM_MAGIC;
    comm->cfg = *cfg;
    comm->params = *params;
    comm->boot = boot;
    comm->boot_ctx = ctx;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->cookie = cookie;
    comm->hosts = calloc((size_t)nranks, sizeof(*comm->hosts));
    if (!comm->hosts) {
        res = mki_error(NULL, mkErrNoMemory, "out of host memory");
        goto fail;
    }
    struct mki_host_info *me = &comm->hosts[rank];
    me->host_hash = mki_host_hash();
    me->node_key = mki_topo_node_key();
    me->pid = (int32_t)getpid();
    gethostname(me->hostname, sizeof(me->hostname) - 1);
    MKI_CHECK_GOTO(boot->allgather(ctx, comm->hosts, sizeof(*comm->hosts)),
                   res, fail);
    MKI_CHECK_GOTO(mki_topo_group_nodes(comm), res, fail);
    MKI_CHECK_GOTO(pick_device(comm), res, fail);
    MKI_CHECK_GOTO(mki_live_create(comm), res, fail);
    /* Later stages of creation, in this order (each undoes itself in
     * comm_free): topology + plan, device runtime (heap), network, ops. */
    MKI_CHECK_GOTO(mki_topo_setup(comm), res, fail);
    MKI_CHECK_GOTO(mki_plan_setup(comm), res, fail);
    MKI_CHECK_GOTO(devrt_create(comm), res, fail);
    MKI_CHECK_GOTO(mki_net_create(comm, mki_ops_host_bytes(comm)), res, fail);
    MKI_CHECK_GOTO(ops_create(comm), res, fail);
    mki_log_set_rank(rank);
    MKI_INFO(MKI_SUB_INIT, "communicator ready: rank %d of %d over %s, node "
             "%d of %d, local rank %d of %d, CUDA device %d", rank, nranks,
             boot->name, comm->node, comm->nnodes, comm->local_rank,
             comm->local_size, comm->cuda_dev);
    *out = comm;
    return mkSuccess;
fail:
    comm_free(comm);
    return res;
}

/* Rank 0 draws the job cookie; everyone gets it. */
static mkResult_t agree_cookie(const struct mki_bootstrap_ops *boot, void *ctx,
                               int rank, uint64_t *cookie)
{
    if (rank == 0) MKI_CHECK(mki_random_bytes(cookie, sizeof(*cookie)));
    return boot->bcast(ctx, cookie, sizeof(*cookie), 0);
}

/* The job's communicator leaves PMIx for a tcp ring of the same ranks
 * (the PMIx context is closed; PMIx itself stays up for node ids). */
static mkResult_t off_pmix(const struct mki_bootstrap_ops **boot, void **ctx, int rank,
                           int nranks, uint64_t cookie, int timeout_ms)
{
    int *group = malloc(sizeof(int) * (size_t)nranks);
    if (!group) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    for (int r = 0; r < nranks; r++) group[r] = r;
    void *tcp = NULL;
    mkResult_t res = mki_bootstrap_tcp_from_parent(*boot, *ctx, rank, nranks, 1, rank, nranks,
                                                   group, cookie, timeout_ms, &tcp);
    free(group);
    if (res != mkSuccess) return res;
    (*boot)->close(*ctx);
    *boot = &mki_bootstrap_tcp_ops;
    *ctx = tcp;
    return mkSuccess;
}

MK_API mkResult_t mkCommInit(mkComm_t *comm, const mkConfig_t *config)
{
    struct mki_config cfg;
    struct mki_params pr;
    mki_log_init();
    mki_thread_error_clear();
    CHECK_OUT(comm, "mkCommInit");
    MKI_CHECK(mki_params_read(&pr));
    MKI_CHECK(mki_config_resolve(config, &pr, &cfg));
    const char *mode = mki_params_str(&pr, MKI_P_BOOTSTRAP);
    if (strcmp(mode, "auto") && strcmp(mode, "pmix") && strcmp(mode, "none"))
        return mki_error(NULL, mkErrInvalidArgument, "MK_BOOTSTRAP=%s; use "
                         "auto, pmix or none", mode);
    int rank = 0, nranks = 1, no_launcher = 1;
    void *ctx = NULL;
    const struct mki_bootstrap_ops *boot = &self_ops;
    uint64_t cookie = 0;
    if (strcmp(mode, "none") != 0) {
        const struct mki_bootstrap_ops *pmix = NULL;
        mkResult_t res = mki_bootstrap_pmix_init(cfg.timeoutMs, &rank, &nranks,
                                                 &no_launcher, &pmix, &ctx);
        if (res == mkSuccess) {
            boot = pmix;
        } else if (!no_launcher || strcmp(mode, "pmix") == 0) {
            return mki_error(NULL, res, "%s; start the program with srun "
                             "--mpi=pmix, mpirun or prterun, or set "
                             "MK_BOOTSTRAP=none for one rank",
                             mki_thread_error());
        } else if (mki_env_launcher()) {
            /* Started by a launcher we cannot talk to: size 1 is almost
             * surely not what the user wants, so say it loudly. */
            MKI_WARN(MKI_SUB_INIT, "%s, but the environment says a launcher "
                     "started this process (%s): running as a communicator "
                     "of size 1; use srun --mpi=pmix or a PMIx-enabled build, "
                     "or set MK_BOOTSTRAP=pmix to make this an error",
                     mki_thread_error(), mki_env_launcher());
            mki_thread_error_clear();
        } else {
            MKI_INFO(MKI_SUB_INIT, "no launcher found (%s): running as a "
                     "communicator of size 1", mki_thread_error());
            mki_thread_error_clear();
        }
    }
    mkResult_t res = agree_cookie(boot, ctx, rank, &cookie);
    if (res == mkSuccess && boot != &self_ops) res = off_pmix(&boot, &ctx, rank, nranks, cookie,
                                                             cfg.timeoutMs);
    if (res != mkSuccess) {
        boot->close(ctx);
        return res;
    }
    return mki_comm_create(&cfg, &pr, boot, ctx, rank, nranks, cookie, comm);
}

MK_API mkResult_t mkGetUniqueId(mkUniqueId *uniqueId)
{
    mki_log_init();
    mki_thread_error_clear();
    CHECK_OUT(uniqueId, "mkGetUniqueId");
    int64_t timeout;
    MKI_CHECK(mki_param_int(MKI_P_TIMEOUT_MS, &timeout)); /* no communicator yet */
    struct mki_unique_id id;
    MKI_CHECK(mki_tcp_root_start(&id, (int)timeout));
    memset(uniqueId, 0, sizeof(*uniqueId));
    memcpy(uniqueId->internal, &id, sizeof(id));
    return mkSuccess;
}

MK_API mkResult_t mkCommInitRank(mkComm_t *comm, int nranks,
                                 mkUniqueId uniqueId, int rank,
                                 const mkConfig_t *config)
{
    struct mki_config cfg;
    struct mki_params pr;
    struct mki_unique_id id;
    mki_log_init();
    mki_thread_error_clear();
    CHECK_OUT(comm, "mkCommInitRank");
    if (nranks < 1 || nranks > (1 << 20))
        return mki_error(NULL, mkErrInvalidArgument, "mkCommInitRank: nranks "
                         "= %d; give the number of ranks (1 .. 2^20)", nranks);
    if (rank < 0 || rank >= nranks)
        return mki_error(NULL, mkErrInvalidArgument, "mkCommInitRank: rank = "
                         "%d is outside [0, %d)", rank, nranks);
    MKI_CHECK(mki_unique_id_parse(uniqueId.internal, sizeof(uniqueId.internal), &id));
    MKI_CHECK(mki_params_read(&pr));
    MKI_CHECK(mki_config_resolve(config, &pr, &cfg));
    void *ctx;
    MKI_CHECK(mki_bootstrap_tcp_init(&id, rank, nranks, cfg.timeoutMs, &ctx));
    return mki_comm_create(&cfg, &pr, &mki_bootstrap_tcp_ops, ctx, rank, nranks,
                           id.cookie, comm);
}

/* ---- split --------------------------------------------------------- */

struct split_key {
    int32_t color, key, rank;
};

static int cmp_split(const void *a, const void *b)
{
    const struct split_key *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

MK_API mkResult_t mkCommSplit(mkComm_t comm, int color, int key,
                              mkComm_t *newcomm, const mkConfig_t *config)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommSplit"));
    CHECK_OUT_C(comm, newcomm, "mkCommSplit");
    if (color < 0 && color != MK_SPLIT_NOCOLOR)
        return mki_error(comm, mkErrInvalidArgument, "mkCommSplit: color = %d;"
                         " give a color >= 0 or MK_SPLIT_NOCOLOR", color);
    mkResult_t broken = mki_comm_async_error(comm);
    if (broken != mkSuccess)
        return mki_comm_broken(comm, broken, "mkCommSplit");
    struct mki_config cfg = comm->cfg;
    if (config) {
        mkResult_t r = mki_config_resolve(config, &comm->params, &cfg);
        if (r != mkSuccess) return mki_error(comm, r, "%s", mki_thread_error());
    }
    /* A rank keeps its GPU in the new communicator unless told otherwise:
     * its local rank there may differ from the one that chose the GPU. */
    if (cfg.cudaDev < 0) cfg.cudaDev = comm->cuda_dev;
    int n = comm->nranks;
    struct split_key *all = calloc((size_t)n, sizeof(*all));
    int *group = calloc((size_t)n, sizeof(int));
    mkResult_t res = mkSuccess;
    if (!all || !group) {
        res = mki_error(comm, mkErrNoMemory, "out of host memory");
        goto free_tables;
    }
    all[comm->rank] = (struct split_key){color, key, comm->rank};
    MKI_CHECK_GOTO(comm_boot(comm, comm->boot->allgather(comm->boot_ctx, all,
                                                         sizeof(*all))),
                   res, free_tables);
    /* Members of my color, ordered by (key, parent rank). */
    int m = 0, myrank = -1;
    for (int r = 0; r < n; r++)
        if (all[r].color == color) all[m++] = all[r];
    qsort(all, (size_t)m, sizeof(*all), cmp_split);
    for (int i = 0; i < m; i++) {
        group[i] = all[i].rank;
        if (all[i].rank == comm->rank) myrank = i;
    }
    int member = color != MK_SPLIT_NOCOLOR;
    uint64_t cookie = comm->cookie ^ (0x9e3779b97f4a7c15ull *
                                      (comm->splits + 1 + (uint64_t)color));
    comm->splits++;
    void *ctx = NULL;
    MKI_CHECK_GOTO(comm_boot(comm, mki_bootstrap_tcp_from_parent(
                                       comm->boot, comm->boot_ctx, comm->rank,
                                       n, member, myrank, m, group, cookie,
                                       cfg.timeoutMs, &ctx)),
                   res, free_tables);
    if (!member) {
        *newcomm = NULL;
        goto free_tables;
    }
    res = mki_comm_create(&cfg, &comm->params, &mki_bootstrap_tcp_ops, ctx, myrank, m, cookie,
                          newcomm);
    if (res != mkSuccess) mki_error_quiet(comm, "%s", mki_thread_error());
free_tables:
    free(all);
    free(group);
    return res;
}

/* ---- teardown, state, queries ------------------------------------- */

MK_API mkResult_t mkCommDestroy(mkComm_t comm)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommDestroy"));
    comm_free(comm);
    return mkSuccess;
}

MK_API mkResult_t mkCommAbort(mkComm_t comm)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommAbort"));
    MKI_INFO(MKI_SUB_INIT, "rank %d aborts its communicator", comm->rank);
    /* Raise the abort word in every local peer's workspace: kernels
     * waiting on this rank stop with mkErrRemote. */
    mki_devrt_abort(comm);
    mki_net_abort(comm); /* stop the proxy now; destroy skips the barrier */
    mki_live_abort(comm); /* every rank, on any node, hears of it at once */
    /* Closing the bootstrap connections at once is what tells peers: their
     * next wait on this rank fails with mkErrRemote. */
    comm_free(comm);
    mki_bootstrap_pmix_release();
    return mkSuccess;
}

MK_API mkResult_t mkCommGetAsyncError(mkComm_t comm, mkResult_t *asyncError)
{
    MKI_CHECK(mki_comm_check(comm, "mkCommGetAsyncError"));
    CHECK_OUT_C(comm, asyncError, "mkCommGetAsyncError");
    *asyncError = mki_comm_async_error(comm);
    return mkSuccess;
}

#define COMM_QUERY(fn, field)                                                \
    MK_API mkResult_t fn(mkComm_t comm, int *value)                          \
    {                                                                        \
        MKI_CHECK(mki_comm_check(comm, #fn));                                \
        CHECK_OUT_C(comm, value, #fn);                                       \
        *value = comm->field;                                                \
        return mkSuccess;                                                    \
    }
COMM_QUERY(mkCommRank, rank)
COMM_QUERY(mkCommSize, nranks)
COMM_QUERY(mkCommLocalRank, local_rank)
COMM_QUERY(mkCommLocalSize, local_size)
COMM_QUERY(mkCommNodeCount, nnodes)
COMM_QUERY(mkCommCuDevice, cuda_dev)
