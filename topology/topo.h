/*
 * topo.h - what this host has (GPUs, NICs, NUMA, links) and how the ranks
 * of a communicator sit on it.
 *
 * Two layers:
 *   - struct mki_host_topo: one process's discovery of its host (CUDA for
 *     the GPUs, hwloc for PCI locality and NUMA, NVML through dlopen for
 *     NVLinks, libibverbs for RDMA devices).  Every source is optional:
 *     what cannot be found is left unknown and said once at INFO.
 *   - struct mki_topo: the global view of a communicator: every rank's
 *     facts (allgathered), its (virtual) node, and the path to each peer.
 *
 * Testing aids (documented in mkernel-topology(7)): MK_TOPO_XML loads an
 * hwloc XML file instead of this machine, and MK_TOPO_FAKE_GPUS invents
 * GPUs ("n=8,link=nv18,sms=132"; their bus ids come from the NVIDIA
 * devices of the XML when there is one), so the topology and the plan can
 * be tested on hosts without GPUs.
 */
#ifndef MKI_TOPO_H
#define MKI_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include "mkernel.h"

#define MKI_TOPO_MAX_GPUS 16
#define MKI_TOPO_MAX_NICS 32
#define MKI_TOPO_NICS_PER_GPU 4
#define MKI_BUSID_LEN 16       /* "0000:18:00.0" + NUL */

enum mki_nic_kind { MKI_NIC_IB, MKI_NIC_EFA };

/* How a peer is reached (the path), whatever transport carries it. */
enum mki_path {
    MKI_PATH_SELF,
    MKI_PATH_SAME_GPU, /* another process on this GPU (MPS): CUDA IPC   */
    MKI_PATH_NVLINK,   /* peer access over NVLink: CUDA IPC              */
    MKI_PATH_PCIE,     /* peer access over PCIe: CUDA IPC                */
    MKI_PATH_HOST,     /* same node, no peer access: staged through host */
    MKI_PATH_NET,      /* another (virtual) node: an inter-node transport */
    MKI_PATH_COUNT
};


/* How near a NIC is to a GPU, best first. */
enum mki_locality {
    MKI_LOC_SWITCH,      /* under the same PCIe switch */
    MKI_LOC_HOSTBRIDGE,  /* same PCIe host bridge (root complex) */
    MKI_LOC_NUMA,        /* same NUMA node, different root complex */
    MKI_LOC_SYS,         /* across the CPU interconnect */
    MKI_LOC_UNKNOWN      /* no hwloc view of one of them */
};

enum mki_gpulink { MKI_GL_NONE, MKI_GL_PCIE, MKI_GL_NVLINK, MKI_GL_SAME };

struct mki_nic {
    char name[32];       /* verbs device name (mlx5_0, rdmap16s27) */
    int port;
    enum mki_nic_kind kind;
    int numa;            /* -1 unknown */
    char busid[MKI_BUSID_LEN];
};

struct mki_gpu {
    int dev;             /* CUDA ordinal in this process; -1 when faked */
    char busid[MKI_BUSID_LEN];
    char name[48];
    unsigned char uuid[16];
    int sm_count;
    int numa;            /* -1 unknown */
    char cpuset[128];    /* CPU list near the GPU ("0-47,96-143"), "" unknown */
    int nvlinks;         /* active NVLinks, -1 unknown */
    int nnics;           /* nearest NICs (ties kept) */
    int nic[MKI_TOPO_NICS_PER_GPU];
    enum mki_locality nic_loc;
};

struct mki_host_topo {
    int ngpus;
    struct mki_gpu gpu[MKI_TOPO_MAX_GPUS];
    enum mki_gpulink link[MKI_TOPO_MAX_GPUS][MKI_TOPO_MAX_GPUS];
    int nvlinks[MKI_TOPO_MAX_GPUS][MKI_TOPO_MAX_GPUS];
    int nnics;
    struct mki_nic nic[MKI_TOPO_MAX_NICS];
    int nnuma;           /* 0 unknown */
    int have_hwloc, have_nvml, have_verbs, fake;
    char source[160];    /* "hwloc XML tests/xml/dgx.xml, fake GPUs" */
    char notes[512];     /* what could not be found, and why */
};

/* Where the host view comes from; NULL fields mean "this machine". */
struct mki_topo_opts {
    const char *xml;        /* hwloc XML file instead of this machine */
    const char *fake_gpus;  /* MK_TOPO_FAKE_GPUS syntax */
    const char *net_devices;/* MK_NET_DEVICES syntax */
    int verbs;              /* consult libibverbs (0 for fixtures) */
};

/* Options from the environment (MK_TOPO_XML, MK_TOPO_FAKE_GPUS,
 * MK_NET_DEVICES). */
void mki_topo_opts_env(struct mki_topo_opts *opts);

/* Discover the host.  Never fails for a missing source (the host view is
 * then partial and notes says why); fails for a malformed MK_* value or
 * an unreadable MK_TOPO_XML. */
mkResult_t mki_topo_discover(const struct mki_topo_opts *opts,
                             struct mki_host_topo *out);

/* The GPU of a host view with this bus id, or -1. */
int mki_topo_gpu_by_busid(const struct mki_host_topo *h, const char *busid);

