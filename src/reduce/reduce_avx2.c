/*
 * AVX2 + F16C reduction kernels, equal bit for bit to the scalar reference (reduce_scalar.c).
 *
 * Every kernel walks the elements in blocks of four 256-bit registers. A block is loaded from the
 * first input, combined with the same block of every other input while it stays in registers, and
 * stored once, so nsrc inputs of N bytes cost (nsrc + 1) * N bytes of memory traffic and dst may
 * be any one of the inputs. fp16 and bf16 blocks are widened to fp32 on load and rounded once on
 * store, as the reference does. Elements left over after the last whole unit (see unit_t) are staged
 * through a small zero-padded buffer and run through the same code, so tails cannot disagree with
 * the body.
 *
 * Only the kernels carry the target attribute; the rest of the library is built for the baseline
 * ISA and this file is entered only after reduce_dispatch.c has seen AVX2 and F16C on the CPU. FMA
 * is deliberately not enabled: no kernel multiplies and adds the same element, and leaving it out
 * means the compiler cannot fuse operations and round differently from the reference.
 *
 * Every dtype x op pair has a kernel here. The table at the end may leave a pair out, which hands
 * it to the scalar reference: that is the place for a pair without a good AVX2 form.
 */
#include "reduce_kernels.h"

#if HC_REDUCE_HAVE_AVX2

#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "hc_reduce.h"

#define AVX2_FN __attribute__((target("avx2,f16c")))
/* The block helpers take their element access and combine step as function pointers; inlining
 * them into each kernel turns those into direct, inlined instructions. */
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))

/*
 * The unit every kernel loads, combines and stores: two registers' worth of elements from one
 * contiguous chunk of memory (64 bytes of a native type, 32 bytes of fp16 or bf16). Two registers
 * rather than one let bf16 widen a whole 256-bit load with two unpacks instead of two
 * zero-extensions and two shifts (bf16 sums ran 1.4-1.6x faster that way, docs/reductions.md);
 * the order of elements inside a unit is the load's business, as long as its store puts them back.
 */
typedef struct {
    __m256i lo, hi;
} unit_t;

typedef unit_t (*load_fn)(const uint8_t *p);
typedef void (*store_fn)(uint8_t *p, unit_t v);
typedef __m256i (*combine_fn)(__m256i acc, __m256i in);

/* Bytes per element and bytes per unit in memory. */
typedef struct {
    size_t elem_bytes;
    size_t unit_bytes;
} layout_t;

#define UNIT_MAX_BYTES 64
#define BLOCK_UNITS 2

/* ---- moving elements between memory and registers ------------------------------------------ */

AVX2_INLINE unit_t load_native(const uint8_t *p)
{
    unit_t u = {.lo = _mm256_loadu_si256((const __m256i *)p), .hi = _mm256_loadu_si256((const __m256i *)(p + 32))};

    return u;
}

AVX2_INLINE void store_native(uint8_t *p, unit_t v)
{
    _mm256_storeu_si256((__m256i *)p, v.lo);
    _mm256_storeu_si256((__m256i *)(p + 32), v.hi);
}

/* F16C widens exactly; a signalling NaN comes back quiet, which the reference's narrowing does to
 * every NaN anyway, so results agree. */
AVX2_INLINE unit_t load_fp16(const uint8_t *p)
{
    unit_t u = {.lo = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p))),
                .hi = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16))))};

    return u;
}

/* Round to nearest even whatever MXCSR says, like hc_float_to_half; checked equal to it for all
 * 2^32 float bit patterns, NaN payloads included. */
