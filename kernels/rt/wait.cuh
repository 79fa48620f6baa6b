/*
 * wait.cuh - the one deadline wait of the device runtime, and fail().
 *
 * Every spin of a kernel on something another rank (or the proxy) writes
 * goes through spin_geq: it watches the counter, the stop words (the
 * local abort word: a peer failed or aborted; an internal communicator's
 * second one, rt.abort2; the host's stop word, rt.err->stop: this rank's
 * watchdog found a peer dead) and the deadline (%globaltimer,
 * MK_TIMEOUT_MS), and optionally an error word (the proxy's).  It only
 * says why it stopped; the caller reports:
 *
 *   - wait_geq (collectives, gates): spin, then on failure fail() at once
 *     and set the CTA's quit flag;
 *   - the GEMM producer, which runs on 40 registers, and the consumers
 *     keep a note of the failure in shared memory (wait_noted) and one
 *     thread calls fail() after the tiles (note_report; kernels/ops/).
 *
 * fail() writes the error record once per rank (the claim word picks the
 * first failing waiter), then raises the abort word of every rank of the
 * node, so that their waits stop too; ranks on other nodes time out
 * waiting for this one.  The host's watchdog turns the record into the
 * communicator's async error (src/mem/watchdog.c).
 */
#ifndef MKI_WAIT_CUH
#define MKI_WAIT_CUH

#include <stdint.h>

#include "ptx.cuh"
#include "rt.h"

