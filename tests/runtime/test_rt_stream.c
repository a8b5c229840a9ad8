/*
 * Streams and the executor: order, one executor at a time under concurrent enqueue and
 * synchronisation, error reporting and clearing, self-synchronisation, destroy, stale handles,
 * callbacks, bounded synchronisation, the bounded queue of a burst of launches.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RUNNING_UNDER_VALGRIND RUNNING_ON_VALGRIND
#endif
#endif
#ifndef RUNNING_UNDER_VALGRIND
#define RUNNING_UNDER_VALGRIND 0
#endif

#include "rt_test.h"

/* ---- order ------------------------------------------------------------------------------------ */

#define ORDER_TASKS 1000

typedef struct {
    atomic_int next;       /* the index the next task must have */
    atomic_int out_of_order;
} order_t;

typedef struct {
    order_t *order;
    int index;
} order_arg_t;

static aclError order_task(void *arg)
{
    order_arg_t *a = arg;

    if (atomic_load(&a->order->next) != a->index)
        atomic_fetch_add(&a->order->out_of_order, 1);
    atomic_store(&a->order->next, a->index + 1);
    return ACL_SUCCESS;
}

static void test_tasks_run_in_order(void **state)
{
    static order_arg_t args[ORDER_TASKS];
    order_t order = {0};
    aclrtStream stream;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    for (int i = 0; i < ORDER_TASKS; i++) {
        args[i] = (order_arg_t){.order = &order, .index = i};
        assert_int_equal(aclrtHostLaunchTask(stream, order_task, &args[i], "order"), ACL_SUCCESS);
        /* Synchronise now and then, so that both the worker and this thread execute. */
        if (i % 97 == 0)
            assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&order.next), ORDER_TASKS);
    assert_int_equal(atomic_load(&order.out_of_order), 0);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* ---- one executor at a time, every task exactly once ------------------------------------------ */

#define CONC_THREADS 4
#define CONC_TASKS 400

typedef struct {
    aclrtStream stream;
    atomic_int active;     /* tasks running right now */
    atomic_int overlaps;   /* times a task saw another one running */
    atomic_int runs[CONC_THREADS][CONC_TASKS];
    atomic_int last[CONC_THREADS]; /* per enqueuing thread, the last index run */
    atomic_int reordered;
} conc_t;

typedef struct {
    conc_t *conc;
    int thread;
    int index;
} conc_arg_t;

static conc_arg_t conc_args[CONC_THREADS][CONC_TASKS];

static aclError conc_task(void *arg)
{
    conc_arg_t *a = arg;
    conc_t *c = a->conc;

    if (atomic_fetch_add(&c->active, 1) != 0)
        atomic_fetch_add(&c->overlaps, 1);
    atomic_fetch_add(&c->runs[a->thread][a->index], 1);
    if (atomic_exchange(&c->last[a->thread], a->index) != a->index - 1)
        atomic_fetch_add(&c->reordered, 1);
    atomic_fetch_sub(&c->active, 1);
    return ACL_SUCCESS;
}

static void *conc_thread(void *arg)
{
    conc_arg_t *first = arg;
    conc_t *c = first->conc;
    int thread = first->thread;

    for (int i = 0; i < CONC_TASKS; i++) {
        if (aclrtHostLaunchTask(c->stream, conc_task, &conc_args[thread][i], "conc") != ACL_SUCCESS)
            return (void *)1;
        if (i % (7 + thread) == 0 && aclrtSynchronizeStream(c->stream) != ACL_SUCCESS)
            return (void *)1;
    }
    return aclrtSynchronizeStream(c->stream) == ACL_SUCCESS ? NULL : (void *)1;
}