AVX2_INLINE void store_fp16(uint8_t *p, unit_t v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(_mm256_castsi256_ps(v.lo), _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128((__m128i *)(p + 16), _mm256_cvtps_ph(_mm256_castsi256_ps(v.hi), _MM_FROUND_TO_NEAREST_INT));
}

/* A bf16 with 16 zero bits below it is its fp32 value. Unpacking works within 128-bit lanes, so lo
 * holds elements 0-3 and 8-11 and hi holds 4-7 and 12-15; store_bf16's pack undoes exactly that. */
AVX2_INLINE unit_t load_bf16(const uint8_t *p)
{
    __m256i packed = _mm256_loadu_si256((const __m256i *)p), zero = _mm256_setzero_si256();
    unit_t u = {.lo = _mm256_unpacklo_epi16(zero, packed), .hi = _mm256_unpackhi_epi16(zero, packed)};

    return u;
}

/* hc_float_to_bf16 lane by lane, leaving the bf16 in the low 16 bits: a NaN keeps its top bits and
 * is made quiet so truncation cannot turn it into Inf; anything else gets 0x7fff plus its lowest
 * kept bit added, which rounds ties to even and lets a carry overflow into Inf. */
AVX2_INLINE __m256i round_to_bf16(__m256i v)
{
    __m256 f = _mm256_castsi256_ps(v);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(v, _mm256_add_epi32(kept_lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(v, _mm256_set1_epi32(0x00400000));

    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

/* round_to_bf16 for lanes known not to be NaN: the rounding add alone. */
AVX2_INLINE __m256i round_number_to_bf16(__m256i v)
{
    __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));

    return _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(kept_lsb, _mm256_set1_epi32(0x7fff))), 16);
}

/* Every lane is below 0x10000, so the saturating pack only narrows; packing lane by lane restores
 * the element order load_bf16 unpacked. NaNs are rare: one test for the unit's 16 lanes lets the
 * usual case skip the NaN blend (bf16 sums were bound by the rounding, 3.5x fp32's cost per byte). */
AVX2_INLINE void store_bf16(uint8_t *p, unit_t v)
{
    __m256 lo = _mm256_castsi256_ps(v.lo), hi = _mm256_castsi256_ps(v.hi);
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(lo, lo, _CMP_UNORD_Q), _mm256_cmp_ps(hi, hi, _CMP_UNORD_Q));

    if (__builtin_expect(_mm256_testz_ps(nan, nan), 1))
        _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(round_number_to_bf16(v.lo), round_number_to_bf16(v.hi)));
    else
        _mm256_storeu_si256((__m256i *)p, _mm256_packus_epi32(round_to_bf16(v.lo), round_to_bf16(v.hi)));
}

/*
 * bf16 stores with AVX-512 BF16 (the "avx512bf16" kernel set): VCVTNEPS2BF16 rounds to nearest even
 * and quiets NaNs exactly as round_to_bf16 does, but treats denormal inputs as zero (Intel SDM), which
 * the reference does not. So a unit with a denormal fp32 lane (VFPCLASSPS, one test per register)
 * takes store_bf16; every other unit converts in two instructions. Measured on the 2-CPU VM, sum of
 * two inputs, in cache: 20 -> 30 GB/s of output at 32-128 KiB, bit-identical.
 */
#define AVX512BF16_TARGET "avx2,f16c,avx512f,avx512vl,avx512dq,avx512bf16"
#define AVX512BF16_INLINE static inline __attribute__((always_inline, target(AVX512BF16_TARGET)))

AVX512BF16_INLINE void store_bf16_cvt(uint8_t *p, unit_t v)
{
    __m256 lo = _mm256_castsi256_ps(v.lo), hi = _mm256_castsi256_ps(v.hi);

    if (__builtin_expect((_mm256_fpclass_ps_mask(lo, 0x20) | _mm256_fpclass_ps_mask(hi, 0x20)) == 0, 1)) {
        /* lo holds elements 0-3 and 8-11, hi 4-7 and 12-15 (load_bf16). */
        __m128i a = (__m128i)_mm256_cvtneps_pbh(lo), b = (__m128i)_mm256_cvtneps_pbh(hi);
        _mm_storeu_si128((__m128i *)p, _mm_unpacklo_epi64(a, b));
        _mm_storeu_si128((__m128i *)(p + 16), _mm_unpackhi_epi64(a, b));
    } else {
        store_bf16(p, v);
    }
}

