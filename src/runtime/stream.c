/*
 * Streams and their executor (DESIGN.md 3).
 *
 * A stream is a FIFO of host tasks. Exactly one thread at a time executes it (the `executing`
 * flag); that thread is either the stream's worker or a thread blocked in aclrtSynchronizeStream,
 * which runs the queued tasks itself instead of waiting for the worker (caller-runs). The blocking
 * pattern (enqueue, synchronise) therefore pays no thread hand-off, while the overlap pattern
 * (enqueue, do other work) still runs the tasks in the background.
 *
 * Nobody ever spins: the worker sleeps on work_cv when there is nothing it may run, synchronisers
 * sleep on done_cv while another thread executes. Ranks often outnumber cores, and a spinning
 * executor would steal the core a peer rank needs to make progress.
 *
 * Counting: enq_count tasks were ever enqueued, done_count have finished. A synchroniser's target
 * is enq_count when it arrives; because the queue is FIFO, done_count >= target means every task
 * enqueued before it has run.
 *
 * Hand-over: a synchroniser waiting without a timeout is a "driver". When the worker sees a driver
 * it stops after the current task and lets the driver run the rest, so the thread that blocks is
 * the one that works; the worker stays asleep while a driver is waiting to take over.
 *
 * Deferred wake-ups (sync mode). Waking a sleeping worker costs a futex call on the enqueue path
 * and, worse, a thread that competes for the core the peer ranks need, only for the synchronising
 * caller to take the task over anyway. So a stream starts in sync mode, where enqueue does not wake
 * the worker; instead the worker polls with a SYNC_MODE_GRACE_NS timeout. (Starting outside it cost
 * the perf tools' first size: its launches woke the worker, and under load a driver then waited for
 * a preempted worker to finish its task: 0.7-3.7 ms per 8-byte AllReduce instead of 0.6-1 us.) A task that
 * nobody synchronises is thus still started within two grace periods (so a peer waiting on it, or a
 * program blocked elsewhere, is never stuck): a task that was already queued at the previous poll,
 * with nothing finished since, turns sync mode off at once: the program overlaps, and the worker is
 * woken at every enqueue again. (A task merely queued at a poll proves nothing: the caller may be
 * between its enqueue and its synchronise, and leaving sync mode then costs a thread hand-off per
 * op until SYNC_MODE_HITS caller runs in a row bring it back.) A queue that is still growing
 * belongs to a caller in the middle of a burst of launches; it gets SYNC_MODE_BURST_POLLS grace
 * periods to come and synchronise. Out of sync mode, the stream watches who runs its tasks: when
 * the last SYNC_MODE_HITS tasks were all run by synchronising callers, it enters sync mode again.
 * An idle worker in sync mode stops polling after SYNC_MODE_IDLE_POLLS empty polls (dormant), so
 * an idle stream sleeps without timeouts; the next enqueue wakes it.
 * The grace period (1 ms) bounds the delay of a mispredicted task; it is long enough that polling
 * workers cost little when ranks outnumber cores (a thousand wake-ups a second per stream).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_log.h"
#include "hc_rt.h"

typedef aclrtHostTask hc_rt_task_t;

struct hc_rt_stream {
    hc_rt_object_t base; /* first: the registry holds streams by their base */
    int32_t device;
    unsigned number; /* names the worker thread hc-stream-N */
    pthread_t worker;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t work_cv; /* the worker sleeps here */
    pthread_cond_t done_cv; /* synchronisers sleep here while another thread executes */
    hc_rt_task_t *head, *tail;
    uint64_t enq_count, done_count;
    int executing;
    unsigned drivers; /* untimed synchronisers sleeping on done_cv, ready to take over */
    unsigned waiters; /* every thread sleeping on done_cv */
    int sync_mode;       /* enqueue does not wake the worker (see the top of this file) */
    int dormant;         /* the worker sleeps without polling while in sync mode (idle) */
    int kicked;          /* someone asked the worker to run the queue now (kick_worker) */
    unsigned caller_hits; /* consecutive tasks run by synchronising callers */
    unsigned idle_polls; /* consecutive empty grace polls in sync mode */
    uint64_t poll_done, poll_enq; /* done_count and enq_count at the worker's last grace poll */
    unsigned stalled_polls; /* consecutive polls that found the queue stuck but growing */
    aclError first_error; /* since the last synchronisation */
    const char *first_error_what;
    int stop_on_failure; /* ACL_STOP_ON_FAILURE: skip what can be skipped while first_error is set */
    int stopping; /* destroy has begun: no more tasks are accepted */
};

