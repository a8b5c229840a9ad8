/* The MPI peer of hostccl's perf tools: the same nine collectives, sizes and timing method, over any MPI
 * (bench/Makefile builds it once with Open MPI's mpicc and once with MPICH's).
 *
 *   mpirun -np N mpi_coll COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--json FILE]
 *
 * Per size, as tools/perf/driver.c: the warm-up iterations, a barrier, the timed iterations back to
 * back, and the average of the slowest rank (MPI_Reduce MAX to rank 0, which prints the row; run
 * once before the first size too).
 * Buffers are allocated once for the largest size and touched, so no page faults are timed; they
 * are plain malloc memory, which is what an MPI program passes. fp32, sum, root 0. */
#define _POSIX_C_SOURCE 200809L
#include "bench_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int coll;
    int rank;
    int nranks;
    float *send_buf;
    float *recv_buf;
    int *counts, *displs; /* alltoallv: equal blocks, as the perf tool's */
    bench_layout_t layout;
} peer_t;

/* send_recv pairs rank 2k with 2k+1, both directions at once (the perf tool's HcclSend + HcclRecv
 * inside one group); with an odd number of ranks the last one idles (bench_mpi.h). */
static int launch(const peer_t *p)
{
    return bench_mpi_launch(p->coll, p->rank, p->nranks, p->send_buf, p->recv_buf, (int)p->layout.count, p->counts,
                            p->displs);
}

static int launch_times(const peer_t *p, uint32_t times)
{
    for (uint32_t i = 0; i < times; i++) {
        int err = launch(p);

        if (err != MPI_SUCCESS) {
            fprintf(stderr, "mpi_coll: rank %d: %s failed: MPI error %d\n", p->rank, bench_coll_name(p->coll), err);
            return -1;
        }
    }
    return 0;
}

static int measure(peer_t *p, const bench_step_t *step, bench_row_t *row_p)
{
    double start, avg_us, max_avg_us = 0.0;

    bench_layout(p->coll, step->bytes, sizeof(float), (uint32_t)p->nranks, &p->layout);
    for (int i = 0; i < p->nranks; i++) {
        p->counts[i] = (int)p->layout.count;
        p->displs[i] = i * (int)p->layout.count;
    }
    if (launch_times(p, step->warmup) != 0)
        return -1;
    MPI_Barrier(MPI_COMM_WORLD);
    start = bench_now_us();
    if (launch_times(p, step->iters) != 0)
        return -1;
    avg_us = (bench_now_us() - start) / step->iters;
    MPI_Reduce(&avg_us, &max_avg_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    *row_p = (bench_row_t){.data_bytes = p->layout.data_elems * sizeof(float), .avg_us = max_avg_us};
    return 0;
}

/* Both buffers sized for the largest step and written once, so every page is mapped before timing. */
static int alloc_buffers(peer_t *p, const bench_plan_t *plan)
{
    uint64_t send_elems = 1, recv_elems = 1;
    bench_layout_t layout;

    for (size_t i = 0; i < plan->nsteps; i++) {
        bench_layout(p->coll, plan->steps[i].bytes, sizeof(float), (uint32_t)p->nranks, &layout);
        if (layout.send_elems > send_elems)
            send_elems = layout.send_elems;
        if (layout.recv_elems > recv_elems)
            recv_elems = layout.recv_elems;
    }
    if (send_elems > (uint64_t)INT32_MAX) {
        fprintf(stderr, "mpi_coll: %llu elements do not fit an MPI count\n", (unsigned long long)send_elems);
        return -1;
    }
    p->send_buf = malloc(send_elems * sizeof(float));
    p->recv_buf = malloc(recv_elems * sizeof(float));
    p->counts = calloc((size_t)p->nranks, sizeof(int));
    p->displs = calloc((size_t)p->nranks, sizeof(int));
    if (p->send_buf == NULL || p->recv_buf == NULL || p->counts == NULL || p->displs == NULL) {
        fprintf(stderr, "mpi_coll: rank %d: out of memory\n", p->rank);
        return -1;
    }
    for (uint64_t i = 0; i < send_elems; i++)
        p->send_buf[i] = (float)((i + (uint64_t)p->rank) % 5) - 2.0f; /* small integers: exact sums */
    memset(p->recv_buf, 0, recv_elems * sizeof(float));
    return 0;
}

static const char *library_name(void)
{
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0'; /* the first clause names the library and its version */
    for (char *c = version; *c != '\0'; c++)
        if (*c == '\t')
            *c = ' '; /* "MPICH Version:\t4.0.2" */
    return version;
}

static int usage(void)
{
    fprintf(stderr, "usage: mpirun -np N mpi_coll COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--json FILE]\n"
                    "COLLECTIVE: all_reduce all_gather reduce_scatter broadcast reduce alltoall alltoallv scatter send_recv\n");
    return 2;
}

int main(int argc, char **argv)
{
    peer_t p = {0};
    bench_plan_t plan = {0};
    bench_row_t *rows = NULL;
    const char *json = NULL, *plan_text = NULL;
    int status = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p.nranks);
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--plan") == 0)
            plan_text = argv[i + 1];
        else if (strcmp(argv[i], "--json") == 0)
            json = argv[i + 1];
    }
    p.coll = argc > 1 ? bench_coll_from_name(argv[1]) : -1;
    if (p.coll < 0 || plan_text == NULL || argc % 2 != 0) {
        status = p.rank == 0 ? usage() : 2;
        goto out_finalize;
    }
    if (bench_plan_parse(plan_text, &plan) != 0)
        goto out_finalize;
    rows = calloc(plan.nsteps, sizeof(*rows));
    if (rows == NULL || alloc_buffers(&p, &plan) != 0)
        goto out_free;
    if (p.rank == 0)
        bench_print_header("mpi_coll", bench_coll_name(p.coll), (uint32_t)p.nranks, library_name());
    /* The timings' reduction once before the first size, as tools/perf/driver.c does: its first run
     * (pages of its code faulted in) must not fall in the first size's time. */
    {
        double zero = 0.0, unused = 0.0;
        MPI_Reduce(&zero, &unused, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    }
    for (size_t i = 0; i < plan.nsteps; i++) {
        if (measure(&p, &plan.steps[i], &rows[i]) != 0)
            goto out_free;
        if (p.rank == 0)
            bench_print_row(&rows[i]);
    }
    status = 0;
    if (p.rank == 0 && json != NULL)
        status = bench_json_write(json, "mpi_coll", bench_coll_name(p.coll), (uint32_t)p.nranks, library_name(),
                                  rows, plan.nsteps) != 0;
out_free:
    free(p.send_buf);
    free(p.recv_buf);
    free(p.counts);
    free(p.displs);
    free(rows);
    bench_plan_free(&plan);
out_finalize:
    if (status == 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return status;
}