/* ---- combining an accumulator with one input ------------------------------------------------ */

AVX2_INLINE __m256i add_8(__m256i acc, __m256i in)
{
    return _mm256_add_epi8(acc, in);
}

AVX2_INLINE __m256i add_16(__m256i acc, __m256i in)
{
    return _mm256_add_epi16(acc, in);
}

AVX2_INLINE __m256i add_32(__m256i acc, __m256i in)
{
    return _mm256_add_epi32(acc, in);
}

AVX2_INLINE __m256i add_64(__m256i acc, __m256i in)
{
    return _mm256_add_epi64(acc, in);
}

/* There is no 8-bit multiply: multiply the even and the odd bytes as 16-bit lanes. The low byte of
 * a 16-bit product depends only on the low bytes of its factors, so it is the wrapped 8-bit
 * product, for signed and unsigned bytes alike. */
AVX2_INLINE __m256i mul_8(__m256i acc, __m256i in)
{
    __m256i even = _mm256_mullo_epi16(acc, in);
    __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(acc, 8), _mm256_srli_epi16(in, 8));

    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00ff)), _mm256_slli_epi16(odd, 8));
}

AVX2_INLINE __m256i mul_16(__m256i acc, __m256i in)
{
    return _mm256_mullo_epi16(acc, in);
}

AVX2_INLINE __m256i mul_32(__m256i acc, __m256i in)
{
    return _mm256_mullo_epi32(acc, in);
}

/* AVX2 has no 64-bit multiply. Modulo 2^64, a * b is lo(a) * lo(b) plus the two cross products
 * shifted up 32 bits (hi(a) * hi(b) only reaches bit 64 and above); each partial product is one
 * 32 x 32 -> 64-bit vpmuludq. */
AVX2_INLINE __m256i mul_64(__m256i acc, __m256i in)
{
    __m256i low = _mm256_mul_epu32(acc, in);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(acc, 32), in),
                                     _mm256_mul_epu32(acc, _mm256_srli_epi64(in, 32)));

    return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

AVX2_INLINE __m256i max_i8(__m256i acc, __m256i in)
{
    return _mm256_max_epi8(acc, in);
}

AVX2_INLINE __m256i min_i8(__m256i acc, __m256i in)
{
    return _mm256_min_epi8(acc, in);
}

AVX2_INLINE __m256i max_u8(__m256i acc, __m256i in)
{
    return _mm256_max_epu8(acc, in);
}

AVX2_INLINE __m256i min_u8(__m256i acc, __m256i in)
{
    return _mm256_min_epu8(acc, in);
}

AVX2_INLINE __m256i max_i16(__m256i acc, __m256i in)
{
    return _mm256_max_epi16(acc, in);
}

AVX2_INLINE __m256i min_i16(__m256i acc, __m256i in)
{
    return _mm256_min_epi16(acc, in);
}

AVX2_INLINE __m256i max_u16(__m256i acc, __m256i in)
{
    return _mm256_max_epu16(acc, in);
}

AVX2_INLINE __m256i min_u16(__m256i acc, __m256i in)
{
    return _mm256_min_epu16(acc, in);
}

AVX2_INLINE __m256i max_i32(__m256i acc, __m256i in)
{
    return _mm256_max_epi32(acc, in);
}

AVX2_INLINE __m256i min_i32(__m256i acc, __m256i in)
{
    return _mm256_min_epi32(acc, in);
}

AVX2_INLINE __m256i max_u32(__m256i acc, __m256i in)
{
    return _mm256_max_epu32(acc, in);
}

AVX2_INLINE __m256i min_u32(__m256i acc, __m256i in)
{
    return _mm256_min_epu32(acc, in);
}

