/*
 * What a program can ask about, or set on, a virtual device: attributes, peer access, the float
 * overflow mode and the op wait timeout. A host answers with what is true of it: its CPUs are the
 * AI CPUs, its memory is the global memory, there are no AI Cores, every device reads every other's
 * memory, and float arithmetic is IEEE (overflow gives inf and NaN).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include "hc_log.h"
#include "hc_rt.h"

/* aclrtSetOpWaitTimeout's seconds; -1 until it is called. */
static atomic_llong op_wait_timeout_s = -1;

/* Peer access enabled per (device, peer), as CANN tracks it; on a host it changes nothing. */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t peer_enabled[64]; /* bit p of [d]: device d accesses peer p (devices below 64) */

int64_t hc_rt_op_wait_timeout_s(int64_t fallback_s)
{
    long long value = atomic_load(&op_wait_timeout_s);

    return value >= 0 ? (int64_t)value : fallback_s;
}

static int64_t cpus_available(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* The value of attr, or -1 when the host has no such thing to report (then
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT). */
static int64_t attribute(int32_t device, aclrtDevAttr attr)
{
    size_t total = 0, avail = 0;

    switch (attr) {
    case ACL_DEV_ATTR_AICPU_CORE_NUM:
        return cpus_available();
    case ACL_DEV_ATTR_AICORE_CORE_NUM:
    case ACL_DEV_ATTR_CUBE_CORE_NUM:
    case ACL_DEV_ATTR_VECTOR_CORE_NUM:
        return 0;
    case ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:
        return hc_rt_host_memory(&avail, &total) == 0 ? (int64_t)total : -1;
    case ACL_DEV_ATTR_L2_CACHE_SIZE:
        return sysconf(_SC_LEVEL2_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL2_CACHE_SIZE) : -1;
    case ACL_DEV_ATTR_SMP_ID:
        return 0; /* every device of the host runs in the same operating system */
    case ACL_DEV_ATTR_PHY_CHIP_ID:
        return hc_rt_device_physical(device);
    case ACL_DEV_ATTR_IS_VIRTUAL:
        return 1;
    default:
        return -1;
    }
}

HC_RT_EXPORT aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)
{
    int64_t v;
    aclError res;

    if (value == NULL) {
        HC_ERROR("aclrtGetDeviceInfo: value is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_device_check(deviceId > INT32_MAX ? -1 : (int32_t)deviceId);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    v = attribute((int32_t)deviceId, attr);
    if (v < 0) {
        HC_ERROR("aclrtGetDeviceInfo: attribute %d has no meaning on a host device", (int)attr);
        return hc_rt_ret(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    *value = v;
    return ACL_SUCCESS;
}

/* Two different valid devices. */
static aclError check_pair(int32_t device, int32_t peer, const char *call)
{
    aclError res = hc_rt_device_check(device);

    if (res == ACL_SUCCESS)
        res = hc_rt_device_check(peer);
    if (res == ACL_SUCCESS && device == peer) {
        HC_ERROR("%s: the peer device %d is the device itself", call, peer);
        res = ACL_ERROR_INVALID_PARAM;
    }
    return res;
}

HC_RT_EXPORT aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t peerDeviceId)
{
    aclError res;

    if (canAccessPeer == NULL) {
        HC_ERROR("aclrtDeviceCanAccessPeer: canAccessPeer is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = check_pair(deviceId, peerDeviceId, "aclrtDeviceCanAccessPeer");
    if (res == ACL_SUCCESS)
        *canAccessPeer = 1; /* one host's memory: every device reaches every other's */
    return hc_rt_ret(res);
}

static aclError set_peer_access(int32_t peer, int enable, const char *call)
{
    int32_t device;
    aclError res = hc_rt_device_current(call, &device);

    if (res == ACL_SUCCESS)
        res = check_pair(device, peer, call);
    if (res != ACL_SUCCESS || device >= 64 || peer >= 64)
        return res;
    pthread_mutex_lock(&peer_lock);
    if (enable)
        peer_enabled[device] |= 1ull << peer;
    else
        peer_enabled[device] &= ~(1ull << peer);
    pthread_mutex_unlock(&peer_lock);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)
{
    if (flags != 0) {
        HC_ERROR("aclrtDeviceEnablePeerAccess: flags must be 0, not %u", flags);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(set_peer_access(peerDeviceId, 1, "aclrtDeviceEnablePeerAccess"));
}

HC_RT_EXPORT aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)
{
    return hc_rt_ret(set_peer_access(peerDeviceId, 0, "aclrtDeviceDisablePeerAccess"));
}

/* The host computes IEEE arithmetic, so INFNAN is the mode it is in; saturation it cannot do. */
HC_RT_EXPORT aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)
{
    if (mode == ACL_RT_OVERFLOW_MODE_INFNAN)
        return ACL_SUCCESS;
    if (mode == ACL_RT_OVERFLOW_MODE_SATURATION) {
        HC_ERROR("aclrtSetDeviceSatMode: a host computes IEEE floats (overflow gives inf/NaN); saturation mode "
                 "is not supported");
        return hc_rt_ret(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    HC_ERROR("aclrtSetDeviceSatMode: mode %d is not an aclrtFloatOverflowMode", (int)mode);
    return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
}

HC_RT_EXPORT aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)
{
    if (mode == NULL) {
        HC_ERROR("aclrtGetDeviceSatMode: mode is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    *mode = ACL_RT_OVERFLOW_MODE_INFNAN;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtSetOpWaitTimeout(uint32_t timeout)
{
    atomic_store(&op_wait_timeout_s, (long long)timeout);
    return ACL_SUCCESS;
}
