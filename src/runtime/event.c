/*
 * Events, with generation counters.
 *
 * aclrtRecordEvent bumps the event's recorded generation when it is called and enqueues a task
 * that marks that generation completed (and timestamps it) when the stream reaches it. A waiter
 * captures the recorded generation when it is called, so it waits for the latest record at that
 * moment and is not confused by later records, exactly as CUDA and CANN define it. A never-recorded
 * (or reset) event has nothing to wait for and does not block.
 *
 * Tasks hold a reference to the event, so destroying an event with records still queued is safe:
 * the object lives until the last of them has run.
 *
 * One simplification: when one event is recorded on two streams at once, completion is tracked as
 * the highest completed generation, so a later record that completes first also releases waiters
 * of the earlier one. Programs record an event on one stream at a time.
 */
#include <errno.h>
#include <stdlib.h>

#include "hc_config.h"
#include "hc_log.h"
#include "hc_rt.h"

typedef struct event_task event_task_t;

typedef struct {
    hc_rt_object_t base; /* first: the registry holds events by their base */
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t completed_cv;
    uint64_t recorded_gen;  /* records requested so far */
    atomic_uint_fast64_t completed_gen; /* the highest record that has run (written under the lock) */
    int64_t completed_ns;   /* when it ran (hc_fast_now_ns) */
    int recorded;           /* 0 before the first record and after a reset */
    void *record_stream;    /* the stream of the latest record, to refuse waiting from inside it */
    void *pos_stream;       /* record pos_gen was enqueued as task pos of pos_stream (hc_rt_stream_wait_begin) */
    uint64_t pos, pos_gen;
    uint32_t flags;         /* ACL_EVENT_*: accepted; a host event is always timed and host-waitable */
    event_task_t *spare;    /* the last record's task, for the next record (no allocation per record) */
} event_t;

/* A record, reset or wait on a stream: the stream's entry and what the task needs, in one block. */
struct event_task {
    aclrtHostTask entry; /* owned 0: the task frees (or keeps) the block itself */
    event_t *event;      /* holds a reference */
    uint64_t gen;
    void *stream;        /* for log lines */
};

static void event_release(hc_rt_object_t *obj)
{
    event_t *ev = (event_t *)obj;

    pthread_cond_destroy(&ev->completed_cv);
    pthread_mutex_destroy(&ev->lock);
    free(ev->spare);
    free(ev);
}

