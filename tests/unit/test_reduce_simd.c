/*
 * SIMD reduction kernels against the scalar reference: every dtype x op x nsrc {1,2,3,5,8} x count
 * 0..64 and two large counts, with misaligned buffers, in place on the first and the last input,
 * on data full of NaN, +-Inf, denormals, +-0 and integer extremes; every fp16 and bf16 value; and
 * the choice of kernels through HOSTCCL_SIMD, made in child processes because it happens once per
 * process.
 *
 * Results must be bit-exact, except that a sum or product meeting two NaNs may return either
 * one's payload (the compiler may swap the operands of the reference's additions).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hc_dtype.h"
#include "hc_reduce.h"

#define MAX_SRCS 16
#define ALIGN_BYTES 64
#define CANARY 0xa5
#define CHILD_FLAG "--print-kernel"

/* This program's path for the child processes: argv[0] when it names a file, since /proc/self/exe
 * is the tool itself under valgrind. */
static const char *self_path = "/proc/self/exe";

static const HcclDataType all_types[] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,  HCCL_DATA_TYPE_FP64,
};
#define TYPE_COUNT (sizeof(all_types) / sizeof(all_types[0]))

static const size_t src_counts[] = {1, 2, 3, 5, 8};
#define SRC_COUNT_CASES (sizeof(src_counts) / sizeof(src_counts[0]))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int is_float_type(HcclDataType t)
{
    return t == HCCL_DATA_TYPE_FP16 || t == HCCL_DATA_TYPE_BFP16 || t == HCCL_DATA_TYPE_FP32 ||
           t == HCCL_DATA_TYPE_FP64;
}

/* ---- data ------------------------------------------------------------------------------------ */

/* Bit patterns worth meeting: NaNs (quiet, signalling, with payloads, negative), +-Inf, the largest
 * finite values, the smallest normals, denormals, +-0, +-1. */
static const uint16_t fp16_special[] = {0x7e00, 0xfe00, 0x7c01, 0x7d55, 0x7c00, 0xfc00, 0x7bff, 0xfbff,
                                        0x0400, 0x0001, 0x03ff, 0x8001, 0x0000, 0x8000, 0x3c00, 0xbc00};
static const uint16_t bf16_special[] = {0x7fc0, 0xffc0, 0x7f81, 0x7fd5, 0x7f80, 0xff80, 0x7f7f, 0xff7f,
                                        0x0080, 0x0001, 0x007f, 0x8001, 0x0000, 0x8000, 0x3f80, 0xbf80};
static const uint32_t fp32_special[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0x7fc12345, 0x7f800000,
                                        0xff800000, 0x7f7fffff, 0xff7fffff, 0x00800000, 0x00000001,
                                        0x007fffff, 0x80000001, 0x00000000, 0x80000000, 0x3f800000,
                                        0xbf800000};
static const uint64_t fp64_special[] = {
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull, 0x7ff8000000012345ull,
    0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull,
    0x0010000000000000ull, 0x0000000000000001ull, 0x000fffffffffffffull, 0x8000000000000001ull,
    0x0000000000000000ull, 0x8000000000000000ull, 0x3ff0000000000000ull, 0xbff0000000000000ull};
#define SPECIAL_COUNT 16

/* A finite value of moderate size with a random mantissa: sums and products of these round in
 * every way, including ties, and a product of eight can still overflow fp16. */
static uint64_t moderate_bits(HcclDataType t, uint64_t r)
{
    uint64_t sign = (r >> 63) & 1u, exp_step = (r >> 56) & 15u;

    switch (t) {
    case HCCL_DATA_TYPE_FP16:
        return sign << 15 | (7u + exp_step) << 10 | (r & 0x3ffu);
    case HCCL_DATA_TYPE_BFP16:
        return sign << 15 | (119u + exp_step) << 7 | (r & 0x7fu);
    case HCCL_DATA_TYPE_FP32:
        return sign << 31 | (119u + exp_step) << 23 | (r & 0x7fffffu);
    default:
        return sign << 63 | (1015u + exp_step) << 52 | (r & 0xfffffffffffffull);
    }
}

static uint64_t special_bits(HcclDataType t, size_t size, uint64_t r)
{
    size_t i = (r >> 32) % SPECIAL_COUNT;
    uint64_t top = 1ull << (8 * size - 1), ones = top | (top - 1);
    uint64_t int_special[] = {0, ones, 1, top, top - 1}; /* 0, -1/max, 1, min, max */

    switch (t) {
    case HCCL_DATA_TYPE_FP16:
        return fp16_special[i];
    case HCCL_DATA_TYPE_BFP16:
        return bf16_special[i];
    case HCCL_DATA_TYPE_FP32:
        return fp32_special[i];
    case HCCL_DATA_TYPE_FP64:
        return fp64_special[i];
    default:
        return int_special[i % 5];
    }
}

