/* mkernel internal GEMM engine: host entry points.
 *
 *   D = alpha * A * op(B) + beta * C
 *   A: M x K row-major (lda >= K)
 *   B: K x N row-major (trans_b = 0, ldb >= N) or N x K row-major
 *      (trans_b = 1, ldb >= K: the layout of stored Linear weights)
 *   C, D: M x N row-major (ldc, ldd >= N); C may be D itself (same ld)
 *   bf16 or fp16 inputs, fp32 accumulation, bf16/fp16/fp32 output.
 *
 * Internal (mki_*): the public ops in src/ops/ call it and turn the status
 * into an mkResult_t (OK -> mkSuccess, INVALID -> mkErrInvalidArgument,
 * UNSUPPORTED -> mkErrUnsupported, CUDA -> mkErrCuda). Host-only header: no
 * CUDA headers, so CPU unit tests can include it.
 */
#ifndef MKI_GEMM_H
#define MKI_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "rt/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MKI_GEMM_OK = 0,
    MKI_GEMM_ERR_INVALID = 1,     /* a bad argument: the call is wrong */
    MKI_GEMM_ERR_UNSUPPORTED = 2, /* valid, but this engine cannot do it */
    MKI_GEMM_ERR_CUDA = 3         /* a CUDA call failed */
};

typedef enum {
    MKI_DT_BF16 = 0,
    MKI_DT_F16 = 1,
    MKI_DT_F32 = 2
} mki_dtype_t;

typedef struct {
    int64_t m, n, k;
    const void *a;  int64_t lda;   /* 0 -> K */
    const void *b;  int64_t ldb;   /* 0 -> N (trans_b = 0) or K (trans_b = 1) */
    const void *c;  int64_t ldc;   /* read only when beta != 0; 0 -> N */
    void *d;        int64_t ldd;   /* 0 -> N */
    mki_dtype_t in_type;           /* A and B: MKI_DT_BF16 or MKI_DT_F16 */
    mki_dtype_t out_type;          /* C and D */
    int trans_b;
    float alpha, beta;             /* beta == 0: C is not read (may be NULL) */
    int num_ctas;                  /* 0: one per SM; else 1..SM count */
    int group_m;                   /* 0: MKI_GEMM_GROUP_M */
    int cluster_m;                 /* 0: engine's choice; 1 or 2 forces (tuning) */
    void *stream;                  /* cudaStream_t */
} mki_gemm_args;

/* What the validator needs to know about the device (filled by mki_gemm from
 * cudaGetDeviceProperties; filled by hand in CPU tests). */
typedef struct {
    int cc_major, cc_minor;
    int sm_count;
} mki_gemm_device;

/* The launch the validator chose. */
typedef struct {
    int64_t m, n, k, lda, ldb, ldc, ldd; /* with defaults applied */
    int num_m_blk, num_n_blk, num_k_blk, num_tiles;
    int grid;         /* persistent CTAs: min(num_ctas or SMs, units * cluster_m) */
    int cluster_m;    /* CTAs per cluster sharing B tiles (1 or 2) */
    int num_units;    /* work units of cluster_m tiles stacked along M */
    int group_m;
    int epi_direct;   /* 1: D not TMA-storable (ldd or pointer alignment) */
    int noop;         /* 1: M or N is 0, nothing to launch */
} mki_gemm_plan;

/* Pure host code, no CUDA calls: checks every argument and fills `plan`.
 * Returns MKI_GEMM_OK or an error code with a message in msg (what is wrong
 * and what to do). `plan` is written only on success. */
int mki_gemm_validate(const mki_gemm_args *args, const mki_gemm_device *dev,
                      mki_gemm_plan *plan, char *msg, size_t msg_len);

/* Validates, then describes the launch of the persistent GEMM for the
 * library's one launch path (src/ops/launch.c); args->stream is ignored.
 * d->fn is NULL when there is nothing to compute (M or N is 0). */
int mki_gemm_describe(const mki_gemm_args *args, struct mki_launch_desc *d, char *msg,
                      size_t msg_len);

/* Validates, then launches the persistent GEMM on args->stream
 * (asynchronous): the engine on its own (its tests, mkbench gemm). On
 * error nothing is launched and msg says why. */
int mki_gemm(const mki_gemm_args *args, char *msg, size_t msg_len);

/* A grouped GEMM: D_g = A_g op(B_g) for groups g = 0 .. groups - 1 in one
 * persistent launch, the groups' rows known only on the device.  Group g
 * owns rows [offsets[g], offsets[g + 1]) of A (rows x k) and of D
 * (rows x n): offsets[0] = 0, non-decreasing, offsets[groups] <= rows,
 * groups <= MKI_GEMM_MAX_GROUPS.  B holds the groups' matrices one after
 * the other: transB: groups x (n x k), else groups x (k x n), and then k
 * must be a multiple of 64 (a k-block never reads the next group's rows).
 * Each group's rows are tiled on their own (its last tile stored row by
 * row up to the group's end; rows of D past offsets[groups] untouched).
 * table: device scratch of MKI_GEMM_GROUP_TABLE(rows, groups) int32,
 * written by a one-CTA kernel before the GEMM (the group and the block of
 * every tile); offsets that break the rules make it compute nothing and
 * set table[1] = 1.  glu > 0: a gated linear unit (SwiGLU) on each
 * group's products: B's columns [0, glu) of a group are the gate's,
 * [glu, 2 glu) the up projection's (n = 2 glu), and D (rows x glu) gets
 * silu(x gate) * (x up), glu a multiple of 8.  Asynchronous on
 * args->stream. */
#define MKI_GEMM_MAX_GROUPS 4096
#define MKI_GEMM_GROUP_TABLE(rows, groups) (2 + 2 * ((rows) / 128 + (groups)))
typedef struct {
    int64_t rows, n, k, groups;
    const void *a, *b;
    void *d;
    const int64_t *offsets;        /* device: groups + 1 */
    const uint64_t *halt;          /* device, may be NULL: two words; either
                                    * nonzero when the table kernel runs (an
                                    * error recorded before it): compute
                                    * nothing, table[1] = 2 */
    int32_t *table;                /* device scratch */
    mki_dtype_t in_type, out_type;
    int trans_b;
    int64_t glu;                   /* 0, or the gated unit's columns */
    int num_ctas;                  /* 0: one per SM */
    void *stream;                  /* cudaStream_t */
} mki_gemm_grouped_args;
int mki_gemm_grouped(const mki_gemm_grouped_args *args, char *msg, size_t msg_len);
/* The same as two launches for the library's one launch path: the table
 * kernel (grid 1) and the GEMM; table->fn is NULL when there is nothing
 * to compute.  args->stream is ignored. */
int mki_gemm_grouped_describe(const mki_gemm_grouped_args *args, struct mki_launch_desc *table,
                              struct mki_launch_desc *gemm, char *msg, size_t msg_len);

/* Loads every GEMM kernel now (CUDA's lazy loading can deadlock a launch
 * while another stream spins on a flag: call this at communicator init). */
int mki_gemm_preload(char *msg, size_t msg_len);

size_t mki_dtype_size(mki_dtype_t t);

#ifdef __cplusplus
}
#endif
#endif
