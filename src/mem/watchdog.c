/*
 * watchdog.c - device failures become the communicator's async error.
 *
 * A kernel that gives up (a wait past its deadline, a peer that aborted,
 * a failed proxy) writes the host-mapped error record (kernels/rt/wait.cuh).
 * The watchdog thread polls the record every 2 ms and the local abort
 * word (through the runtime's private stream, never blocking) every 50
 * ms: either becomes the communicator's async error and a WARN line.
 * mkCommAbort raises the abort word of every rank of the node.
 *
 * A rank the liveness ring (core/live.h) finds dead: the watchdog raises
 * this rank's own abort word, so a kernel in flight stops at its next
 * wait and a later one at its entry, waits until no call is being
 * enqueued and every call's tail event has completed (mki_devrt_tail:
 * nothing this rank enqueued can write into the caller's buffers after
 * the report; at most MKI_DRAIN_NS; meanwhile a new call enqueues
 * nothing: mki_watchdog_gate), then marks the communicator broken
 * with the ring's sentence (mkErrRemote naming the rank).  A failed proxy
 * is most often the same death seen first by the transport: its report
 * waits LIVE_SETTLE_NS x 4 for the ring to name the rank.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mki.h"
#include "mem/mem.h"
#include "core/live.h"
#include "topology/topo.h"

#define LIVE_SETTLE_NS 50000000ull  /* 50 ms */

mkResult_t mki_err_record_format(const struct mki_err_record *r, char *buf, size_t len)
{
    if (!r->valid) {
        snprintf(buf, len, "no error recorded");
        return mkSuccess;
    }
    const char *op = mki_op_api_name(r->op);
    const unsigned long long call = (unsigned long long)r->epoch;
    if (r->kind == MKI_ERR_PROXY) {
        snprintf(buf, len, "%s (call %llu) on rank %d stopped: this rank's inter-node "
                 "proxy failed while sending to rank %d (channel %d, chunk %d); the "
                 "transport's error is logged at WARN; destroy this communicator", op, call,
                 r->rank, r->peer, r->channel, r->chunk);
        return mkErrTransport;
    }
    if (r->kind == MKI_ERR_CAPACITY) {
        snprintf(buf, len, "%s (call %llu): rank %d would receive %llu rows, more than "
                 "recv_capacity = %llu; nothing was written on any rank; destroy this "
                 "communicator and call with recv_capacity >= %llu on every rank", op, call,
                 r->peer, (unsigned long long)r->expected, (unsigned long long)r->seen,
                 (unsigned long long)r->expected);
        return mkErrInvalidArgument;
    }
    if (r->kind == MKI_ERR_BADINDEX) {
        snprintf(buf, len, "%s (call %llu): rank %d's topk_idx[%d] is not an expert id "
                 "(0 .. experts - 1, or -1 for none); nothing was written on any rank; "
                 "destroy this communicator", op, call, r->peer, r->chunk);
        return mkErrInvalidArgument;
    }
    if (r->kind == MKI_ERR_BADLAYOUT) {
        if (r->phase == 0)
            snprintf(buf, len, "%s (call %llu) on rank %d: expert_offsets gives %lld rows, "
                     "not within recv_capacity = %llu (or y is NULL with rows to send); pass "
                     "the expert_offsets of the dispatch these outputs answer; destroy this "
                     "communicator", op, call, r->rank, (long long)r->seen,
                     (unsigned long long)r->expected);
        else if (r->phase == 2) /* across nodes: found by the expert's rank */
            snprintf(buf, len, "%s (call %llu): rank %d's send_rows at position %d names row "
                     "%lld of rank %d, which received %llu rows; pass the topk_idx and "
                     "send_rows of the dispatch these outputs answer; destroy this "
                     "communicator", op, call, r->peer, r->chunk, (long long)r->seen, r->rank,
                     (unsigned long long)r->expected);
        else
            snprintf(buf, len, "%s (call %llu) on rank %d: topk_idx / send_rows at position "
                     "%d (row %lld) are not those of a dispatch (an expert id out of range or "
                     "a row outside recv_capacity = %llu); destroy this communicator", op,
                     call, r->rank, r->chunk, (long long)r->seen,
                     (unsigned long long)r->expected);
        return mkErrInvalidArgument;
    }
    if (r->kind == MKI_ERR_TIMEOUT && r->chunk < 0) {
        snprintf(buf, len, "%s (call %llu) on rank %d timed out waiting for rank %d in a "
                 "handshake (channel %d, expected signal 0x%llx, saw 0x%llx): rank %d is "
                 "dead, hung or never made the call, or the ranks disagree on the call "
                 "(its arguments, MK_COLL_ZCOPY_MIN, or their mkMemAlloc/mkCommRegister "
                 "calls, which every rank makes in the same order)", op, call, r->rank,
                 r->peer, r->channel, (unsigned long long)r->expected,
                 (unsigned long long)r->seen, r->peer);
        return mkErrTimeout;
    }
    if (r->kind == MKI_ERR_TIMEOUT) {
        snprintf(buf, len, "%s (call %llu) on rank %d timed out waiting for rank %d: "
                 "channel %d, chunk %d, phase %d, expected signal 0x%llx, saw 0x%llx; "
                 "rank %d is dead, hung or never made the call (raise MK_TIMEOUT_MS if it "
                 "is only slow)", op, call, r->rank, r->peer, r->channel, r->chunk, r->phase,
                 (unsigned long long)r->expected, (unsigned long long)r->seen, r->peer);
        return mkErrTimeout;
    }
    snprintf(buf, len, "%s (call %llu) on rank %d stopped: rank %d failed or aborted the "
             "communicator (channel %d, chunk %d); destroy this communicator", op, call,
             r->rank, r->peer, r->channel, r->chunk);
    return mkErrRemote;
}

