/*
 * net.h - what the two files of mkbench net share: the job's globals, the
 * failure path, and the TCP baselines (net_tcp.cu) that net.cu runs.
 */
#ifndef MKB_NET_H
#define MKB_NET_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "mkernel.h"
extern "C" {
#include "mki.h" /* struct mkComm: boot (barrier, allgather) */
}
#include "common.h"

namespace mkb_net {

extern int g_rank, g_n;
extern mkComm_t g_comm;
extern cudaStream_t g_st, g_copy;

/* Say what failed on this rank, abort the communicator (the peer fails
 * promptly), exit 3. */
[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double now_s(void);
void barrier(void);

/* One TCP connection between rank 0 and rank 1 over 127.0.0.1. */
struct tcp {
    int fd;
    int timeout_ms;
    char *hsend, *hrecv;           /* pinned host buffers */
    char *dbuf;                    /* device buffer for the staged runs */
};
void tcp_connect(tcp &t, size_t max_bytes);
/* One-way microseconds of a ping-pong of `bytes` (median of reps), on
 * rank 0; staged: through device memory on each side. */
double tcp_pingpong(tcp &t, size_t bytes, int warm, int iters, int reps, int staged);
/* Seconds for count messages one way and one byte back, on rank 0. */
double tcp_stream_once(tcp &t, size_t bytes, long long count, int staged);

} // namespace mkb_net

#endif /* MKB_NET_H */
