/*
 * Unit checks of the perf tools' pieces that need no communicator: the fp16/bf16 converters, the
 * size parser and hccl_test's size walk, the command line, the exactness of every expected value,
 * and the SVG writer on edge cases.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "perf.h"

static const char *const all_dtypes[] = {"int8",   "int16", "int32",  "fp16",   "fp32", "int64",
                                         "uint64", "uint8", "uint16", "uint32", "fp64", "bfp16"};

/* Every non-NaN half survives half -> float -> half unchanged. */
static void fp16_round_trip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
            continue;
        assert_int_equal(hc_perf_fp16_from_float(hc_perf_fp16_to_float((uint16_t)h)), h);
    }
}

/* Ties go to even, overflow goes to infinity, and tiny values round into the subnormals. */
static void fp16_rounding(void **state)
{
    (void)state;
    assert_int_equal(hc_perf_fp16_from_float(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(hc_perf_fp16_from_float(1.0f + 3.0f * ldexpf(1.0f, -11)), 0x3c02);
    assert_int_equal(hc_perf_fp16_from_float(65520.0f), 0x7c00);
    assert_int_equal(hc_perf_fp16_from_float(65519.0f), 0x7bff);
    assert_int_equal(hc_perf_fp16_from_float(ldexpf(1.0f, -25)), 0x0000);
    assert_int_equal(hc_perf_fp16_from_float(1.5f * ldexpf(1.0f, -25)), 0x0001);
    assert_int_equal(hc_perf_fp16_from_float(-2.0f), 0xc000);
    assert_int_equal(hc_perf_fp16_from_float(0.5f), 0x3800);
    assert_true(isnan(hc_perf_fp16_to_float(hc_perf_fp16_from_float(NAN))));
}

static void bf16_round_trip_and_rounding(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0)
            continue;
        assert_int_equal(hc_perf_bf16_from_float(hc_perf_bf16_to_float((uint16_t)h)), h);
    }
    assert_int_equal(hc_perf_bf16_from_float(1.0f + ldexpf(1.0f, -8)), 0x3f80);
    assert_int_equal(hc_perf_bf16_from_float(1.0f + 3.0f * ldexpf(1.0f, -8)), 0x3f82);
    assert_int_equal(hc_perf_bf16_from_float(256.0f), 0x4380);
    assert_true(isnan(hc_perf_bf16_to_float(hc_perf_bf16_from_float(NAN))));
}

static void parse_sizes(void **state)
{
    static const char *const bad[] = {"", "K", "1KB", "-1", "1.5K", " 1", "1 ", "99999999999999999999", "20000000000G"};
    uint64_t bytes = 0;

    (void)state;
    assert_int_equal(hc_perf_parse_size("8", &bytes), 0);
    assert_int_equal(bytes, 8);
    assert_int_equal(hc_perf_parse_size("64K", &bytes), 0);
    assert_int_equal(bytes, 65536);
    assert_int_equal(hc_perf_parse_size("1m", &bytes), 0);
    assert_int_equal(bytes, 1048576);
    assert_int_equal(hc_perf_parse_size("2G", &bytes), 0);
    assert_int_equal(bytes, 2147483648ull);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_not_equal(hc_perf_parse_size(bad[i], &bytes), 0);
}

/* Parse a command line given as a NULL-terminated list of words after the program name. */
static hc_perf_parse_t parse_words(hc_perf_opts_t *opts, ...)
{
    char *argv[32] = {"tool"};
    char error[256];
    int argc = 1;
    va_list ap;

    va_start(ap, opts);
    for (char *word = va_arg(ap, char *); word != NULL && argc < 31; word = va_arg(ap, char *))
        argv[argc++] = word;
    va_end(ap);
    return hc_perf_opts_parse(argc, argv, error, sizeof(error), opts);
}

static size_t walk(hc_perf_opts_t *opts, uint64_t expect_first, uint64_t expect_last)
{
    size_t count = 0;
    uint64_t *sizes = hc_perf_size_list(opts, &count);

    assert_non_null(sizes);
    assert_true(count > 0);
    assert_int_equal(sizes[0], expect_first);
    assert_int_equal(sizes[count - 1], expect_last);
    for (size_t i = 1; i < count; i++)
        assert_true(sizes[i] > sizes[i - 1]);
    free(sizes);
    return count;
}