static void test_one_executor_under_concurrent_sync(void **state)
{
    static conc_t conc;
    pthread_t threads[CONC_THREADS];

    (void)state;
    memset(&conc, 0, sizeof(conc));
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&conc.stream), ACL_SUCCESS);
    for (int t = 0; t < CONC_THREADS; t++) {
        atomic_store(&conc.last[t], -1);
        for (int i = 0; i < CONC_TASKS; i++)
            conc_args[t][i] = (conc_arg_t){.conc = &conc, .thread = t, .index = i};
    }
    for (int t = 0; t < CONC_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, conc_thread, &conc_args[t][0]), 0);
    for (int t = 0; t < CONC_THREADS; t++) {
        void *failed;

        assert_int_equal(pthread_join(threads[t], &failed), 0);
        assert_null(failed);
    }
    assert_int_equal(atomic_load(&conc.overlaps), 0);
    assert_int_equal(atomic_load(&conc.reordered), 0);
    for (int t = 0; t < CONC_THREADS; t++)
        for (int i = 0; i < CONC_TASKS; i++)
            assert_int_equal(atomic_load(&conc.runs[t][i]), 1);
    assert_int_equal(aclrtDestroyStream(conc.stream), ACL_SUCCESS);
}

/* ---- caller-runs ------------------------------------------------------------------------------ */

/*
 * A thread blocked in aclrtSynchronizeStream takes over from the worker and runs the queued tasks
 * itself. To make this deterministic, the worker is held inside a gate task, this thread enqueues
 * a task and synchronises, and a helper opens the gate only once this thread is asleep in the
 * synchronisation (its state in /proc is 'S': nothing else in that call sleeps). The worker then
 * hands the stream over, and the task must have run on this thread.
 */
typedef struct {
    pid_t tid;
    gate_t *gate;
} opener_t;

static int thread_state(pid_t tid)
{
    char path[64], line[512], *close_paren;
    FILE *file;
    size_t len;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
    file = fopen(path, "r");
    if (file == NULL)
        return '?';
    len = fread(line, 1, sizeof(line) - 1, file);
    fclose(file);
    line[len] = '\0';
    close_paren = strrchr(line, ')');
    return close_paren != NULL && close_paren[1] == ' ' ? close_paren[2] : '?';
}

static void *open_when_asleep(void *arg)
{
    opener_t *opener = arg;
    struct timespec poll = {.tv_sec = 0, .tv_nsec = 1000000};

    /* Polling is the only way to see another thread block; it is bounded by CTest's timeout. */
    while (thread_state(opener->tid) != 'S')
        nanosleep(&poll, NULL);
    gate_open(opener->gate);
    return NULL;
}

typedef struct {
    pthread_t ran_on;
} where_t;

static aclError where_task(void *arg)
{
    ((where_t *)arg)->ran_on = pthread_self();
    return ACL_SUCCESS;
}

static void test_synchronising_thread_runs_the_tasks(void **state)
{
    aclrtStream stream;
    where_t where[3];
    gate_t gate;
    opener_t opener = {.tid = (pid_t)syscall(SYS_gettid), .gate = &gate};
    pthread_t helper;

    (void)state;
    if (RUNNING_UNDER_VALGRIND)
        skip(); /* valgrind's own thread scheduling puts runnable threads to sleep */
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    hold_stream(stream, &gate);
    for (int i = 0; i < 3; i++)
        assert_int_equal(aclrtHostLaunchTask(stream, where_task, &where[i], "where"), ACL_SUCCESS);
    assert_int_equal(pthread_create(&helper, NULL, open_when_asleep, &opener), 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(pthread_join(helper, NULL), 0);
    for (int i = 0; i < 3; i++)
        assert_true(pthread_equal(where[i].ran_on, pthread_self()));
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

/* ---- errors ----------------------------------------------------------------------------------- */

static aclError fail_task(void *arg)
{
    return (aclError)(intptr_t)arg;
}

static aclError count_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
    return ACL_SUCCESS;
}

/*
 * A program that keeps launching without synchronising still sees its tasks run: streams start in
 * the mode where enqueue does not wake the worker, and a growing queue is given a few grace periods
 * for its caller to come and synchronise, then the worker takes over. The pacing sleep stands for
 * the program's own work between launches.
 */
static void test_growing_queue_runs_without_sync(void **state)
{
    const struct timespec pace = {.tv_sec = 0, .tv_nsec = 100 * 1000};
    aclrtStream stream;
    atomic_int ran = 0;
    int launched = 0;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    while (atomic_load(&ran) == 0 && launched < 50000) { /* about 5 s at most */
        assert_int_equal(aclrtHostLaunchTask(stream, count_task, &ran, "count"), ACL_SUCCESS);
        launched++;
        nanosleep(&pace, NULL);
    }
    assert_true(atomic_load(&ran) > 0);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran), launched);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* ---- a full stream holds its launches back ------------------------------------------------------- */

