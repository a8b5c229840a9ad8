/*
 * Devices and runtime state: device count, set/get per thread, range errors, default streams per
 * device, aclrtResetDevice, aclrtSynchronizeDevice, aclInit/aclFinalize, version, error messages.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

static aclError count_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return ACL_SUCCESS;
}

static aclError fail_task(void *arg)
{
    (void)arg;
    return ACL_ERROR_RT_COMM_OP_FAILED;
}

/* 8 by default (an Ascend server), HOSTCCL_DEVICE_COUNT to change it. */
static void test_device_count(void **state)
{
    uint32_t count = 0;

    (void)state;
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    assert_int_equal(count, 8);
    assert_int_equal(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    setenv("HOSTCCL_DEVICE_COUNT", "16", 1);
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    assert_int_equal(count, 16);
    assert_int_equal(aclrtSetDevice(15), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(16), ACL_ERROR_RT_INVALID_DEVICEID);
    unsetenv("HOSTCCL_DEVICE_COUNT");
    assert_int_equal(aclrtSetDevice(8), ACL_ERROR_RT_INVALID_DEVICEID);
}

/* ASCEND_RT_VISIBLE_DEVICES: the listed host devices, renumbered from 0 in the order given; the
 * list stops at the first id that is not a device of the host or is repeated. */
static void test_visible_devices(void **state)
{
    static const struct {
        const char *list;
        uint32_t count;
        int64_t first_physical;
    } cases[] = {{"3,1", 2, 3}, {"5", 1, 5}, {"1,9,2", 1, 1}, {"2,2,3", 1, 2}, {"0,1,2,3,4,5,6,7", 8, 0},
                 {"6,x", 1, 6}};
    uint32_t count = 0;
    int64_t physical = -1;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("ASCEND_RT_VISIBLE_DEVICES", cases[i].list, 1);
        assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
        assert_int_equal(count, cases[i].count);
        assert_int_equal(aclrtSetDevice((int32_t)count - 1), ACL_SUCCESS);
        assert_int_equal(aclrtSetDevice((int32_t)count), ACL_ERROR_RT_INVALID_DEVICEID);
        assert_int_equal(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_PHY_CHIP_ID, &physical), ACL_SUCCESS);
        assert_int_equal(physical, cases[i].first_physical);
    }
    setenv("ASCEND_RT_VISIBLE_DEVICES", "3,1", 1);
    assert_int_equal(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_PHY_CHIP_ID, &physical), ACL_SUCCESS);
    assert_int_equal(physical, 1);
    /* Nothing valid: no device at all. */
    setenv("ASCEND_RT_VISIBLE_DEVICES", "8", 1);
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_ERROR_RT_NO_DEVICE);
    assert_int_equal(aclrtSetDevice(0), ACL_ERROR_RT_INVALID_DEVICEID);
    /* The list picks among HOSTCCL_DEVICE_COUNT devices. */
    setenv("HOSTCCL_DEVICE_COUNT", "12", 1);
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    assert_int_equal(count, 1);
    unsetenv("HOSTCCL_DEVICE_COUNT");
    unsetenv("ASCEND_RT_VISIBLE_DEVICES");
    assert_int_equal(aclrtGetDeviceCount(&count), ACL_SUCCESS);
    assert_int_equal(count, 8);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
}

static void *fresh_thread_checks(void *arg)
{
    int32_t device = -1;

    (void)arg;
    /* The current device is per thread: this one has none, whatever the main thread set. */
    assert_int_equal(aclrtGetDevice(&device), ACL_ERROR_RT_CONTEXT_NULL);
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclrtSetDevice"));
    assert_int_equal(aclrtSetDevice(2), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 2);
    return NULL;
}

static void test_set_and_get_device(void **state)
{
    int32_t device = -1;

    (void)state;
    assert_int_equal(aclrtSetDevice(3), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 3);
    assert_int_equal(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtSetDevice(64), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_non_null(strstr(aclGetRecentErrMsg(), "64"));
    /* A failed set leaves the current device alone. */
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 3);
    assert_int_equal(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    run_on_new_thread(fresh_thread_checks, NULL);
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 3);
}

/* Each device has its own default stream, shared by every thread of the process. */
typedef struct {
    int32_t device;
    atomic_int *count;
    aclError res;
} default_user_t;

static void *enqueue_on_default(void *arg)
{
    default_user_t *user = arg;

    user->res = aclrtSetDevice(user->device);
    if (user->res == ACL_SUCCESS)
        user->res = aclrtHostLaunchTask(NULL, count_task, user->count, "count");
    return NULL;
}

