/*
 * A communicator that several threads issue on (src/core/hc_issue.h): the first thread to issue
 * owns the issue lock and numbers its ops without the mutex until another thread issues; from
 * then on both take it. Every rank, in the same order:
 *
 *   1. the main thread issues ROUNDS rounds (it becomes the owner);
 *   2. a second thread, with a stream of its own, issues ROUNDS rounds (it takes the lock over);
 *   3. the main thread again (now through the mutex);
 *   4. both threads in turn, one round each, handing a token back and forth.
 *
 * A round is a small AllReduce (inline), a small Broadcast (the eager ring, root changing), an
 * AllReduce of 4099 floats (the slots) and a small Scatter, each synchronised and checked on
 * every rank with inexact values.
 *
 * usage: issue_threads [ROUNDS]   (under hccl-run, 2 or more ranks)
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define BIG 4099
#define SMALL 6

typedef struct {
    HcclComm comm;
    uint32_t me, n;
    int32_t device;
    int rounds;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int turn;   /* phase 4: whose round it is (0 main, 1 second) */
    int failed; /* any thread's check failed */
} shared_t;

static float value(uint32_t rank, int round, size_t i)
{
    return (float)(sin((double)(rank * 7919u + (uint32_t)round * 104729u + i)) * 345.678 + 0.1);
}

static int expect_close(const float *got, const float *want, size_t n, const char *what, uint32_t me, int round)
{
    for (size_t i = 0; i < n; i++) {
        if (fabsf(got[i] - want[i]) > 1e-4f * (fabsf(want[i]) + 1.0f)) {
            fprintf(stderr, "rank %u round %d: %s[%zu] = %g, expected %g\n", me, round, what, i, (double)got[i],
                    (double)want[i]);
            return 1;
        }
    }
    return 0;
}

/* One round on `stream`; `round` numbers the values, so that every rank checks the same round. */
static int one_round(const shared_t *s, aclrtStream stream, int round)
{
    float big[BIG], big_want[BIG], small[SMALL], small_want[SMALL], scat[SMALL * 8], part[SMALL];
    uint32_t root = (uint32_t)round % s->n;
    int failed = 0;

    for (size_t i = 0; i < BIG; i++) {
        big[i] = value(s->me, round, i);
        big_want[i] = 0;
        for (uint32_t r = 0; r < s->n; r++)
            big_want[i] += value(r, round, i);
    }
    for (size_t i = 0; i < SMALL; i++) {
        small[i] = value(s->me, round + 1, i);
        small_want[i] = 0;
        for (uint32_t r = 0; r < s->n; r++)
            small_want[i] += value(r, round + 1, i);
    }
    T_CHECK_HCCL(HcclAllReduce(small, small, SMALL, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, s->comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    failed |= expect_close(small, small_want, SMALL, "small allreduce", s->me, round);

    for (size_t i = 0; i < SMALL; i++)
        small[i] = s->me == root ? value(root, round + 2, i) : -1.0f;
    T_CHECK_HCCL(HcclBroadcast(small, SMALL, HCCL_DATA_TYPE_FP32, root, s->comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    for (size_t i = 0; i < SMALL; i++)
        small_want[i] = value(root, round + 2, i);
    failed |= expect_close(small, small_want, SMALL, "broadcast", s->me, round);

    T_CHECK_HCCL(HcclAllReduce(big, big, BIG, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, s->comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    failed |= expect_close(big, big_want, BIG, "allreduce", s->me, round);

    for (size_t i = 0; i < SMALL * s->n; i++)
        scat[i] = value(root, round + 3, i);
    T_CHECK_HCCL(HcclScatter(scat, part, SMALL, HCCL_DATA_TYPE_FP32, root, s->comm, stream));
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    failed |= expect_close(part, scat + SMALL * s->me, SMALL, "scatter", s->me, round);
    return failed;
}

static void run_rounds(shared_t *s, aclrtStream stream, int first)
{
    for (int round = first; round < first + s->rounds && !s->failed; round++)
        if (one_round(s, stream, round))
            s->failed = 1;
}

/* Phase 4: rounds base, base + 2, ... for thread `who` (0 or 1), in turn with the other. */
static void take_turns(shared_t *s, aclrtStream stream, int who, int base)
{
    for (int k = who; k < 2 * s->rounds; k += 2) {
        pthread_mutex_lock(&s->lock);
        while (s->turn != who)
            pthread_cond_wait(&s->cv, &s->lock);
        pthread_mutex_unlock(&s->lock);
        if (!s->failed && one_round(s, stream, base + k))
            s->failed = 1;
        pthread_mutex_lock(&s->lock);
        s->turn = 1 - who;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->lock);
    }
}

static shared_t shared;

static void *second_main(void *arg)
{
    aclrtStream stream;
    int phase = (int)(intptr_t)arg;

    T_CHECK_ACL(aclrtSetDevice(shared.device));
    T_CHECK_ACL(aclrtCreateStream(&stream));
    if (phase == 2)
        run_rounds(&shared, stream, shared.rounds);
    else
        take_turns(&shared, stream, 1, 3 * shared.rounds);
    T_CHECK_ACL(aclrtDestroyStream(stream));
    return NULL;
}

static void run_second(int phase, int with_main_turns, aclrtStream main_stream)
{
    pthread_t t;

    if (pthread_create(&t, NULL, second_main, (void *)(intptr_t)phase) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
    if (with_main_turns)
        take_turns(&shared, main_stream, 0, 3 * shared.rounds);
    pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    t_world_t world;

    T_CHECK_ACL(aclInit(NULL));
    t_world_init(&world);
    shared = (shared_t){.comm = world.comm, .me = world.launch.rank, .n = world.launch.size,
                        .device = (int32_t)world.launch.localRank,
                        .rounds = argc > 1 ? atoi(argv[1]) : 30};
    if (shared.n > 8) {
        fprintf(stderr, "issue_threads: at most 8 ranks\n");
        return 2;
    }
    pthread_mutex_init(&shared.lock, NULL);
    pthread_cond_init(&shared.cv, NULL);
    run_rounds(&shared, world.stream, 0);                   /* 1: the main thread owns the lock */
    run_second(2, 0, world.stream);                         /* 2: another thread takes it over */
    run_rounds(&shared, world.stream, 2 * shared.rounds);   /* 3: the main thread, locking */
    run_second(4, 1, world.stream);                         /* 4: both, in turn */
    t_world_fini(&world);
    T_CHECK_ACL(aclFinalize());
    if (!shared.failed)
        printf("rank %u: %d rounds from two threads on one communicator correct\n", shared.me, 5 * shared.rounds);
    return shared.failed;
}
