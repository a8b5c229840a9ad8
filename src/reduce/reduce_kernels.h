/*
 * The reduction kernel sets that reduce_dispatch.c chooses between (private to src/reduce).
 *
 * Every set implements the whole hc_reduce_multi contract of hc_reduce.h for all 12 data types
 * and 4 operations, bit for bit the same as the scalar reference (NaN payloads aside where two
 * NaNs meet in a sum or product); a set without a fast form for some pair hands that pair to the
 * scalar reference itself.
 */
#ifndef HC_REDUCE_KERNELS_H
#define HC_REDUCE_KERNELS_H

#include <stddef.h>

#include <hccl/hccl_types.h>

typedef struct {
    /* What HOSTCCL_SIMD calls this set and what hc_reduce_kernel_name() reports. */
    const char *name;
    /* Nonzero when this CPU and OS can run the set. */
    int (*supported)(void);
    /* The hc_reduce_multi contract. */
    void (*multi)(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                  size_t count);
} hc_reduce_kernel_ops_t;

extern const hc_reduce_kernel_ops_t hc_reduce_scalar_ops;
/* hc_reduce_multi for a few elements (less than a vector register), the scalar set's results. */
void hc_reduce_few_scalar(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                          size_t count);

#if defined(__x86_64__) || defined(__i386__)
/* AVX2 + F16C kernels (reduce_avx2.c); only compiled for x86. */
#define HC_REDUCE_HAVE_AVX2 1
extern const hc_reduce_kernel_ops_t hc_reduce_avx2_ops;
/* The same with bf16 results rounded by AVX-512 BF16 (reduce_avx2.c). */
extern const hc_reduce_kernel_ops_t hc_reduce_avx512bf16_ops;
#else
#define HC_REDUCE_HAVE_AVX2 0
#endif

#endif /* HC_REDUCE_KERNELS_H */
