/* Data types and reduction operations: sizes, names, validity. */
#ifndef HC_DTYPE_H
#define HC_DTYPE_H

#include <stddef.h>

#include <hccl/hccl_types.h>

/* Bytes per element of the types below HC_DTYPE_TABLE (0: not supported); dtype.c fills it. */
#define HC_DTYPE_TABLE 16
extern const unsigned char hc_dtype_sizes[HC_DTYPE_TABLE];

/* Bytes per element; 0 for a type hostccl does not support (INT128, HIF8, FP8, unknown). Inline:
 * every op asks several times (argument checks, engines). */
static inline size_t hc_dtype_size(HcclDataType dtype)
{
    return (unsigned)dtype < HC_DTYPE_TABLE ? hc_dtype_sizes[dtype] : 0;
}

/* Whole elements of dtype (a supported one: 1, 2, 4 or 8 bytes) in `bytes`: a shift, not the 64-bit
 * division that `bytes / hc_dtype_size(dtype)` compiles to (tens of cycles, on the small-op path). */
static inline unsigned long long hc_dtype_elems(unsigned long long bytes, HcclDataType dtype)
{
    return bytes >> __builtin_ctz((unsigned)hc_dtype_size(dtype));
}

/* "fp16", "int32", ... ("dtype(N)" for an unknown value, in a static buffer per call site). */
const char *hc_dtype_name(HcclDataType dtype);

/* "sum", "prod", "max", "min" or "op(N)". */
const char *hc_redop_name(HcclReduceOp op);

static inline int hc_redop_valid(HcclReduceOp op)
{
    return op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_PROD || op == HCCL_REDUCE_MAX || op == HCCL_REDUCE_MIN;
}

#endif /* HC_DTYPE_H */
