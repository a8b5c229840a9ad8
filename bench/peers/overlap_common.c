/* The measurements of the overlap drivers (overlap_common.h says what each one is). */
#define _POSIX_C_SOURCE 200809L
#include "overlap_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES 32
#define MAX_ROUNDS 64

static volatile double compute_sink;
static double iters_per_us;

double overlap_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A dependent chain of multiply-adds: neither vectorised nor shortened by the compiler. */
static void compute_iters(uint64_t n)
{
    double x = compute_sink;

    for (uint64_t i = 0; i < n; i++)
        x = x * 0.9999999 + 1e-7;
    compute_sink = x;
}

static void compute_us(double us)
{
    compute_iters((uint64_t)(us * iters_per_us));
}

/* Iterations per microsecond on this core when nothing else runs on it: the best of 20 tries. */
static void calibrate(void)
{
    const uint64_t n = 200000;
    double best = 0;

    compute_sink = 1.0;
    for (int i = 0; i < 20; i++) {
        double t0 = overlap_now_us(), us;
        compute_iters(n);
        us = overlap_now_us() - t0;
        if (us > 0 && (double)n / us > best)
            best = (double)n / us;
    }
    iters_per_us = best;
}

static void sleep_ms(double ms)
{
    struct timespec left = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6)};

    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        continue;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t parse_size(const char *text)
{
    char *end;
    uint64_t v = strtoull(text, &end, 10);

    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return v;
}

int overlap_parse(int argc, char **argv, overlap_opts_t *opts)
{
    static uint64_t sizes[MAX_SIZES];

    *opts = (overlap_opts_t){.sizes = sizes, .sleep_ms = 50, .compute_factor = 1.0, .compute_ranks = -1,
                             .phases = OVERLAP_PHASE_SLEEP | OVERLAP_PHASE_OVERLAP, .mem = "malloc"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opts->quick = 1;
        } else if (strcmp(a, "--sizes") == 0 && v != NULL) {
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t != NULL && opts->nsizes < MAX_SIZES;
                 t = strtok_r(NULL, ",", &save))
                sizes[opts->nsizes++] = parse_size(t);
            free(copy);
            i++;
        } else if (strcmp(a, "--sleep-ms") == 0 && v != NULL) {
            opts->sleep_ms = atof(v);
            i++;
        } else if (strcmp(a, "--compute-factor") == 0 && v != NULL) {
            opts->compute_factor = atof(v);
            i++;
        } else if (strcmp(a, "--compute-ranks") == 0 && v != NULL) {
            opts->compute_ranks = atoi(v);
            i++;
        } else if (strcmp(a, "--phases") == 0 && v != NULL) {
            opts->phases = (strstr(v, "sleep") ? OVERLAP_PHASE_SLEEP : 0) | (strstr(v, "overlap") ? OVERLAP_PHASE_OVERLAP : 0);
            i++;
        } else if (strcmp(a, "--mem") == 0 && v != NULL) {
            opts->mem = v;
            i++;
        } else if (strcmp(a, "--loop") == 0 || strcmp(a, "--size") == 0) {
            i++; /* the loop mode's own options (the drivers read them) */
        } else {
            fprintf(stderr, "usage: %s [--sizes 8,64K,4M] [--quick] [--sleep-ms MS] [--compute-factor F] "
                            "[--compute-ranks R] [--phases sleep,overlap] [--mem malloc|acl] | --loop ITERS --size B\n",
                    argv[0]);
            return -1;
        }
    }
    if (opts->nsizes == 0) {
        sizes[0] = 8;
        sizes[1] = 64 << 10;
        sizes[2] = 4 << 20;
        opts->nsizes = 3;
    }
    return 0;
}

static int fail(const overlap_impl_t *impl, const char *what)
{
    fprintf(stderr, "overlap %s: rank %d: %s failed\n", "driver", impl->rank, what);
    return -1;
}