/* ---- pieces of discovery (each file's entry point) ------------------ */
/* hwloc.c: NUMA, cpusets, NICs with PCI locality, NIC choice per GPU.
 * mkErrUnsupported, with no message, when hwloc is not built in or cannot
 * load this machine (the caller goes on without locality); an error with
 * a message for an unreadable MK_TOPO_XML or a bad MK_NET_DEVICES. */
mkResult_t mki_topo_hwloc(const struct mki_topo_opts *opts,
                          struct mki_host_topo *h);
/* Choose each GPU's NICs among h->nic (after MK_NET_DEVICES) when hwloc
 * gave no locality: all tie. */
void mki_topo_nics_without_locality(struct mki_host_topo *h);
/* nvml.c: active NVLinks and NVLink P2P between the GPUs found. */
void mki_topo_nvml(struct mki_host_topo *h);
/* The share of its NICs that GPU g can count on: each NIC split among the
 * GPUs that chose it (a node with fewer NICs than GPUs), averaged. */
double mki_topo_nic_share(const struct mki_host_topo *h, int g);
/* MK_NET_DEVICES: keep (or with ^, drop) the named devices. */
mkResult_t mki_topo_filter_nics(const char *spec, struct mki_host_topo *h);
/* "n=8,link=nv18,sms=132" */
mkResult_t mki_topo_parse_fake(const char *spec, int *n, enum mki_gpulink *link,
                               int *nvlinks, int *sms);
void mki_topo_note(struct mki_host_topo *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "0000:1B:00.0" or NVML's "00000000:1b:00.0" -> "0000:1b:00.0"; -1 when
 * it is not a PCI bus id. */
int mki_busid_norm(const char *in, char out[MKI_BUSID_LEN]);
/* The kinds of the NICs GPU gpu uses (bit per enum mki_nic_kind; every
 * NIC of the host when gpu < 0 or it has none of its own). */
unsigned mki_topo_nic_kinds(const struct mki_host_topo *h, int gpu);

/* ---- node grouping (nodes.c) -------------------------------------- */
/* The key that puts ranks on one node: the PMIx node id within the PMIx
 * namespace when this process is a PMIx client, else hostname + boot id. */
uint64_t mki_topo_node_key(void);
/* keys[nranks] -> node and local rank of every rank (arrays of nranks),
 * hosts in order of first appearance, each split into virtual nodes of
 * node_size consecutive local ranks (0: one node per host).  Returns the
 * number of nodes. */
int mki_topo_group(const uint64_t *keys, int nranks, int node_size,
                   int *node_of, int *local_rank_of);
/* Fill comm->node, nnodes, local_rank, local_size from comm->hosts. */
mkResult_t mki_topo_group_nodes(struct mkComm *comm);

/* ---- the communicator's view (topo.c) ----------------------------- */
struct mki_rank_facts {
    uint64_t node_key;
    uint64_t cfg_hash;         /* MK_TRANSPORT + MK_SM_SPLIT: must agree */
    int32_t sm_budget;         /* config smBudget (MK_SM_BUDGET), 0: none */
    int32_t has_gpu;
    int32_t nnics;
    uint32_t nic_kinds;        /* bit per enum mki_nic_kind of its NICs */
    int32_t nlinks;
    struct mki_gpu gpu;        /* nic[] indexes nic_names below */
    char nic_names[MKI_TOPO_NICS_PER_GPU][32];
    int32_t nic_ports[MKI_TOPO_NICS_PER_GPU];
    double nic_share;          /* per NIC, this GPU's share of it */
    struct {
        char busid[MKI_BUSID_LEN];
        int32_t link;          /* enum mki_gpulink */
        int32_t nvlinks;
    } links[MKI_TOPO_MAX_GPUS]; /* my GPU to each GPU this process sees */
};

struct mki_topo {
    struct mki_host_topo host;
    int my_gpu;                /* index in host.gpu, -1 none */
    int nranks;
    struct mki_rank_facts *facts;
    int *node_of, *local_rank_of;
    enum mki_path *path;       /* to each rank */
    int *path_nvlinks;
    int *sharers;              /* per rank: ranks of its host on its GPU */
    int gpu_sharers;           /* sharers[my rank] */
};

struct mkComm;
mkResult_t mki_topo_setup(struct mkComm *comm);
/* The RDMA devices this rank drives (nearest to its GPU, after
 * MK_NET_DEVICES): up to max names and ports; returns how many (0: none,
 * use the socket transport or the transport's own default). */
int mki_topo_my_nics(const struct mkComm *comm, const char **names, int *ports,
                     int max);
void mki_topo_free(struct mkComm *comm);
/* The path from rank a to rank b (any two ranks, so that every rank can
 * derive the same communicator-wide facts); *nvlinks for NVLINK. */
enum mki_path mki_topo_path(const struct mki_topo *t, int a, int b, int *nvlinks);
/* Pin the calling thread to the CPUs near this rank's GPU (proxy
 * threads); mkSuccess without doing anything when they are unknown. */
mkResult_t mki_topo_bind_thread(const struct mki_topo *topo);
/* Parse a CPU list "0-3,8" into a cpu_set_t-sized mask; -1 malformed. */
int mki_cpulist_parse(const char *list, void *cpu_set, size_t setsize);

/* ---- text (print.c) ------------------------------------------------ */
void mki_topo_print_host(struct mki_strbuf *sb, const struct mki_host_topo *h);

#endif /* MKI_TOPO_H */
