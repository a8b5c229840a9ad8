/*
 * The flight recorder's ring (src/core/trace.c). An entry stays with its op until the op ends, so
 * a burst deeper than the ring keeps its oldest unfinished ops, which are what a hang report needs
 * (the ring used to be overwritten by the newest, hiding the op that hung); an op that ended frees
 * its entry for a later one, and a late state change of an ended op never touches the entry's new
 * owner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "hc_op.h"
#include "hc_trace.h"

#define CAP 4

static void queue(hc_trace_t *trace, uint64_t seq)
{
    hc_op_t op;

    memset(&op, 0, sizeof(op));
    op.seq = seq;
    op.sig.coll = HC_COLL_ALLREDUCE;
    op.sig.count = seq;
    hc_trace_queued(trace, &op, NULL);
}

/* The state of op `seq` in the ring, or -1 when its entry holds another op. */
static int state_of(const hc_trace_t *trace, uint64_t seq)
{
    const hc_trace_entry_t *e = &trace->ring[seq % CAP];
    uint64_t tag = atomic_load(&e->tag);

    return e->seq == seq && tag >> 2 == seq ? (int)(tag & 3) : -1;
}

static void test_burst_keeps_oldest_unfinished(void **state)
{
    hc_trace_t trace;

    (void)state;
    assert_int_equal(hc_trace_init(&trace, CAP), HCCL_SUCCESS);
    for (uint64_t seq = 1; seq <= 3 * CAP; seq++)
        queue(&trace, seq);
    for (uint64_t seq = 1; seq <= CAP; seq++)
        assert_int_equal(state_of(&trace, seq), HC_TRACE_QUEUED);
    for (uint64_t seq = CAP + 1; seq <= 3 * CAP; seq++)
        assert_int_equal(state_of(&trace, seq), -1);

    /* The first op runs and hangs: it is there, running; a later op's states change nothing. */
    hc_trace_state(&trace, 1, HC_TRACE_RUNNING, HCCL_SUCCESS);
    hc_trace_state(&trace, 1 + CAP, HC_TRACE_RUNNING, HCCL_SUCCESS);
    assert_int_equal(state_of(&trace, 1), HC_TRACE_RUNNING);
    assert_int_not_equal(atomic_load(&trace.ring[1].t_start), 0);

    /* It fails (twice, as run_op reports a failure): the first end is final, and frees the entry. */
    hc_trace_state(&trace, 1, HC_TRACE_FAILED, HCCL_E_TIMEOUT);
    hc_trace_state(&trace, 1, HC_TRACE_DONE, HCCL_SUCCESS);
    assert_int_equal(state_of(&trace, 1), HC_TRACE_FAILED);
    assert_int_equal(atomic_load(&trace.ring[1].result), HCCL_E_TIMEOUT);
    queue(&trace, 1 + 3 * CAP);
    assert_int_equal(state_of(&trace, 1 + 3 * CAP), HC_TRACE_QUEUED);

    /* A late word about the old op leaves the new owner alone. */
    hc_trace_state(&trace, 1, HC_TRACE_DONE, HCCL_SUCCESS);
    assert_int_equal(state_of(&trace, 1 + 3 * CAP), HC_TRACE_QUEUED);
    assert_int_equal(atomic_load(&trace.ring[1].result), HCCL_SUCCESS);
    hc_trace_fini(&trace);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_keeps_oldest_unfinished),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
