/* Data type table. */
#include <stdio.h>

#include "hc_dtype.h"

static const char *const dtypes[] = {
    [HCCL_DATA_TYPE_INT8] = "int8",     [HCCL_DATA_TYPE_INT16] = "int16", [HCCL_DATA_TYPE_INT32] = "int32",
    [HCCL_DATA_TYPE_FP16] = "fp16",     [HCCL_DATA_TYPE_FP32] = "fp32",   [HCCL_DATA_TYPE_INT64] = "int64",
    [HCCL_DATA_TYPE_UINT64] = "uint64", [HCCL_DATA_TYPE_UINT8] = "uint8", [HCCL_DATA_TYPE_UINT16] = "uint16",
    [HCCL_DATA_TYPE_UINT32] = "uint32", [HCCL_DATA_TYPE_FP64] = "fp64",   [HCCL_DATA_TYPE_BFP16] = "bf16",
};

_Static_assert(sizeof(dtypes) / sizeof(dtypes[0]) <= HC_DTYPE_TABLE, "hc_dtype_sizes is too small");

const unsigned char hc_dtype_sizes[HC_DTYPE_TABLE] = {
    [HCCL_DATA_TYPE_INT8] = 1,   [HCCL_DATA_TYPE_INT16] = 2,  [HCCL_DATA_TYPE_INT32] = 4,
    [HCCL_DATA_TYPE_FP16] = 2,   [HCCL_DATA_TYPE_FP32] = 4,   [HCCL_DATA_TYPE_INT64] = 8,
    [HCCL_DATA_TYPE_UINT64] = 8, [HCCL_DATA_TYPE_UINT8] = 1,  [HCCL_DATA_TYPE_UINT16] = 2,
    [HCCL_DATA_TYPE_UINT32] = 4, [HCCL_DATA_TYPE_FP64] = 8,   [HCCL_DATA_TYPE_BFP16] = 2,
};

const char *hc_dtype_name(HcclDataType dtype)
{
    static _Thread_local char unknown[24];

    if (hc_dtype_size(dtype) != 0)
        return dtypes[dtype];
    snprintf(unknown, sizeof(unknown), "dtype(%d)", (int)dtype);
    return unknown;
}

const char *hc_redop_name(HcclReduceOp op)
{
    static _Thread_local char unknown[24];

    switch (op) {
    case HCCL_REDUCE_SUM:
        return "sum";
    case HCCL_REDUCE_PROD:
        return "prod";
    case HCCL_REDUCE_MAX:
        return "max";
    case HCCL_REDUCE_MIN:
        return "min";
    default:
        snprintf(unknown, sizeof(unknown), "op(%d)", (int)op);
        return unknown;
    }
}
