/*
 * Helpers shared by the runtime tests: a gate that holds a stream's executor inside a task until
 * the test opens it, and a helper thread runner. Tests never sleep to wait for something: they
 * wait on a gate, a synchronisation or a join, and CTest's hard timeout catches a hang.
 */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include <acl/acl.h>

#include "rt_ext.h"

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int open;
    int entered; /* a task has reached the gate */
} gate_t;

static inline void gate_init(gate_t *gate)
{
    pthread_mutex_init(&gate->lock, NULL);
    pthread_cond_init(&gate->cv, NULL);
    gate->open = 0;
    gate->entered = 0;
}

static inline void gate_destroy(gate_t *gate)
{
    pthread_cond_destroy(&gate->cv);
    pthread_mutex_destroy(&gate->lock);
}

static inline void gate_open(gate_t *gate)
{
    pthread_mutex_lock(&gate->lock);
    gate->open = 1;
    pthread_cond_broadcast(&gate->cv);
    pthread_mutex_unlock(&gate->lock);
}

/* Block until a task has entered the gate (so the stream's worker is held inside it). */
static inline void gate_wait_entered(gate_t *gate)
{
    pthread_mutex_lock(&gate->lock);
    while (!gate->entered)
        pthread_cond_wait(&gate->cv, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
}

/* Block until the gate is open. */
static inline void gate_wait_open(gate_t *gate)
{
    pthread_mutex_lock(&gate->lock);
    while (!gate->open)
        pthread_cond_wait(&gate->cv, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
}

/* A host task that opens the gate: waiting for it (rather than synchronising) shows that the
 * stream's worker, not the waiting thread, ran the tasks before it. */
static inline aclError open_gate_task(void *arg)
{
    gate_open(arg);
    return ACL_SUCCESS;
}

/* A host task that waits until the gate opens. */
static inline aclError gate_task(void *arg)
{
    gate_t *gate = arg;

    pthread_mutex_lock(&gate->lock);
    gate->entered = 1;
    pthread_cond_broadcast(&gate->cv);
    while (!gate->open)
        pthread_cond_wait(&gate->cv, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
    return ACL_SUCCESS;
}

/*
 * Hold stream's worker inside a gate task: the task is enqueued and the test waits until it has
 * started. Nobody may synchronise the stream before the gate opens, or that thread would run the
 * gate task itself and wait for itself.
 */
static inline void hold_stream(aclrtStream stream, gate_t *gate)
{
    assert_int_equal(aclrtHostLaunchTask(stream, gate_task, gate, "gate"), ACL_SUCCESS);
    gate_wait_entered(gate);
}

/* Run fn(arg) on a new thread and join it: for checks that need a thread without a device. */
static inline void run_on_new_thread(void *(*fn)(void *), void *arg)
{
    pthread_t thread;

    assert_int_equal(pthread_create(&thread, NULL, fn, arg), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
}

/* Milliseconds on the monotonic clock, for the time bounds tests assert. */
static inline int64_t hc_test_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif /* RT_TEST_H */
