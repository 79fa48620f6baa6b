/*
 * opname.c - the names of the operations: short ones for MK_SM_SPLIT and
 * mkinfo, the API's for messages (error records name the call).
 */
#include <strings.h>

#include "mki.h"

static const char *const names[MKI_OP_COUNT][2] = {
    [MKI_OP_ALLGATHER] = {"allgather", "mkAllGather"},
    [MKI_OP_REDUCESCATTER] = {"reducescatter", "mkReduceScatter"},
    [MKI_OP_ALLREDUCE] = {"allreduce", "mkAllReduce"},
    [MKI_OP_ALLTOALL] = {"alltoall", "mkAllToAll"},
    [MKI_OP_AG_GEMM] = {"ag_gemm", "mkAllGatherGemm"},
    [MKI_OP_GEMM_RS] = {"gemm_rs", "mkGemmReduceScatter"},
    [MKI_OP_GEMM_AR] = {"gemm_ar", "mkGemmAllReduce"},
    [MKI_OP_MOE_DISPATCH] = {"moe_dispatch", "mkMoEDispatch"},
    [MKI_OP_MOE_COMBINE] = {"moe_combine", "mkMoECombine"},
    [MKI_OP_MOE_DISPATCH_GEMM] = {"moe_dispatch_gemm", "mkMoEDispatchGemm"},
    [MKI_OP_RING_ATTN] = {"ring_attn", "mkRingAttention"},
    [MKI_OP_MOE_LAYER] = {"moe_layer", "mkMoEDispatchFfnCombine"},
};

const char *mki_op_name(enum mki_op op)
{
    return (unsigned)op < MKI_OP_COUNT ? names[op][0] : "?";
}

const char *mki_op_api_name(int op)
{
    return (unsigned)op < MKI_OP_COUNT ? names[op][1] : "an operation";
}

int mki_op_from_name(const char *name)
{
    for (int i = 0; i < MKI_OP_COUNT; i++)
        if (strcasecmp(name, names[i][0]) == 0) return i;
    return -1;
}
