/*
 * Streams and their executor (DESIGN.md 3).
 *
 * A stream is a FIFO of host tasks. Exactly one thread at a time executes it (the `executing`
 * flag); that thread is the stream's worker, a thread blocked in aclrtSynchronizeStream, which runs
 * the queued tasks itself instead of waiting for the worker (caller-runs), or the launching thread
 * itself (run-at-enqueue, below). The blocking pattern (enqueue, synchronise) therefore pays no
 * thread hand-off, while the overlap pattern (enqueue, do other work) can still run the tasks in
 * the background.
 *
 * Nobody spins where a CPU is not known to be spare: the worker sleeps on work_cv when there is
 * nothing it may run, synchronisers sleep on done_cv while another thread executes. Ranks often
 * outnumber cores, and a spinning executor would steal the core a peer rank needs to make progress.
 * Where the policy found a CPU spare for the worker (hc_rt_policy_spins), each first spins and
 * yields for a bounded time (spin_until).
 *
 * Counting: enq_count tasks were ever enqueued, done_count have finished. A synchroniser's target
 * is enq_count when it arrives; because the queue is FIFO, done_count >= target means every task
 * enqueued before it has run. Both are written under the lock and read without it by the fast path
 * of a synchronisation that finds nothing to do.
 *
 * Hand-over: a synchroniser waiting without a timeout is a "driver". When the worker sees a driver
 * it stops after the current task and lets the driver run the rest, so the thread that blocks is
 * the one that works; the worker stays asleep while a driver is waiting to take over.
 *
 * Who runs what (the policy, rt_policy.h and stream_policy.c): in the synchronous pattern (the
 * program synchronises right after enqueueing) and in the overlap pattern when measuring says so,
 * the caller runs: enqueue does not wake the worker, the synchronising caller runs the task, and a
 * task launched on an idle stream may run at once on the launching thread when the task itself says
 * that this needs nothing more of that thread (aclrtHostTask.may_run_now: an HCCL collective whose
 * peers have all begun it). Otherwise enqueue wakes the worker, which starts the task at once.
 * A worker that is not woken polls as a backstop, so a task nobody synchronises is still started:
 * one that was already queued at the previous poll, with nothing finished since, is run, and in the
 * synchronous pattern the stream switches to the overlap pattern. Polls come every grace period
 * (HOSTCCL_BACKSTOP_MS, 1 ms); while ranks outnumber CPUs, twice as far apart after each that finds
 * nothing queued, up to POLL_MAX_NS (8 ms): a blocking loop, whose queue a poll almost always finds
 * empty, then costs 125 wake-ups a second per stream rather than a thousand, and a mispredicted task
 * starts within POLL_MAX_NS plus a grace period. A queue that is still growing belongs to a caller
 * in the middle of a burst of launches; it gets BURST_POLLS grace periods to come and synchronise.
 * A worker that is not woken stops polling after IDLE_NS of empty polls (dormant), so an idle
 * stream sleeps without timeouts; the next enqueue wakes it.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_compiler.h"
#include "hc_config.h"
#include "hc_log.h"
#include "hc_owner.h"
#include "hc_rt.h"
#include "rt_policy.h"

typedef aclrtHostTask hc_rt_task_t;

struct hc_rt_stream {
    hc_rt_object_t base; /* first: the registry holds streams by their base */
    int32_t device;
    unsigned number; /* names the worker thread hc-stream-N */
    pthread_t worker;
    pthread_mutex_t lock; /* guards everything below but the atomics' reads */
    pthread_cond_t work_cv; /* the worker sleeps here */
    pthread_cond_t done_cv; /* synchronisers sleep here while another thread executes */
    hc_rt_task_t *head, *tail;
    atomic_uint_fast64_t enq_count, done_count; /* written under the lock */
    atomic_int first_error;  /* since the last synchronisation; written under the lock */
    atomic_int epoch_open;   /* the policy wants to see the next synchronisation */
    atomic_int sampling;     /* the open epoch is sampled: time its synchronisation before the lock */
    atomic_int executing; /* relaxed: written under the lock, or by the owner's fast path (below) */
    unsigned drivers; /* untimed synchronisers sleeping on done_cv, ready to take over */
    unsigned waiters; /* every thread sleeping on done_cv */
    int dormant;         /* the worker sleeps without polling (idle, not woken at enqueue) */
    int untimed;         /* the worker sleeps without polling (dormant, or the worker is the runner) */
    int kicked;          /* someone asked the worker to run the queue now (kick_worker); cleared when it empties */
    int worker_spins;    /* the worker looks for its next task without the lock (spin_until) */
    uint64_t kick_to;    /* ... up to this done_count (hc_rt_stream_wait_begin), UINT64_MAX: all of it */
    int64_t idle_ns;        /* how long the worker's polls have found nothing queued */
    int64_t grace_ns;       /* the backstop's grace period (HOSTCCL_BACKSTOP_MS) */
    int64_t poll_ns;        /* the worker's next poll interval (grace_ns to POLL_MAX_NS) */
    uint64_t poll_done, poll_enq; /* done_count and enq_count at the worker's last grace poll */
    unsigned stalled_polls; /* consecutive polls that found the queue stuck but growing */
    const char *first_error_what;
    char *first_error_msg; /* the failing task's error line (heap), carried to the synchroniser */
    int stop_on_failure; /* ACL_STOP_ON_FAILURE: skip what can be skipped while first_error is set */
    int stopping; /* destroy has begun: no more tasks are accepted */
    int64_t claim_start_ns; /* a claimed task's start, when the policy times tasks (else 0) */
    hc_rt_policy_t policy;
    /* The owner's fast path (below). */
    hc_owner_t own;        /* the thread that created the stream, until another uses it */
    atomic_int fast_ok;    /* the policy lets the caller run a task at enqueue, nothing stops it */
    int fast_claimed;      /* the owner's claimed task took the fast path (the owner's own field) */
    atomic_int_fast64_t record_ns; /* when an event was last recorded here (queued) */
};

