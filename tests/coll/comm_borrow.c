/*
 * A call borrows its communicator without a reference (src/core/comm_borrow.c): the thread keeps
 * the last communicator it looked up and, per call, only checks that its handle is still
 * registered. What users rely on:
 *
 *   1. the same thread: calls after HcclCommDestroy fail with HCCL_E_PARA (the thread's cached
 *      communicator is not used after its destruction), and a new communicator's calls work;
 *   2. another thread destroys the communicator while this one is in the middle of a loop of
 *      large calls (4 MiB: the thread is inside one most of the time): HcclCommDestroy succeeds,
 *      every call before it completed with the right data, and the first call after it fails with
 *      HCCL_E_PARA;
 *   3. a Send parked in a group holds no reference (HcclGroupEnd looks its communicator up again):
 *      when the communicator is destroyed before HcclGroupEnd, HcclGroupEnd fails with HCCL_E_PARA
 *      and nothing is sent.
 *
 * Part 1 fails (a crash) when a borrow skips the check that the handle is still registered. The
 * narrow window part 2 guards (a call that borrowed just before the destruction and has not
 * numbered its op yet, which the destroyer must wait for) is not hit on purpose: a destroyer that
 * does not wait passed 6 runs under AddressSanitizer.
 *
 * One process, communicators of one rank (HcclCommInitAll), AllReduces of inexact values.
 */
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

#define SMALL 6
#define LARGE (1u << 20) /* floats: 4 MiB */
#define CALLS_BEFORE_DESTROY 20

static float value(int call, int i)
{
    return (float)(sin((double)(call * 31 + i)) * 123.456 + 0.1);
}

/* One AllReduce of count floats (in and out: room for them), synchronised: its result, checked
 * (0: right), or -1 and *res_p set when the call itself failed. */
static int one_call(HcclComm comm, aclrtStream stream, int call, float *in, float *out, uint32_t count,
                    HcclResult *res_p)
{
    for (uint32_t i = 0; i < count; i++) {
        in[i] = value(call, (int)(i % 4099));
        out[i] = -1.0f;
    }
    *res_p = HcclAllReduce(in, out, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    if (*res_p != HCCL_SUCCESS)
        return -1;
    T_CHECK_ACL(aclrtSynchronizeStream(stream));
    for (uint32_t i = 0; i < count; i++) {
        if (fabsf(out[i] - in[i]) > 1e-6f * (fabsf(in[i]) + 1.0f)) {
            fprintf(stderr, "call %d: out[%u] = %g, expected %g\n", call, i, (double)out[i], (double)in[i]);
            return 1;
        }
    }
    return 0;
}

static HcclComm make_comm(void)
{
    int32_t device = 0;
    HcclComm comm;

    T_CHECK_HCCL(HcclCommInitAll(1, &device, &comm));
    return comm;
}

static int same_thread(aclrtStream stream)
{
    HcclComm comm = make_comm(), next;
    float in[SMALL], out[SMALL];
    HcclResult res;
    int failed = 0;

    for (int call = 0; call < 100; call++)
        failed |= one_call(comm, stream, call, in, out, SMALL, &res) != 0;
    T_CHECK_HCCL(HcclCommDestroy(comm));
    if (one_call(comm, stream, 100, in, out, SMALL, &res) != -1 || res != HCCL_E_PARA) {
        fprintf(stderr, "a call on the destroyed communicator returned %s, expected HCCL_E_PARA\n",
                t_result_name(res));
        failed = 1;
    }
    next = make_comm(); /* may take the same registry slot: a new handle */
    for (int call = 0; call < 100; call++)
        failed |= one_call(next, stream, call, in, out, SMALL, &res) != 0;
    T_CHECK_HCCL(HcclCommDestroy(next));
    return failed;
}

typedef struct {
    HcclComm comm;
    sem_t started;          /* posted once CALLS_BEFORE_DESTROY calls succeeded */
    atomic_int calls;       /* calls that succeeded */
    HcclResult first_error;
    int failed;
} loop_t;

static void *caller_main(void *arg)
{
    loop_t *l = arg;
    float *in = malloc(LARGE * sizeof(float)), *out = malloc(LARGE * sizeof(float));
    aclrtStream stream;

    if (in == NULL || out == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    T_CHECK_ACL(aclrtSetDevice(0));
    T_CHECK_ACL(aclrtCreateStream(&stream));
    for (int call = 0;; call++) {
        HcclResult res;
        int r = one_call(l->comm, stream, call, in, out, LARGE, &res);
        if (r == -1) {
            l->first_error = res;
            break;
        }
        l->failed |= r;
        if (atomic_fetch_add(&l->calls, 1) + 1 == CALLS_BEFORE_DESTROY)
            sem_post(&l->started);
    }
    T_CHECK_ACL(aclrtDestroyStream(stream));
    free(in);
    free(out);
    return NULL;
}

static int other_thread(void)
{
    loop_t l = {.comm = make_comm()};
    pthread_t caller;
    HcclResult res;
    int failed = 0;

    sem_init(&l.started, 0, 0);
    pthread_create(&caller, NULL, caller_main, &l);
    sem_wait(&l.started);
    res = HcclCommDestroy(l.comm);
    pthread_join(caller, NULL);
    if (res != HCCL_SUCCESS) {
        fprintf(stderr, "HcclCommDestroy during another thread's calls returned %s\n", t_result_name(res));
        failed = 1;
    }
    if (l.first_error != HCCL_E_PARA) {
        fprintf(stderr, "the first call after the destruction returned %s, expected HCCL_E_PARA\n",
                t_result_name(l.first_error));
        failed = 1;
    }
    sem_destroy(&l.started);
    return failed | l.failed;
}

static int parked_then_destroyed(aclrtStream stream)
{
    int32_t devices[2] = {0, 1};
    HcclComm comms[2];
    float data[SMALL] = {0};
    HcclResult res;

    T_CHECK_HCCL(HcclCommInitAll(2, devices, comms));
    T_CHECK_HCCL(HcclGroupStart());
    T_CHECK_HCCL(HcclSend(data, SMALL, HCCL_DATA_TYPE_FP32, 1, comms[0], stream));
    T_CHECK_HCCL(HcclCommDestroy(comms[0]));
    res = HcclGroupEnd();
    T_CHECK_HCCL(HcclCommDestroy(comms[1]));
    if (res != HCCL_E_PARA) {
        fprintf(stderr, "HcclGroupEnd after its communicator's destruction returned %s, expected HCCL_E_PARA\n",
                t_result_name(res));
        return 1;
    }
    return 0;
}

int main(void)
{
    aclrtStream stream;
    int failed;

    T_CHECK_ACL(aclInit(NULL));
    T_CHECK_ACL(aclrtSetDevice(0));
    T_CHECK_ACL(aclrtCreateStream(&stream));
    failed = same_thread(stream);
    failed |= other_thread();
    failed |= parked_then_destroyed(stream);
    T_CHECK_ACL(aclrtDestroyStream(stream));
    T_CHECK_ACL(aclFinalize());
    printf("comm_borrow: %s\n", failed ? "FAILED" : "every call right, destroyed communicators refused");
    return failed ? 1 : 0;
}
