/* hostccl and MPI in the same processes, on the same buffers, alternating: what a program that has
 * both sees (the "side by side" measurement). Built once with Open MPI's mpicc and once with
 * MPICH's, against the hostccl build (bench/Makefile, target side).
 *
 *   mpirun -np N side_by_side COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--mem malloc|thp|acl]
 *          [--rounds R] [--sync each|end] [--touch] [--json FILE]
 *
 * Per size and round, each library in turn (the order alternates by round): the warm-up calls, a
 * barrier, the timed calls, the slowest rank's average. hostccl calls are followed by
 * aclrtSynchronizeStream each (--sync each, the default: a blocking call, as MPI's are and as the
 * seed's programs write it) or once after the last (--sync end: hccl_test's launch-then-wait). The
 * table gives each library's median and best over the rounds and the ratio of the medians (MPI /
 * hostccl: above 1, hostccl is faster). --mem thp: malloc-like memory advised for transparent huge
 * pages, as numpy allocates arrays of 4 MiB and more. --touch: before every call each rank writes its
 * input (every cache line of it) and after it reads its output, as a program does with the
 * activations it sends and gets; only the calls are timed. Without it the buffers stay untouched
 * from call to call, the MPI benchmarks' and hccl_test's convention, which flatters whoever reads a
 * peer's buffer in place: the lines it read last time are still in its cache. Before timing a
 * size, both libraries run it once on the same input and their results must agree bit for bit
 * (fp32 sums of small integers are exact). */
#define _GNU_SOURCE
#include "bench_mpi.h"

#include <sys/mman.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

#define MAX_ROUNDS 64
#define HUGE_BYTES (2u << 20)

typedef struct {
    int coll, rank, nranks, use_acl, use_thp, sync_each, touch;
    float *send_buf, *recv_buf, *check_buf;
    uint64_t send_max, recv_max;
    bench_layout_t layout;
    int *mpi_counts, *mpi_displs; /* alltoallv: equal blocks of layout.count, as the perf tool's */
    uint64_t *counts, *displs;
    HcclComm comm;
    aclrtStream stream;
} side_t;

static int mpi_launch(const side_t *s)
{
    return bench_mpi_launch(s->coll, s->rank, s->nranks, s->send_buf, s->recv_buf, (int)s->layout.count,
                            s->mpi_counts, s->mpi_displs);
}

/* Both directions in one group, as the perf tool's send_recv_test. */
static HcclResult hccl_send_recv(const side_t *s)
{
    uint32_t partner = (uint32_t)(s->rank ^ 1);
    HcclResult res, end;

    if ((int)partner >= s->nranks)
        return HCCL_SUCCESS;
    res = HcclGroupStart();
    if (res != HCCL_SUCCESS)
        return res;
    res = HcclSend(s->send_buf, s->layout.count, HCCL_DATA_TYPE_FP32, partner, s->comm, s->stream);
    if (res == HCCL_SUCCESS)
        res = HcclRecv(s->recv_buf, s->layout.count, HCCL_DATA_TYPE_FP32, partner, s->comm, s->stream);
    end = HcclGroupEnd();
    return res != HCCL_SUCCESS ? res : end;
}

static HcclResult hccl_launch(const side_t *s)
{
    uint64_t count = s->layout.count;
    HcclDataType f32 = HCCL_DATA_TYPE_FP32;

    switch (s->coll) {
    case BENCH_ALL_REDUCE:
        return HcclAllReduce(s->send_buf, s->recv_buf, count, f32, HCCL_REDUCE_SUM, s->comm, s->stream);
    case BENCH_ALL_GATHER:
        return HcclAllGather(s->send_buf, s->recv_buf, count, f32, s->comm, s->stream);
    case BENCH_REDUCE_SCATTER:
        return HcclReduceScatter(s->send_buf, s->recv_buf, count, f32, HCCL_REDUCE_SUM, s->comm, s->stream);
    case BENCH_BROADCAST:
        return HcclBroadcast(s->send_buf, count, f32, 0, s->comm, s->stream);
    case BENCH_REDUCE:
        return HcclReduce(s->send_buf, s->recv_buf, count, f32, HCCL_REDUCE_SUM, 0, s->comm, s->stream);
    case BENCH_ALLTOALL:
        return HcclAlltoAll(s->send_buf, count, f32, s->recv_buf, count, f32, s->comm, s->stream);
    case BENCH_SCATTER:
        return HcclScatter(s->send_buf, s->recv_buf, count, f32, 0, s->comm, s->stream);
    case BENCH_ALLTOALLV:
        return HcclAlltoAllV(s->send_buf, s->counts, s->displs, f32, s->recv_buf, s->counts, s->displs, f32, s->comm,
                             s->stream);
    case BENCH_SEND_RECV:
        return hccl_send_recv(s);
    default:
        return HCCL_E_PARA;
    }
}