#define DEPTH_TASKS 3000
#define DEPTH_TASK_NS 20000 /* what each task computes: far longer than a launch takes */

typedef struct {
    atomic_int ran;
    atomic_int out_of_order;
} depth_t;

typedef struct {
    depth_t *depth;
    int index;
} depth_arg_t;

static aclError depth_task(void *arg)
{
    depth_arg_t *a = arg;
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < DEPTH_TASK_NS);
    if (atomic_load(&a->depth->ran) != a->index)
        atomic_fetch_add(&a->depth->out_of_order, 1);
    atomic_fetch_add(&a->depth->ran, 1);
    return ACL_SUCCESS;
}

/* A burst of launches nobody synchronises never leaves more than ACL_HOST_STREAM_DEPTH tasks
 * unfinished (their memory stays bounded), whoever runs them (HOSTCCL_PROGRESS), and the tasks
 * still run once each, in order. */
static void test_full_stream_holds_launches_back(void **state)
{
    static depth_arg_t args[DEPTH_TASKS];
    const char *runners[] = {"caller", "worker"};

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    for (int r = 0; r < 2; r++) {
        depth_t depth = {0};
        aclrtStream stream;
        int most = 0;

        setenv("HOSTCCL_PROGRESS", runners[r], 1);
        assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
        for (int i = 0; i < DEPTH_TASKS; i++) {
            args[i] = (depth_arg_t){.depth = &depth, .index = i};
            assert_int_equal(aclrtHostLaunchTask(stream, depth_task, &args[i], "depth"), ACL_SUCCESS);
            if (i + 1 - atomic_load(&depth.ran) > most)
                most = i + 1 - atomic_load(&depth.ran);
        }
        printf("HOSTCCL_PROGRESS=%s: at most %d of %d tasks unfinished after a launch\n", runners[r], most,
               DEPTH_TASKS);
        assert_true(most <= (int)ACL_HOST_STREAM_DEPTH);
        assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_int_equal(atomic_load(&depth.ran), DEPTH_TASKS);
        assert_int_equal(atomic_load(&depth.out_of_order), 0);
        assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    }
    unsetenv("HOSTCCL_PROGRESS");
}

static void test_error_reported_once_then_cleared(void **state)
{
    aclrtStream stream;
    atomic_int after = 0;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(stream, fail_task, (void *)(intptr_t)ACL_ERROR_RT_COMM_OP_FAILED, "fail"),
                     ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(stream, fail_task, (void *)(intptr_t)ACL_ERROR_RT_TASK_TIMEOUT, "fail"),
                     ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(stream, count_task, &after, "count"), ACL_SUCCESS);
    /* The first error is reported; the tasks after the failed ones still ran. */
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_COMM_OP_FAILED);
    assert_int_equal(atomic_load(&after), 1);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    /* The stream stays usable. */
    assert_int_equal(aclrtHostLaunchTask(stream, count_task, &after, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&after), 2);
    /* The timed form reports and clears it too. */
    assert_int_equal(aclrtHostLaunchTask(stream, fail_task, (void *)(intptr_t)ACL_ERROR_RT_COMM_OP_FAILED, "fail"),
                     ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, 60000), ACL_ERROR_RT_COMM_OP_FAILED);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, 60000), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* ---- a task that synchronises or destroys its own stream -------------------------------------- */

typedef struct {
    aclrtStream stream;
    aclError sync_res, destroy_res;
} self_t;

static aclError self_sync_task(void *arg)
{
    self_t *self = arg;

    self->sync_res = aclrtSynchronizeStream(self->stream);
    self->destroy_res = aclrtDestroyStream(self->stream);
    return ACL_SUCCESS;
}

