/*
 * The perf tools (all_reduce_test, all_gather_test, ...): hccl_test's flags and table on hostccl.
 *
 * Every tool is the same driver (driver.c) given a different collective, an ops table in
 * collectives.c. The table says how a data size becomes buffers, what each rank puts in its input,
 * what it must find in its output, and how to launch the operation; the driver does the rest:
 * options, bootstrap, the size sweep, timing, checking and the reports. The tools use only the
 * public API (hccl.h, acl.h, hccl_host.h), as a user's program would. See docs/perf-tools.md.
 */
#ifndef HC_PERF_H
#define HC_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <acl/acl.h>
#include <acl/acl_prof.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

/* Exit statuses: 1 a check failed or a call returned an error, 2 a bad command line. */
#define HC_PERF_EXIT_FAIL 1
#define HC_PERF_EXIT_USAGE 2

/* ---- element types (dtypes.c) ---------------------------------------------------------------- */

/* One HCCL element type as the tools see it: how -d names it and how host code writes and reads
 * one element as a double. Every value the tools use is a small integer or a power of two, so the
 * double round trip is exact for every type. */
typedef struct {
    const char *name;      /* as -d spells it: "fp32" */
    HcclDataType type;
    size_t size;           /* bytes per element */
    int is_float;
    int is_signed;
    /* Largest integer magnitude the type holds exactly (2^11 for fp16, 2^8 for bf16, ...); 0 for
     * integer types, whose arithmetic wraps and so is always exact. */
    double exact_limit;
    void (*store)(void *elem, double value); /* integers wrap modulo 2^bits, as the library's do */
    double (*load)(const void *elem);
} hc_perf_dtype_t;

const hc_perf_dtype_t *hc_perf_dtype_find(const char *name);
/* "int8/int16/..." for the usage text, in hccl_test's order. */
const char *hc_perf_dtype_names(void);

/* fp16 and bf16 from and to float, round to nearest even (dtypes.c; tested by tests/perf). */
uint16_t hc_perf_fp16_from_float(float value);
float hc_perf_fp16_to_float(uint16_t bits);
uint16_t hc_perf_bf16_from_float(float value);
float hc_perf_bf16_to_float(uint16_t bits);

/* ---- options (options.c) --------------------------------------------------------------------- */

/* One size of a --plan: the bytes, its timed and its warm-up iterations. */
typedef struct {
    uint64_t bytes;
    uint32_t iters;
    uint32_t warmup_iters;
} hc_perf_plan_step_t;

#define HC_PERF_PLAN_MAX 64

typedef struct {
    uint64_t min_bytes;          /* -b */
    uint64_t max_bytes;          /* -e */
    uint64_t step_bytes;         /* -i; used when step_factor is 0 */
    double step_factor;          /* -f; 0 when not given */
    int step_bytes_set;
    uint32_t iters;              /* -n */
    uint32_t warmup_iters;       /* -w */
    int check;                   /* -c */
    const hc_perf_dtype_t *dtype; /* -d */
    HcclReduceOp op;             /* -o */
    int op_set;
    uint32_t root;               /* -r */
    uint32_t npus;               /* -p; 0 when not given */
    const char *json_path;       /* --json */
    const char *plot_path;       /* --plot */
    int touch;                   /* --touch: dirty the input and read the output around each call */
    int mem_malloc;              /* --mem malloc (1) or huge (2): data buffers from malloc, not aclrtMalloc */
    uint32_t nplan;              /* --plan: these sizes and iterations instead of -b -e -f -i -n -w */
    hc_perf_plan_step_t plan[HC_PERF_PLAN_MAX];
} hc_perf_opts_t;

/* Result of hc_perf_opts_parse. */
typedef enum {
    HC_PERF_PARSE_RUN,   /* go on */
    HC_PERF_PARSE_HELP,  /* -h: print the usage, exit 0 */
    HC_PERF_PARSE_ERROR  /* message in error text: print it and the usage, exit 2 */
} hc_perf_parse_t;

