/*
 * Who runs a stream's tasks (docs/runtime.md, "Who runs the tasks"): run-at-enqueue on an idle
 * stream, only when the task allows it and always in stream order; the synchronous and overlap
 * patterns as the gaps between enqueue and synchronisation show them; HOSTCCL_PROGRESS.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt_test.h"

typedef struct {
    aclrtHostTask task;  /* first: the runtime's entry */
    int allow;           /* what may_run_now answers */
    int asked;           /* how often it was asked */
    pthread_t ran_on;
    atomic_int ran;
    aclError result;
    atomic_int *order;   /* the position this task must find, then advance */
    int position;
    int out_of_order;
    int started;         /* start_now calls */
    int started_before_run; /* the task had not run when start_now was called */
} probe_t;

static aclError probe_run(void *arg)
{
    probe_t *p = arg;

    p->ran_on = pthread_self();
    if (p->order != NULL) {
        p->out_of_order = atomic_load(p->order) != p->position;
        atomic_fetch_add(p->order, 1);
    }
    atomic_store(&p->ran, 1);
    return p->result;
}

static int probe_may_run(void *arg)
{
    probe_t *p = arg;

    p->asked++;
    return p->allow;
}

static void probe_start(void *arg)
{
    probe_t *p = arg;

    p->started++;
    p->started_before_run = !atomic_load(&p->ran);
}

static void probe_init(probe_t *p, int allow)
{
    *p = (probe_t){.allow = allow, .result = ACL_SUCCESS};
    p->task = (aclrtHostTask){.fn = probe_run, .arg = p, .what = "probe", .may_run_now = probe_may_run};
}

/* Launch with a claim and run it here when claimed; *claimed_p tells which. No cmocka assertions:
 * helper threads use it too (assertions may only fail on the test's thread). */
static aclError launch_claiming(aclrtStream stream, probe_t *p, int *claimed_p)
{
    aclError res = aclrtHostLaunchTaskIn(stream, &p->task, claimed_p);

    if (res == ACL_SUCCESS && *claimed_p)
        aclrtHostRunClaimed(&p->task);
    return res;
}

/* The same on the test's thread. Returns whether it was claimed. */
static int launch(aclrtStream stream, probe_t *p)
{
    int claimed = -1;

    assert_int_equal(launch_claiming(stream, p, &claimed), ACL_SUCCESS);
    assert_true(claimed == 0 || claimed == 1);
    return claimed;
}

static aclrtStream new_stream(void)
{
    aclrtStream stream;

    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    return stream;
}

/* An idle stream in the synchronous pattern: a task that allows it runs on the launching thread,
 * before the launch returns; its error is the next synchronisation's, once. */
static void test_runs_at_enqueue_when_idle(void **state)
{
    aclrtStream stream = new_stream();
    probe_t p;

    (void)state;
    probe_init(&p, 1);
    p.result = ACL_ERROR_RT_COMM_OP_FAILED;
    assert_int_equal(launch(stream, &p), 1);
    assert_int_equal(p.asked, 1);
    assert_int_equal(atomic_load(&p.ran), 1);
    assert_true(pthread_equal(p.ran_on, pthread_self()));
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_COMM_OP_FAILED);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* A task that does not allow it is queued (and runs at the synchronisation); so is one launched
 * without a claim, even when it would allow it. */
static void test_queued_when_not_allowed(void **state)
{
    aclrtStream stream = new_stream();
    probe_t no, allowed;

    (void)state;
    probe_init(&no, 0);
    assert_int_equal(launch(stream, &no), 0);
    assert_int_equal(no.asked, 1);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&no.ran), 1);
    probe_init(&allowed, 1);
    assert_int_equal(aclrtHostLaunchTaskIn(stream, &allowed.task, NULL), ACL_SUCCESS);
    assert_int_equal(allowed.asked, 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&allowed.ran), 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* Start-at-enqueue (rt_ext.h): a task queued on an idle stream is started on the launching thread,
 * before anyone can run it, in either pattern; one queued behind another task, or launched while
 * the stream runs one, is not started, and a claimed task is run instead of started. */
static void test_started_only_when_idle(void **state)
{
    aclrtStream stream = new_stream();
    probe_t idle, behind, claimed, busy;
    gate_t gate;

    (void)state;
    probe_init(&idle, 0);
    probe_init(&behind, 0);
    idle.task.start_now = behind.task.start_now = probe_start;
    assert_int_equal(launch(stream, &idle), 0);
    assert_int_equal(launch(stream, &behind), 0);
    assert_int_equal(idle.started, 1);
    assert_true(idle.started_before_run);
    assert_int_equal(behind.started, 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_true(atomic_load(&idle.ran) && atomic_load(&behind.ran));
    assert_int_equal(behind.started, 0);

    probe_init(&claimed, 1);
    claimed.task.start_now = probe_start;
    assert_int_equal(launch(stream, &claimed), 1);
    assert_int_equal(claimed.started, 0);

    gate_init(&gate);
    hold_stream(stream, &gate); /* the worker runs the gate task: the stream is busy */
    probe_init(&busy, 0);
    busy.task.start_now = probe_start;
    assert_int_equal(launch(stream, &busy), 0);
    assert_int_equal(busy.started, 0);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&busy.ran), 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* A busy stream (a task queued or running before it) never runs a task at enqueue: stream order. */
static void test_never_ahead_of_queued_tasks(void **state)
{
    aclrtStream stream = new_stream();
    atomic_int order = 0;
    probe_t first, second;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    hold_stream(stream, &gate); /* the worker runs the gate task: the stream is busy */
    probe_init(&first, 1);
    probe_init(&second, 1);
    first.order = second.order = &order;
    second.position = 1;
    assert_int_equal(launch(stream, &first), 0);
    assert_int_equal(launch(stream, &second), 0);
    assert_int_equal(first.asked + second.asked, 0); /* not even asked */
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&order), 2);
    assert_false(first.out_of_order || second.out_of_order);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

/* aclrtHostRunReady (libhccl's launch in a burst): the queued tasks at the head that say they may
 * run now run on the calling thread, in stream order, up to the first that says no, which is then
 * started (and none behind it); nothing runs or starts while another thread executes the stream's
 * tasks, and the call does not wait for it. */