/* Average us per blocking op over batches of `iters`: the best batch. */
static int measure_bare(const overlap_impl_t *impl, uint64_t bytes, int iters, double *bare_p)
{
    double best = 0;

    for (int b = 0; b < 3; b++) {
        double t0, us;
        if (impl->barrier(impl->ctx) != 0)
            return fail(impl, "barrier");
        t0 = overlap_now_us();
        for (int i = 0; i < iters; i++)
            if (impl->blocking(impl->ctx, bytes) != 0)
                return fail(impl, "blocking op");
        us = (overlap_now_us() - t0) / iters;
        best = b == 0 || us < best ? us : best;
    }
    *bare_p = best;
    return impl->max_all(impl->ctx, bare_p, 1);
}

/* One round of the sleep test; *wait_p: this rank's wait (0 on rank 0). */
static int sleep_round(const overlap_impl_t *impl, uint64_t bytes, double ms, double *wait_p)
{
    double t[2] = {0, 0}, done;

    if (impl->barrier(impl->ctx) != 0)
        return fail(impl, "barrier");
    t[impl->rank == 0 ? 0 : 1] = overlap_now_us();
    if (impl->start(impl->ctx, bytes) != 0)
        return fail(impl, "enqueue");
    if (impl->rank == 0)
        sleep_ms(ms);
    if (impl->wait(impl->ctx) != 0)
        return fail(impl, "synchronise");
    done = overlap_now_us();
    /* Every rank's enqueue time, to count the wait from the later enqueue. */
    if (impl->max_all(impl->ctx, t, 2) != 0)
        return -1;
    *wait_p = impl->rank == 0 ? 0 : done - (t[0] > t[1] ? t[0] : t[1]);
    return 0;
}

/* The sleep test's rounds: *wait_p their median, *first_p the first's, which follows the bare op's
 * loop of blocking calls (a stream still in the synchronous pattern). */
static int measure_sleep(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes, double *wait_p,
                         double *first_p)
{
    int rounds = opts->quick ? 3 : 5;
    double waits[MAX_ROUNDS], both[2];

    for (int r = 0; r < rounds; r++)
        if (sleep_round(impl, bytes, opts->sleep_ms, &waits[r]) != 0)
            return -1;
    both[1] = waits[0]; /* before the median, which sorts them */
    both[0] = median(waits, rounds);
    if (impl->max_all(impl->ctx, both, 2) != 0)
        return -1;
    *wait_p = both[0];
    *first_p = both[1];
    return 0;
}

/* One op after a barrier, timed as the sleep test's wait is (from the later rank's start to each
 * rank's end; the slowest rank), median of the rounds. With `idle_ms` > 0 every rank is idle that
 * long first (its caches, its core's clock and its place in the scheduler go cold): the op as the
 * sleep test's peer meets it, since a rank that slept cannot do the op faster than this, whoever
 * progresses it ("cold"). With 0 it is the single op in a warm loop ("single"): what separates a
 * lone op from the bare op's average over a loop of them. */
static int measure_single(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes, double idle_ms,
                          double *out_p)
{
    int rounds = opts->quick ? 3 : 5;
    double times[MAX_ROUNDS];

    for (int r = 0; r < rounds; r++) {
        double t[2] = {0, 0}, done;
        if (idle_ms > 0)
            sleep_ms(idle_ms);
        if (impl->barrier(impl->ctx) != 0)
            return fail(impl, "barrier");
        t[impl->rank == 0 ? 0 : 1] = overlap_now_us();
        if (impl->blocking(impl->ctx, bytes) != 0)
            return fail(impl, "blocking op");
        done = overlap_now_us();
        if (impl->max_all(impl->ctx, t, 2) != 0)
            return -1;
        times[r] = done - (t[0] > t[1] ? t[0] : t[1]);
        if (impl->max_all(impl->ctx, &times[r], 1) != 0)
            return -1;
    }
    *out_p = median(times, rounds);
    return 0;
}