/* Parse argv into opts_p. On HC_PERF_PARSE_ERROR the reason is written to error (a sentence
 * without a newline). Ranks print nothing here: only rank 0 reports, so the caller prints. */
hc_perf_parse_t hc_perf_opts_parse(int argc, char **argv, char *error, size_t error_len, hc_perf_opts_t *opts_p);
void hc_perf_usage(FILE *out, const char *program);
/* A byte count with an optional K, M or G suffix (powers of 1024): 0 on success. */
int hc_perf_parse_size(const char *text, uint64_t *bytes_p);
/* The data sizes to measure, in order, as hccl_test walks them: from -b to -e, times -f when it is
 * given, else plus -i (default (max - min) / 10); or those of --plan. Returns a malloc'ed array. */
uint64_t *hc_perf_size_list(const hc_perf_opts_t *opts, size_t *count_p);
const char *hc_perf_op_name(HcclReduceOp op);

/* ---- collectives (collectives.c) ------------------------------------------------------------- */

typedef struct hc_perf_coll_ops hc_perf_coll_ops_t;

/* Everything a collective's ops need to know about the run in progress. */
typedef struct {
    const hc_perf_opts_t *opts;
    const hc_perf_coll_ops_t *coll;
    uint32_t rank;
    uint32_t nranks;
    HcclComm comm;
    aclrtStream stream;
    void *send_buf;
    void *recv_buf;
    uint64_t *counts;    /* nranks entries of count, for the V collectives */
    uint64_t *displs;    /* nranks entries of i * count */
    uint64_t count;      /* elements per block: the count argument of the HCCL call */
    uint64_t salt;       /* changes the values from one size to the next, so stale output fails */
} hc_perf_run_t;

/* How many elements of each buffer one call with run->count uses on this rank. */
typedef struct {
    uint64_t send_elems;   /* elements of the send buffer the call reads */
    uint64_t recv_elems;   /* elements of the receive buffer it writes (0 when in place) */
    uint64_t check_elems;  /* elements of the result this rank verifies (0: none, e.g. not root) */
    uint64_t data_elems;   /* elements hccl_test's data_size counts */
    int in_place;          /* the result is in the send buffer */
} hc_perf_layout_t;

/* One collective. Designated initialisers only (collectives.c). */
struct hc_perf_coll_ops {
    const char *name;      /* "all_reduce": the tool is name + "_test" */
    int reduces;           /* -o applies */
    int rooted;            /* -r applies */
    /* data_size counts nranks blocks of count elements (all_gather, reduce_scatter, alltoall(v),
     * scatter), so count = data_size / size / nranks; else count = data_size / size. */
    int blocks;
    double (*bus_factor)(uint32_t nranks);
    void (*layout)(const hc_perf_run_t *run, hc_perf_layout_t *layout_p);
    double (*input)(const hc_perf_run_t *run, uint64_t index);    /* send element index */
    double (*expected)(const hc_perf_run_t *run, uint64_t index); /* result element index */
    HcclResult (*launch)(const hc_perf_run_t *run);
};

extern const hc_perf_coll_ops_t hc_perf_coll_all_reduce;
extern const hc_perf_coll_ops_t hc_perf_coll_all_gather;
extern const hc_perf_coll_ops_t hc_perf_coll_reduce_scatter;
extern const hc_perf_coll_ops_t hc_perf_coll_broadcast;
extern const hc_perf_coll_ops_t hc_perf_coll_reduce;
extern const hc_perf_coll_ops_t hc_perf_coll_alltoall;
extern const hc_perf_coll_ops_t hc_perf_coll_alltoallv;
extern const hc_perf_coll_ops_t hc_perf_coll_scatter;
extern const hc_perf_coll_ops_t hc_perf_coll_send_recv;

/* ---- values (values.c) ----------------------------------------------------------------------- */

