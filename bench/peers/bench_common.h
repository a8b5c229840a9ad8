/* Shared by the bench peers (bench/peers/): the size plan, the collectives' buffer layouts, the
 * hccl_test-style table and the JSON rows. The rules here copy tools/perf (docs/perf-tools.md) so
 * that a row of a peer and a row of hostccl's perf tool describe the same bytes. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One size of the sweep with its own iteration counts: a 256 MiB AllReduce cannot afford the
 * iterations an 8-byte one needs to rise above the clock's noise. */
typedef struct {
    uint64_t bytes; /* nominal data_size, before the layout's rounding */
    uint32_t iters;
    uint32_t warmup;
} bench_step_t;

typedef struct {
    bench_step_t *steps;
    size_t nsteps;
} bench_plan_t;

typedef enum {
    BENCH_ALL_REDUCE,
    BENCH_ALL_GATHER,
    BENCH_REDUCE_SCATTER,
    BENCH_BROADCAST,
    BENCH_REDUCE,
    BENCH_ALLTOALL,
    BENCH_SEND_RECV,
    BENCH_SCATTER,
    BENCH_ALLTOALLV,
    BENCH_COLL_COUNT
} bench_coll_t;

/* Element counts of one call for a data size, as tools/perf/driver.c count_for() and the layouts
 * of tools/perf/collectives.c compute them. */
typedef struct {
    uint64_t count;      /* the count argument: whole buffer, or one rank's block */
    uint64_t send_elems; /* elements of the send buffer */
    uint64_t recv_elems; /* elements of the receive buffer (0: in place) */
    uint64_t data_elems; /* elements the data_size column counts */
} bench_layout_t;

typedef struct {
    uint64_t data_bytes;
    double avg_us; /* the slowest rank's average per iteration */
} bench_row_t;

/* "SIZE:ITERS:WARMUP,..." (SIZE takes K, M, G suffixes, powers of 1024). 0 or -1 with a message. */
int bench_plan_parse(const char *text, bench_plan_t *plan_p);
void bench_plan_free(bench_plan_t *plan);

/* By the perf tool's name without "_test" (all_reduce, all_gather, ...); -1 if unknown. */
int bench_coll_from_name(const char *name);
const char *bench_coll_name(int coll);
void bench_layout(int coll, uint64_t bytes, uint32_t elem_size, uint32_t nranks, bench_layout_t *layout_p);

double bench_now_us(void);

/* The table on stdout (rank 0) and the rows as JSON, in the perf tools' shape. */
void bench_print_header(const char *tool, const char *coll, uint32_t nranks, const char *impl);
void bench_print_row(const bench_row_t *row);
int bench_json_write(const char *path, const char *tool, const char *coll, uint32_t nranks, const char *impl,
                     const bench_row_t *rows, size_t nrows);

#ifdef __cplusplus
}
#endif

#endif