static void test_default_stream_per_device(void **state)
{
    atomic_int on_dev0 = 0, on_dev1 = 0;
    default_user_t other = {.device = 0, .count = &on_dev0};
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    hold_stream(NULL, &gate);
    /* Another thread's NULL stream on device 0 is the same, held stream. */
    run_on_new_thread(enqueue_on_default, &other);
    assert_int_equal(other.res, ACL_SUCCESS);
    /* Device 1's default stream is a different one: it runs while device 0's is held. */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &on_dev1, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(atomic_load(&on_dev1), 1);
    assert_int_equal(atomic_load(&on_dev0), 0);
    gate_open(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(atomic_load(&on_dev0), 1);
    gate_destroy(&gate);
}

static void test_reset_device(void **state)
{
    atomic_int count = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(2), ACL_SUCCESS);
    hold_stream(NULL, &gate);
    for (int i = 0; i < 20; i++)
        assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &count, "count"), ACL_SUCCESS);
    gate_open(&gate);
    /* Reset runs the default stream's queue before destroying it. */
    assert_int_equal(aclrtResetDevice(2), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 20);
    /* The NULL stream works again afterwards (a new default stream). */
    assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 21);
    assert_int_equal(aclrtResetDevice(2), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(2), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(999), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtResetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    gate_destroy(&gate);
}

static void test_synchronize_device(void **state)
{
    aclrtStream streams[3], elsewhere;
    atomic_int count = 0, other = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    /* A held stream of another device must not be waited for. */
    assert_int_equal(aclrtSetDevice(5), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&elsewhere), ACL_SUCCESS);
    hold_stream(elsewhere, &gate);
    assert_int_equal(aclrtHostLaunchTask(elsewhere, count_task, &other, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(4), ACL_SUCCESS);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(aclrtCreateStream(&streams[s]), ACL_SUCCESS);
        for (int i = 0; i < 10; i++)
            assert_int_equal(aclrtHostLaunchTask(streams[s], count_task, &count, "count"), ACL_SUCCESS);
    }
    assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(streams[1], fail_task, NULL, "fail"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_ERROR_RT_COMM_OP_FAILED);
    assert_int_equal(atomic_load(&count), 31);
    assert_int_equal(atomic_load(&other), 0);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_SUCCESS);
    for (int s = 0; s < 3; s++)
        assert_int_equal(aclrtDestroyStream(streams[s]), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(4), ACL_SUCCESS);
    gate_open(&gate);
    assert_int_equal(aclrtDestroyStream(elsewhere), ACL_SUCCESS);
    assert_int_equal(atomic_load(&other), 1);
    gate_destroy(&gate);
}

static void test_init_and_finalize(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;

    (void)state;
    assert_int_equal(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(aclrtSetDevice(6), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
        assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &count, "count"), ACL_SUCCESS);
    }
    /* Finalize runs every queued task and destroys every stream, default streams included. */
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 20);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    /* Nothing needs aclInit, and a program may initialise again. */
    assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 21);
    assert_int_equal(aclInit(""), ACL_SUCCESS);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
}

static void test_version(void **state)
{
    int32_t major = -1, minor = -1, patch = -1;

    (void)state;
    assert_int_equal(aclrtGetVersion(&major, &minor, &patch), ACL_SUCCESS);
    assert_int_equal(major, ACL_MAJOR_VERSION);
    assert_int_equal(minor, ACL_MINOR_VERSION);
    assert_int_equal(patch, ACL_PATCH_VERSION);
    assert_int_equal(aclrtGetVersion(NULL, &minor, &patch), ACL_ERROR_INVALID_PARAM);
}

static void *recent_error_thread(void *arg)
{
    (void)arg;
    assert_string_equal(aclGetRecentErrMsg(), "");
    assert_int_equal(aclrtSetDevice(100000), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_non_null(strstr(aclGetRecentErrMsg(), "100000"));
    return NULL;
}

static void test_recent_error_message(void **state)
{
    (void)state;
    run_on_new_thread(recent_error_thread, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_count),
        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_set_and_get_device),
        cmocka_unit_test(test_default_stream_per_device),
        cmocka_unit_test(test_reset_device),
        cmocka_unit_test(test_synchronize_device),
        cmocka_unit_test(test_init_and_finalize),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_recent_error_message),
    };

    unsetenv("HOSTCCL_DEVICE_COUNT");
    unsetenv("ASCEND_RT_VISIBLE_DEVICES");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
