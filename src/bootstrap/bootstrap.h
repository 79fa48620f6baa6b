/*
 * bootstrap.h - the out-of-band channel every communicator is built on.
 *
 * A bootstrap is a small ops table (allgather, bcast, barrier, close) over
 * a context.  Two implementations exist:
 *   - pmix: Put/Commit/Fence/Get through the launcher's PMIx server; used
 *     by mkCommInit for the whole job;
 *   - tcp:  a ring of TCP connections among the members, set up through a
 *     root rendezvous (mkGetUniqueId / mkCommInitRank) or through an
 *     address exchange on a parent bootstrap (mkCommSplit).
 * It carries every later exchange: host facts, IPC handles, topology,
 * transport addresses.
 *
 * Contract of every op:
 *   - collective: all members call the same ops in the same order with the
 *     same sizes (the tcp ring checks this and reports a mismatch);
 *   - blocking, with a deadline of the context's timeout; on expiry it
 *     returns mkErrTimeout naming the peer it waited for;
 *   - on failure the detail is in the thread error (mki_thread_error()).
 */
#ifndef MKI_BOOTSTRAP_H
#define MKI_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include "mkernel.h"

struct mki_bootstrap_ops {
    const char *name;
    /* buf holds nranks slots of `bytes`; slot `rank` is this rank's input;
     * on return every slot is filled. */
    mkResult_t (*allgather)(void *ctx, void *buf, size_t bytes);
    mkResult_t (*bcast)(void *ctx, void *buf, size_t bytes, int root);
    mkResult_t (*barrier)(void *ctx);
    /* Release the context; never blocks on peers. */
    void (*close)(void *ctx);
};

/* ---- pmix --------------------------------------------------------- */
/* 1 when libmkernel was built with PMIx support. */
int mki_bootstrap_pmix_available(void);
/* Connect to the launcher: on success *ops and *ctx are the bootstrap.
 * *no_launcher is set to 1 (and mkErrBootstrap returned) when no PMIx
 * server is reachable, so the caller can fall back to a size-1
 * communicator. */
mkResult_t mki_bootstrap_pmix_init(int timeout_ms, int *rank, int *nranks,
                                   int *no_launcher, const struct mki_bootstrap_ops **ops,
                                   void **ctx);

/* Finalize PMIx now if no communicator uses it any more (mkCommAbort);
 * otherwise PMIx stays up until the process exits. */
void mki_bootstrap_pmix_release(void);

/* ---- tcp ---------------------------------------------------------- */
extern const struct mki_bootstrap_ops mki_bootstrap_tcp_ops;

union mki_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
};

/* The layout of mkUniqueId's internal bytes. */
struct mki_unique_id {
    uint32_t magic;
    uint32_t version;
    uint64_t cookie;
    union mki_sockaddr root;
};

/* Check the bytes of a unique id from the user (magic, version, an IPv4 or
 * IPv6 address with a port) and copy them out; mkErrInvalidArgument with
 * a message saying what to do otherwise.  Exposed for the fuzzer. */
mkResult_t mki_unique_id_parse(const void *bytes, size_t len, struct mki_unique_id *out);

/* Start a rendezvous root in a background thread and describe it in *id.
 * The root serves one mkCommInitRank round and then exits. */
mkResult_t mki_tcp_root_start(struct mki_unique_id *id, int timeout_ms);
/* Join the rendezvous of id as rank of nranks. */
mkResult_t mki_bootstrap_tcp_init(const struct mki_unique_id *id, int rank,
                                  int nranks, int timeout_ms, void **ctx);

/* Build a tcp bootstrap for a subgroup using a parent bootstrap to swap
 * addresses: every member of the parent calls this; members with
 * member == 0 only help the exchange and get *ctx = NULL. */
mkResult_t mki_bootstrap_tcp_from_parent(const struct mki_bootstrap_ops *pops,
                                         void *pctx, int prank, int pnranks,
                                         int member, int rank, int nranks,
                                         const int *group, uint64_t cookie,
                                         int timeout_ms, void **ctx);

/* Pick the local address to listen on (MK_BOOTSTRAP_IFNAME).  Exposed for
 * the unit tests. */
mkResult_t mki_tcp_pick_address(union mki_sockaddr *addr);
/* The same rule for any interface list: spec is a comma list of name
 * prefixes ("" = the first non-loopback interface up, else lo; a leading ^
 * excludes, preferring non-loopback); var names it in messages; fail is
 * the result when nothing matches. */
mkResult_t mki_sock_pick_address(const char *spec, const char *var,
                                 mkResult_t fail, union mki_sockaddr *addr);
/* Format an address as "host:port" (for messages). */
const char *mki_sockaddr_str(const union mki_sockaddr *addr, char *buf,
                             size_t len);

#endif /* MKI_BOOTSTRAP_H */
