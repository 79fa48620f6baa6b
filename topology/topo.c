/*
 * topo.c - the communicator's global view of the topology.
 *
 * Each rank discovers its host, picks its GPU in that view, and publishes
 * a fixed-size record (node key, GPU facts, its NICs and their kinds, and
 * the kind of link from its GPU to every GPU it can see); one
 * bootstrap allgather gives every rank all records.  Then, per peer:
 *
 *     other (virtual) node                -> net
 *     same node, same GPU (MPS)           -> same-gpu
 *     same node, NVLink between the GPUs  -> nvlink
 *     same node, peer access over PCIe    -> pcie
 *     same node, no peer access / no GPU  -> host
 *
 * The link between two GPUs is looked up by bus id in this rank's table,
 * else in the peer's (processes may see different subsets of the GPUs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "topo.h"

unsigned mki_topo_nic_kinds(const struct mki_host_topo *h, int gpu)
{
    unsigned mask = 0;
    for (int i = 0; i < h->nnics; i++) {
        if (gpu >= 0 && h->gpu[gpu].nnics > 0) {
            int mine = 0;
            for (int j = 0; j < h->gpu[gpu].nnics; j++) mine |= h->gpu[gpu].nic[j] == i;
            if (!mine) continue;
        }
        mask |= 1u << h->nic[i].kind;
    }
    return mask;
}

static int pick_gpu(const struct mkComm *comm, const struct mki_host_topo *h)
{
    if (comm->cuda_dev >= 0) {
        for (int i = 0; i < h->ngpus; i++)
            if (h->gpu[i].dev == comm->cuda_dev) return i;
        return -1;
    }
    /* Fake GPUs stand in for devices CUDA does not have. */
    return h->fake && h->ngpus > 0 ? comm->local_rank % h->ngpus : -1;
}

/* What every rank must agree on for the plans to agree. */
static uint64_t cfg_hash(const struct mki_config *c)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *parts[2] = {c->transports, c->smSplit};
    for (int p = 0; p < 2; p++)
        for (const char *s = parts[p]; ; s++) {
            h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
            if (!*s) break;
        }
    return h;
}

static void my_facts(const struct mkComm *comm, const struct mki_topo *t,
                     struct mki_rank_facts *f)
{
    const struct mki_host_topo *h = &t->host;
    memset(f, 0, sizeof(*f));
    f->node_key = comm->hosts[comm->rank].node_key;
    f->sm_budget = comm->cfg.smBudget;
    f->cfg_hash = cfg_hash(&comm->cfg);
    f->nic_kinds = mki_topo_nic_kinds(h, t->my_gpu);
    if (t->my_gpu < 0) return;
    const struct mki_gpu *g = &h->gpu[t->my_gpu];
    f->has_gpu = 1;
    f->gpu = *g;
    f->nnics = g->nnics;
    for (int i = 0; i < g->nnics; i++) {
        const struct mki_nic *n = &h->nic[g->nic[i]];
        snprintf(f->nic_names[i], sizeof(f->nic_names[i]), "%s", n->name);
        f->gpu.nic[i] = i;
        f->nic_ports[i] = n->port;
    }
    f->nic_share = mki_topo_nic_share(h, t->my_gpu);
    f->nlinks = h->ngpus;
    for (int j = 0; j < h->ngpus; j++) {
        snprintf(f->links[j].busid, sizeof(f->links[j].busid), "%s",
                 h->gpu[j].busid);
        f->links[j].link = h->link[t->my_gpu][j];
        f->links[j].nvlinks = h->nvlinks[t->my_gpu][j];
    }
}

/* Link kind from a's table toward b's GPU; -1 when a does not see it. */
static int link_in(const struct mki_rank_facts *a, const struct mki_rank_facts *b,
                   int *nvlinks)
{
    for (int j = 0; j < a->nlinks && j < MKI_TOPO_MAX_GPUS; j++)
        if (!strcmp(a->links[j].busid, b->gpu.busid)) {
            *nvlinks = a->links[j].nvlinks;
            return a->links[j].link;
        }
    return -1;
}

static int same_gpu(const struct mki_rank_facts *a, const struct mki_rank_facts *b)
{
    return a->has_gpu && b->has_gpu && a->node_key == b->node_key &&
           !strcmp(a->gpu.busid, b->gpu.busid);
}

