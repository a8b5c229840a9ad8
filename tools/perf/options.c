/*
 * The perf tools' command line: hccl_test's flags, defaults and size walk, plus --json and --plot.
 *
 * Defaults are hccl_test's (CANN tools/hccl_test): 64 MiB to 64 MiB, 20 iterations, 10 warmup
 * iterations, check on, fp32, sum, root 0. Where hccl_test would loop for ever (-i 0, or a
 * default step of 0) the walk stops after the first size instead, and -n 0 is refused because an
 * average over no iterations means nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define MIB (1024ull * 1024ull)

enum { OPT_JSON = 256, OPT_PLOT, OPT_TOUCH, OPT_PLAN, OPT_MEM };

static const struct option long_options[] = {
    {.name = "minbytes", .has_arg = required_argument, .val = 'b'},
    {.name = "maxbytes", .has_arg = required_argument, .val = 'e'},
    {.name = "stepbytes", .has_arg = required_argument, .val = 'i'},
    {.name = "stepfactor", .has_arg = required_argument, .val = 'f'},
    {.name = "iters", .has_arg = required_argument, .val = 'n'},
    {.name = "warmup_iters", .has_arg = required_argument, .val = 'w'},
    {.name = "check", .has_arg = required_argument, .val = 'c'},
    {.name = "datatype", .has_arg = required_argument, .val = 'd'},
    {.name = "op", .has_arg = required_argument, .val = 'o'},
    {.name = "root", .has_arg = required_argument, .val = 'r'},
    {.name = "npus", .has_arg = required_argument, .val = 'p'},
    {.name = "zero_copy", .has_arg = required_argument, .val = 'z'},
    {.name = "json", .has_arg = required_argument, .val = OPT_JSON},
    {.name = "plot", .has_arg = required_argument, .val = OPT_PLOT},
    {.name = "touch", .has_arg = no_argument, .val = OPT_TOUCH},
    {.name = "plan", .has_arg = required_argument, .val = OPT_PLAN},
    {.name = "mem", .has_arg = required_argument, .val = OPT_MEM},
    {.name = "help", .has_arg = no_argument, .val = 'h'},
    {.name = NULL},
};

static const char *const op_names[] = {
    [HCCL_REDUCE_SUM] = "sum", [HCCL_REDUCE_PROD] = "prod", [HCCL_REDUCE_MAX] = "max", [HCCL_REDUCE_MIN] = "min",
};

void hc_perf_usage(FILE *out, const char *program)
{
    fprintf(out,
            "USAGE: %s\n"
            "\t[-b,--minbytes <min size in bytes>]            default 64M; K, M, G suffixes (x1024)\n"
            "\t[-e,--maxbytes <max size in bytes>]            default 64M\n"
            "\t[-i,--stepbytes <increment size>]              default (max-min)/10\n"
            "\t[-f,--stepfactor <increment factor>]           > 1; takes precedence over -i\n"
            "\t[-n,--iters <iteration count>]                 default 20\n"
            "\t[-o,--op <sum/prod/min/max>]                   default sum\n"
            "\t[-d,--datatype <%s>]  default fp32\n"
            "\t[-r,--root <root>]                             default 0\n"
            "\t[-w,--warmup_iters <warmup iteration count>]   default 10\n"
            "\t[-c,--check <result verification> 0:disabled 1:enabled.]  default 1\n"
            "\t[-p,--npus <npus used for one node>]           default: the ranks on this host\n"
            "\t[-z,--zero_copy <0/1>]                         accepted for compatibility, no effect\n"
            "\t[--json <file>]                                write the rows as JSON\n"
            "\t[--plot <file.svg>]                            draw bandwidth and latency as SVG\n"
            "\t[--touch]                                      per iteration: dirty the send buffer, run, wait,\n"
            "\t                                               read the result (hccl_test reuses untouched buffers)\n"
            "\t[--plan SIZE:ITERS:WARMUP[,...]]                these sizes, each with its own iterations, in one\n"
            "\t                                               run (instead of -b -e -f -i -n -w; used by bench/)\n"
            "\t[--mem acl|malloc|huge]                        data buffers from aclrtMalloc (default), plain malloc\n"
            "\t                                               (torch, MPI programs), or malloc advised for huge\n"
            "\t                                               pages (numpy's arrays from 4 MiB)\n"
            "\t[-h,--help]\n"
            "Run under hccl-run -n N, mpirun or srun. See docs/perf-tools.md.\n",
            program, hc_perf_dtype_names());
}

const char *hc_perf_op_name(HcclReduceOp op)
{
    if ((unsigned)op < sizeof(op_names) / sizeof(op_names[0]))
        return op_names[op];
    return "unknown";
}

static hc_perf_parse_t fail(char *error, size_t error_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static hc_perf_parse_t fail(char *error, size_t error_len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(error, error_len, fmt, ap);
    va_end(ap);
    return HC_PERF_PARSE_ERROR;
}

/* Decimal digits, optionally followed by one of K, M, G (either case). */
int hc_perf_parse_size(const char *text, uint64_t *bytes_p)
{
    unsigned long long value;
    uint64_t unit = 1;
    char *end;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno != 0)
        return -1;
    if (*end != '\0') {
        if (end[1] != '\0')
            return -1;
        if (*end == 'k' || *end == 'K')
            unit = 1024;
        else if (*end == 'm' || *end == 'M')
            unit = MIB;
        else if (*end == 'g' || *end == 'G')
            unit = 1024 * MIB;
        else
            return -1;
    }
    if (value > UINT64_MAX / unit)
        return -1;
    *bytes_p = value * unit;
    return 0;
}

