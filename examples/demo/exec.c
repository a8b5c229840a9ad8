/*
 * Three ways to run a stage's program over the groups of a micro-batch on HCCL: the seed's two
 * patterns and the stream form of the good one. Same steps, same arithmetic, same bits; only the
 * waiting differs.
 *
 *   serial   the seed's "bad" pattern: HcclAllReduce(...); aclrtSynchronizeStream(...); compute.
 *            Every collective is waited for at once, and the groups run one after the other.
 *   host     the seed's "good" pattern: the host computes group 1 while group 0's collective runs
 *            on the communication stream, and waits (aclrtSynchronizeEvent) only before it needs
 *            group 0's result. The groups advance step by step, interleaved.
 *   streams  compute as host callbacks (aclrtLaunchCallback) on a compute stream, collectives on
 *            the communication stream, events between them (aclrtRecordEvent on one,
 *            aclrtStreamWaitEvent on the other): the host only enqueues, then synchronises once.
 *            This is how NPU and GPU programs overlap; the callbacks stand in for kernels
 *            (aclrtLaunchHostFunc, CANN's newer name for a host function on a stream, works too).
 *
 * The collective time of each step is taken from events recorded around it on the communication
 * stream (aclrtEventElapsedTime): the time that stream spent in the collective, waiting for the
 * slowest peer included.
 */
#include <stdlib.h>
#include <string.h>

#include "demo.h"

typedef struct {
    demo_t *d;
    demo_group_t *g;
    const demo_step_t *step;
    double *compute;
} callback_arg_t;

/* The events and callback arguments of one run: one set per (step, group). */
typedef struct {
    uint32_t nsteps, ngroups;
    aclrtEvent *start, *end;  /* around each collective, on the communication stream */
    aclrtEvent *computed;     /* per group: its latest compute step finished (streams mode) */
    callback_arg_t *args;
} exec_state_t;

static exec_state_t state;

const char *demo_mode_name(demo_mode_t mode)
{
    static const char *const names[MODE_COUNT] = {[MODE_SERIAL] = "serial", [MODE_HOST] = "host",
                                                  [MODE_STREAMS] = "streams"};
    return names[mode];
}

void demo_exec_init(demo_t *d)
{
    uint32_t n = d->program.nsteps * d->cfg.groups;

    state.nsteps = d->program.nsteps;
    state.ngroups = d->cfg.groups;
    state.start = demo_alloc(n * sizeof(aclrtEvent));
    state.end = demo_alloc(n * sizeof(aclrtEvent));
    state.computed = demo_alloc(d->cfg.groups * sizeof(aclrtEvent));
    state.args = demo_alloc(n * sizeof(callback_arg_t));
    for (uint32_t i = 0; i < n; i++) {
        if (d->program.steps[i / d->cfg.groups].describe == NULL)
            continue;
        DEMO_CHECK_ACL(aclrtCreateEvent(&state.start[i]));
        DEMO_CHECK_ACL(aclrtCreateEvent(&state.end[i]));
    }
    for (uint32_t g = 0; g < d->cfg.groups; g++)
        DEMO_CHECK_ACL(aclrtCreateEvent(&state.computed[g]));
}

void demo_exec_fini(demo_t *d)
{
    for (uint32_t i = 0; i < state.nsteps * state.ngroups; i++)
        if (state.start[i] != NULL) {
            DEMO_CHECK_ACL(aclrtDestroyEvent(state.start[i]));
            DEMO_CHECK_ACL(aclrtDestroyEvent(state.end[i]));
        }
    for (uint32_t g = 0; g < state.ngroups; g++)
        DEMO_CHECK_ACL(aclrtDestroyEvent(state.computed[g]));
    free(state.start);
    free(state.end);
    free(state.computed);
    free(state.args);
    memset(&state, 0, sizeof(state));
    (void)d;
}

static void compute(demo_t *d, const demo_step_t *step, demo_group_t *g, double *acc)
{
    double t0 = demo_now();

    step->compute(&d->cfg, &d->shard, g, step->layer);
    *acc += demo_now() - t0;
}

/* Enqueue the step's collective for group g on the communication stream, between its events. */
static void launch(demo_t *d, const demo_step_t *step, demo_group_t *g, uint32_t at)
{
    aclrtStream s = d->comm_stream;
    demo_coll_t c;

    step->describe(&d->cfg, &d->shard, g, step->layer, &c);
    DEMO_CHECK_ACL(aclrtRecordEvent(state.start[at], s));
    switch (c.kind) {
    case COLL_ALLREDUCE:
        DEMO_CHECK_HCCL(HcclAllReduce(c.send, c.recv, c.count, c.dtype, HCCL_REDUCE_SUM, d->tp_comm, s));
        break;
    case COLL_ALLGATHER:
        DEMO_CHECK_HCCL(HcclAllGather(c.send, c.recv, c.count, c.dtype, d->tp_comm, s));
        break;
    case COLL_REDUCESCATTER:
        DEMO_CHECK_HCCL(HcclReduceScatter(c.send, c.recv, c.count, c.dtype, HCCL_REDUCE_SUM, d->tp_comm, s));
        break;
    case COLL_ALLTOALL:
        DEMO_CHECK_HCCL(HcclAlltoAll(c.send, c.count, c.dtype, c.recv, c.count, c.dtype, d->tp_comm, s));
        break;
    case COLL_ALLTOALLV:
        DEMO_CHECK_HCCL(HcclAlltoAllV(c.send, c.scount, c.sdispl, c.dtype, c.recv, c.rcount, c.rdispl, c.dtype,
                                      d->tp_comm, s));
        break;
    }
    DEMO_CHECK_ACL(aclrtRecordEvent(state.end[at], s));
}