enum mki_path mki_topo_path(const struct mki_topo *t, int me, int peer, int *nv)
{
    const struct mki_rank_facts *a = &t->facts[me], *b = &t->facts[peer];
    *nv = 0;
    if (peer == me) return MKI_PATH_SELF;
    if (t->node_of[peer] != t->node_of[me]) return MKI_PATH_NET;
    if (!a->has_gpu || !b->has_gpu) return MKI_PATH_HOST;
    if (same_gpu(a, b)) return MKI_PATH_SAME_GPU;
    int l = link_in(a, b, nv);
    if (l < 0) l = link_in(b, a, nv);
    switch (l) {
    case MKI_GL_NVLINK: return MKI_PATH_NVLINK;
    case MKI_GL_PCIE: *nv = 0; return MKI_PATH_PCIE;
    case MKI_GL_SAME: return MKI_PATH_SAME_GPU;
    default: *nv = 0; return MKI_PATH_HOST;
    }
}

static mkResult_t alloc_view(struct mki_topo *t, int n)
{
    t->nranks = n;
    t->facts = calloc((size_t)n, sizeof(*t->facts));
    t->node_of = calloc((size_t)n, sizeof(int));
    t->local_rank_of = calloc((size_t)n, sizeof(int));
    t->path = calloc((size_t)n, sizeof(*t->path));
    t->path_nvlinks = calloc((size_t)n, sizeof(int));
    t->sharers = calloc((size_t)n, sizeof(int));
    if (!t->facts || !t->node_of || !t->local_rank_of || !t->path ||
        !t->path_nvlinks || !t->sharers)
        return mki_error(NULL, mkErrNoMemory, "out of host memory");
    return mkSuccess;
}

/* Order: host, then GPU bus id (ranks without GPU share nothing). */
static int cmp_gpu(const void *a, const void *b, void *facts)
{
    const struct mki_rank_facts *f = facts;
    const struct mki_rank_facts *x = &f[*(const int *)a];
    const struct mki_rank_facts *y = &f[*(const int *)b];
    if (x->node_key != y->node_key) return x->node_key < y->node_key ? -1 : 1;
    if (x->has_gpu != y->has_gpu) return x->has_gpu - y->has_gpu;
    int c = strcmp(x->gpu.busid, y->gpu.busid);
    return c ? c : *(const int *)a - *(const int *)b;
}

/* sharers[r]: ranks on rank r's physical GPU (any virtual node), sorted
 * so that it costs n log n. */
static mkResult_t count_sharers(struct mkComm *comm, struct mki_topo *t)
{
    int n = t->nranks, *idx = malloc(sizeof(int) * (size_t)n);
    if (!idx) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof(int), cmp_gpu, t->facts);
    for (int i = 0, run; i < n; i = run) {
        const struct mki_rank_facts *f = &t->facts[idx[i]];
        for (run = i + 1; run < n && f->has_gpu && same_gpu(f, &t->facts[idx[run]]);
             run++) {}
        for (int j = i; j < run; j++) t->sharers[idx[j]] = run - i;
    }
    free(idx);
    return mkSuccess;
}

static mkResult_t global_view(struct mkComm *comm, struct mki_topo *t)
{
    int n = comm->nranks, me = comm->rank;
    my_facts(comm, t, &t->facts[me]);
    mkResult_t r = comm->boot->allgather(comm->boot_ctx, t->facts,
                                         sizeof(*t->facts));
    if (r != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        return r;
    }
    uint64_t *keys = malloc(sizeof(*keys) * (size_t)n);
    if (!keys) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int i = 0; i < n; i++) keys[i] = t->facts[i].node_key;
    int nn = mki_topo_group(keys, n, comm->cfg.nodeSize, t->node_of,
                            t->local_rank_of);
    free(keys);
    if (nn < 0) return mki_error(comm, mkErrNoMemory, "out of host memory");
    for (int p = 0; p < n; p++)
        t->path[p] = mki_topo_path(t, me, p, &t->path_nvlinks[p]);
    MKI_CHECK(count_sharers(comm, t));
    t->gpu_sharers = t->sharers[me];
    return mkSuccess;
}

static void log_view(const struct mkComm *comm, const struct mki_topo *t)
{
    const struct mki_host_topo *h = &t->host;
    if (h->notes[0]) MKI_INFO(MKI_SUB_TOPO, "topology: %s", h->notes);
    if (t->my_gpu < 0) {
        MKI_INFO(MKI_SUB_TOPO, "rank %d: no GPU; node %d of %d", comm->rank,
                 comm->node, comm->nnodes);
        return;
    }
    const struct mki_gpu *g = &h->gpu[t->my_gpu];
    MKI_INFO(MKI_SUB_TOPO, "rank %d: GPU %s (%d SMs), NUMA %d, CPUs %s, %d "
             "NIC(s)%s%s, %d rank(s) on this GPU", comm->rank, g->busid,
             g->sm_count, g->numa, g->cpuset[0] ? g->cpuset : "?", g->nnics,
             g->nnics ? " first " : "", g->nnics ? h->nic[g->nic[0]].name : "",
             t->gpu_sharers);
}

