/* The latency floor of any 2-rank collective on this machine: two processes that each publish a
 * counter on their own cache line and wait for the other's, round after round (what a one-shot
 * small AllReduce does at the very least: one line from each rank to the other). Prints the best
 * of 5 runs of the average microseconds per round. No MPI, no hostccl.
 *
 *   line_exchange [ROUNDS]
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
    _Alignas(64) atomic_uint_fast64_t count;
    char pad[56];
} line_t;

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* One run: both sides go round `rounds` times from `base`; a waiter that spins long yields, so the
 * floor is measured, not a scheduler collapse, when the machine is busy. */
static void exchange(line_t *lines, int me, uint64_t base, uint64_t rounds)
{
    for (uint64_t i = base + 1; i <= base + rounds; i++) {
        atomic_store_explicit(&lines[me].count, i, memory_order_release);
        for (unsigned spin = 0; atomic_load_explicit(&lines[!me].count, memory_order_acquire) < i; spin++)
            if (spin % 4096 == 4095)
                sched_yield();
    }
}

int main(int argc, char **argv)
{
    uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    line_t *lines = mmap(NULL, 2 * sizeof(line_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double best = 0;
    pid_t child;
    int status;

    if (lines == MAP_FAILED || rounds == 0) {
        fprintf(stderr, "usage: line_exchange [ROUNDS > 0]\n");
        return 2;
    }
    child = fork();
    if (child < 0)
        return 1;
    for (int run = 0; run < 5; run++) {
        double t0 = now_us(), us;
        exchange(lines, child == 0, (uint64_t)run * rounds, rounds);
        us = (now_us() - t0) / (double)rounds;
        best = run == 0 || us < best ? us : best;
    }
    if (child == 0)
        _exit(0);
    waitpid(child, &status, 0);
    printf("%.3f\n", best);
    return 0;
}