static void test_run_ready_runs_the_ready_head(void **state)
{
    aclrtStream stream = new_stream();
    atomic_int order = 0;
    probe_t p[4], held;
    gate_t gate;

    (void)state;
    for (int i = 0; i < 4; i++) {
        probe_init(&p[i], i % 2); /* the head says no at first, then yes, no, yes */
        p[i].task.start_now = probe_start;
        p[i].order = &order;
        p[i].position = i;
        assert_int_equal(launch(stream, &p[i]), 0);
    }
    aclrtHostRunReady(stream);
    assert_int_equal(atomic_load(&order), 0);
    assert_true(p[0].asked >= 2); /* at its launch, and now */
    p[0].allow = 1;
    aclrtHostRunReady(stream);
    assert_int_equal(atomic_load(&order), 2);
    assert_true(pthread_equal(p[0].ran_on, pthread_self()) && pthread_equal(p[1].ran_on, pthread_self()));
    assert_int_equal(p[3].asked, 0); /* behind a task that said no: not even asked */
    assert_false(atomic_load(&p[2].ran) || atomic_load(&p[3].ran));
    assert_int_equal(p[2].started, 1);
    assert_true(p[2].started_before_run);
    assert_int_equal(p[1].started + p[3].started, 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&order), 4);
    for (int i = 0; i < 4; i++)
        assert_false(p[i].out_of_order);

    gate_init(&gate);
    hold_stream(stream, &gate); /* the worker runs the gate task */
    probe_init(&held, 1);
    held.task.start_now = probe_start;
    assert_int_equal(launch(stream, &held), 0);
    aclrtHostRunReady(stream);
    assert_int_equal(held.asked + held.started, 0);
    assert_false(atomic_load(&held.ran));
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&held.ran), 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

typedef struct {
    aclrtStream stream;
    probe_t *claimed;   /* runs at enqueue, opening `inside` and waiting for `release` */
    gate_t inside, release;
    aclError launch_res;
    int was_claimed;
} hold_args_t;

static aclError hold_inside(void *arg)
{
    hold_args_t *h = arg;

    gate_open(&h->inside);
    gate_wait_open(&h->release);
    return probe_run(h->claimed);
}

static int always(void *arg)
{
    (void)arg;
    return 1;
}

/* On a helper thread: no cmocka assertions here (they may only fail on the test's thread). */
static void *launch_held(void *arg)
{
    hold_args_t *h = arg;

    h->launch_res = launch_claiming(h->stream, h->claimed, &h->was_claimed);
    if (h->launch_res != ACL_SUCCESS || !h->was_claimed)
        gate_open(&h->inside); /* do not leave the test waiting */
    return NULL;
}

/* While a task runs at enqueue on one thread, another thread's launches queue behind it and a
 * synchronisation waits for both: the claimed task is the stream's executor. */
static void test_claim_keeps_stream_order(void **state)
{
    aclrtStream stream = new_stream();
    atomic_int order = 0;
    probe_t held, later;
    hold_args_t h = {.stream = stream, .claimed = &held};
    pthread_t thread;

    (void)state;
    gate_init(&h.inside);
    gate_init(&h.release);
    probe_init(&held, 1);
    held.task.fn = hold_inside;
    held.task.arg = &h;
    held.task.may_run_now = always;
    held.order = &order;
    assert_int_equal(pthread_create(&thread, NULL, launch_held, &h), 0);
    gate_wait_open(&h.inside);
    probe_init(&later, 1);
    later.order = &order;
    later.position = 1;
    assert_int_equal(launch(stream, &later), 0); /* queued behind the running claim */
    gate_open(&h.release);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(h.launch_res, ACL_SUCCESS);
    assert_int_equal(h.was_claimed, 1);
    assert_int_equal(atomic_load(&order), 2);
    assert_false(held.out_of_order || later.out_of_order);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&h.inside);
    gate_destroy(&h.release);
}

/* The owner's run-at-enqueue (the thread that created the stream claims and records its task
 * without the stream lock) and another thread meanwhile: the other thread takes the stream over
 * while the owner's task runs, finds it executing and queues behind it; the owner's task is then
 * recorded under the lock and both run in order. */
typedef struct {
    aclrtStream stream;
    probe_t *later;     /* launched by the other thread while the owner's task runs */
    gate_t inside, launched;
    aclError launch_res;
    int later_claimed;
} owner_args_t;

static aclError owner_task(void *arg)
{
    owner_args_t *o = arg;

    gate_open(&o->inside);
    gate_wait_open(&o->launched);
    return ACL_SUCCESS;
}

static void *launch_meanwhile(void *arg)
{
    owner_args_t *o = arg;

    gate_wait_open(&o->inside);
    o->launch_res = launch_claiming(o->stream, o->later, &o->later_claimed);
    gate_open(&o->launched);
    return NULL;
}

static void test_owner_claim_then_another_thread(void **state)
{
    aclrtStream stream = new_stream();
    atomic_int order = 0;
    probe_t first, later;
    owner_args_t o = {.stream = stream, .later = &later};
    pthread_t thread;

    (void)state;
    gate_init(&o.inside);
    gate_init(&o.launched);
    probe_init(&first, 1);
    first.order = &order;
    assert_int_equal(launch(stream, &first), 1); /* the owner's fast path, nothing else around */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    probe_init(&later, 1);
    later.order = &order;
    later.position = 1;
    probe_init(&first, 1);
    first.task.fn = owner_task;
    first.task.arg = &o;
    first.task.may_run_now = always;
    assert_int_equal(pthread_create(&thread, NULL, launch_meanwhile, &o), 0);
    assert_int_equal(launch(stream, &first), 1); /* runs owner_task here until the other launched */
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(o.launch_res, ACL_SUCCESS);
    assert_int_equal(o.later_claimed, 0); /* queued behind the owner's running task */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&later.ran), 1);
    assert_int_equal(atomic_load(&order), 2);
    assert_false(later.out_of_order);
    probe_init(&first, 1);
    assert_int_equal(launch(stream, &first), 1); /* shared now: claimed under the lock, as before */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&o.inside);
    gate_destroy(&o.launched);
}

/* Many times over, on a fresh stream each: the owner claims tasks at enqueue (its fast path) in a
 * loop while another thread, at a moment of its own, launches a task and synchronises the stream
 * (taking it over, perhaps while the owner is inside a claim or a record). Every task runs exactly
 * once, the owner's in their order, and every synchronisation succeeds. */
#define RACE_ROUNDS 1000
#define RACE_TASKS 64

typedef struct {
    aclrtStream stream;
    atomic_int *go;       /* the owner's progress the other thread waits for before it starts */
    int after;            /* how many of the owner's tasks to let pass first */
    probe_t probe;
    aclError launch_res, sync_res;
} race_args_t;

static void *race_other(void *arg)
{
    race_args_t *r = arg;
    int claimed = 0;

    while (atomic_load(r->go) < r->after)
        sched_yield();
    r->launch_res = launch_claiming(r->stream, &r->probe, &claimed);
    r->sync_res = aclrtSynchronizeStream(r->stream);
    return NULL;
}