static void test_self_sync_is_an_error_not_a_hang(void **state)
{
    self_t self = {0};

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&self.stream), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(self.stream, self_sync_task, &self, "self sync"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(self.stream), ACL_SUCCESS);
    assert_int_equal(self.sync_res, ACL_ERROR_INVALID_PARAM);
    assert_int_equal(self.destroy_res, ACL_ERROR_INVALID_PARAM);
    /* Again on the worker: this thread only waits for a gate the stream opens after the task. */
    {
        gate_t done;

        gate_init(&done);
        self.sync_res = ACL_SUCCESS;
        assert_int_equal(aclrtHostLaunchTask(self.stream, self_sync_task, &self, "self sync"), ACL_SUCCESS);
        assert_int_equal(aclrtHostLaunchTask(self.stream, open_gate_task, &done, "done"), ACL_SUCCESS);
        gate_wait_open(&done);
        assert_int_equal(self.sync_res, ACL_ERROR_INVALID_PARAM);
        assert_int_equal(aclrtSynchronizeStream(self.stream), ACL_SUCCESS);
        gate_destroy(&done);
    }
    assert_int_equal(aclrtDestroyStream(self.stream), ACL_SUCCESS);
}

/* A task on A may synchronise another stream B: it runs or waits for B's tasks, no deadlock. */
typedef struct {
    aclrtStream b;
    atomic_int b_done;
    aclError sync_b_res;
    int b_done_seen;
} nested_t;

static aclError nested_outer(void *arg)
{
    nested_t *n = arg;

    n->sync_b_res = aclrtSynchronizeStream(n->b);
    n->b_done_seen = atomic_load(&n->b_done);
    return ACL_SUCCESS;
}

static void test_task_may_sync_another_stream(void **state)
{
    nested_t n = {0};
    aclrtStream a;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&a), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&n.b), ACL_SUCCESS);
    for (int i = 0; i < 10; i++)
        assert_int_equal(aclrtHostLaunchTask(n.b, count_task, &n.b_done, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(a, nested_outer, &n, "outer"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(n.sync_b_res, ACL_SUCCESS);
    assert_int_equal(n.b_done_seen, 10);
    assert_int_equal(aclrtDestroyStream(n.b), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(a), ACL_SUCCESS);
}

/* ---- the thread's cache of streams it synchronised and launched on ----------------------------- */

#define CYCLED_STREAMS 6 /* more than the cache holds, so that entries are replaced */

typedef struct {
    aclrtStream streams[CYCLED_STREAMS];
    atomic_int done;
    int failures;
} cycle_t;

/* Synchronise every stream in turn, from a task of the first when `nested`: each borrow replaces an
 * entry, never the first stream's, which the synchronising thread is executing. */
static aclError cycle_syncs(void *arg)
{
    cycle_t *c = arg;

    for (int round = 0; round < 50; round++)
        for (int i = 1; i < CYCLED_STREAMS; i++)
            c->failures += aclrtSynchronizeStream(c->streams[i]) != ACL_SUCCESS;
    atomic_fetch_add(&c->done, 1);
    return ACL_SUCCESS;
}

static void *cycle_thread(void *arg)
{
    cycle_t *c = arg;

    if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtHostLaunchTask(c->streams[0], cycle_syncs, c, "cycle") != ACL_SUCCESS ||
        aclrtSynchronizeStream(c->streams[0]) != ACL_SUCCESS)
        c->failures++;
    return NULL; /* the thread's cached references go with it */
}

/* A stream the thread has synchronised (and so keeps in its cache) is refused once destroyed, like any
 * other; streams cycled through the cache by threads that then exit are destroyed and released once,
 * with nothing left running. */
static void test_cached_streams(void **state)
{
    cycle_t c = {0};
    pthread_t threads[2];
    aclrtStream again;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    for (int i = 0; i < CYCLED_STREAMS; i++)
        assert_int_equal(aclrtCreateStream(&c.streams[i]), ACL_SUCCESS);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, cycle_thread, &c), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(atomic_load(&c.done), 2);
    assert_int_equal(c.failures, 0);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < CYCLED_STREAMS; i++)
            assert_int_equal(aclrtSynchronizeStream(c.streams[i]), ACL_SUCCESS);
    for (int i = 0; i < CYCLED_STREAMS; i++) {
        assert_int_equal(aclrtDestroyStream(c.streams[i]), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStream(c.streams[i]), ACL_ERROR_RT_INVALID_HANDLE);
        assert_int_equal(aclrtHostLaunchTask(c.streams[i], count_task, &c.failures, "count"),
                         ACL_ERROR_RT_INVALID_HANDLE);
    }
    assert_int_equal(aclrtCreateStream(&again), ACL_SUCCESS); /* may reuse a slot: new handle */
    assert_int_equal(aclrtSynchronizeStream(again), ACL_SUCCESS);
    for (int i = 0; i < CYCLED_STREAMS; i++)
        assert_int_equal(aclrtSynchronizeStream(c.streams[i]), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtDestroyStream(again), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(again), ACL_ERROR_RT_INVALID_HANDLE);
}