/* A decimal integer in [min, max]. */
static int parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *value_p)
{
    unsigned long long value;
    char *end;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max)
        return -1;
    *value_p = value;
    return 0;
}

static int parse_op(const char *text, HcclReduceOp *op_p)
{
    for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++) {
        if (strcmp(text, op_names[i]) == 0) {
            *op_p = (HcclReduceOp)i;
            return 0;
        }
    }
    return -1;
}

static void set_defaults(hc_perf_opts_t *opts)
{
    *opts = (hc_perf_opts_t){.min_bytes = 64 * MIB, .max_bytes = 64 * MIB, .iters = 20, .warmup_iters = 10,
                             .check = 1, .dtype = hc_perf_dtype_find("fp32"), .op = HCCL_REDUCE_SUM};
}

/* The numeric flags: -i -n -w -c -r -p -z (-z is hccl_test's zero copy, which has no meaning on
 * hosts: accepted and checked, then ignored). */
static hc_perf_parse_t apply_number(int opt, const char *arg, char *error, size_t error_len, hc_perf_opts_t *opts)
{
    const char *wanted = "a non-negative integer";
    uint64_t value, min = 0, max = UINT32_MAX;

    if (opt == 'i') {
        if (hc_perf_parse_size(arg, &opts->step_bytes) != 0)
            return fail(error, error_len, "-i,--stepbytes must be a byte count, got \"%s\"", arg);
        opts->step_bytes_set = 1;
        return HC_PERF_PARSE_RUN;
    }
    if (opt == 'n' || opt == 'p') {
        min = 1;
        wanted = "a positive integer";
    } else if (opt == 'c' || opt == 'z') {
        max = 1;
        wanted = "0 or 1";
    }
    if (parse_uint(arg, min, max, &value) != 0)
        return fail(error, error_len, "-%c needs %s, got \"%s\"", opt, wanted, arg);
    if (opt == 'n')
        opts->iters = (uint32_t)value;
    else if (opt == 'w')
        opts->warmup_iters = (uint32_t)value;
    else if (opt == 'c')
        opts->check = (int)value;
    else if (opt == 'r')
        opts->root = (uint32_t)value;
    else if (opt == 'p')
        opts->npus = (uint32_t)value;
    return HC_PERF_PARSE_RUN;
}

/* --plan SIZE:ITERS:WARMUP[,...]: sizes with K/M/G, at least one timed iteration each. Sets -b and
 * -e to the smallest and largest size, for the preamble and the reports. */