/*
 * The streams the calling thread is executing, innermost first. A task may synchronise another
 * stream and so run that stream's tasks on the same thread; the chain lets any of those tasks see
 * that synchronising or destroying a stream further out would wait for itself.
 */
typedef struct exec_frame {
    const hc_rt_stream_t *stream;
    struct exec_frame *outer;
    char *err_msg; /* what the task said about its failure (aclrtHostTaskSetErrMsg), or NULL */
} exec_frame_t;

#define IDLE_NS (1000 * 1000 * 1000LL) /* empty polling after which the worker stops polling */
/* The longest poll interval while some communicator's local ranks outnumber their CPUs
 * (aclrtHostCpusShared): each poll that finds nothing queued doubles the interval up to this, one
 * that finds a task brings it back to the grace period. A poll wakes the worker, which there takes a
 * CPU from a rank: blocking 8-byte loops of 4 and 8 ranks on 2 CPUs ran 4-15% faster with it
 * (bench/results/2026-12-02-worker-poll.md). The price: a mispredicted task (the first one a
 * program leaves unsynchronised after blocking calls) waits up to POLL_MAX_NS plus a grace period
 * instead of two grace periods. Elsewhere polls stay at the grace period: a wake-up there costs no
 * rank its CPU. */
#define POLL_MAX_NS (8 * 1000 * 1000LL)
#define BURST_POLLS 8   /* how long a growing queue may wait for its caller (grace periods) */

static HC_TLS_FAST exec_frame_t *tls_frames;
static HC_TLS_FAST int tls_skipping; /* the running task should skip its work (ACL_STOP_ON_FAILURE) */
static atomic_uint next_number;

static uint64_t count_of(const atomic_uint_fast64_t *count)
{
    return atomic_load_explicit(count, memory_order_relaxed);
}

/* Under the lock (the only writer); release: what the task did is visible to a fast-path reader. */
static void count_up(atomic_uint_fast64_t *count)
{
    atomic_store_explicit(count, atomic_load_explicit(count, memory_order_relaxed) + 1, memory_order_release);
}

static int is_executing(const hc_rt_stream_t *s)
{
    return atomic_load_explicit(&s->executing, memory_order_relaxed);
}

static void set_executing(hc_rt_stream_t *s, int executing)
{
    atomic_store_explicit(&s->executing, executing, memory_order_relaxed);
}

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

/* Keep the fast paths' view of the policy current (the synchronisation's, the owner's launch).
 * Called with the lock held, after anything that changes the policy, stopping or stop_on_failure. */
static void mirror_epoch(hc_rt_stream_t *s)
{
    atomic_store_explicit(&s->epoch_open, s->policy.epoch_start_ns != 0, memory_order_relaxed);
    atomic_store_explicit(&s->sampling, hc_rt_policy_sampling(&s->policy), memory_order_relaxed);
    atomic_store_explicit(&s->fast_ok,
                          s->policy.sync_pattern && hc_rt_policy_caller_runs(&s->policy) && !s->stopping &&
                              !s->stop_on_failure,
                          memory_order_relaxed);
}

/* Wake the worker when it is the one that should run the queue now, up to done_count `to`. Called
 * with the lock held. A bounded kick while another thread executes is kept for the worker's next
 * look: every executor but the worker kicks it when it stops with tasks left. */
static void kick_worker_to(hc_rt_stream_t *s, uint64_t to)
{
    int now = !is_executing(s) && s->drivers == 0;

    if ((s->head == NULL && !s->stopping) || (!now && to == UINT64_MAX))
        return;
    s->kick_to = s->kicked && s->kick_to > to ? s->kick_to : to;
    s->kicked = 1;
    if (!now)
        return;
    if (hc_rt_policy_times_tasks(&s->policy))
        hc_rt_policy_woke(&s->policy, hc_fast_now_ns());
    pthread_cond_signal(&s->work_cv);
}

static void kick_worker(hc_rt_stream_t *s)
{
    kick_worker_to(s, UINT64_MAX);
}

/* When the caller has become the runner while the worker sleeps without polling (it went to sleep
 * while it was the runner itself), wake it so that it polls: the backstop of tasks nobody
 * synchronises depends on it. Called with the lock held, after anything that may change the
 * policy's runner. */
static void keep_backstop(hc_rt_stream_t *s)
{
    if (s->untimed && !s->dormant && hc_rt_policy_caller_runs(&s->policy))
        pthread_cond_signal(&s->work_cv);
}

/* A task finished: count it and keep its error (and msg, which this takes) if it is the first.
 * Called with the lock held. */
static void record_result(hc_rt_stream_t *s, aclError err, const char *what, char *msg)
{
    count_up(&s->done_count);
    if (err != ACL_SUCCESS) {
        HC_DEBUG("task %s on stream %p failed with error %d", what, s->base.handle, err);
        if (atomic_load_explicit(&s->first_error, memory_order_relaxed) == ACL_SUCCESS) {
            atomic_store_explicit(&s->first_error, err, memory_order_relaxed);
            s->first_error_what = what;
            s->first_error_msg = msg;
            msg = NULL;
        }
        free(msg);
    }
    if (s->waiters > 0)
        pthread_cond_broadcast(&s->done_cv);
}

/*
 * The owner's fast path. A stream is nearly always launched on and synchronised by the thread that
 * created it, and in the blocking pattern most of its tasks run at enqueue (claimed). Taking the
 * stream lock to claim such a task and again to record it puts two locked instructions right after
 * the op's stores to lines its peer reads, and a locked instruction waits for the stores before it
 * (bench/results/2026-12-02-per-call-layers.md; with it, small Broadcasts run at launch: 2 ranks,
 * 8 B, 0.30-0.34 -> 0.25-0.28 us a call in most series, docs/design-notes.md). So the creating thread
 * claims and records such a task with atomic stores inside a short owner's section (hc_owner.h),
 * for as long as no other thread has used the stream. Any other thread that looks the stream up
 * (every API call does, destroy too) first takes it over (hc_owner_take_over): from then on the
 * owner takes the lock like everyone. From its claim to its release the owner's task shows as
 * executing, so a thread that took over meanwhile queues behind it, as behind any claimed task. The
 * worker needs no such care: it acts only on queued tasks, and only the owner queues while the
 * stream is not shared. Without membarrier (old kernels) there is no fast path.
 */

