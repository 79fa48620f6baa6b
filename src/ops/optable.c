/*
 * optable.c - the op table: every operation of the library, one line
 * each, and what the communicator does with all of them (size their host
 * memory, make and destroy their state, load their kernels).
 */
#include <stdio.h>

#include "mki.h"
#include "ops/op.h"

extern const struct mki_op_desc mki_op_coll;     /* coll.c */
extern const struct mki_op_desc mki_op_ag_gemm;  /* ag_gemm.c */
extern const struct mki_op_desc mki_op_gemm_rs;  /* gemm_rs.c */
extern const struct mki_op_desc mki_op_gemm_ar;  /* gemm_rs.c */
extern const struct mki_op_desc mki_op_moe;      /* moe.c */
extern const struct mki_op_desc mki_op_ring_attn; /* attn.c */

const struct mki_op_desc *const mki_op_table[] = {
    &mki_op_coll,
    &mki_op_ag_gemm,
    &mki_op_gemm_rs,
    &mki_op_gemm_ar,
    &mki_op_moe,
    &mki_op_ring_attn,
    NULL,
};

static int index_of(const struct mki_op_desc *op)
{
    for (int i = 0; mki_op_table[i]; i++)
        if (mki_op_table[i] == op) return i;
    return -1;
}

void *mki_op_state(const struct mkComm *comm, const struct mki_op_desc *op)
{
    const int i = index_of(op);
    return i < 0 ? NULL : comm->op_state[i];
}

size_t mki_ops_host_bytes(const struct mkComm *comm)
{
    size_t b = 0;
    for (int i = 0; mki_op_table[i]; i++)
        if (mki_op_table[i]->host_bytes) b += mki_op_table[i]->host_bytes(comm);
    return b;
}

mkResult_t mki_ops_create(struct mkComm *comm)
{
    for (int i = 0; mki_op_table[i]; i++) {
        if (!mki_op_table[i]->create) continue;
        mkResult_t r = mki_op_table[i]->create(comm, &comm->op_state[i]);
        if (r != mkSuccess) {
            MKI_TRACE(MKI_SUB_INIT, "-> creating %s", mki_op_table[i]->name);
            return r;
        }
    }
    return mkSuccess;
}

void mki_ops_destroy(struct mkComm *comm)
{
    mki_op_split_free(comm); /* the internal communicators, while the ops' buffers live */
    for (int i = 0; mki_op_table[i]; i++) {
        if (mki_op_table[i]->destroy) mki_op_table[i]->destroy(comm, comm->op_state[i]);
        comm->op_state[i] = NULL;
    }
}

mkResult_t mki_ops_preload(struct mkComm *comm)
{
    char msg[256];
    for (int i = 0; mki_op_table[i]; i++)
        if (mki_op_table[i]->preload && mki_op_table[i]->preload(msg, sizeof(msg)) != 0)
            return mki_error(comm, mkErrCuda, "cannot load the kernels of %s on CUDA device %d: "
                             "%s (the library is built for sm_90a: Hopper GPUs only)",
                             mki_op_table[i]->name, comm->cuda_dev, msg);
    return mkSuccess;
}
