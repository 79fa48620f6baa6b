/*
 * fake_nic.h - an in-process NIC for the protocol tests (not part of the
 * library).  Ranks run as threads of one process and share a fabric; each
 * rank's NIC is a backend of rdma.h, so the RC and SRD engines run
 * unchanged on top of it.
 *
 * The fabric delivers pending writes in random order (RC keeps order per
 * queue pair, as the hardware does), completes them after a random number
 * of polls, checks every remote access against the registered regions
 * (a violation is a "remote access error" completion, nothing written),
 * holds a write-with-immediate until the target posted a receive, and can
 * fail the next n writes with a chosen status.
 */
#ifndef MKI_FAKE_NIC_H
#define MKI_FAKE_NIC_H

#include <stdint.h>
#include "rdma.h"

#define MKI_FAKE_REM_ACCESS_ERR 10
#define MKI_FAKE_RETRY_EXC_ERR 12

struct mki_fake_params {
    uint64_t seed;
    uint32_t max_msg;     /* split writes into chunks of this much */
    int sq_depth, rq_depth;
    int max_delay;        /* completions arrive 0..max_delay polls late */
};

struct mki_fake_stats {
    uint64_t delivered;    /* writes placed */
    uint64_t reordered;    /* placed while an older write was pending */
    uint64_t late;         /* completions held back at least one poll */
    uint64_t rnr;          /* write-with-immediate found no receive */
};

struct mki_fake_fabric;

struct mki_fake_fabric *mki_fake_fabric_create(const struct mki_fake_params *p);
void mki_fake_fabric_destroy(struct mki_fake_fabric *f);
/* The fabric that the fake transports' init attaches to. */
void mki_fake_fabric_use(struct mki_fake_fabric *f);
/* Fail the next n deliveries with status (no byte written). */
void mki_fake_fail_next(struct mki_fake_fabric *f, int n, int status);
void mki_fake_stats(struct mki_fake_fabric *f, struct mki_fake_stats *s);

/* The engines over the fake NIC, as transports. */
extern const struct mki_transport_ops mki_transport_fake_rc;
extern const struct mki_transport_ops mki_transport_fake_srd;

#endif /* MKI_FAKE_NIC_H */