/* One round of seq (ovl = 0) or ovl; *us_p: this rank's time. */
static int overlap_round(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes, int ovl, double c_us,
                         double *us_p)
{
    int computes = opts->compute_ranks < 0 || opts->compute_ranks == impl->rank;
    double t0;

    if (impl->barrier(impl->ctx) != 0)
        return fail(impl, "barrier");
    t0 = overlap_now_us();
    if (ovl) {
        if (impl->start(impl->ctx, bytes) != 0)
            return fail(impl, "enqueue");
        if (computes)
            compute_us(c_us);
        if (impl->wait(impl->ctx) != 0)
            return fail(impl, "synchronise");
    } else {
        if (impl->blocking(impl->ctx, bytes) != 0)
            return fail(impl, "blocking op");
        if (computes)
            compute_us(c_us);
    }
    *us_p = overlap_now_us() - t0;
    return 0;
}

/* Alternating blocks of seq and ovl rounds; medians of the timed rounds, slowest rank. Each block
 * begins with untimed rounds: after a block of blocking rounds, hostccl's stream notices the
 * compute between enqueue and synchronisation only in a timed epoch, one in 8 of the synchronous
 * pattern's, and changes pattern after two (docs/runtime.md): up to 10 rounds. With 4 untimed,
 * up to 6 of a block's 10 timed rounds could still run in the synchronous pattern, and the hidden
 * fraction at 1-4 MiB of one build jumped between 0.01 and 0.99 from run to run (2 ranks, 2 CPUs
 * each, 2026-12-04). */
static int measure_overlap(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes, double c_us,
                           double out[2])
{
    int blocks = opts->quick ? 2 : 3, untimed = 12, timed = opts->quick ? 6 : 10;
    double samples[2][MAX_ROUNDS];
    int n[2] = {0, 0};

    for (int b = 0; b < blocks; b++) {
        for (int ovl = 0; ovl < 2; ovl++) {
            for (int r = 0; r < untimed + timed; r++) {
                double us;
                if (overlap_round(impl, opts, bytes, ovl, c_us, &us) != 0)
                    return -1;
                if (r >= untimed && n[ovl] < MAX_ROUNDS)
                    samples[ovl][n[ovl]++] = us;
            }
        }
    }
    out[0] = median(samples[0], n[0]);
    out[1] = median(samples[1], n[1]);
    return impl->max_all(impl->ctx, out, 2);
}

/* The pipelined pattern (overlap_common.h): rounds of launch op r+1, compute, wait for op r. */
static int measure_pipe(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes, double c_us,
                        double *out)
{
    int computes = opts->compute_ranks < 0 || opts->compute_ranks == impl->rank;
    int untimed = 12, timed = opts->quick ? 12 : 30, rounds = untimed + timed;
    double samples[MAX_ROUNDS];
    int n = 0;

    if (impl->barrier(impl->ctx) != 0 || impl->start_slot(impl->ctx, bytes, 0) != 0)
        return fail(impl, "pipelined enqueue");
    for (int r = 0; r < rounds; r++) {
        double t0 = overlap_now_us();
        if (impl->start_slot(impl->ctx, bytes, (r + 1) % 2) != 0)
            return fail(impl, "pipelined enqueue");
        if (computes)
            compute_us(c_us);
        if (impl->wait_slot(impl->ctx, r % 2) != 0)
            return fail(impl, "pipelined wait");
        if (r >= untimed && n < MAX_ROUNDS)
            samples[n++] = overlap_now_us() - t0;
    }
    if (impl->wait_slot(impl->ctx, rounds % 2) != 0)
        return fail(impl, "pipelined wait");
    *out = median(samples, n);
    return impl->max_all(impl->ctx, out, 1);
}

/* What compute(c_us) really takes here (the calibration was on an idle core). */
static double measure_compute(double c_us)
{
    double v[7];

    for (int i = 0; i < 7; i++) {
        double t0 = overlap_now_us();
        compute_us(c_us);
        v[i] = overlap_now_us() - t0;
    }
    return median(v, 7);
}

static int bare_iters(uint64_t bytes, int quick)
{
    int iters = bytes <= 4096 ? 2000 : bytes <= (256u << 10) ? 200 : 20;

    return quick ? (iters + 3) / 4 : iters;
}

