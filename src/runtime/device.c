/*
 * Virtual devices. The host has HOSTCCL_DEVICE_COUNT of them (default 8, an Ascend server's NPUs);
 * ASCEND_RT_VISIBLE_DEVICES, as in CANN, selects some and renumbers them from 0 in the order
 * listed, so the logical ids a process uses are 0..N-1 with N the number it sees. A device has no
 * state of its own on a host except its default stream (the NULL stream), one per device per
 * process, created the first time it is used. The current device is per thread, as in CANN, so
 * that one process can drive several devices from several threads (HcclCommInitAll).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * The physical ids ASCEND_RT_VISIBLE_DEVICES lists, in order, into ids (room for HC_RT_MAX_DEVICES);
 * returns how many, or -1 when the variable is unset. The list ends at the first entry that is not
 * a device of the host or repeats one (CUDA_VISIBLE_DEVICES's rule), with one warning.
 */
static int32_t visible_devices(int32_t host_count, int32_t *ids)
{
    static atomic_int warned;
    const char *text = hc_config_str(HC_CFG_VISIBLE_DEVICES);
    int32_t n = 0;

    if (text == NULL)
        return -1;
    while (*text != '\0' && n < HC_RT_MAX_DEVICES) {
        char *end;
        long id;
        int repeated = 0;

        errno = 0;
        id = strtol(text, &end, 10);
        for (int32_t i = 0; i < n; i++)
            repeated |= ids[i] == id;
        if (errno != 0 || end == text || (*end != ',' && *end != '\0') || id < 0 || id >= host_count || repeated) {
            if (atomic_exchange(&warned, 1) == 0)
                HC_WARN("ASCEND_RT_VISIBLE_DEVICES=\"%s\": the list stops at \"%s\", which is not one of the "
                        "host's devices 0..%d (HOSTCCL_DEVICE_COUNT) or is repeated; %d devices are visible",
                        hc_config_str(HC_CFG_VISIBLE_DEVICES), text, host_count - 1, n);
            break;
        }
        ids[n++] = (int32_t)id;
        text = *end == ',' ? end + 1 : end;
    }
    return n;
}

int32_t hc_rt_device_count(void)
{
    int32_t ids[HC_RT_MAX_DEVICES];
    int32_t host_count = (int32_t)hc_config_int(HC_CFG_DEVICE_COUNT);
    int32_t visible = visible_devices(host_count, ids);

    return visible >= 0 ? visible : host_count;
}

int32_t hc_rt_device_physical(int32_t device)
{
    int32_t ids[HC_RT_MAX_DEVICES];
    int32_t visible = visible_devices((int32_t)hc_config_int(HC_CFG_DEVICE_COUNT), ids);

    return visible >= 0 && device < visible ? ids[device] : device;
}

aclError hc_rt_device_check(int32_t device)
{
    int32_t count = hc_rt_device_count();

    if (device < 0 || device >= count) {
        HC_ERROR("device id %d is out of range: this process sees %d virtual devices (0..%d; "
                 "HOSTCCL_DEVICE_COUNT, ASCEND_RT_VISIBLE_DEVICES)", device, count, count - 1);
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

HC_RT_EXPORT int32_t aclrtHostCurrentDevice(void)
{
    return tls_device;
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

/* The device's default context becomes current, as in CANN: a context set before is left. */
HC_RT_EXPORT aclError aclrtSetDevice(int32_t deviceId)
{
    aclError res = hc_rt_device_check(deviceId);

    hc_rt_init_check("aclrtSetDevice");
    if (res == ACL_SUCCESS) {
        tls_device = deviceId;
        hc_rt_context_clear_current();
    }
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL) {
        HC_ERROR("aclrtGetDevice: deviceId is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(hc_rt_device_current("aclrtGetDevice", deviceId));
}

HC_RT_EXPORT aclError aclrtGetDeviceCount(uint32_t *count)
{
    int32_t n;

    if (count == NULL) {
        HC_ERROR("aclrtGetDeviceCount: count is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    n = hc_rt_device_count();
    if (n == 0) {
        HC_ERROR("aclrtGetDeviceCount: ASCEND_RT_VISIBLE_DEVICES leaves no device visible");
        return hc_rt_ret(ACL_ERROR_RT_NO_DEVICE);
    }
    *count = (uint32_t)n;
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
        return hc_rt_ret(res);
    pthread_mutex_lock(&defaults_lock);
    handle = default_handles[deviceId];
    pthread_mutex_unlock(&defaults_lock);
    if (handle == NULL)
        return ACL_SUCCESS;
    res = hc_rt_stream_destroy(handle);
    if (res == ACL_ERROR_RT_INVALID_HANDLE)
        res = ACL_SUCCESS; /* another thread reset the device meanwhile */
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    pthread_mutex_lock(&defaults_lock);
    if (default_handles[deviceId] == handle)
        default_handles[deviceId] = NULL;
    pthread_mutex_unlock(&defaults_lock);
    return ACL_SUCCESS;
}

/* Synchronise every live stream of the current device; the first error any of them reports. With
 * a bound, each stream gets what is left of it. */
static aclError sync_device(int64_t timeout_ms, const char *call)
{
    int64_t deadline = timeout_ms < 0 ? 0 : hc_now_ns() + timeout_ms * HC_NS_PER_MS;
    hc_rt_object_t **objs;
    size_t count;
    int32_t device;
    aclError res, first = ACL_SUCCESS;

    res = hc_rt_device_current(call, &device);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_handle_collect(HC_RT_KIND_STREAM, &objs, &count);
    if (res != ACL_SUCCESS)
        return res;
    for (size_t i = 0; i < count; i++) {
        hc_rt_stream_t *stream = (hc_rt_stream_t *)objs[i];
        /* Rounded up: a stream never gets less than what is left of the bound. */
        int64_t left = deadline == 0 ? -1 : (deadline - hc_now_ns() + HC_NS_PER_MS - 1) / HC_NS_PER_MS;

        if (hc_rt_stream_device(stream) == device && first != ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
            res = hc_rt_stream_sync(stream, deadline == 0 ? -1 : (left > 0 ? left : 0));
            if (res != ACL_SUCCESS && first == ACL_SUCCESS)
                first = res;
        }
        hc_rt_object_unref(objs[i]);
    }
    free(objs);
    return first;
}

HC_RT_EXPORT aclError aclrtSynchronizeDevice(void)
{
    return hc_rt_ret(sync_device(-1, "aclrtSynchronizeDevice"));
}

HC_RT_EXPORT aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
    if (timeout < -1) {
        HC_ERROR("aclrtSynchronizeDeviceWithTimeout: timeout %d ms is invalid (-1: no bound, >= 0: ms)", timeout);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(sync_device(timeout, "aclrtSynchronizeDeviceWithTimeout"));
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