static void size_walks(void **state)
{
    hc_perf_opts_t opts;

    (void)state;
    assert_int_equal(parse_words(&opts, NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 64u << 20, 64u << 20), 1); /* hccl_test's default: 64M only */
    assert_int_equal(parse_words(&opts, "-b", "8", "-e", "1M", "-f", "4", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 8, 524288), 9);
    assert_int_equal(parse_words(&opts, "-b", "8K", "-e", "64M", "-f", "2", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 8192, 64u << 20), 14);
    assert_int_equal(parse_words(&opts, "-b", "0", "-e", "100", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 0, 100), 11); /* default step (max - min) / 10 */
    assert_int_equal(parse_words(&opts, "-b", "10", "-e", "40", "-i", "10", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 10, 40), 4);
    assert_int_equal(parse_words(&opts, "-b", "10", "-e", "40", "-i", "0", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 10, 10), 1);
    assert_int_equal(parse_words(&opts, "-b", "8", "-e", "30", "-f", "1.5", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 8, 27), 4); /* 8 12 18 27, truncated as hccl_test's */
    assert_int_equal(parse_words(&opts, "-b", "0", "-e", "4", "-f", "2", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 0, 4), 4); /* 0 1 2 4: a walk from 0 still moves */
    /* -f wins over -i, as in hccl_test. */
    assert_int_equal(parse_words(&opts, "-b", "8", "-e", "64", "-i", "8", "-f", "2", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(walk(&opts, 8, 64), 4);
}

/* --plan: the bench's way to run every size of a sweep, each with its own iterations, in one
 * process (so no size pays another process's start-up); it replaces the walk and -n/-w. */
static void plans(void **state)
{
    hc_perf_opts_t opts;
    uint64_t *sizes;
    size_t n = 0;

    (void)state;
    assert_int_equal(parse_words(&opts, "--plan", "8:1000:100,32K:1000:100,2M:50:5", NULL), HC_PERF_PARSE_RUN);
    assert_int_equal(opts.nplan, 3);
    assert_int_equal(opts.min_bytes, 8);
    assert_int_equal(opts.max_bytes, 2 << 20);
    assert_int_equal(opts.plan[1].bytes, 32 << 10);
    assert_int_equal(opts.plan[2].iters, 50);
    assert_int_equal(opts.plan[2].warmup_iters, 5);
    sizes = hc_perf_size_list(&opts, &n);
    assert_non_null(sizes);
    assert_int_equal(n, 3);
    assert_int_equal(sizes[0], 8);
    assert_int_equal(sizes[2], 2 << 20);
    free(sizes);
    assert_int_equal(parse_words(&opts, "--plan", "8:0:1", NULL), HC_PERF_PARSE_ERROR); /* no timed iteration */
    assert_int_equal(parse_words(&opts, "--plan", "8:10", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "--plan", "8Q:10:1", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "--plan", ",", NULL), HC_PERF_PARSE_ERROR);
}

static void command_lines(void **state)
{
    hc_perf_opts_t opts;

    (void)state;
    assert_int_equal(parse_words(&opts, "--minbytes", "1K", "--maxbytes", "2K", "--iters", "3", "--warmup_iters",
                                 "0", "--check", "0", "--datatype", "bfp16", "--op", "min", "--root", "1", "--npus",
                                 "8", "--zero_copy", "1", "--json", "a.json", "--plot", "b.svg", NULL),
                     HC_PERF_PARSE_RUN);
    assert_int_equal(opts.min_bytes, 1024);
    assert_int_equal(opts.iters, 3);
    assert_int_equal(opts.warmup_iters, 0);
    assert_int_equal(opts.check, 0);
    assert_string_equal(opts.dtype->name, "bfp16");
    assert_int_equal(opts.op, HCCL_REDUCE_MIN);
    assert_int_equal(opts.root, 1);
    assert_int_equal(opts.npus, 8);
    assert_string_equal(opts.json_path, "a.json");
    assert_string_equal(opts.plot_path, "b.svg");
    assert_int_equal(parse_words(&opts, "-h", NULL), HC_PERF_PARSE_HELP);
    assert_int_equal(parse_words(&opts, "-x", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "--bogus", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-b", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-d", "fp8", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-o", "avg", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-c", "2", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-f", "1", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-n", "0", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-w", "-1", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-p", "0", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "-b", "16", "-e", "8", NULL), HC_PERF_PARSE_ERROR);
    assert_int_equal(parse_words(&opts, "extra", NULL), HC_PERF_PARSE_ERROR);
}

static const hc_perf_coll_ops_t *const reducing[] = {&hc_perf_coll_all_reduce, &hc_perf_coll_reduce,
                                                     &hc_perf_coll_reduce_scatter};

/* Whenever the tools claim a check is exact, every input and every expected value, and every
 * partial result in rank order, survives the dtype's store and load unchanged (integers: after
 * the wrap the library applies too). */
static void expectations_are_exact(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(all_dtypes) / sizeof(all_dtypes[0]); t++) {
        const hc_perf_dtype_t *dtype = hc_perf_dtype_find(all_dtypes[t]);
        for (int op = HCCL_REDUCE_SUM; op <= HCCL_REDUCE_MIN; op++) {
            hc_perf_opts_t opts = {.dtype = dtype, .op = (HcclReduceOp)op};
            for (uint32_t n = 1; n <= 9; n++) {
                hc_perf_run_t run = {.opts = &opts, .coll = reducing[0], .nranks = n, .salt = 7919u * n};
                unsigned char elem[8];
                assert_non_null(dtype);
                if (!dtype->is_float || !hc_perf_value_exact(&opts, reducing[0], n))
                    continue;
                for (uint64_t i = 0; i < 500; i++) {
                    double acc = hc_perf_value_reduced(&run, i);
                    dtype->store(elem, acc);
                    assert_true(dtype->load(elem) == acc);
                    dtype->store(elem, hc_perf_value_move(&run, n - 1, i));
                    assert_true(dtype->load(elem) == hc_perf_value_move(&run, n - 1, i));
                }
            }
        }
    }
}

static void reducing_tools_claim_exactness_for_small_jobs(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(all_dtypes) / sizeof(all_dtypes[0]); t++) {
        hc_perf_opts_t opts = {.dtype = hc_perf_dtype_find(all_dtypes[t]), .op = HCCL_REDUCE_SUM};
        for (size_t c = 0; c < sizeof(reducing) / sizeof(reducing[0]); c++)
            assert_true(hc_perf_value_exact(&opts, reducing[c], 8));
    }
    /* bf16 holds integers up to 256: a sum of 129 ranks of values up to 2 is beyond it. */
    hc_perf_opts_t bf16 = {.dtype = hc_perf_dtype_find("bfp16"), .op = HCCL_REDUCE_SUM};
    assert_false(hc_perf_value_exact(&bf16, &hc_perf_coll_all_reduce, 129));
    assert_true(hc_perf_value_exact(&bf16, &hc_perf_coll_all_gather, 129));
}