/* Discovery costs tens of milliseconds (hwloc reads sysfs); splits and
 * later communicators of the process reuse it while the variables that
 * shape it are unchanged. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mki_host_topo *cache_host;
static char cache_key[1024];

static mkResult_t discover_cached(const struct mki_topo_opts *o,
                                  struct mki_host_topo *out)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s|%s|%s|%d", o->xml ? o->xml : "",
             o->fake_gpus ? o->fake_gpus : "",
             o->net_devices ? o->net_devices : "", o->verbs);
    pthread_mutex_lock(&cache_lock);
    mkResult_t r = mkSuccess;
    if (!cache_host || strcmp(key, cache_key)) {
        if (!cache_host) cache_host = malloc(sizeof(*cache_host));
        cache_key[0] = '\0';
        r = cache_host ? mki_topo_discover(o, cache_host)
                       : mki_error(NULL, mkErrNoMemory, "out of host memory");
        if (r == mkSuccess) snprintf(cache_key, sizeof(cache_key), "%s", key);
    }
    if (r == mkSuccess) *out = *cache_host;
    pthread_mutex_unlock(&cache_lock);
    return r;
}

mkResult_t mki_topo_setup(struct mkComm *comm)
{
    struct mki_topo *t = calloc(1, sizeof(*t));
    if (!t) return mki_error(comm, mkErrNoMemory, "out of host memory");
    comm->topo = t;
    struct mki_topo_opts opts;
    mki_topo_opts_env(&opts);
    mkResult_t r = discover_cached(&opts, &t->host);
    if (r != mkSuccess) {
        mki_error_quiet(comm, "%s", mki_thread_error());
        goto fail;
    }
    t->my_gpu = pick_gpu(comm, &t->host);
    MKI_CHECK_GOTO(alloc_view(t, comm->nranks), r, fail_nomem);
    MKI_CHECK_GOTO(global_view(comm, t), r, fail);
    log_view(comm, t);
    return mkSuccess;
fail_nomem:
    mki_error_quiet(comm, "%s", mki_thread_error());
fail:
    mki_topo_free(comm);
    return r;
}

int mki_topo_my_nics(const struct mkComm *comm, const char **names, int *ports,
                     int max)
{
    if (!comm->topo) return 0;
    const struct mki_rank_facts *f = &comm->topo->facts[comm->rank];
    int n = 0;
    for (; n < f->nnics && n < max; n++) {
        names[n] = f->nic_names[n];
        ports[n] = f->nic_ports[n];
    }
    return n;
}

void mki_topo_free(struct mkComm *comm)
{
    struct mki_topo *t = comm->topo;
    if (!t) return;
    free(t->facts);
    free(t->node_of);
    free(t->local_rank_of);
    free(t->path);
    free(t->path_nvlinks);
    free(t->sharers);
    free(t);
    comm->topo = NULL;
}

int mki_cpulist_parse(const char *list, void *set_, size_t setsize)
{
    cpu_set_t *set = set_;
    CPU_ZERO_S(setsize, set);
    const char *s = list;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b;
        if (end == s || a < 0) return -1;
        b = a;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s || b < a) return -1;
        }
        for (long c = a; c <= b && (size_t)c < setsize * 8; c++)
            CPU_SET_S((size_t)c, setsize, set);
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return 0;
}

mkResult_t mki_topo_bind_thread(const struct mki_topo *t)
{
    if (!t || t->my_gpu < 0 || !t->host.gpu[t->my_gpu].cpuset[0]) return mkSuccess;
    const char *list = t->host.gpu[t->my_gpu].cpuset;
    cpu_set_t want, allowed;
    if (mki_cpulist_parse(list, &want, sizeof(want)) != 0)
        return mki_error(NULL, mkErrInternal, "CPU list \"%s\" of the GPU is "
                         "malformed", list);
    /* Stay inside what the launcher or cgroup allows. */
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
        CPU_AND(&want, &want, &allowed);
    if (CPU_COUNT(&want) == 0) {
        MKI_INFO(MKI_SUB_TOPO, "the CPUs near the GPU (%s) are outside this "
                 "process's affinity: thread left unbound", list);
        return mkSuccess;
    }
    int e = pthread_setaffinity_np(pthread_self(), sizeof(want), &want);
    if (e != 0)
        return mki_error(NULL, mkErrSystem, "pthread_setaffinity_np(%s): %s",
                         list, strerror(e));
    return mkSuccess;
}