/* ---- destroy ---------------------------------------------------------------------------------- */

static void test_destroy_runs_queued_tasks(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    /* The worker is held, so all 100 tasks are still queued when they are enqueued. */
    hold_stream(stream, &gate);
    for (int i = 0; i < 100; i++)
        assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 0);
    gate_open(&gate);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 100);
    gate_destroy(&gate);
}

typedef struct {
    aclrtStream stream;
} destroyer_t;

static void *destroy_thread(void *arg)
{
    destroyer_t *d = arg;

    return aclrtDestroyStream(d->stream) == ACL_SUCCESS ? NULL : (void *)1;
}

/* Destroy while the worker is inside a task: destroy waits for it, then runs the rest. */
static void test_destroy_waits_for_running_task(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    gate_t gate;
    pthread_t thread;
    void *failed;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    hold_stream(stream, &gate);
    for (int i = 0; i < 10; i++)
        assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(pthread_create(&thread, NULL, destroy_thread, &(destroyer_t){.stream = stream}), 0);
    gate_open(&gate);
    assert_int_equal(pthread_join(thread, &failed), 0);
    assert_null(failed);
    assert_int_equal(atomic_load(&count), 10);
    gate_destroy(&gate);
}

/* ---- stale and wrong handles ------------------------------------------------------------------ */

static void test_stale_and_wrong_handles(void **state)
{
    aclrtStream stream, again;
    aclrtEvent event;
    int local;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtHostLaunchTask(stream, count_task, &local, "count"), ACL_ERROR_RT_INVALID_HANDLE);
    /* A new stream may reuse the slot; the old handle still names nothing. */
    assert_int_equal(aclrtCreateStream(&again), ACL_SUCCESS);
    assert_ptr_not_equal(again, stream);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSynchronizeStream(again), ACL_SUCCESS);
    /* Forged handles and handles of the wrong kind. */
    assert_int_equal(aclrtSynchronizeStream((aclrtStream)(uintptr_t)0x1234), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSynchronizeStream((aclrtStream)&local), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSynchronizeStream((aclrtStream)(uintptr_t)UINT64_MAX), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream((aclrtStream)event), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtDestroyEvent((aclrtEvent)again), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    /* The default stream is the device's, not the user's to destroy. */
    assert_int_equal(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyStream(again), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtHostLaunchTask(NULL, NULL, NULL, "null"), ACL_ERROR_INVALID_PARAM);
}

/* ---- callbacks -------------------------------------------------------------------------------- */

typedef struct {
    atomic_int next;
    atomic_int out_of_order;
} cb_order_t;

typedef struct {
    cb_order_t *order;
    int index;
} cb_arg_t;

static void order_callback(void *user_data)
{
    cb_arg_t *a = user_data;

    if (atomic_exchange(&a->order->next, a->index + 1) != a->index)
        atomic_fetch_add(&a->order->out_of_order, 1);
}

static aclError order_host_task(void *arg)
{
    order_callback(arg);
    return ACL_SUCCESS;
}