/* One call of library `lib` (0 MPI, 1 hostccl); the stream is synchronised here with --sync each. */
static int call(const side_t *s, int lib, int sync)
{
    if (lib == 0)
        return mpi_launch(s) == MPI_SUCCESS ? 0 : -1;
    if (hccl_launch(s) != HCCL_SUCCESS)
        return -1;
    return sync && aclrtSynchronizeStream(s->stream) != ACL_SUCCESS ? -1 : 0;
}

/* --touch: the program has just written its input (each cache line of the send buffer is dirtied,
 * with the value it holds, so that the results stay the same)... */
static void write_input(const side_t *s)
{
    volatile float *p = s->send_buf;

    for (uint64_t i = 0; i < s->layout.send_elems; i += 16)
        p[i] = p[i];
}

/* ...and reads its output after the call (Broadcast's is its one buffer). */
static float read_output(const side_t *s)
{
    const volatile float *p = s->coll == BENCH_BROADCAST ? s->send_buf : s->recv_buf;
    uint64_t n = s->coll == BENCH_BROADCAST ? s->layout.send_elems : s->layout.recv_elems;
    float sum = 0.0f;

    for (uint64_t i = 0; i < n; i += 16)
        sum += p[i];
    return sum;
}

/* The calls with --touch: each one timed alone, between the writes and the reads. */
static double touched_calls(const side_t *s, int lib, uint32_t iters, int *bad_p)
{
    volatile float sink = 0.0f;
    double total = 0.0;

    for (uint32_t i = 0; i < iters && !*bad_p; i++) {
        double t0;
        write_input(s);
        t0 = bench_now_us();
        *bad_p = call(s, lib, 1) != 0;
        total += bench_now_us() - t0;
        sink += read_output(s);
    }
    (void)sink;
    return total;
}

