/*
 * param.h - the one declarative table of MK_* environment parameters, and
 * the only place of the library that reads the environment.
 *
 * Each X(ID, NAME, TYPE, DEFAULT, MIN, MAX, DOC) row declares a parameter;
 * param.c turns the same list into the table that mkinfo and mkernel-env(7)
 * print.  Integers and sizes are range-checked; a malformed value is an
 * error (mkErrInvalidArgument) naming it, never silently replaced by the
 * default.  A communicator reads every parameter once, at its creation
 * (struct mki_params, comm->params); no call reads the environment.
 */
#ifndef MKI_PARAM_H
#define MKI_PARAM_H

#include <stdint.h>
#include "mkernel.h"

enum mki_param_type { MKI_PT_INT, MKI_PT_SIZE, MKI_PT_STR };

#define MKI_PARAMS(X)                                                          \
    X(DEBUG, "MK_DEBUG", MKI_PT_STR, "WARN", 0, 0,                             \
      "Log level: NONE, WARN, INFO or TRACE.")                                 \
    X(DEBUG_SUBSYS, "MK_DEBUG_SUBSYS", MKI_PT_STR, "ALL", 0, 0,                \
      "Comma list of subsystems to log (INIT,BOOT,TOPO,PLAN,MEM,NET,PROXY,"    \
      "COLL,GEMM,ALL); a leading ^ logs all but those.")                       \
    X(DEBUG_FILE, "MK_DEBUG_FILE", MKI_PT_STR, "", 0, 0,                       \
      "Write the log to this file instead of stderr (%h: host, %p: pid).")     \
    X(TIMEOUT_MS, "MK_TIMEOUT_MS", MKI_PT_INT, "300000", 1, INT32_MAX,         \
      "Deadline in milliseconds of every wait (bootstrap, signals, proxy); "   \
      "config field timeoutMs.")                                               \
    X(BOOTSTRAP, "MK_BOOTSTRAP", MKI_PT_STR, "auto", 0, 0,                     \
      "How mkCommInit finds the job: auto (PMIx when a launcher is there, "    \
      "else a size-1 communicator), pmix (fail without a launcher), or none "  \
      "(size 1).")                                                             \
    X(BOOTSTRAP_IFNAME, "MK_BOOTSTRAP_IFNAME", MKI_PT_STR, "", 0, 0,           \
      "Network interface (name prefix) of the TCP bootstrap; ^ excludes. "     \
      "Default: the first non-loopback interface that is up, else lo.")        \
    X(TRANSPORT, "MK_TRANSPORT", MKI_PT_STR, "ibverbs,efa,socket", 0, 0,       \
      "Inter-node transports to try, in order (comma list; a leading ^ "       \
      "excludes); config field transports.")                                   \
    X(SM_BUDGET, "MK_SM_BUDGET", MKI_PT_INT, "0", 0, 4096,                     \
      "SMs one rank may use for its persistent kernels (0: the whole GPU); "   \
      "set it when several ranks share a GPU; config field smBudget.")         \
    X(WORKSPACE_SIZE, "MK_WORKSPACE_SIZE", MKI_PT_SIZE, "0", 0, INT64_MAX,     \
      "Bytes of symmetric workspace per rank (K, M, G suffixes; at least 1M); "\
      "0: 128M per rank of the node plus 1M, at least 256M; config field "    \
      "workspaceSize.")                                                        \
    X(NODE_SIZE, "MK_NODE_SIZE", MKI_PT_INT, "0", 0, 1048576,                  \
      "Split each host into virtual nodes of this many consecutive local "     \
      "ranks (0: one node per host); config field nodeSize.")               \
    X(SM_SPLIT, "MK_SM_SPLIT", MKI_PT_STR, "", 0, 0,                           \
      "Override the plan's SM split: comma list of [op:]key=value, keys "      \
      "compute, intra, inter_send, inter_reduce (CTAs), mover (ce, tma, reg), "\
      "chunk (bytes), fused (0, 1); config field smSplit.")                    \
    X(NET_DEVICES, "MK_NET_DEVICES", MKI_PT_STR, "", 0, 0,                     \
      "RDMA devices to use (NAME[:PORT], comma list; a leading ^ excludes); "  \
      "each GPU takes the nearest of them. Default: all.")                     \
    X(COLL_CTAS, "MK_COLL_CTAS", MKI_PT_INT, "0", 0, 64,                       \
      "CTAs of every collective (0: the plan's choice); for measurements.") \
    X(COLL_AR_ONESHOT, "MK_COLL_AR_ONESHOT", MKI_PT_SIZE, "4M", 0,            \
      1099511627776, "All-reduce in one phase (every rank reduces the whole "  \
      "buffer from every rank's copy) up to this many bytes at 2 ranks, "     \
      "2/n of it at n ranks; two phases (reduce-scatter, all-gather) above; " \
      "0: never.")                                                             \
    X(COLL_ZCOPY_MIN, "MK_COLL_ZCOPY_MIN", MKI_PT_SIZE, "256K", 0,            \
      1099511627776, "All-gather and all-to-all write straight into a "      \
      "registered recvbuf (mkMemAlloc, mkCommRegister) from this many bytes " \
      "per rank's block; below, or 0, through the workspace. Alike on "      \
      "every rank.")                                                           \
    X(COLL_MOVER, "MK_COLL_MOVER", MKI_PT_STR, "tma-send", 0, 0,               \
      "How collectives move bytes: tma (bulk copies by one thread, to peers "  \
      "and locally), tma-send (bulk copies to peers only) or reg (16-byte "    \
      "register loads and stores); for measurements.")                         \
    X(SOCKET_NCONN, "MK_SOCKET_NCONN", MKI_PT_INT, "2", 1, 16,                 \
      "TCP connections per peer of the socket transport; large writes are "    \
      "striped across them.")                                                  \
    X(SOCKET_IFNAME, "MK_SOCKET_IFNAME", MKI_PT_STR, "", 0, 0,                 \
      "Network interface (name prefix) of the socket transport; ^ excludes. "  \
      "Default: the interface of the TCP bootstrap.")                          \
    X(TOPO_XML, "MK_TOPO_XML", MKI_PT_STR, "", 0, 0,                           \
      "Testing aid: read the host's topology from this hwloc XML file "        \
      "instead of discovering it (mkernel-topology(7)).")                      \
    X(TOPO_FAKE_GPUS, "MK_TOPO_FAKE_GPUS", MKI_PT_STR, "", 0, 0,               \
      "Testing aid: invent GPUs, n=N,link=nv18|pcie|none,sms=S, for a host "  \
      "without them (mkernel-topology(7)).")

