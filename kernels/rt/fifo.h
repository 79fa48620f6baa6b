/*
 * fifo.h - the GPU -> proxy command ring, shared by C (src/proxy.c) and
 * CUDA (kernels/common/fifo.cuh).
 *
 * Memory (one host-pinned, device-mapped allocation):
 *
 *     [ header: tail | done | error | host_head  (one 64-byte line each) ]
 *     [ slot 0 ][ slot 1 ] ... [ slot nslots-1 ]      64 bytes per slot
 *
 * Producers (GPU INTER_SEND CTAs; a host thread in the CPU tests):
 *   ticket = atomic add 1 on a head counter (device memory on the GPU,
 *            host_head for host producers);
 *   wait while ticket - tail >= nslots (the ring is full), with backoff;
 *   write words 1..7 of slot[ticket % nslots], then word 0 with a release
 *   store (it has MKI_FIFO_VALID set, so a slot is never half-read).
 * The proxy (one consumer):
 *   acquire-load word 0 of slot[tail % nslots]; when valid, post it,
 *   store 0 to word 0, then release-store tail + 1.
 * done counts commands whose local part completed (source bytes reusable;
 * a FLUSH completes when everything before it did); the GPU waits on it
 * before returning.  error becomes nonzero (an mkResult_t) when the proxy
 * failed; producers stop waiting when they see it.
 */
#ifndef MKI_FIFO_H
#define MKI_FIFO_H

#include <stdint.h>

#define MKI_FIFO_SLOT_WORDS 8
#define MKI_FIFO_VALID (1ull << 63)
#define MKI_FIFO_HDR_BYTES 256

enum mki_fifo_kind {
    MKI_CMD_WRITE = 1,         /* bytes, no signal */
    MKI_CMD_WRITE_SIGNAL = 2,  /* bytes, then the signal */
    MKI_CMD_SIGNAL = 3,        /* signal after every earlier write (fence) */
    MKI_CMD_FLUSH = 4          /* done advances once all before it are done */
};

/* How a signal changes its counter (transports/transport.h says what
 * each transport guarantees). */
enum mki_sig_op {
    MKI_SIG_NONE = 0, MKI_SIG_SET = 1, MKI_SIG_ADD = 2, MKI_SIG_MAX = 3
};

/* A command as both sides see it (decoded). */
struct mki_fifo_cmd {
    uint32_t kind;       /* enum mki_fifo_kind */
    uint32_t peer;       /* destination rank */
    uint32_t sig_op;     /* MKI_SIG_SET / _ADD / _MAX (transport.h) */
    uint32_t region;     /* registered region index (both ends) */
    uint64_t loff, roff, bytes;
    uint64_t sig_off, sig_val;
};

struct mki_fifo_slot {
    uint64_t w[MKI_FIFO_SLOT_WORDS];
};

/* The header; tail/done/error are written by the proxy only. */
struct mki_fifo_hdr {
    uint64_t tail, pad0[7];
    uint64_t done, pad1[7];
    uint64_t error, pad2[7];
    uint64_t host_head, pad3[7];
};

/* What a kernel gets (by value) to push commands. */
struct mki_fifo_dev {
    struct mki_fifo_slot *slots;     /* mapped host memory (device address) */
    struct mki_fifo_hdr *hdr;        /* mapped host memory (device address) */
    unsigned long long *head;        /* device memory, zeroed at setup */
    unsigned int nslots;             /* a power of two */
    unsigned long long *tail_seen;   /* device memory, zeroed: the largest
                                      * tail a producer read (NULL: none
                                      * kept, every push past the first
                                      * nslots reads the host's tail) */
};

#ifdef __cplusplus
#define MKI_FIFO_FN static inline __host__ __device__
#else
#define MKI_FIFO_FN static inline
#endif

/* word 0: VALID | kind:4 @56 | sig_op:2 @52 | region:4 @48 | peer:32 */
MKI_FIFO_FN uint64_t mki_fifo_word0(const struct mki_fifo_cmd *c)
{
    return MKI_FIFO_VALID | (uint64_t)(c->kind & 0xf) << 56 |
           (uint64_t)(c->sig_op & 0x3) << 52 |
           (uint64_t)(c->region & 0xf) << 48 | (uint64_t)c->peer;
}

/* Words 1..7 of a command (w[1..7] written, w[0] left alone). */
MKI_FIFO_FN void mki_fifo_payload(const struct mki_fifo_cmd *c, uint64_t *w)
{
    w[1] = c->loff;
    w[2] = c->roff;
    w[3] = c->bytes;
    w[4] = c->sig_off;
    w[5] = c->sig_val;
    w[6] = 0;
    w[7] = 0;
}

MKI_FIFO_FN void mki_fifo_decode(uint64_t w0, const uint64_t *w,
                                 struct mki_fifo_cmd *c)
{
    c->kind = (uint32_t)(w0 >> 56) & 0xf;
    c->sig_op = (uint32_t)(w0 >> 52) & 0x3;
    c->region = (uint32_t)(w0 >> 48) & 0xf;
    c->peer = (uint32_t)w0;
    c->loff = w[1];
    c->roff = w[2];
    c->bytes = w[3];
    c->sig_off = w[4];
    c->sig_val = w[5];
}

MKI_FIFO_FN struct mki_fifo_slot *mki_fifo_slots(struct mki_fifo_hdr *h)
{
    return (struct mki_fifo_slot *)((char *)h + MKI_FIFO_HDR_BYTES);
}

/* Bytes of a ring of nslots slots (header included). */
MKI_FIFO_FN uint64_t mki_fifo_bytes(uint32_t nslots)
{
    return MKI_FIFO_HDR_BYTES + (uint64_t)nslots * sizeof(struct mki_fifo_slot);
}

#endif /* MKI_FIFO_H */