static void test_owner_race_with_another_thread(void **state)
{
    static probe_t tasks[RACE_TASKS];
    atomic_int order, go;

    (void)state;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        race_args_t r = {.stream = new_stream(), .go = &go, .after = round % RACE_TASKS};
        int ran_out_of_order = 0, ran = 0;
        pthread_t thread;

        atomic_store(&order, 0);
        atomic_store(&go, 0);
        probe_init(&r.probe, 1);
        assert_int_equal(pthread_create(&thread, NULL, race_other, &r), 0);
        for (int i = 0; i < RACE_TASKS; i++) {
            probe_init(&tasks[i], 1);
            tasks[i].order = &order;
            tasks[i].position = i;
            (void)launch(r.stream, &tasks[i]);
            atomic_store(&go, i + 1);
            assert_int_equal(aclrtSynchronizeStream(r.stream), ACL_SUCCESS);
        }
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_int_equal(r.launch_res, ACL_SUCCESS);
        assert_int_equal(r.sync_res, ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStream(r.stream), ACL_SUCCESS);
        for (int i = 0; i < RACE_TASKS; i++) {
            ran += atomic_load(&tasks[i].ran);
            ran_out_of_order |= tasks[i].out_of_order;
        }
        assert_int_equal(ran, RACE_TASKS);
        assert_false(ran_out_of_order);
        assert_int_equal(atomic_load(&order), RACE_TASKS);
        assert_int_equal(atomic_load(&r.probe.ran), 1);
        assert_int_equal(aclrtDestroyStream(r.stream), ACL_SUCCESS);
    }
}

static aclError nop_task(void *arg)
{
    (void)arg;
    return ACL_SUCCESS;
}

static void runner_of(aclrtStream stream, int *sync_pattern, int *runner)
{
    assert_int_equal(aclrtHostStreamRunner(stream, sync_pattern, runner), ACL_SUCCESS);
}

/* Epochs that synchronise right after the enqueue, until the stream is in the synchronous pattern
 * (at most limit of them). */
static void synchronise_at_once(aclrtStream stream, int limit, int *sync_pattern, int *runner)
{
    for (int epochs = 0; *sync_pattern == 0 && epochs < limit; epochs++) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "short gap"), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        runner_of(stream, sync_pattern, runner);
    }
}

/*
 * The pattern follows the gaps: a new stream is synchronous (the caller runs). Epochs whose
 * synchronisation comes long after the enqueue (the sleep is the program's "compute", the very
 * thing under test) make it the overlap pattern with the worker as runner, so that enqueue wakes
 * the worker: after two of them, or a few more on a loaded machine, where the worker that notices
 * may itself wait for a CPU (bounded). Synchronising right after enqueueing for a few epochs brings
 * it back. One long gap alone (100 us, below the worker's 1 ms backstop) changes nothing: a
 * preempted caller shows one now and then. (Checked only when the sleep did stay well below the
 * backstop: on a loaded machine it may not, and a task the backstop had to run ends the
 * synchronous pattern at once.)
 */
/*
 * A direct run (aclrtHostDirectBegin, libhccl's blocking fast path) that ends queued
 * (aclrtHostDirectQueue) while another thread synchronises the stream: that thread came during
 * the claim and waits for it as a driver; it must run the task. (It slept on until the owner
 * synchronised: a program whose synchronising thread is not the launching one hung.)
 */
typedef struct {
    aclrtStream stream;
    atomic_long tid;
    atomic_int done;
    aclError res;
} sync_args_t;

static void *sync_meanwhile(void *arg)
{
    sync_args_t *a = arg;

    atomic_store(&a->tid, (long)syscall(SYS_gettid));
    a->res = aclrtSynchronizeStream(a->stream);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Whether thread tid of this process is asleep ('S' in its stat line). */
static int thread_sleeping(long tid)
{
    char path[64], line[512], *state;
    FILE *f;
    int asleep = 0;

    snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fgets(line, sizeof(line), f) != NULL && (state = strrchr(line, ')')) != NULL)
        asleep = state[1] == ' ' && state[2] == 'S';
    fclose(f);
    return asleep;
}

/* Poll cond(arg) for up to 10 s (what it waits for has no other signal: another thread's state). */
static int within_10s(int (*cond)(void *), void *arg)
{
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 1000000};

    for (int i = 0; i < 10000; i++) {
        if (cond(arg))
            return 1;
        nanosleep(&tick, NULL);
    }
    return cond(arg);
}

static int waiting_in_sync(void *arg)
{
    sync_args_t *a = arg;
    long tid = atomic_load(&a->tid);

    return tid != 0 && thread_sleeping(tid);
}

static int sync_done(void *arg)
{
    return atomic_load(&((sync_args_t *)arg)->done);
}

static void test_direct_queue_wakes_a_waiting_synchroniser(void **state)
{
    aclrtStream stream = new_stream();
    sync_args_t a = {.stream = stream};
    pthread_t thread;
    probe_t p;
    void *direct;
    int woke;

    (void)state;
    probe_init(&p, 1);
    assert_int_equal(launch(stream, &p), 1); /* the stream is this thread's, in its cache */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    direct = aclrtHostDirectBegin(stream);
    assert_non_null(direct);
    assert_int_equal(pthread_create(&thread, NULL, sync_meanwhile, &a), 0);
    assert_true(within_10s(waiting_in_sync, &a));
    probe_init(&p, 0);
    p.task.may_run_now = NULL;
    aclrtHostDirectQueue(direct, &p.task);
    woke = within_10s(sync_done, &a);
    if (!woke)
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS); /* lets it go, to fail cleanly */
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_true(woke);
    assert_int_equal(a.res, ACL_SUCCESS);
    assert_int_equal(atomic_load(&p.ran), 1);
    assert_false(pthread_equal(p.ran_on, pthread_self()));
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* A thread that cycles through many events keeps its stream's cached borrow (streams have entries of
 * their own in the thread's cache), so a blocking op still runs at launch. */