/* The owner claims task at enqueue without the lock, when the stream is idle (every task launched
 * has finished), the policy lets the caller run it, nothing failed unreported, and the task agrees
 * (a direct run, task NULL, has agreed already): 1. 0: the task said no (the locked path does not
 * ask again); -1: the locked path decides. */
static int owner_claim(hc_rt_stream_t *s, hc_rt_task_t *task)
{
    int claimed = -1;

    if ((task != NULL && task->may_run_now == NULL) || !hc_owner_enter(&s->own))
        return -1;
    if (atomic_load_explicit(&s->fast_ok, memory_order_relaxed) &&
        atomic_load_explicit(&s->done_count, memory_order_acquire) == count_of(&s->enq_count) &&
        atomic_load_explicit(&s->first_error, memory_order_relaxed) == ACL_SUCCESS) {
        claimed = task == NULL || task->may_run_now(task->arg) != 0;
        if (claimed) {
            set_executing(s, 1);
            count_up(&s->enq_count);
            s->fast_claimed = 1;
            s->claim_start_ns = 0;
        }
    }
    hc_owner_leave(&s->own);
    return claimed;
}

/* The owner records its fast-claimed task's success without the lock, unless the stream became
 * shared meanwhile (then the caller takes the lock). */
static int owner_release(hc_rt_stream_t *s)
{
    if (!hc_owner_enter(&s->own))
        return 0;
    count_up(&s->done_count);
    set_executing(s, 0);
    hc_owner_leave(&s->own);
    return 1;
}

/* A failed task's error line for its synchroniser: what it said (aclrtHostTaskSetErrMsg), else the
 * last error line this thread logged while it ran, else NULL. */
static char *task_err_msg(exec_frame_t *frame, aclError err, unsigned errors_before)
{
    if (err == ACL_SUCCESS) {
        if (frame->err_msg != NULL) /* a task that set a line and then succeeded */
            free(frame->err_msg);
        return NULL;
    }
    if (frame->err_msg == NULL && hc_log_error_count() != errors_before)
        return strdup(hc_log_last_error());
    return frame->err_msg;
}

/* Run one task on this thread as the stream's executor (the lock is not held): with the stream's
 * device current, whichever thread this is, the stream in this thread's frames, and timed for the
 * profiler when it records this stream's device. A failed task's error line goes to *msg_p. */
static aclError run_one(hc_rt_stream_t *s, hc_rt_task_t *task, int skipping, char **msg_p)
{
    exec_frame_t frame = {.stream = s, .outer = tls_frames};
    unsigned errors_before = hc_log_error_count();
    int32_t caller_device = hc_rt_device_swap(s->device);
    const char *what = task->what; /* the task may free itself */
    int owned = task->owned;
    int outer_skipping = tls_skipping; /* a task may run another stream's tasks (synchronising it) */
    hc_rt_prof_task_t prof;
    aclError err;

    tls_frames = &frame;
    tls_skipping = skipping;
    if (!hc_rt_prof_wants(s->device)) {
        err = task->fn(task->arg); /* may free the task when the caller owns it */
    } else {
        hc_rt_prof_task_begin(&prof);
        err = task->fn(task->arg);
        hc_rt_prof_task_end(&prof, what, s->device, s->number, err);
    }
    if (owned)
        free(task);
    tls_skipping = outer_skipping;
    tls_frames = frame.outer;
    hc_rt_device_swap(caller_device);
    *msg_p = task_err_msg(&frame, err, errors_before);
    return err;
}

void hc_rt_task_set_err_msg(const char *text)
{
    exec_frame_t *frame = tls_frames;

    if (frame == NULL || text == NULL || text[0] == '\0')
        return;
    free(frame->err_msg);
    frame->err_msg = strdup(text); /* NULL when out of memory: the line is then lost, not the error */
}

/* Does the queue's head say it would run now without waiting (its may_run_now)? */
static int head_ready(const hc_rt_stream_t *s)
{
    return s->head != NULL && s->head->may_run_now != NULL && s->head->may_run_now(s->head->arg);
}

/*
 * Execute queued tasks until done_count reaches target or the queue is empty; the worker (with
 * yield_to_drivers) also stops as soon as a driver is waiting, and with ready_only every caller stops
 * at a head that is not ready (head_ready). Called with the lock held and no executor; each task
 * runs with the lock released.
 */
static void run_tasks_if(hc_rt_stream_t *s, uint64_t target, int yield_to_drivers, int ready_only)
{
    set_executing(s, 1);
    while (s->head != NULL && count_of(&s->done_count) < target && !(yield_to_drivers && s->drivers > 0) &&
           (!ready_only || head_ready(s))) {
        hc_rt_task_t *task = s->head;
        const char *what = task->what;
        int64_t start = hc_rt_policy_times_tasks(&s->policy) ? hc_fast_now_ns() : 0;
        int skipping = s->stop_on_failure && atomic_load_explicit(&s->first_error, memory_order_relaxed) != ACL_SUCCESS;
        char *msg;
        aclError err;

        s->head = task->link;
        if (s->head == NULL) {
            s->tail = NULL;
            /* Whatever the worker was kicked for has been taken. A kick left over would have it run
             * a later task as if asked to: one nobody synchronises would then run unseen by the
             * backstop, and the stream would go on predicting the synchronous pattern. */
            s->kicked = 0;
        }
        pthread_mutex_unlock(&s->lock);
        err = run_one(s, task, skipping, &msg);
        pthread_mutex_lock(&s->lock);
        if (start != 0)
            hc_rt_policy_task_ran(&s->policy, start, hc_fast_now_ns(), yield_to_drivers);
        record_result(s, err, what, msg);
    }
    set_executing(s, 0);
    if (s->waiters > 0)
        pthread_cond_broadcast(&s->done_cv);
}

