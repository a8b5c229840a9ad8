/*
 * Host memory and copies. On a host every memcpy kind is a plain host copy; the kinds are still
 * validated so that a program that passes a wrong one learns it here rather than on an NPU. The
 * asynchronous forms validate their arguments at the call (an error is returned at once, never
 * discovered later by the executor) and copy in stream order.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_log.h"
#include "hc_rt.h"

/* Host buffers are aligned for the widest SIMD loads and never share a cache line with others. */
#define HOST_ALIGN 64

typedef struct {
    void *dst;
    const void *src;
    size_t count;
    int is_set; /* a memset of `value` rather than a copy from src */
    int value;
} copy_args_t;

HC_RT_EXPORT aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    void *ptr;
    int err;

    if (hostPtr == NULL || size == 0) {
        HC_ERROR("aclrtMallocHost: %s", hostPtr == NULL ? "hostPtr is NULL" : "size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    err = posix_memalign(&ptr, HOST_ALIGN, size);
    if (err != 0) {
        HC_ERROR("aclrtMallocHost: cannot allocate %zu bytes: %s", size, strerror(err));
        return ACL_ERROR_BAD_ALLOC;
    }
    *hostPtr = ptr;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtFreeHost(void *hostPtr)
{
    if (hostPtr == NULL) {
        HC_ERROR("aclrtFreeHost: hostPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    free(hostPtr);
    return ACL_SUCCESS;
}

static aclError check_copy(const char *call, const void *dst, size_t dest_max, const void *src, size_t count,
                           aclrtMemcpyKind kind)
{
    if ((unsigned)kind > ACL_MEMCPY_DEFAULT) {
        HC_ERROR("%s: memcpy kind %d is not one of aclrtMemcpyKind's values (0..4)", call, (int)kind);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > dest_max) {
        HC_ERROR("%s: count %zu is larger than destMax %zu", call, count, dest_max);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > 0 && (dst == NULL || src == NULL)) {
        HC_ERROR("%s: %s is NULL with count %zu", call, dst == NULL ? "dst" : "src", count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

static aclError check_set(const char *call, const void *dst, size_t max_count, size_t count)
{
    if (count > max_count) {
        HC_ERROR("%s: count %zu is larger than maxCount %zu", call, count, max_count);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > 0 && dst == NULL) {
        HC_ERROR("%s: devPtr is NULL with count %zu", call, count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* memmove, not memcpy: CANN allows overlapping device-to-device copies. */
static void copy_now(const copy_args_t *args)
{
    if (args->count == 0)
        return;
    if (args->is_set)
        memset(args->dst, args->value, args->count);
    else
        memmove(args->dst, args->src, args->count);
}

static aclError copy_task(void *arg)
{
    copy_now(arg);
    free(arg);
    return ACL_SUCCESS;
}

static aclError enqueue_copy(const char *call, copy_args_t args, aclrtStream handle)
{
    hc_rt_stream_t *stream;
    copy_args_t *queued;
    aclError res;

    res = hc_rt_stream_get(handle, call, &stream);
    if (res != ACL_SUCCESS)
        return res;
    queued = malloc(sizeof(*queued));
    if (queued == NULL) {
        HC_ERROR("%s: out of memory", call);
        res = ACL_ERROR_BAD_ALLOC;
        goto put_stream;
    }
    *queued = args;
    res = hc_rt_stream_enqueue(stream, copy_task, queued, args.is_set ? "memset" : "memcpy");
    if (res != ACL_SUCCESS)
        free(queued);
put_stream:
    hc_rt_stream_put(stream);
    return res;
}

HC_RT_EXPORT aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind)
{
    aclError res = check_copy("aclrtMemcpy", dst, destMax, src, count, kind);

    if (res == ACL_SUCCESS)
        copy_now(&(copy_args_t){.dst = dst, .src = src, .count = count});
    return res;
}

HC_RT_EXPORT aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                                       aclrtMemcpyKind kind, aclrtStream stream)
{
    aclError res = check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind);

    if (res != ACL_SUCCESS)
        return res;
    return enqueue_copy("aclrtMemcpyAsync", (copy_args_t){.dst = dst, .src = src, .count = count}, stream);
}

/* Like memset, the value's low byte is what is stored. */
HC_RT_EXPORT aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    aclError res = check_set("aclrtMemset", devPtr, maxCount, count);

    if (res == ACL_SUCCESS)
        copy_now(&(copy_args_t){.dst = devPtr, .count = count, .is_set = 1, .value = (int)value});
    return res;
}

HC_RT_EXPORT aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                                       aclrtStream stream)
{
    aclError res = check_set("aclrtMemsetAsync", devPtr, maxCount, count);

    if (res != ACL_SUCCESS)
        return res;
    return enqueue_copy("aclrtMemsetAsync",
                        (copy_args_t){.dst = devPtr, .count = count, .is_set = 1, .value = (int)value}, stream);
}