/* AVX2 has a signed 64-bit greater-than but no 64-bit max or min: compare and blend. */
AVX2_INLINE __m256i max_i64(__m256i acc, __m256i in)
{
    return _mm256_blendv_epi8(acc, in, _mm256_cmpgt_epi64(in, acc));
}

AVX2_INLINE __m256i min_i64(__m256i acc, __m256i in)
{
    return _mm256_blendv_epi8(acc, in, _mm256_cmpgt_epi64(acc, in));
}

/* Unsigned order is signed order with the sign bits flipped. */
AVX2_INLINE __m256i flip_sign_64(__m256i v)
{
    return _mm256_xor_si256(v, _mm256_set1_epi64x(INT64_MIN));
}

AVX2_INLINE __m256i max_u64(__m256i acc, __m256i in)
{
    return _mm256_blendv_epi8(acc, in, _mm256_cmpgt_epi64(flip_sign_64(in), flip_sign_64(acc)));
}

AVX2_INLINE __m256i min_u64(__m256i acc, __m256i in)
{
    return _mm256_blendv_epi8(acc, in, _mm256_cmpgt_epi64(flip_sign_64(acc), flip_sign_64(in)));
}

AVX2_INLINE __m256i add_f32(__m256i acc, __m256i in)
{
    return _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(acc), _mm256_castsi256_ps(in)));
}

AVX2_INLINE __m256i mul_f32(__m256i acc, __m256i in)
{
    return _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(acc), _mm256_castsi256_ps(in)));
}

/*
 * The reference's FMAX(acc, in) lane by lane: take the input where it is greater than the
 * accumulator or NaN (NLE_UQ is "not less or equal", true when unordered), unless the accumulator
 * is NaN already. Equal values, +0 against -0 included, keep the accumulator. _mm256_max_ps alone
 * would return whichever operand is second when either is NaN.
 */
AVX2_INLINE __m256i max_f32(__m256i acc, __m256i in)
{
    __m256 a = _mm256_castsi256_ps(acc), x = _mm256_castsi256_ps(in);
    __m256 take = _mm256_and_ps(_mm256_cmp_ps(x, a, _CMP_NLE_UQ), _mm256_cmp_ps(a, a, _CMP_ORD_Q));

    return _mm256_castps_si256(_mm256_blendv_ps(a, x, take));
}

/* FMIN(acc, in): as max_f32 with "not greater or equal". */
AVX2_INLINE __m256i min_f32(__m256i acc, __m256i in)
{
    __m256 a = _mm256_castsi256_ps(acc), x = _mm256_castsi256_ps(in);
    __m256 take = _mm256_and_ps(_mm256_cmp_ps(x, a, _CMP_NGE_UQ), _mm256_cmp_ps(a, a, _CMP_ORD_Q));

    return _mm256_castps_si256(_mm256_blendv_ps(a, x, take));
}

AVX2_INLINE __m256i add_f64(__m256i acc, __m256i in)
{
    return _mm256_castpd_si256(_mm256_add_pd(_mm256_castsi256_pd(acc), _mm256_castsi256_pd(in)));
}

AVX2_INLINE __m256i mul_f64(__m256i acc, __m256i in)
{
    return _mm256_castpd_si256(_mm256_mul_pd(_mm256_castsi256_pd(acc), _mm256_castsi256_pd(in)));
}

AVX2_INLINE __m256i max_f64(__m256i acc, __m256i in)
{
    __m256d a = _mm256_castsi256_pd(acc), x = _mm256_castsi256_pd(in);
    __m256d take = _mm256_and_pd(_mm256_cmp_pd(x, a, _CMP_NLE_UQ), _mm256_cmp_pd(a, a, _CMP_ORD_Q));

    return _mm256_castpd_si256(_mm256_blendv_pd(a, x, take));
}

AVX2_INLINE __m256i min_f64(__m256i acc, __m256i in)
{
    __m256d a = _mm256_castsi256_pd(acc), x = _mm256_castsi256_pd(in);
    __m256d take = _mm256_and_pd(_mm256_cmp_pd(x, a, _CMP_NGE_UQ), _mm256_cmp_pd(a, a, _CMP_ORD_Q));

    return _mm256_castpd_si256(_mm256_blendv_pd(a, x, take));
}

