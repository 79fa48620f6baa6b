/*
 * roles.h - role dispatch: a kernel's threads (or CTAs) split into
 * consecutive ranges, one per role, as the plan decided (src/plan/).  C99
 * and CUDA C++, so that the host checks what it hands the kernel.
 *
 *     role:      0          1            2        (n = 3)
 *     threads: [0, end[0]) [end[0], end[1]) [end[1], end[2])
 *
 * Each range is a multiple of 32 threads (a role syncs with a named
 * barrier of its own); the last end is the block size.
 */
#ifndef MKI_ROLES_H
#define MKI_ROLES_H

#include <stdint.h>

#include "rt.h"

#define MKI_ROLES_MAX 4

struct mki_roles {
    int32_t n;
    int32_t end[MKI_ROLES_MAX];
};

/* The role of index i, the index's rank inside it and the role's size;
 * -1 past the last role. */
MKI_HD int mki_role_of(const struct mki_roles *r, int i, int *rank, int *size)
{
    int begin = 0;
    for (int k = 0; k < r->n && k < MKI_ROLES_MAX; k++) {
        if (i < r->end[k]) {
            *rank = i - begin;
            *size = r->end[k] - begin;
            return k;
        }
        begin = r->end[k];
    }
    return -1;
}

/* 1 when the ranges are well formed for a block of `threads` threads:
 * 1..MKI_ROLES_MAX roles, each a positive multiple of 32, ending at
 * `threads`. */
MKI_HD int mki_roles_valid(const struct mki_roles *r, int threads)
{
    if (r->n < 1 || r->n > MKI_ROLES_MAX) return 0;
    int begin = 0;
    for (int k = 0; k < r->n; k++) {
        if (r->end[k] <= begin || (r->end[k] - begin) % 32) return 0;
        begin = r->end[k];
    }
    return begin == threads;
}

#endif /* MKI_ROLES_H */