/* What rank src holds at index for a data-moving collective: distinct small integers. */
double hc_perf_value_move(const hc_perf_run_t *run, uint32_t src, uint64_t index);
/* What rank src contributes at index to a reduction with -o's op. */
double hc_perf_value_reduce(const hc_perf_run_t *run, uint32_t src, uint64_t index);
/* The reduction over every rank of hc_perf_value_reduce at index. */
double hc_perf_value_reduced(const hc_perf_run_t *run, uint64_t index);
/* Whether every result is exactly representable for this dtype, op and rank count; when not,
 * the check is skipped and reported as NULL, as hccl_test does. */
int hc_perf_value_exact(const hc_perf_opts_t *opts, const hc_perf_coll_ops_t *coll, uint32_t nranks);

/* ---- filling and checking (check.c) ---------------------------------------------------------- */

/* The collective's input in the send buffer, a poison pattern in the receive buffer (unless in
 * place), and the V collectives' counts and displacements for run->count. */
void hc_perf_fill(const hc_perf_run_t *run, const hc_perf_layout_t *layout);
/* Compare every element this rank checks with the expectation; print the first few mismatches
 * (tool and bytes name them) and return how many there are. */
uint64_t hc_perf_verify(const hc_perf_run_t *run, const hc_perf_layout_t *layout, const char *tool, uint64_t bytes);

/* ---- bootstrap (bootstrap.c) ----------------------------------------------------------------- */

/* Device, stream and communicator for this process's rank. */
typedef struct {
    const char *tool;        /* for messages: "all_reduce_test" */
    HcclHostLaunchInfo launch;
    aclrtStream stream;
    HcclComm comm;
    aclprofConfig *prof;     /* HCCL_TEST_PROFILING=1: the running recording */
    int acl_ready;
    int mpi_ready;
} hc_perf_world_t;

/* aclInit, the device, a stream, the root info exchange (hccl-run's store, or MPI_Bcast under
 * mpirun/srun when built with MPI) and HcclCommInitRootInfo: 0 on success, else a message was
 * printed. world->tool and world->launch must already be filled in. */
int hc_perf_world_init(hc_perf_world_t *world);
void hc_perf_world_fini(hc_perf_world_t *world);

/* ---- results and reports (report.c, plot_svg.c) ---------------------------------------------- */

typedef enum { HC_PERF_CHECK_NULL, HC_PERF_CHECK_SUCCESS, HC_PERF_CHECK_FAILED } hc_perf_check_t;

/* One row of the table: one data size. */
typedef struct {
    uint64_t data_bytes;
    double avg_time_us;  /* max over ranks of each rank's average */
    double alg_bw_gbs;   /* data_bytes / time, GB = 1e9 bytes as hccl_test */
    double bus_bw_gbs;   /* alg_bw_gbs * the collective's bus factor (nccl-tests) */
    hc_perf_check_t check;
} hc_perf_row_t;

/* What the reports say about the run besides the rows. */
typedef struct {
    const char *tool;       /* "all_reduce_test" */
    const hc_perf_coll_ops_t *coll;
    const hc_perf_opts_t *opts;
    uint32_t nranks;
} hc_perf_report_t;

const char *hc_perf_check_name(hc_perf_check_t check);
void hc_perf_print_header(FILE *out);
void hc_perf_print_row(FILE *out, const hc_perf_row_t *row);
/* Write the rows as JSON / as an SVG chart: 0 on success, else a message was printed. */
int hc_perf_write_json(const char *path, const hc_perf_report_t *report, const hc_perf_row_t *rows, size_t nrows);
int hc_perf_write_svg(const char *path, const hc_perf_report_t *report, const hc_perf_row_t *rows, size_t nrows);

/* ---- driver (driver.c) ----------------------------------------------------------------------- */

/* The whole tool: main() of every executable calls this with its collective. */
int hc_perf_main(const hc_perf_coll_ops_t *coll, int argc, char **argv);

#endif /* HC_PERF_H */
