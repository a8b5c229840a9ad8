/*
 * A pair's point-to-point traffic wakes only the pair (the doorbell is per rank). Four ranks of one
 * communicator: ranks 2 and 3 wait in receives (2 from 3, 3 from 0) and are asleep in their
 * progress loops before ranks 0 and 1 start; then 0 and 1 exchange EXCHANGES messages, checking
 * every value, and 0 finally sends to 3, which sends to 2. Rank 2's doorbell may be rung only by
 * rank 3 (its message), a few times at most: with one doorbell for the whole segment every chunk,
 * posted receive and consumed chunk of the pair rang it (and woke rank 2, which cost the pair a
 * system call per message and the sleepers a CPU each time). Then the other half: rank 3 sends
 * WAKES more messages to rank 2, each once rank 2 sleeps in its receive, and rank 2's doorbell must
 * ring for most of them (a sleeper that were not rung would still get its message, at the end of
 * its bounded sleep). Links the internal library: the counts are in the engine's control blocks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#include "hc_time.h"
#include "test_shm.h"

#define COUNT 64u
#define EXCHANGES 2000
#define RINGS_MAX 4u /* rank 3's chunk, and a wake-up of a failure path at most */
#define WAKES 20      /* messages 3 -> 2 sent to a sleeping receiver */
#define WAKES_MIN 10  /* rung for at least these (a sleeper between two bounded sleeps is not counted in) */

static float value(uint32_t rank, int i, uint32_t k)
{
    return (float)rank * 1000.0f + (float)i * 0.25f + (float)k * 0.001f;
}

/* Until local rank `index` sleeps in a progress loop (bounded: it is about to). */
static void wait_asleep(hc_shm_engine_t *eng, uint32_t index)
{
    int64_t deadline = hc_now_ns() + 60 * HC_NS_PER_S;

    while (atomic_load(&hc_shm_ctrl(eng, index)->bell_waiters) == 0) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 100000};
        T_CHECK(hc_now_ns() < deadline);
        nanosleep(&pause, NULL); /* nothing to wait on: the count is all there is */
    }
}

static void exchange_loop(HcclComm comm, aclrtStream stream, uint32_t rank)
{
    uint32_t peer = rank ^ 1u;
    float send[COUNT], recv[COUNT];

    for (int i = 0; i < EXCHANGES; i++) {
        for (uint32_t k = 0; k < COUNT; k++)
            send[k] = value(rank, i, k);
        T_CHECK(HcclGroupStart() == HCCL_SUCCESS);
        T_CHECK(HcclSend(send, COUNT, HCCL_DATA_TYPE_FP32, peer, comm, stream) == HCCL_SUCCESS);
        T_CHECK(HcclRecv(recv, COUNT, HCCL_DATA_TYPE_FP32, peer, comm, stream) == HCCL_SUCCESS);
        T_CHECK(HcclGroupEnd() == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        for (uint32_t k = 0; k < COUNT; k++)
            T_CHECK(recv[k] == value(peer, i, k));
    }
}

/* Rank 3: WAKES messages to rank 2, each sent once rank 2 sleeps in its receive; its doorbell must
 * have rung for most of them. */
static void send_to_sleeper(hc_shm_engine_t *eng, HcclComm comm, aclrtStream stream)
{
    atomic_uint *bell = &hc_shm_ctrl(eng, 2)->bell;
    float msg[COUNT];
    int rung = 0;

    for (int i = 0; i < WAKES; i++) {
        unsigned before;
        for (uint32_t k = 0; k < COUNT; k++)
            msg[k] = value(3, i, k);
        wait_asleep(eng, 2);
        before = atomic_load(bell);
        T_CHECK(HcclSend(msg, COUNT, HCCL_DATA_TYPE_FP32, 2, comm, stream) == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        rung += atomic_load(bell) != before;
    }
    printf("rank 3: rank 2's doorbell rang for %d of %d messages sent while it slept\n", rung, WAKES);
    T_CHECK(rung >= WAKES_MIN);
}

int main(void)
{
    t_shm_world_t w;
    HcclComm comm;
    aclrtStream stream;
    hc_shm_engine_t *eng;
    float msg[COUNT];

    t_shm_world_init(&w, 4, "p2p_bells");
    comm = w.comm;
    stream = w.stream;
    eng = w.eng;
    switch (w.launch.rank) {
    case 0:
        wait_asleep(eng, 2);
        wait_asleep(eng, 3);
        exchange_loop(comm, stream, 0);
        for (uint32_t k = 0; k < COUNT; k++)
            msg[k] = value(0, -1, k);
        T_CHECK(HcclSend(msg, COUNT, HCCL_DATA_TYPE_FP32, 3, comm, stream) == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        break;
    case 1:
        exchange_loop(comm, stream, 1);
        break;
    case 3:
        T_CHECK(HcclRecv(msg, COUNT, HCCL_DATA_TYPE_FP32, 0, comm, stream) == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        for (uint32_t k = 0; k < COUNT; k++)
            T_CHECK(msg[k] == value(0, -1, k));
        for (uint32_t k = 0; k < COUNT; k++)
            msg[k] = value(3, -1, k);
        T_CHECK(HcclSend(msg, COUNT, HCCL_DATA_TYPE_FP32, 2, comm, stream) == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        send_to_sleeper(eng, comm, stream);
        break;
    case 2: {
        unsigned rings;
        T_CHECK(HcclRecv(msg, COUNT, HCCL_DATA_TYPE_FP32, 3, comm, stream) == HCCL_SUCCESS);
        T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        for (uint32_t k = 0; k < COUNT; k++)
            T_CHECK(msg[k] == value(3, -1, k));
        rings = atomic_load(&hc_shm_ctrl(eng, 2)->bell);
        printf("rank 2: its doorbell rang %u times while ranks 0 and 1 exchanged %d messages\n", rings, EXCHANGES);
        T_CHECK(rings <= RINGS_MAX);
        for (int i = 0; i < WAKES; i++) {
            T_CHECK(HcclRecv(msg, COUNT, HCCL_DATA_TYPE_FP32, 3, comm, stream) == HCCL_SUCCESS);
            T_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
            for (uint32_t k = 0; k < COUNT; k++)
                T_CHECK(msg[k] == value(3, i, k));
        }
        break;
    }
    default:
        break;
    }
    t_shm_world_fini(&w);
    return 0;
}
