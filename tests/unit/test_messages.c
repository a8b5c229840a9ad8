/*
 * What users read: a mistake is reported once, in the words of the calls the user made. Errors about
 * the stream of an HCCL call name that call (HcclAllReduce), never the runtime's internal entry
 * (aclrtHostLaunchTaskIn); a device call before aclInit is reported once per process.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hccl/hccl.h>

#include "capture.h"

static float g_buf[16];

/* Runs first: nothing has called aclInit yet in this process. */
static void test_missing_acl_init(void **state)
{
    capture_t cap;
    char *log;

    (void)state;
    capture_begin(&cap);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS); /* hostccl goes on */
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    log = capture_end(&cap);
    assert_int_equal(count_of(log, "before aclInit"), 1);
    assert_non_null(strstr(log, "aclrtSetDevice was called before aclInit"));
    free(log);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
}

typedef struct {
    HcclComm comm;
    aclrtStream stream;
    HcclResult res;
} call_t;

static void no_op(void *arg)
{
    (void)arg;
}

/* On a thread that never called aclrtSetDevice. */
static void *allreduce_without_device(void *arg)
{
    call_t *call = arg;

    call->res = HcclAllReduce(g_buf, g_buf, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, call->comm, call->stream);
    return NULL;
}

static void test_stream_errors_name_the_call(void **state)
{
    int32_t devices[1] = {0};
    call_t call = {.stream = NULL};
    aclrtStream dead;
    pthread_t thread;
    capture_t cap;
    char *log;

    (void)state;
    assert_int_equal(HcclCommInitAll(1, devices, &call.comm), HCCL_SUCCESS);
    capture_begin(&cap);
    assert_int_equal(pthread_create(&thread, NULL, allreduce_without_device, &call), 0);
    pthread_join(thread, NULL);
    assert_int_equal(aclrtCreateStream(&dead), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(dead), ACL_SUCCESS);
    assert_int_not_equal(HcclBroadcast(g_buf, 4, HCCL_DATA_TYPE_FP32, 0, call.comm, dead), HCCL_SUCCESS);
    assert_int_not_equal(aclrtLaunchCallback(no_op, NULL, ACL_CALLBACK_BLOCK, dead), ACL_SUCCESS);
    log = capture_end(&cap);
    assert_int_not_equal(call.res, HCCL_SUCCESS);
    assert_non_null(strstr(log, "HcclAllReduce needs a current device"));
    assert_non_null(strstr(log, "HcclBroadcast: stream"));
    assert_non_null(strstr(log, "aclrtLaunchCallback: stream"));
    assert_null(strstr(log, "aclrtHost"));
    free(log);
    assert_int_equal(HcclCommDestroy(call.comm), HCCL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_acl_init),
        cmocka_unit_test(test_stream_errors_name_the_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