/*
 * The streams the calling thread is executing, innermost first. A task may synchronise another
 * stream and so run that stream's tasks on the same thread; the chain lets any of those tasks see
 * that synchronising or destroying a stream further out would wait for itself.
 */
typedef struct exec_frame {
    const hc_rt_stream_t *stream;
    struct exec_frame *outer;
} exec_frame_t;

#define SYNC_MODE_HITS 8
#define SYNC_MODE_GRACE_NS (1000 * 1000)
#define SYNC_MODE_IDLE_POLLS 1000 /* about one second of empty polls */
#define SYNC_MODE_BURST_POLLS 8    /* how long a growing queue may wait for its caller (ms) */

static HC_TLS_FAST exec_frame_t *tls_frames;
static HC_TLS_FAST int tls_skipping; /* the running task should skip its work (ACL_STOP_ON_FAILURE) */
static atomic_uint next_number;

int hc_rt_task_skipping(void)
{
    return tls_skipping;
}

static int runs_here(const hc_rt_stream_t *s)
{
    for (const exec_frame_t *f = tls_frames; f != NULL; f = f->outer)
        if (f->stream == s)
            return 1;
    return 0;
}

int hc_rt_stream_runs_here(const void *handle)
{
    for (const exec_frame_t *f = tls_frames; f != NULL; f = f->outer)
        if (f->stream->base.handle == handle)
            return 1;
    return 0;
}

int32_t hc_rt_stream_device(const hc_rt_stream_t *stream)
{
    return stream->device;
}

void *hc_rt_stream_handle(const hc_rt_stream_t *stream)
{
    return stream->base.handle;
}

/* Wake the worker when it is the one that should run the queue now. Called with the lock held. */
static void kick_worker(hc_rt_stream_t *s)
{
    if (!s->executing && s->drivers == 0 && (s->head != NULL || s->stopping)) {
        s->kicked = 1;
        pthread_cond_signal(&s->work_cv);
    }
}

/* Count who ran a task; enough callers in a row enter sync mode. Called with the lock held. */
static void note_runner(hc_rt_stream_t *s, int by_worker)
{
    if (by_worker) {
        s->caller_hits = 0;
        return;
    }
    if (++s->caller_hits >= SYNC_MODE_HITS && !s->sync_mode) {
        s->sync_mode = 1;
        s->idle_polls = 0;
        s->poll_done = s->done_count;
        s->poll_enq = s->enq_count;
        pthread_cond_signal(&s->work_cv); /* the worker switches to timed polls */
    }
}

static void record_result(hc_rt_stream_t *s, aclError err, const char *what)
{
    s->done_count++;
    if (err == ACL_SUCCESS)
        return;
    HC_DEBUG("task %s on stream %p failed with error %d", what, s->base.handle, err);
    if (s->first_error == ACL_SUCCESS) {
        s->first_error = err;
        s->first_error_what = what;
    }
}

/* Run one task, timed for the profiler when it records this stream's device. */
static aclError run_one(const hc_rt_stream_t *s, hc_rt_task_t *task, int skipping)
{
    const char *what = task->what; /* the task may free itself */
    int outer_skipping = tls_skipping; /* a task may run another stream's tasks (synchronising it) */
    hc_rt_prof_task_t prof;
    aclError err;

    tls_skipping = skipping;
    if (!hc_rt_prof_wants(s->device)) {
        err = task->fn(task->arg);
    } else {
        hc_rt_prof_task_begin(&prof);
        err = task->fn(task->arg);
        hc_rt_prof_task_end(&prof, what, s->device, s->number, err);
    }
    tls_skipping = outer_skipping;
    return err;
}

