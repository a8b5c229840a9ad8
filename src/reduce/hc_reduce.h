/*
 * Reduction kernels (DESIGN.md 6).
 *
 * Integers wrap as two's complement; floating types keep NaN; fp16 and bf16 are widened to fp32,
 * accumulated across all inputs and rounded once (round to nearest even). Inputs are combined in
 * the order given, so a caller that passes them in rank order gets bit-identical results run
 * after run.
 */
#ifndef HC_REDUCE_H
#define HC_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

/*
 * dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i] for i < count.
 * dst may be the same buffer as any input (not a partial overlap). nsrc >= 1.
 * dtype and op must be valid (checked by the caller).
 */
void hc_reduce_multi(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                     size_t count);

/*
 * The scalar reference kernels behind the same contract: what every SIMD kernel must equal bit for
 * bit (a sum or product meeting two NaNs may return either one's payload). For tests and tools;
 * collectives call hc_reduce_multi.
 */
void hc_reduce_multi_scalar(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                            size_t count);

/*
 * Name of the kernel set hc_reduce_multi uses in this process: "avx2" or "scalar". The set is
 * chosen on first use from HOSTCCL_SIMD (auto: the best the CPU runs; scalar; avx2) and kept for
 * the life of the process.
 */
const char *hc_reduce_kernel_name(void);

/*
 * Tests only: choose the kernel set again as if HOSTCCL_SIMD were value (NULL: read the variable
 * again) and return its name. A reduction already running finishes with the set it started with.
 */
const char *hc_reduce_select_for_test(const char *value);

/* IEEE half <-> float and bfloat16 <-> float, round to nearest even, NaN kept quiet. */
float hc_half_to_float(uint16_t h);
uint16_t hc_float_to_half(float f);
float hc_bf16_to_float(uint16_t b);
uint16_t hc_float_to_bf16(float f);

#endif /* HC_REDUCE_H */
