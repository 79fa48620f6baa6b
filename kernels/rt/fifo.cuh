/*
 * fifo.cuh - the device side of the proxy FIFO (layout in fifo.h).
 *
 * Callable from any kernel's inter-node sender, one thread per command.
 * The slots and the header live in host-pinned mapped memory; the head is
 * a counter in device memory (an atomic there is cheap; the host never
 * reads it).  Both waits are the runtime's deadline wait (wait.cuh): they
 * also stop when the proxy reports an error or the abort word rises.
 */
#ifndef MKI_FIFO_CUH
#define MKI_FIFO_CUH

#include "fifo.h"
#include "wait.cuh"

namespace mki {

enum { MKI_FIFO_OK = 0, MKI_FIFO_PROXY_FAILED = 1, MKI_FIFO_TIMEOUT = 2, MKI_FIFO_ABORTED = 3 };

__device__ __forceinline__ int fifo_status(int spin)
{
    return spin == SPIN_OK ? MKI_FIFO_OK : spin == SPIN_PROXY ? MKI_FIFO_PROXY_FAILED
         : spin == SPIN_ABORT ? MKI_FIFO_ABORTED : MKI_FIFO_TIMEOUT;
}

/* Every poll of a full ring is a read over PCIe, and thousands of
 * producers polling slow the proxy down (measured on H100: 132 x 128
 * producers on 256 slots fell to 0.1 M commands/s), so a producer sleeps
 * in proportion to how many commands are ahead of it (about 32 ns each,
 * what the proxy needs per command), capped at 64 us. */
struct fifo_room_backoff {
    __device__ __forceinline__ void operator()(uint64_t tail, uint64_t target)
    {
        const uint64_t ahead = target - tail;
        __nanosleep(ahead > 2048 ? 65536u : 32u * (unsigned)ahead);
    }
};

/* Doubling pauses from 64 ns to 4 us (waiting for the proxy's progress). */
struct fifo_done_backoff {
    unsigned ns = 64;
    __device__ __forceinline__ void operator()(uint64_t, uint64_t)
    {
        __nanosleep(ns);
        ns = ns < 4096 ? ns * 2 : ns;
    }
};

/* Claim the next ticket and wait until its slot is free; the caller then
 * fills it (fifo_fill).  Returns MKI_FIFO_OK, or why it gave up (a claimed
 * ticket is then left empty: the caller must fail(), which raises the
 * abort word, as for any timeout).  stop's words may be NULL (tests
 * without a communicator).  No system-scope fence when the slot is known
 * free: the largest tail seen is a device word that producers publish at
 * GPU scope after their system-scope read of the host's tail, so a
 * producer that reserves before it writes its data into host memory pays
 * one system-scope fence per command, the fill's. */
__device__ __forceinline__ int fifo_reserve(const mki_fifo_dev &f, const stop_words &stop,
                                            uint64_t timeout_ns, unsigned long long *ticket)
{
    const unsigned long long t = atomicAdd(f.head, 1ull);
    *ticket = t;
    /* Room once tail > t - nslots.  The host's tail is a read over PCIe
     * (1-2 us): only when the largest tail seen on the device says the
     * slot may still be in use. */
    const uint64_t need = t + 1 > f.nslots ? t + 1 - f.nslots : 0;
    const uint64_t *cached = reinterpret_cast<const uint64_t *>(f.tail_seen);
    if (need && !(cached && ld_acquire_gpu(cached) >= need)) {
        const uint64_t *tail = reinterpret_cast<const uint64_t *>(&f.hdr->tail);
        uint64_t seen = ld_acquire_sys(tail), why;
        if (seen < need) {
            const int r = spin_geq(tail, need, stop,
                                   reinterpret_cast<const uint64_t *>(&f.hdr->error), timeout_ns,
                                   &seen, &why, fifo_room_backoff());
            if (r != SPIN_OK) return fifo_status(r);
            seen = need;
        }
        if (f.tail_seen) red_max_release_gpu(f.tail_seen, (unsigned long long)seen);
    }
    return MKI_FIFO_OK;
}

/* Publish command c in the slot of ticket t (from fifo_reserve): the
 * payload words, then word 0 with a system-scope release, which also
 * orders every earlier write of this thread (the data the command sends)
 * before the proxy can see the command. */
__device__ __forceinline__ void fifo_fill(const mki_fifo_dev &f, unsigned long long t,
                                          const mki_fifo_cmd &c)
{
    uint64_t w[MKI_FIFO_SLOT_WORDS];
    mki_fifo_payload(&c, w);
    uint64_t *s = reinterpret_cast<uint64_t *>(f.slots[t % f.nslots].w);
    for (int i = 1; i < MKI_FIFO_SLOT_WORDS; i++) st_relaxed_sys(s + i, w[i]);
    st_release_sys(s, mki_fifo_word0(&c));
}

/* Enqueue one command; *ticket gets its position in the ring (as
 * fifo_reserve, then fifo_fill). */
__device__ __forceinline__ int fifo_push(const mki_fifo_dev &f, const mki_fifo_cmd &c,
                                         const stop_words &stop, uint64_t timeout_ns,
                                         unsigned long long *ticket)
{
    const int r = fifo_reserve(f, stop, timeout_ns, ticket);
    if (r == MKI_FIFO_OK) fifo_fill(f, *ticket, c);
    return r;
}

/* Wait until the proxy completed `count` commands (e.g. all this kernel
 * pushed), or it failed, a stop word rose, or the deadline passed. */
__device__ __forceinline__ int fifo_wait_done(const mki_fifo_dev &f, unsigned long long count,
                                              const stop_words &stop, uint64_t timeout_ns)
{
    uint64_t seen, why;
    return fifo_status(spin_geq(reinterpret_cast<const uint64_t *>(&f.hdr->done), count, stop,
                                reinterpret_cast<const uint64_t *>(&f.hdr->error), timeout_ns,
                                &seen, &why, fifo_done_backoff()));
}

} /* namespace mki */

#endif /* MKI_FIFO_CUH */