static void test_callbacks_in_stream_order(void **state)
{
    cb_order_t order = {0};
    cb_arg_t args[40];
    aclrtStream stream;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtSubscribeReport(1, stream), ACL_SUCCESS);
    for (int i = 0; i < 40; i++) {
        args[i] = (cb_arg_t){.order = &order, .index = i};
        if (i % 2 == 0)
            assert_int_equal(aclrtLaunchCallback(order_callback, &args[i],
                                                 i % 4 ? ACL_CALLBACK_BLOCK : ACL_CALLBACK_NO_BLOCK, stream),
                             ACL_SUCCESS);
        else
            assert_int_equal(aclrtHostLaunchTask(stream, order_host_task, &args[i], "order"), ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&order.next), 40);
    assert_int_equal(atomic_load(&order.out_of_order), 0);
    assert_int_equal(aclrtLaunchCallback(NULL, NULL, ACL_CALLBACK_BLOCK, stream), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtLaunchCallback(order_callback, &args[0], (aclrtCallbackBlockType)7, stream),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtProcessReport(1), ACL_ERROR_WAIT_CALLBACK_TIMEOUT);
    assert_int_equal(aclrtProcessReport(0), ACL_ERROR_WAIT_CALLBACK_TIMEOUT);
    assert_int_equal(aclrtProcessReport(-2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtUnSubscribeReport(1, stream), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtSubscribeReport(1, stream), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtLaunchCallback(order_callback, &args[0], ACL_CALLBACK_BLOCK, stream),
                     ACL_ERROR_RT_INVALID_HANDLE);
}

/* ---- host functions (aclrtLaunchHostFunc) ------------------------------------------------------ */

typedef struct {
    int *cells;       /* written by the copies, read by the host functions */
    int seen[8];      /* what each host function saw in cells[i] */
    int calls;
} host_func_state_t;

typedef struct {
    host_func_state_t *state;
    int index;
} host_func_arg_t;

static void record_cell(void *args)
{
    host_func_arg_t *a = args;

    a->state->seen[a->index] = a->state->cells[a->index];
    a->state->calls++;
}

/* Each host function runs after the copy enqueued before it and before the one enqueued after it:
 * function i sees copy i's value and not copy i+1's. */
