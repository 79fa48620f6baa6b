/*
 * nodes.c - grouping ranks into (virtual) nodes.
 *
 * Ranks with the same node key share a node.  The key is the launcher's
 * PMIx node id (within its namespace) when this process is a PMIx client,
 * else a hash of hostname + kernel boot id.  Ranks from different launches
 * thus never share a node even on one host: the safe direction, since
 * they then talk through a network transport instead of assuming IPC.
 *
 * MK_NODE_SIZE=k then cuts each host into virtual nodes of k consecutive
 * local ranks, so that the inter-node path runs on one machine:
 *
 *     host A: ranks 0 1 2 3 4   k=2 ->  node 0 {0,1}  node 1 {2,3}  node 2 {4}
 *     host B: ranks 5 6 7 8           node 3 {5,6}  node 4 {7,8}
 *
 * Hosts are numbered in order of their lowest rank; local ranks follow
 * global rank order.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "topo.h"

#if HAVE_PMIX
#include <pmix.h>
#endif

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Only when a launcher already connected this process: PMIx_Init here is
 * then a reference on the live connection, never a new attempt. */
static int pmix_node_key(uint64_t *key)
{
#if HAVE_PMIX
    if (!PMIx_Initialized()) return -1;
    pmix_proc_t me;
    if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return -1;
    pmix_info_t info;
    bool yes = true;
    pmix_value_t *v = NULL;
    int rc = -1;
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    if (PMIx_Get(&me, PMIX_NODEID, &info, 1, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_UINT32) {
        uint64_t h = fnv(0xcbf29ce484222325ull, "pmix", 4);
        h = fnv(h, me.nspace, strnlen(me.nspace, sizeof(me.nspace)));
        *key = fnv(h, &v->data.uint32, sizeof(v->data.uint32));
        MKI_TRACE(MKI_SUB_TOPO, "node key from PMIx: node id %u of %s",
                  v->data.uint32, me.nspace);
        rc = 0;
    }
    if (v) PMIX_VALUE_RELEASE(v);
    PMIX_INFO_DESTRUCT(&info);
    PMIx_Finalize(NULL, 0);
    return rc;
#else
    (void)key;
    (void)fnv;
    return -1;
#endif
}

uint64_t mki_topo_node_key(void)
{
    uint64_t key;
    if (pmix_node_key(&key) == 0) return key;
    return mki_host_hash();
}

struct keyed {
    uint64_t key;
    int rank;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->rank - y->rank;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Sort by (key, rank): each host is a run; runs are then numbered by
 * their first rank.  O(n log n), for jobs of a million ranks. */
int mki_topo_group(const uint64_t *keys, int n, int node_size, int *node_of,
                   int *local_rank_of)
{
    struct keyed *k = malloc(sizeof(*k) * (size_t)n);
    int *first = malloc(sizeof(int) * (size_t)n);
    if (!k || !first) {
        free(k), free(first);
        return -1;
    }
    for (int r = 0; r < n; r++) k[r] = (struct keyed){keys[r], r};
    qsort(k, (size_t)n, sizeof(*k), cmp_keyed);
    int nhosts = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || k[i].key != k[i - 1].key) first[nhosts++] = k[i].rank;
    qsort(first, (size_t)nhosts, sizeof(int), cmp_int);
    /* node_of temporarily holds the host's position in `first`. */
    int nnodes = 0;
    for (int i = 0, run = 0; i < n; i = run) {
        for (run = i; run < n && k[run].key == k[i].key; run++) {}
        int *pos = bsearch(&k[i].rank, first, (size_t)nhosts, sizeof(int), cmp_int);
        for (int j = i; j < run; j++) {
            node_of[k[j].rank] = (int)(pos - first);
            local_rank_of[k[j].rank] = j - i;
        }
    }
    /* Each host's first node: hosts in order, each ceil(size / k) nodes. */
    int *base = first; /* reused: base node per host */
    int *count = calloc((size_t)nhosts, sizeof(int));
    if (!count) {
        free(k), free(first);
        return -1;
    }
    for (int r = 0; r < n; r++) count[node_of[r]]++;
    for (int h = 0; h < nhosts; h++) {
        base[h] = nnodes;
        nnodes += node_size > 0 ? (count[h] + node_size - 1) / node_size : 1;
    }
    for (int r = 0; r < n; r++) {
        int h = node_of[r], lr = local_rank_of[r];
        node_of[r] = base[h] + (node_size > 0 ? lr / node_size : 0);
        local_rank_of[r] = node_size > 0 ? lr % node_size : lr;
    }
    free(count), free(k), free(first);
    return nnodes;
}

mkResult_t mki_topo_group_nodes(struct mkComm *comm)
{
    int n = comm->nranks;
    uint64_t *keys = calloc((size_t)n, sizeof(*keys));
    int *node_of = malloc(sizeof(int) * (size_t)n);
    int *lrank = malloc(sizeof(int) * (size_t)n);
    int nnodes = -1;
    if (keys && node_of && lrank) {
        for (int r = 0; r < n; r++) keys[r] = comm->hosts[r].node_key;
        nnodes = mki_topo_group(keys, n, comm->cfg.nodeSize, node_of, lrank);
    }
    if (nnodes < 0) {
        free(keys), free(node_of), free(lrank);
        return mki_error(comm, mkErrNoMemory, "out of host memory");
    }
    int me = comm->rank, size = 0;
    for (int r = 0; r < n; r++) size += node_of[r] == node_of[me];
    comm->node = node_of[me];
    comm->nnodes = nnodes;
    comm->local_rank = lrank[me];
    comm->local_size = size;
    free(keys), free(node_of), free(lrank);
    return mkSuccess;
}