/* The slowest rank's average time per call of library `lib`, in microseconds; < 0 on an error. */
static double time_calls(const side_t *s, int lib, const bench_step_t *step)
{
    double start, avg, worst = -1.0;
    int bad = 0;

    for (uint32_t i = 0; i < step->warmup && !bad; i++)
        bad = call(s, lib, 1) != 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (s->touch) {
        double total = touched_calls(s, lib, step->iters, &bad);
        avg = bad ? 1e300 : total / step->iters;
    } else {
        start = bench_now_us();
        for (uint32_t i = 0; i < step->iters && !bad; i++)
            bad = call(s, lib, s->sync_each) != 0;
        if (lib == 1 && !s->sync_each && !bad)
            bad = aclrtSynchronizeStream(s->stream) != ACL_SUCCESS;
        avg = bad ? 1e300 : (bench_now_us() - start) / step->iters;
    }
    MPI_Allreduce(&avg, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst >= 1e300 ? -1.0 : worst;
}

/* Both libraries on the same input; 1 when their results differ anywhere on any rank. */
static int results_differ(side_t *s)
{
    float *out = s->coll == BENCH_BROADCAST ? s->send_buf : s->recv_buf;
    uint64_t elems = s->coll == BENCH_BROADCAST ? s->layout.send_elems : s->layout.recv_elems;
    int differ = 0, any = 0, compare = !(s->coll == BENCH_REDUCE && s->rank != 0);

    if (call(s, 0, 1) != 0)
        return 1;
    memcpy(s->check_buf, out, elems * sizeof(float));
    memset(s->recv_buf, 0, s->recv_max * sizeof(float));
    if (call(s, 1, 1) != 0)
        return 1;
    differ = compare && memcmp(s->check_buf, out, elems * sizeof(float)) != 0;
    MPI_Allreduce(&differ, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static void fill(side_t *s)
{
    for (uint64_t i = 0; i < s->send_max; i++)
        s->send_buf[i] = (float)((i + (uint64_t)s->rank) % 5) - 2.0f; /* small integers: exact sums */
    memset(s->recv_buf, 0, s->recv_max * sizeof(float));
}

static void *alloc(const side_t *s, uint64_t elems)
{
    void *p = NULL;
    size_t bytes = (elems > 16 ? elems : 16) * sizeof(float);

    if (s->use_thp) {
        /* numpy's way for arrays from 4 MiB: transparent huge pages where the kernel has them */
        bytes = (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
        p = aligned_alloc(HUGE_BYTES, bytes);
        if (p != NULL)
            (void)madvise(p, bytes, MADV_HUGEPAGE);
        return p;
    }
    if (!s->use_acl)
        return malloc(bytes);
    return aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS ? p : NULL;
}

static int alloc_buffers(side_t *s, const bench_plan_t *plan)
{
    bench_layout_t layout;

    s->send_max = s->recv_max = 16;
    for (size_t i = 0; i < plan->nsteps; i++) {
        bench_layout(s->coll, plan->steps[i].bytes, sizeof(float), (uint32_t)s->nranks, &layout);
        s->send_max = layout.send_elems > s->send_max ? layout.send_elems : s->send_max;
        s->recv_max = layout.recv_elems > s->recv_max ? layout.recv_elems : s->recv_max;
    }
    s->send_buf = alloc(s, s->send_max);
    s->recv_buf = alloc(s, s->recv_max);
    s->check_buf = malloc((s->send_max > s->recv_max ? s->send_max : s->recv_max) * sizeof(float));
    if (s->send_buf == NULL || s->recv_buf == NULL || s->check_buf == NULL)
        return -1;
    fill(s);
    return 0;
}

static int init_hccl(side_t *s)
{
    HcclRootInfo info;

    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(s->rank) != ACL_SUCCESS)
        return -1;
    if (s->rank == 0 && HcclGetRootInfo(&info) != HCCL_SUCCESS)
        return -1;
    MPI_Bcast(&info, sizeof(info), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (HcclCommInitRootInfo((uint32_t)s->nranks, &info, (uint32_t)s->rank, &s->comm) != HCCL_SUCCESS)
        return -1;
    return aclrtCreateStream(&s->stream) == ACL_SUCCESS ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct {
    uint64_t data_bytes;
    double mpi_med, mpi_min, hccl_med, hccl_min;
} side_row_t;

static int measure(side_t *s, const bench_step_t *step, int rounds, side_row_t *row_p)
{
    double t[2][MAX_ROUNDS];

    bench_layout(s->coll, step->bytes, sizeof(float), (uint32_t)s->nranks, &s->layout);
    for (int i = 0; i < s->nranks; i++) {
        s->counts[i] = s->layout.count;
        s->displs[i] = (uint64_t)i * s->layout.count;
        s->mpi_counts[i] = (int)s->counts[i];
        s->mpi_displs[i] = (int)s->displs[i];
    }
    if (results_differ(s)) {
        if (s->rank == 0)
            fprintf(stderr, "side_by_side: %s of %llu bytes: hostccl's result differs from MPI's\n",
                    bench_coll_name(s->coll), (unsigned long long)step->bytes);
        return -1;
    }
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int lib = (r + k) % 2;
            t[lib][r] = time_calls(s, lib, step);
            if (t[lib][r] < 0)
                return -1;
        }
    row_p->data_bytes = s->layout.data_elems * sizeof(float);
    row_p->mpi_med = median(t[0], rounds);
    row_p->mpi_min = t[0][0];
    row_p->hccl_med = median(t[1], rounds);
    row_p->hccl_min = t[1][0];
    return 0;
}

static const char *library_name(void)
{
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    for (char *c = version; *c != '\0'; c++)
        *c = *c == '\t' ? ' ' : *c;
    return version;
}

static int write_json(const char *path, const side_t *s, const side_row_t *rows, size_t n, int rounds)
{
    FILE *out = fopen(path, "w");

    if (out == NULL)
        return -1;
    fprintf(out, "{\n  \"tool\": \"side_by_side\",\n  \"collective\": \"%s\",\n  \"ranks\": %d,\n",
            bench_coll_name(s->coll), s->nranks);
    fprintf(out, "  \"mem\": \"%s\",\n  \"sync\": \"%s\",\n  \"touch\": %s,\n  \"rounds\": %d,\n  \"mpi\": \"%s\",\n"
                 "  \"rows\": [\n",
            s->use_acl ? "acl" : s->use_thp ? "thp" : "malloc", s->sync_each ? "each" : "end", s->touch ? "true" : "false",
            rounds, library_name());
    for (size_t i = 0; i < n; i++)
        fprintf(out,
                "    {\"data_size\": %llu, \"mpi_median_us\": %.3f, \"mpi_min_us\": %.3f, "
                "\"hostccl_median_us\": %.3f, \"hostccl_min_us\": %.3f}%s\n",
                (unsigned long long)rows[i].data_bytes, rows[i].mpi_med, rows[i].mpi_min, rows[i].hccl_med,
                rows[i].hccl_min, i + 1 < n ? "," : "");
    fprintf(out, "  ]\n}\n");
    return fclose(out) == 0 ? 0 : -1;
}

static int usage(void)
{
    fprintf(stderr, "usage: mpirun -np N side_by_side COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--mem malloc|thp|acl]\n"
                    "       [--rounds R] [--sync each|end] [--touch] [--json FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    side_t s = {.sync_each = 1};
    bench_plan_t plan = {0};
    side_row_t *rows = NULL;
    const char *json = NULL, *plan_text = NULL;
    int rounds = 5, status = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.nranks);
    s.coll = argc > 1 ? bench_coll_from_name(argv[1]) : -1;
    for (int i = 2; i < argc; i += 2) {
        if (strcmp(argv[i], "--touch") == 0) {
            s.touch = 1;
            i--; /* a flag: no value */
        } else if (i + 1 >= argc) {
            s.coll = -1;
        } else if (strcmp(argv[i], "--plan") == 0) {
            plan_text = argv[i + 1];
        } else if (strcmp(argv[i], "--mem") == 0) {
            s.use_acl = strcmp(argv[i + 1], "acl") == 0, s.use_thp = strcmp(argv[i + 1], "thp") == 0;
        } else if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--sync") == 0) {
            s.sync_each = strcmp(argv[i + 1], "end") != 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = argv[i + 1];
        } else {
            s.coll = -1;
        }
    }
    if (s.coll < 0 || plan_text == NULL || rounds < 1 || rounds > MAX_ROUNDS || (s.touch && !s.sync_each) ||
        bench_plan_parse(plan_text, &plan) != 0) {
        if (s.rank == 0)
            usage();
        MPI_Finalize();
        return 2;
    }
    rows = calloc(plan.nsteps, sizeof(*rows));
    s.counts = calloc(2 * (size_t)s.nranks, sizeof(*s.counts));
    s.mpi_counts = calloc(2 * (size_t)s.nranks, sizeof(*s.mpi_counts));
    if (s.counts != NULL && s.mpi_counts != NULL)
        s.displs = s.counts + s.nranks, s.mpi_displs = s.mpi_counts + s.nranks;
    if (rows == NULL || s.counts == NULL || s.mpi_counts == NULL || init_hccl(&s) != 0 ||
        alloc_buffers(&s, &plan) != 0) {
        fprintf(stderr, "side_by_side: rank %d: set-up failed\n", s.rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (s.rank == 0)
        printf("side_by_side: %s, %d ranks, fp32, %s buffers%s, hostccl synchronised %s, %s, %d rounds\n"
               "%-12s %12s %12s %12s %12s %10s\n",
               bench_coll_name(s.coll), s.nranks, s.use_acl ? "aclrtMalloc" : s.use_thp ? "huge-page malloc" : "malloc",
               s.touch ? " written before and read after each call" : "", s.sync_each ? "per call" : "once", library_name(), rounds, "data_size", "MPI med us", "MPI min",
               "hccl med us", "hccl min", "MPI/hccl");
    for (size_t i = 0; i < plan.nsteps; i++) {
        if (measure(&s, &plan.steps[i], rounds, &rows[i]) != 0)
            goto out;
        if (s.rank == 0)
            printf("%-12llu %12.3f %12.3f %12.3f %12.3f %10.2f\n", (unsigned long long)rows[i].data_bytes,
                   rows[i].mpi_med, rows[i].mpi_min, rows[i].hccl_med, rows[i].hccl_min,
                   rows[i].mpi_med / rows[i].hccl_med);
        fflush(stdout);
    }
    status = s.rank == 0 && json != NULL && write_json(json, &s, rows, plan.nsteps, rounds) != 0;
out:
    HcclCommDestroy(s.comm);
    aclrtDestroyStream(s.stream);
    MPI_Finalize();
    return status;
}
