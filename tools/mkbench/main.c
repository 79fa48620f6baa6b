/*
 * mkbench - benchmarks of mkernel's operations against the unfused
 * NCCL + cuBLAS sequence, in one process, with CUDA events, medians,
 * rotated buffers and random data; JSON and a plot per run
 * (bench/results/<device>/, or $OUT when set).
 *
 *   mkbench gemm [options]      the GEMM engine against cuBLAS
 *   mkbench coll [options]      the collectives against NCCL (under mpirun)
 *   mkbench ag_gemm [options]   mkAllGatherGemm against NCCL all-gather +
 *                               cuBLAS (under mpirun)
 *   mkbench gemm_ar [options]   mkGemmAllReduce against cuBLAS + NCCL all-reduce
 *   mkbench gemm_rs [options]   mkGemmReduceScatter against cuBLAS + NCCL
 *                               reduce-scatter (under mpirun)
 *   mkbench moe [options]       mkMoEDispatch and mkMoECombine against NCCL's
 *                               all-to-allv with pack/unpack kernels (under
 *                               mpirun)
 *   mkbench attn [options]      mkRingAttention's core alone on one GPU
 *                               against mki_attn_run (bench/attn_sdpa.py:
 *                               PyTorch's SDPA on the same shapes)
 *   mkbench ring_attn [options] mkRingAttention against the unfused NCCL ring
 *                               and the core alone on the same work (under
 *                               mpirun)
 */
#include <stdio.h>
#include <string.h>

int mkb_gemm_main(int argc, char **argv);
int mkb_ag_gemm_main(int argc, char **argv);
int mkb_gemm_rs_main(int argc, char **argv);
int mkb_gemm_ar_main(int argc, char **argv);
int mkb_moe_main(int argc, char **argv);
int mkb_attn_main(int argc, char **argv);
int mkb_ring_attn_main(int argc, char **argv);
#ifdef MKB_HAVE_COLL
int mkb_coll_main(int argc, char **argv);
#endif

static int usage(void)
{
    fprintf(stderr, "usage: mkbench gemm [options]   (mkbench gemm --help)\n"
                    "       mkbench ag_gemm [options] (under mpirun; --help)\n"
                    "       mkbench gemm_rs [options] (under mpirun; --help)\n"
                    "       mkbench gemm_ar [options] (under mpirun; --help)\n"
                    "       mkbench moe [options]     (under mpirun; --help)\n"
                    "       mkbench attn [options]    (one GPU; --help)\n"
                    "       mkbench ring_attn [options] (under mpirun; --help)\n"
#ifdef MKB_HAVE_COLL
                    "       mkbench coll [options]   (mkbench coll --help)\n"
#endif
            );
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (strcmp(argv[1], "gemm") == 0) return mkb_gemm_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "ag_gemm") == 0)
        return mkb_ag_gemm_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "gemm_rs") == 0)
        return mkb_gemm_rs_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "gemm_ar") == 0)
        return mkb_gemm_ar_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "moe") == 0) return mkb_moe_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "attn") == 0) return mkb_attn_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "ring_attn") == 0) return mkb_ring_attn_main(argc - 1, argv + 1);
#ifdef MKB_HAVE_COLL
    if (strcmp(argv[1], "coll") == 0) return mkb_coll_main(argc - 1, argv + 1);
#endif
    return usage();
}
