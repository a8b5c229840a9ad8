/*
 * A peer that only started an AllReduce at launch does not hold this rank's launch. Two ranks,
 * COUNT fp32 of plain memory, ROUNDS rounds: rank 0 enqueues the AllReduce, which publishes its
 * first step at launch, and stops itself (SIGSTOP: none of its threads runs, its stream's worker
 * neither); rank 1 then enqueues the same AllReduce, which must return while rank 0 is stopped,
 * continues rank 0 (SIGCONT), and both synchronise and check every value. A first step published
 * at launch says nothing of the rest: for an op with later steps or a closing one (CMA; the slots
 * past one step) rank 1's launch would wait for rank 0's synchronisation, which a program that
 * computes after enqueueing reaches only after its compute (here: never, until the exec timeout).
 * Run with HOSTCCL_PROGRESS=caller, so that rank 0's worker does not run the op at enqueue; if it
 * ran it anyway before the stop (its backstop poll, after a preemption of a millisecond or more),
 * rank 0 counts as running it and rank 1 would rightly wait for it: rank 1 reads that in rank 0's
 * control block and continues rank 0 first (such a round checks the data only). Links the internal
 * library for that one read.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#include "hc_time.h"
#include "test_shm.h"

#define ROUNDS 5

static float value(uint32_t rank, int round, uint64_t i)
{
    return (float)(rank + 1) * 0.5f + (float)((i + (uint64_t)round) % 29) * 0.25f;
}

/* Until process `pid` is stopped (its state in /proc is T), bounded: rank 0 stops itself next. */
static void wait_stopped(pid_t pid)
{
    char path[64], line[512];
    int64_t deadline = hc_now_ns() + 30 * HC_NS_PER_S;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    for (;;) {
        FILE *f = fopen(path, "r");
        const char *end = NULL;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 100000};
        if (f != NULL) {
            if (fgets(line, sizeof(line), f) != NULL)
                end = strrchr(line, ')'); /* the state follows the command name, which may hold ')' */
            fclose(f);
        }
        if (end != NULL && end[1] == ' ' && end[2] == 'T')
            return;
        T_CHECK(hc_now_ns() < deadline);
        nanosleep(&pause, NULL); /* nothing to wait on for another process's stop */
    }
}

int main(int argc, char **argv)
{
    t_shm_world_t w;
    static int64_t pids[2];
    int64_t mine = (int64_t)getpid();
    uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
    float *send, *recv;
    int exercised = 0;

    T_CHECK(count > 0 && count <= (1u << 24));
    t_shm_world_init(&w, 2, "progress_stopped");
    T_CHECK((send = malloc(count * sizeof(float))) != NULL && (recv = malloc(count * sizeof(float))) != NULL);
    T_CHECK(HcclAllGather(&mine, pids, 1, HCCL_DATA_TYPE_INT64, w.comm, w.stream) == HCCL_SUCCESS);
    T_CHECK(aclrtSynchronizeStream(w.stream) == ACL_SUCCESS);
    for (int round = 0; round < ROUNDS; round++) {
        for (uint64_t i = 0; i < count; i++)
            send[i] = value(w.launch.rank, round, i);
        if (w.launch.rank == 0) {
            T_CHECK(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w.comm, w.stream) ==
                    HCCL_SUCCESS);
            raise(SIGSTOP); /* until rank 1's launch has returned */
        } else {
            int running;
            wait_stopped((pid_t)pids[0]);
            running = __atomic_load_n(&hc_shm_ctrl(w.eng, 0)->cur_seq, __ATOMIC_RELAXED) != 0;
            if (running)
                T_CHECK(kill((pid_t)pids[0], SIGCONT) == 0);
            T_CHECK(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, w.comm, w.stream) ==
                    HCCL_SUCCESS);
            if (!running)
                T_CHECK(kill((pid_t)pids[0], SIGCONT) == 0);
            exercised += !running;
        }
        T_CHECK(aclrtSynchronizeStream(w.stream) == ACL_SUCCESS);
        for (uint64_t i = 0; i < count; i++)
            T_CHECK(recv[i] == value(0, round, i) + value(1, round, i));
    }
    if (w.launch.rank == 1) {
        printf("rank 1: %d of %d launches returned while rank 0 was stopped after starting the op\n", exercised,
               ROUNDS);
        T_CHECK(exercised > 0);
    }
    free(send);
    free(recv);
    t_shm_world_fini(&w);
    return 0;
}
