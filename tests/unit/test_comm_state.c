/*
 * hccl_comm.h state and memory calls on real communicators: two ranks as threads of this process
 * (HcclCommInitAll), ops issued from this thread on each rank's stream.
 *
 * - suspend is a quiesce: it returns once the ops issued before it have finished (their results are
 *   in the buffers, nobody having synchronised), refuses new ones, and resume continues;
 * - state callbacks see destroy and resume, in order, with the handle;
 * - memory ranges over reserved virtual memory and symmetric windows, and collectives on mapped
 *   physical memory give the right bytes;
 * - the profiler's trace describes each HCCL operation (bytes, root, communicator, result).
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include <acl/acl_prof.h>
#include <hccl/hccl.h>

#include "../common/trace_file.h"
#include <time.h>

#include "rt_ext.h"

#define N 2
#define COUNT 1024

static HcclComm comms[N];
static aclrtStream streams[N];

static int setup(void **state)
{
    int32_t devices[N] = {0, 1};

    (void)state;
    assert_int_equal(HcclCommInitAll(N, devices, comms), HCCL_SUCCESS);
    for (int r = 0; r < N; r++) {
        assert_int_equal(aclrtSetDevice(r), ACL_SUCCESS);
        assert_int_equal(aclrtCreateStream(&streams[r]), ACL_SUCCESS);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int r = 0; r < N; r++) {
        if (comms[r] != NULL)
            assert_int_equal(HcclCommDestroy(comms[r]), HCCL_SUCCESS);
        assert_int_equal(aclrtDestroyStream(streams[r]), ACL_SUCCESS);
    }
    return 0;
}

/* Rank r's input is r+1 everywhere; the sum over N ranks is N(N+1)/2. */
static void fill(float *buf, int r)
{
    for (int i = 0; i < COUNT; i++)
        buf[i] = (float)(r + 1);
}

static void expect_sum(const float *buf)
{
    for (int i = 0; i < COUNT; i++)
        assert_true(buf[i] == (float)(N * (N + 1) / 2));
}

static void allreduce_all(float *send[N], float *recv[N])
{
    for (int r = 0; r < N; r++)
        assert_int_equal(HcclAllReduce(send[r], recv[r], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comms[r],
                                       streams[r]), HCCL_SUCCESS);
    for (int r = 0; r < N; r++)
        assert_int_equal(aclrtSynchronizeStream(streams[r]), ACL_SUCCESS);
}

/* ---- suspend and resume ------------------------------------------------------------------------ */

typedef struct {
    HcclComm comm;
    HcclResult res;
} suspend_arg_t;

static void *suspend_thread(void *p)
{
    suspend_arg_t *arg = p;

    arg->res = HcclCommSuspend(arg->comm);
    return NULL;
}

static void test_suspend_quiesces_then_resume_continues(void **state)
{
    static float send[N][COUNT], recv[N][COUNT];
    char name[COMM_NAME_MAX_LENGTH];
    HcclCommStatus status = HCCL_COMM_STATUS_INVALID;
    suspend_arg_t arg = {.comm = comms[0]};
    pthread_t thread;

    (void)state;
    for (int r = 0; r < N; r++)
        fill(send[r], r);
    /* Rank 0's op is issued, then suspended: suspend must wait for it, and it needs rank 1's. */
    assert_int_equal(HcclAllReduce(send[0], recv[0], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comms[0],
                                   streams[0]), HCCL_SUCCESS);
    assert_int_equal(pthread_create(&thread, NULL, suspend_thread, &arg), 0);
    assert_int_equal(HcclAllReduce(send[1], recv[1], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comms[1],
                                   streams[1]), HCCL_SUCCESS);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(arg.res, HCCL_SUCCESS);
    expect_sum(recv[0]); /* done when suspend returned, without synchronising the stream */
    assert_int_equal(HcclGetCommName(comms[0], name), HCCL_SUCCESS);
    /* Both ranks have the communicator's name: the calling thread's device picks rank 0's. */
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(HcclCommGetStatus(name, &status), HCCL_SUCCESS);
    assert_int_equal(status, HCCL_COMM_STATUS_SUSPENDING);
    assert_int_equal(HcclAllReduce(send[0], recv[0], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comms[0],
                                   streams[0]), HCCL_E_SUSPENDING);
    assert_int_equal(HcclBarrier(comms[0], streams[0]), HCCL_E_SUSPENDING);
    assert_int_equal(HcclCommResume(comms[0]), HCCL_SUCCESS);
    assert_int_equal(HcclCommGetStatus(name, &status), HCCL_SUCCESS);
    assert_int_equal(status, HCCL_COMM_STATUS_READY);
    for (int r = 0; r < N; r++) {
        assert_int_equal(aclrtSynchronizeStream(streams[r]), ACL_SUCCESS);
        memset(recv[r], 0, sizeof(recv[r]));
    }
    allreduce_all((float *[N]){send[0], send[1]}, (float *[N]){recv[0], recv[1]});
    expect_sum(recv[0]);
    expect_sum(recv[1]);
    assert_int_equal(HcclCommSuspend(NULL), HCCL_E_PTR);
    assert_int_equal(HcclCommResume((HcclComm)send), HCCL_E_PARA);
}