static aclError event_get(aclrtEvent handle, const char *call, event_t **event_p)
{
    hc_rt_object_t *obj;

    if (hc_rt_handle_borrow(handle, HC_RT_KIND_EVENT, &obj) != ACL_SUCCESS) {
        if (hc_rt_handle_from_parent(handle, HC_RT_KIND_EVENT))
            HC_ERROR("%s: event %p was created by the parent process before fork(); a child has none of its "
                     "parent's events: create its own", call, handle);
        else
            HC_ERROR("%s: event %p is not a live event (NULL, destroyed, never created, or not an event)",
                     call, handle);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    *event_p = (event_t *)obj;
    return ACL_SUCCESS;
}

/* The end of a call's use of an event it got from event_get (on the same thread). */
static void event_return(event_t *ev)
{
    hc_rt_handle_return(&ev->base);
}

/* Drop a task's reference (taken with hc_rt_object_ref). */
static void event_put(event_t *ev)
{
    hc_rt_object_unref(&ev->base);
}

/* Mark generation gen completed now. `done`: the record's task, which becomes the event's spare
 * (freed if it has one). */
static void complete(event_t *ev, uint64_t gen, event_task_t *done)
{
    pthread_mutex_lock(&ev->lock);
    if (gen > atomic_load_explicit(&ev->completed_gen, memory_order_relaxed)) {
        ev->completed_ns = hc_fast_now_ns();
        atomic_store_explicit(&ev->completed_gen, gen, memory_order_release);
        pthread_cond_broadcast(&ev->completed_cv);
    }
    if (done != NULL && ev->spare == NULL) {
        ev->spare = done;
        done = NULL;
    }
    pthread_mutex_unlock(&ev->lock);
    free(done);
}

/* Wait until generation gen has completed or deadline_ns passes (0: no deadline); ACL_SUCCESS
 * or ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, not logged. */
static aclError wait_until(event_t *ev, uint64_t gen, int64_t deadline_ns, uint64_t *completed_p)
{
    int err = 0;

    pthread_mutex_lock(&ev->lock);
    while (atomic_load_explicit(&ev->completed_gen, memory_order_relaxed) < gen && err != ETIMEDOUT)
        err = hc_rt_cond_wait_until(&ev->completed_cv, &ev->lock, deadline_ns);
    *completed_p = atomic_load_explicit(&ev->completed_gen, memory_order_relaxed);
    pthread_mutex_unlock(&ev->lock);
    return *completed_p >= gen ? ACL_SUCCESS : ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
}

/* Where a record was enqueued: task pos of stream (hc_rt_stream_wait_begin); pos 0: not known. */
typedef struct {
    uint64_t pos;
    void *stream;
} record_at_t;

/* Where record gen was enqueued, if it is known yet (the record publishes it after enqueueing).
 * Called with the lock held. */
static record_at_t record_at(const event_t *ev, uint64_t gen)
{
    return (record_at_t){.pos = ev->pos_gen == gen ? ev->pos : 0, .stream = ev->pos_stream};
}

/* A thread is about to wait for record gen, or asks whether it has run: where the callers run the
 * recording stream's tasks, nobody else would run them before that stream's synchronisation or the
 * worker's backstop poll, a millisecond or more later (the demo's host mode, which waits for its
 * collectives' end events, ran 0.67-0.76x as fast as its serial mode so). Its worker runs them up to
 * the record (hc_rt_stream_wait_begin), and the program's own wait is seen by the policy. `at`:
 * where the record is, as the caller found it under the lock (NULL, or pos 0: looked up here). */
static void start_record(event_t *ev, uint64_t gen, hc_rt_stream_wait_t *wait, const record_at_t *at)
{
    record_at_t where;

    if (at == NULL || at->pos == 0) {
        pthread_mutex_lock(&ev->lock);
        where = record_at(ev, gen);
        pthread_mutex_unlock(&ev->lock);
        at = &where;
    }
    if (wait != NULL)
        wait->stream = NULL;
    if (at->pos != 0)
        hc_rt_stream_wait_begin(at->stream, at->pos, wait);
}

/* Has generation gen completed? *completed_p: the highest that has. */
static int completed_now(event_t *ev, uint64_t gen, uint64_t *completed_p)
{
    *completed_p = atomic_load_explicit(&ev->completed_gen, memory_order_acquire);
    return *completed_p >= gen;
}

/* Wait until generation gen has completed, at most timeout_s seconds (0: no bound): the op wait
 * timeout for a stream (aclrtSetOpWaitTimeout, else HCCL_EXEC_TIMEOUT), HCCL_EXEC_TIMEOUT for the
 * host, counted once the recording stream's tasks that this thread runs (start_record, each bounded
 * itself) are done. The bound is read from the environment only by a wait that blocks: a pipelined
 * program's wait usually finds its record run by start_record, and the read (getenv and parsing)
 * was a tenth of the instructions of each of its rounds. stream: the waiting stream, for the log
 * line; NULL for aclrtSynchronizeEvent. */
static aclError wait_completed(event_t *ev, uint64_t gen, const void *stream, int64_t entry_ns,
                               const record_at_t *at)
{
    hc_rt_stream_wait_t wait = {.stream = NULL, .entry_ns = entry_ns};
    int64_t exec_timeout_s = 0, timeout_s = 0;
    uint64_t completed;
    aclError res = ACL_SUCCESS;

    start_record(ev, gen, stream == NULL ? &wait : NULL, at); /* the host's wait, not a task's */
    if (!completed_now(ev, gen, &completed)) {
        exec_timeout_s = hc_config_int(HC_CFG_EXEC_TIMEOUT);
        timeout_s = stream != NULL ? hc_rt_op_wait_timeout_s(exec_timeout_s) : exec_timeout_s;
        res = wait_until(ev, gen, hc_deadline_after_s(timeout_s), &completed);
    }
    hc_rt_stream_wait_end(&wait);

    if (res == ACL_SUCCESS)
        return res;
    if (stream != NULL)
        HC_ERROR("stream %p waited %lld s for record %llu of event %p, which has not run (last "
                 "completed: %llu); the recording stream is stuck or slow (aclrtSetOpWaitTimeout, "
                 "HCCL_EXEC_TIMEOUT)", stream, (long long)timeout_s, (unsigned long long)gen, ev->base.handle,
                 (unsigned long long)completed);
    else
        HC_ERROR("aclrtSynchronizeEvent waited %lld s for record %llu of event %p, which has not run "
                 "(last completed: %llu); the recording stream is stuck or slow (HCCL_EXEC_TIMEOUT)",
                 (long long)timeout_s, (unsigned long long)gen, ev->base.handle, (unsigned long long)completed);
    return res;
}

static aclError record_task(void *arg)
{
    event_task_t *task = arg;
    event_t *ev = task->event;

    complete(ev, task->gen, task);
    event_put(ev);
    return ACL_SUCCESS;
}

static aclError reset_task(void *arg)
{
    event_task_t *task = arg;
    event_t *ev = task->event;

    /* A record made after the reset was called wins over the reset. */
    pthread_mutex_lock(&ev->lock);
    if (ev->recorded_gen == task->gen)
        ev->recorded = 0;
    pthread_mutex_unlock(&ev->lock);
    event_put(ev);
    free(task);
    return ACL_SUCCESS;
}

static aclError wait_task(void *arg)
{
    event_task_t *task = arg;
    aclError res = wait_completed(task->event, task->gen, task->stream, 0, NULL);

    event_put(task->event);
    free(task);
    return res;
}

/* A task of fn on stream for generation gen, in `task` (the event's spare) or a new block; takes its
 * own reference to ev. */
static aclError enqueue_event_task(const char *call, hc_rt_stream_t *stream, event_t *ev, uint64_t gen,
                                   aclrtHostTaskFn fn, const char *what, event_task_t *task, uint64_t *pos_p)
{
    aclError res;

    if (task == NULL && (task = malloc(sizeof(*task))) == NULL) {
        HC_ERROR("%s: out of memory", call);
        return ACL_ERROR_BAD_ALLOC;
    }
    hc_rt_object_ref(&ev->base);
    *task = (event_task_t){.entry = {.fn = fn, .arg = task, .what = what, .bounded = 1}, /* each ends in its bound */
                           .event = ev, .gen = gen, .stream = hc_rt_stream_handle(stream)};
    res = hc_rt_stream_enqueue_task(stream, &task->entry, pos_p);
    if (res != ACL_SUCCESS) {
        event_put(ev);
        free(task);
    }
    return res;
}

static aclError create_event(aclrtEvent *event, uint32_t flags, const char *call)
{
    event_t *ev;
    aclError res;

    if (event == NULL) {
        HC_ERROR("%s: event is NULL", call);
        return ACL_ERROR_INVALID_PARAM;
    }
    ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        HC_ERROR("%s: out of memory", call);
        return ACL_ERROR_BAD_ALLOC;
    }
    ev->base.kind = HC_RT_KIND_EVENT;
    ev->base.release = event_release;
    ev->flags = flags;
    atomic_init(&ev->base.refs, 1);
    if (pthread_mutex_init(&ev->lock, NULL) != 0 || hc_rt_cond_init(&ev->completed_cv) != 0) {
        HC_ERROR("%s: no mutex or condition variable", call);
        free(ev);
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    }
    res = hc_rt_handle_register(&ev->base);
    if (res != ACL_SUCCESS) {
        event_release(&ev->base);
        return res;
    }
    *event = ev->base.handle;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtCreateEvent(aclrtEvent *event)
{
    return hc_rt_ret(create_event(event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE, "aclrtCreateEvent"));
}

/*
 * SYNC (the host may wait for it), TIME_LINE (it is timed), CAPTURE_STREAM_PROGRESS and
 * DEVICE_USE_ONLY describe what an NPU event must support; a host event does all of it, so they are
 * accepted. EXTERNAL and IPC events are shared with other processes, which a host event cannot be.
 */
static aclError check_event_flags(uint32_t flags, const char *call)
{
    const uint32_t host = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE | ACL_EVENT_CAPTURE_STREAM_PROGRESS |
                          ACL_EVENT_DEVICE_USE_ONLY;

    if ((flags & (ACL_EVENT_EXTERNAL | ACL_EVENT_IPC)) != 0) {
        HC_ERROR("%s: external and IPC events (flag 0x%x) are not supported on a host", call, flags);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    if ((flags & ~host) != 0) {
        HC_ERROR("%s: flag 0x%x has bits that are not ACL_EVENT_* flags", call, flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)
{
    aclError res = check_event_flags(flag, "aclrtCreateEventWithFlag");

    if (res == ACL_SUCCESS)
        res = create_event(event, flag, "aclrtCreateEventWithFlag");
    return hc_rt_ret(res);
}

/* The Ex events of CANN can be recorded again without a reset; host events always can. */
HC_RT_EXPORT aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)
{
    aclError res = check_event_flags(flag, "aclrtCreateEventExWithFlag");

    if (res == ACL_SUCCESS)
        res = create_event(event, flag, "aclrtCreateEventExWithFlag");
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtDestroyEvent(aclrtEvent event)
{
    hc_rt_object_t *obj;

    if (hc_rt_handle_unregister(event, HC_RT_KIND_EVENT, &obj) != ACL_SUCCESS) {
        HC_ERROR("aclrtDestroyEvent: event %p is not a live event (NULL, destroyed twice, never "
                 "created, or not an event)", event);
        return hc_rt_ret(ACL_ERROR_RT_INVALID_HANDLE);
    }
    hc_rt_object_unref(obj);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    hc_rt_stream_t *s;
    event_t *ev;
    event_task_t *spare;
    uint64_t gen, pos = 0;
    aclError res;

    res = event_get(event, "aclrtRecordEvent", &ev);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = hc_rt_stream_borrow(stream, "aclrtRecordEvent", &s);
    if (res != ACL_SUCCESS)
        goto put_event;
    pthread_mutex_lock(&ev->lock);
    gen = ++ev->recorded_gen;
    ev->recorded = 1;
    ev->record_stream = hc_rt_stream_handle(s);
    spare = ev->spare;
    ev->spare = NULL;
    pthread_mutex_unlock(&ev->lock);
    res = enqueue_event_task("aclrtRecordEvent", s, ev, gen, record_task, "record event", spare, &pos);
    /* The generation exists now; completing it at once keeps its waiters from waiting forever. */
    if (res != ACL_SUCCESS) {
        complete(ev, gen, NULL);
    } else {
        pthread_mutex_lock(&ev->lock);
        ev->pos_stream = hc_rt_stream_handle(s);
        ev->pos = pos;
        ev->pos_gen = gen;
        pthread_mutex_unlock(&ev->lock);
        hc_rt_stream_throttle(s); /* after: a waiter meanwhile finds the position */
    }
    hc_rt_stream_return(s);
put_event:
    event_return(ev);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)
{
    hc_rt_stream_t *s;
    event_t *ev;
    uint64_t gen;
    aclError res;

    res = event_get(event, "aclrtResetEvent", &ev);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = hc_rt_stream_borrow(stream, "aclrtResetEvent", &s);
    if (res != ACL_SUCCESS)
        goto put_event;
    pthread_mutex_lock(&ev->lock);
    gen = ev->recorded_gen;
    pthread_mutex_unlock(&ev->lock);
    res = enqueue_event_task("aclrtResetEvent", s, ev, gen, reset_task, "reset event", NULL, NULL);
    hc_rt_stream_return(s);
put_event:
    event_return(ev);
    return hc_rt_ret(res);
}

/* The generation a waiter must see completed now; 0 when there is nothing to wait for. at (may be
 * NULL): where that record is, if known yet. */
static uint64_t pending_gen(event_t *ev, void **record_stream_p, record_at_t *at)
{
    uint64_t gen = 0;

    pthread_mutex_lock(&ev->lock);
    if (ev->recorded && atomic_load_explicit(&ev->completed_gen, memory_order_relaxed) < ev->recorded_gen)
        gen = ev->recorded_gen;
    *record_stream_p = ev->record_stream;
    if (at != NULL)
        *at = record_at(ev, gen);
    pthread_mutex_unlock(&ev->lock);
    return gen;
}

HC_RT_EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    hc_rt_stream_t *s;
    event_t *ev;
    void *record_stream;
    uint64_t gen;
    aclError res;

    res = event_get(event, "aclrtStreamWaitEvent", &ev);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = hc_rt_stream_borrow(stream, "aclrtStreamWaitEvent", &s);
    if (res != ACL_SUCCESS)
        goto put_event;
    gen = pending_gen(ev, &record_stream, NULL);
    if (gen != 0)
        res = enqueue_event_task("aclrtStreamWaitEvent", s, ev, gen, wait_task, "wait event", NULL, NULL);
    hc_rt_stream_return(s);
put_event:
    event_return(ev);
    return hc_rt_ret(res);
}

/* Wait for the latest record: timeout_ms < 0 is bounded by HCCL_EXEC_TIMEOUT (logged when it
 * passes), else by timeout_ms (0: only look), reported without a log line at the caller's wish. */
static aclError sync_event(aclrtEvent event, int64_t timeout_ms, const char *call)
{
    /* An untimed wait's gap (the policy's) ends here, not after the lookups below. */
    int64_t entry_ns = timeout_ms < 0 ? hc_fast_now_ns() : 0;
    event_t *ev;
    void *record_stream;
    record_at_t at;
    uint64_t gen, completed;
    aclError res;

    res = event_get(event, call, &ev);
    if (res != ACL_SUCCESS)
        return res;
    gen = pending_gen(ev, &record_stream, &at);
    if (gen != 0 && hc_rt_stream_runs_here(record_stream)) {
        HC_ERROR("%s: event %p was recorded on stream %p, whose task is calling; waiting would wait for itself "
                 "forever", call, event, record_stream);
        res = ACL_ERROR_INVALID_PARAM;
    } else if (gen != 0 && timeout_ms < 0) {
        res = wait_completed(ev, gen, NULL, entry_ns, &at);
    } else if (gen != 0) {
        start_record(ev, gen, NULL, &at);
        res = wait_until(ev, gen, hc_now_ns() + timeout_ms * HC_NS_PER_MS, &completed);
        if (res != ACL_SUCCESS)
            HC_ERROR("%s: record %llu of event %p has not completed within %lld ms", call,
                     (unsigned long long)gen, event, (long long)timeout_ms);
    }
    event_return(ev);
    return res;
}

HC_RT_EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    return hc_rt_ret(sync_event(event, -1, "aclrtSynchronizeEvent"));
}

HC_RT_EXPORT aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)
{
    if (timeout < -1) {
        HC_ERROR("aclrtSynchronizeEventWithTimeout: timeout %d ms is invalid (-1: no bound, >= 0: ms)", timeout);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    return hc_rt_ret(sync_event(event, timeout, "aclrtSynchronizeEventWithTimeout"));
}

/* Complete: the latest record has run. recorded_only: a never-recorded event is not complete. */
static int is_complete(event_t *ev, int recorded_only)
{
    int complete_now;
    uint64_t pending = 0, completed;
    record_at_t at = {.pos = 0};

    pthread_mutex_lock(&ev->lock);
    completed = atomic_load_explicit(&ev->completed_gen, memory_order_relaxed);
    complete_now = completed >= ev->recorded_gen && (ev->recorded || !recorded_only);
    if (completed < ev->recorded_gen) {
        pending = ev->recorded_gen;
        at = record_at(ev, pending);
    }
    pthread_mutex_unlock(&ev->lock);
    if (pending != 0)
        start_record(ev, pending, NULL, &at); /* a program that polls instead of waiting sees it run */
    return complete_now;
}

/* A never-recorded event counts as complete here, as in CUDA: waiting for it would not block. */
HC_RT_EXPORT aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status)
{
    event_t *ev;
    aclError res;

    if (status == NULL) {
        HC_ERROR("aclrtQueryEvent: status is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = event_get(event, "aclrtQueryEvent", &ev);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    *status = is_complete(ev, 0) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    event_return(ev);
    return ACL_SUCCESS;
}

/* The newer form answers "has a record completed": a never-recorded event is not ready. */
HC_RT_EXPORT aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    event_t *ev;
    aclError res;

    if (status == NULL) {
        HC_ERROR("aclrtQueryEventStatus: status is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = event_get(event, "aclrtQueryEventStatus", &ev);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    *status = is_complete(ev, 1) ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    event_return(ev);
    return ACL_SUCCESS;
}

/* The completion time of the event's latest record, or 0 when it is not recorded and complete. */
static int64_t completion_time(event_t *ev)
{
    int64_t ns = 0;

    pthread_mutex_lock(&ev->lock);
    if (ev->recorded && atomic_load_explicit(&ev->completed_gen, memory_order_relaxed) >= ev->recorded_gen)
        ns = ev->completed_ns;
    pthread_mutex_unlock(&ev->lock);
    return ns;
}

HC_RT_EXPORT aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    event_t *start, *end;
    int64_t start_ns, end_ns;
    aclError res;

    if (ms == NULL) {
        HC_ERROR("aclrtEventElapsedTime: ms is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = event_get(startEvent, "aclrtEventElapsedTime", &start);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    res = event_get(endEvent, "aclrtEventElapsedTime", &end);
    if (res != ACL_SUCCESS)
        goto put_start;
    start_ns = completion_time(start);
    end_ns = completion_time(end);
    if (start_ns == 0 || end_ns == 0) {
        HC_ERROR("aclrtEventElapsedTime: event %p has not completed a record yet",
                 start_ns == 0 ? startEvent : endEvent);
        res = ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    } else {
        *ms = (float)((double)(end_ns - start_ns) / (double)HC_NS_PER_MS);
    }
    event_return(end);
put_start:
    event_return(start);
    return hc_rt_ret(res);
}
