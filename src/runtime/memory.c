/*
 * Host memory and copies. On a host every memcpy kind is a plain host copy; the kinds are still
 * validated so that a program that passes a wrong one learns it here rather than on an NPU. The
 * asynchronous forms validate their arguments at the call (an error is returned at once, never
 * discovered later by the executor) and copy in stream order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_copy.h"
#include "hc_log.h"
#include "hc_rt.h"

/* Host buffers are aligned for the widest SIMD loads and never share a cache line with others. */
#define HOST_ALIGN 64

typedef struct {
    void *dst;
    const void *src;
    size_t count;      /* bytes per row */
    int is_set; /* a memset of `value` rather than a copy from src */
    int value;
    size_t rows;       /* 2-D copies: rows of count bytes; 0 or 1: one row */
    size_t dpitch, spitch;
} copy_args_t;

HC_RT_EXPORT aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    void *ptr;
    int err;

    if (hostPtr == NULL || size == 0) {
        HC_ERROR("aclrtMallocHost: %s", hostPtr == NULL ? "hostPtr is NULL" : "size is 0");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    err = posix_memalign(&ptr, HOST_ALIGN, size);
    if (err != 0) {
        HC_ERROR("aclrtMallocHost: cannot allocate %zu bytes: %s", size, strerror(err));
        return hc_rt_ret(ACL_ERROR_BAD_ALLOC);
    }
    *hostPtr = ptr;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtFreeHost(void *hostPtr)
{
    if (hostPtr == NULL) {
        HC_ERROR("aclrtFreeHost: hostPtr is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    free(hostPtr);
    return ACL_SUCCESS;
}

static aclError check_copy(const char *call, const void *dst, size_t dest_max, const void *src, size_t count,
                           aclrtMemcpyKind kind)
{
    if ((unsigned)kind > ACL_MEMCPY_INTER_DEVICE_TO_DEVICE) {
        HC_ERROR("%s: memcpy kind %d is not one of aclrtMemcpyKind's values (0..7)", call, (int)kind);
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

/* memmove's contract, not memcpy's: CANN allows overlapping device-to-device copies. */
static void copy_now(const copy_args_t *args)
{
    if (args->count == 0)
        return;
    if (args->is_set) {
        memset(args->dst, args->value, args->count);
        return;
    }
    if (args->rows <= 1) {
        hc_move(args->dst, args->src, args->count);
        return;
    }
    for (size_t r = 0; r < args->rows; r++)
        hc_move((unsigned char *)args->dst + r * args->dpitch, (const unsigned char *)args->src + r * args->spitch,
                args->count);
}

/* In stream order; skipped (as CANN's stream does) after a failed task when the stream stops on
 * failure. The profiler sees the bytes. */
static aclError copy_task(void *arg)
{
    const copy_args_t *args = arg;

    if (!hc_rt_task_skipping())
        copy_now(args);
    if (aclrtHostProfActive()) {
        size_t rows = args->rows > 1 ? args->rows : 1;
        aclrtHostProfInfo info = {.name = args->is_set ? "memset" : "memcpy",
                                  .category = args->is_set ? "memset" : "memcpy", .rank = -1, .peer = -1,
                                  .count = args->count * rows, .bytes = args->count * rows};

        aclrtHostProfAnnotate(&info);
    }
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
    res = hc_rt_stream_enqueue_at(stream, copy_task, queued,
                                  args.is_set ? "memset" : args.rows > 1 ? "memcpy2d" : "memcpy", 1, NULL);
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
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                                       aclrtMemcpyKind kind, aclrtStream stream)
{
    aclError res = check_copy("aclrtMemcpyAsync", dst, destMax, src, count, kind);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    return hc_rt_ret(enqueue_copy("aclrtMemcpyAsync", (copy_args_t){.dst = dst, .src = src, .count = count}, stream));
}

/* Like memset, the value's low byte is what is stored. */
HC_RT_EXPORT aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    aclError res = check_set("aclrtMemset", devPtr, maxCount, count);

    if (res == ACL_SUCCESS)
        copy_now(&(copy_args_t){.dst = devPtr, .count = count, .is_set = 1, .value = (int)value});
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                                       aclrtStream stream)
{
    aclError res = check_set("aclrtMemsetAsync", devPtr, maxCount, count);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    return hc_rt_ret(enqueue_copy("aclrtMemsetAsync",
                        (copy_args_t){.dst = devPtr, .count = count, .is_set = 1, .value = (int)value}, stream));
}

/* A 2-D copy: height rows of width bytes, each within its pitch. */
static aclError check_copy_2d(const char *call, const void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, aclrtMemcpyKind kind)
{
    if ((unsigned)kind > ACL_MEMCPY_INTER_DEVICE_TO_DEVICE) {
        HC_ERROR("%s: memcpy kind %d is not one of aclrtMemcpyKind's values (0..7)", call, (int)kind);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (width > dpitch || width > spitch) {
        HC_ERROR("%s: width %zu is larger than the %s pitch %zu", call, width, width > dpitch ? "destination" : "source",
                 width > dpitch ? dpitch : spitch);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (width > 0 && height > 0 && (dst == NULL || src == NULL)) {
        HC_ERROR("%s: %s is NULL with %zu rows of %zu bytes", call, dst == NULL ? "dst" : "src", height, width);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (height > 0 && (dpitch > SIZE_MAX / height || spitch > SIZE_MAX / height)) {
        HC_ERROR("%s: %zu rows of pitch %zu overflow the address space", call, height,
                 dpitch > spitch ? dpitch : spitch);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                    size_t height, aclrtMemcpyKind kind)
{
    aclError res = check_copy_2d("aclrtMemcpy2d", dst, dpitch, src, spitch, width, height, kind);

    if (res == ACL_SUCCESS && height > 0)
        copy_now(&(copy_args_t){.dst = dst, .src = src, .count = width, .rows = height, .dpitch = dpitch,
                                .spitch = spitch});
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                         size_t height, aclrtMemcpyKind kind, aclrtStream stream)
{
    aclError res = check_copy_2d("aclrtMemcpy2dAsync", dst, dpitch, src, spitch, width, height, kind);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    return hc_rt_ret(enqueue_copy("aclrtMemcpy2dAsync",
                                  (copy_args_t){.dst = dst, .src = src, .count = height > 0 ? width : 0, .rows = height,
                                                .dpitch = dpitch, .spitch = spitch},
                                  stream));
}

/* MemTotal and MemAvailable (what could be allocated without swapping) from /proc/meminfo. */
int hc_rt_host_memory(size_t *available_p, size_t *total_p)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kib;
    int found = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL && found != 3) {
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
            *total_p = (size_t)kib * 1024;
            found |= 1;
        } else if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            *available_p = (size_t)kib * 1024;
            found |= 2;
        }
    }
    fclose(f);
    return found == 3 ? 0 : -1;
}

/* Every memory kind is host memory: the same answer for each attribute. */
HC_RT_EXPORT aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total)
{
    if (free_bytes == NULL || total == NULL) {
        HC_ERROR("aclrtGetMemInfo: %s is NULL", free_bytes == NULL ? "free" : "total");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if ((unsigned)attr > ACL_MEM_P2P_HUGE1G) {
        HC_ERROR("aclrtGetMemInfo: attribute %d is not an aclrtMemAttr", (int)attr);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (hc_rt_host_memory(free_bytes, total) != 0) {
        HC_ERROR("aclrtGetMemInfo: cannot read MemTotal and MemAvailable from /proc/meminfo");
        return hc_rt_ret(ACL_ERROR_RT_INTERNAL_ERROR);
    }
    return ACL_SUCCESS;
}