static void run_tasks(hc_rt_stream_t *s, uint64_t target, int yield_to_drivers)
{
    run_tasks_if(s, target, yield_to_drivers, 0);
}

/*
 * Whether a task has waited a whole grace period without anyone running it: it was already queued
 * at the previous poll, nothing finished since, and nobody is executing or about to. Finding merely
 * some task queued is not enough: a caller that enqueues and is about to synchronise is seen that way
 * about as often as the poll falls between its two calls. Called with the lock held.
 */
static int stalled_since_last_poll(hc_rt_stream_t *s)
{
    if (!(s->head != NULL && !is_executing(s) && s->drivers == 0 && s->poll_enq > s->poll_done &&
          count_of(&s->done_count) == s->poll_done)) {
        s->stalled_polls = 0;
        return 0;
    }
    /* A caller still enqueueing is in a burst it will synchronise after (the perf tools' pattern:
     * launch every iteration, then synchronise): running the burst on this thread meanwhile would
     * only compete with it and the peers for the cores. Up to BURST_POLLS. */
    return count_of(&s->enq_count) == s->poll_enq || ++s->stalled_polls >= BURST_POLLS;
}

/*
 * Wait without the lock, spinning and yielding, for up to HC_RT_SPIN_NS until done(s, arg): where
 * the worker is the runner and a CPU is spare for it (hc_rt_policy_spins), a thread that sleeps on
 * a condition variable leaves its CPU idle, and waking it there costs more than a small task runs.
 * Called with the lock held; returns with it held, and whether done(s, arg) became true.
 */
static int spin_until(hc_rt_stream_t *s, int (*done)(const hc_rt_stream_t *, uint64_t), uint64_t arg)
{
    int64_t until = hc_fast_now_ns() + HC_RT_SPIN_NS;
    int met;

    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 1; !(met = done(s, arg)); i++) {
        if (i % 64 != 0) {
            hc_cpu_relax();
            continue;
        }
        if (hc_fast_now_ns() >= until)
            break;
        sched_yield();
    }
    pthread_mutex_lock(&s->lock);
    return met;
}

static int launched_since(const hc_rt_stream_t *s, uint64_t enq)
{
    return count_of(&s->enq_count) != enq; /* destroy finds the worker within HC_RT_SPIN_NS */
}

static int done_or_idle(const hc_rt_stream_t *s, uint64_t target)
{
    return count_of(&s->done_count) >= target || !is_executing(s);
}

/* A task waits for a caller that does not come (the backstop found it, or a peer waits for it): the
 * worker is to run the queue, and the policy hears of it. Called with the lock held. */
static void stalled(hc_rt_stream_t *s)
{
    hc_rt_policy_stalled(&s->policy);
    mirror_epoch(s);
    s->kicked = 1;
    s->kick_to = UINT64_MAX;
}

