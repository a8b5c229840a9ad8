/*
 * Scalar reference reduction kernels. Each type's kernel accumulates a block of elements across
 * every input before storing it, so dst may alias an input and fp16/bf16 are rounded once.
 * Blocks are small enough to live in L1 and regular enough for the compiler to vectorise.
 *
 * This is the definition of the results: the SIMD kernels (reduce_avx2.c) are tested against it
 * bit for bit, and HOSTCCL_SIMD=scalar selects it (reduce_dispatch.c).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hc_check.h"
#include "hc_reduce.h"
#include "reduce_kernels.h"

#define BLOCK 256

/* Integers: sum and product in the unsigned type of the same width (wrap, no UB), max/min in the
 * signed or unsigned type itself. */
#define INT_KERNEL(name, T, UT)                                                                    \
    static void name(HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc, size_t count) \
    {                                                                                              \
        T acc[BLOCK];                                                                              \
        for (size_t base = 0; base < count; base += BLOCK) {                                       \
            size_t n = count - base < BLOCK ? count - base : BLOCK;                                \
            memcpy(acc, (const T *)srcs[0] + base, n * sizeof(T));                                 \
            for (size_t k = 1; k < nsrc; k++) {                                                    \
                const T *in = (const T *)srcs[k] + base;                                           \
                switch (op) {                                                                      \
                case HCCL_REDUCE_SUM:                                                              \
                    for (size_t i = 0; i < n; i++)                                                 \
                        acc[i] = (T)((UT)acc[i] + (UT)in[i]);                                      \
                    break;                                                                         \
                case HCCL_REDUCE_PROD:                                                             \
                    for (size_t i = 0; i < n; i++)                                                 \
                        acc[i] = (T)((UT)acc[i] * (UT)in[i]);                                      \
                    break;                                                                         \
                case HCCL_REDUCE_MAX:                                                              \
                    for (size_t i = 0; i < n; i++)                                                 \
                        acc[i] = in[i] > acc[i] ? in[i] : acc[i];                                  \
                    break;                                                                         \
                default:                                                                           \
                    for (size_t i = 0; i < n; i++)                                                 \
                        acc[i] = in[i] < acc[i] ? in[i] : acc[i];                                  \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            memcpy((T *)dst + base, acc, n * sizeof(T));                                           \
        }                                                                                          \
    }

/* uint8/uint16 promote to int before multiplying, which could overflow int for uint16:
 * multiply in uint32_t instead. */
INT_KERNEL(reduce_i8, int8_t, uint32_t)
INT_KERNEL(reduce_u8, uint8_t, uint32_t)
INT_KERNEL(reduce_i16, int16_t, uint32_t)
INT_KERNEL(reduce_u16, uint16_t, uint32_t)
INT_KERNEL(reduce_i32, int32_t, uint32_t)
INT_KERNEL(reduce_u32, uint32_t, uint32_t)
INT_KERNEL(reduce_i64, int64_t, uint64_t)
INT_KERNEL(reduce_u64, uint64_t, uint64_t)

/* Floating max/min propagate NaN (either input NaN gives NaN), unlike fmax/fmin. */
#define FMAX(a, b) (isnan(a) ? (a) : (isnan(b) ? (b) : ((b) > (a) ? (b) : (a))))
#define FMIN(a, b) (isnan(a) ? (a) : (isnan(b) ? (b) : ((b) < (a) ? (b) : (a))))

static void combine_float(HcclReduceOp op, float *acc, const float *in, size_t n)
{
    switch (op) {
    case HCCL_REDUCE_SUM:
        for (size_t i = 0; i < n; i++)
            acc[i] += in[i];
        break;
    case HCCL_REDUCE_PROD:
        for (size_t i = 0; i < n; i++)
            acc[i] *= in[i];
        break;
    case HCCL_REDUCE_MAX:
        for (size_t i = 0; i < n; i++)
            acc[i] = FMAX(acc[i], in[i]);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            acc[i] = FMIN(acc[i], in[i]);
        break;
    }
}

static void combine_double(HcclReduceOp op, double *acc, const double *in, size_t n)
{
    switch (op) {
    case HCCL_REDUCE_SUM:
        for (size_t i = 0; i < n; i++)
            acc[i] += in[i];
        break;
    case HCCL_REDUCE_PROD:
        for (size_t i = 0; i < n; i++)
            acc[i] *= in[i];
        break;
    case HCCL_REDUCE_MAX:
        for (size_t i = 0; i < n; i++)
            acc[i] = FMAX(acc[i], in[i]);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            acc[i] = FMIN(acc[i], in[i]);
        break;
    }
}

static void reduce_f32(HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc, size_t count)
{
    float acc[BLOCK];

    for (size_t base = 0; base < count; base += BLOCK) {
        size_t n = count - base < BLOCK ? count - base : BLOCK;
        memcpy(acc, (const float *)srcs[0] + base, n * sizeof(float));
        for (size_t k = 1; k < nsrc; k++)
            combine_float(op, acc, (const float *)srcs[k] + base, n);
        memcpy((float *)dst + base, acc, n * sizeof(float));
    }
}

static void reduce_f64(HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc, size_t count)
{
    double acc[BLOCK];

    for (size_t base = 0; base < count; base += BLOCK) {
        size_t n = count - base < BLOCK ? count - base : BLOCK;
        memcpy(acc, (const double *)srcs[0] + base, n * sizeof(double));
        for (size_t k = 1; k < nsrc; k++)
            combine_double(op, acc, (const double *)srcs[k] + base, n);
        memcpy((double *)dst + base, acc, n * sizeof(double));
    }
}

/* fp16 and bf16: widen every input to fp32, accumulate, round once. */
static void reduce_half_like(HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc, size_t count,
                             float (*widen)(uint16_t), uint16_t (*narrow)(float))
{
    float acc[BLOCK], in[BLOCK];

    for (size_t base = 0; base < count; base += BLOCK) {
        size_t n = count - base < BLOCK ? count - base : BLOCK;
        const uint16_t *first = (const uint16_t *)srcs[0] + base;
        uint16_t *out = (uint16_t *)dst + base;
        for (size_t i = 0; i < n; i++)
            acc[i] = widen(first[i]);
        for (size_t k = 1; k < nsrc; k++) {
            const uint16_t *src = (const uint16_t *)srcs[k] + base;
            for (size_t i = 0; i < n; i++)
                in[i] = widen(src[i]);
            combine_float(op, acc, in, n);
        }
        for (size_t i = 0; i < n; i++)
            out[i] = narrow(acc[i]);
    }
}

/*
 * A few elements (hc_reduce_multi sends every reduction below 32 bytes here): element by element
 * across the inputs, without a block buffer, the operation chosen once, not per element (a 2-rank
 * 8-byte fp32 sum: 116 instructions through the block kernel's frame and the dispatch, ~40 here).
 * The same operations in the same order as the block kernels (fp16/bf16 widened to fp32 and
 * rounded once), so the same bits. Integers take their kernels. S: what the buffers hold, T: what
 * it accumulates in.
 */
#define FEW_LOOP(S, T, load, combine, store)                                                       \
    for (size_t i = 0; i < count; i++) {                                                           \
        T a = load(((const S *)srcs[0])[i]);                                                       \
        for (size_t k = 1; k < nsrc; k++)                                                          \
            a = combine(a, load(((const S *)srcs[k])[i]));                                         \
        ((S *)dst)[i] = store(a);                                                                  \
    }
#define SAME(x) (x)
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define FEW_FLOATS(S, T, load, store)                                                              \
    switch (op) {                                                                                  \
    case HCCL_REDUCE_SUM:                                                                          \
        FEW_LOOP(S, T, load, ADD, store);                                                          \
        break;                                                                                     \
    case HCCL_REDUCE_PROD:                                                                         \
        FEW_LOOP(S, T, load, MUL, store);                                                          \
        break;                                                                                     \
    case HCCL_REDUCE_MAX:                                                                          \
        FEW_LOOP(S, T, load, FMAX, store);                                                         \
        break;                                                                                     \
    default:                                                                                       \
        FEW_LOOP(S, T, load, FMIN, store);                                                         \
        break;                                                                                     \
    }

/* fp16 and bf16 out of line: their conversions' calls would give fp32's path a heavier frame. */
static __attribute__((noinline)) void few_halves(HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                                                 size_t count, float (*widen)(uint16_t), uint16_t (*narrow)(float))
{
    FEW_FLOATS(uint16_t, float, widen, narrow);
}

void hc_reduce_few_scalar(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                          size_t count)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_FP32:
        FEW_FLOATS(float, float, SAME, SAME);
        break;
    case HCCL_DATA_TYPE_FP64:
        FEW_FLOATS(double, double, SAME, SAME);
        break;
    case HCCL_DATA_TYPE_FP16:
        few_halves(op, dst, srcs, nsrc, count, hc_half_to_float, hc_float_to_half);
        break;
    case HCCL_DATA_TYPE_BFP16:
        few_halves(op, dst, srcs, nsrc, count, hc_bf16_to_float, hc_float_to_bf16);
        break;
    default:
        hc_reduce_multi_scalar(dtype, op, dst, srcs, nsrc, count);
        break;
    }
}

void hc_reduce_multi_scalar(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                            size_t count)
{
    hc_assert(nsrc >= 1);
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        reduce_i8(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_UINT8:
        reduce_u8(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_INT16:
        reduce_i16(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_UINT16:
        reduce_u16(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_INT32:
        reduce_i32(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_UINT32:
        reduce_u32(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_INT64:
        reduce_i64(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_UINT64:
        reduce_u64(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_FP32:
        reduce_f32(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_FP64:
        reduce_f64(op, dst, srcs, nsrc, count);
        break;
    case HCCL_DATA_TYPE_FP16:
        reduce_half_like(op, dst, srcs, nsrc, count, hc_half_to_float, hc_float_to_half);
        break;
    case HCCL_DATA_TYPE_BFP16:
        reduce_half_like(op, dst, srcs, nsrc, count, hc_bf16_to_float, hc_float_to_bf16);
        break;
    default:
        hc_assert(!"unsupported dtype reached the reduction kernels");
    }
}

static int scalar_supported(void)
{
    return 1;
}

const hc_reduce_kernel_ops_t hc_reduce_scalar_ops = {
    .name = "scalar",
    .supported = scalar_supported,
    .multi = hc_reduce_multi_scalar,
};
