/*
 * test_coll_args.c - the collectives and the device runtime without a GPU:
 * signal/epoch arithmetic, channel and chunk splits, the channel blocks'
 * layout at any number of ranks, error-record decoding, the collectives'
 * plan and role dispatch, and argument validation of every collective and
 * memory call (bad dtype, NULL, count overflow, a broken communicator, no
 * GPU in the process).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mki.h"
#include "mem/mem.h"
#include "plan/plan.h"
#include "rt/channel.h"

static void test_targets(void)
{
    /* Targets grow with the chunk inside a call and across calls. */
    CHECK(mki_sig_target(1, 0) == ((1ull << 32) | 1));
    CHECK(mki_sig_target(1, 5) < mki_sig_target(1, 6));
    CHECK(mki_sig_target(1, 0xfffffffeull) < mki_sig_target(2, 0));
    CHECK(mki_sig_target(7, 3) > mki_sig_target(6, 1000000));
    /* The last chunk of call e satisfies every wait of call e, none of
     * call e + 1. */
    CHECK(mki_sig_target(3, 9) >= mki_sig_target(3, 4));
    CHECK(mki_sig_target(3, 9) < mki_sig_target(4, 0));
}

static void test_split(void)
{
    uint64_t off, len, sum = 0, prev_end = 0;
    /* 1000003 bf16 over 7 channels: contiguous, 16-byte aligned starts. */
    uint64_t bytes = 1000003ull * 2;
    for (int c = 0; c < 7; c++) {
        mki_chan_part(bytes, 7, c, &off, &len);
        CHECK(off == prev_end);
        CHECK(off % 16 == 0);
        prev_end = off + len;
        sum += len;
    }
    CHECK(sum == bytes);
    /* One element over 32 channels: channel 0 has it, the others nothing. */
    mki_chan_part(2, 32, 0, &off, &len);
    CHECK(off == 0 && len == 2);
    mki_chan_part(2, 32, 31, &off, &len);
    CHECK(len == 0 && off == 2);
    CHECK(mki_nchunks(0, 4096) == 0);
    CHECK(mki_nchunks(1, 4096) == 1);
    CHECK(mki_nchunks(4097, 4096) == 2);
    /* All-reduce blocks: multiples of 8 elements, cover count exactly. */
    uint64_t first, elems, total = 0;
    for (int r = 0; r < 3; r++) {
        mki_ar_block(1000003, 3, r, &first, &elems);
        CHECK(first % 8 == 0);
        CHECK(first == total);
        total += elems;
    }
    CHECK(total == 1000003);
    mki_ar_block(1, 4, 3, &first, &elems);
    CHECK(elems == 0);
}

