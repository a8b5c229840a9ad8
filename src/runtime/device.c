/*
 * Virtual devices: ids 0..N-1 with N = HOSTCCL_DEVICE_COUNT. A device has no state of its own on a
 * host except its default stream (the NULL stream), one per device per process, created the first
 * time it is used. The current device is per thread, as in CANN, so that one process can drive
 * several devices from several threads (HcclCommInitAll).
 */
#include <stdlib.h>

#include "hc_compiler.h"
#include "hc_config.h"
#include "hc_log.h"
#include "hc_rt.h"

/* -1: aclrtSetDevice was not called on this thread. */
static HC_TLS_FAST int32_t tls_device = -1;

/* The handles of the default streams; a handle may be stale after aclrtResetDevice raced with a
 * user of the stream, which the lookup detects. */
static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;
static void *default_handles[HC_RT_MAX_DEVICES];

static int32_t device_count(void)
{
    return (int32_t)hc_config_int(HC_CFG_DEVICE_COUNT);
}

aclError hc_rt_device_check(int32_t device)
{
    int32_t count = device_count();

    if (device < 0 || device >= count) {
        HC_ERROR("device id %d is out of range: this host has %d virtual devices (0..%d, "
                 "HOSTCCL_DEVICE_COUNT)", device, count, count - 1);
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    return ACL_SUCCESS;
}

aclError hc_rt_device_current(const char *call, int32_t *device_p)
{
    if (tls_device < 0) {
        HC_ERROR("%s needs a current device, and none is set on this thread: call aclrtSetDevice "
                 "first", call);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    hc_rt_init_check(call);
    *device_p = tls_device;
    return ACL_SUCCESS;
}

int32_t hc_rt_device_swap(int32_t device)
{
    int32_t previous = tls_device;

    tls_device = device;
    return previous;
}

aclError hc_rt_device_default_stream(int32_t device, hc_rt_stream_t **stream_p)
{
    hc_rt_object_t *obj;
    hc_rt_stream_t *stream;
    aclError res = ACL_SUCCESS;

    pthread_mutex_lock(&defaults_lock);
    if (default_handles[device] != NULL &&
        hc_rt_handle_lookup(default_handles[device], HC_RT_KIND_STREAM, &obj) == ACL_SUCCESS) {
        *stream_p = (hc_rt_stream_t *)obj;
    } else {
        /* Created under the lock so that two threads of one device never create two. */
        res = hc_rt_stream_create(device, &stream);
        if (res == ACL_SUCCESS) {
            default_handles[device] = hc_rt_stream_handle(stream);
            *stream_p = stream;
        }
    }
    pthread_mutex_unlock(&defaults_lock);
    return res;
}

void hc_rt_device_forget_defaults(void)
{
    pthread_mutex_lock(&defaults_lock);
    for (int i = 0; i < HC_RT_MAX_DEVICES; i++)
        default_handles[i] = NULL;
    pthread_mutex_unlock(&defaults_lock);
}

HC_RT_EXPORT aclError aclrtSetDevice(int32_t deviceId)
{
    aclError res = hc_rt_device_check(deviceId);

    hc_rt_init_check("aclrtSetDevice");
    if (res == ACL_SUCCESS)
        tls_device = deviceId;
    return res;
}

HC_RT_EXPORT aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL) {
        HC_ERROR("aclrtGetDevice: deviceId is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    return hc_rt_device_current("aclrtGetDevice", deviceId);
}

HC_RT_EXPORT aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL) {
        HC_ERROR("aclrtGetDeviceCount: count is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *count = (uint32_t)device_count();
    return ACL_SUCCESS;
}

/*
 * Synchronise and destroy deviceId's default stream. Streams the user created stay valid (they are
 * the user's to destroy), and the calling thread keeps its current device: a later NULL-stream call
 * creates a fresh default stream.
 */
HC_RT_EXPORT aclError aclrtResetDevice(int32_t deviceId)
{
    void *handle;
    aclError res = hc_rt_device_check(deviceId);

    if (res != ACL_SUCCESS)
        return res;
    pthread_mutex_lock(&defaults_lock);
    handle = default_handles[deviceId];
    pthread_mutex_unlock(&defaults_lock);
    if (handle == NULL)
        return ACL_SUCCESS;
    res = hc_rt_stream_destroy(handle);
    if (res == ACL_ERROR_RT_INVALID_HANDLE)
        res = ACL_SUCCESS; /* another thread reset the device meanwhile */
    if (res != ACL_SUCCESS)
        return res;
    pthread_mutex_lock(&defaults_lock);
    if (default_handles[deviceId] == handle)
        default_handles[deviceId] = NULL;
    pthread_mutex_unlock(&defaults_lock);
    return ACL_SUCCESS;
}

/* Synchronise every live stream of the current device; the first error any of them reports. */
HC_RT_EXPORT aclError aclrtSynchronizeDevice(void)
{
    hc_rt_object_t **objs;
    size_t count;
    int32_t device;
    aclError res, first = ACL_SUCCESS;

    res = hc_rt_device_current("aclrtSynchronizeDevice", &device);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_handle_collect(HC_RT_KIND_STREAM, &objs, &count);
    if (res != ACL_SUCCESS)
        return res;
    for (size_t i = 0; i < count; i++) {
        hc_rt_stream_t *stream = (hc_rt_stream_t *)objs[i];

        if (hc_rt_stream_device(stream) == device) {
            res = hc_rt_stream_sync(stream, -1);
            if (res != ACL_SUCCESS && first == ACL_SUCCESS)
                first = res;
        }
        hc_rt_object_unref(objs[i]);
    }
    free(objs);
    return first;
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_rt_device_fork_prepare(void)
{
    pthread_mutex_lock(&defaults_lock);
}

void hc_rt_device_fork_parent(void)
{
    pthread_mutex_unlock(&defaults_lock);
}

/* The default streams were the parent's; the child's are created when first used. The calling
 * thread keeps its current device. */
void hc_rt_device_fork_child(void)
{
    for (int i = 0; i < HC_RT_MAX_DEVICES; i++)
        default_handles[i] = NULL;
    pthread_mutex_unlock(&defaults_lock);
}
