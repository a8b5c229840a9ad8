/*
 * The AscendCL calls around devices that CANN's samples and hccl_test make: CANN's init/finalize
 * state machine, the thread's last error, run mode, SoC name, device attributes, peer access, the
 * float overflow mode, contexts and device synchronisation with a bound.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

/* Must run first: CANN finalises even without aclInit (hccl_test -h does exactly that). */
static void test_init_state_machine(void **state)
{
    uint64_t refs = 99;

    (void)state;
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    assert_int_equal(aclFinalizeReference(&refs), ACL_ERROR_REPEAT_FINALIZE);
    assert_int_equal(refs, 0);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE); /* counts a second reference */
    assert_int_equal(aclFinalizeReference(&refs), ACL_SUCCESS);
    assert_int_equal(refs, 1);
    assert_int_equal(aclFinalizeReference(&refs), ACL_SUCCESS); /* the last one finalises */
    assert_int_equal(refs, 0);
    assert_int_equal(aclFinalizeReference(NULL), ACL_ERROR_REPEAT_FINALIZE);
    assert_int_equal(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    assert_int_equal(aclInit(""), ACL_SUCCESS);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
}

/* GetLastError returns and clears the thread's last failure, Peek leaves it; both per thread. */
static void *other_thread_last_error(void *arg)
{
    (void)arg;
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    return NULL;
}

static void test_last_error(void **state)
{
    (void)state;
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_REPEAT_FINALIZE); /* the test before */
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(-5), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS); /* a success does not clear it */
    run_on_new_thread(other_thread_last_error, NULL);
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream((aclrtStream)(uintptr_t)0x7770), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtMalloc(NULL, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetLastError((aclrtLastErrLevel)3), ACL_ERROR_INVALID_PARAM);
}

static void test_run_mode_and_soc(void **state)
{
    aclrtRunMode mode = ACL_DEVICE;

    (void)state;
    assert_int_equal(aclrtGetRunMode(&mode), ACL_SUCCESS);
    assert_int_equal(mode, ACL_HOST);
    assert_int_equal(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    assert_string_equal(aclrtGetSocName(), "HostCPU");
    setenv("HOSTCCL_SOC_NAME", "Ascend910B4", 1);
    assert_string_equal(aclrtGetSocName(), "Ascend910B4");
    unsetenv("HOSTCCL_SOC_NAME");
}

static void test_device_info(void **state)
{
    int64_t value = -1;
    size_t avail = 0, total = 0;

    (void)state;
    assert_int_equal(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_AICPU_CORE_NUM, &value), ACL_SUCCESS);
    assert_true(value >= 1);
    assert_int_equal(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_AICORE_CORE_NUM, &value), ACL_SUCCESS);
    assert_int_equal(value, 0);
    assert_int_equal(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_IS_VIRTUAL, &value), ACL_SUCCESS);
    assert_int_equal(value, 1);
    assert_int_equal(aclrtGetDeviceInfo(2, ACL_DEV_ATTR_PHY_CHIP_ID, &value), ACL_SUCCESS);
    assert_int_equal(value, 2);
    assert_int_equal(aclrtGetMemInfo(ACL_HBM_MEM_HUGE, &avail, &total), ACL_SUCCESS);
    assert_int_equal(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &value), ACL_SUCCESS);
    assert_int_equal((size_t)value, total);
    assert_int_equal(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_WARP_SIZE, &value), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(aclrtGetDeviceInfo(8, ACL_DEV_ATTR_IS_VIRTUAL, &value), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_IS_VIRTUAL, NULL), ACL_ERROR_INVALID_PARAM);
}