static void test_layout(void)
{
    /* The channel block: the arrays follow each other without overlap. */
    CHECK(mki_ch_seq(MKI_MAXCH - 1) + 8 <= MKI_CH_ARRIVE);
    CHECK(mki_ch_arrive(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_CH_CREDIT);
    CHECK(mki_ch_credit(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_CH_POST);
    CHECK(mki_ch_post(MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 16 <= MKI_CH_DONE);
    CHECK(mki_ch_done(MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_CH_OWED);
    CHECK(mki_ch_post(1, 0) - mki_ch_post(0, MKI_MAXCH - 1) == 16);
    CHECK(mki_ch_post(0, 0) % 16 == 0 && mki_ch_done(0, 0) % 8 == 0);
    /* owed[] and sent[] grow with the ranks, not bounded by the node
     * size; sent[] follows owed[] and ends the block */
    for (int n = 1; n <= 1024; n *= 4) {
        CHECK(mki_ch_owed(1, n - 1, n, MKI_MAXCH - 1) + 8 == mki_ch_sent(0, 0, n, 0, 0));
        CHECK(mki_ch_owed(0, 1, n, 0) - mki_ch_owed(0, 0, n, MKI_MAXCH - 1) == 8);
        CHECK(mki_ch_sent(1, n - 1, n, MKI_NB_CH - 1, MKI_NSLOTS - 1) + 8 == mki_ch_go(n, 0));
        CHECK(mki_ch_go(n, MKI_MAXCH - 1) + 8 == mki_ch_block_bytes(n));
        CHECK(mki_ch_sent(0, 0, n, 1, 0) - mki_ch_sent(0, 0, n, 0, MKI_NSLOTS - 1) == 8);
        CHECK(mki_ch_sent(0, 1, n, 0, 0) - mki_ch_sent(0, 0, n, MKI_NB_CH - 1, MKI_NSLOTS - 1) == 8);
    }
    /* The slot block: the last slot of phase 1 ends at the block's end. */
    for (int n = 1; n <= MKI_MAXLOCAL; n++) {
        uint64_t block = (uint64_t)n * (128u << 20), s = mki_ch_slot_bytes(block, n);
        CHECK(s == 256u << 10 && s % MKI_SLOT_ALIGN == 0);
        CHECK(mki_ch_slot(1, n - 1, MKI_MAXCH - 1, MKI_NSLOTS - 1, n, s) + s <= block);
    }
    CHECK(mki_ch_slot_bytes(1 << 20, 8) == 0); /* too small: refused, not overrun */
    CHECK(mki_ch_slot_bytes(1ull << 40, 2) == MKI_SLOT_MAX);
    /* The heap's first segment: 128 MiB per rank of the largest node plus
     * 1 MiB, at least 256 MiB; a configured size as is. */
    CHECK(mki_heap_default_bytes(0, 1) == 256u << 20);
    CHECK(mki_heap_default_bytes(0, 8) == (8ull << 27) + (1u << 20));
    CHECK(mki_heap_default_bytes(3u << 20, 8) == 3u << 20);
    /* The control block: abort and claim words, tool words, blocks after. */
    CHECK(MKI_CTL_TOOLS >= MKI_CTL_CLAIM + 8 && MKI_CTL_TOOLS + 16 * 8 <= MKI_CTL_BYTES);
}

static void test_record(void)
{
    struct mki_err_record r;
    char buf[512];
    memset(&r, 0, sizeof(r));
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkSuccess);
    r.valid = 1;
    r.kind = MKI_ERR_TIMEOUT;
    r.op = MKI_OP_ALLREDUCE;
    r.rank = 4;
    r.peer = 9;
    r.channel = 3;
    r.chunk = 17;
    r.expected = mki_sig_target(5, 17);
    r.seen = mki_sig_target(4, 2);
    r.epoch = 42;
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkErrTimeout);
    CHECK_CONTAINS(buf, "mkAllReduce (call 42)");
    CHECK_CONTAINS(buf, "rank 4 timed out waiting for rank 9");
    CHECK_CONTAINS(buf, "chunk 17");
    CHECK_CONTAINS(buf, "channel 3");
    CHECK_CONTAINS(buf, "expected signal 0x500000012");
    CHECK_CONTAINS(buf, "saw 0x400000003");
    CHECK_CONTAINS(buf, "MK_TIMEOUT_MS");
    r.chunk = -1; /* a handshake (zero copy, the fused ops' gate) */
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkErrTimeout);
    CHECK_CONTAINS(buf, "handshake");
    r.kind = MKI_ERR_REMOTE;
    r.op = MKI_OP_AG_GEMM;
    r.rank = 5;
    r.peer = 2;
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkErrRemote);
    CHECK_CONTAINS(buf, "mkAllGatherGemm");
    CHECK_CONTAINS(buf, "on rank 5 stopped: rank 2 failed or aborted");
    r.kind = MKI_ERR_PROXY;
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkErrTransport);
    CHECK_CONTAINS(buf, "inter-node proxy failed while sending to rank 2");
    r.op = 99;
    CHECK_RES(mki_err_record_format(&r, buf, sizeof(buf)), mkErrTransport);
    CHECK_CONTAINS(buf, "an operation");
}