static int run_size(const overlap_impl_t *impl, const overlap_opts_t *opts, uint64_t bytes)
{
    double bare, wait = -1, first = -1, cold = -1, single = -1, c_us, c_real = -1, so[2] = {-1, -1}, hidden = 0;
    double pipe = -1;

    for (int i = 0; i < 10; i++) /* warm-up: pages, placement */
        if (impl->blocking(impl->ctx, bytes) != 0)
            return fail(impl, "warm-up op");
    if (measure_bare(impl, bytes, bare_iters(bytes, opts->quick), &bare) != 0)
        return -1;
    c_us = opts->compute_factor * bare;
    if ((opts->phases & OVERLAP_PHASE_SLEEP) && impl->nranks > 1 &&
        (measure_sleep(impl, opts, bytes, &wait, &first) != 0 ||
         measure_single(impl, opts, bytes, opts->sleep_ms, &cold) != 0 ||
         measure_single(impl, opts, bytes, 0, &single) != 0))
        return -1;
    if (opts->phases & OVERLAP_PHASE_OVERLAP) {
        c_real = measure_compute(c_us);
        if (impl->max_all(impl->ctx, &c_real, 1) != 0 || measure_overlap(impl, opts, bytes, c_us, so) != 0 ||
            measure_pipe(impl, opts, bytes, c_us, &pipe) != 0)
            return -1;
        hidden = (so[0] - so[1]) / (bare < c_real ? bare : c_real);
    }
    if (impl->rank == 0) {
        char w[32] = "null", f[32] = "null", k[32] = "null", g[32] = "null", c[32] = "null", q[32] = "null",
             o[32] = "null", h[32] = "null", pu[32] = "null", ph[32] = "null";
        if (wait >= 0) {
            snprintf(w, sizeof(w), "%.3f", wait);
            snprintf(f, sizeof(f), "%.3f", first);
            snprintf(k, sizeof(k), "%.3f", cold);
            snprintf(g, sizeof(g), "%.3f", single);
        }
        if (opts->phases & OVERLAP_PHASE_OVERLAP) {
            snprintf(c, sizeof(c), "%.3f", c_real);
            snprintf(q, sizeof(q), "%.3f", so[0]);
            snprintf(o, sizeof(o), "%.3f", so[1]);
            snprintf(h, sizeof(h), "%.4f", hidden);
            snprintf(pu, sizeof(pu), "%.3f", pipe);
            snprintf(ph, sizeof(ph), "%.4f", (so[0] - pipe) / (bare < c_real ? bare : c_real));
        }
        printf("OVERLAP {\"impl\": \"%s\", \"mem\": \"%s\", \"ranks\": %d, \"bytes\": %llu, \"bare_us\": %.3f, "
               "\"sleep_ms\": %.1f, \"sleep_wait_us\": %s, \"first_wait_us\": %s, \"cold_us\": %s, "
               "\"single_us\": %s, \"compute_us\": %s, \"seq_us\": %s, \"ovl_us\": %s, \"hidden\": %s, "
               "\"pipe_us\": %s, \"pipe_hidden\": %s, \"compute_ranks\": %d}\n",
               opts->impl_name, opts->mem, impl->nranks, (unsigned long long)bytes, bare, opts->sleep_ms, w, f, k, g,
               c, q, o, h, pu, ph, opts->compute_ranks);
    }
    fflush(stdout);
    return 0;
}

int overlap_run(const overlap_impl_t *impl, const overlap_opts_t *opts)
{
    calibrate();
    for (int i = 0; i < opts->nsizes; i++)
        if (run_size(impl, opts, opts->sizes[i]) != 0)
            return -1;
    return 0;
}

int overlap_loop(const overlap_impl_t *impl, uint64_t bytes, long iters)
{
    double t0, us;

    for (int i = 0; i < 100; i++)
        if (impl->blocking(impl->ctx, bytes) != 0)
            return fail(impl, "warm-up op");
    if (impl->barrier(impl->ctx) != 0)
        return fail(impl, "barrier");
    t0 = overlap_now_us();
    for (long i = 0; i < iters; i++)
        if (impl->blocking(impl->ctx, bytes) != 0)
            return fail(impl, "blocking op");
    us = (overlap_now_us() - t0) / (double)iters;
    if (impl->max_all(impl->ctx, &us, 1) != 0)
        return -1;
    if (impl->rank == 0)
        printf("LOOP %.4f\n", us);
    return 0;
}