static void test_host_func_in_stream_order(void **state)
{
    static const int values[8] = {11, 22, 33, 44, 55, 66, 77, 88};
    int cells[8] = {0};
    host_func_state_t hf = {.cells = cells};
    host_func_arg_t args[8];
    aclrtStream stream;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    for (int i = 0; i < 8; i++) {
        args[i] = (host_func_arg_t){.state = &hf, .index = i};
        assert_int_equal(aclrtMemcpyAsync(&cells[i], sizeof(int), &values[i], sizeof(int), ACL_MEMCPY_HOST_TO_HOST,
                                          stream), ACL_SUCCESS);
        assert_int_equal(aclrtLaunchHostFunc(stream, record_cell, &args[i]), ACL_SUCCESS);
        /* Overwritten after function i ran: it must have seen values[i], not -1. */
        assert_int_equal(aclrtMemsetAsync(&cells[i], sizeof(int), 0xff, sizeof(int), stream), ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(hf.calls, 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(hf.seen[i], values[i]);
        assert_int_equal(cells[i], -1);
    }
    /* The NULL stream is the current device's default stream. */
    hf.calls = 0;
    cells[0] = 5;
    assert_int_equal(aclrtLaunchHostFunc(NULL, record_cell, &args[0]), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(hf.calls, 1);
    assert_int_equal(hf.seen[0], 5);
    assert_int_equal(aclrtLaunchHostFunc(stream, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtLaunchHostFunc(stream, record_cell, &args[0]), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(hf.calls, 1);
}

/* ---- stream configuration, query, failure mode ------------------------------------------------- */

static aclError failing_task(void *arg)
{
    (void)arg;
    return ACL_ERROR_RT_COMM_OP_FAILED;
}

static void bump(void *args)
{
    atomic_fetch_add((atomic_int *)args, 1);
}

static void test_create_with_config_and_query(void **state)
{
    aclrtStream stream;
    aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
    atomic_int count = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStreamWithConfig(&stream, 8, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtCreateStreamWithConfig(&stream, 0, 0x40), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtCreateStreamWithConfig(&stream, 7, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC),
                     ACL_SUCCESS);
    assert_int_equal(aclrtStreamQuery(stream, &status), ACL_SUCCESS);
    assert_int_equal(status, ACL_STREAM_STATUS_COMPLETE);
    hold_stream(stream, &gate);
    assert_int_equal(aclrtLaunchHostFunc(stream, bump, &count), ACL_SUCCESS);
    assert_int_equal(aclrtStreamQuery(stream, &status), ACL_SUCCESS);
    assert_int_equal(status, ACL_STREAM_STATUS_NOT_READY);
    gate_open(&gate);
    /* A program that polls instead of synchronising sees its tasks finish. */
    do {
        assert_int_equal(aclrtStreamQuery(stream, &status), ACL_SUCCESS);
        if (status != ACL_STREAM_STATUS_COMPLETE)
            sched_yield();
    } while (status != ACL_STREAM_STATUS_COMPLETE);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(aclrtStreamQuery(stream, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtStreamQuery(stream, &status), ACL_ERROR_RT_INVALID_HANDLE);
    gate_destroy(&gate);
}

/* ACL_STOP_ON_FAILURE: after a failed task the stream's copies, memsets and host functions are
 * skipped until a synchronisation reports the failure; ACL_CONTINUE_ON_FAILURE runs them. */
static void run_after_failure(aclrtStream stream, int *cell, atomic_int *count)
{
    static const int one = 1;

    *cell = 0;
    atomic_store(count, 0);
    assert_int_equal(aclrtHostLaunchTask(stream, failing_task, NULL, "fail"), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpyAsync(cell, sizeof(int), &one, sizeof(int), ACL_MEMCPY_HOST_TO_HOST, stream),
                     ACL_SUCCESS);
    assert_int_equal(aclrtLaunchHostFunc(stream, bump, count), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_ERROR_RT_COMM_OP_FAILED);
}

static void test_failure_mode(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    int cell = 0;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    run_after_failure(stream, &cell, &count);
    assert_int_equal(cell, 1);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE), ACL_SUCCESS);
    run_after_failure(stream, &cell, &count);
    assert_int_equal(cell, 0);
    assert_int_equal(atomic_load(&count), 0);
    /* The synchronisation reported the failure: the stream runs its tasks again. */
    assert_int_equal(aclrtLaunchHostFunc(stream, bump, &count), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(aclrtSetStreamFailureMode(stream, ACL_CONTINUE_ON_FAILURE), ACL_SUCCESS);
    run_after_failure(stream, &cell, &count);
    assert_int_equal(cell, 1);
    assert_int_equal(aclrtSetStreamFailureMode(stream, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtSetStreamFailureMode(NULL, ACL_STOP_ON_FAILURE), ACL_SUCCESS); /* the default stream */
    assert_int_equal(aclrtSetStreamFailureMode(NULL, ACL_CONTINUE_ON_FAILURE), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    assert_int_equal(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE), ACL_ERROR_RT_INVALID_HANDLE);
}

/* ---- bounded synchronisation ------------------------------------------------------------------ */

static void test_sync_with_timeout(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, 0), ACL_SUCCESS);
    hold_stream(stream, &gate);
    assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, 0), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    assert_int_equal(atomic_load(&count), 0);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, -2), ACL_ERROR_INVALID_PARAM);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(stream, -1), ACL_SUCCESS);
    assert_int_equal(atomic_load(&count), 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

/* A timed synchroniser waits for the worker while untimed ones drive: all return. */
typedef struct {
    aclrtStream stream;
    int timed;
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *s = arg;
    aclError res = s->timed ? aclrtSynchronizeStreamWithTimeout(s->stream, 600000)
                            : aclrtSynchronizeStream(s->stream);

    return res == ACL_SUCCESS ? NULL : (void *)1;
}

static void test_mixed_synchronisers(void **state)
{
    aclrtStream stream;
    atomic_int count = 0;
    pthread_t threads[4];
    syncer_t syncers[4];
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    hold_stream(stream, &gate);
    for (int i = 0; i < 50; i++)
        assert_int_equal(aclrtHostLaunchTask(stream, count_task, &count, "count"), ACL_SUCCESS);
    for (int t = 0; t < 4; t++) {
        syncers[t] = (syncer_t){.stream = stream, .timed = t % 2};
        assert_int_equal(pthread_create(&threads[t], NULL, sync_thread, &syncers[t]), 0);
    }
    gate_open(&gate);
    for (int t = 0; t < 4; t++) {
        void *failed;

        assert_int_equal(pthread_join(threads[t], &failed), 0);
        assert_null(failed);
    }
    assert_int_equal(atomic_load(&count), 50);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

/* ---- tasks run with their stream's device current ---------------------------------------------- */

typedef struct {
    int32_t device;
    aclError res;
} device_seen_t;

static aclError device_task(void *arg)
{
    device_seen_t *seen = arg;

    seen->res = aclrtGetDevice(&seen->device);
    return ACL_SUCCESS;
}

static void test_task_sees_stream_device(void **state)
{
    device_seen_t on_worker = {-1, -1}, on_caller = {-1, -1};
    aclrtStream stream;
    int32_t device;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    assert_int_equal(aclrtSetDevice(5), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&stream), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    /* Run once on the worker (this thread only waits for a gate the stream opens)... */
    assert_int_equal(aclrtHostLaunchTask(stream, device_task, &on_worker, "device"), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(stream, open_gate_task, &gate, "done"), ACL_SUCCESS);
    gate_wait_open(&gate);
    /* ...and once on whichever thread gets it, this one included. */
    assert_int_equal(aclrtHostLaunchTask(stream, device_task, &on_caller, "device"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    assert_int_equal(on_worker.res, ACL_SUCCESS);
    assert_int_equal(on_worker.device, 5);
    assert_int_equal(on_caller.res, ACL_SUCCESS);
    assert_int_equal(on_caller.device, 5);
    /* The caller's own device is untouched. */
    assert_int_equal(aclrtGetDevice(&device), ACL_SUCCESS);
    assert_int_equal(device, 1);
    assert_int_equal(aclrtDestroyStream(stream), ACL_SUCCESS);
    gate_destroy(&gate);
}

/* ---- calls that need a current device -------------------------------------------------------- */

static void *no_device_thread(void *arg)
{
    aclrtStream stream;
    int dummy;

    (void)arg;
    assert_int_equal(aclrtHostLaunchTask(NULL, count_task, &dummy, "count"), ACL_ERROR_RT_CONTEXT_NULL);
    assert_non_null(strstr(aclGetRecentErrMsg(), "aclrtSetDevice"));
    assert_int_equal(aclrtCreateStream(&stream), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_ERROR_RT_CONTEXT_NULL);
    return NULL;
}

static void test_null_stream_needs_a_device(void **state)
{
    (void)state;
    run_on_new_thread(no_device_thread, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tasks_run_in_order),
        cmocka_unit_test(test_one_executor_under_concurrent_sync),
        cmocka_unit_test(test_synchronising_thread_runs_the_tasks),
        cmocka_unit_test(test_growing_queue_runs_without_sync),
        cmocka_unit_test(test_full_stream_holds_launches_back),
        cmocka_unit_test(test_error_reported_once_then_cleared),
        cmocka_unit_test(test_self_sync_is_an_error_not_a_hang),
        cmocka_unit_test(test_task_may_sync_another_stream),
        cmocka_unit_test(test_destroy_runs_queued_tasks),
        cmocka_unit_test(test_destroy_waits_for_running_task),
        cmocka_unit_test(test_stale_and_wrong_handles),
        cmocka_unit_test(test_cached_streams),
        cmocka_unit_test(test_callbacks_in_stream_order),
        cmocka_unit_test(test_host_func_in_stream_order),
        cmocka_unit_test(test_create_with_config_and_query),
        cmocka_unit_test(test_failure_mode),
        cmocka_unit_test(test_sync_with_timeout),
        cmocka_unit_test(test_mixed_synchronisers),
        cmocka_unit_test(test_task_sees_stream_device),
        cmocka_unit_test(test_null_stream_needs_a_device),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);

    /* Every stream is destroyed by its test; finalising checks nothing is left half-torn-down. */
    if (aclInit(NULL) != ACL_SUCCESS || aclFinalize() != ACL_SUCCESS)
        failed++;
    return failed;
}
