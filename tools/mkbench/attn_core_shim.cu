/*
 * attn_core_shim.cu - the attention core (mki_attn_run) as a shared
 * library with a flat C signature, so that bench/attn_sdpa.py can time it
 * in turns with PyTorch's SDPA backends in one process (the same inputs,
 * the same GPU state, blocks interleaved: under the power cap a kernel
 * timed alone in a short block runs at another clock than in turns with
 * another).  Not part of libmkernel; built by tests/gpu/attn.sh build:
 *
 *   nvcc -shared -Xcompiler -fPIC ... tools/mkbench/attn_core_shim.cu \
 *        kernels/attn/attn.cu -o build-gpu/attn/libmkb_attn_core.so
 *
 * mkb_attn_core: one call of the core over q, k, v of one segment (the
 * whole sequence, positions 0..seq-1), bf16 or fp16, BSHD (layout 0) or
 * BHSD (1), scale 1/sqrt(head_dim), on `stream`; 0 or the core's error
 * code with its message in msg.  mkb_attn_sm_mhz: the SM clock now
 * (clock.cuh; synchronizes the stream).
 */
#include <math.h>
#include <string.h>

#include "attn/attn.h"
#include "clock.cuh"
#include "rt/rt.h"

extern "C" __attribute__((visibility("default"))) int
mkb_attn_core(const void *q, const void *k, const void *v, void *o, float *lse, long long batch,
              long long seq, long long heads, long long kv_heads, long long head_dim, int causal,
              int layout, int f16, void *stream, char *msg, size_t len)
{
    mki_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = q;
    a.o = o;
    a.lse = lse;
    a.batch = batch;
    a.seq = seq;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = head_dim;
    a.layout = layout;
    a.dtype = f16 ? MKI_F16 : MKI_BF16;
    a.scale = 1.0f / sqrtf((float)head_dim);
    a.causal = causal;
    a.qpos.split = seq;
    a.nseg = 1;
    a.seg[0].k = k;
    a.seg[0].v = v;
    a.seg[0].pos.split = seq;
    return mki_attn_run(&a, stream, msg, len); /* validates first */
}

extern "C" __attribute__((visibility("default"))) double mkb_attn_sm_mhz(void *stream, int us)
{
    return mkb_sm_mhz((cudaStream_t)stream, us);
}