static hc_perf_parse_t parse_plan(const char *arg, char *error, size_t error_len, hc_perf_opts_t *opts)
{
    char text[4096], *save = NULL;
    uint32_t n = 0;

    if (strlen(arg) >= sizeof(text))
        return fail(error, error_len, "--plan is longer than %zu characters", sizeof(text) - 1);
    strcpy(text, arg);
    for (char *step = strtok_r(text, ",", &save); step != NULL; step = strtok_r(NULL, ",", &save)) {
        char *iters = strchr(step, ':'), *warmup = iters != NULL ? strchr(iters + 1, ':') : NULL;
        uint64_t bytes, it, wu;

        if (n == HC_PERF_PLAN_MAX)
            return fail(error, error_len, "--plan has more than %d sizes", HC_PERF_PLAN_MAX);
        if (warmup == NULL)
            return fail(error, error_len, "--plan step \"%s\" is not SIZE:ITERS:WARMUP", step);
        *iters++ = '\0';
        *warmup++ = '\0';
        if (hc_perf_parse_size(step, &bytes) != 0 || parse_uint(iters, 1, UINT32_MAX, &it) != 0 ||
            parse_uint(warmup, 0, UINT32_MAX, &wu) != 0)
            return fail(error, error_len, "--plan step %s:%s:%s needs a size, a positive and a non-negative integer",
                        step, iters, warmup);
        opts->plan[n++] = (hc_perf_plan_step_t){.bytes = bytes, .iters = (uint32_t)it, .warmup_iters = (uint32_t)wu};
    }
    if (n == 0)
        return fail(error, error_len, "--plan needs at least one SIZE:ITERS:WARMUP");
    opts->nplan = n;
    opts->min_bytes = opts->max_bytes = opts->plan[0].bytes;
    for (uint32_t i = 1; i < n; i++) {
        opts->min_bytes = opts->plan[i].bytes < opts->min_bytes ? opts->plan[i].bytes : opts->min_bytes;
        opts->max_bytes = opts->plan[i].bytes > opts->max_bytes ? opts->plan[i].bytes : opts->max_bytes;
    }
    return HC_PERF_PARSE_RUN;
}

static hc_perf_parse_t apply_option(int opt, const char *arg, char *error, size_t error_len, hc_perf_opts_t *opts)
{
    char *end;

    switch (opt) {
    case 'b':
    case 'e':
        if (hc_perf_parse_size(arg, opt == 'b' ? &opts->min_bytes : &opts->max_bytes) != 0)
            return fail(error, error_len, "invalid size \"%s\" for -%c (bytes, with an optional K, M or G)", arg, opt);
        return HC_PERF_PARSE_RUN;
    case 'f':
        errno = 0;
        opts->step_factor = strtod(arg, &end);
        if (errno != 0 || end == arg || *end != '\0' || !(opts->step_factor > 1.0) || opts->step_factor > 1e6)
            return fail(error, error_len, "-f,--stepfactor must be a number greater than 1, got \"%s\"", arg);
        return HC_PERF_PARSE_RUN;
    case 'd':
        opts->dtype = hc_perf_dtype_find(arg);
        if (opts->dtype == NULL)
            return fail(error, error_len, "-d,--datatype must be one of %s, got \"%s\"", hc_perf_dtype_names(), arg);
        return HC_PERF_PARSE_RUN;
    case 'o':
        if (parse_op(arg, &opts->op) != 0)
            return fail(error, error_len, "-o,--op must be sum, prod, max or min, got \"%s\"", arg);
        opts->op_set = 1;
        return HC_PERF_PARSE_RUN;
    case OPT_JSON:
        opts->json_path = arg;
        return HC_PERF_PARSE_RUN;
    case OPT_PLOT:
        opts->plot_path = arg;
        return HC_PERF_PARSE_RUN;
    case OPT_TOUCH:
        opts->touch = 1;
        return HC_PERF_PARSE_RUN;
    case OPT_PLAN:
        return parse_plan(arg, error, error_len, opts);
    case OPT_MEM:
        if (strcmp(arg, "acl") != 0 && strcmp(arg, "malloc") != 0 && strcmp(arg, "huge") != 0)
            return fail(error, error_len, "--mem must be acl, malloc or huge, got \"%s\"", arg);
        opts->mem_malloc = strcmp(arg, "malloc") == 0 ? 1 : strcmp(arg, "huge") == 0 ? 2 : 0;
        return HC_PERF_PARSE_RUN;
    case 'h':
        return HC_PERF_PARSE_HELP;
    default:
        return apply_number(opt, arg, error, error_len, opts);
    }
}

