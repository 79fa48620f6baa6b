/* Tile-schedule arithmetic of the GEMM engine, shared by host and device.
 *
 * Plain C99 so that tests/unit/test_gemm_args.c can check it with no CUDA
 * toolkit; under nvcc the same functions become __host__ __device__, so the
 * kernel and the host planner can never disagree about which tile is which.
 */
#ifndef MKI_GEMM_SCHED_H
#define MKI_GEMM_SCHED_H

#include <stdint.h>

#include "rt/hd.h"

/* Tile shape of the engine (fixed: the kernel is tuned for it). */
#define MKI_GEMM_BM 128
#define MKI_GEMM_BN 256
#define MKI_GEMM_BK 64
/* Default number of M-blocks that share one sweep over N (L2 reuse). */
#define MKI_GEMM_GROUP_M 8

MKI_HD int64_t mki_gemm_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Linear tile index -> (m block, n block), "grouped" order: tiles walk down a
 * band of group_m M-blocks before moving right in N, so the CTAs that run at
 * the same time share a few A row-blocks and a few B column-blocks in L2.
 *
 *   group_m = 2, 3 x 4 tiles:   n ->
 *                        m   0  2  4  6
 *                        |   1  3  5  7
 *                        v   8  9 10 11   (last band is only 1 high)
 */
MKI_HD void mki_gemm_tile_of(int t, int num_m, int num_n, int group_m, int *mb, int *nb)
{
    int per_group = group_m * num_n;
    int g = t / per_group;
    int first_m = g * group_m;
    int gsz = num_m - first_m < group_m ? num_m - first_m : group_m;
    int r = t - g * per_group;
    *mb = first_m + r % gsz;
    *nb = r / gsz;
}

/* Work units of cm tiles stacked along M (cm CTAs of a cluster share the B
 * tile): unit index -> (first m block of the unit, n block), in the grouped
 * order over units; the band is group_m tiles high as for single tiles. */
MKI_HD int mki_gemm_num_units(int num_m, int num_n, int cm)
{
    return (num_m + cm - 1) / cm * num_n;
}

MKI_HD void mki_gemm_unit_of(int u, int num_m, int num_n, int group_m, int cm, int *mb, int *nb)
{
    int g = group_m / cm > 0 ? group_m / cm : 1;
    int pm;
    mki_gemm_tile_of(u, (num_m + cm - 1) / cm, num_n, g, &pm, nb);
    *mb = pm * cm;
}

/* Inverse of mki_gemm_tile_of (for tests and for fused kernels that need to
 * know when a given tile runs). */
MKI_HD int mki_gemm_index_of(int mb, int nb, int num_m, int num_n, int group_m)
{
    int g = mb / group_m;
    int first_m = g * group_m;
    int gsz = num_m - first_m < group_m ? num_m - first_m : group_m;
    return g * group_m * num_n + nb * gsz + (mb - first_m);
}

/* Number of tiles CTA `rank` of `nctas` runs: tiles rank, rank+nctas, ... */
MKI_HD int mki_gemm_tiles_of_cta(int num_tiles, int rank, int nctas)
{
    return rank < num_tiles ? (num_tiles - 1 - rank) / nctas + 1 : 0;
}

#endif