/* Suspend's wait is bounded by the communicator's exec timeout: an op that cannot start (its stream
 * is held) makes it return HCCL_E_TIMEOUT after that long, suspended; resume then continues. */
static aclError gate_task(void *arg)
{
    pthread_mutex_t *gate = arg;

    pthread_mutex_lock(gate);
    pthread_mutex_unlock(gate);
    return ACL_SUCCESS;
}

static void test_suspend_is_bounded(void **state)
{
    static float send[N][COUNT], recv[N][COUNT];
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    int32_t devices[N] = {2, 3};
    HcclComm pair[N];
    aclrtStream pair_streams[N];
    struct timespec t0, t1;
    double seconds;

    (void)state;
    setenv("HCCL_EXEC_TIMEOUT", "1", 1);
    assert_int_equal(HcclCommInitAll(N, devices, pair), HCCL_SUCCESS);
    unsetenv("HCCL_EXEC_TIMEOUT");
    for (int r = 0; r < N; r++) {
        assert_int_equal(aclrtSetDevice(devices[r]), ACL_SUCCESS);
        assert_int_equal(aclrtCreateStream(&pair_streams[r]), ACL_SUCCESS);
        fill(send[r], r);
    }
    pthread_mutex_lock(&gate);
    assert_int_equal(aclrtHostLaunchTask(pair_streams[0], gate_task, &gate, "gate"), ACL_SUCCESS);
    assert_int_equal(HcclAllReduce(send[0], recv[0], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, pair[0],
                                   pair_streams[0]), HCCL_SUCCESS);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(HcclCommSuspend(pair[0]), HCCL_E_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(seconds >= 0.9 && seconds < 10.0);
    assert_int_equal(HcclAllReduce(send[0], recv[0], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, pair[0],
                                   pair_streams[0]), HCCL_E_SUSPENDING);
    pthread_mutex_unlock(&gate);
    assert_int_equal(HcclAllReduce(send[1], recv[1], COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, pair[1],
                                   pair_streams[1]), HCCL_SUCCESS);
    for (int r = 0; r < N; r++)
        assert_int_equal(aclrtSynchronizeStream(pair_streams[r]), ACL_SUCCESS);
    expect_sum(recv[0]);
    expect_sum(recv[1]);
    assert_int_equal(HcclCommResume(pair[0]), HCCL_SUCCESS);
    for (int r = 0; r < N; r++) {
        assert_int_equal(HcclCommDestroy(pair[r]), HCCL_SUCCESS);
        assert_int_equal(aclrtDestroyStream(pair_streams[r]), ACL_SUCCESS);
    }
}

/* ---- state callbacks ----------------------------------------------------------------------------- */

typedef struct {
    HcclComm comms[8];
    HcclCommStatePhase phases[8];
    int n;
    HcclResult answer;
} calls_t;

static calls_t quiet = {.answer = HCCL_SUCCESS};

static HcclResult record_call(HcclComm comm, HcclCommStatePhase phase, void *args)
{
    calls_t *calls = args;

    if (calls->n < 8) {
        calls->comms[calls->n] = comm;
        calls->phases[calls->n] = phase;
    }
    calls->n++;
    return calls->answer;
}

static void test_state_callbacks(void **state)
{
    calls_t calls = {.answer = HCCL_SUCCESS}, refuse = {.answer = HCCL_E_INTERNAL};
    char long_name[200];
    HcclRootInfo info;
    HcclComm extra;

    (void)state;
    assert_int_equal(HcclCommRegCommStateCallback("test", record_call, &calls), HCCL_SUCCESS);
    assert_int_equal(HcclCommSuspend(comms[1]), HCCL_SUCCESS);
    assert_int_equal(HcclCommResume(comms[1]), HCCL_SUCCESS);
    assert_int_equal(calls.n, 2);
    assert_ptr_equal(calls.comms[0], comms[1]);
    assert_int_equal(calls.phases[0], HCCL_COMM_STATE_PHASE_RESUME_PRE);
    assert_int_equal(calls.phases[1], HCCL_COMM_STATE_PHASE_RESUME_POST);
    /* A callback that fails before destruction stops it: the communicator lives on. */
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    assert_int_equal(HcclCommInitRootInfo(1, &info, 0, &extra), HCCL_SUCCESS);
    assert_int_equal(HcclCommRegCommStateCallback("test", record_call, &refuse), HCCL_SUCCESS); /* replaces */
    assert_int_equal(HcclCommDestroy(extra), HCCL_E_INTERNAL);
    assert_int_equal(refuse.n, 1);
    assert_int_equal(HcclCommRegCommStateCallback("test", record_call, &calls), HCCL_SUCCESS);
    calls.n = 0;
    assert_int_equal(HcclCommDestroy(extra), HCCL_SUCCESS);
    assert_int_equal(calls.n, 2);
    assert_ptr_equal(calls.comms[0], extra);
    assert_int_equal(calls.phases[0], HCCL_COMM_STATE_PHASE_DESTROY_PRE);
    assert_int_equal(calls.phases[1], HCCL_COMM_STATE_PHASE_DESTROY_POST);
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(HcclCommRegCommStateCallback(long_name, record_call, NULL), HCCL_E_PARA);
    assert_int_equal(HcclCommRegCommStateCallback("", record_call, NULL), HCCL_E_PARA);
    assert_int_equal(HcclCommRegCommStateCallback("x", NULL, NULL), HCCL_E_PTR);
    /* Callbacks stay registered for the process: leave one that always succeeds (teardown's destroys). */
    assert_int_equal(HcclCommRegCommStateCallback("test", record_call, &quiet), HCCL_SUCCESS);
}

/* ---- memory ranges (hccl_test -z) and symmetric windows --------------------------------------------- */

static void test_memory_ranges_and_zero_copy(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = COUNT * sizeof(float);
    size_t span = 2 * ((bytes + page - 1) / page) * page;
    aclrtPhysicalMemProp prop = {.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED, .memAttr = ACL_HBM_MEM_HUGE,
                                 .location = {.type = ACL_MEM_LOCATION_TYPE_DEVICE}};
    aclrtDrvMemHandle handles[N];
    float *send[N], *recv[N];
    char *va[N];
    int other = 0;

    (void)state;
    for (int r = 0; r < N; r++) {
        prop.location.id = (uint32_t)r;
        assert_int_equal(aclrtReserveMemAddress((void **)&va[r], 2 * span, 0, NULL, 1), ACL_SUCCESS);
        assert_int_equal(HcclCommUnsetMemoryRange(comms[r], va[r]), HCCL_E_PARA); /* never set */
        assert_int_equal(HcclCommSetMemoryRange(comms[r], va[r], 2 * span, 0, 0), HCCL_SUCCESS);
        assert_int_equal(aclrtMallocPhysical(&handles[r], span, &prop, 0), ACL_SUCCESS);
        /* Not mapped yet: cannot be activated. */
        assert_int_equal(HcclCommActivateCommMemory(comms[r], va[r], span, 0, handles[r], 0), HCCL_E_PARA);
        assert_int_equal(aclrtMapMem(va[r], span, 0, handles[r], 0), ACL_SUCCESS);
        assert_int_equal(HcclCommActivateCommMemory(comms[r], va[r], span, 0, handles[r], 0), HCCL_SUCCESS);
        assert_int_equal(HcclCommActivateCommMemory(comms[r], va[r], page, 0, handles[r], 0), HCCL_E_PARA);
        assert_int_equal(HcclCommActivateCommMemory(comms[r], va[r], span, 4096, handles[r], 0), HCCL_E_PARA);
        send[r] = (float *)(void *)va[r];
        recv[r] = (float *)(void *)(va[r] + span / 2);
        fill(send[r], r);
    }
    allreduce_all(send, recv);
    expect_sum(recv[0]);
    expect_sum(recv[1]);
    /* Ranges are checked against what was reserved and what is active. */
    assert_int_equal(HcclCommSetMemoryRange(comms[0], &other, sizeof(other), 0, 0), HCCL_E_PARA);
    assert_int_equal(HcclCommSetMemoryRange(comms[0], va[0], span, 0, 0), HCCL_E_PARA); /* overlaps */
    assert_int_equal(HcclCommSetMemoryRange(comms[0], va[0] + 2 * span, span, 1, 0), HCCL_E_PARA);
    assert_int_equal(HcclCommUnsetMemoryRange(comms[0], va[0]), HCCL_E_PARA); /* still active */
    for (int r = 0; r < N; r++) {
        assert_int_equal(HcclCommDeactivateCommMemory(comms[r], va[r]), HCCL_SUCCESS);
        assert_int_equal(HcclCommDeactivateCommMemory(comms[r], va[r]), HCCL_E_PARA);
        assert_int_equal(HcclCommUnsetMemoryRange(comms[r], va[r]), HCCL_SUCCESS);
        assert_int_equal(aclrtUnmapMem(va[r]), ACL_SUCCESS);
        assert_int_equal(aclrtFreePhysical(handles[r]), ACL_SUCCESS);
        assert_int_equal(aclrtReleaseMemAddress(va[r]), ACL_SUCCESS);
    }
}

static void test_symmetric_windows(void **state)
{
    static char heap[4096];
    HcclCommSymWindow win = NULL, found = NULL, other = NULL;
    size_t offset = 0;

    (void)state;
    assert_int_equal(HcclCommSymWinRegister(comms[0], heap, 1024, &win, 1), HCCL_SUCCESS);
    assert_int_equal(HcclCommSymWinGet(comms[0], heap + 100, 24, &found, &offset), HCCL_SUCCESS);
    assert_ptr_equal(found, win);
    assert_int_equal(offset, 100);
    assert_int_equal(HcclCommSymWinGet(comms[0], heap + 1000, 100, &found, &offset), HCCL_E_NOT_FOUND);
    assert_int_equal(HcclCommSymWinGet(comms[1], heap + 100, 24, &found, &offset), HCCL_E_NOT_FOUND);
    assert_int_equal(HcclCommSymWinRegister(comms[0], heap + 512, 1024, &other, 1), HCCL_E_PARA); /* overlap */
    assert_int_equal(HcclCommSymWinRegister(comms[0], heap + 2048, 1024, &other, 0), HCCL_E_PARA); /* flag 0 */
    assert_int_equal(HcclCommSymWinRegister(comms[0], heap + 2048, (uint64_t)17 << 30, &other, 1), HCCL_E_PARA);
    assert_int_equal(HcclCommSymWinRegister(comms[0], heap + 2048, 1024, &other, 1), HCCL_SUCCESS);
    assert_int_equal(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
    assert_int_equal(HcclCommSymWinDeregister(win), HCCL_E_PARA);
    assert_int_equal(HcclCommSymWinGet(comms[0], heap + 100, 24, &found, &offset), HCCL_E_NOT_FOUND);
    assert_int_equal(HcclCommSymWinGet(comms[0], heap + 2048, 1024, &found, &offset), HCCL_SUCCESS);
    assert_ptr_equal(found, other);
    assert_int_equal(offset, 0);
    assert_int_equal(HcclCommSymWinDeregister(NULL), HCCL_E_PTR);
    assert_int_equal(HcclCommSymWinRegister(comms[0], NULL, 1024, &win, 1), HCCL_E_PTR);
    /* "other" is left registered: HcclCommDestroy (teardown) releases it. */
}

/* ---- the profiler's view of HCCL operations ---------------------------------------------------- */

static void test_profiled_operations(void **state)
{
    static float send[N][COUNT], recv[N][COUNT];
    char dir[] = "/tmp/hostccl_hccl_prof_XXXXXX";
    aclprofConfig *config;
    const cJSON *ev;
    cJSON *trace;
    int allreduces = 0, broadcasts = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(aclprofInit(dir, strlen(dir)), ACL_SUCCESS);
    config = aclprofCreateConfig(NULL, 0, ACL_AICORE_NONE, NULL, ACL_PROF_HCCL_TRACE);
    assert_int_equal(aclprofStart(config), ACL_SUCCESS);
    allreduce_all((float *[N]){send[0], send[1]}, (float *[N]){recv[0], recv[1]});
    for (int r = 0; r < N; r++)
        assert_int_equal(HcclBroadcast(recv[r], 10, HCCL_DATA_TYPE_INT32, 1, comms[r], streams[r]), HCCL_SUCCESS);
    for (int r = 0; r < N; r++)
        assert_int_equal(aclrtSynchronizeStream(streams[r]), ACL_SUCCESS);
    assert_int_equal(aclprofStop(config), ACL_SUCCESS);
    assert_int_equal(aclprofFinalize(), ACL_SUCCESS);
    assert_int_equal(aclprofDestroyConfig(config), ACL_SUCCESS);
    trace = t_take_trace(dir);
    rmdir(dir);
    assert_non_null(trace);
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        const cJSON *args = cJSON_GetObjectItem(ev, "args");
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;

        if (strcmp(cJSON_GetObjectItem(ev, "ph")->valuestring, "X") != 0)
            continue;
        assert_string_equal(cJSON_GetObjectItem(ev, "cat")->valuestring, "hccl");
        assert_string_equal(cJSON_GetObjectItem(args, "result")->valuestring, "HCCL_SUCCESS");
        assert_int_equal((int)cJSON_GetObjectItem(args, "nranks")->valuedouble, N);
        assert_true(strncmp(cJSON_GetObjectItem(args, "comm")->valuestring, "hccl_", 5) == 0);
        if (strcmp(name, "allreduce") == 0) {
            allreduces++;
            assert_int_equal((int)cJSON_GetObjectItem(args, "bytes")->valuedouble, COUNT * 4);
            assert_string_equal(cJSON_GetObjectItem(args, "op")->valuestring, "sum");
            assert_string_equal(cJSON_GetObjectItem(args, "dtype")->valuestring, "fp32");
        } else if (strcmp(name, "broadcast") == 0) {
            broadcasts++;
            assert_int_equal((int)cJSON_GetObjectItem(args, "bytes")->valuedouble, 40);
            assert_int_equal((int)cJSON_GetObjectItem(args, "root")->valuedouble, 1);
        }
    }
    assert_int_equal(allreduces, N);
    assert_int_equal(broadcasts, N);
    cJSON_Delete(trace);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suspend_quiesces_then_resume_continues),
        cmocka_unit_test(test_suspend_is_bounded),
        cmocka_unit_test(test_state_callbacks),
        cmocka_unit_test(test_memory_ranges_and_zero_copy),
        cmocka_unit_test(test_symmetric_windows),
        cmocka_unit_test(test_profiled_operations),
    };

    unsetenv("HCCL_EXEC_TIMEOUT");
    return cmocka_run_group_tests(tests, setup, teardown);
}