/* The SVG starts with <svg and ends with </svg> whatever the rows: none, one, zeros. */
static void svg_edge_cases(void **state)
{
    hc_perf_opts_t opts = {.dtype = hc_perf_dtype_find("fp32"), .iters = 1};
    hc_perf_report_t report = {.tool = "all_reduce_test", .coll = &hc_perf_coll_all_reduce, .opts = &opts,
                               .nranks = 2};
    hc_perf_row_t rows[3] = {
        {.data_bytes = 0, .avg_time_us = 0.0},
        {.data_bytes = 8, .avg_time_us = 10.0, .alg_bw_gbs = 0.0008, .bus_bw_gbs = 0.0008},
        {.data_bytes = 1u << 30, .avg_time_us = 1e5, .alg_bw_gbs = 10.7, .bus_bw_gbs = 10.7},
    };
    char path[] = "/tmp/hc-perf-svg-XXXXXX";
    char text[65536];
    size_t len;
    FILE *in;
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    for (size_t nrows = 0; nrows <= 3; nrows++) {
        assert_int_equal(hc_perf_write_svg(path, &report, rows, nrows), 0);
        in = fopen(path, "r");
        assert_non_null(in);
        len = fread(text, 1, sizeof(text) - 1, in);
        fclose(in);
        text[len] = '\0';
        assert_true(len > 20);
        assert_memory_equal(text, "<svg", 4);
        assert_string_equal(text + len - 7, "</svg>\n");
        assert_null(strstr(text, "nan"));
        assert_null(strstr(text, "inf"));
    }
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp16_round_trip),
        cmocka_unit_test(fp16_rounding),
        cmocka_unit_test(bf16_round_trip_and_rounding),
        cmocka_unit_test(parse_sizes),
        cmocka_unit_test(size_walks),
        cmocka_unit_test(command_lines),
        cmocka_unit_test(plans),
        cmocka_unit_test(expectations_are_exact),
        cmocka_unit_test(reducing_tools_claim_exactness_for_small_jobs),
        cmocka_unit_test(svg_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
