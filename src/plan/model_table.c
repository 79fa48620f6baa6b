/*
 * model_table.c - the cost model's constants (struct mki_model, plan.h):
 * the one table calibration replaces; the model itself is model.c.
 */
#include "config.h"
#include "mki.h"
#include "plan/plan.h"

/* Figures from shared/REFERENCE.md (2 x H200, NV18, 2026-11-22) and the
 * public anchors it lists.  Calibration replaces this table only. */
const struct mki_model mki_model_default = {
    .sm_count = 132,
    .gemm_tflops = 700.0,      /* cuBLAS bf16 677-791 TFLOP/s */
    /* Our attention core (mkbench attn, H100, 2026-11-27, the consumers
     * with their descriptors in uniform registers; FLOPs computed, half
     * under a causal mask): head_dim 128 596 / 628 TFLOP/s without a
     * mask at 4k / 16k, 543 / 561 causal; head_dim 64 464 / 480, causal
     * 377 / 454 (the diagonal's share: 1 + attn_diag / keys).  The
     * diagonal's share at head_dim 64 refitted on an H200 (2026-11-29,
     * its partial query block first: causal 404 / 457 at 4k / 16k). */
    .attn_tflops = {472.0, 610.0},
    .attn_causal = {1.03, 0.90},
    .attn_diag = {830.0, 0.0},
    .tile_m = 128,
    .tile_n = 256,
    .nvlink_link_gbs = 26.5,   /* NV18: 18 x 26.5 = 477 GB/s per direction */
    .nvlink_ref_links = 18,
    .tma_cta_gbs = 43.0,       /* cp.async.bulk, one thread per CTA */
    .tma_sat_gbs = 372.0,      /* 8 CTAs 343, 16 353, 132 372 */
    .reg_cta_gbs = 20.0,       /* 512 threads, 16-byte stores */
    .reg_sat_gbs = 367.0,      /* 16 CTAs 316-322, 132 367 */
    .ce_gbs = 385.0,           /* cudaMemcpyPeerAsync beside a GEMM */
    /* mkAllGather, mkReduceScatter, mkAllReduce, mkAllToAll at 2 x H200
     * (thirtieth session, mkbench coll, the default path and TMA, 1-256
     * MB per rank): 16 us + bytes / 328 GB/s + one chunk per CTA at 20
     * GB/s fits all 40 records within 8.6% (tools/model_check.py) */
    .coll_sat_gbs = 328.0,
    .coll_chunk_gbs = 20.0,
    .coll_chunk_bytes = 256u << 10,
    .pcie_gbs = 24.0,          /* PCIe Gen4 x16 peer copies */
    .host_gbs = 10.0,          /* two PCIe hops through pinned host memory */
    .same_gpu_gbs = 2000.0,    /* device-local copy: 4.25 TB/s read+write */
    .local_cta_gbs = 32.0,     /* 4.25 TB/s / 132 SMs */
    .reduce_cta_gbs = 32.0,    /* fp32 add streams at the SM's HBM share */
    .ib_nic_gbs = 50.0,        /* ConnectX-7, 400 Gb/s */
    .efa_nic_gbs = 25.0,       /* p5en: 16 x 200 Gb/s EFA, 2 per GPU */
    .socket_gbs = 4.5,         /* TCP, a sending and a receiving thread
                                * per rank: 4.3-5.0 GB/s bus bandwidth,
                                * 2 x H100 virtual nodes, NOTES 2026-11-27 */
    .inter_send_per_nic = 1,
    /* From mkbench on 2, 4 and 8 x H200 (tools/model_check.py, NOTES): a
     * small collective takes ~15 / 22 / 60 us at 2 / 4 / 8 ranks, and at
     * 1 GB per rank moves 0.92 / 0.80 / 0.77 of the 2-peer rate. */
    .peer_latency_us = 6.0,
    .link_share_loss = 0.25,
    .fused_overhead_us = 10.0,
    .epi_overhead_us = 3.0,    /* the last own tiles' wait and combine */
    /* Per tile of mkGemmReduceScatter's kernel over the GEMM's own (lab
     * sums per CTA, 2 x H100, 8192^3, NOTES "Fourteenth session"): an own
     * tile's period 59 us, a peer tile's 52, the GEMM's 48-50. */
    .epi_own_us = 10.0,
    .epi_peer_us = 3.0,
    .epi_link_eff = 0.88, /* 4 x H100: 0.82-0.86 (16th session), then 0.88-0.94 with the combine by TMA (17th) */
    .epi_link_eff_wide = 0.93, /* 4 x H100, 17th session: 0.91-0.95 at the same shapes */
    .launch_us = 5.0,
    /* the decode kernel's read of B by every SM, and its MMA rate (one
     * warpgroup per SM, the m rows as wgmma's N); fitted on 2 x H200 event
     * times of the thirty-fourth session (its deeper ring and the sum with
     * more loads in flight: all-reduce m = 1 / 16 / 64 / 128 28.6 / 32.3 /
     * 38.0 / 49.9 us, reduce-scatter m = 16 / 64 / 128 29.7 / 34.6 / 40.3;
     * the model within 5%).  Before: 3000 GB/s and 0.42 (thirtieth). */
    .hbm_read_gbs = 3300.0,
    .decode_mma_eff = 0.50,
    /* The MoE collectives' kernels on 2 x H200 (thirtieth session, mkbench
     * moe, DeepSeek-like 4096 / 16384 tokens and Mixtral-like 8192,
     * random routing): the dispatch 103 us + its crossing rows at 223 GB/s
     * (0.365 / 1.152 / 0.331 ms), the combine, a warp per token with a
     * few rows' loads in flight per lane, 30 us + every slot's row at 457 GB/s
     * (1.058 / 4.142 / 0.349 ms) */
    .moe_send_gbs = 223.0,
    .moe_dispatch_us = 87.0,
    .moe_pull_gbs = 457.0,
    .moe_combine_us = 14.0,
    /* The layer's combine once the down projection has pushed every row
     * to its token's rank (2 x H200, thirty-second session, the kernel's
     * first CTA in to its last out by its globaltimer trace): 0.18 / 0.71
     * ms for 0.47 / 1.88 GB of slot rows at 4096 / 16384 tokens, 14 us
     * fixed: 2.8 / 2.7 TB/s */
    .moe_sum_gbs = 2750.0,
    /* mkMoEDispatchGemm and the layer (2 x H200, thirtieth session, the
     * same shapes, random and skewed routing): 12 records within 9.5% */
    .moe_gemm_eff = 0.80,
    .gemm_interference = 1.02, /* a peer copy slowed cuBLAS 8192^3 by 1.5% */
    .fuse_margin = 0.05,
    .partial_bytes = 4,        /* fp32 partial sums (one rounding) */
    .chunk_min = 256u << 10,
    .chunk_max = 8u << 20,
    .chunks_per_shard = 8,
};

/* One NIC's rate (the kinds a node has) times the rank's share of it. */
double mki_plan_nic_gbs(unsigned nic_kinds, double share)
{
    const double one = (nic_kinds & (1u << MKI_NIC_EFA)) ? mki_model_default.efa_nic_gbs
                                                         : mki_model_default.ib_nic_gbs;
    return one * share;
}