/* ---- walking the elements ------------------------------------------------------------------- */

AVX2_INLINE unit_t combine_unit(unit_t acc, unit_t in, combine_fn combine)
{
    acc.lo = combine(acc.lo, in.lo);
    acc.hi = combine(acc.hi, in.hi);
    return acc;
}

/* BLOCK_UNITS units starting at byte offset off of every buffer. */
AVX2_INLINE void reduce_block(void *dst, const void *const *srcs, size_t nsrc, size_t off, size_t unit_bytes,
                              load_fn load, store_fn store, combine_fn combine)
{
    const uint8_t *in = (const uint8_t *)srcs[0] + off;
    uint8_t *out = (uint8_t *)dst + off;
    unit_t a0 = load(in), a1 = load(in + unit_bytes);

    for (size_t k = 1; k < nsrc; k++) {
        in = (const uint8_t *)srcs[k] + off;
        a0 = combine_unit(a0, load(in), combine);
        a1 = combine_unit(a1, load(in + unit_bytes), combine);
    }
    store(out, a0);
    store(out + unit_bytes, a1);
}

/* One unit at byte offset off. */
AVX2_INLINE void reduce_unit(void *dst, const void *const *srcs, size_t nsrc, size_t off, load_fn load,
                             store_fn store, combine_fn combine)
{
    unit_t acc = load((const uint8_t *)srcs[0] + off);

    for (size_t k = 1; k < nsrc; k++)
        acc = combine_unit(acc, load((const uint8_t *)srcs[k] + off), combine);
    store((uint8_t *)dst + off, acc);
}

/* Copy n < UNIT_MAX_BYTES bytes in at most six fixed-size moves. A memcpy of a variable size here
 * became a byte loop (six instructions a byte, three loops a tail on 2 ranks): a 32-byte fp32
 * AllReduce spent ~580 instructions in it, a 48-byte one ~860. */
AVX2_INLINE void copy_short(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t at = 0;

    for (size_t width = 32; width > 0; width /= 2) /* unrolled: each memcpy is of a constant size */
        if (n & width) {
            memcpy(dst + at, src + at, width);
            at += width;
        }
}

/* The last bytes (fewer than one unit) at byte offset off, copied through zero-padded buffers so
 * that no load or store reaches past the caller's buffers; the padding lanes are computed and
 * dropped. */
AVX2_INLINE void reduce_tail(void *dst, const void *const *srcs, size_t nsrc, size_t off, size_t bytes,
                             load_fn load, store_fn store, combine_fn combine)
{
    uint8_t in[UNIT_MAX_BYTES] = {0}, out[UNIT_MAX_BYTES];
    unit_t acc;

    copy_short(in, (const uint8_t *)srcs[0] + off, bytes);
    acc = load(in);
    for (size_t k = 1; k < nsrc; k++) {
        copy_short(in, (const uint8_t *)srcs[k] + off, bytes);
        acc = combine_unit(acc, load(in), combine);
    }
    store(out, acc);
    copy_short((uint8_t *)dst + off, out, bytes);
}

AVX2_INLINE void reduce_all(void *dst, const void *const *srcs, size_t nsrc, size_t count, layout_t layout,
                            load_fn load, store_fn store, combine_fn combine)
{
    const size_t total = count * layout.elem_bytes, unit_bytes = layout.unit_bytes;
    const size_t block_bytes = BLOCK_UNITS * unit_bytes;
    size_t off = 0;

    for (; total - off >= block_bytes; off += block_bytes)
        reduce_block(dst, srcs, nsrc, off, unit_bytes, load, store, combine);
    for (; total - off >= unit_bytes; off += unit_bytes)
        reduce_unit(dst, srcs, nsrc, off, load, store, combine);
    if (off < total)
        reduce_tail(dst, srcs, nsrc, off, total - off, load, store, combine);
}