/* One element in eight is special, three are raw random bits (NaNs and extremes among them for
 * floats), half are moderate values (floats) or random bits (integers). */
static void fill_random(HcclDataType t, void *buf, size_t count)
{
    size_t size = hc_dtype_size(t);

    for (size_t i = 0; i < count; i++) {
        uint64_t r = next_random(), bits = r, kind = r & 7u;
        if (kind == 0)
            bits = special_bits(t, size, r);
        else if (kind >= 4 && is_float_type(t))
            bits = moderate_bits(t, r);
        memcpy((uint8_t *)buf + i * size, &bits, size); /* little-endian: the low bytes */
    }
}

/* ---- comparing --------------------------------------------------------------------------------- */

static int is_nan_bits(HcclDataType t, const uint8_t *p)
{
    uint16_t h;
    uint32_t f;
    uint64_t d;

    switch (t) {
    case HCCL_DATA_TYPE_FP16:
        memcpy(&h, p, 2);
        return (h & 0x7fffu) > 0x7c00u;
    case HCCL_DATA_TYPE_BFP16:
        memcpy(&h, p, 2);
        return (h & 0x7fffu) > 0x7f80u;
    case HCCL_DATA_TYPE_FP32:
        memcpy(&f, p, 4);
        return (f & 0x7fffffffu) > 0x7f800000u;
    case HCCL_DATA_TYPE_FP64:
        memcpy(&d, p, 8);
        return (d & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default:
        return 0;
    }
}

static uint64_t element_bits(const uint8_t *p, size_t size)
{
    uint64_t bits = 0;

    memcpy(&bits, p, size);
    return bits;
}

static void assert_same(HcclDataType t, HcclReduceOp op, const void *got, const void *want, size_t count,
                        const char *what)
{
    size_t size = hc_dtype_size(t);
    int any_nan_ok = op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_PROD;

    for (size_t i = 0; i < count; i++) {
        const uint8_t *g = (const uint8_t *)got + i * size, *w = (const uint8_t *)want + i * size;
        if (memcmp(g, w, size) == 0 || (any_nan_ok && is_nan_bits(t, g) && is_nan_bits(t, w)))
            continue;
        fail_msg("%s %s %s element %zu: got 0x%llx want 0x%llx", hc_dtype_name(t), hc_redop_name(op), what, i,
                 (unsigned long long)element_bits(g, size), (unsigned long long)element_bits(w, size));
    }
}

/* ---- one case ------------------------------------------------------------------------------------ */

typedef struct {
    HcclDataType dtype;
    HcclReduceOp op;
    size_t nsrc;
    size_t count;
    size_t misalign_seed; /* 0: every buffer 64-byte aligned; else buffers start 0..7 elements in */
} reduce_case_t;

/* A buffer inside a canary-filled allocation, starting a whole number of elements past a 64-byte
 * boundary so that every vector alignment is met. */
typedef struct {
    uint8_t *base;
    uint8_t *data;
    size_t alloc_bytes;
} test_buf_t;

static test_buf_t buf_alloc(size_t data_bytes, size_t offset)
{
    test_buf_t b;

    b.alloc_bytes = (data_bytes + 2 * ALIGN_BYTES + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
    b.base = aligned_alloc(ALIGN_BYTES, b.alloc_bytes);
    assert_non_null(b.base);
    memset(b.base, CANARY, b.alloc_bytes);
    b.data = b.base + offset;
    return b;
}

/* Nothing outside [data, data + data_bytes) was written. */
static void assert_canary(const test_buf_t *b, size_t data_bytes, const char *what)
{
    for (uint8_t *p = b->base; p < b->base + b->alloc_bytes; p++) {
        if (p >= b->data && p < b->data + data_bytes)
            continue;
        if (*p != CANARY)
            fail_msg("%s: byte %td outside the output was written", what, p - b->data);
    }
}

static size_t buffer_offset(const reduce_case_t *c, size_t index)
{
    if (c->misalign_seed == 0)
        return 0;
    return (c->misalign_seed + 3 * index) % 8 * hc_dtype_size(c->dtype);
}

/* In place: dst is input `which`; the input is restored afterwards. */
static void check_in_place(const reduce_case_t *c, const void **srcs, size_t which, const void *want,
                           const char *what)
{
    size_t bytes = c->count * hc_dtype_size(c->dtype);
    void *saved = malloc(bytes + 1);
    void *dst = (void *)(uintptr_t)srcs[which];

    memcpy(saved, srcs[which], bytes);
    hc_reduce_multi(c->dtype, c->op, dst, srcs, c->nsrc, c->count);
    assert_same(c->dtype, c->op, dst, want, c->count, what);
    memcpy(dst, saved, bytes);
    free(saved);
}

static void run_case(const reduce_case_t *c)
{
    size_t bytes = c->count * hc_dtype_size(c->dtype);
    test_buf_t in[MAX_SRCS], out = buf_alloc(bytes, buffer_offset(c, c->nsrc));
    const void *srcs[MAX_SRCS];
    void *want = malloc(bytes + 1);
    char what[96];

    snprintf(what, sizeof(what), "nsrc=%zu count=%zu misalign=%zu", c->nsrc, c->count, c->misalign_seed);
    for (size_t k = 0; k < c->nsrc; k++) {
        in[k] = buf_alloc(bytes, buffer_offset(c, k));
        fill_random(c->dtype, in[k].data, c->count);
        srcs[k] = in[k].data;
    }
    hc_reduce_multi_scalar(c->dtype, c->op, want, srcs, c->nsrc, c->count);
    hc_reduce_multi(c->dtype, c->op, out.data, srcs, c->nsrc, c->count);
    assert_same(c->dtype, c->op, out.data, want, c->count, what);
    assert_canary(&out, bytes, what);
    check_in_place(c, srcs, 0, want, what);
    check_in_place(c, srcs, c->nsrc - 1, want, what);
    for (size_t k = 0; k < c->nsrc; k++)
        assert_canary(&in[k], bytes, what);

    for (size_t k = 0; k < c->nsrc; k++)
        free(in[k].base);
    free(out.base);
    free(want);
}

/* ---- kernel selection -------------------------------------------------------------------------- */

/* The comparisons below are about the SIMD kernels: choose the best set and skip when it is the
 * scalar reference itself (a CPU without AVX2). */
static void require_simd_kernels(void)
{
    if (strcmp(hc_reduce_select_for_test("auto"), "scalar") == 0)
        skip();
}

static int cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int cpu_has_avx512bf16(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

/* The set auto must pick on this CPU. */
static const char *best_set(void)
{
    return cpu_has_avx512bf16() ? "avx512bf16" : cpu_has_avx2() ? "avx2" : "scalar";
}

/* ---- tests ------------------------------------------------------------------------------------- */

static void test_every_pair_small_counts(void **state)
{
    (void)state;
    require_simd_kernels();
    for (size_t ti = 0; ti < TYPE_COUNT; ti++)
        for (int op = 0; op < 4; op++)
            for (size_t si = 0; si < SRC_COUNT_CASES; si++)
                for (size_t count = 0; count <= 64; count++)
                    for (size_t seed = 0; seed < 2; seed++) {
                        reduce_case_t c = {.dtype = all_types[ti], .op = (HcclReduceOp)op,
                                           .nsrc = src_counts[si], .count = count,
                                           .misalign_seed = seed == 0 ? 0 : 1 + count % 7};
                        run_case(&c);
                    }
}

static void test_every_pair_large_counts(void **state)
{
    static const size_t counts[] = {4099, 100003};

    (void)state;
    require_simd_kernels();
    for (size_t ti = 0; ti < TYPE_COUNT; ti++)
        for (int op = 0; op < 4; op++)
            for (size_t si = 0; si < SRC_COUNT_CASES; si++)
                for (size_t ci = 0; ci < 2; ci++) {
                    reduce_case_t c = {.dtype = all_types[ti], .op = (HcclReduceOp)op, .nsrc = src_counts[si],
                                       .count = counts[ci], .misalign_seed = 1 + si + ci};
                    run_case(&c);
                }
}

/* Many inputs, some of them the same buffer twice. */
static void test_many_and_repeated_inputs(void **state)
{
    (void)state;
    require_simd_kernels();
    for (size_t ti = 0; ti < TYPE_COUNT; ti++)
        for (int op = 0; op < 4; op++) {
            size_t count = 1000, bytes = count * hc_dtype_size(all_types[ti]);
            void *a = malloc(bytes), *b = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
            const void *srcs[MAX_SRCS];
            fill_random(all_types[ti], a, count);
            fill_random(all_types[ti], b, count);
            for (size_t k = 0; k < MAX_SRCS; k++)
                srcs[k] = k % 3 == 0 ? a : b;
            hc_reduce_multi_scalar(all_types[ti], (HcclReduceOp)op, want, srcs, MAX_SRCS, count);
            hc_reduce_multi(all_types[ti], (HcclReduceOp)op, got, srcs, MAX_SRCS, count);
            assert_same(all_types[ti], (HcclReduceOp)op, got, want, count, "16 repeated inputs");
            free(a);
            free(b);
            free(got);
            free(want);
        }
}

/* Every fp16 and bf16 bit pattern, alone (widen and narrow again) and against itself, its
 * neighbour, its negation and random values: covers every conversion edge of F16C and of the
 * integer bf16 rounding. */
static void every_half_value(void)
{
    static const HcclDataType half_types[] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16};
    size_t count = 0x10000;
    uint16_t *all = malloc(count * 2), *other = malloc(count * 2), *got = malloc(count * 2),
             *want = malloc(count * 2);

    for (size_t i = 0; i < count; i++)
        all[i] = (uint16_t)i;
    for (size_t ti = 0; ti < 2; ti++)
        for (int op = 0; op < 4; op++)
            for (int variant = 0; variant < 5; variant++) {
                const void *srcs[2] = {all, other};
                for (size_t i = 0; i < count; i++)
                    other[i] = variant == 0 ? all[i]
                               : variant == 1 ? (uint16_t)(all[i] + 1)
                               : variant == 2 ? (uint16_t)(all[i] ^ 0x8000)
                                              : (uint16_t)next_random();
                size_t nsrc = variant == 4 ? 1 : 2;
                hc_reduce_multi_scalar(half_types[ti], (HcclReduceOp)op, want, srcs, nsrc, count);
                hc_reduce_multi(half_types[ti], (HcclReduceOp)op, got, srcs, nsrc, count);
                assert_same(half_types[ti], (HcclReduceOp)op, got, want, count, "every value");
            }
    free(all);
    free(other);
    free(got);
    free(want);
}

static void test_every_half_value(void **state)
{
    (void)state;
    require_simd_kernels();
    every_half_value();
}

/* With AVX-512 BF16 the best set rounds bf16 its own way; the AVX2 set, which other CPUs pick,
 * is held to the reference here too (every bf16 value, and the tails of every pair). */
static void test_avx2_set_under_avx512bf16(void **state)
{
    (void)state;
    if (!cpu_has_avx512bf16())
        skip();
    assert_string_equal(hc_reduce_select_for_test("avx2"), "avx2");
    every_half_value();
    for (int op = 0; op < 4; op++)
        for (size_t count = 0; count <= 64; count++) {
            reduce_case_t c = {.dtype = HCCL_DATA_TYPE_BFP16, .op = (HcclReduceOp)op, .nsrc = 2, .count = count,
                               .misalign_seed = 1 + count % 7};
            run_case(&c);
        }
    hc_reduce_select_for_test("auto");
}

/* The reference's NaN rules hold in the SIMD kernels with the operands in both orders. */
static void test_float_nan_and_zero_order(void **state)
{
    float nan_a, nan_b, got, vals[] = {1.0f, -0.0f, 0.0f, INFINITY, -INFINITY, 0.0f, 0.0f};
    uint32_t a_bits = 0x7fc0aaaa, b_bits = 0xffc05555, got_bits;

    (void)state;
    require_simd_kernels();
    memcpy(&nan_a, &a_bits, 4);
    memcpy(&nan_b, &b_bits, 4);
    vals[5] = nan_a;
    vals[6] = nan_b;
    for (int op = HCCL_REDUCE_MAX; op <= HCCL_REDUCE_MIN; op++)
        for (size_t i = 0; i < 7; i++)
            for (size_t j = 0; j < 7; j++) {
                const void *srcs[2] = {&vals[i], &vals[j]};
                float want;
                hc_reduce_multi_scalar(HCCL_DATA_TYPE_FP32, (HcclReduceOp)op, &want, srcs, 2, 1);
                hc_reduce_multi(HCCL_DATA_TYPE_FP32, (HcclReduceOp)op, &got, srcs, 2, 1);
                assert_memory_equal(&got, &want, 4);
            }
    /* Spelled out: a NaN accumulator wins over a later NaN; +0 against -0 keeps the first. */
    const void *nans[2] = {&nan_a, &nan_b};
    hc_reduce_multi(HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, &got, nans, 2, 1);
    memcpy(&got_bits, &got, 4);
    assert_int_equal(got_bits, a_bits);
    const void *zeros[2] = {&vals[1], &vals[2]};
    hc_reduce_multi(HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, &got, zeros, 2, 1);
    assert_true(got == 0.0f && signbit(got));
}

/* ---- the choice of kernels, in-process hook and child processes ------------------------------ */

static void test_select_hook(void **state)
{
    (void)state;
    assert_string_equal(hc_reduce_select_for_test("scalar"), "scalar");
    assert_string_equal(hc_reduce_kernel_name(), "scalar");
    assert_string_equal(hc_reduce_select_for_test("auto"), best_set());
    assert_string_equal(hc_reduce_kernel_name(), best_set());
}

static void test_auto_picks_avx2_when_present(void **state)
{
    (void)state;
    if (!cpu_has_avx2())
        skip();
    assert_string_equal(hc_reduce_select_for_test("auto"), best_set());
    assert_string_equal(hc_reduce_select_for_test("AVX2"), "avx2");
    if (cpu_has_avx512bf16())
        assert_string_equal(hc_reduce_select_for_test("AVX512BF16"), "avx512bf16");
    hc_reduce_select_for_test("auto");
}

/* Child mode: eight threads race to the first reduction, then the chosen kernel is printed. */
static void *first_use(void *arg)
{
    pthread_barrier_t *start = arg;
    uint32_t a = 1, b = 2, out;
    const void *srcs[2] = {&a, &b};

    pthread_barrier_wait(start);
    hc_reduce_multi(HCCL_DATA_TYPE_UINT32, HCCL_REDUCE_SUM, &out, srcs, 2, 1);
    return out == 3 ? arg : NULL;
}

static int child_main(void)
{
    pthread_t threads[8];
    pthread_barrier_t start;
    int ok = 1;

    pthread_barrier_init(&start, NULL, 8);
    for (size_t i = 0; i < 8; i++)
        pthread_create(&threads[i], NULL, first_use, &start);
    for (size_t i = 0; i < 8; i++) {
        void *res;
        pthread_join(threads[i], &res);
        ok = ok && res != NULL;
    }
    printf("kernel=%s\n", hc_reduce_kernel_name());
    return ok ? 0 : 1;
}

/* Runs this program in child mode with HOSTCCL_SIMD=value (NULL: unset); stdout and stderr land in
 * out. */
static void run_child(const char *value, char *out, size_t out_len)
{
    int fds[2], status;
    size_t used = 0;
    ssize_t n;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        if (value != NULL)
            setenv("HOSTCCL_SIMD", value, 1);
        else
            unsetenv("HOSTCCL_SIMD");
        setenv("ASCEND_GLOBAL_LOG_LEVEL", "2", 1);
        execl(self_path, self_path, CHILD_FLAG, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    while (used + 1 < out_len && (n = read(fds[0], out + used, out_len - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static size_t count_occurrences(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_env_selects_kernels(void **state)
{
    char best[64], out[4096];

    (void)state;
    snprintf(best, sizeof(best), "kernel=%s\n", best_set());
    run_child("scalar", out, sizeof(out));
    assert_string_equal(out, "kernel=scalar\n"); /* and no warning */
    run_child(NULL, out, sizeof(out));
    assert_string_equal(out, best);
    run_child("auto", out, sizeof(out));
    assert_string_equal(out, best);
    if (cpu_has_avx2()) {
        run_child("avx2", out, sizeof(out));
        assert_string_equal(out, "kernel=avx2\n");
    }
}

/* An unknown value: one warning naming it, however many threads reduce first; then auto. */
static void test_env_unknown_value_warns_once(void **state)
{
    char out[4096];

    (void)state;
    run_child("sse9", out, sizeof(out));
    assert_int_equal(count_occurrences(out, "HOSTCCL_SIMD=sse9"), 1);
    assert_int_equal(count_occurrences(out, "warning"), 1);
    {
        char best[64];
        snprintf(best, sizeof(best), "kernel=%s\n", best_set());
        assert_non_null(strstr(out, best));
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_pair_small_counts),
        cmocka_unit_test(test_every_pair_large_counts),
        cmocka_unit_test(test_many_and_repeated_inputs),
        cmocka_unit_test(test_every_half_value),
        cmocka_unit_test(test_avx2_set_under_avx512bf16),
        cmocka_unit_test(test_float_nan_and_zero_order),
        cmocka_unit_test(test_select_hook),
        cmocka_unit_test(test_auto_picks_avx2_when_present),
        cmocka_unit_test(test_env_selects_kernels),
        cmocka_unit_test(test_env_unknown_value_warns_once),
    };

    if (argc == 2 && strcmp(argv[1], CHILD_FLAG) == 0)
        return child_main();
    if (argc >= 1 && strchr(argv[0], '/') != NULL)
        self_path = argv[0];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