enum mki_param_id {
#define MKI_PARAM_ENUM_(id, name, type, def, mn, mx, doc) MKI_P_##id,
    MKI_PARAMS(MKI_PARAM_ENUM_)
#undef MKI_PARAM_ENUM_
    MKI_P_COUNT
};

struct mki_param_desc {
    const char *name;
    enum mki_param_type type;
    const char *def;
    int64_t min, max;
    const char *doc;
};

const struct mki_param_desc *mki_param_desc(enum mki_param_id id);
/* The value as set in the environment, or the default (never NULL). */
const char *mki_param_str(enum mki_param_id id);
/* 1 when the variable is set in the environment. */
int mki_param_is_set(enum mki_param_id id);
/* Parse an INT or SIZE parameter; mkErrInvalidArgument with a message in
 * the thread error when the value is malformed or out of range. */
mkResult_t mki_param_int(enum mki_param_id id, int64_t *value);
/* Parse "123", "64K", "256M", "2G" into bytes; -1 when malformed. */
int mki_parse_size(const char *s, int64_t *value);

/* Every parameter's value as read at one moment (a communicator reads
 * them once, at its creation, and keeps this copy). */
#define MKI_PARAM_STR_MAX 256
struct mki_params {
    uint64_t set;                             /* bit id: set in the environment */
    int64_t num[MKI_P_COUNT];                 /* INT and SIZE parameters */
    char str[MKI_P_COUNT][MKI_PARAM_STR_MAX]; /* every parameter as text */
};
/* Read and check them all; the first malformed one is an error naming it
 * (in the thread error). */
mkResult_t mki_params_read(struct mki_params *out);
static inline int64_t mki_params_int(const struct mki_params *p, enum mki_param_id id)
{
    return p->num[id];
}
static inline const char *mki_params_str(const struct mki_params *p, enum mki_param_id id)
{
    return p->str[id];
}
static inline int mki_params_is_set(const struct mki_params *p, enum mki_param_id id)
{
    return (int)((p->set >> id) & 1u);
}

/* The variable that shows a launcher started more than one process
 * (Slurm, Open MPI, MPICH/Hydra, PMIx), or NULL. */
const char *mki_env_launcher(void);

#endif /* MKI_PARAM_H */