static void test_peer_access(void **state)
{
    int32_t can = -1;

    (void)state;
    assert_int_equal(aclrtDeviceCanAccessPeer(&can, 0, 1), ACL_SUCCESS);
    assert_int_equal(can, 1);
    assert_int_equal(aclrtDeviceCanAccessPeer(&can, 1, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDeviceCanAccessPeer(&can, 0, 8), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtDeviceCanAccessPeer(NULL, 0, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceEnablePeerAccess(1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDeviceDisablePeerAccess(1), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceDisablePeerAccess(9), ACL_ERROR_RT_INVALID_DEVICEID);
}

static void test_overflow_mode(void **state)
{
    aclrtFloatOverflowMode mode = ACL_RT_OVERFLOW_MODE_UNDEF;

    (void)state;
    assert_int_equal(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN), ACL_SUCCESS);
    assert_int_equal(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetDeviceSatMode(&mode), ACL_SUCCESS);
    assert_int_equal(mode, ACL_RT_OVERFLOW_MODE_INFNAN);
    assert_int_equal(aclrtGetDeviceSatMode(NULL), ACL_ERROR_INVALID_PARAM);
}

/* ---- contexts ---------------------------------------------------------------------------------- */

static void *no_context_thread(void *arg)
{
    aclrtContext ctx = NULL;

    /* A context made current on another thread is not current here. */
    assert_int_equal(aclrtGetCurrentContext(&ctx), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSetCurrentContext(*(aclrtContext *)arg), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&ctx), ACL_SUCCESS);
    assert_ptr_equal(ctx, *(aclrtContext *)arg);
    return NULL;
}

static void test_contexts(void **state)
{
    aclrtContext dflt = NULL, again = NULL, mine = NULL, cur = NULL;
    int32_t device = -1;

    (void)state;
    assert_int_equal(aclrtSetDevice(2), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&dflt), ACL_SUCCESS);
    assert_non_null(dflt);
    assert_int_equal(aclrtGetCurrentContext(&again), ACL_SUCCESS);
    assert_ptr_equal(dflt, again);
    /* A new context becomes current, and its device the current device. */
    assert_int_equal(aclrtCreateContext(&mine, 5), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    assert_ptr_equal(cur, mine);
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 5);
    run_on_new_thread(no_context_thread, &mine);
    /* Back to the default context of device 2, then to mine again. */
    assert_int_equal(aclrtSetCurrentContext(dflt), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 2);
    assert_int_equal(aclrtSetCurrentContext(mine), ACL_SUCCESS);
    /* aclrtSetDevice makes the device's default context current. */
    assert_int_equal(aclrtSetDevice(5), ACL_SUCCESS);
    assert_int_equal(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
    assert_true(cur != mine);
    assert_int_equal(aclrtDestroyContext(dflt), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyContext(mine), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyContext(mine), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSetCurrentContext(mine), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtCreateContext(&mine, 8), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtCreateContext(NULL, 0), ACL_ERROR_INVALID_PARAM);
    /* A stream is never a context. */
    assert_int_equal(aclrtSetCurrentContext((aclrtContext)(uintptr_t)0x11), ACL_ERROR_RT_INVALID_HANDLE);
}

/* ---- device synchronisation with a bound --------------------------------------------------------- */

static aclError count_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return ACL_SUCCESS;
}

static void test_sync_device_with_timeout(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    int64_t start;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(3), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    hold_stream(stream, &gate);
    assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
    start = hc_test_now_ms();
    assert_int_equal(aclrtSynchronizeDeviceWithTimeout(100), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    assert_true(hc_test_now_ms() - start >= 100);
    assert_true(hc_test_now_ms() - start < 5000);
    assert_int_equal(atomic_load(&count), 0);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeDeviceWithTimeout(-1), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(aclrtSynchronizeDeviceWithTimeout(0), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeDeviceWithTimeout(-2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_state_machine),
        cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_run_mode_and_soc),
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_peer_access),
        cmocka_unit_test(test_overflow_mode),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_sync_device_with_timeout),
    };

    unsetenv("HOSTCCL_DEVICE_COUNT");
    unsetenv("ASCEND_RT_VISIBLE_DEVICES");
    unsetenv("HOSTCCL_SOC_NAME");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
