/*
 * The stream entry points: thin wrappers that check arguments and hand over to the executor
 * (stream.c). Also the host-task entry libhccl uses to put collectives in stream order, and the
 * callback calls, which on a host need no report thread: callbacks run on the stream's executor.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "hc_log.h"
#include "hc_rt.h"

/* aclrtProcessReport with timeout -1 returns after this long, so that the usual loop around it
 * sleeps instead of spinning. */
#define REPORT_IDLE_MS 1000

typedef struct {
    aclrtCallback fn;
    void *user_data;
} callback_args_t;

HC_RT_EXPORT aclError aclrtCreateStream(aclrtStream *stream)
{
    hc_rt_stream_t *s;
    int32_t device;
    aclError res;

    if (stream == NULL) {
        HC_ERROR("aclrtCreateStream: stream is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    res = hc_rt_device_current("aclrtCreateStream", &device);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_create(device, &s);
    if (res != ACL_SUCCESS)
        return res;
    *stream = hc_rt_stream_handle(s);
    hc_rt_stream_put(s);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtDestroyStream(aclrtStream stream)
{
    return hc_rt_stream_destroy(stream);
}

/* Bounded synchronisation; timeout -1 is aclrtSynchronizeStream. */
static aclError sync_handle(aclrtStream stream, int64_t timeout_ms, const char *call)
{
    hc_rt_stream_t *s;
    aclError res;

    res = hc_rt_stream_get(stream, call, &s);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_sync(s, timeout_ms);
    hc_rt_stream_put(s);
    return res;
}

/*
 * The stream's error is cleared by the synchronisation that reports it: after a failed HCCL
 * operation the stream stays usable (the communicator keeps its own sticky error, which
 * HcclGetCommAsyncError reports and which makes later operations on it fail fast).
 */
HC_RT_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream)
{
    return sync_handle(stream, -1, "aclrtSynchronizeStream");
}

HC_RT_EXPORT aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
    if (timeout < -1) {
        HC_ERROR("aclrtSynchronizeStreamWithTimeout: timeout %d ms is invalid (-1: no bound, >= 0: ms)",
                 timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    return sync_handle(stream, timeout, "aclrtSynchronizeStreamWithTimeout");
}

HC_RT_EXPORT aclError aclrtHostLaunchTask(aclrtStream stream, aclrtHostTaskFn fn, void *arg, const char *what)
{
    hc_rt_stream_t *s;
    aclError res;

    if (fn == NULL) {
        HC_ERROR("aclrtHostLaunchTask: fn is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (what == NULL)
        what = "host task";
    res = hc_rt_stream_get(stream, what, &s); /* errors name the public call that made the task */
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_enqueue(s, fn, arg, what);
    hc_rt_stream_put(s);
    return res;
}

HC_RT_EXPORT aclError aclrtHostLaunchTaskIn(aclrtStream stream, aclrtHostTask *task)
{
    hc_rt_stream_t *s;
    aclError res;

    if (task == NULL || task->fn == NULL) {
        HC_ERROR("aclrtHostLaunchTaskIn: %s is NULL", task == NULL ? "task" : "task->fn");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (task->what == NULL)
        task->what = "host task";
    task->owned = 0;
    /* Errors about the stream name the public call that made the task (libhccl passes
     * "HcclAllReduce"): the user never called this internal entry. */
    res = hc_rt_stream_get(stream, task->what, &s);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_enqueue_task(s, task);
    hc_rt_stream_put(s);
    return res;
}

static aclError callback_task(void *arg)
{
    callback_args_t *args = arg;

    args->fn(args->user_data);
    free(args);
    return ACL_SUCCESS;
}

/* Both block types run the callback on the executor, in stream order: later tasks wait for it. */
HC_RT_EXPORT aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                                          aclrtStream stream)
{
    callback_args_t *args;
    aclError res;

    if (fn == NULL || (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)) {
        HC_ERROR("aclrtLaunchCallback: %s", fn == NULL ? "fn is NULL" : "blockType is not a valid value");
        return ACL_ERROR_INVALID_PARAM;
    }
    args = malloc(sizeof(*args));
    if (args == NULL) {
        HC_ERROR("aclrtLaunchCallback: out of memory");
        return ACL_ERROR_BAD_ALLOC;
    }
    *args = (callback_args_t){.fn = fn, .user_data = userData};
    res = aclrtHostLaunchTask(stream, callback_task, args, "aclrtLaunchCallback");
    if (res != ACL_SUCCESS)
        free(args);
    return res;
}

/* Report threads are not needed on a host; subscribing only checks that the stream exists. */
static aclError check_stream(aclrtStream stream, const char *call)
{
    hc_rt_stream_t *s;
    aclError res = hc_rt_stream_get(stream, call, &s);

    if (res == ACL_SUCCESS)
        hc_rt_stream_put(s);
    return res;
}

HC_RT_EXPORT aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)
{
    (void)threadId;
    return check_stream(stream, "aclrtSubscribeReport");
}

HC_RT_EXPORT aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)
{
    (void)threadId;
    return check_stream(stream, "aclrtUnSubscribeReport");
}

/* There are never reports to process: sleep for the timeout, then say so. */
HC_RT_EXPORT aclError aclrtProcessReport(int32_t timeout)
{
    int64_t ms = timeout == -1 ? REPORT_IDLE_MS : timeout;
    struct timespec left = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};

    if (timeout < -1) {
        HC_ERROR("aclrtProcessReport: timeout %d ms is invalid (-1: no bound, >= 0: ms)", timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        continue;
    return ACL_ERROR_WAIT_CALLBACK_TIMEOUT;
}