static void *abort_word(struct mki_devrt *d)
{
    return d->heap.seg[0].base + MKI_CTL_ABORT;
}

static void report(struct mkComm *comm, mkResult_t res, const char *msg);

static void watchdog_report(struct mkComm *comm)
{
    char msg[512];
    mkResult_t res = mki_err_record_format(comm->dev->rec, msg, sizeof(msg));
    report(comm, res, msg);
}

/* Poll the local abort word without ever blocking on the device. */
static int watchdog_poll_abort(struct mki_devrt *d, int *inflight)
{
    if (*inflight) {
        cudaError_t e = cudaStreamQuery(d->side);
        if (e == cudaErrorNotReady) return 0;
        *inflight = 0;
        if (e != cudaSuccess) return -1;
        return d->pinned[1] != 0;
    }
    if (cudaMemcpyAsync(&d->pinned[1], abort_word(d), 8, cudaMemcpyDeviceToHost, d->side) ==
        cudaSuccess)
        *inflight = 1;
    return 0;
}

/* The host-mapped stop word (rt.h), raised once with the first value. */
static void raise_stop(struct mki_devrt *d, uint64_t v)
{
    if (!d->rec || d->rec->stop) return;
    d->rec->stop = v;
    __sync_synchronize();
}

/* Stop this rank's kernels (value: the dead rank + 1): the host-mapped
 * stop word by a plain store, which no stream can hold back (a copy on
 * the private stream may sit behind a stream memory wait of a side stream
 * that shares its hardware queue, waiting for a kernel that waits for
 * this very stop: seen under MPS), and the abort word in the heap, which
 * kernels check at entry, through the private stream; never blocks. */
void mki_devrt_stop_kernels(struct mkComm *comm, int dead)
{
    struct mki_devrt *d = comm->dev;
    if (!d || d->heap.nseg == 0) return;
    raise_stop(d, (uint64_t)dead + 1);
    d->pinned[2] = (uint64_t)dead + 1;
    (void)cudaMemcpyAsync(abort_word(d), &d->pinned[2], 8, cudaMemcpyHostToDevice, d->side);
}

/* A rank that died on this GPU (ranks sharing it under MPS): its kernel
 * in flight outlives the process in the MPS server and would spin until
 * its deadline, stalling the server's teardown of that client and every
 * other client with it.  Its memory lives as long as that kernel does:
 * raise its abort word there too.  (On another GPU the driver ends the
 * dead process's context and its kernels with it: nothing to do, and its
 * memory may be gone.) */
static void stop_orphans(struct mkComm *comm, int dead)
{
    struct mki_devrt *d = comm->dev;
    const struct mki_topo *t = comm->topo;
    if (!t || dead < 0 || dead >= comm->nranks || t->node_of[dead] != comm->node) return;
    int nvlinks;
    if (mki_topo_path(t, comm->rank, dead, &nvlinks) != MKI_PATH_SAME_GPU) return;
    const int l = t->local_rank_of[dead];
    if (l < 0 || l >= d->nlocal || !d->heap.seg[0].peer[l]) return;
    cudaError_t e = cudaMemcpyAsync(d->heap.seg[0].peer[l] + MKI_CTL_ABORT, &d->pinned[2], 8,
                                    cudaMemcpyHostToDevice, d->side);
    MKI_INFO(MKI_SUB_MEM, "rank %d died on this GPU: its abort word raised (%s)",
             mki_comm_name(comm, dead), cudaGetErrorString(e));
    (void)cudaGetLastError();
}

/* Break the communicator (and the ops' internal ones) with msg. */
static void report(struct mkComm *comm, mkResult_t res, const char *msg)
{
    mki_error(comm, res, "%s", msg);
    mki_comm_set_async_error(comm, res);
    mki_comm_break_kids(comm, res, msg);
}

/* Report a dead peer once no call is being enqueued and every tail has
 * completed, under the call lock (a call then finds the communicator
 * broken before it enqueues anything); past MKI_DRAIN_NS at once, with the
 * lock if it is free.  1: reported. */
