/*
 * Events: a record on one stream orders another stream's later tasks (several records in flight);
 * query, elapsed time, reset, bounded waits, destroy with records still queued, stale handles.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

static aclError set_flag_task(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
    return ACL_SUCCESS;
}

typedef struct {
    atomic_int *flag;
    int seen;
} observe_t;

static aclError observe_task(void *arg)
{
    observe_t *o = arg;

    o->seen = atomic_load(o->flag);
    return ACL_SUCCESS;
}

static void make_streams(aclrtStream *a, aclrtStream *b)
{
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(b), ACL_SUCCESS);
}

static void destroy_streams(aclrtStream a, aclrtStream b)
{
    assert_int_equal(aclrtDestroyStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(b), ACL_SUCCESS);
}

static void test_record_and_wait_order_two_streams(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    atomic_int flag = 0;
    observe_t observed = {.flag = &flag, .seen = -1};
    aclrtEventStatus status;
    aclrtEventRecordedStatus recorded;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    hold_stream(a, &gate);
    /* Records before the flag, in flight at once with the one after it (each its own task; the
     * event keeps the block of one that ran for its next record): B waits for the latest. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(a, set_flag_task, &flag, "flag"), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(b, observe_task, &observed, "observe"), ACL_SUCCESS);
    /* A is held before the record: the event cannot be complete. */
    assert_int_equal(aclrtQueryEvent(event, &status), ACL_SUCCESS);
    assert_int_equal(status, ACL_EVENT_STATUS_NOT_READY);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    gate_open(&gate);
    /* B's task ran only after A's flag task: the wait enforced the order. */
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(observed.seen, 1);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEvent(event, &status), ACL_SUCCESS);
    assert_int_equal(status, ACL_EVENT_STATUS_COMPLETE);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    for (int i = 0; i < 1000; i++) { /* records in turn on both streams, each waited for */
        assert_int_equal(aclrtRecordEvent(event, i % 2 ? a : b), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
        assert_int_equal(aclrtQueryEvent(event, &status), ACL_SUCCESS);
        assert_int_equal(status, ACL_EVENT_STATUS_COMPLETE);
    }
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

static void test_synchronize_event_waits_for_the_record(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    atomic_int flag = 0;

    (void)state;
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(a, set_flag_task, &flag, "flag"), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    /* Synchronising the event alone (not the stream) is enough to see the task before it. */
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(atomic_load(&flag), 1);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
}

static void test_never_recorded_event_does_not_block(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    aclrtEventStatus status;
    aclrtEventRecordedStatus recorded;
    float ms = -1;

    (void)state;
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEvent(event, &status), ACL_SUCCESS);
    assert_int_equal(status, ACL_EVENT_STATUS_COMPLETE);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, event, event), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
}