/* The cross-node net block at any number of ranks: counters, receive
 * slots and staging slots never overlap and fit the block; channels give
 * way before slots shrink. */
static void test_net_layout(void)
{
    for (int n = 2; n <= 4096; n = n < 16 ? n + 1 : n * 2) {
        struct mki_nb_geom g = mki_nb_geometry(n);
        CHECK(g.nbch >= 1 && g.nbch <= MKI_NB_CH);
        CHECK(g.stride >= MKI_SLOT_ALIGN && g.stride % MKI_SLOT_ALIGN == 0 &&
              g.stride <= MKI_SLOT_MAX);
        CHECK(g.nbch == 1 || g.stride >= MKI_NB_MINSLOT);
        CHECK(mki_nb_credit(&g, 1, n - 1, g.nbch - 1) + 8 <= g.arrive);
        CHECK(mki_nb_arrive(&g, 1, n - 1, g.nbch - 1, MKI_NSLOTS - 1) + 8 <= g.slots);
        CHECK(mki_nb_arrive(&g, 0, 1, 0, 1) - mki_nb_arrive(&g, 0, 1, 0, 0) == 8);
        CHECK(g.slots % MKI_SLOT_ALIGN == 0);
        /* last receive slot of phase 0 ends where the staging begins */
        CHECK(mki_nb_slot(&g, 0, n - 1, g.nbch - 1, MKI_NSLOTS - 1) + g.stride ==
              mki_nb_slot(&g, 0, n, 0, 0));
        CHECK(mki_nb_slot(&g, 1, 2 * n - 1, g.nbch - 1, MKI_NSLOTS - 1) + g.stride == g.bytes);
    }
    CHECK(mki_nb_geometry(2).nbch == MKI_NB_CH && mki_nb_geometry(2).stride == MKI_SLOT_MAX);
    CHECK(mki_nb_geometry(16).nbch == MKI_NB_CH && mki_nb_geometry(16).stride == 128u << 10);
    CHECK(mki_nb_geometry(256).nbch == 2 && mki_nb_geometry(256).stride == MKI_NB_MINSLOT);
}

/* The plan of the plain collectives: the measured rules, then what the
 * kernel runs (roles, mover, phases, zero copy). */