/* getopt's own messages are turned off (opterr = 0): every rank parses the same line, and only
 * rank 0 should say what is wrong with it. */
hc_perf_parse_t hc_perf_opts_parse(int argc, char **argv, char *error, size_t error_len, hc_perf_opts_t *opts_p)
{
    hc_perf_opts_t opts;
    hc_perf_parse_t res;
    int opt;

    set_defaults(&opts);
    opterr = 0;
    optind = 0; /* glibc: start over, so that a second parse in one process works */
    while ((opt = getopt_long(argc, argv, ":b:e:i:f:n:w:c:d:o:r:p:z:h", long_options, NULL)) != -1) {
        if (opt == '?')
            return optopt != 0 ? fail(error, error_len, "unknown option -%c", optopt)
                               : fail(error, error_len, "unknown option %s", argv[optind - 1]);
        if (opt == ':')
            return fail(error, error_len, "option %s needs a value", argv[optind - 1]);
        res = apply_option(opt, optarg, error, error_len, &opts);
        if (res != HC_PERF_PARSE_RUN)
            return res;
    }
    if (optind < argc)
        return fail(error, error_len, "unexpected argument \"%s\"", argv[optind]);
    if (opts.max_bytes < opts.min_bytes)
        return fail(error, error_len, "maxbytes (-e) is smaller than minbytes (-b)");
    *opts_p = opts;
    return HC_PERF_PARSE_RUN;
}

/* The size after `size`, or `size` itself when the walk cannot move on (-i 0). */
static uint64_t next_size(const hc_perf_opts_t *opts, uint64_t size)
{
    uint64_t step;
    double next;

    if (opts->step_factor > 1.0) {
        next = (double)size * opts->step_factor;
        if (next >= 18446744073709551615.0)
            return UINT64_MAX;
        /* Truncation, as hccl_test's integer data_size *= factor; but always forward, so that a
         * walk from 0 or with a factor close to 1 still ends. */
        return (uint64_t)next > size ? (uint64_t)next : size + 1;
    }
    step = opts->step_bytes;
    if (!opts->step_bytes_set)
        step = opts->max_bytes > opts->min_bytes ? (opts->max_bytes - opts->min_bytes) / 10 : 0;
    if (step == 0)
        step = opts->step_bytes_set ? 0 : 1;
    return size > UINT64_MAX - step ? UINT64_MAX : size + step;
}

uint64_t *hc_perf_size_list(const hc_perf_opts_t *opts, size_t *count_p)
{
    size_t count = 0, capacity = 16;
    uint64_t *sizes = malloc(capacity * sizeof(*sizes));
    uint64_t size = opts->min_bytes, next;

    if (opts->nplan > 0 && sizes != NULL) {
        uint64_t *plan = realloc(sizes, opts->nplan * sizeof(*sizes));
        if (plan == NULL) {
            free(sizes);
            return NULL;
        }
        for (uint32_t i = 0; i < opts->nplan; i++)
            plan[i] = opts->plan[i].bytes;
        *count_p = opts->nplan;
        return plan;
    }
    while (sizes != NULL) {
        if (count == capacity) {
            uint64_t *grown = realloc(sizes, 2 * capacity * sizeof(*sizes));
            if (grown == NULL)
                break;
            sizes = grown;
            capacity *= 2;
        }
        sizes[count++] = size;
        next = next_size(opts, size);
        if (next <= size || next > opts->max_bytes) {
            *count_p = count;
            return sizes;
        }
        size = next;
    }
    free(sizes);
    return NULL;
}