static void test_elapsed_time(void **state)
{
    aclrtStream a, b;
    aclrtEvent start, end, pending;
    atomic_int flag = 0;
    float ms = -1;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&start), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(&end), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(&pending), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(start, a), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(a, set_flag_task, &flag, "flag"), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(end, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, start, end), ACL_SUCCESS);
    assert_true(ms >= 0.0f);
    assert_int_equal(aclrtEventElapsedTime(&ms, start, start), ACL_SUCCESS);
    assert_true(ms == 0.0f);
    /* A record that has not run yet. */
    hold_stream(b, &gate);
    assert_int_equal(aclrtRecordEvent(pending, b), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, start, pending), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, start, pending), ACL_SUCCESS);
    assert_true(ms >= 0.0f);
    assert_int_equal(aclrtEventElapsedTime(NULL, start, end), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyEvent(start), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(end), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(pending), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

static void test_reset_event(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    aclrtEventRecordedStatus recorded;

    (void)state;
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    assert_int_equal(aclrtResetEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    /* A reset event has nothing to wait for. */
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    /* Recorded again, it counts again. */
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(event, &recorded), ACL_SUCCESS);
    assert_int_equal(recorded, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
}

/* Waits are bounded by HCCL_EXEC_TIMEOUT: a record stuck behind a held stream times out. */
static void test_wait_timeout(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    atomic_int after = 0;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    setenv("HCCL_EXEC_TIMEOUT", "1", 1);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    hold_stream(a, &gate);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    assert_int_equal(aclrtHostLaunchTask(b, set_flag_task, &after, "after"), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    /* The failed wait does not stop the stream; its error is reported once. */
    assert_int_equal(atomic_load(&after), 1);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    assert_non_null(strstr(aclGetRecentErrMsg(), "HCCL_EXEC_TIMEOUT"));
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    unsetenv("HCCL_EXEC_TIMEOUT");
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

/* A task waiting for an event its own stream records later would wait for itself. */
typedef struct {
    aclrtEvent event;
    aclError res;
} sync_event_t;

static aclError sync_event_task(void *arg)
{
    sync_event_t *s = arg;

    s->res = aclrtSynchronizeEvent(s->event);
    return ACL_SUCCESS;
}

static void test_sync_event_from_its_own_stream(void **state)
{
    aclrtStream a, b;
    sync_event_t s = {.res = -1};
    gate_t gate;

    (void)state;
    gate_init(&gate);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&s.event), ACL_SUCCESS);
    hold_stream(a, &gate);
    assert_int_equal(aclrtHostLaunchTask(a, sync_event_task, &s, "sync event"), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(s.event, a), ACL_SUCCESS);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(s.res, ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDestroyEvent(s.event), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

static void test_destroy_with_record_queued(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    aclrtEventStatus status;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    hold_stream(a, &gate);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    /* The queued record and wait keep the event alive until they have run. */
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(event), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtQueryEvent(event, &status), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_ERROR_RT_INVALID_HANDLE);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

static void test_bad_arguments(void **state)
{
    aclrtEvent event;
    aclrtEventStatus status;
    aclrtEventRecordedStatus recorded;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEvent(event, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtQueryEventStatus(event, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtQueryEvent(NULL, &status), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtQueryEventStatus((aclrtEvent)&status, &recorded), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtRecordEvent(event, (aclrtStream)&status), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtStreamWaitEvent((aclrtStream)&status, event), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtSynchronizeEvent(NULL), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtDestroyEvent(NULL), ACL_ERROR_RT_INVALID_HANDLE);
    /* The NULL stream is the current device's default stream. */
    assert_int_equal(aclrtRecordEvent(event, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
}

/* Flags: what a host event does (SYNC, TIME_LINE, ...) is accepted, sharing across processes is
 * not; bounded synchronisation times out when it should and not before. */
static void test_flags_and_bounded_sync(void **state)
{
    aclrtStream a, b;
    aclrtEvent event, ex;
    int64_t start;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEventWithFlag(&event, ACL_EVENT_SYNC), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEventExWithFlag(&ex, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEventWithFlag(&ex, ACL_EVENT_IPC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(aclrtCreateEventExWithFlag(&ex, ACL_EVENT_EXTERNAL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(aclrtCreateEventWithFlag(&ex, 0x1000), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtCreateEventWithFlag(NULL, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
    hold_stream(a, &gate);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    start = hc_test_now_ms();
    assert_int_equal(aclrtSynchronizeEventWithTimeout(event, 0), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    assert_int_equal(aclrtSynchronizeEventWithTimeout(event, 60), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    assert_true(hc_test_now_ms() - start >= 60);
    assert_true(hc_test_now_ms() - start < 5000);
    assert_int_equal(aclrtSynchronizeEventWithTimeout(event, -2), ACL_ERROR_INVALID_PARAM);
    gate_open(&gate);
    assert_int_equal(aclrtSynchronizeEventWithTimeout(event, -1), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEventWithTimeout(event, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(ex), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

/* hccl_test's -t pattern: the work stream waits for a SYNC event and resets it in stream order;
 * another stream records it later, which is what releases the work stream. */
static void test_wait_reset_record_pattern(void **state)
{
    aclrtStream work, sync;
    aclrtEvent event;
    atomic_int ran = 0;
    aclrtStreamStatus status;

    (void)state;
    make_streams(&work, &sync);
    assert_int_equal(aclrtCreateEventWithFlag(&event, ACL_EVENT_SYNC), ACL_SUCCESS);
    for (int round = 0; round < 3; round++) {
        gate_t gate;

        gate_init(&gate);
        atomic_store(&ran, 0);
        hold_stream(sync, &gate);
        assert_int_equal(aclrtRecordEvent(event, sync), ACL_SUCCESS);
        assert_int_equal(aclrtStreamWaitEvent(work, event), ACL_SUCCESS);
        assert_int_equal(aclrtResetEvent(event, work), ACL_SUCCESS);
        assert_int_equal(aclrtHostLaunchTask(work, set_flag_task, &ran, "after wait"), ACL_SUCCESS);
        assert_int_equal(aclrtSynchronizeStreamWithTimeout(work, 50), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
        assert_int_equal(aclrtStreamQuery(work, &status), ACL_SUCCESS);
        assert_int_equal(status, ACL_STREAM_STATUS_NOT_READY);
        assert_int_equal(atomic_load(&ran), 0);
        gate_open(&gate);
        assert_int_equal(aclrtSynchronizeStream(work), ACL_SUCCESS);
        assert_int_equal(atomic_load(&ran), 1);
        assert_int_equal(aclrtStreamQuery(work, &status), ACL_SUCCESS);
        assert_int_equal(status, ACL_STREAM_STATUS_COMPLETE);
        assert_int_equal(aclrtSynchronizeStream(sync), ACL_SUCCESS);
        gate_destroy(&gate);
    }
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(work, sync);
}

/* aclrtSetOpWaitTimeout bounds a stream's event wait instead of HCCL_EXEC_TIMEOUT (default 1836 s).
 * Last: the setting is process-wide. */
static void test_op_wait_timeout(void **state)
{
    aclrtStream a, b;
    aclrtEvent event;
    int64_t start;
    gate_t gate;

    (void)state;
    gate_init(&gate);
    unsetenv("HCCL_EXEC_TIMEOUT");
    make_streams(&a, &b);
    assert_int_equal(aclrtCreateEvent(&event), ACL_SUCCESS);
    assert_int_equal(aclrtSetOpWaitTimeout(1), ACL_SUCCESS);
    hold_stream(a, &gate);
    assert_int_equal(aclrtRecordEvent(event, a), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    start = hc_test_now_ms();
    assert_int_equal(aclrtSynchronizeStream(b), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    assert_true(hc_test_now_ms() - start >= 900);
    assert_true(hc_test_now_ms() - start < 10000);
    gate_open(&gate);
    assert_int_equal(aclrtDestroyEvent(event), ACL_SUCCESS);
    destroy_streams(a, b);
    gate_destroy(&gate);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_and_wait_order_two_streams),
        cmocka_unit_test(test_synchronize_event_waits_for_the_record),
        cmocka_unit_test(test_never_recorded_event_does_not_block),
        cmocka_unit_test(test_elapsed_time),
        cmocka_unit_test(test_reset_event),
        cmocka_unit_test(test_wait_timeout),
        cmocka_unit_test(test_sync_event_from_its_own_stream),
        cmocka_unit_test(test_destroy_with_record_queued),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_flags_and_bounded_sync),
        cmocka_unit_test(test_wait_reset_record_pattern),
        cmocka_unit_test(test_op_wait_timeout),
    };

    /* The timeout test sets HCCL_EXEC_TIMEOUT itself; nothing else may inherit a short one. */
    unsetenv("HCCL_EXEC_TIMEOUT");
    return cmocka_run_group_tests(tests, NULL, NULL) + (aclInit(NULL) != ACL_SUCCESS) + (aclFinalize() != ACL_SUCCESS);
}
