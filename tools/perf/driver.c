/*
 * The perf tools' driver: one size sweep of one collective, hccl_test style.
 *
 * Per data size every rank: fills its input; with -c 1 runs the collective once and verifies every
 * element of its result; runs the warmup iterations; meets the others at a barrier; then enqueues
 * the timed iterations back to back on its stream and waits once at the end, so the time covers
 * what hccl_test's events cover (enqueue and execution, no per-iteration synchronisation). The
 * reported time is the maximum over ranks of each rank's average, gathered with one small
 * HcclAllReduce(MAX) that also carries whether any rank's check failed. Only rank 0 prints.
 *
 * Buffers come from aclrtMalloc (--mem malloc: from malloc) once, sized for the largest data size,
 * and are written and read in place: on hostccl device memory is host memory (DESIGN.md section 2).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

/* Smallest allocation, so that count 0 still passes valid pointers. */
#define MIN_BUFFER_BYTES 64
/* How long ranks other than 0 wait before exiting on a usage error (see usage_error). */
#define USAGE_EXIT_DELAY_NS 500000000L

typedef struct {
    const hc_perf_coll_ops_t *coll;
    hc_perf_opts_t opts;
    hc_perf_world_t world;
    hc_perf_run_t run;
    char tool[64];
    uint64_t *sizes;
    size_t nsizes;
    hc_perf_row_t *rows;
    double *stats;          /* two doubles in device memory: time, failure */
    int checking;           /* -c 1 and the results are exactly representable */
    long corrupt_rank;      /* HOSTCCL_PERF_CORRUPT, the test hook; -1 when unset */
} driver_t;

