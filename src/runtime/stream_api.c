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
#include "rt_policy.h"

/* aclrtProcessReport with timeout -1 returns after this long, so that the usual loop around it
 * sleeps instead of spinning. */
#define REPORT_IDLE_MS 1000

typedef struct {
    aclrtCallback fn;
    void *user_data;
} callback_args_t;

static aclError create_stream(aclrtStream *stream, const char *call)
{
    hc_rt_stream_t *s;
    int32_t device;
    aclError res;

    if (stream == NULL) {
        HC_ERROR("%s: stream is NULL", call);
        return ACL_ERROR_INVALID_PARAM;
    }
    res = hc_rt_device_current(call, &device);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_create(device, &s);
    if (res != ACL_SUCCESS)
        return res;
    *stream = hc_rt_stream_handle(s);
    hc_rt_stream_put(s);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtCreateStream(aclrtStream *stream)
{
    return hc_rt_ret(create_stream(stream, "aclrtCreateStream"));
}

/* Priorities and the fast-launch/sync flags tune an NPU's task scheduler; a host stream is one
 * in-order queue either way, so they are checked and accepted. */
HC_RT_EXPORT aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)
{
    const uint32_t known = ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT | ACL_STREAM_HUGE |
                           ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;

    if (priority > 7 || (flag & ~known) != 0) {
        HC_ERROR("aclrtCreateStreamWithConfig: %s", priority > 7 ? "priority must be 0..7" : "unknown flag bits");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(create_stream(stream, "aclrtCreateStreamWithConfig"));
}

HC_RT_EXPORT aclError aclrtDestroyStream(aclrtStream stream)
{
    return hc_rt_ret(hc_rt_stream_destroy(stream));
}

HC_RT_EXPORT aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)
{
    hc_rt_stream_t *s;
    aclError res;

    if (status == NULL) {
        HC_ERROR("aclrtStreamQuery: status is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_stream_get(stream, "aclrtStreamQuery", &s);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    *status = hc_rt_stream_idle(s) ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    hc_rt_stream_put(s);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)
{
    hc_rt_stream_t *s;
    aclError res;

    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE) {
        HC_ERROR("aclrtSetStreamFailureMode: mode %llu is neither ACL_CONTINUE_ON_FAILURE nor ACL_STOP_ON_FAILURE",
                 (unsigned long long)mode);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_stream_get(stream, "aclrtSetStreamFailureMode", &s);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    hc_rt_stream_set_stop_on_failure(s, mode == ACL_STOP_ON_FAILURE);
    hc_rt_stream_put(s);
    return ACL_SUCCESS;
}

/* Bounded synchronisation; timeout -1 is aclrtSynchronizeStream. */
static aclError sync_handle(aclrtStream stream, int64_t timeout_ms, const char *call)
{
    hc_rt_stream_t *s;
    aclError res;

    res = hc_rt_stream_borrow(stream, call, &s);
    if (res != ACL_SUCCESS)
        return res;
    res = hc_rt_stream_sync(s, timeout_ms);
    hc_rt_stream_return(s);
    return res;
}

/*
 * The stream's error is cleared by the synchronisation that reports it: after a failed HCCL
 * operation the stream stays usable (the communicator keeps its own sticky error, which
 * HcclGetCommAsyncError reports and which makes later operations on it fail fast).
 */
HC_RT_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream)
{
    return hc_rt_ret(sync_handle(stream, -1, "aclrtSynchronizeStream"));
}

HC_RT_EXPORT aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
    if (timeout < -1) {
        HC_ERROR("aclrtSynchronizeStreamWithTimeout: timeout %d ms is invalid (-1: no bound, >= 0: ms)",
                 timeout);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(sync_handle(stream, timeout, "aclrtSynchronizeStreamWithTimeout"));
}

HC_RT_EXPORT aclError aclrtHostLaunchTask(aclrtStream stream, aclrtHostTaskFn fn, void *arg, const char *what)
{
    hc_rt_stream_t *s;
    aclError res;

    if (fn == NULL) {
        HC_ERROR("aclrtHostLaunchTask: fn is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (what == NULL)
        what = "host task";
    res = hc_rt_stream_get(stream, what, &s); /* errors name the public call that made the task */
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = hc_rt_stream_enqueue(s, fn, arg, what);
    hc_rt_stream_put(s);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtHostLaunchTaskIn(aclrtStream stream, aclrtHostTask *task, int *claimed_p)
{
    hc_rt_stream_t *s;
    aclError res;
    int claimed = 0;

    if (task == NULL || task->fn == NULL) {
        HC_ERROR("aclrtHostLaunchTaskIn: %s is NULL", task == NULL ? "task" : "task->fn");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (task->what == NULL)
        task->what = "host task";
    task->owned = 0;
    /* Errors about the stream name the public call that made the task (libhccl passes
     * "HcclAllReduce"): the user never called this internal entry. */
    res = hc_rt_stream_borrow(stream, task->what, &s);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = hc_rt_stream_launch(s, task, claimed_p != NULL ? &claimed : NULL);
    if (claimed == 1) {
        task->claimed = s; /* returned by aclrtHostRunClaimed, on this thread */
    } else {
        hc_rt_stream_return(s);
    }
    if (claimed_p != NULL)
        *claimed_p = claimed;
    return hc_rt_ret(res);
}

HC_RT_EXPORT void aclrtHostTaskSetErrMsg(const char *text)
{
    hc_rt_task_set_err_msg(text);
}

HC_RT_EXPORT const char *aclrtHostCarriedErrMsg(int64_t *ns_p)
{
    int carried;
    int64_t ns = hc_log_last_error_ns(&carried);

    if (ns_p != NULL)
        *ns_p = ns;
    return carried ? hc_log_last_error() : NULL;
}

HC_RT_EXPORT void aclrtHostThrottle(aclrtStream stream)
{
    hc_rt_stream_t *s;

    if (hc_rt_stream_borrow(stream, "aclrtHostThrottle", &s) != ACL_SUCCESS)
        return; /* destroyed meanwhile: nothing to wait for */
    hc_rt_stream_throttle(s);
    hc_rt_stream_return(s);
}

HC_RT_EXPORT void aclrtHostRunClaimed(aclrtHostTask *task)
{
    hc_rt_stream_t *s = task->claimed;

    task->claimed = NULL;
    hc_rt_stream_run_claimed(s, task); /* may free task */
    hc_rt_stream_return(s);
}

HC_RT_EXPORT void *aclrtHostDirectBegin(aclrtStream stream)
{
    return hc_rt_stream_direct_begin(stream);
}

HC_RT_EXPORT void aclrtHostRunReady(aclrtStream stream)
{
    hc_rt_stream_t *s;

    if (hc_rt_stream_borrow(stream, "aclrtHostRunReady", &s) != ACL_SUCCESS)
        return;
    hc_rt_stream_run_ready(s);
    hc_rt_stream_return(s);
}

HC_RT_EXPORT void aclrtHostKickRunners(void)
{
    hc_rt_stream_kick_all();
}

HC_RT_EXPORT void aclrtHostDirectEnd(void *direct, aclError err, const char *what, const char *msg)
{
    hc_rt_stream_direct_end(direct, err, what, msg);
}

HC_RT_EXPORT void aclrtHostDirectQueue(void *direct, aclrtHostTask *task)
{
    hc_rt_stream_direct_queue(direct, task);
}

HC_RT_EXPORT void aclrtHostCpusFull(int delta)
{
    hc_rt_policy_cpus_full(delta);
}

HC_RT_EXPORT void aclrtHostCpusShared(int delta)
{
    hc_rt_policy_cpus_shared(delta);
}

HC_RT_EXPORT aclError aclrtHostStreamRunner(aclrtStream stream, int *sync_pattern_p, int *runner_p)
{
    hc_rt_stream_t *s;
    aclError res;

    if (sync_pattern_p == NULL || runner_p == NULL) {
        HC_ERROR("aclrtHostStreamRunner: %s is NULL", sync_pattern_p == NULL ? "sync_pattern_p" : "runner_p");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_stream_get(stream, "aclrtHostStreamRunner", &s);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    hc_rt_stream_runner(s, sync_pattern_p, runner_p);
    hc_rt_stream_put(s);
    return ACL_SUCCESS;
}

static aclError callback_task(void *arg)
{
    callback_args_t *args = arg;

    if (!hc_rt_task_skipping())
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
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    args = malloc(sizeof(*args));
    if (args == NULL) {
        HC_ERROR("aclrtLaunchCallback: out of memory");
        return hc_rt_ret(ACL_ERROR_BAD_ALLOC);
    }
    *args = (callback_args_t){.fn = fn, .user_data = userData};
    res = aclrtHostLaunchTask(stream, callback_task, args, "aclrtLaunchCallback");
    if (res != ACL_SUCCESS)
        free(args);
    return hc_rt_ret(res);
}

typedef struct {
    aclrtHostFunc fn;
    void *args;
} host_func_args_t;

static aclError host_func_task(void *arg)
{
    host_func_args_t *call = arg;

    if (!hc_rt_task_skipping())
        call->fn(call->args);
    free(call);
    return ACL_SUCCESS;
}

/* The host function is a task like any other: stream order is the queue's order, and the same
 * executor rules apply (a function that synchronises its own stream gets an error, not a hang). */
HC_RT_EXPORT aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)
{
    host_func_args_t *call;
    aclError res;

    if (fn == NULL) {
        HC_ERROR("aclrtLaunchHostFunc: fn is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    call = malloc(sizeof(*call));
    if (call == NULL) {
        HC_ERROR("aclrtLaunchHostFunc: out of memory");
        return hc_rt_ret(ACL_ERROR_BAD_ALLOC);
    }
    *call = (host_func_args_t){.fn = fn, .args = args};
    res = aclrtHostLaunchTask(stream, host_func_task, call, "host func");
    if (res != ACL_SUCCESS)
        free(call);
    return hc_rt_ret(res);
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
    return hc_rt_ret(check_stream(stream, "aclrtSubscribeReport"));
}

HC_RT_EXPORT aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)
{
    (void)threadId;
    return hc_rt_ret(check_stream(stream, "aclrtUnSubscribeReport"));
}

/* There are never reports to process: sleep for the timeout, then say so. */
HC_RT_EXPORT aclError aclrtProcessReport(int32_t timeout)
{
    int64_t ms = timeout == -1 ? REPORT_IDLE_MS : timeout;
    struct timespec left = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};

    if (timeout < -1) {
        HC_ERROR("aclrtProcessReport: timeout %d ms is invalid (-1: no bound, >= 0: ms)", timeout);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        continue;
    return hc_rt_ret(ACL_ERROR_WAIT_CALLBACK_TIMEOUT);
}