/* ---- one kernel per data type and operation ------------------------------------------------- */

typedef void (*pair_kernel_fn)(void *dst, const void *const *srcs, size_t nsrc, size_t count);

/* The layouts: a native unit is two full registers, an fp16 or bf16 unit is the 16 elements that
 * widen into two registers of fp32. */
static const layout_t bytes1 = {.elem_bytes = 1, .unit_bytes = 64};
static const layout_t bytes2 = {.elem_bytes = 2, .unit_bytes = 64};
static const layout_t bytes4 = {.elem_bytes = 4, .unit_bytes = 64};
static const layout_t bytes8 = {.elem_bytes = 8, .unit_bytes = 64};
static const layout_t half_as_float = {.elem_bytes = 2, .unit_bytes = 32};

/* Stamps out a kernel: reduce_all specialised for one layout, element access and combine step. */
#define PAIR_KERNEL(name, layout, load, store, combine)                                     \
    AVX2_FN static void name(void *dst, const void *const *srcs, size_t nsrc, size_t count) \
    {                                                                                       \
        reduce_all(dst, srcs, nsrc, count, layout, load, store, combine);                   \
    }

PAIR_KERNEL(sum_8, bytes1, load_native, store_native, add_8)
PAIR_KERNEL(prod_8, bytes1, load_native, store_native, mul_8)
PAIR_KERNEL(max_int8, bytes1, load_native, store_native, max_i8)
PAIR_KERNEL(min_int8, bytes1, load_native, store_native, min_i8)
PAIR_KERNEL(max_uint8, bytes1, load_native, store_native, max_u8)
PAIR_KERNEL(min_uint8, bytes1, load_native, store_native, min_u8)

PAIR_KERNEL(sum_16, bytes2, load_native, store_native, add_16)
PAIR_KERNEL(prod_16, bytes2, load_native, store_native, mul_16)
PAIR_KERNEL(max_int16, bytes2, load_native, store_native, max_i16)
PAIR_KERNEL(min_int16, bytes2, load_native, store_native, min_i16)
PAIR_KERNEL(max_uint16, bytes2, load_native, store_native, max_u16)
PAIR_KERNEL(min_uint16, bytes2, load_native, store_native, min_u16)

PAIR_KERNEL(sum_32, bytes4, load_native, store_native, add_32)
PAIR_KERNEL(prod_32, bytes4, load_native, store_native, mul_32)
PAIR_KERNEL(max_int32, bytes4, load_native, store_native, max_i32)
PAIR_KERNEL(min_int32, bytes4, load_native, store_native, min_i32)
PAIR_KERNEL(max_uint32, bytes4, load_native, store_native, max_u32)
PAIR_KERNEL(min_uint32, bytes4, load_native, store_native, min_u32)

PAIR_KERNEL(sum_64, bytes8, load_native, store_native, add_64)
PAIR_KERNEL(prod_64, bytes8, load_native, store_native, mul_64)
PAIR_KERNEL(max_int64, bytes8, load_native, store_native, max_i64)
PAIR_KERNEL(min_int64, bytes8, load_native, store_native, min_i64)
PAIR_KERNEL(max_uint64, bytes8, load_native, store_native, max_u64)
PAIR_KERNEL(min_uint64, bytes8, load_native, store_native, min_u64)

PAIR_KERNEL(sum_fp32, bytes4, load_native, store_native, add_f32)
PAIR_KERNEL(prod_fp32, bytes4, load_native, store_native, mul_f32)
PAIR_KERNEL(max_fp32, bytes4, load_native, store_native, max_f32)
PAIR_KERNEL(min_fp32, bytes4, load_native, store_native, min_f32)

