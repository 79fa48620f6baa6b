/*
 * launch.h - a kernel launch as an op describes it, for the one launch
 * path of the library (src/ops/launch.c: co-residency, the launch, the
 * error of the launch).  C99 and CUDA C++; no CUDA headers.
 *
 * The kernel's parameters are copied into the descriptor, so that the
 * C side launches kernels whose parameter types only the .cu knows (the
 * GEMM engine's tensor maps and hooks).
 */
#ifndef MKI_LAUNCH_H
#define MKI_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MKI_LAUNCH_MAXARGS 2
#define MKI_LAUNCH_PARAM_BYTES 4096

struct mki_launch_desc {
    const void *fn;                 /* the kernel (host handle) */
    unsigned grid, block;           /* CTAs, threads per CTA */
    unsigned cluster;               /* CTAs per cluster (1: none) */
    size_t smem;                    /* dynamic shared memory bytes */
    int exact;                      /* 1: every CTA is part of the protocol
                                     * (it must be co-resident as asked);
                                     * 0: a persistent grid that may shrink
                                     * to what is co-resident */
    int nargs;
    size_t used;                    /* bytes of param in use */
    size_t arg_off[MKI_LAUNCH_MAXARGS];
    unsigned char param[MKI_LAUNCH_PARAM_BYTES] __attribute__((aligned(64)));
};

/* Append one kernel argument (64-byte aligned in the descriptor: tensor
 * maps need it); -1 when it does not fit. */
static inline int mki_launch_arg(struct mki_launch_desc *d, const void *p, size_t n)
{
    const size_t off = (d->used + 63) / 64 * 64;
    if (d->nargs == MKI_LAUNCH_MAXARGS || off + n > MKI_LAUNCH_PARAM_BYTES) return -1;
    memcpy(d->param + off, p, n);
    d->arg_off[d->nargs++] = off;
    d->used = off + n;
    return 0;
}

#endif /* MKI_LAUNCH_H */
