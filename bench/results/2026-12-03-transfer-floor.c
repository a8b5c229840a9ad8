/*
 * The floor of a 2-rank small collective's data movement on this machine, without any library:
 * two processes (pinned to CPUs 0 and 1) each copy their input into a slot of their own (two slots
 * by call parity), publish a counter on their own cache line, wait for the other's, and then either
 * reduce the other's slot with their input into an output (AllReduce, mode "ar") or copy it out
 * (AllGather's exchange of one block, mode "ag"). Variants of the staging copy: plain memcpy (0),
 * non-temporal stores (1), memcpy then CLDEMOTE of every line (2), MOVDIR64B (3); and "ll": no
 * separate counter, every 64-byte line carries 56 bytes of data and the call's number (the reader
 * polls each line). Prints the best of 5 runs of the average microseconds per call.
 *
 *   cc -O3 -march=native -mcldemote -mmovdir64b -o floor floor.c
 *   ./floor ar|ag|ll BYTES [ROUNDS]        (STAGE=0..3 picks the staging copy)
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXB 65536
typedef struct {
    _Alignas(64) atomic_uint_fast64_t flag;
    _Alignas(64) float data[2][MAXB / 4];
    _Alignas(64) uint64_t ll[2][MAXB / 56 * 8 + 8];
} side_t;

static int stage_kind;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void stage(float *dst, const float *src, size_t n)
{
    switch (stage_kind) {
    case 1:
        for (size_t i = 0; i < n; i += 16)
            _mm512_stream_si512((void *)(dst + i), _mm512_load_si512(src + i));
        _mm_sfence();
        break;
    case 2:
        memcpy(dst, src, n * 4);
        for (size_t i = 0; i < n; i += 16)
            _cldemote(dst + i);
        break;
    case 3:
        for (size_t i = 0; i < n; i += 16)
            _movdir64b(dst + i, src + i);
        _mm_sfence();
        break;
    default:
        memcpy(dst, src, n * 4);
    }
}

static void wait_for(atomic_uint_fast64_t *flag, uint64_t k)
{
    for (unsigned spin = 0; atomic_load_explicit(flag, memory_order_acquire) < k; spin++)
        if (spin % 4096 == 4095)
            sched_yield();
}

static void flag_call(side_t *s, int me, int reduce, uint64_t k, const float *in, float *out, size_t n)
{
    stage(s[me].data[k & 1], in, n);
    atomic_store_explicit(&s[me].flag, k, memory_order_release);
    wait_for(&s[!me].flag, k);
    const float *p = s[!me].data[k & 1];
    if (reduce)
        for (size_t i = 0; i < n; i++)
            out[i] = in[i] + p[i];
    else
        memcpy(out, p, n * 4);
}

static void ll_call(side_t *s, int me, uint64_t k, const float *in, float *out, size_t n)
{
    size_t lines = (n + 13) / 14;
    uint64_t *w = s[me].ll[k & 1];
    const uint64_t *r = s[!me].ll[k & 1];

    for (size_t l = 0; l < lines; l++) {
        size_t c = n - l * 14 < 14 ? n - l * 14 : 14;
        memcpy(&w[l * 8], in + l * 14, c * 4);
        atomic_store_explicit((_Atomic uint64_t *)&w[l * 8 + 7], k, memory_order_release);
    }
    for (size_t l = 0; l < lines; l++) {
        size_t c = n - l * 14 < 14 ? n - l * 14 : 14;
        for (unsigned spin = 0; atomic_load_explicit((_Atomic uint64_t *)&r[l * 8 + 7], memory_order_acquire) != k;
             spin++)
            if (spin % 4096 == 4095)
                sched_yield();
        const float *p = (const float *)&r[l * 8];
        for (size_t i = 0; i < c; i++)
            out[l * 14 + i] = in[l * 14 + i] + p[i];
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int mode = argv[1][1] == 'r' ? 0 : argv[1][1] == 'g' ? 1 : 2; /* ar, ag, ll */
    size_t bytes = strtoull(argv[2], NULL, 10), n = bytes / 4;
    uint64_t rounds = argc > 3 ? strtoull(argv[3], NULL, 10) : 100000, k = 0;
    side_t *s = mmap(NULL, 2 * sizeof(side_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double best = 1e9;

    if (s == MAP_FAILED || bytes == 0 || bytes > MAXB || (bytes % 64 != 0 && mode != 2)) {
        fprintf(stderr, "usage: floor ar|ag|ll BYTES (a multiple of 64, at most %d) [ROUNDS]\n", MAXB);
        return 2;
    }
    stage_kind = getenv("STAGE") ? atoi(getenv("STAGE")) : 0;
    pid_t child = fork();
    int me = child == 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof(set), &set);
    float *in = aligned_alloc(64, MAXB), *out = aligned_alloc(64, MAXB);
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(i + me);
    for (int run = 0; run < 5; run++) {
        double t0 = now_us();
        for (uint64_t i = 0; i < rounds; i++) {
            k++;
            if (mode == 2)
                ll_call(s, me, k, in, out, n);
            else
                flag_call(s, me, mode == 0, k, in, out, n);
        }
        double us = (now_us() - t0) / (double)rounds;
        best = us < best ? us : best;
    }
    for (size_t i = 0; i < n; i++)
        if (out[i] != (mode == 1 ? (float)(i + !me) : (float)(2 * i + 1))) {
            printf("wrong result at %zu\n", i);
            return 1;
        }
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    printf("%s %zu B (staging %d): %.3f us\n", argv[1], bytes, stage_kind, best);
    return 0;
}