/* The seed's bad pattern: wait for every collective right after issuing it. */
static void run_serial(demo_t *d, demo_group_t *groups, uint32_t ngroups, demo_stats_t *st)
{
    for (uint32_t g = 0; g < ngroups; g++)
        for (uint32_t i = 0; i < d->program.nsteps; i++) {
            const demo_step_t *step = &d->program.steps[i];
            if (step->compute != NULL) {
                compute(d, step, &groups[g], &st->compute);
                continue;
            }
            launch(d, step, &groups[g], i * ngroups + g);
            DEMO_CHECK_ACL(aclrtSynchronizeStream(d->comm_stream));
        }
}

/* The seed's good pattern: compute another group while this one's collective runs. */
static void run_host(demo_t *d, demo_group_t *groups, uint32_t ngroups, demo_stats_t *st)
{
    int32_t pending[DEMO_MAX_TP * 4];

    for (uint32_t g = 0; g < ngroups; g++)
        pending[g] = -1; /* the (step, group) slot of the group's collective in flight */
    for (uint32_t i = 0; i < d->program.nsteps; i++)
        for (uint32_t g = 0; g < ngroups; g++) {
            const demo_step_t *step = &d->program.steps[i];
            if (pending[g] >= 0 && (step->compute != NULL || step->needs_host)) {
                DEMO_CHECK_ACL(aclrtSynchronizeEvent(state.end[pending[g]]));
                pending[g] = -1;
            }
            if (step->compute != NULL) {
                compute(d, step, &groups[g], &st->compute);
            } else {
                launch(d, step, &groups[g], i * ngroups + g);
                pending[g] = (int32_t)(i * ngroups + g);
            }
        }
    for (uint32_t g = 0; g < ngroups; g++)
        if (pending[g] >= 0)
            DEMO_CHECK_ACL(aclrtSynchronizeEvent(state.end[pending[g]]));
}

static void run_callback(void *arg)
{
    callback_arg_t *a = arg;

    compute(a->d, a->step, a->g, a->compute);
}

/* Everything enqueued, compute and communication on two streams ordered by events. */
static void run_streams(demo_t *d, demo_group_t *groups, uint32_t ngroups, demo_stats_t *st)
{
    int32_t last_coll[DEMO_MAX_TP * 4];
    int computed[DEMO_MAX_TP * 4] = {0};
    aclrtStream cs = d->compute_stream, ks = d->comm_stream;

    for (uint32_t g = 0; g < ngroups; g++)
        last_coll[g] = -1;
    for (uint32_t i = 0; i < d->program.nsteps; i++)
        for (uint32_t g = 0; g < ngroups; g++) {
            const demo_step_t *step = &d->program.steps[i];
            uint32_t at = i * ngroups + g;
            if (step->compute != NULL) {
                callback_arg_t *a = &state.args[at];
                *a = (callback_arg_t){.d = d, .g = &groups[g], .step = step, .compute = &st->compute};
                if (last_coll[g] >= 0)
                    DEMO_CHECK_ACL(aclrtStreamWaitEvent(cs, state.end[last_coll[g]]));
                DEMO_CHECK_ACL(aclrtLaunchCallback(run_callback, a, ACL_CALLBACK_BLOCK, cs));
                DEMO_CHECK_ACL(aclrtRecordEvent(state.computed[g], cs));
                computed[g] = 1;
                continue;
            }
            if (step->needs_host) { /* the AlltoAllV counts must be on the host before the call */
                if (computed[g])
                    DEMO_CHECK_ACL(aclrtSynchronizeEvent(state.computed[g]));
                if (last_coll[g] >= 0)
                    DEMO_CHECK_ACL(aclrtSynchronizeEvent(state.end[last_coll[g]]));
            }
            if (computed[g])
                DEMO_CHECK_ACL(aclrtStreamWaitEvent(ks, state.computed[g]));
            launch(d, step, &groups[g], at);
            last_coll[g] = (int32_t)at;
        }
    for (uint32_t g = 0; g < ngroups; g++)
        if (last_coll[g] >= 0)
            DEMO_CHECK_ACL(aclrtStreamWaitEvent(cs, state.end[last_coll[g]]));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(cs));
    DEMO_CHECK_ACL(aclrtSynchronizeStream(ks));
}

/* Run the stage's program over the groups of one item; add the times to st. */
void demo_exec_run(demo_t *d, demo_mode_t mode, demo_group_t *groups, uint32_t ngroups, demo_stats_t *st)
{
    switch (mode) {
    case MODE_SERIAL:
        run_serial(d, groups, ngroups, st);
        break;
    case MODE_HOST:
        run_host(d, groups, ngroups, st);
        break;
    default:
        run_streams(d, groups, ngroups, st);
        break;
    }
    for (uint32_t i = 0; i < d->program.nsteps; i++) {
        if (d->program.steps[i].describe == NULL)
            continue;
        for (uint32_t g = 0; g < ngroups; g++) {
            float ms = 0.0f;
            DEMO_CHECK_ACL(aclrtEventElapsedTime(&ms, state.start[i * ngroups + g], state.end[i * ngroups + g]));
            st->tp_comm += ms * 1e-3;
            st->tp_calls += 1;
        }
    }
}