static void test_plan_rules(void)
{
    /* The plan's rule for the collectives' CTAs and mover. */
    /* one-phase all-reduce: the 2-rank limit, x 2 / n at n ranks */
    CHECK(mki_plan_coll_oneshot(4u << 20, 4u << 20, 2) == 1);
    CHECK(mki_plan_coll_oneshot((4u << 20) + 2, 4u << 20, 2) == 0);
    CHECK(mki_plan_coll_oneshot(2u << 20, 4u << 20, 4) == 1);
    CHECK(mki_plan_coll_oneshot((2u << 20) + 2, 4u << 20, 4) == 0);
    CHECK(mki_plan_coll_oneshot(1u << 20, 4u << 20, 8) == 1);
    CHECK(mki_plan_coll_oneshot(4u << 20, 4u << 20, 8) == 0);
    CHECK(mki_plan_coll_oneshot(2, 0, 2) == 0);       /* 0: never */
    CHECK(mki_plan_coll_oneshot(2, 4u << 20, 1) == 0); /* nothing to reduce */
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 16u << 10, 0, 2, 1, 64) == 1);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 48u << 10, 0, 2, 1, 64) == 3);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 1u << 20, 0, 2, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, (4u << 20) - 16, 0, 2, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 4u << 20, 0, 2, 1, 64) == 64);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 4u << 20, 0, 2, 2, 64) == 32); /* across nodes */
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 1u << 20, 1, 2, 1, 64) == 64); /* one phase */
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 512u << 10, 1, 2, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 1u << 30, 0, 2, 1, 33) == 33); /* SM budget (MPS) */
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 1u << 20, 0, 2, 1, 16) == 16);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 1u << 30, 0, 2, 1, 0) == 1);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 0, 0, 2, 1, 64) == 1);
    /* more than 2 ranks of one node: every CTA from 2 MiB blocks, but the
     * two-phase all-reduce from 4 MiB */
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLTOALL, 2u << 20, 0, 4, 1, 64) == 64);
    CHECK(mki_plan_coll_ctas(MKI_OP_REDUCESCATTER, 2u << 20, 0, 3, 1, 64) == 64);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, (2u << 20) - 2, 0, 8, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLREDUCE, 2u << 20, 0, 4, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 2u << 20, 0, 2, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(MKI_OP_ALLGATHER, 2u << 20, 0, 4, 2, 64) == 32); /* across nodes */
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 1u << 20, 0, 2, 1) == MKI_COLL_MOVER_REG);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 4u << 20, 0, 2, 1) == MKI_COLL_MOVER_TMA_SEND);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 64u << 20, 1, 4, 1) == MKI_COLL_MOVER_REG);
    /* more than 2 ranks of one node: the copies' receiving side by TMA too */
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 4u << 20, 0, 4, 1) == MKI_COLL_MOVER_TMA);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLTOALL, 4u << 20, 0, 3, 1) == MKI_COLL_MOVER_TMA);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLTOALL, (4u << 20) - 2, 0, 4, 1) == MKI_COLL_MOVER_REG);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, (128u << 20) - 2, 0, 8, 1) == MKI_COLL_MOVER_TMA);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 128u << 20, 0, 4, 1) == MKI_COLL_MOVER_TMA_SEND);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLGATHER, 4u << 20, 0, 4, 2) == MKI_COLL_MOVER_TMA_SEND);
    CHECK(mki_plan_coll_mover(MKI_OP_REDUCESCATTER, 4u << 20, 0, 4, 1) == MKI_COLL_MOVER_TMA_SEND);
    CHECK(mki_plan_coll_mover(MKI_OP_ALLREDUCE, 4u << 20, 0, 8, 1) == MKI_COLL_MOVER_TMA_SEND);
    /* hierarchical collectives: across nodes of equal size, > 1 rank per
     * node, from MK_COLL_HIER_MIN bytes of the whole buffer (all-reduce:
     * at least one element per rank of a node); never all-to-all, on one
     * node or with 0 */
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 1u << 20, 2, 4, 2, 2, 1u << 20) == 1);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, (1u << 19) - 1, 2, 4, 2, 2, 1u << 20) == 0);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 7, 4, 16, 2, 8, 1) == 0); /* 7 < 8 per node */
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 8, 4, 16, 2, 8, 1) == 1);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 1u << 30, 2, 2, 2, 1, 1) == 0); /* 1 per node */
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 1u << 30, 2, 4, 1, 4, 1) == 0); /* one node */
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 1u << 30, 2, 5, 2, 3, 1) == 0); /* 3 + 2 */
    CHECK(mki_plan_coll_hier(MKI_OP_ALLREDUCE, 1u << 30, 2, 4, 2, 2, 0) == 0); /* 0: never */
    CHECK(mki_plan_coll_hier(MKI_OP_REDUCESCATTER, 1u << 17, 2, 4, 2, 2, 1u << 20) == 1);
    CHECK(mki_plan_coll_hier(MKI_OP_REDUCESCATTER, (1u << 17) - 1, 2, 4, 2, 2, 1u << 20) == 0);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLGATHER, 1, 2, 4, 2, 2, 1) == 1);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLGATHER, 1u << 30, 2, 4, 1, 4, 1) == 0);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLGATHER, 0, 2, 4, 2, 2, 1) == 0);
    CHECK(mki_plan_coll_hier(MKI_OP_ALLTOALL, 1u << 30, 2, 4, 2, 2, 1) == 0);
    struct mki_coll_in in;
    struct mki_coll_plan p;
    memset(&in, 0, sizeof(in));
    in.op = MKI_OP_ALLREDUCE;
    in.esize = 4;
    in.nranks = 2;
    in.nnodes = 1;
    in.budget = 132;
    in.slot_bytes = 256u << 10;
    in.mover = -1;
    in.oneshot_limit = 4u << 20;
    in.zcopy_min = 256u << 10;
    in.count = 65537; /* 256 KiB: one phase, register stores, 17 CTAs */
    mki_plan_coll_model(&in, &p);
    CHECK(p.oneshot && p.mover == MKI_COLL_MOVER_REG && p.nch == 17 && !p.direct);
    CHECK(p.roles.n == 2 && p.roles.end[0] == 256 && p.roles.end[1] == MKI_COLL_THREADS);
    CHECK(mki_roles_valid(&p.roles, MKI_COLL_THREADS));
    in.count = 256u << 20; /* 1 GiB: two phases, TMA, every CTA of the budget up to 64 */
    mki_plan_coll_model(&in, &p);
    CHECK(!p.oneshot && p.mover == MKI_COLL_MOVER_TMA_SEND && p.nch == MKI_MAXCH);
    CHECK(p.roles.n == 4 && p.roles.end[0] == 32 && p.roles.end[1] == 64 &&
          p.roles.end[2] == 384 && p.roles.end[3] == MKI_COLL_THREADS);
    in.nnodes = 2;
    in.maxch = 16; /* across nodes: the net block's channels */
    mki_plan_coll_model(&in, &p);
    CHECK(p.nch == 16 && !p.hier); /* one rank per node: flat */
    in.nranks = 4; /* 2 x 2: hierarchical from MK_COLL_HIER_MIN */
    in.local_size = 2;
    in.hier_min = 1u << 20;
    mki_plan_coll_model(&in, &p);
    CHECK(p.hier);
    in.hier_min = 0;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.hier);
    in.nranks = 2;
    in.local_size = 1;
    in.count = 1u << 20; /* register stores cannot reach a remote rank: TMA */
    in.oneshot_limit = 0;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.oneshot && p.mover == MKI_COLL_MOVER_TMA_SEND);
    in.nnodes = 1;
    in.maxch = 0;
    in.op = MKI_OP_ALLGATHER; /* zero copy with registered buffers */
    in.registered = 1;
    in.count = 64u << 20;
    in.nranks = 4;
    mki_plan_coll_model(&in, &p);
    CHECK(p.direct && p.mover == MKI_COLL_MOVER_REG && p.roles.end[0] == 384);
    CHECK(!p.peer_major); /* zero copy: chunk after chunk */
    in.registered = 0; /* through the slots by TMA to the peers: peer after peer */
    mki_plan_coll_model(&in, &p); /* 256 MiB blocks: register copies locally */
    CHECK(!p.direct && p.mover == MKI_COLL_MOVER_TMA_SEND && p.peer_major);
    in.count = 16u << 20; /* 64 MiB blocks: TMA for the local copies too */
    mki_plan_coll_model(&in, &p);
    CHECK(!p.direct && p.mover == MKI_COLL_MOVER_TMA && p.peer_major);
    in.op = MKI_OP_ALLTOALL;
    mki_plan_coll_model(&in, &p);
    CHECK(p.mover == MKI_COLL_MOVER_TMA && p.peer_major);
    in.nranks = 2; /* one peer: TMA to it, register copies locally */
    mki_plan_coll_model(&in, &p);
    CHECK(p.mover == MKI_COLL_MOVER_TMA_SEND && !p.peer_major);
    in.nranks = 4;
    in.mover = MKI_COLL_MOVER_TMA_SEND; /* MK_COLL_MOVER decides */
    mki_plan_coll_model(&in, &p);
    CHECK(p.mover == MKI_COLL_MOVER_TMA_SEND && p.peer_major);
    in.mover = -1;
    in.count = 64u << 20;
    CHECK(!p.pipelined); /* peer after peer: drained chunks */
    in.op = MKI_OP_REDUCESCATTER; /* a reduction: every source's chunk k at once */
    mki_plan_coll_model(&in, &p); /* 256 MiB blocks: 16 chunks per part */
    CHECK(p.mover == MKI_COLL_MOVER_TMA_SEND && !p.peer_major);
    CHECK(p.pipelined); /* chunks signalled without a drain */
    in.count = 4u << 20; /* 16 MiB blocks, 64 parts of one chunk: peer after peer */
    mki_plan_coll_model(&in, &p);
    CHECK(p.nch == MKI_MAXCH && p.peer_major && p.pipelined);
    in.count = (4u << 20) + 4; /* a part of one chunk and 16 bytes: not */
    mki_plan_coll_model(&in, &p);
    CHECK(!p.peer_major);
    in.op = MKI_OP_ALLREDUCE;
    in.count = 64u << 20; /* 256 MiB: 64 MiB blocks, parts of 4 chunks */
    mki_plan_coll_model(&in, &p);
    CHECK(!p.oneshot && p.mover == MKI_COLL_MOVER_TMA_SEND && p.pipelined && p.peer_major);
    in.count = 256u << 20; /* 1 GiB: 16 chunks per part, chunk after chunk */
    mki_plan_coll_model(&in, &p);
    CHECK(p.pipelined && !p.peer_major);
    in.count = 64u << 20;
    CHECK(!p.stagger); /* more than 2 ranks: never staggered */
    in.count = 4u << 20;
    mki_plan_coll_model(&in, &p);
    CHECK(p.peer_major && !p.stagger);
    in.count = 64u << 20;
    in.nranks = 2; /* two ranks: all-reduce pipelined, reduce-scatter not */
    mki_plan_coll_model(&in, &p);
    CHECK(p.pipelined && !p.peer_major);
    CHECK(!p.stagger); /* 128 MiB blocks: many chunks per part */
    in.count = 4u << 20; /* 8 MiB blocks, parts of 128 KiB: half a phase behind */
    mki_plan_coll_model(&in, &p);
    CHECK(p.nch == MKI_MAXCH && p.stagger);
    in.count = 8u << 20; /* parts of 256 KiB: one chunk */
    mki_plan_coll_model(&in, &p);
    CHECK(p.stagger);
    in.count = (8u << 20) + 64; /* parts of two chunks: not */
    mki_plan_coll_model(&in, &p);
    CHECK(!p.stagger);
    in.count = 64u << 20;
    in.op = MKI_OP_REDUCESCATTER;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.pipelined);
    in.op = MKI_OP_ALLGATHER;
    mki_plan_coll_model(&in, &p); /* one peer: nothing to order */
    CHECK(!p.peer_major && !p.pipelined);
    in.nranks = 4;
    in.nnodes = 2; /* across nodes: the proxy's path, unchanged */
    in.local_size = 2;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.peer_major);
    in.op = MKI_OP_ALLREDUCE;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.pipelined);
    in.op = MKI_OP_ALLGATHER;
    in.nnodes = 1;
    in.local_size = 1;
    in.count = 1u << 10; /* register stores (small blocks) batch their signals */
    mki_plan_coll_model(&in, &p);
    CHECK(p.mover == MKI_COLL_MOVER_REG && !p.peer_major && !p.pipelined);
    in.count = 64u << 20;
    in.registered = 1;
    in.ctas = 5; /* MK_COLL_CTAS */
    in.mover = MKI_COLL_MOVER_TMA; /* MK_COLL_MOVER */
    mki_plan_coll_model(&in, &p);
    CHECK(p.nch == 5 && p.mover == MKI_COLL_MOVER_TMA && p.roles.end[0] == 32);
    in.budget = 3;
    mki_plan_coll_model(&in, &p);
    CHECK(p.nch == 3);
    /* LL: one channel per 2 KiB of a block up to MK_COLL_LL_MAX, on one
     * node of several ranks, never for the two-phase all-reduce; fewer
     * where the budget (or MKI_LL_MAXCH) ends, as long as no part passes
     * 4 KiB, or the slots go */
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 8, 1, 4, 256u << 10, 132) == 1);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, MKI_LL_PART_FAST, 1, 4, 256u << 10, 132) == 1);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, MKI_LL_PART_FAST + 1, 1, 4, 256u << 10, 132) == 2);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 128u << 10, 1, 4, 256u << 10, 132) == 64);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLTOALL, 0, 256u << 10, 1, 8, 256u << 10, 132) == 64);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLTOALL, 0, (256u << 10) + 16, 1, 8, 1u << 20, 132) == 0);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 64u << 10, 1, 4, 64u << 10, 7) == 0);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 28u << 10, 1, 4, 64u << 10, 7) == 7);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 8, 2, 4, 256u << 10, 132) == 0); /* nodes */
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 8, 1, 1, 256u << 10, 132) == 0); /* alone */
    CHECK(mki_plan_coll_ll(MKI_OP_ALLGATHER, 0, 8, 1, 4, 0, 132) == 0); /* 0: never */
    CHECK(mki_plan_coll_ll(MKI_OP_ALLREDUCE, 1, 1024, 1, 4, 256u << 10, 132) == 1);
    CHECK(mki_plan_coll_ll(MKI_OP_ALLREDUCE, 0, 1024, 1, 4, 256u << 10, 132) == 0);
    in.budget = 132;
    in.ctas = 0;
    in.mover = -1;
    in.registered = 0;
    in.ll_max = 256u << 10;
    in.op = MKI_OP_REDUCESCATTER;
    in.esize = 2;
    in.count = 20000; /* 40000 bytes a block: 20 channels, half the CTA each role */
    mki_plan_coll_model(&in, &p);
    CHECK(p.ll && p.nch == 20 && p.mover == MKI_COLL_MOVER_REG && !p.direct);
    CHECK(p.roles.n == 2 && p.roles.end[0] == 256 && p.roles.end[1] == MKI_COLL_THREADS);
    in.ctas = 100; /* MK_COLL_CTAS adds channels, up to MKI_LL_MAXCH */
    mki_plan_coll_model(&in, &p);
    CHECK(p.ll && p.nch == MKI_LL_MAXCH);
    in.ctas = 2; /* but never fewer than the parts need */
    mki_plan_coll_model(&in, &p);
    CHECK(p.ll && p.nch == 20);
    in.ctas = 0;
    in.op = MKI_OP_ALLREDUCE; /* all-reduce: one phase only */
    in.oneshot_limit = 4u << 20;
    in.count = 100000;
    mki_plan_coll_model(&in, &p);
    CHECK(p.oneshot && p.ll && p.nch == 64); /* 200000 bytes: 64 parts of 3136 */
    in.oneshot_limit = 0;
    mki_plan_coll_model(&in, &p);
    CHECK(!p.oneshot && !p.ll);
    CHECK(mki_ll_ack(MKI_MAXLOCAL - 1, MKI_LL_MAXCH - 1) + 8 <= MKI_LL_LAST);
    CHECK(mki_ll_last(1, MKI_MAXLOCAL - 1, MKI_LL_MAXCH - 1) + 8 <= MKI_LL_BUFS);
    CHECK(mki_ll_buf(0, 0, 1, 4) - mki_ll_buf(0, 0, 0, 4) == 2 * MKI_LL_PART);
    CHECK(mki_ll_buf(1, 3, MKI_LL_MAXCH - 1, 4) + 2 * MKI_LL_PART == mki_ll_block_bytes(4));
    CHECK(mki_ll_buf(0, 0, 0, 2) % 16 == 0);
    /* Role dispatch: index -> role, rank in it, its size. */
    const struct mki_roles r = {3, {192, 384, 512, 0}};
    int rank, size;
    CHECK(mki_role_of(&r, 0, &rank, &size) == 0 && rank == 0 && size == 192);
    CHECK(mki_role_of(&r, 200, &rank, &size) == 1 && rank == 8 && size == 192);
    CHECK(mki_role_of(&r, 511, &rank, &size) == 2 && rank == 127 && size == 128);
    CHECK(mki_role_of(&r, 512, &rank, &size) == -1);
    CHECK(mki_roles_valid(&r, 512) && !mki_roles_valid(&r, 480));
    const struct mki_roles bad = {2, {100, 512, 0, 0}};
    CHECK(!mki_roles_valid(&bad, 512));
}