PAIR_KERNEL(sum_fp64, bytes8, load_native, store_native, add_f64)
PAIR_KERNEL(prod_fp64, bytes8, load_native, store_native, mul_f64)
PAIR_KERNEL(max_fp64, bytes8, load_native, store_native, max_f64)
PAIR_KERNEL(min_fp64, bytes8, load_native, store_native, min_f64)

PAIR_KERNEL(sum_fp16, half_as_float, load_fp16, store_fp16, add_f32)
PAIR_KERNEL(prod_fp16, half_as_float, load_fp16, store_fp16, mul_f32)
PAIR_KERNEL(max_fp16, half_as_float, load_fp16, store_fp16, max_f32)
PAIR_KERNEL(min_fp16, half_as_float, load_fp16, store_fp16, min_f32)

/* The same with the AVX-512 BF16 store, for CPUs that have it (reduce_dispatch.c asks first). */
#define PAIR_KERNEL_BF16(name, combine)                                                                   \
    __attribute__((target(AVX512BF16_TARGET))) static void name(void *dst, const void *const *srcs,       \
                                                                size_t nsrc, size_t count)                \
    {                                                                                                     \
        reduce_all(dst, srcs, nsrc, count, half_as_float, load_bf16, store_bf16_cvt, combine);            \
    }

PAIR_KERNEL_BF16(sum_bf16_cvt, add_f32)
PAIR_KERNEL_BF16(prod_bf16_cvt, mul_f32)
PAIR_KERNEL_BF16(max_bf16_cvt, max_f32)
PAIR_KERNEL_BF16(min_bf16_cvt, min_f32)

PAIR_KERNEL(sum_bf16, half_as_float, load_bf16, store_bf16, add_f32)
PAIR_KERNEL(prod_bf16, half_as_float, load_bf16, store_bf16, mul_f32)
PAIR_KERNEL(max_bf16, half_as_float, load_bf16, store_bf16, max_f32)
PAIR_KERNEL(min_bf16, half_as_float, load_bf16, store_bf16, min_f32)

#define TYPE_SLOTS (HCCL_DATA_TYPE_BFP16 + 1)
#define OP_SLOTS (HCCL_REDUCE_MIN + 1)

/* A missing entry would be a pair left to the scalar reference (none today). */
static const pair_kernel_fn pair_kernels[TYPE_SLOTS][OP_SLOTS] = {
    [HCCL_DATA_TYPE_INT8] = {[HCCL_REDUCE_SUM] = sum_8, [HCCL_REDUCE_PROD] = prod_8,
                             [HCCL_REDUCE_MAX] = max_int8, [HCCL_REDUCE_MIN] = min_int8},
    [HCCL_DATA_TYPE_UINT8] = {[HCCL_REDUCE_SUM] = sum_8, [HCCL_REDUCE_PROD] = prod_8,
                              [HCCL_REDUCE_MAX] = max_uint8, [HCCL_REDUCE_MIN] = min_uint8},
    [HCCL_DATA_TYPE_INT16] = {[HCCL_REDUCE_SUM] = sum_16, [HCCL_REDUCE_PROD] = prod_16,
                              [HCCL_REDUCE_MAX] = max_int16, [HCCL_REDUCE_MIN] = min_int16},
    [HCCL_DATA_TYPE_UINT16] = {[HCCL_REDUCE_SUM] = sum_16, [HCCL_REDUCE_PROD] = prod_16,
                               [HCCL_REDUCE_MAX] = max_uint16, [HCCL_REDUCE_MIN] = min_uint16},
    [HCCL_DATA_TYPE_INT32] = {[HCCL_REDUCE_SUM] = sum_32, [HCCL_REDUCE_PROD] = prod_32,
                              [HCCL_REDUCE_MAX] = max_int32, [HCCL_REDUCE_MIN] = min_int32},
    [HCCL_DATA_TYPE_UINT32] = {[HCCL_REDUCE_SUM] = sum_32, [HCCL_REDUCE_PROD] = prod_32,
                               [HCCL_REDUCE_MAX] = max_uint32, [HCCL_REDUCE_MIN] = min_uint32},
    [HCCL_DATA_TYPE_INT64] = {[HCCL_REDUCE_SUM] = sum_64, [HCCL_REDUCE_PROD] = prod_64,
                              [HCCL_REDUCE_MAX] = max_int64, [HCCL_REDUCE_MIN] = min_int64},
    [HCCL_DATA_TYPE_UINT64] = {[HCCL_REDUCE_SUM] = sum_64, [HCCL_REDUCE_PROD] = prod_64,
                               [HCCL_REDUCE_MAX] = max_uint64, [HCCL_REDUCE_MIN] = min_uint64},
    [HCCL_DATA_TYPE_FP16] = {[HCCL_REDUCE_SUM] = sum_fp16, [HCCL_REDUCE_PROD] = prod_fp16,
                             [HCCL_REDUCE_MAX] = max_fp16, [HCCL_REDUCE_MIN] = min_fp16},
    [HCCL_DATA_TYPE_BFP16] = {[HCCL_REDUCE_SUM] = sum_bf16, [HCCL_REDUCE_PROD] = prod_bf16,
                              [HCCL_REDUCE_MAX] = max_bf16, [HCCL_REDUCE_MIN] = min_bf16},
    [HCCL_DATA_TYPE_FP32] = {[HCCL_REDUCE_SUM] = sum_fp32, [HCCL_REDUCE_PROD] = prod_fp32,
                             [HCCL_REDUCE_MAX] = max_fp32, [HCCL_REDUCE_MIN] = min_fp32},
    [HCCL_DATA_TYPE_FP64] = {[HCCL_REDUCE_SUM] = sum_fp64, [HCCL_REDUCE_PROD] = prod_fp64,
                             [HCCL_REDUCE_MAX] = max_fp64, [HCCL_REDUCE_MIN] = min_fp64},
};

