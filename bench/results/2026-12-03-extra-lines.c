/*
 * What each cross-core line a small 2-rank AllReduce touches costs on this machine, without any
 * library (proposal 10 of the 2026-12-03 notes). Two processes pinned to CPUs 0 and 1 each do, per
 * call k: write 8 bytes and the call's number into their hot line (one line: flag and data, as
 * hostccl's steps of up to 48 bytes do), wait for the other's, add the other's 8 bytes to their
 * own. EXTRA adds, one at a time, the other lines hostccl's blocking call touches:
 *   1  an announcement line: each rank writes k into its own before its hot line, and reads the
 *      other's after it (hostccl announces at launch and a reader checks the writer's);
 *   2  and a done line: each rank writes k into its own after the call, and reads the other's at
 *      the start of the next (hostccl's done/checked sequence numbers, read for slot reuse);
 *   3  and a diagnosis line each rank writes at the start and end of every call that the other
 *      never reads (hostccl's cur_seq/cur_sig: private unless something fails).
 * Prints the best of 5 runs of the average microseconds per call.
 *
 *   cc -O3 -march=native -o extra 2026-12-03-extra-lines.c && for e in 0 1 2 3; do EXTRA=$e ./extra; done
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Alignas(64) atomic_uint_fast64_t flag; /* the hot line: number and data */
    double data;
    _Alignas(64) atomic_uint_fast64_t ann;
    _Alignas(64) atomic_uint_fast64_t done;
    _Alignas(64) uint64_t diag[8];
} side_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void wait_for(atomic_uint_fast64_t *flag, uint64_t k)
{
    for (unsigned spin = 0; atomic_load_explicit(flag, memory_order_acquire) < k; spin++)
        if (spin % 4096 == 4095)
            sched_yield();
}

static volatile uint64_t sink;

static double call(side_t *s, int me, int extra, uint64_t k, double in)
{
    side_t *mine = &s[me], *other = &s[!me];

    if (extra >= 3) {
        mine->diag[0] = k;
        mine->diag[1] = (uint64_t)in;
    }
    if (extra >= 2)
        sink = atomic_load_explicit(&other->done, memory_order_acquire);
    if (extra >= 1)
        atomic_store_explicit(&mine->ann, k, memory_order_release);
    mine->data = in;
    atomic_store_explicit(&mine->flag, k, memory_order_release);
    if (extra >= 1)
        sink = atomic_load_explicit(&other->ann, memory_order_acquire);
    wait_for(&other->flag, k);
    double out = in + other->data;
    if (extra >= 2)
        atomic_store_explicit(&mine->done, k, memory_order_release);
    if (extra >= 3)
        mine->diag[0] = 0;
    return out;
}

int main(int argc, char **argv)
{
    uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000, k = 0;
    int extra = getenv("EXTRA") ? atoi(getenv("EXTRA")) : 0;
    side_t *s = mmap(NULL, 2 * sizeof(side_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double best = 1e9, out = 0;

    if (s == MAP_FAILED)
        return 2;
    pid_t child = fork();
    int me = child == 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof(set), &set);
    for (int run = 0; run < 5; run++) {
        double t0 = now_us();
        for (uint64_t i = 0; i < rounds; i++)
            out = call(s, me, extra, ++k, (double)(me + 1));
        double us = (now_us() - t0) / (double)rounds;
        best = us < best ? us : best;
    }
    if (out != 3.0) {
        printf("wrong result %f\n", out);
        return 1;
    }
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    printf("extra %d: %.3f us\n", extra, best);
    return 0;
}
