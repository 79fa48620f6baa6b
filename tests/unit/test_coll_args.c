/*
 * test_coll_args.c - the collectives and the device runtime without a GPU:
 * signal/epoch arithmetic, channel and chunk splits, workspace layout,
 * error-record decoding, and argument validation of every collective and
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
    /* The signal arrays do not overlap each other or the data. */
    CHECK(mki_ws_arrive(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_WS_CREDIT);
    CHECK(mki_ws_credit(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_WS_DATA);
    /* Zero-copy posts and done counters: after the credits, before the
     * slots, and apart from each other. */
    CHECK(mki_ws_credit(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= mki_ws_post(0, 0));
    CHECK(mki_ws_post(MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 16 <= mki_ws_done(0, 0));
    CHECK(mki_ws_done(MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= mki_ws_owed(0, 0, 0));
    CHECK(mki_ws_owed(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_WS_DATA);
    CHECK(mki_ws_owed(0, 1, 0) - mki_ws_owed(0, 0, MKI_MAXCH - 1) == 8);
    CHECK(mki_ws_post(1, 0) - mki_ws_post(0, MKI_MAXCH - 1) == 16);
    CHECK(mki_ws_post(0, 0) % 16 == 0 && mki_ws_done(0, 0) % 8 == 0);
    CHECK(MKI_WS_SEQ + 8 * MKI_MAXCH <= MKI_WS_ARRIVE);
    uint64_t ws = 256ull << 20, s = mki_ws_slot_bytes(ws, 2);
    CHECK(s > 0 && s % MKI_SLOT_ALIGN == 0 && s <= MKI_SLOT_MAX);
    CHECK(mki_ws_slot(1, 1, MKI_MAXCH - 1, MKI_NSLOTS - 1, 2, s) + s <= ws);
    CHECK(mki_ws_slot_bytes(ws, 8) > 0);
    CHECK(mki_ws_slot(1, 7, MKI_MAXCH - 1, MKI_NSLOTS - 1, 8, mki_ws_slot_bytes(ws, 8)) +
              mki_ws_slot_bytes(ws, 8) <= ws);
    CHECK(mki_ws_slot_bytes(1 << 20, 8) == 0); /* too small: refused, not overrun */
}

static void test_record(void)
{
    struct mki_err_record r;
    char buf[512];
    memset(&r, 0, sizeof(r));
    CHECK_RES(mki_err_record_format(&r, NULL, 0, buf, sizeof(buf)), mkSuccess);
    r.valid = 1;
    r.kind = MKI_ERR_TIMEOUT;
    r.op = MKI_COLL_ALLREDUCE;
    r.rank = 0;
    r.peer = 1;
    r.channel = 3;
    r.chunk = 17;
    r.expected = mki_sig_target(5, 17);
    r.seen = mki_sig_target(4, 2);
    r.epoch = 42;
    int map[2] = {4, 9}; /* local index -> communicator rank */
    CHECK_RES(mki_err_record_format(&r, map, 2, buf, sizeof(buf)), mkErrTimeout);
    CHECK_CONTAINS(buf, "mkAllReduce");
    CHECK_CONTAINS(buf, "rank 4 timed out waiting for rank 9");
    CHECK_CONTAINS(buf, "chunk 17");
    CHECK_CONTAINS(buf, "channel 3");
    CHECK_CONTAINS(buf, "expected signal 0x500000012");
    CHECK_CONTAINS(buf, "saw 0x400000003");
    CHECK_CONTAINS(buf, "MK_TIMEOUT_MS");
    r.kind = MKI_ERR_REMOTE;
    r.op = MKI_COLL_ALLGATHER;
    CHECK_RES(mki_err_record_format(&r, NULL, 0, buf, sizeof(buf)), mkErrRemote);
    CHECK_CONTAINS(buf, "mkAllGather");
    CHECK_CONTAINS(buf, "rank 1 failed or aborted");
    /* across nodes the kernel names communicator ranks itself */
    r.global = 1;
    r.rank = 5;
    r.peer = 2;
    CHECK_RES(mki_err_record_format(&r, map, 2, buf, sizeof(buf)), mkErrRemote);
    CHECK_CONTAINS(buf, "on rank 5 stopped: rank 2 failed");
    r.kind = MKI_ERR_PROXY;
    CHECK_RES(mki_err_record_format(&r, map, 2, buf, sizeof(buf)), mkErrTransport);
    CHECK_CONTAINS(buf, "inter-node proxy failed while sending to rank 2");
}

/* The cross-node net buffer: counters, receive slots and staging slots
 * never overlap and fit the buffer; the bench words fit the workspace. */
static void test_net_layout(void)
{
    for (int n = 2; n <= MKI_MAXLOCAL; n++) {
        uint64_t st = mki_nb_stride(n), bytes = mki_nb_bytes(n, st);
        CHECK(st >= MKI_SLOT_ALIGN && st % MKI_SLOT_ALIGN == 0 && st <= MKI_SLOT_MAX);
        CHECK(bytes <= MKI_NB_DATA + MKI_NB_TARGET);
        CHECK(mki_nb_credit(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1) + 8 <= MKI_NB_ARRIVE);
        CHECK(mki_nb_arrive(1, MKI_MAXLOCAL - 1, MKI_MAXCH - 1, MKI_NSLOTS - 1) + 8 <= MKI_NB_DATA);
        CHECK(mki_nb_arrive(0, 1, 0, 1) - mki_nb_arrive(0, 1, 0, 0) == 8);
        /* last receive slot of phase 0 ends where the staging begins */
        CHECK(mki_nb_slot(0, n - 1, MKI_MAXCH - 1, MKI_NSLOTS - 1, n, st) + st ==
              mki_nb_slot(0, n, 0, 0, n, st));
        CHECK(mki_nb_slot(1, 2 * n - 1, MKI_MAXCH - 1, MKI_NSLOTS - 1, n, st) + st == bytes);
    }
    CHECK(mki_nb_stride(2) == 64u << 10);
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
    CHECK(mki_plan_coll_ctas(16u << 10, 0, 1, 64) == 1);
    CHECK(mki_plan_coll_ctas(48u << 10, 0, 1, 64) == 3);
    CHECK(mki_plan_coll_ctas(1u << 20, 0, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas((4u << 20) - 16, 0, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(4u << 20, 0, 1, 64) == 64);
    CHECK(mki_plan_coll_ctas(4u << 20, 0, 2, 64) == 32); /* across nodes */
    CHECK(mki_plan_coll_ctas(1u << 20, 1, 1, 64) == 64); /* one phase */
    CHECK(mki_plan_coll_ctas(512u << 10, 1, 1, 64) == 32);
    CHECK(mki_plan_coll_ctas(1u << 30, 0, 1, 33) == 33); /* SM budget (MPS) */
    CHECK(mki_plan_coll_ctas(1u << 20, 0, 1, 16) == 16);
    CHECK(mki_plan_coll_ctas(1u << 30, 0, 1, 0) == 1);
    CHECK(mki_plan_coll_ctas(0, 0, 1, 64) == 1);
    CHECK(mki_plan_coll_mover(1u << 20, 0) == MKI_COLL_PICK_REG);
    CHECK(mki_plan_coll_mover(4u << 20, 0) == MKI_COLL_PICK_TMA_SEND);
    CHECK(mki_plan_coll_mover(64u << 20, 1) == MKI_COLL_PICK_REG);
    /* The automatic workspace gives 256 KiB slots at any local size; a
     * configured size is taken as is. */
    {
        static struct mkComm c;
        for (int n = 1; n <= MKI_MAXLOCAL; n++) {
            c.local_size = n;
            c.cfg.workspaceSize = 0;
            size_t b = mki_ws_bytes(&c);
            CHECK(b >= (256u << 20));
            if (n >= 2) CHECK(mki_ws_slot_bytes(b, n) == 256u << 10);
        }
        c.cfg.workspaceSize = 3u << 20;
        CHECK(mki_ws_bytes(&c) == 3u << 20);
    }
    CHECK(MKI_WS_BENCH >= MKI_WS_CLAIM + 8 && MKI_WS_BENCH + 16 * 8 <= MKI_WS_SEQ);
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
    test_args();
    TEST_DONE();
}