/*
 * Execute queued tasks until done_count reaches target or the queue is empty; the worker (with
 * yield_to_drivers) also stops as soon as a driver is waiting. Called with the lock held and no
 * executor; each task runs with the lock released.
 */
static void run_tasks(hc_rt_stream_t *s, uint64_t target, int yield_to_drivers)
{
    exec_frame_t frame = {.stream = s, .outer = tls_frames};
    int32_t caller_device;

    s->executing = 1;
    tls_frames = &frame;
    /* Tasks run with their stream's device current, whichever thread executes them, so that a task
     * calling a device-scoped acl function means the stream's device. */
    caller_device = hc_rt_device_swap(s->device);
    while (s->head != NULL && s->done_count < target && !(yield_to_drivers && s->drivers > 0)) {
        hc_rt_task_t *task = s->head;
        const char *what = task->what;
        int owned = task->owned;
        int skipping = s->stop_on_failure && s->first_error != ACL_SUCCESS;
        aclError err;

        s->head = task->link;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        err = run_one(s, task, skipping); /* may free the task when the caller owns it */
        if (owned)
            free(task);
        pthread_mutex_lock(&s->lock);
        record_result(s, err, what);
        note_runner(s, yield_to_drivers);
        if (s->waiters > 0)
            pthread_cond_broadcast(&s->done_cv);
    }
    hc_rt_device_swap(caller_device);
    tls_frames = frame.outer;
    s->executing = 0;
    if (s->waiters > 0)
        pthread_cond_broadcast(&s->done_cv);
}

/*
 * Whether a task has waited a whole grace period without anyone running it: it was already queued
 * at the previous poll, nothing finished since, and nobody is executing or about to. Finding merely
 * some task queued is not enough: a caller that enqueues and is about to synchronise is seen that way
 * about as often as the poll falls between its two calls. Called with the lock held.
 */
static int stalled_since_last_poll(hc_rt_stream_t *s)
{
    if (!(s->head != NULL && !s->executing && s->drivers == 0 && s->poll_enq > s->poll_done &&
          s->done_count == s->poll_done)) {
        s->stalled_polls = 0;
        return 0;
    }
    /* A caller still enqueueing is in a burst it will synchronise after (the perf tools' pattern:
     * launch every iteration, then synchronise): running the burst on this thread meanwhile would
     * only compete with it and the peers for the cores. Up to SYNC_MODE_BURST_POLLS. */
    return s->enq_count == s->poll_enq || ++s->stalled_polls >= SYNC_MODE_BURST_POLLS;
}