typedef mkResult_t (*coll_fn)(const void *, void *, size_t, mkDataType_t,
                              mkComm_t, cudaStream_t);

static void test_args(void)
{
    mkComm_t comm;
    setenv("MK_BOOTSTRAP", "none", 1);
    CHECK_RES(mkCommInit(&comm, NULL), mkSuccess);
    int dev = 0;
    CHECK_RES(mkCommCuDevice(comm, &dev), mkSuccess);
    const coll_fn fns[] = {mkAllGather, mkReduceScatter, mkAllReduce, mkAllToAll};
    const char *names[] = {"mkAllGather", "mkReduceScatter", "mkAllReduce", "mkAllToAll"};
    char dummy[64];
    for (int i = 0; i < 4; i++) {
        CHECK_RES(fns[i](dummy, dummy + 32, 1, (mkDataType_t)7, comm, NULL),
                  mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), names[i]);
        CHECK_CONTAINS(mkGetLastError(comm), "datatype");
        CHECK_RES(fns[i](NULL, dummy, 4, mkBfloat16, comm, NULL), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "sendbuf is NULL");
        CHECK_RES(fns[i](dummy, NULL, 4, mkFloat32, comm, NULL), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "recvbuf is NULL");
        CHECK_RES(fns[i](dummy, dummy + 32, SIZE_MAX / 2, mkFloat16, comm, NULL),
                  mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "overflows");
        CHECK_RES(fns[i](dummy, dummy + 32, 1, mkFloat32, NULL, NULL), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(NULL), "comm is NULL");
        if (dev < 0) {
            /* A host pointer in a process without GPU: the GPU is what is
             * missing, and the message says so. */
            CHECK_RES(fns[i](dummy, dummy + 32, 1, mkFloat32, comm, NULL), mkErrUnsupported);
            CHECK_CONTAINS(mkGetLastError(comm), "no GPU");
        } else {
            CHECK_RES(fns[i](dummy, dummy + 32, 1, mkFloat32, comm, NULL), mkErrInvalidArgument);
            CHECK_CONTAINS(mkGetLastError(comm), "not device memory");
        }
    }
    void *p = dummy;
    CHECK_RES(mkMemAlloc(comm, 0, &p), mkErrInvalidArgument);
    CHECK_RES(mkMemAlloc(comm, 16, NULL), mkErrInvalidArgument);
    CHECK_RES(mkCommRegister(comm, NULL, 16, &p), mkErrInvalidArgument);
    CHECK_RES(mkCommDeregister(comm, NULL), mkErrInvalidArgument);
    CHECK_RES(mkMemFree(comm, NULL), mkSuccess);
    if (dev < 0) {
        CHECK_RES(mkMemAlloc(comm, 16, &p), mkErrUnsupported);
        CHECK(p == dummy); /* nothing written on error */
        CHECK_CONTAINS(mkGetLastError(comm), "no GPU");
        CHECK_RES(mkCommRegister(comm, dummy, 16, &p), mkErrUnsupported);
    } else {
        CHECK_RES(mkCommRegister(comm, dummy, 16, &p), mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), "not device memory");
    }
    /* A broken communicator refuses every later call with its error. */
    mki_comm_set_async_error(comm, mkErrTimeout);
    if (dev < 0)
        CHECK_RES(mkAllReduce(dummy, dummy + 32, 1, mkFloat32, comm, NULL), mkErrTimeout);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

int main(void)
{
    test_targets();
    test_split();
    test_layout();
    test_record();
    test_net_layout();
    test_plan_rules();
    test_args();
    TEST_DONE();
}