namespace mki {

/* How a spin ended. */
enum { SPIN_OK = 0, SPIN_TIMEOUT = 1, SPIN_ABORT = 2, SPIN_PROXY = 3 };

/* What a failing wait reports (the error record's fields). */
struct wait_site {
    int peer, channel, chunk, phase;
};

__device__ __forceinline__ const uint64_t *abort_word(const mki_rt_dev &rt)
{
    return reinterpret_cast<const uint64_t *>(rt.heap[rt.local] + MKI_CTL_ABORT);
}

/* An error recorded on this rank already (fail() claimed its record): a
 * kernel that finds it writes nothing more. */
__device__ __forceinline__ bool claimed(const mki_rt_dev &rt)
{
    return ld_relaxed_sys(reinterpret_cast<const uint64_t *>(rt.heap[rt.local] + MKI_CTL_CLAIM)) != 0;
}

/* The host's stop word (rt.h): host-mapped, so read seldom (a load over
 * PCIe), never on a path where no wait failed. */
__device__ __forceinline__ const uint64_t *host_stop(const mki_rt_dev &rt)
{
    return const_cast<const uint64_t *>(&rt.err->stop);
}

/* A spin reads the host's stop word only once it has waited this long,
 * then every 256th poll: the word is for stops a stream cannot deliver,
 * which a millisecond more does not hurt, while reads over PCIe in the
 * short waits of a busy call slow it (bench/NOTES.md, thirteenth
 * session). */
constexpr uint64_t HSTOP_AFTER_NS = 1000000ull;

__device__ __forceinline__ bool hstop_due(uint32_t n, uint64_t t0)
{
    return (n & 255) == 0 && globaltimer() - t0 > HSTOP_AFTER_NS;
}

/* What ends a spin besides its counter (any may be NULL): the abort word
 * in this rank's heap, an internal communicator's second one (rt.h), the
 * host's stop word (host memory: hstop_due). */
struct stop_words {
    const uint64_t *abort, *abort2, *hstop;
};

__device__ __forceinline__ stop_words stops_of(const mki_rt_dev &rt)
{
    return stop_words{abort_word(rt), rt.abort2, host_stop(rt)};
}

/* The communicator's first raised stop word (the rank to blame + 1), 0 if
 * none, for a wait that polls outside spin_geq; the host's word too when
 * host is true (hstop_due). */
__device__ __forceinline__ uint64_t stop_value(const mki_rt_dev &rt, bool host)
{
    /* both heap words loaded at once (no load waits for the other) */
    const uint64_t a = ld_relaxed_sys(abort_word(rt));
    const uint64_t a2 = rt.abort2 ? ld_relaxed_sys(rt.abort2) : 0;
    uint64_t w = a ? a : a2;
    if (!w && host) w = ld_relaxed_sys(host_stop(rt));
    return w;
}

/* No pause between polls (signals between GPUs: latency matters). */
struct no_backoff {
    __device__ __forceinline__ void operator()(uint64_t, uint64_t) {}
};

/* A short pause between polls, for waits of milliseconds by many threads. */
struct pause_backoff {
    __device__ __forceinline__ void operator()(uint64_t, uint64_t) { __nanosleep(256); }
};

/* How a spin reads its counter: at system scope (written by another GPU,
 * the proxy or the host), or at GPU scope for a flag only threads of this
 * GPU write: many threads spinning on system-scope acquires slowed the
 * GPU's reads of host memory up to 10x (bench/NOTES.md, nineteenth
 * session). */
struct load_sys {
    __device__ __forceinline__ uint64_t operator()(const uint64_t *p) const { return ld_acquire_sys(p); }
};
struct load_gpu {
    __device__ __forceinline__ uint64_t operator()(const uint64_t *p) const { return ld_acquire_gpu(p); }
};

/* Spin until *addr >= target.  Stops (without reporting) when a stop
 * word rises, when *error (if not NULL) becomes nonzero, or timeout_ns
 * after the first miss; *seen gets the last value read, *why the stop
 * word or the error word.  Inline and small: it runs in threads with few
 * registers. */
template <typename Backoff, typename Load = load_sys>
__device__ __forceinline__ int spin_geq(const uint64_t *addr, uint64_t target,
                                        const stop_words &stop, const uint64_t *error,
                                        uint64_t timeout_ns, uint64_t *seen, uint64_t *why,
                                        Backoff backoff, Load load = Load())
{
    uint64_t v = load(addr);
    if (v >= target) return SPIN_OK;
    const uint64_t t0 = globaltimer();
    for (uint32_t n = 1;; n++) {
        v = load(addr);
        if (v >= target) return SPIN_OK;
        backoff(v, target);
        if ((n & 31) != 0) continue;
        uint64_t w = stop.abort ? ld_relaxed_sys(stop.abort) : 0;
        if (!w && stop.abort2) w = ld_relaxed_sys(stop.abort2);
        if (!w && stop.hstop && hstop_due(n, t0)) w = ld_relaxed_sys(stop.hstop);
        int r = w ? SPIN_ABORT : SPIN_OK;
        if (!r && error && (w = ld_acquire_sys(error)) != 0) r = SPIN_PROXY;
        if (!r && globaltimer() - t0 > timeout_ns) r = SPIN_TIMEOUT;
        if (r) {
            *seen = v;
            *why = w;
            return r;
        }
    }
}

/* Raise the abort word (this rank + 1) of every rank of the node that has
 * none yet, so that their waits stop too. */
__device__ __forceinline__ void raise_node_abort(const mki_rt_dev &rt)
{
    for (int l = 0; l < rt.nlocal; l++) {
        uint64_t *a = reinterpret_cast<uint64_t *>(rt.heap[l] + MKI_CTL_ABORT);
        if (ld_relaxed_sys(a) == 0) st_relaxed_sys(a, (uint64_t)rt.rank + 1);
    }
}

/* Record the failure once per rank, then raise the abort word of every
 * rank of the node (timeouts and proxy failures: this rank is the one
 * that saw it first; a REMOTE failure only records who aborted). */
static __device__ __noinline__ void fail(const mki_rt_dev &rt, int kind, const wait_site &w,
                                         uint64_t expected, uint64_t seen, uint64_t epoch)
{
    uint64_t *claim = reinterpret_cast<uint64_t *>(rt.heap[rt.local] + MKI_CTL_CLAIM);
    if (atomicCAS(reinterpret_cast<unsigned long long *>(claim), 0ull, 1ull) == 0ull) {
        mki_err_record *r = rt.err;
        r->kind = kind;
        r->op = rt.op;
        r->rank = rt.rank;
        r->peer = w.peer;
        r->channel = w.channel;
        r->chunk = w.chunk;
        r->phase = w.phase;
        r->expected = expected;
        r->seen = seen;
        r->epoch = epoch;
        __threadfence_system();
        r->valid = 1;
        __threadfence_system();
    }
    if (kind == MKI_ERR_TIMEOUT || kind == MKI_ERR_PROXY) raise_node_abort(rt);
    __threadfence_system();
}

/* fail() for a spin that stopped with r (SPIN_*): an abort names the rank
 * that raised it. */
static __device__ __noinline__ void fail_spin(const mki_rt_dev &rt, int r, wait_site w,
                                              uint64_t expected, uint64_t seen, uint64_t why,
                                              uint64_t epoch)
{
    int kind = MKI_ERR_TIMEOUT;
    if (r == SPIN_ABORT) {
        kind = MKI_ERR_REMOTE;
        w.peer = (int)why - 1;
    } else if (r == SPIN_PROXY) {
        kind = MKI_ERR_PROXY;
    }
    fail(rt, kind, w, expected, seen, epoch);
}

/* The spin of wait_geq (out of line: it costs the caller no registers). */
static __device__ __noinline__ bool wait_geq_spin(const mki_rt_dev &rt, const uint64_t *addr,
                                                  uint64_t target, const wait_site &w,
                                                  uint64_t epoch, volatile int *quit)
{
    if (*quit) return false;
    uint64_t seen = 0, why = 0;
    const int r = spin_geq(addr, target, stops_of(rt), nullptr, rt.timeout_ns, &seen, &why,
                           no_backoff());
    if (r == SPIN_OK) return true;
    fail_spin(rt, r, w, target, seen, why, epoch);
    *quit = 1;
    return false;
}

/* Spin until *addr >= target; false (fail() done, *quit set) when the CTA
 * is quitting already, a peer failed, or the deadline passed.  A target
 * already reached costs one load and no call: most waits of a call find
 * their signal there, and the call is on the critical path. */
__device__ __forceinline__ bool wait_geq(const mki_rt_dev &rt, const uint64_t *addr,
                                         uint64_t target, const wait_site &w, uint64_t epoch,
                                         volatile int *quit)
{
    if (ld_acquire_sys(addr) >= target) return *quit == 0;
    return wait_geq_spin(rt, addr, target, w, epoch, quit);
}

/* wait_geq with a pause between polls: for a wait that may last
 * milliseconds (a peer still computing) by many threads, whose polls
 * would otherwise take the memory system from the work of ranks that
 * share the GPU (bench/NOTES.md, twenty-eighth session). */
static __device__ __noinline__ bool wait_geq_paused(const mki_rt_dev &rt, const uint64_t *addr,
                                                    uint64_t target, const wait_site &w,
                                                    uint64_t epoch, volatile int *quit)
{
    if (*quit) return false;
    if (ld_acquire_sys(addr) >= target) return true;
    uint64_t seen = 0, why = 0;
    const int r = spin_geq(addr, target, stops_of(rt), nullptr, rt.timeout_ns, &seen, &why,
                           pause_backoff());
    if (r == SPIN_OK) return true;
    fail_spin(rt, r, w, target, seen, why, epoch);
    *quit = 1;
    return false;
}

/* Noted waits, for threads with few registers (a GEMM's producer) or
 * that must not stop at the first failure (a GEMM's consumers still owe
 * their barriers): the first failure of a CTA is noted in shared memory
 * and reported once, by one thread, after the CTA's work (note_report). */
struct cta_note {
    int quit, kind, peer, chunk, phase;
    uint64_t expected, seen;
};

/* Note a failure in n (the CTA's first only; kind: MKI_ERR_*). */
__device__ __forceinline__ void note_fail(cta_note &n, int kind, int peer, int chunk, int phase,
                                          uint64_t expected, uint64_t seen)
{
    if (atomicCAS(&n.quit, 0, 1) == 0) {
        n.kind = kind;
        n.peer = peer;
        n.chunk = chunk;
        n.phase = phase;
        n.expected = expected;
        n.seen = seen;
    }
}

/* Spin until *addr >= target; false, with the failure noted in n (first
 * only), when the CTA quits, a peer aborted or the deadline passed.  peer:
 * the communicator rank waited for.  Back to back at system scope unless
 * told otherwise (spin_geq's Backoff and Load). */
template <typename Backoff = no_backoff, typename Load = load_sys>
__device__ __forceinline__ bool wait_noted(const mki_rt_dev &rt, cta_note &n, const uint64_t *addr,
                                           uint64_t target, int peer, int chunk, int phase,
                                           Backoff backoff = Backoff(), Load load = Load())
{
    if (*(volatile int *)&n.quit) return false;
    uint64_t seen = 0, why = 0;
    const int r = spin_geq(addr, target, stops_of(rt), nullptr, rt.timeout_ns, &seen, &why,
                           backoff, load);
    if (r == SPIN_OK) return true;
    note_fail(n, r == SPIN_ABORT ? MKI_ERR_REMOTE : MKI_ERR_TIMEOUT,
              r == SPIN_ABORT ? (int)why - 1 : peer, chunk, phase, target, seen);
    return false;
}

/* The noted failure, if any, to the error record (one thread). */
__device__ __forceinline__ void note_report(const mki_rt_dev &rt, const cta_note &n, uint64_t epoch)
{
    if (n.quit)
        fail(rt, n.kind, wait_site{n.peer, (int)blockIdx.x, n.chunk, n.phase}, n.expected, n.seen,
             epoch);
}

/* At kernel entry: a peer that failed before this call started stops it
 * at once (MKI_ERR_REMOTE naming the peer); one thread. */
__device__ __forceinline__ bool enter_ok(const mki_rt_dev &rt, int channel, uint64_t epoch)
{
    const uint64_t ab = stop_value(rt, false);
    if (ab == 0) return true;
    fail(rt, MKI_ERR_REMOTE, wait_site{(int)ab - 1, channel, -1, -1}, 0, 0, epoch);
    return false;
}

} /* namespace mki */

#endif /* MKI_WAIT_CUH */