static int is_printer(const driver_t *d)
{
    return d->world.launch.rank == 0;
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int hccl_failed(const driver_t *d, const char *what, HcclResult res)
{
    fprintf(stderr, "%s: rank %u: %s failed: %s\n", d->tool, d->world.launch.rank, what, HcclGetErrorString(res));
    return -1;
}

static int sync_stream(const driver_t *d)
{
    aclError err = aclrtSynchronizeStream(d->world.stream);

    if (err != ACL_SUCCESS) {
        fprintf(stderr, "%s: rank %u: aclrtSynchronizeStream failed: acl error %d\n", d->tool,
                d->world.launch.rank, (int)err);
        return -1;
    }
    return 0;
}

/* Elements per block for a data size: whole elements, rounded up, and for the collectives that
 * split data_size into one block per rank, a whole number of blocks (rounded up too). */
static uint64_t count_for(const driver_t *d, uint64_t bytes)
{
    uint64_t elems = bytes / d->opts.dtype->size + (bytes % d->opts.dtype->size != 0);

    if (d->coll->blocks)
        elems = elems / d->run.nranks + (elems % d->run.nranks != 0);
    return elems;
}

static int launch_times(const driver_t *d, uint32_t times)
{
    HcclResult res;

    for (uint32_t i = 0; i < times; i++) {
        res = d->coll->launch(&d->run);
        if (res != HCCL_SUCCESS)
            return hccl_failed(d, d->coll->name, res);
    }
    return 0;
}

/* ---- buffers ---------------------------------------------------------------------------------- */

static int device_alloc(const driver_t *d, uint64_t bytes, void **buf_p)
{
    aclError err = aclrtMalloc(buf_p, bytes < MIN_BUFFER_BYTES ? MIN_BUFFER_BYTES : (size_t)bytes,
                               ACL_MEM_MALLOC_HUGE_FIRST);

    if (err != ACL_SUCCESS) {
        fprintf(stderr, "%s: rank %u: aclrtMalloc of %" PRIu64 " bytes failed: acl error %d\n", d->tool,
                d->world.launch.rank, bytes, (int)err);
        return -1;
    }
    return 0;
}

/* --mem malloc: plain memory, as a torch or MPI program passes it; --mem huge: the same advised for
 * transparent huge pages, as numpy allocates arrays from 4 MiB. Written once so that no page fault
 * is timed (the MPI peers do the same). */
#define HUGE_PAGE_BYTES (2u << 20)

static int data_alloc(const driver_t *d, uint64_t bytes, void **buf_p)
{
    size_t size = bytes < MIN_BUFFER_BYTES ? MIN_BUFFER_BYTES : (size_t)bytes;

    if (!d->opts.mem_malloc)
        return device_alloc(d, bytes, buf_p);
    if (d->opts.mem_malloc == 2) {
        size = (size + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
        *buf_p = aligned_alloc(HUGE_PAGE_BYTES, size);
        if (*buf_p != NULL)
            (void)madvise(*buf_p, size, MADV_HUGEPAGE);
    } else {
        *buf_p = malloc(size);
    }
    if (*buf_p == NULL) {
        fprintf(stderr, "%s: rank %u: malloc of %zu bytes failed\n", d->tool, d->world.launch.rank, size);
        return -1;
    }
    memset(*buf_p, 0, size);
    return 0;
}

static void data_free(const driver_t *d, void *buf)
{
    if (d->opts.mem_malloc)
        free(buf);
    else
        (void)aclrtFree(buf);
}

/* Send and receive buffers for the largest size, the V collectives' count arrays, the stats. */
static int alloc_buffers(driver_t *d)
{
    uint64_t send_max = 0, recv_max = 0, n = d->run.nranks;
    hc_perf_layout_t layout;

    for (size_t i = 0; i < d->nsizes; i++) {
        d->run.count = count_for(d, d->sizes[i]);
        d->coll->layout(&d->run, &layout);
        send_max = layout.send_elems > send_max ? layout.send_elems : send_max;
        recv_max = layout.recv_elems > recv_max ? layout.recv_elems : recv_max;
    }
    d->run.counts = calloc(n, sizeof(uint64_t));
    d->run.displs = calloc(n, sizeof(uint64_t));
    if (d->run.counts == NULL || d->run.displs == NULL) {
        fprintf(stderr, "%s: out of memory\n", d->tool);
        return -1;
    }
    if (data_alloc(d, send_max * d->opts.dtype->size, &d->run.send_buf) != 0 ||
        data_alloc(d, recv_max * d->opts.dtype->size, &d->run.recv_buf) != 0)
        return -1;
    return device_alloc(d, 2 * sizeof(double), (void **)&d->stats);
}

static void free_buffers(driver_t *d)
{
    if (d->run.send_buf != NULL)
        data_free(d, d->run.send_buf);
    if (d->run.recv_buf != NULL)
        data_free(d, d->run.recv_buf);
    if (d->stats != NULL)
        (void)aclrtFree(d->stats);
    free(d->run.counts);
    free(d->run.displs);
}

/* ---- checks ----------------------------------------------------------------------------------- */

/* Run once and verify: 1 when this rank's result is wrong, -1 on an error. The test hook
 * HOSTCCL_PERF_CORRUPT=R makes rank R flip a byte of its result first, so that the tests can
 * see a wrong result reported as failed on rank 0 and in the exit status. */
static int check_once(driver_t *d, const hc_perf_layout_t *layout, uint64_t bytes)
{
    char *result = layout->in_place ? d->run.send_buf : d->run.recv_buf;

    if (launch_times(d, 1) != 0 || sync_stream(d) != 0)
        return -1;
    if (d->corrupt_rank == (long)d->run.rank && layout->check_elems > 0)
        result[0] ^= 0x5a;
    return hc_perf_verify(&d->run, layout, d->tool, bytes) != 0;
}

/* ---- one data size ---------------------------------------------------------------------------- */

/* Every rank's average time and check failure, reduced to the worst of each. */
static int gather_stats(driver_t *d, double avg_us, int failed, double *max_avg_p, int *any_failed_p)
{
    HcclResult res;

    d->stats[0] = avg_us;
    d->stats[1] = failed ? 1.0 : 0.0;
    res = HcclAllReduce(d->stats, d->stats, 2, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, d->world.comm, d->world.stream);
    if (res != HCCL_SUCCESS)
        return hccl_failed(d, "HcclAllReduce of the timings", res);
    if (sync_stream(d) != 0)
        return -1;
    *max_avg_p = d->stats[0];
    *any_failed_p = d->stats[1] != 0.0;
    return 0;
}

static int barrier(const driver_t *d)
{
    HcclResult res = HcclBarrier(d->world.comm, d->world.stream);

    if (res != HCCL_SUCCESS)
        return hccl_failed(d, "HcclBarrier", res);
    return sync_stream(d);
}

/*
 * --touch: what a program that computes its buffers does to the caches between calls. Every line of
 * the input is written (with the value it holds, so results and timings of the data stay the same)
 * and every line of the output read. Without it (hccl_test's way) the same untouched buffers serve
 * every iteration, and a path that reads peers' buffers in place finds them already in its cache.
 */
static volatile uint8_t touch_sink;

static void touch_lines(uint8_t *buf, uint64_t bytes, int write)
{
    volatile uint8_t *p = buf;
    uint8_t sum = 0;

    for (uint64_t i = 0; i < bytes; i += 64) {
        if (write)
            p[i] = p[i];
        else
            sum = (uint8_t)(sum + p[i]);
    }
    touch_sink = sum;
}

static int touched_iterations(driver_t *d, const hc_perf_layout_t *layout, uint32_t times)
{
    size_t esize = d->opts.dtype->size;
    uint8_t *out = layout->in_place ? d->run.send_buf : d->run.recv_buf;
    uint64_t out_elems = layout->in_place ? layout->send_elems : layout->recv_elems;

    for (uint32_t i = 0; i < times; i++) {
        touch_lines(d->run.send_buf, layout->send_elems * esize, 1);
        if (launch_times(d, 1) != 0 || sync_stream(d) != 0)
            return -1;
        touch_lines(out, out_elems * esize, 0);
    }
    return 0;
}

/* The timed part: barrier, the iterations back to back, one wait (--touch: one wait each). The
 * iterations are -n and -w, or those of the size's --plan step. */
static int time_iterations(driver_t *d, size_t index, const hc_perf_layout_t *layout, double *avg_us_p)
{
    uint32_t iters = d->opts.nplan > 0 ? d->opts.plan[index].iters : d->opts.iters;
    uint32_t warmup = d->opts.nplan > 0 ? d->opts.plan[index].warmup_iters : d->opts.warmup_iters;
    double start;

    if (launch_times(d, warmup) != 0 || sync_stream(d) != 0 || barrier(d) != 0)
        return -1;
    start = now_us();
    if (d->opts.touch ? touched_iterations(d, layout, iters) != 0
                      : launch_times(d, iters) != 0 || sync_stream(d) != 0)
        return -1;
    *avg_us_p = (now_us() - start) / (double)iters;
    return 0;
}

static int measure_size(driver_t *d, size_t index, hc_perf_row_t *row_p)
{
    hc_perf_layout_t layout;
    double avg_us = 0.0, max_avg_us = 0.0;
    int failed = 0, any_failed = 0;
    uint64_t bytes;

    d->run.count = count_for(d, d->sizes[index]);
    d->run.salt = (uint64_t)index * 7919u; /* a prime: each size gets a different pattern */
    d->coll->layout(&d->run, &layout);
    bytes = layout.data_elems * d->opts.dtype->size;
    hc_perf_fill(&d->run, &layout);
    if (d->checking) {
        failed = check_once(d, &layout, bytes);
        if (failed < 0)
            return -1;
    }
    if (time_iterations(d, index, &layout, &avg_us) != 0 || gather_stats(d, avg_us, failed, &max_avg_us, &any_failed) != 0)
        return -1;
    *row_p = (hc_perf_row_t){.data_bytes = bytes, .avg_time_us = max_avg_us};
    row_p->alg_bw_gbs = max_avg_us > 0.0 ? (double)bytes / max_avg_us / 1e3 : 0.0;
    row_p->bus_bw_gbs = row_p->alg_bw_gbs * d->coll->bus_factor(d->run.nranks);
    row_p->check = !d->checking ? HC_PERF_CHECK_NULL : any_failed ? HC_PERF_CHECK_FAILED : HC_PERF_CHECK_SUCCESS;
    return 0;
}

/* ---- the sweep -------------------------------------------------------------------------------- */

/* hccl_test's preamble and warnings, then the header; rank 0 only. */
static void print_preamble(const driver_t *d)
{
    const hc_perf_opts_t *o = &d->opts;

    if (o->op_set && !d->coll->reduces)
        printf("Warning: The -o,--op <sum/prod/min/max> option does not take effect. Check the cmd parameter.\n");
    if (o->step_factor > 1.0 && o->step_bytes_set)
        printf("Warning: [-f,--stepfactor] and [-i,--stepbytes] are set, [-f,--stepfactor] is enabled by default.\n");
    if (o->check && !d->checking)
        printf("Warning: The calculation result overflows, No verification is performed.\n");
    if (o->npus != 0 && o->npus != d->world.launch.localSize)
        printf("Warning: -p %u but %u ranks run on this host; each rank uses device LOCAL_RANK.\n", o->npus,
               d->world.launch.localSize);
    if (o->nplan > 0)
        printf("the minbytes is %" PRIu64 ", maxbytes is %" PRIu64 ", %u sizes with the iterations of --plan\n",
               o->min_bytes, o->max_bytes, o->nplan);
    else
        printf("the minbytes is %" PRIu64 ", maxbytes is %" PRIu64 ", iters is %u, warmup_iters is %u\n",
               o->min_bytes, o->max_bytes, o->iters, o->warmup_iters);
    printf("%s: %u ranks (%u on this host), datatype %s", d->tool, d->run.nranks, d->world.launch.localSize,
           o->dtype->name);
    if (d->coll->reduces)
        printf(", op %s", hc_perf_op_name(o->op));
    if (d->coll->rooted)
        printf(", root %u", o->root);
    printf(", launcher %s\n", d->world.launch.launcher);
    hc_perf_print_header(stdout);
}

static int write_reports(const driver_t *d, size_t nrows)
{
    hc_perf_report_t report = {.tool = d->tool, .coll = d->coll, .opts = &d->opts, .nranks = d->run.nranks};
    int res = 0;

    if (d->opts.json_path != NULL && hc_perf_write_json(d->opts.json_path, &report, d->rows, nrows) != 0)
        res = -1;
    if (d->opts.plot_path != NULL && hc_perf_write_svg(d->opts.plot_path, &report, d->rows, nrows) != 0)
        res = -1;
    return res;
}

/* All sizes: HC_PERF_EXIT_FAIL when a call failed, any rank's check failed or a report could not be
 * written, else 0. */
static int sweep(driver_t *d)
{
    int any_failed = 0, unused_failed;
    double unused_avg;

    d->sizes = hc_perf_size_list(&d->opts, &d->nsizes);
    d->rows = d->sizes != NULL ? calloc(d->nsizes, sizeof(*d->rows)) : NULL;
    if (d->rows == NULL) {
        fprintf(stderr, "%s: out of memory\n", d->tool);
        return HC_PERF_EXIT_FAIL;
    }
    if (alloc_buffers(d) != 0)
        return HC_PERF_EXIT_FAIL;
    /* The timings' reduction once before any size: the first one after a size's timed calls wrote
     * the stats buffer's page for the first time and ran the reduction's code for the first time,
     * faulting pages in; where ranks share CPUs a rank doing that held its CPU while a peer there
     * still ran its own timed calls, and the first size's time took it (4 ranks on 2 CPUs, 16-byte
     * Scatter: 1.1-3.2 us a call in the first size against 0.36-0.92 for the same size again). */
    if (gather_stats(d, 0.0, 0, &unused_avg, &unused_failed) != 0)
        return HC_PERF_EXIT_FAIL;
    if (is_printer(d))
        print_preamble(d);
    for (size_t i = 0; i < d->nsizes; i++) {
        if (measure_size(d, i, &d->rows[i]) != 0)
            return HC_PERF_EXIT_FAIL;
        any_failed |= d->rows[i].check == HC_PERF_CHECK_FAILED;
        if (is_printer(d))
            hc_perf_print_row(stdout, &d->rows[i]);
    }
    if (is_printer(d) && write_reports(d, d->nsizes) != 0)
        any_failed = 1;
    /* A rank whose check failed exits non-zero, and hccl-run then stops the others: wait here until
     * rank 0 has printed and written everything. */
    if (barrier(d) != 0)
        return HC_PERF_EXIT_FAIL;
    return any_failed ? HC_PERF_EXIT_FAIL : 0;
}

/* ---- entry ------------------------------------------------------------------------------------ */

/* Rank 0 says what is wrong and prints the usage; every rank exits with HC_PERF_EXIT_USAGE. */
static int usage_error(const driver_t *d, const char *error)
{
    if (is_printer(d)) {
        fprintf(stderr, "%s: %s\n\n", d->tool, error);
        hc_perf_usage(stderr, d->tool);
    } else {
        /* hccl-run stops the whole job as soon as one rank fails: without a pause, another rank's
         * exit could kill rank 0 before it has said what is wrong. */
        nanosleep(&(struct timespec){.tv_nsec = USAGE_EXIT_DELAY_NS}, NULL);
    }
    return HC_PERF_EXIT_USAGE;
}

/* Parse and check the command line: -1 to go on, else the exit status. Every rank parses the same
 * line and reaches the same verdict; only rank 0 says so. */
static int parse_command_line(driver_t *d, int argc, char **argv)
{
    char error[256] = "";
    hc_perf_parse_t parsed = hc_perf_opts_parse(argc, argv, error, sizeof(error), &d->opts);

    if (parsed == HC_PERF_PARSE_HELP) {
        if (is_printer(d))
            hc_perf_usage(stdout, d->tool);
        return 0;
    }
    if (parsed == HC_PERF_PARSE_RUN && d->opts.root >= d->world.launch.size)
        snprintf(error, sizeof(error), "-r,--root %u is not a rank of this job of %u ranks", d->opts.root,
                 d->world.launch.size);
    else if (parsed == HC_PERF_PARSE_RUN)
        return -1;
    return usage_error(d, error);
}

/* -p may not exceed the devices a host has, as in hccl_test: -1 to go on, else the exit status. */
static int check_npus(const driver_t *d)
{
    uint32_t devices = 0;
    char error[128];

    if (d->opts.npus == 0 || aclrtGetDeviceCount(&devices) != ACL_SUCCESS || d->opts.npus <= devices)
        return -1;
    snprintf(error, sizeof(error), "-p,--npus %u is more than the %u devices of this host (HOSTCCL_DEVICE_COUNT)",
             d->opts.npus, devices);
    return usage_error(d, error);
}

/* Whether path can be written, found out by opening it for writing (and removing it again when it
 * did not exist before): 0, or -1 with the reason in error. */
static int check_writable(const char *flag, const char *path, char *error, size_t len)
{
    int existed = access(path, F_OK) == 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int err = errno;

    if (fd < 0) {
        snprintf(error, len, "%s %s: cannot write there: %s", flag, path, strerror(err));
        return -1;
    }
    close(fd);
    if (!existed)
        unlink(path);
    return 0;
}

/* The report files are written after the whole sweep: find out now whether they can be, and refuse
 * a --plot file the tool would write in a format its name does not say (only SVG is drawn). Rank 0
 * writes them, so rank 0 decides: -1 to go on, else the exit status. */
static int check_outputs(const driver_t *d)
{
    const char *plot = d->opts.plot_path;
    size_t plot_len = plot != NULL ? strlen(plot) : 0;
    char error[512];

    if (!is_printer(d))
        return -1;
    if (plot != NULL && (plot_len < 4 || strcasecmp(plot + plot_len - 4, ".svg") != 0)) {
        snprintf(error, sizeof(error), "--plot draws SVG only: give a file name ending in .svg, not \"%s\"", plot);
        return usage_error(d, error);
    }
    if ((d->opts.json_path != NULL && check_writable("--json", d->opts.json_path, error, sizeof(error)) != 0) ||
        (plot != NULL && check_writable("--plot", plot, error, sizeof(error)) != 0))
        return usage_error(d, error);
    return -1;
}

static long corrupt_rank_from_env(void)
{
    const char *text = getenv("HOSTCCL_PERF_CORRUPT");
    char *end;
    long rank;

    if (text == NULL || text[0] < '0' || text[0] > '9')
        return -1;
    rank = strtol(text, &end, 10);
    return *end == '\0' ? rank : -1;
}

static int run_tool(driver_t *d)
{
    int status;

    if (hc_perf_world_init(&d->world) != 0)
        return HC_PERF_EXIT_FAIL;
    status = check_npus(d);
    if (status >= 0)
        return status;
    d->run = (hc_perf_run_t){.opts = &d->opts, .coll = d->coll, .rank = d->world.launch.rank,
                             .nranks = d->world.launch.size, .comm = d->world.comm, .stream = d->world.stream};
    d->checking = d->opts.check && hc_perf_value_exact(&d->opts, d->coll, d->run.nranks);
    d->corrupt_rank = corrupt_rank_from_env();
    return sweep(d);
}

int hc_perf_main(const hc_perf_coll_ops_t *coll, int argc, char **argv)
{
    driver_t d = {.coll = coll};
    HcclResult res;
    int status;

    snprintf(d.tool, sizeof(d.tool), "%s_test", coll->name);
    d.world.tool = d.tool;
    setvbuf(stdout, NULL, _IOLBF, 0);
    res = HcclHostGetLaunchInfo(&d.world.launch);
    if (res != HCCL_SUCCESS) {
        fprintf(stderr, "%s: HcclHostGetLaunchInfo failed: %s\n", d.tool, HcclGetErrorString(res));
        return HC_PERF_EXIT_FAIL;
    }
    status = parse_command_line(&d, argc, argv);
    if (status < 0)
        status = check_outputs(&d);
    if (status >= 0)
        return status;
    status = run_tool(&d);
    free_buffers(&d);
    free(d.sizes);
    free(d.rows);
    hc_perf_world_fini(&d.world);
    return status;
}