static const pair_kernel_fn bf16_cvt_kernels[OP_SLOTS] = {
    [HCCL_REDUCE_SUM] = sum_bf16_cvt, [HCCL_REDUCE_PROD] = prod_bf16_cvt,
    [HCCL_REDUCE_MAX] = max_bf16_cvt, [HCCL_REDUCE_MIN] = min_bf16_cvt};

static void avx2_multi(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                       size_t count)
{
    pair_kernel_fn kernel = NULL;

    if ((unsigned)dtype < TYPE_SLOTS && (unsigned)op < OP_SLOTS)
        kernel = pair_kernels[dtype][op];
    if (kernel == NULL) {
        hc_reduce_multi_scalar(dtype, op, dst, srcs, nsrc, count);
        return;
    }
    kernel(dst, srcs, nsrc, count);
}

/* __builtin_cpu_supports also checks that the OS saves the YMM registers (XGETBV). F16C is read
 * from CPUID directly: clang's __builtin_cpu_supports does not know it. */
static int avx2_supported(void)
{
    unsigned eax, ebx, ecx, edx;

    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

const hc_reduce_kernel_ops_t hc_reduce_avx2_ops = {
    .name = "avx2",
    .supported = avx2_supported,
    .multi = avx2_multi,
};

/* The AVX2 set with bf16 stored by AVX-512 BF16. */
static void avx512bf16_multi(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                             size_t count)
{
    if (dtype == HCCL_DATA_TYPE_BFP16 && (unsigned)op < OP_SLOTS) {
        bf16_cvt_kernels[op](dst, srcs, nsrc, count);
        return;
    }
    avx2_multi(dtype, op, dst, srcs, nsrc, count);
}

static int avx512bf16_supported(void)
{
    __builtin_cpu_init();
    return avx2_supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
}

const hc_reduce_kernel_ops_t hc_reduce_avx512bf16_ops = {
    .name = "avx512bf16",
    .supported = avx512bf16_supported,
    .multi = avx512bf16_multi,
};

#endif /* HC_REDUCE_HAVE_AVX2 */