static void *worker_main(void *arg)
{
    hc_rt_stream_t *s = arg;
    char name[16];
    int spun = 0; /* the last spin for work found none: sleep */

    snprintf(name, sizeof(name), "hc-stream-%u", s->number % 100000u);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        /* While the caller runs, the queue belongs to the callers who will synchronise; the worker
         * runs it only when kicked (a bounded synchroniser, leftovers of a driver, a dormant
         * wake-up, the backstop below; a thread waiting for an event: up to its record), never
         * merely because a poll found tasks (it would compete with the launching caller and the
         * peers for the cores). */
        int caller_runs = hc_rt_policy_caller_runs(&s->policy);

        if (!is_executing(s) && s->drivers == 0 && s->head != NULL && (!caller_runs || s->kicked)) {
            uint64_t to = caller_runs ? s->kick_to : UINT64_MAX;
            s->kicked = 0;
            spun = 0;
            run_tasks(s, to, 1);
            continue;
        }
        /* New tasks cannot arrive once stopping is set; the destroyer runs what is left. */
        if (s->stopping && s->head == NULL)
            break;
        if (!caller_runs && s->head == NULL && !spun && hc_rt_policy_spins(&s->policy)) {
            s->worker_spins = 1;
            spun = !spin_until(s, launched_since, count_of(&s->enq_count));
            s->worker_spins = 0;
            continue; /* the lock was dropped: look again before sleeping */
        }
        spun = 0;
        if (!caller_runs || s->idle_ns >= IDLE_NS) {
            /* Idle and not polling: the next enqueue wakes this thread (when the caller runs, that
             * task is run by this thread: one hand-off after each idle second), then it polls again. */
            s->dormant = caller_runs;
            s->untimed = 1;
            pthread_cond_wait(&s->work_cv, &s->lock);
            s->untimed = 0;
            s->dormant = 0;
            s->idle_ns = 0;
            s->poll_ns = s->grace_ns;
            continue;
        }
        if (hc_rt_cond_wait_until(&s->work_cv, &s->lock, hc_now_ns() + s->poll_ns) == 0)
            continue;
        if (stalled_since_last_poll(s))
            stalled(s); /* a task waited a whole grace period */
        if (s->head == NULL) { /* nothing to look after: poll less often, where polls cost */
            int64_t most = hc_rt_policy_cpus_shared_now() && s->grace_ns < POLL_MAX_NS ? POLL_MAX_NS : s->grace_ns;
            s->idle_ns += s->poll_ns;
            s->poll_ns = s->poll_ns * 2 < most ? s->poll_ns * 2 : most;
        } else {
            s->poll_ns = s->grace_ns;
        }
        s->poll_done = count_of(&s->done_count);
        s->poll_enq = count_of(&s->enq_count);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Run or wait until done_count reaches target (caller-runs). Called with the lock held. The worker
 * stays asleep while this thread is a driver: the caller kicks it for what is left, if anything. */
static void drive_until(hc_rt_stream_t *s, uint64_t target)
{
    int spun = 0; /* a spin found the worker still at it: sleep */

    while (count_of(&s->done_count) < target) {
        if (!is_executing(s)) {
            run_tasks(s, target, 0);
            continue;
        }
        if (!spun && hc_rt_policy_spins(&s->policy)) {
            spun = !spin_until(s, done_or_idle, target);
            continue; /* the lock was dropped: look again before sleeping */
        }
        s->drivers++;
        s->waiters++;
        pthread_cond_wait(&s->done_cv, &s->lock);
        s->waiters--;
        s->drivers--;
    }
}

/* Wait, without executing, until done_count reaches target or the deadline passes. */
static aclError wait_until(hc_rt_stream_t *s, uint64_t target, int64_t deadline_ns)
{
    kick_worker(s); /* when the caller runs, the worker may not know about the tasks yet */
    while (count_of(&s->done_count) < target) {
        if (hc_deadline_passed(deadline_ns))
            return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
        s->waiters++;
        hc_rt_cond_wait_until(&s->done_cv, &s->lock, deadline_ns);
        s->waiters--;
    }
    return ACL_SUCCESS;
}

/* Nothing to wait for, nothing to report, nothing the policy wants to see: no lock needed. The
 * acquire load of done_count pairs with record_result's release: the tasks' effects are visible. */
static int sync_has_nothing_to_do(const hc_rt_stream_t *s)
{
    uint64_t target = count_of(&s->enq_count);

    return atomic_load_explicit(&s->done_count, memory_order_acquire) >= target &&
           atomic_load_explicit(&s->first_error, memory_order_relaxed) == ACL_SUCCESS &&
           !atomic_load_explicit(&s->epoch_open, memory_order_relaxed);
}

/* An untimed synchronisation: the caller runs what is queued; the policy sees the epoch (`before`:
 * the caller as it arrived, before it waited for the lock, when the epoch is sampled). */
static void sync_driving(hc_rt_stream_t *s, uint64_t target, const hc_rt_sample_point_t *before)
{
    int report_end =
        s->policy.epoch_start_ns != 0 && hc_rt_policy_sync_begin(&s->policy, hc_fast_now_ns(), before);

    drive_until(s, target);
    kick_worker(s); /* tasks other threads enqueued meanwhile */
    if (report_end)
        hc_rt_policy_sync_end(&s->policy, hc_fast_now_ns());
    mirror_epoch(s);
    keep_backstop(s);
}

/*
 * The synchronising thread learns why: the failed task's error line (logged on whichever thread ran
 * it) becomes this thread's last error, where aclGetRecentErrMsg and HcclHostGetRecentErrMsg look.
 * Takes msg.
 */
static void carry_error(const hc_rt_stream_t *s, aclError err, const char *what, char *msg)
{
    char line[256];

    if (msg == NULL) {
        snprintf(line, sizeof(line), "hostccl[pid %d] error: task %s on stream %p failed with error %d",
                 (int)getpid(), what != NULL ? what : "?", s->base.handle, err);
        hc_log_carry_error(line);
        return;
    }
    hc_log_carry_error(msg);
    free(msg);
}

/* A synchronisation with something to do (or refused), apart from the common case of a stream the
 * blocking fast path left idle: that returns without this frame's register saves. */
static __attribute__((noinline)) aclError sync_slow(hc_rt_stream_t *s, int64_t timeout_ms)
{
    uint64_t target, done;
    aclError res = ACL_SUCCESS;
    const char *what = NULL;
    char *msg = NULL;
    hc_rt_sample_point_t before = {.ns = 0};

    if (runs_here(s)) {
        HC_ERROR("stream %p was synchronised from one of its own tasks, which would wait for itself "
                 "forever; synchronise it from outside the stream", s->base.handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (sync_has_nothing_to_do(s))
        return ACL_SUCCESS;
    /* A sampled epoch ends here: how long the caller slept must not count a wait for the lock (a
     * worker preempted while it holds it). */
    if (atomic_load_explicit(&s->sampling, memory_order_relaxed))
        hc_rt_policy_sample_point(&s->policy, &before);
    pthread_mutex_lock(&s->lock);
    target = count_of(&s->enq_count);
    if (timeout_ms < 0) {
        sync_driving(s, target, &before);
    } else {
        /* With a bound, the caller only waits: a task it ran itself could not be interrupted when
         * the bound passes. The worker executes. */
        res = wait_until(s, target, hc_now_ns() + timeout_ms * HC_NS_PER_MS);
    }
    done = count_of(&s->done_count);
    if (res == ACL_SUCCESS) {
        res = atomic_load_explicit(&s->first_error, memory_order_relaxed);
        atomic_store_explicit(&s->first_error, ACL_SUCCESS, memory_order_relaxed);
        what = s->first_error_what;
        msg = s->first_error_msg;
        s->first_error_msg = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (res != ACL_SUCCESS && res != ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
        carry_error(s, res, what, msg);
    if (res == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT)
        HC_ERROR("stream %p did not finish within %lld ms: %llu of the tasks enqueued before the call "
                 "have not run yet", s->base.handle, (long long)timeout_ms, (unsigned long long)(target - done));
    return res;
}

aclError hc_rt_stream_sync(hc_rt_stream_t *s, int64_t timeout_ms)
{
    if (tls_frames == NULL && sync_has_nothing_to_do(s))
        return ACL_SUCCESS; /* not inside a task (which may not synchronise its own stream), nothing to wait for */
    return sync_slow(s, timeout_ms);
}

/* The program's untimed wait for task pos where the callers run: it runs the tasks up to that one
 * itself, as a synchronisation would, while each ends within its own bound (aclrtHostTask.bounded:
 * HCCL operations, copies, event tasks); the first that may not (a host callback may block as long
 * as it likes) is left to the worker, so that the wait keeps its bound. A wait that only woke the
 * worker paid its wake-up, and took a CPU from a rank where none was spare: a pipelined program
 * (launch op i+1, compute, wait for op i's event) ran 6.3x slower than the op followed by the
 * compute at 8 B, 1.3x at 64 KiB (2 ranks bound to a CPU each). Called with the lock held. */
static void run_bounded_until(hc_rt_stream_t *s, uint64_t pos)
{
    while (count_of(&s->done_count) < pos && !is_executing(s) && s->head != NULL && s->head->bounded)
        run_tasks(s, count_of(&s->done_count) + 1, 0);
}

/*
 * A wait for the task that pos counts (an event's record: aclrtSynchronizeEvent, a task of another
 * stream in aclrtStreamWaitEvent). Where the callers are the stream's runners nobody would run the
 * tasks before a synchronisation or the backstop poll: the program's own untimed wait runs those
 * that end by themselves (run_bounded_until), and the worker is woken to run the rest up to pos and
 * no further (the tasks after it may wait for what the program does next); where the worker is the
 * runner it is woken as for any launch. Any other waiter only waits: its wait has a bound, which a
 * task it ran could not keep. A task's error is the stream's, reported by its next synchronisation,
 * whoever ran it.
 *
 * The program's own untimed wait (host, not inside a task) for the last task queued is the
 * synchronisation of the policy's epoch, as aclrtSynchronizeStream's is: its gap after the last
 * enqueue tells the patterns apart, and in the overlap pattern its end times the epoch. Without
 * that a program that waits only for events would stay in the synchronous pattern, its ops
 * started only when it waits, never while it computes. A wait for an earlier task, with later ones
 * queued behind it (a pipelined program), is a gap for the policy too (hc_rt_policy_waited_behind).
 */
void hc_rt_stream_wait_begin(const void *handle, uint64_t pos, hc_rt_stream_wait_t *w)
{
    hc_rt_sample_point_t before = {.ns = 0};
    hc_rt_object_t *obj;
    hc_rt_stream_t *s;
    int host = w != NULL && tls_frames == NULL;

    if (w != NULL)
        w->stream = NULL;
    if (hc_rt_handle_borrow(handle, HC_RT_KIND_STREAM, &obj) != ACL_SUCCESS)
        return; /* destroyed, and so drained */
    s = (hc_rt_stream_t *)obj;
    if (atomic_load_explicit(&s->done_count, memory_order_acquire) >= pos) {
        hc_rt_stream_return(s);
        return;
    }
    /* Only a wait for the last task queued can end a sampled epoch (the sample point costs a few
     * system calls, ~9 us on a KVM guest: taken at every wait of a pipelined program, it made each
     * wait look long). */
    if (host && pos >= count_of(&s->enq_count) && atomic_load_explicit(&s->sampling, memory_order_relaxed))
        hc_rt_policy_sample_point(&s->policy, &before);
    pthread_mutex_lock(&s->lock);
    if (host && pos >= count_of(&s->enq_count) && s->policy.epoch_start_ns != 0 &&
        hc_rt_policy_sync_begin(&s->policy, hc_fast_now_ns(), &before))
        w->stream = s; /* hc_rt_stream_wait_end reports the epoch's end */
    else if (host && pos < count_of(&s->enq_count) && count_of(&s->done_count) < pos)
        hc_rt_policy_waited_behind(&s->policy,
                                   w->entry_ns - atomic_load_explicit(&s->record_ns, memory_order_relaxed));
    mirror_epoch(s);
    keep_backstop(s);
    if (!hc_rt_policy_caller_runs(&s->policy)) {
        kick_worker(s);
    } else {
        if (host)
            run_bounded_until(s, pos);
        if (count_of(&s->done_count) < pos) /* a wake-up with nothing to run took a rank's CPU */
            kick_worker_to(s, pos);
    }
    pthread_mutex_unlock(&s->lock);
    if (!host || w->stream == NULL)
        hc_rt_stream_return(s);
}

void hc_rt_stream_wait_end(hc_rt_stream_wait_t *w)
{
    hc_rt_stream_t *s = w->stream;

    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    hc_rt_policy_sync_end(&s->policy, hc_fast_now_ns());
    mirror_epoch(s);
    keep_backstop(s);
    pthread_mutex_unlock(&s->lock);
    hc_rt_stream_return(s);
    w->stream = NULL;
}

/* Whether the stream holds ACL_HOST_STREAM_DEPTH unfinished tasks (a launch has just filled it). */
static int stream_full(const hc_rt_stream_t *s)
{
    uint64_t done = atomic_load_explicit(&s->done_count, memory_order_relaxed);

    return count_of(&s->enq_count) - done >= ACL_HOST_STREAM_DEPTH;
}

/*
 * A full stream's launching thread works its way back to half the depth, as an untimed synchroniser
 * would: it runs the oldest tasks itself (the worker, if it is running them, hands them over after
 * its current one) and, where the worker is the runner, kicks it for the rest. Not from one of the
 * stream's own tasks: that one cannot finish before the launch returns.
 */
void hc_rt_stream_throttle(hc_rt_stream_t *s)
{
    if (!stream_full(s) || runs_here(s))
        return;
    pthread_mutex_lock(&s->lock);
    drive_until(s, count_of(&s->enq_count) - ACL_HOST_STREAM_DEPTH / 2);
    if (!hc_rt_policy_caller_runs(&s->policy))
        kick_worker(s);
    pthread_mutex_unlock(&s->lock);
}

void hc_rt_stream_run_ready(hc_rt_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->head != NULL && !is_executing(s) && s->drivers == 0 && !s->stopping &&
        hc_rt_policy_caller_runs(&s->policy) &&
        atomic_load_explicit(&s->first_error, memory_order_relaxed) == ACL_SUCCESS) {
        run_tasks_if(s, UINT64_MAX, 0, 1);
        if (s->head != NULL && s->head->start_now != NULL)
            s->head->start_now(s->head->arg); /* once per task: the task's own to make sure */
    }
    pthread_mutex_unlock(&s->lock);
}

static void kick_stalled(hc_rt_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->head != NULL && !is_executing(s) && s->drivers == 0 && !s->stopping &&
        hc_rt_policy_caller_runs(&s->policy)) {
        stalled(s);
        pthread_cond_signal(&s->work_cv);
    }
    pthread_mutex_unlock(&s->lock);
}

void hc_rt_stream_kick_all(void)
{
    hc_rt_object_t **objs;
    size_t count;

    if (hc_rt_handle_collect(HC_RT_KIND_STREAM, &objs, &count) != ACL_SUCCESS)
        return; /* said why; the backstop polls remain */
    for (size_t i = 0; i < count; i++) {
        kick_stalled((hc_rt_stream_t *)objs[i]); /* base first */
        hc_rt_object_unref(objs[i]);
    }
    free(objs);
}

/* May the launching thread run task now? The stream is idle, the caller is the runner, and the
 * task agrees. Called with the lock held. */
static int may_claim(hc_rt_stream_t *s, hc_rt_task_t *task)
{
    return task->may_run_now != NULL && s->head == NULL && !is_executing(s) && !s->stopping &&
           hc_rt_policy_claim_allowed(&s->policy) && task->may_run_now(task->arg);
}

/* A task was queued: the policy hears of the launch, and the worker is woken when it is the runner
 * (else kept polling as the backstop). Called with the lock held. `waitable`: the task is one that
 * waits can name (an event's record, enqueued with a position): the stream notes when, for a wait
 * behind the queue, which measures its gap from there (hc_rt_stream_wait_begin), with the launch's
 * own clock read when the policy took one. */
static void queued(hc_rt_stream_t *s, int waitable)
{
    int64_t now = 0;

    s->idle_ns = 0;
    if (hc_rt_policy_wants_time(&s->policy, 1))
        hc_rt_policy_launched(&s->policy, now = hc_fast_now_ns());
    if (waitable)
        atomic_store_explicit(&s->record_ns, now != 0 ? now : hc_fast_now_ns(), memory_order_relaxed);
    mirror_epoch(s);
    if (!hc_rt_policy_caller_runs(&s->policy) || s->dormant)
        kick_worker(s);
    else
        keep_backstop(s);
}

/* hc_rt_stream_launch; pos_p (queued tasks only): the enq_count that counts the task. */
static aclError launch(hc_rt_stream_t *s, hc_rt_task_t *task, int *claimed_p, uint64_t *pos_p)
{
    const char *what = task->what;
    int owner = claimed_p != NULL ? owner_claim(s, task) : -1; /* the owner's fast path first */

    task->link = NULL;
    if (owner == 1) {
        *claimed_p = 1;
        return ACL_SUCCESS;
    }
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        HC_ERROR("cannot enqueue %s on stream %p: the stream is being destroyed", what, s->base.handle);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    if (claimed_p != NULL && owner != 0 && may_claim(s, task)) {
        /* Run-at-enqueue: this thread is the executor until hc_rt_stream_run_claimed. In the
         * synchronous pattern nothing is timed (the common case, kept cheap). */
        s->claim_start_ns = 0;
        if (hc_rt_policy_wants_time(&s->policy, 0)) {
            int64_t now = hc_fast_now_ns();
            hc_rt_policy_launched(&s->policy, now);
            s->claim_start_ns = hc_rt_policy_times_tasks(&s->policy) ? now : 0;
        }
        set_executing(s, 1);
        count_up(&s->enq_count);
        mirror_epoch(s);
        pthread_mutex_unlock(&s->lock);
        *claimed_p = 1;
        return ACL_SUCCESS;
    }
    /* Start-at-enqueue (rt_ext.h): nobody can run it before. Not while the worker spins for its
     * next task: it starts the task at once, and the launching thread goes back to its work. */
    if (task->start_now != NULL && s->head == NULL && !is_executing(s) && !s->worker_spins)
        task->start_now(task->arg);
    if (s->tail != NULL)
        s->tail->link = task;
    else
        s->head = task;
    s->tail = task;
    count_up(&s->enq_count);
    if (pos_p != NULL)
        *pos_p = count_of(&s->enq_count);
    queued(s, pos_p != NULL);
    pthread_mutex_unlock(&s->lock);
    if (claimed_p != NULL)
        *claimed_p = stream_full(s) ? ACL_HOST_LAUNCH_FULL : 0;
    return ACL_SUCCESS;
}

aclError hc_rt_stream_launch(hc_rt_stream_t *s, hc_rt_task_t *task, int *claimed_p)
{
    return launch(s, task, claimed_p, NULL);
}

aclError hc_rt_stream_enqueue_task(hc_rt_stream_t *s, hc_rt_task_t *task, uint64_t *pos_p)
{
    aclError res = launch(s, task, NULL, pos_p);

    if (res == ACL_SUCCESS && pos_p == NULL)
        hc_rt_stream_throttle(s);
    return res;
}

aclError hc_rt_stream_enqueue_at(hc_rt_stream_t *s, aclrtHostTaskFn fn, void *arg, const char *what, int bounded,
                                 uint64_t *pos_p)
{
    hc_rt_task_t *task = malloc(sizeof(*task));
    aclError res;

    if (task == NULL) {
        HC_ERROR("cannot enqueue %s on stream %p: out of memory", what, s->base.handle);
        return ACL_ERROR_BAD_ALLOC;
    }
    *task = (hc_rt_task_t){.fn = fn, .arg = arg, .what = what, .owned = 1, .bounded = bounded};
    res = hc_rt_stream_enqueue_task(s, task, pos_p);
    if (res != ACL_SUCCESS)
        free(task);
    return res;
}

aclError hc_rt_stream_enqueue(hc_rt_stream_t *s, aclrtHostTaskFn fn, void *arg, const char *what)
{
    return hc_rt_stream_enqueue_at(s, fn, arg, what, 0, NULL);
}

/* A claimed task (or direct run) is over: count it and keep its error (taking msg). The owner's
 * successful fast claim ends in claimed_done; everything else here. */
static __attribute__((noinline)) void claimed_done_locked(hc_rt_stream_t *s, aclError err, const char *what,
                                                          char *msg)
{
    pthread_mutex_lock(&s->lock);
    record_result(s, err, what, msg);
    set_executing(s, 0);
    if (s->policy.epoch_start_ns != 0 || s->claim_start_ns != 0) {
        int64_t now = hc_fast_now_ns();
        if (s->claim_start_ns != 0)
            hc_rt_policy_task_ran(&s->policy, s->claim_start_ns, now, 0);
        if (s->policy.epoch_start_ns != 0)
            s->policy.last_enq_ns = now; /* the caller's gap starts when the task is done */
    }
    kick_worker(s); /* tasks other threads queued meanwhile */
    pthread_mutex_unlock(&s->lock);
}

static inline void claimed_done(hc_rt_stream_t *s, aclError err, const char *what, char *msg)
{
    int fast = s->fast_claimed;

    s->fast_claimed = 0;
    if (fast && err == ACL_SUCCESS && owner_release(s))
        return;
    claimed_done_locked(s, err, what, msg);
}

void hc_rt_stream_run_claimed(hc_rt_stream_t *s, hc_rt_task_t *task)
{
    const char *what = task->what;
    char *msg;
    aclError err = run_one(s, task, 0, &msg); /* claimed tasks are HCCL ops, which are never skipped */

    claimed_done(s, err, what, msg);
}

void hc_rt_stream_runner(hc_rt_stream_t *s, int *sync_pattern_p, int *runner_p)
{
    pthread_mutex_lock(&s->lock);
    *sync_pattern_p = s->policy.sync_pattern;
    *runner_p = !hc_rt_policy_caller_runs(&s->policy);
    pthread_mutex_unlock(&s->lock);
}

int hc_rt_stream_idle(hc_rt_stream_t *s)
{
    int idle;

    pthread_mutex_lock(&s->lock);
    idle = count_of(&s->done_count) == count_of(&s->enq_count);
    kick_worker(s); /* a program polling instead of synchronising still sees its tasks start */
    pthread_mutex_unlock(&s->lock);
    return idle;
}

void hc_rt_stream_set_stop_on_failure(hc_rt_stream_t *s, int stop)
{
    pthread_mutex_lock(&s->lock);
    s->stop_on_failure = stop;
    mirror_epoch(s);
    pthread_mutex_unlock(&s->lock);
}

static void stream_release(hc_rt_object_t *obj)
{
    hc_rt_stream_t *s = (hc_rt_stream_t *)obj;

    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s->first_error_msg);
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
    mirror_epoch(s);
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
    s->grace_ns = hc_config_int(HC_CFG_BACKSTOP_MS) * 1000000LL;
    s->poll_ns = s->grace_ns;
    hc_rt_policy_init(&s->policy);
    hc_owner_init(&s->own, 1);
    mirror_epoch(s);
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
    hc_rt_policy_set_worker(&s->policy, s->worker);
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
        if (res == ACL_SUCCESS)
            res = hc_rt_device_default_stream(device, stream_p);
        if (res == ACL_SUCCESS)
            hc_owner_take_over(&(*stream_p)->own);
        return res;
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
    hc_owner_take_over(&(*stream_p)->own);
    return ACL_SUCCESS;
}

void hc_rt_stream_put(hc_rt_stream_t *stream)
{
    hc_rt_object_unref(&stream->base);
}

/* The thread's cache of borrowed objects (handle.c) holds the streams; a borrow makes this thread
 * the stream's user, as a lookup does. */
static hc_rt_stream_t *borrow_cached(aclrtStream handle)
{
    hc_rt_stream_t *s = (hc_rt_stream_t *)hc_rt_handle_borrow_cached(handle, HC_RT_KIND_STREAM);

    if (s != NULL)
        hc_owner_take_over(&s->own);
    return s;
}

aclError hc_rt_stream_borrow(aclrtStream handle, const char *call, hc_rt_stream_t **stream_p)
{
    aclError res;

    if ((*stream_p = borrow_cached(handle)) != NULL)
        return ACL_SUCCESS;
    res = hc_rt_stream_get(handle, call, stream_p);
    if (res == ACL_SUCCESS && handle != NULL)
        (void)hc_rt_handle_keep(handle, &(*stream_p)->base);
    return res;
}

void hc_rt_stream_return(hc_rt_stream_t *stream)
{
    hc_rt_handle_return(&stream->base); /* the default stream is never kept: a plain reference */
}

/* Nothing of run_one is needed: the calling thread's device is the stream's and no profiler
 * records it (else NULL); the work never synchronises its own stream (an HCCL op). */
hc_rt_stream_t *hc_rt_stream_direct_begin(aclrtStream handle)
{
    hc_rt_stream_t *s = borrow_cached(handle);

    if (s == NULL)
        return NULL;
    if (s->device != aclrtHostCurrentDevice() || hc_rt_prof_wants(s->device) || owner_claim(s, NULL) != 1) {
        hc_rt_stream_return(s);
        return NULL;
    }
    return s;
}

/* The claim's work is queued after all: first in the queue, as it was claimed before anything
 * other threads launched meanwhile; then as a launch that queues (hc_rt_stream_launch). */
void hc_rt_stream_direct_queue(hc_rt_stream_t *s, hc_rt_task_t *task)
{
    task->owned = 0;
    s->fast_claimed = 0;
    pthread_mutex_lock(&s->lock);
    task->link = s->head;
    s->head = task;
    if (s->tail == NULL)
        s->tail = task;
    set_executing(s, 0);
    queued(s, 0);
    if (s->waiters > 0) {
        /* A synchroniser or destroyer came meanwhile and waits for the claim to end: a driver now
         * runs the task, and a bounded waiter's worker is woken to (not done, as after a claim). */
        pthread_cond_broadcast(&s->done_cv);
        kick_worker(s);
    }
    pthread_mutex_unlock(&s->lock);
    hc_rt_stream_return(s);
}

void hc_rt_stream_direct_end(hc_rt_stream_t *s, aclError err, const char *what, const char *msg)
{
    char *copy = NULL;

    if (err != ACL_SUCCESS) /* the line the synchroniser gets: the work's, else the last one logged */
        copy = strdup(msg != NULL ? msg : hc_log_last_error()); /* NULL when out of memory: a generic line */
    claimed_done(s, err, what, copy);
    hc_rt_stream_return(s);
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

    hc_owner_take_over(&s->own);
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    mirror_epoch(s);
    pthread_cond_broadcast(&s->work_cv);
    drive_until(s, count_of(&s->enq_count));
    kick_worker(s);
    unreported = atomic_load_explicit(&s->first_error, memory_order_relaxed);
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
