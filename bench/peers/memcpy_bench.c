/* The copy baseline: N processes, each copying data_size bytes from one private buffer to another
 * at the same time, timed like the perf tools (warm-up, barrier, iterations, slowest rank's
 * average). A collective cannot beat this on the same machine: every rank has to write at least its
 * data_size of output, through the same memory system and the same cores. The bench reports
 * copy efficiency = this time / the collective's time.
 *
 *   memcpy_bench -n N COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--json FILE]
 *
 * COLLECTIVE only decides data_size (the perf tools' rounding per collective), so the rows line up
 * with the collective's rows. No MPI: the parent forks the N ranks; they meet at a process-shared
 * pthread barrier and leave their averages in a shared page. */
#define _GNU_SOURCE
#include "bench_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pthread_barrier_t barrier;
    double avg_us[]; /* [step * nranks + rank] */
} shared_t;

/* Volatile sink so the compiler cannot drop copies whose results nobody reads. */
static volatile unsigned char sink;

static int run_rank(shared_t *shared, const bench_plan_t *plan, const uint64_t *bytes, uint32_t rank,
                    uint32_t nranks)
{
    uint64_t max_bytes = 1;
    unsigned char *src, *dst;

    for (size_t i = 0; i < plan->nsteps; i++)
        max_bytes = bytes[i] > max_bytes ? bytes[i] : max_bytes;
    src = malloc(max_bytes);
    dst = malloc(max_bytes);
    if (src == NULL || dst == NULL)
        return 1;
    memset(src, (int)rank + 1, max_bytes);
    memset(dst, 0, max_bytes);
    for (size_t i = 0; i < plan->nsteps; i++) {
        const bench_step_t *step = &plan->steps[i];
        double start;

        for (uint32_t it = 0; it < step->warmup; it++)
            memcpy(dst, src, bytes[i]);
        pthread_barrier_wait(&shared->barrier);
        start = bench_now_us();
        for (uint32_t it = 0; it < step->iters; it++) {
            memcpy(dst, src, bytes[i]);
            __asm__ __volatile__("" : : "r"(dst) : "memory");
        }
        shared->avg_us[i * nranks + rank] = (bench_now_us() - start) / step->iters;
        sink = dst[bytes[i] - 1];
    }
    return 0;
}

static int spawn_ranks(shared_t *shared, const bench_plan_t *plan, const uint64_t *bytes, uint32_t nranks)
{
    int failed = 0;

    for (uint32_t rank = 0; rank < nranks; rank++) {
        pid_t pid = fork();

        if (pid < 0) {
            perror("memcpy_bench: fork");
            return -1; /* the children already started stay blocked at the barrier: kill the group */
        }
        if (pid == 0)
            _exit(run_rank(shared, plan, bytes, rank, nranks));
    }
    for (uint32_t rank = 0; rank < nranks; rank++) {
        int status = 0;

        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    bench_plan_t plan = {0};
    const char *json = NULL, *plan_text = NULL;
    uint32_t nranks = 0;
    int coll = -1, status = 1;
    pthread_barrierattr_t attr;
    shared_t *shared;
    uint64_t *bytes;
    size_t shared_size;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            nranks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--plan") == 0 && i + 1 < argc)
            plan_text = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json = argv[++i];
        else
            coll = bench_coll_from_name(argv[i]);
    }
    if (nranks == 0 || nranks > 1024 || coll < 0 || plan_text == NULL) {
        fprintf(stderr, "usage: memcpy_bench -n N COLLECTIVE --plan SIZE:ITERS:WARMUP[,...] [--json FILE]\n");
        return 2;
    }
    if (bench_plan_parse(plan_text, &plan) != 0)
        return 2;
    bytes = calloc(plan.nsteps, sizeof(*bytes));
    shared_size = sizeof(shared_t) + plan.nsteps * nranks * sizeof(double);
    shared = mmap(NULL, shared_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bytes == NULL || shared == MAP_FAILED) {
        perror("memcpy_bench: memory");
        return 1;
    }
    for (size_t i = 0; i < plan.nsteps; i++) {
        bench_layout_t layout;

        bench_layout(coll, plan.steps[i].bytes, sizeof(float), nranks, &layout);
        bytes[i] = layout.data_elems * sizeof(float);
    }
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&shared->barrier, &attr, nranks);
    if (spawn_ranks(shared, &plan, bytes, nranks) == 0) {
        bench_row_t *rows = calloc(plan.nsteps, sizeof(*rows));

        bench_print_header("memcpy_bench", bench_coll_name(coll), nranks, "memcpy, one copy per rank");
        for (size_t i = 0; rows != NULL && i < plan.nsteps; i++) {
            rows[i].data_bytes = bytes[i];
            for (uint32_t rank = 0; rank < nranks; rank++)
                if (shared->avg_us[i * nranks + rank] > rows[i].avg_us)
                    rows[i].avg_us = shared->avg_us[i * nranks + rank];
            bench_print_row(&rows[i]);
        }
        status = rows == NULL || (json != NULL && bench_json_write(json, "memcpy_bench", bench_coll_name(coll), nranks,
                                                                   "memcpy", rows, plan.nsteps) != 0);
        free(rows);
    }
    munmap(shared, shared_size);
    free(bytes);
    bench_plan_free(&plan);
    return status;
}