static void test_direct_after_many_events(void **state)
{
    enum { EVENTS = 12 };
    aclrtStream stream = new_stream();
    aclrtEvent events[EVENTS];
    aclrtEventStatus status;
    probe_t p;
    void *direct;

    (void)state;
    probe_init(&p, 1);
    assert_int_equal(launch(stream, &p), 1); /* the stream is this thread's, in its cache */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    for (int i = 0; i < EVENTS; i++) {
        assert_int_equal(aclrtCreateEvent(&events[i]), ACL_SUCCESS);
        assert_int_equal(aclrtRecordEvent(events[i], stream), ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    for (int i = 0; i < EVENTS; i++) { /* the events alone, more of them than the cache holds */
        assert_int_equal(aclrtQueryEvent(events[i], &status), ACL_SUCCESS);
        assert_int_equal(status, ACL_EVENT_STATUS_COMPLETE);
    }
    direct = aclrtHostDirectBegin(stream);
    assert_non_null(direct);
    aclrtHostDirectEnd(direct, ACL_SUCCESS, "direct", NULL);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    for (int i = 0; i < EVENTS; i++)
        assert_int_equal(aclrtDestroyEvent(events[i]), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

static void test_pattern_follows_the_gaps(void **state)
{
    const struct timespec compute = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
    const struct timespec short_compute = {.tv_sec = 0, .tv_nsec = 100 * 1000};
    aclrtStream stream = new_stream();
    int sync_pattern, runner, epochs = 0;
    struct timespec t0, t1;

    (void)state;
    runner_of(stream, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 1);
    assert_int_equal(runner, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
    nanosleep(&short_compute, NULL);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    runner_of(stream, &sync_pattern, &runner);
    if ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 500 * 1000L)
        assert_int_equal(sync_pattern, 1);
    while (sync_pattern == 1 && epochs++ < 50) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
        nanosleep(&compute, NULL);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
    }
    assert_int_equal(sync_pattern, 0);
    assert_int_equal(runner, 1);
    /* Back to synchronous after a few epochs synchronised at once (each well within 20 us unless
     * the machine preempts this thread in between: bounded retries). */
    synchronise_at_once(stream, 1000, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 1);
    assert_int_equal(runner, 0);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* Tasks nobody synchronises still run (the worker's backstop), and then the stream knows the
 * program overlaps, with or without a synchronisation after each (bounded, as above). The waiting
 * is on the task's own gate, not a synchronisation. */
static void test_unsynchronised_task_runs(void **state)
{
    (void)state;
    for (int with_sync = 0; with_sync < 2; with_sync++) {
        aclrtStream stream = new_stream();
        int sync_pattern = 1, runner, tasks = 0;

        while (sync_pattern == 1 && tasks++ < 50) {
            gate_t gate;
            gate_init(&gate);
            assert_int_equal(aclrtHostLaunchTask(stream, open_gate_task, &gate, "open"), ACL_SUCCESS);
            gate_wait_open(&gate);
            if (with_sync)
                assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
            gate_destroy(&gate);
            runner_of(stream, &sync_pattern, &runner);
        }
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
        assert_int_equal(sync_pattern, 0);
        assert_int_equal(runner, 1);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    }
}

/*
 * While ranks outnumber the CPUs (aclrtHostCpusShared), a blocking loop's worker polls less and less
 * often (up to every 8 ms), and a task nobody synchronises after it still runs: within that poll
 * and one grace period (asserted with room for a loaded machine: well under a second), and the
 * stream then knows the program overlaps.
 */
static double ms_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void test_unsynchronised_task_runs_after_polls_slowed(void **state)
{
    aclrtStream stream;
    gate_t gate;
    struct timespec t0;
    int sync_pattern, runner;

    (void)state;
    aclrtHostCpusShared(1);
    stream = new_stream();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* 50 ms of blocking epochs: the polls find nothing queued and slow down */
        for (int i = 0; i < 100; i++) {
            assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
            assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        }
    } while (ms_since(&t0) < 50.0);
    gate_init(&gate);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(aclrtHostLaunchTask(stream, open_gate_task, &gate, "open"), ACL_SUCCESS);
    gate_wait_open(&gate);
    assert_true(ms_since(&t0) < 1000.0);
    gate_destroy(&gate);
    runner_of(stream, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    aclrtHostCpusShared(-1);
}

/* HOSTCCL_PROGRESS fixes the runner of streams created afterwards, whatever the gaps. */
static void test_progress_setting(void **state)
{
    const struct timespec compute = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
    const char *values[] = {"worker", "caller"};

    (void)state;
    for (int v = 0; v < 2; v++) {
        aclrtStream stream;
        probe_t p;
        int sync_pattern, runner;

        setenv("HOSTCCL_PROGRESS", values[v], 1);
        stream = new_stream();
        for (int i = 0; i < 3; i++) {
            assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
            nanosleep(&compute, NULL);
            assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
            runner_of(stream, &sync_pattern, &runner);
            assert_int_equal(runner, v == 0);
        }
        /* The worker as runner never lets a task run at enqueue (nothing measured says it may). */
        probe_init(&p, 1);
        assert_int_equal(launch(stream, &p), v == 1);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_int_equal(atomic_load(&p.ran), 1);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    }
    unsetenv("HOSTCCL_PROGRESS");
}

static int64_t ns_of(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* Skips the calling test on a machine (or mask) of one CPU: nothing can be spare there. */
static void skip_on_one_cpu(void)
{
    cpu_set_t mask;

    assert_int_equal(sched_getaffinity(0, sizeof(mask), &mask), 0);
    if (CPU_COUNT(&mask) < 2)
        skip();
}

/* Busy for `ns` on this thread's CPU (the program's compute). */
static void compute_ns(long ns)
{
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

/* A task that keeps its runner busy for 1 ms. */
static aclError busy_task(void *arg)
{
    (void)arg;
    compute_ns(1000 * 1000);
    return ACL_SUCCESS;
}

/* One epoch of the overlap pattern: launch, then compute or sleep for 3 ms, then synchronise. */
static void overlap_epoch(aclrtStream stream, aclError (*task)(void *), int sleeps, int *sync_pattern, int *runner)
{
    const struct timespec nap = {.tv_sec = 0, .tv_nsec = 3 * 1000 * 1000};

    assert_int_equal(aclrtHostLaunchTask(stream, task, NULL, "epoch"), ACL_SUCCESS);
    if (sleeps)
        nanosleep(&nap, NULL);
    else
        compute_ns(3 * 1000 * 1000);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    runner_of(stream, sync_pattern, runner);
}

/* An epoch that launches a task that does nothing, computes ns, then synchronises. */
static void compute_epoch(aclrtStream stream, long ns, int *sync_pattern, int *runner)
{
    assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "epoch"), ACL_SUCCESS);
    compute_ns(ns);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    runner_of(stream, sync_pattern, runner);
}

/* Epochs that compute until the stream is in the overlap pattern, then until the caller runs the
 * tasks (at most 50): how many of the latter had the worker as runner. */
static int worker_epochs_while_computing(aclrtStream stream)
{
    int sync_pattern = 1, runner = 1, epochs = 0, worker_epochs = 0;

    while (sync_pattern == 1 && epochs++ < 50)
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    while (runner == 1 && worker_epochs++ < 50)
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    assert_int_equal(runner, 0);
    return worker_epochs;
}

/*
 * A caller that computes between enqueue and synchronisation on the one CPU its stream's worker
 * may use too runs the tasks itself, from the epoch after the first one of the overlap pattern:
 * the worker could only take that CPU from the program. (Trials of the two runners there measured
 * noise, and kept the worker for the first trial period at least.) When the same caller starts
 * sleeping instead, the worker takes over within a trial period: the peers must not wait for a
 * sleeping caller. The test's thread is pinned to one CPU before the stream (and its worker) is
 * created.
 */
static void test_runner_follows_what_the_caller_does(void **state)
{
    cpu_set_t saved, one;
    aclrtStream stream;
    int sync_pattern = 0, runner = 0, epochs = 0, caller_epochs = 0;

    (void)state;
    assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &saved)) {
            CPU_SET(c, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    stream = new_stream();
    assert_true(worker_epochs_while_computing(stream) <= 2);
    /* The caller keeps running them while it computes: no trial hands them back to the worker. (A
     * sample may take the caller for asleep on an overloaded machine, when it waited for the stream's
     * lock that a preempted worker held; the next sample brings the caller back.) */
    for (int i = 0; i < 40; i++) {
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
        caller_epochs += runner == 0;
    }
    assert_true(caller_epochs >= 30);
    /* Now it sleeps: the worker within a trial period. */
    epochs = 0;
    while (runner == 0 && epochs++ < 100)
        overlap_epoch(stream, busy_task, 1, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    assert_int_equal(runner, 1);
    assert_true(epochs <= 64);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

/*
 * A caller that computes while a CPU is spare for the worker (unbound, no communicator filling the
 * CPUs) keeps the worker as runner: the op progresses there meanwhile. No trial of the caller may
 * come: in a collective, a rank's trial timed its own epoch while its peer's worker did its part,
 * looked faster, and every rank kept the caller (nothing hidden on a 16-CPU machine). The runner
 * reported after each synchronisation is the next epoch's, trials included. On a machine of one
 * CPU nothing is spare: skipped there.
 */
static void test_runner_with_a_spare_cpu(void **state)
{
    aclrtStream stream;
    int sync_pattern = 1, runner = 1, epochs = 0, caller_epochs = 0;

    (void)state;
    skip_on_one_cpu();
    stream = new_stream();
    while (sync_pattern == 1 && epochs++ < 50)
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    for (int i = 0; i < 40; i++) {
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
        assert_int_equal(sync_pattern, 0);
        caller_epochs += runner == 0;
    }
    assert_int_equal(caller_epochs, 0);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* The program's other threads: they compute until told to stop (bounded by the test; its teardown
 * stops them where an assertion ended it early, so that they do not load the tests after it). */
enum { OTHERS_MAX = 64 };
static pthread_t others[OTHERS_MAX];
static int nothers;
static atomic_int others_stop;

static void *other_thread_computes(void *arg)
{
    (void)arg;
    while (!atomic_load(&others_stop))
        compute_ns(100 * 1000);
    return NULL;
}

static void start_others(int n)
{
    atomic_store(&others_stop, 0);
    for (nothers = 0; nothers < n && nothers < OTHERS_MAX; nothers++)
        assert_int_equal(pthread_create(&others[nothers], NULL, other_thread_computes, NULL), 0);
}

static int stop_others(void **state)
{
    (void)state;
    atomic_store(&others_stop, 1);
    for (; nothers > 0; nothers--)
        assert_int_equal(pthread_join(others[nothers - 1], NULL), 0);
    return 0;
}

/* The CPU time of the threads start_others started, so far. */
static int64_t others_cpu_ns(void)
{
    int64_t sum = 0;

    for (int i = 0; i < nothers; i++) {
        clockid_t clock;
        struct timespec ts;
        assert_int_equal(pthread_getcpuclockid(others[i], &clock), 0);
        assert_int_equal(clock_gettime(clock, &ts), 0);
        sum += ns_of(&ts);
    }
    return sum;
}

/* A compute_epoch of 1 ms: whether the threads start_others started kept the other CPUs busy
 * meanwhile (nine tenths of them, by those threads' CPU clocks). */
static int others_filled_epoch(aclrtStream stream, int cpus, int *sync_pattern, int *runner)
{
    struct timespec w0, w1;
    int64_t o0, o1;

    clock_gettime(CLOCK_MONOTONIC, &w0);
    o0 = others_cpu_ns();
    compute_epoch(stream, 1000 * 1000, sync_pattern, runner);
    o1 = others_cpu_ns();
    clock_gettime(CLOCK_MONOTONIC, &w1);
    return (o1 - o0) * 10 >= (int64_t)(cpus - 1) * (ns_of(&w1) - ns_of(&w0)) * 9;
}

/*
 * A caller whose program keeps its other CPUs busy with threads of its own (a multi-threaded BLAS,
 * torch's intra-op threads) has no CPU spare for the worker, whatever its mask holds: it runs the
 * tasks itself from the first sampled epoch of each spell of the overlap pattern on, and gets the
 * worker back once those threads stop. Three threads more than the other CPUs. The epochs compute
 * 1 ms, less than a kernel tick of 4 ms: the process's CPU clock, which brings a thread running on
 * another CPU up to date only at that CPU's tick, found a CPU spare in most such epochs (2 CPUs:
 * the other threads' time was below half the wall time in 716 of 900 windows of 1 ms). Ten spells
 * must each switch within two samples (five epochs). A spell counts where the other threads did
 * fill the other CPUs in each of those epochs: beside another program that computes, or on a
 * virtual machine whose host takes a CPU away, they may not (their clocks stand still), and a CPU
 * was then as good as spare. Ten must count within thirty (else skipped: the machine was busy all
 * along). On a machine of one CPU the mask alone decides: skipped there.
 */
static void test_runner_when_other_threads_fill_the_cpus(void **state)
{
    enum { SPELLS = 10, ATTEMPTS = 3 * SPELLS };
    cpu_set_t mask;
    aclrtStream stream;
    int sync_pattern = 1, runner = 1, epochs, counted = 0;

    skip_on_one_cpu();
    assert_int_equal(sched_getaffinity(0, sizeof(mask), &mask), 0);
    stream = new_stream();
    start_others(CPU_COUNT(&mask) - 1 + 3);
    for (int a = 0; a < ATTEMPTS && counted < SPELLS; a++) {
        int filled = 1;
        /* Synchronising right after enqueueing brings the synchronous pattern back; computing
         * between the two starts a spell of the overlap pattern, whose first epoch is sampled, and
         * the next sample comes three epochs later. */
        synchronise_at_once(stream, 50, &sync_pattern, &runner);
        assert_int_equal(sync_pattern, 1);
        epochs = 0;
        while (sync_pattern == 1 && epochs++ < 50)
            compute_epoch(stream, 1000 * 1000, &sync_pattern, &runner);
        assert_int_equal(sync_pattern, 0);
        for (epochs = 0; runner == 1 && epochs < 5; epochs++)
            filled &= others_filled_epoch(stream, CPU_COUNT(&mask), &sync_pattern, &runner);
        if (!filled)
            continue;
        counted++;
        assert_int_equal(runner, 0);
    }
    stop_others(state);
    if (counted < SPELLS) {
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
        skip();
    }
    /* Alone again: the worker within a sampling period. */
    epochs = 0;
    while (runner == 0 && epochs++ < 40)
        overlap_epoch(stream, nop_task, 0, &sync_pattern, &runner);
    assert_int_equal(runner, 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/*
 * Where a CPU is spare for the worker, a caller that computes only 10 us between enqueue and
 * synchronisation overlaps (the worker, spinning there, starts the task at once); where a
 * communicator's local ranks fill the CPUs, the same gaps are the synchronous pattern (a wake-up
 * would cost more than the caller runs the task in). On a machine of one CPU: skipped.
 */
static void test_short_compute_with_a_spare_cpu(void **state)
{

    (void)state;
    skip_on_one_cpu();
    for (int full = 0; full < 2; full++) {
        aclrtStream stream;
        int sync_pattern = 1, runner = 0, epochs = 0;

        aclrtHostCpusFull(full);
        stream = new_stream();
        while (sync_pattern == 1 && epochs++ < 64) {
            assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
            compute_ns(10 * 1000);
            assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
            runner_of(stream, &sync_pattern, &runner);
        }
        assert_int_equal(sync_pattern, full);
        assert_int_equal(runner, !full);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
        aclrtHostCpusFull(-full);
    }
}

/*
 * While the worker spins for its next task, a launch does not start the task on the launching
 * thread (start-at-enqueue: an HCCL op stages its first step there): the worker starts it at once,
 * and the caller goes back to its compute. 2 ranks on a 16-CPU guest, 64 KiB AllReduce: hidden
 * 0.50-0.56 with the start at enqueue, 0.73-0.87 without. Epochs of 10 us of compute, so that each
 * launch comes while the worker still spins after the task before. Whether a CPU is spare depends
 * on what else the machine runs (another process computing on the other CPUs preempts the spinning
 * worker, which then sleeps): half of the launches of one of up to 10 rounds in which this thread
 * kept its CPU and the worker hardly waited for one must show it; skipped when no round did, and
 * on a machine of one CPU.
 */
/* The newest stream's worker (hc-stream-N with the highest N) of this process: its tid, or 0. */
static long newest_worker_tid(void)
{
    long best_tid = 0, best_n = -1;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        FILE *f;
        long n;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) != NULL && sscanf(comm, "hc-stream-%ld", &n) == 1 && n > best_n) {
            best_n = n;
            best_tid = atol(e->d_name);
        }
        fclose(f);
    }
    closedir(d);
    return best_tid;
}

/* How long thread tid has waited for a CPU so far (ns; the second field of its schedstat), or -1. */
static int64_t runqueue_wait_ns(long tid)
{
    char path[64];
    long long run, wait = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", tid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    if (fscanf(f, "%lld %lld", &run, &wait) != 2)
        wait = -1;
    fclose(f);
    return wait;
}

static void test_no_start_at_enqueue_while_the_worker_spins(void **state)
{
    enum { EPOCHS = 20, ATTEMPTS = 10 };
    aclrtStream stream;
    int sync_pattern = 1, runner = 0, epochs = 0, best = 0, counted = 0;

    (void)state;
    skip_on_one_cpu();
    stream = new_stream();
    while ((sync_pattern == 1 || epochs < 8) && epochs++ < 64) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
        compute_ns(10 * 1000);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
    }
    assert_int_equal(sync_pattern, 0);
    for (int a = 0; a < ATTEMPTS && best < EPOCHS / 2; a++) {
        int not_started = 0;
        long worker = newest_worker_tid();
        int64_t q0 = runqueue_wait_ns(worker), q1;
        struct timespec w0, c0, w1, c1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        for (int i = 0; i < EPOCHS; i++) {
            probe_t p;
            probe_init(&p, 0);
            p.task.start_now = probe_start;
            assert_int_equal(launch(stream, &p), 0);
            compute_ns(10 * 1000);
            assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
            assert_int_equal(atomic_load(&p.ran), 1);
            not_started += p.started == 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &w1);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        q1 = runqueue_wait_ns(worker);
        /* Counted when this thread kept its CPU and the worker waited for one at most a tenth of
         * the time: no other program took the CPUs meanwhile. */
        if ((ns_of(&c1) - ns_of(&c0)) * 10 < (ns_of(&w1) - ns_of(&w0)) * 9 || q0 < 0 || q1 < 0 ||
            (q1 - q0) * 10 > ns_of(&w1) - ns_of(&w0))
            continue;
        counted++;
        best = not_started > best ? not_started : best;
    }
    if (counted == 0)
        skip(); /* another program kept the CPUs busy all along: no CPU was spare to test with */
    assert_true(best >= EPOCHS / 2);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* Epochs of 10 us of compute until the stream's pattern is `pattern` (at most 64): whether it is. */
static int short_compute_until(aclrtStream stream, int pattern)
{
    int sync_pattern = !pattern, runner, epochs = 0;

    while (sync_pattern != pattern && epochs++ < 64) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
        compute_ns(10 * 1000);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
    }
    return sync_pattern == pattern;
}

/*
 * What a spell's samples found of the CPUs holds for that spell only: a stream that found none
 * spare (here the ranks filled the CPUs), and went back to the synchronous pattern, overlaps
 * 10 us gaps again once a CPU is spare. (Kept, one finding of none spare, mistaken or not, kept such
 * gaps short for good: 2 of 5 runs of a 64 KiB AllReduce on a 16-CPU guest hid nothing.)
 */
static void test_spare_cpu_finding_holds_for_a_spell(void **state)
{
    aclrtStream stream;

    (void)state;
    skip_on_one_cpu();
    aclrtHostCpusFull(1);
    stream = new_stream();
    assert_true(worker_epochs_while_computing(stream) <= 2); /* the sample: no CPU spare */
    assert_true(short_compute_until(stream, 1));              /* 10 us gaps are short there */
    aclrtHostCpusFull(-1);
    assert_true(short_compute_until(stream, 0));              /* a CPU is spare again */
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* A task that keeps its runner busy for the nanoseconds its argument points to. */
static aclError timed_task(void *arg)
{
    compute_ns(*(const long *)arg);
    return ACL_SUCCESS;
}

/* Epochs whose tasks end about when a spinning synchroniser gives up (25-75 us against
 * HC_RT_SPIN_NS) and whose next launch comes about when the spinning worker gives up. */
static void *spin_epochs(void *arg)
{
    sync_args_t *a = arg; /* its stream, done and res; tid unused */
    static long task_ns[4000];

    for (int i = 0; i < 4000 && a->res == ACL_SUCCESS; i++) {
        task_ns[i] = 25 * 1000 + (i * 7919L) % (50 * 1000);
        a->res = aclrtHostLaunchTask(a->stream, timed_task, &task_ns[i], "timed");
        compute_ns(8 * 1000);
        if (a->res == ACL_SUCCESS)
            a->res = aclrtSynchronizeStream(a->stream);
        if (i % 16 == 0)
            compute_ns(task_ns[i] - 20 * 1000);
    }
    atomic_store(&a->done, 1);
    return NULL;
}

/*
 * A spin gives up while the other side is about to act: the synchroniser's as the worker records
 * the task, the worker's as the caller launches. Either must look again before it sleeps: a
 * synchroniser that slept after the worker had recorded the last task slept forever (a hang of the
 * overlap benchmark at 4 MiB on a 16-CPU machine). 4000 such epochs, bounded: they end within 10 s.
 */
static void test_spins_lose_no_wakeup(void **state)
{
    sync_args_t a = {.res = ACL_SUCCESS};
    pthread_t thread;
    int sync_pattern = 1, runner = 0, epochs = 0, ended;

    (void)state;
    skip_on_one_cpu();
    a.stream = new_stream();
    while (sync_pattern == 1 && epochs++ < 50)
        overlap_epoch(a.stream, nop_task, 0, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 0);
    assert_int_equal(pthread_create(&thread, NULL, spin_epochs, &a), 0);
    ended = within_10s(sync_done, &a);
    if (!ended)
        fail_msg("4000 epochs of 35-85 us did not end within 10 s: a spin lost a wake-up");
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(a.res, ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(a.stream), ACL_SUCCESS);
}

/*
 * Unbound, the caller's mask says nothing about the other ranks: the shared-memory engine tells the
 * runtime when a communicator's local ranks fill every CPU they may use (aclrtHostCpusFull), and a
 * computing caller then runs the tasks too, from the second epoch of the overlap pattern. On a
 * machine of one CPU the mask alone would decide: skipped there.
 */
static void test_runner_when_ranks_fill_the_cpus(void **state)
{
    aclrtStream stream;

    (void)state;
    skip_on_one_cpu();
    aclrtHostCpusFull(1);
    stream = new_stream();
    assert_true(worker_epochs_while_computing(stream) <= 2);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    aclrtHostCpusFull(-1);
}

/*
 * Where the callers run a stream's tasks, a thread that waits for an event recorded on it has the
 * worker run them up to the record, and no further: aclrtSynchronizeEvent (the seed's "compute,
 * then wait for the collective's end" on the host), and a task of another stream that waits for
 * the event (aclrtStreamWaitEvent). Else nobody would run them before the worker's backstop poll,
 * a millisecond later, which runs the whole queue. A task after the record stays for its own
 * synchronisation: it may wait for something the program does next. The backstop may still take
 * a round when the machine preempts this thread for that long, so 8 rounds of 10 must show it.
 */
static void test_event_waiters_start_the_record(void **state)
{
    int later_waited = 0, nested_later_waited = 0;
    aclrtStream stream, other;
    aclrtEvent event;

    (void)state;
    setenv("HOSTCCL_PROGRESS", "caller", 1);
    stream = new_stream();
    assert_int_equal(aclrtCreateStream(&other), ACL_SUCCESS);
    unsetenv("HOSTCCL_PROGRESS");
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    for (int i = 0; i < 10; i++) {
        probe_t before, after, waiter;
        probe_init(&before, 0);
        probe_init(&after, 0);
        assert_int_equal(launch(stream, &before), 0);
        assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
        assert_int_equal(launch(stream, &after), 0);
        assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
        assert_int_equal(atomic_load(&before.ran), 1);
        later_waited += atomic_load(&after.ran) == 0;
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_int_equal(atomic_load(&after.ran), 1);

        probe_init(&before, 0);
        probe_init(&after, 0);
        probe_init(&waiter, 0);
        assert_int_equal(launch(stream, &before), 0);
        assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
        assert_int_equal(launch(stream, &after), 0);
        assert_int_equal(aclrtStreamWaitEvent(other, event), ACL_SUCCESS);
        assert_int_equal(launch(other, &waiter), 0);
        assert_int_equal(aclrtSynchronizeStream(other), ACL_SUCCESS);
        assert_int_equal(atomic_load(&before.ran), 1);
        assert_int_equal(atomic_load(&waiter.ran), 1);
        nested_later_waited += atomic_load(&after.ran) == 0;
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    }
    assert_true(later_waited >= 8);
    assert_true(nested_later_waited >= 8);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(other), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/*
 * A program that waits only for events (enqueue, record, compute, aclrtSynchronizeEvent) shows the
 * stream's policy its gaps as aclrtSynchronizeStream does: computing 300 us before each wait (more
 * than the 20 us of the synchronous pattern, less than the backstop's grace period, whose stall
 * would switch it too) moves the stream to the overlap pattern, waiting at once moves it back.
 */
static void test_event_waits_show_the_pattern(void **state)
{
    aclrtStream stream = new_stream();
    int sync_pattern, runner, epochs = 0;
    aclrtEvent event;

    (void)state;
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    runner_of(stream, &sync_pattern, &runner);
    assert_int_equal(sync_pattern, 1);
    while (sync_pattern == 1 && epochs++ < 50) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
        assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
        compute_ns(300 * 1000);
        assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
    }
    assert_int_equal(sync_pattern, 0);
    epochs = 0;
    while (sync_pattern == 0 && epochs++ < 1000) {
        assert_int_equal(aclrtHostLaunchTask(stream, nop_task, NULL, "nop"), ACL_SUCCESS);
        assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
        runner_of(stream, &sync_pattern, &runner);
    }
    assert_int_equal(sync_pattern, 1);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* A task that keeps its runner busy for 5 ms, and says when it began. */
static atomic_int long_task_began;

static aclError long_task(void *arg)
{
    (void)arg;
    atomic_store(&long_task_began, 1);
    compute_ns(5 * 1000 * 1000);
    return ACL_SUCCESS;
}

static int long_task_running(void *arg)
{
    (void)arg;
    return atomic_load(&long_task_began);
}

/* A task that notes when it ran. */
static aclError stamp_task(void *arg)
{
    struct timespec *t = arg;

    clock_gettime(CLOCK_MONOTONIC, t);
    return ACL_SUCCESS;
}

/* Launch a stamp task that ends by itself (aclrtHostTask.bounded, as an HCCL op does): a waiter
 * for a later record may run it. */
static void launch_stamp(aclrtStream stream, aclrtHostTask *task, struct timespec *t)
{
    int claimed = -1;

    *task = (aclrtHostTask){.fn = stamp_task, .arg = t, .what = "stamp", .bounded = 1};
    assert_int_equal(aclrtHostLaunchTaskIn(stream, task, &claimed), ACL_SUCCESS);
    assert_int_equal(claimed, 0);
}

/*
 * A pipelined program (launch op i and record its event, compute, wait for op i-1's event) never
 * drains its stream at a wait. Where a CPU is spare for the worker its late waits still show the
 * overlap pattern (within a few rounds), and the ops then run while it computes: most of them
 * before the program waits for them (under load the worker may not get a CPU in time: 5 of 10),
 * until waits that come at once bring the synchronous pattern back. The ops are stamp tasks that
 * end by themselves, as HCCL ops do: where the callers run, the waits run them.
 * Where a communicator's local ranks fill the CPUs the stream stays synchronous: the waits run the
 * ops (as a sample would choose there). Computing 100 us a round, far below the backstop's grace
 * period, whose stall would switch the pattern by itself. On a machine of one CPU: skipped.
 */
static void test_pipelined_event_waits(void **state)
{
    enum { ROUNDS = 20, LATER = 10 };
    static struct timespec ran[ROUNDS + LATER + 1];
    static aclrtHostTask tasks[ROUNDS + LATER + 1];

    (void)state;
    skip_on_one_cpu();
    for (int full = 0; full < 2; full++) {
        aclrtStream stream;
        aclrtEvent ev[2];
        int sync_pattern = 1, runner = 0, i = 1, early = 0;

        aclrtHostCpusFull(full);
        stream = new_stream();
        assert_int_equal(aclrtCreateEvent(&ev[0]), ACL_SUCCESS);
        assert_int_equal(aclrtCreateEvent(&ev[1]), ACL_SUCCESS);
        launch_stamp(stream, &tasks[0], &ran[0]);
        assert_int_equal(aclrtRecordEvent(ev[0], stream), ACL_SUCCESS);
        for (; i <= ROUNDS + LATER && (i <= ROUNDS || !full); i++) {
            struct timespec wait_at;
            launch_stamp(stream, &tasks[i], &ran[i]);
            assert_int_equal(aclrtRecordEvent(ev[i % 2], stream), ACL_SUCCESS);
            compute_ns(i <= ROUNDS ? 100 * 1000 : 5000 * 1000);
            clock_gettime(CLOCK_MONOTONIC, &wait_at);
            assert_int_equal(aclrtSynchronizeEvent(ev[(i - 1) % 2]), ACL_SUCCESS);
            early += i > ROUNDS && ns_of(&ran[i - 1]) < ns_of(&wait_at);
            if (i == ROUNDS) {
                runner_of(stream, &sync_pattern, &runner);
                assert_int_equal(sync_pattern, full);
                assert_int_equal(runner, !full);
            }
        }
        if (!full) {
            assert_true(early >= 5);
            /* Waits that come at once, for a record the worker has not reached (a 1 ms task ahead
             * of it), bring the synchronous pattern back: its wake-up would cost more than such a
             * program leaves it. The records wait until the worker runs that task, so that they
             * do not wake it (a few microseconds each here), and the wait's gap runs from the
             * second. */
            for (int r = 0; sync_pattern == 0 && r < 50; r++) {
                atomic_store(&long_task_began, 0);
                assert_int_equal(aclrtHostLaunchTask(stream, long_task, NULL, "long"), ACL_SUCCESS);
                assert_true(within_10s(long_task_running, NULL));
                assert_int_equal(aclrtRecordEvent(ev[0], stream), ACL_SUCCESS);
                assert_int_equal(aclrtRecordEvent(ev[1], stream), ACL_SUCCESS);
                assert_int_equal(aclrtSynchronizeEvent(ev[0]), ACL_SUCCESS);
                runner_of(stream, &sync_pattern, &runner);
            }
            assert_int_equal(sync_pattern, 1);
        }
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_int_equal(aclrtDestroyEvent(ev[0]), ACL_SUCCESS);
        assert_int_equal(aclrtDestroyEvent(ev[1]), ACL_SUCCESS);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
        aclrtHostCpusFull(-full);
    }
}

/* The waiter keeps its bound (HCCL_EXEC_TIMEOUT) where the task before the record does not end: it
 * does not run the task itself, which it could not leave when the bound passes. */
static void test_event_waiter_keeps_its_bound(void **state)
{
    aclrtStream stream;
    aclrtEvent event;
    gate_t gate;
    int64_t t0;

    (void)state;
    setenv("HOSTCCL_PROGRESS", "caller", 1);
    stream = new_stream();
    unsetenv("HOSTCCL_PROGRESS");
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    gate_init(&gate);
    assert_int_equal(aclrtHostLaunchTask(stream, gate_task, &gate, "gate"), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
    setenv("HCCL_EXEC_TIMEOUT", "1", 1);
    t0 = hc_test_now_ms();
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    assert_true(hc_test_now_ms() - t0 < 5000); /* 1 s, and room for a loaded machine */
    unsetenv("HCCL_EXEC_TIMEOUT");
    gate_wait_entered(&gate); /* the worker holds the gate task, not this thread */
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/*
 * Where the callers run, the program's wait for an event runs the tasks up to the record on the
 * waiting thread when each ends by itself (aclrtHostTask.bounded: HCCL operations, copies), so that
 * no worker is woken (a pipelined program's waits paid a wake-up each, and took a CPU from a rank:
 * 8 B rounds 12 us against 1.0 sequential, 2 ranks on 2 CPUs), and nothing after the record.
 */
static void test_event_waiter_runs_bounded_tasks(void **state)
{
    aclrtStream stream = new_stream();
    aclrtEvent event;
    probe_t before, after;

    (void)state;
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    probe_init(&before, 0);
    probe_init(&after, 0);
    before.task.bounded = after.task.bounded = 1;
    assert_int_equal(launch(stream, &before), 0);
    assert_int_equal(aclrtRecordEvent(event, stream), ACL_SUCCESS);
    assert_int_equal(launch(stream, &after), 0);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(atomic_load(&before.ran), 1);
    assert_true(pthread_equal(before.ran_on, pthread_self()));
    assert_int_equal(atomic_load(&after.ran), 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&after.ran), 1);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

static void test_runner_query_checks_arguments(void **state)
{
    int a, b;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtHostStreamRunner(NULL, NULL, &b), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostStreamRunner(NULL, &a, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostStreamRunner((aclrtStream)(uintptr_t)0x12345, &a, &b), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtHostStreamRunner(NULL, &a, &b), ACL_SUCCESS); /* the default stream */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_at_enqueue_when_idle),
        cmocka_unit_test(test_queued_when_not_allowed),
        cmocka_unit_test(test_never_ahead_of_queued_tasks),
        cmocka_unit_test(test_started_only_when_idle),
        cmocka_unit_test(test_run_ready_runs_the_ready_head),
        cmocka_unit_test(test_claim_keeps_stream_order),
        cmocka_unit_test(test_owner_claim_then_another_thread),
        cmocka_unit_test(test_owner_race_with_another_thread),
        cmocka_unit_test(test_direct_queue_wakes_a_waiting_synchroniser),
        cmocka_unit_test(test_direct_after_many_events),
        cmocka_unit_test(test_pattern_follows_the_gaps),
        cmocka_unit_test(test_unsynchronised_task_runs),
        cmocka_unit_test(test_unsynchronised_task_runs_after_polls_slowed),
        cmocka_unit_test(test_progress_setting),
        cmocka_unit_test(test_runner_follows_what_the_caller_does),
        cmocka_unit_test(test_runner_when_ranks_fill_the_cpus),
        cmocka_unit_test(test_runner_with_a_spare_cpu),
        cmocka_unit_test_teardown(test_runner_when_other_threads_fill_the_cpus, stop_others),
        cmocka_unit_test(test_short_compute_with_a_spare_cpu),
        cmocka_unit_test(test_spins_lose_no_wakeup),
        cmocka_unit_test(test_no_start_at_enqueue_while_the_worker_spins),
        cmocka_unit_test(test_spare_cpu_finding_holds_for_a_spell),
        cmocka_unit_test(test_event_waiters_start_the_record),
        cmocka_unit_test(test_event_waiter_keeps_its_bound),
        cmocka_unit_test(test_event_waits_show_the_pattern),
        cmocka_unit_test(test_pipelined_event_waits),
        cmocka_unit_test(test_event_waiter_runs_bounded_tasks),
        cmocka_unit_test(test_runner_query_checks_arguments),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);

    if (aclInit(NULL) != ACL_SUCCESS || aclFinalize() != ACL_SUCCESS)
        failed++;
    return failed;
}