static void *worker_main(void *arg)
{
    hc_rt_stream_t *s = arg;
    char name[16];

    snprintf(name, sizeof(name), "hc-stream-%u", s->number % 100000u);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        /* In sync mode the queue belongs to the callers who will synchronise; the worker runs it
         * only when kicked (a bounded synchroniser, leftovers of a driver, a dormant wake-up) or
         * once the stall rule has ended sync mode, never merely because a poll found tasks (it
         * would compete with the launching caller and the peers for the cores). */
        if (!s->executing && s->drivers == 0 && s->head != NULL && (!s->sync_mode || s->kicked)) {
            s->kicked = 0;
            run_tasks(s, UINT64_MAX, 1);
            continue;
        }
        /* New tasks cannot arrive once stopping is set; the destroyer runs what is left. */
        if (s->stopping && s->head == NULL)
            break;
        if (!s->sync_mode || s->idle_polls >= SYNC_MODE_IDLE_POLLS) {
            /* Idle in sync mode: sleep without polling, still in sync mode; the next enqueue wakes
             * this thread, which runs that task (one hand-off after each idle second) and polls again. */
            s->dormant = s->sync_mode;
            pthread_cond_wait(&s->work_cv, &s->lock);
            s->dormant = 0;
            s->idle_polls = 0;
            continue;
        }
        if (hc_rt_cond_wait_until(&s->work_cv, &s->lock, hc_now_ns() + SYNC_MODE_GRACE_NS) == 0)
            continue;
        if (stalled_since_last_poll(s)) {
            s->sync_mode = 0; /* a task waited a whole grace period: the program overlaps */
            s->caller_hits = 0;
        } else if (s->head == NULL) {
            s->idle_polls++;
        }
        s->poll_done = s->done_count;
        s->poll_enq = s->enq_count;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Run or wait until done_count reaches target (caller-runs). Called with the lock held. */
static void drive_until(hc_rt_stream_t *s, uint64_t target)
{
    while (s->done_count < target) {
        if (!s->executing) {
            run_tasks(s, target, 0);
            continue;
        }
        s->drivers++;
        s->waiters++;
        pthread_cond_wait(&s->done_cv, &s->lock);
        s->waiters--;
        s->drivers--;
    }
    /* The worker stayed asleep while this thread was a driver; tasks enqueued since are its. */
    kick_worker(s);
}

/* Wait, without executing, until done_count reaches target or the deadline passes. */
static aclError wait_until(hc_rt_stream_t *s, uint64_t target, int64_t deadline_ns)
{
    kick_worker(s); /* in sync mode the worker may not know about the tasks yet */
    while (s->done_count < target) {
        if (hc_deadline_passed(deadline_ns))
            return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
        s->waiters++;
        hc_rt_cond_wait_until(&s->done_cv, &s->lock, deadline_ns);
        s->waiters--;
    }
    return ACL_SUCCESS;
}

aclError hc_rt_stream_sync(hc_rt_stream_t *s, int64_t timeout_ms)
{
    uint64_t target, done;
    aclError res = ACL_SUCCESS;

    if (runs_here(s)) {
        HC_ERROR("stream %p was synchronised from one of its own tasks, which would wait for itself "
                 "forever; synchronise it from outside the stream", s->base.handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&s->lock);
    target = s->enq_count;
    if (timeout_ms < 0) {
        drive_until(s, target);
    } else {
        /* With a bound, the caller only waits: a task it ran itself could not be interrupted when
         * the bound passes. The worker executes. */
        res = wait_until(s, target, hc_now_ns() + timeout_ms * HC_NS_PER_MS);
    }
    done = s->done_count;
    if (res == ACL_SUCCESS) {
        res = s->first_error;
        s->first_error = ACL_SUCCESS;
    }
    pthread_mutex_unlock(&s->lock);
    if (res == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
        HC_ERROR("stream %p did not finish within %lld ms: %llu of the tasks enqueued before the call "
                 "have not run yet", s->base.handle, (long long)timeout_ms, (unsigned long long)(target - done));
    return res;
}

aclError hc_rt_stream_enqueue(hc_rt_stream_t *s, aclrtHostTaskFn fn, void *arg, const char *what)
{
    hc_rt_task_t *task = malloc(sizeof(*task));
    aclError res;

    if (task == NULL) {
        HC_ERROR("cannot enqueue %s on stream %p: out of memory", what, s->base.handle);
        return ACL_ERROR_BAD_ALLOC;
    }
    *task = (hc_rt_task_t){.fn = fn, .arg = arg, .what = what, .owned = 1};
    res = hc_rt_stream_enqueue_task(s, task);
    if (res != ACL_SUCCESS)
        free(task);
    return res;
}

aclError hc_rt_stream_enqueue_task(hc_rt_stream_t *s, hc_rt_task_t *task)
{
    const char *what = task->what;

    task->link = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        HC_ERROR("cannot enqueue %s on stream %p: the stream is being destroyed", what, s->base.handle);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    if (s->tail != NULL)
        s->tail->link = task;
    else
        s->head = task;
    s->tail = task;
    s->enq_count++;
    s->idle_polls = 0;
    if (!s->sync_mode || s->dormant)
        kick_worker(s);
    pthread_mutex_unlock(&s->lock);
    return ACL_SUCCESS;
}

int hc_rt_stream_idle(hc_rt_stream_t *s)
{
    int idle;

    pthread_mutex_lock(&s->lock);
    idle = s->done_count == s->enq_count;
    kick_worker(s); /* a program polling instead of synchronising still sees its tasks start */
    pthread_mutex_unlock(&s->lock);
    return idle;
}

void hc_rt_stream_set_stop_on_failure(hc_rt_stream_t *s, int stop)
{
    pthread_mutex_lock(&s->lock);
    s->stop_on_failure = stop;
    pthread_mutex_unlock(&s->lock);
}

static void stream_release(hc_rt_object_t *obj)
{
    hc_rt_stream_t *s = (hc_rt_stream_t *)obj;

    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/*
 * Start the worker with asynchronous signals blocked, so that a process-directed signal (SIGINT,
 * SIGTERM, SIGCHLD) is handled by one of the program's threads, never inside a collective. Faults
 * stay unblocked: a blocked SIGSEGV would kill the process without the sanitizers' report.
 */
static int start_worker(hc_rt_stream_t *s)
{
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
    sigset_t blocked, saved;
    int err;

    sigfillset(&blocked);
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
        sigdelset(&blocked, faults[i]);
    pthread_sigmask(SIG_SETMASK, &blocked, &saved);
    err = pthread_create(&s->worker, NULL, worker_main, s);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return err;
}

static aclError init_sync(hc_rt_stream_t *s)
{
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    if (hc_rt_cond_init(&s->work_cv) != 0) /* monotonic clock: the worker polls with timeouts */
        goto err_destroy_lock;
    if (hc_rt_cond_init(&s->done_cv) != 0)
        goto err_destroy_work_cv;
    return ACL_SUCCESS;

err_destroy_work_cv:
    pthread_cond_destroy(&s->work_cv);
err_destroy_lock:
    pthread_mutex_destroy(&s->lock);
    return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
}

/* Ask the worker to leave and wait for it; used when the queue is known to be empty. */
static void stop_worker(hc_rt_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
}

aclError hc_rt_stream_create(int32_t device, hc_rt_stream_t **stream_p)
{
    hc_rt_stream_t *s = calloc(1, sizeof(*s));
    aclError res;
    int err;

    if (s == NULL) {
        HC_ERROR("cannot create a stream on device %d: out of memory", device);
        return ACL_ERROR_BAD_ALLOC;
    }
    s->device = device;
    s->sync_mode = 1; /* most programs enqueue and synchronise; the worker finds out otherwise */
    s->number = atomic_fetch_add(&next_number, 1);
    s->base.kind = HC_RT_KIND_STREAM;
    s->base.release = stream_release;
    atomic_init(&s->base.refs, 1);
    res = init_sync(s);
    if (res != ACL_SUCCESS) {
        HC_ERROR("cannot create a stream on device %d: no mutex or condition variable", device);
        free(s);
        return res;
    }
    err = start_worker(s);
    if (err != 0) {
        HC_ERROR("cannot start the worker thread of a stream on device %d: %s", device, strerror(err));
        res = ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
        goto err_release;
    }
    /* Registered only once the worker exists: from then on aclFinalize may find and destroy it. */
    res = hc_rt_handle_register(&s->base);
    if (res != ACL_SUCCESS)
        goto err_stop_worker;
    hc_rt_object_ref(&s->base);
    *stream_p = s;
    return ACL_SUCCESS;

err_stop_worker:
    stop_worker(s);
err_release:
    stream_release(&s->base);
    return res;
}

aclError hc_rt_stream_get(aclrtStream handle, const char *call, hc_rt_stream_t **stream_p)
{
    hc_rt_object_t *obj;
    int32_t device;
    aclError res;

    if (handle == NULL) {
        res = hc_rt_device_current(call, &device);
        if (res != ACL_SUCCESS)
            return res;
        return hc_rt_device_default_stream(device, stream_p);
    }
    res = hc_rt_handle_lookup(handle, HC_RT_KIND_STREAM, &obj);
    if (res != ACL_SUCCESS && hc_rt_handle_from_parent(handle, HC_RT_KIND_STREAM)) {
        HC_ERROR("%s: stream %p was created by the parent process before fork(); a child has none of its "
                 "parent's streams: create its own", call, handle);
        return res;
    }
    if (res != ACL_SUCCESS) {
        HC_ERROR("%s: stream %p is not a live stream (destroyed, never created, or not a stream)", call,
                 handle);
        return res;
    }
    *stream_p = (hc_rt_stream_t *)obj;
    return ACL_SUCCESS;
}

void hc_rt_stream_put(hc_rt_stream_t *stream)
{
    hc_rt_object_unref(&stream->base);
}

/*
 * Stop accepting tasks, run the queued ones (on this thread or by waiting for the current
 * executor), then join the worker. A task is never dropped: HCCL operations on the queue may be
 * what a peer rank is waiting for.
 */
static void drain_and_stop(hc_rt_stream_t *s)
{
    aclError unreported;
    const char *what;

    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->work_cv);
    drive_until(s, s->enq_count);
    unreported = s->first_error;
    what = s->first_error_what;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    if (unreported != ACL_SUCCESS)
        HC_WARN("stream %p was destroyed with an error nobody synchronised for: task %s failed with "
                "error %d", s->base.handle, what, unreported);
}

aclError hc_rt_stream_destroy(aclrtStream handle)
{
    hc_rt_object_t *obj;
    hc_rt_stream_t *s;
    aclError res;

    /* The default stream belongs to the device: aclrtResetDevice and aclFinalize destroy it. */
    if (handle == NULL) {
        HC_ERROR("aclrtDestroyStream: a NULL stream (the default stream) cannot be destroyed; "
                 "aclrtResetDevice releases it");
        return ACL_ERROR_INVALID_PARAM;
    }
    res = hc_rt_stream_get(handle, "aclrtDestroyStream", &s);
    if (res != ACL_SUCCESS)
        return res;
    if (runs_here(s)) {
        HC_ERROR("stream %p was destroyed from one of its own tasks, which would wait for itself "
                 "forever; destroy it from outside the stream", handle);
        hc_rt_stream_put(s);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (hc_rt_handle_unregister(handle, HC_RT_KIND_STREAM, &obj) != ACL_SUCCESS) {
        HC_ERROR("aclrtDestroyStream: stream %p was destroyed by another thread meanwhile", handle);
        hc_rt_stream_put(s);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    drain_and_stop(s);
    hc_rt_stream_put(s);          /* the lookup's reference */
    hc_rt_object_unref(obj);      /* the registry's reference */
    return ACL_SUCCESS;
}

aclError hc_rt_stream_destroy_all(void)
{
    hc_rt_object_t **objs;
    size_t count;
    aclError res, first = ACL_SUCCESS;

    res = hc_rt_handle_collect(HC_RT_KIND_STREAM, &objs, &count);
    if (res != ACL_SUCCESS)
        return res;
    for (size_t i = 0; i < count; i++) {
        res = hc_rt_stream_destroy(objs[i]->handle);
        /* A stream another thread destroyed meanwhile is gone either way. */
        if (res != ACL_SUCCESS && res != ACL_ERROR_RT_INVALID_HANDLE && first == ACL_SUCCESS)
            first = res;
        hc_rt_object_unref(objs[i]);
    }
    free(objs);
    return first;
}

/* After fork(): a task that forked was executing a stream of the parent; the child's thread is not
 * executing any. */
void hc_rt_stream_fork_child(void)
{
    tls_frames = NULL;
}