static int report_drained(struct mkComm *comm, const char *msg, int late)
{
    struct mki_devrt *d = comm->dev;
    if (mki_comm_async_error(comm) != mkSuccess) return 1; /* a call's gate reported */
    const int locked = pthread_mutex_trylock(&d->call_lock) == 0;
    if (!late && (!locked || !mki_devrt_drained(d))) {
        if (locked) pthread_mutex_unlock(&d->call_lock);
        return 0;
    }
    report(comm, mkErrRemote, msg);
    if (locked) pthread_mutex_unlock(&d->call_lock);
    return 1;
}

mkResult_t mki_watchdog_gate(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (!__atomic_load_n(&d->gate, __ATOMIC_ACQUIRE)) return mkSuccess;
    const uint64_t waited = mki_now_ns() - d->gate_since;
    mki_devrt_drain_wait(d, waited < MKI_DRAIN_NS ? MKI_DRAIN_NS - waited : 0);
    if (mki_comm_async_error(comm) == mkSuccess) report(comm, mkErrRemote, d->gate_msg);
    return mkErrRemote;
}

static void *watchdog_main(void *arg)
{
    struct mkComm *comm = arg;
    struct mki_devrt *d = comm->dev;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (cudaSetDevice(d->dev) != cudaSuccess) return NULL;
    int inflight = 0, tick = 0, reported = 0;
    uint64_t dead_since = 0, proxy_since = 0;
    char msg[MKI_ERRMSG_LEN];
    const struct timespec ts = {0, 2000000};
    while (!d->stop) {
        nanosleep(&ts, NULL);
        if (reported) continue;
        /* An op's internal communicator that its parent broke (and whose
         * kernels it stopped): reported there, with the parent's names. */
        if (comm->parent && mki_comm_async_error(comm) != mkSuccess) {
            reported = 1;
            continue;
        }
        const uint64_t now = mki_now_ns();
        const int dead = mki_live_dead(comm, msg, sizeof(msg));
        if (dead >= 0) {
            if (!dead_since) {
                /* No wait for a poll in flight: the private stream may be
                 * stuck until the kernels stop (mki_devrt_stop_kernels). */
                dead_since = now;
                mki_devrt_stop_kernels(comm, dead);
                stop_orphans(comm, dead);
                snprintf(d->gate_msg, sizeof(d->gate_msg), "%s", msg);
                d->gate_since = now;
                __atomic_store_n(&d->gate, 1, __ATOMIC_RELEASE);
            }
            reported = report_drained(comm, msg, now - dead_since > MKI_DRAIN_NS);
            continue;
        }
        if (d->rec->valid) {
            if (d->rec->kind == MKI_ERR_PROXY && comm->live) {
                if (!proxy_since) proxy_since = now;
                if (now - proxy_since < 4 * LIVE_SETTLE_NS) continue;
            }
            watchdog_report(comm);
            reported = 1;
            continue;
        }
        if (++tick % 25 != 0 && !inflight) continue;
        int up = watchdog_poll_abort(d, &inflight);
        if (up > 0 && !d->rec->valid) {
            snprintf(msg, sizeof(msg), "rank %d failed or aborted the communicator; "
                     "destroy it", mki_comm_name(comm, (int)d->pinned[1] - 1));
            report(comm, mkErrRemote, msg);
            reported = 1;
        }
    }
    if (inflight) (void)cudaStreamSynchronize(d->side);
    return NULL;
}

mkResult_t mki_watchdog_start(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (pthread_create(&d->watchdog, NULL, watchdog_main, comm) != 0)
        return mki_error(comm, mkErrSystem, "cannot start the watchdog thread");
    d->watchdog_up = 1;
    return mkSuccess;
}

void mki_watchdog_stop(struct mki_devrt *d)
{
    if (!d->watchdog_up) return;
    d->stop = 1;
    pthread_join(d->watchdog, NULL);
    d->watchdog_up = 0;
}

void mki_devrt_abort(struct mkComm *comm)
{
    struct mki_devrt *d = comm->dev;
    if (!d || d->heap.nseg == 0) return;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(d->dev);
    d->pinned[0] = (uint64_t)comm->rank + 1;
    raise_stop(d, (uint64_t)comm->rank + 1); /* this rank's own kernels, at once */
    const struct mki_heap_seg *s = &d->heap.seg[0];
    for (int l = 0; l < d->nlocal; l++)
        if (s->peer[l])
            (void)cudaMemcpyAsync(s->peer[l] + MKI_CTL_ABORT, &d->pinned[0], 8,
                                  cudaMemcpyHostToDevice, d->side);
    /* Bounded wait for the writes to land (the copies do not depend on any
     * peer); then leave device memory to the process's exit. */
    uint64_t t0 = mki_now_ns();
    while (cudaStreamQuery(d->side) == cudaErrorNotReady && mki_now_ns() - t0 < 1000000000ull)
        usleep(100);
    d->aborted = 1;
    (void)cudaGetLastError();
    (void)cudaSetDevice(prev);
}
