/* The plan, layouts and reports shared by the bench peers; see bench_common.h. */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const coll_names[BENCH_COLL_COUNT] = {
    [BENCH_ALL_REDUCE] = "all_reduce", [BENCH_ALL_GATHER] = "all_gather",
    [BENCH_REDUCE_SCATTER] = "reduce_scatter", [BENCH_BROADCAST] = "broadcast",
    [BENCH_REDUCE] = "reduce", [BENCH_ALLTOALL] = "alltoall",
    [BENCH_SEND_RECV] = "send_recv", [BENCH_SCATTER] = "scatter", [BENCH_ALLTOALLV] = "alltoallv",
};

static int parse_size(const char *text, char **end_p, uint64_t *bytes_p)
{
    unsigned long long value;

    errno = 0;
    value = strtoull(text, end_p, 10);
    if (errno != 0 || *end_p == text)
        return -1;
    switch (**end_p) {
    case 'K': case 'k': value <<= 10; (*end_p)++; break;
    case 'M': case 'm': value <<= 20; (*end_p)++; break;
    case 'G': case 'g': value <<= 30; (*end_p)++; break;
    default: break;
    }
    *bytes_p = value;
    return 0;
}

static int parse_u32(const char *text, char **end_p, uint32_t *value_p)
{
    unsigned long value;

    errno = 0;
    value = strtoul(text, end_p, 10);
    if (errno != 0 || *end_p == text || value > UINT32_MAX)
        return -1;
    *value_p = (uint32_t)value;
    return 0;
}

static int parse_step(const char *text, char **end_p, bench_step_t *step_p)
{
    if (parse_size(text, end_p, &step_p->bytes) != 0 || **end_p != ':' ||
        parse_u32(*end_p + 1, end_p, &step_p->iters) != 0 || **end_p != ':' ||
        parse_u32(*end_p + 1, end_p, &step_p->warmup) != 0)
        return -1;
    return step_p->bytes > 0 && step_p->iters > 0 ? 0 : -1;
}

int bench_plan_parse(const char *text, bench_plan_t *plan_p)
{
    size_t capacity = 1;
    const char *cursor = text;
    char *end;

    for (const char *c = text; *c != '\0'; c++)
        capacity += *c == ',';
    plan_p->steps = calloc(capacity, sizeof(*plan_p->steps));
    plan_p->nsteps = 0;
    if (plan_p->steps == NULL)
        return -1;
    for (;;) {
        if (parse_step(cursor, &end, &plan_p->steps[plan_p->nsteps]) != 0) {
            fprintf(stderr, "bad plan step at '%s' (want SIZE:ITERS:WARMUP, size and iters > 0)\n", cursor);
            bench_plan_free(plan_p);
            return -1;
        }
        plan_p->nsteps++;
        if (*end == '\0')
            return 0;
        if (*end != ',') {
            fprintf(stderr, "bad plan separator at '%s'\n", end);
            bench_plan_free(plan_p);
            return -1;
        }
        cursor = end + 1;
    }
}

void bench_plan_free(bench_plan_t *plan)
{
    free(plan->steps);
    plan->steps = NULL;
    plan->nsteps = 0;
}

int bench_coll_from_name(const char *name)
{
    for (int coll = 0; coll < BENCH_COLL_COUNT; coll++)
        if (strcmp(name, coll_names[coll]) == 0)
            return coll;
    return -1;
}

const char *bench_coll_name(int coll)
{
    return coll >= 0 && coll < BENCH_COLL_COUNT ? coll_names[coll] : "?";
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* Whole elements, rounded up; for the collectives that split data_size into one block per rank,
 * whole blocks, rounded up too (tools/perf/driver.c count_for). */
void bench_layout(int coll, uint64_t bytes, uint32_t elem_size, uint32_t nranks, bench_layout_t *layout_p)
{
    uint64_t elems = div_up(bytes, elem_size);
    uint64_t block = div_up(elems, nranks);

    switch (coll) {
    case BENCH_ALL_GATHER:
        *layout_p = (bench_layout_t){.count = block, .send_elems = block, .recv_elems = block * nranks,
                                     .data_elems = block * nranks};
        break;
    case BENCH_REDUCE_SCATTER:
    case BENCH_SCATTER:
        *layout_p = (bench_layout_t){.count = block, .send_elems = block * nranks, .recv_elems = block,
                                     .data_elems = block * nranks};
        break;
    case BENCH_ALLTOALL:
    case BENCH_ALLTOALLV:
        *layout_p = (bench_layout_t){.count = block, .send_elems = block * nranks,
                                     .recv_elems = block * nranks, .data_elems = block * nranks};
        break;
    case BENCH_BROADCAST:
        *layout_p = (bench_layout_t){.count = elems, .send_elems = elems, .recv_elems = 0, .data_elems = elems};
        break;
    default: /* all_reduce, reduce, send_recv: one buffer in, one out */
        *layout_p = (bench_layout_t){.count = elems, .send_elems = elems, .recv_elems = elems,
                                     .data_elems = elems};
        break;
    }
}

double bench_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double alg_bw_gbs(const bench_row_t *row)
{
    return row->avg_us > 0.0 ? (double)row->data_bytes / row->avg_us / 1e3 : 0.0;
}

void bench_print_header(const char *tool, const char *coll, uint32_t nranks, const char *impl)
{
    printf("%s: %s, %u ranks, datatype fp32, %s\n", tool, coll, nranks, impl);
    printf("data_size(Bytes)  | aveg_time(us)  | alg_bandwidth(GB/s)\n");
    fflush(stdout);
}

void bench_print_row(const bench_row_t *row)
{
    printf("%-17" PRIu64 " | %-14.2f | %.5f\n", row->data_bytes, row->avg_us, alg_bw_gbs(row));
    fflush(stdout);
}

/* A JSON string: quotes and backslashes escaped, control characters (MPICH's version string has a
 * tab) written as spaces. */
static void json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\')
            fputc('\\', out);
        fputc((unsigned char)*c < 0x20 ? ' ' : *c, out);
    }
    fputc('"', out);
}

int bench_json_write(const char *path, const char *tool, const char *coll, uint32_t nranks, const char *impl,
                     const bench_row_t *rows, size_t nrows)
{
    FILE *out = fopen(path, "w");

    if (out == NULL) {
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
        return -1;
    }
    fprintf(out, "{\n  \"tool\": \"%s\",\n  \"collective\": \"%s\",\n  \"ranks\": %u,\n", tool, coll, nranks);
    fprintf(out, "  \"datatype\": \"fp32\",\n  \"implementation\": ");
    json_string(out, impl);
    fprintf(out, ",\n  \"rows\": [\n");
    for (size_t i = 0; i < nrows; i++)
        fprintf(out, "    {\"data_size\": %" PRIu64 ", \"aveg_time_us\": %.3f, \"alg_bandwidth_gbs\": %.6f}%s\n",
                rows[i].data_bytes, rows[i].avg_us, alg_bw_gbs(&rows[i]), i + 1 < nrows ? "," : "");
    fprintf(out, "  ]\n}\n");
    if (fclose(out) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
        return -1;
    }
    return 0;
}
