/*
 * AllReduce, Broadcast and Reduce of the hierarchical engine (the others: hier_gather.c). Each has a
 * flat form (one schedule over every rank, TCP between all of them) and, where it pays, a two-level
 * form:
 *
 *   AllReduce, every host the same size: reduce-scatter inside each host (shared memory), then an
 *     AllReduce of each local rank's block over its slice (one rank per host, all slices in
 *     parallel), then all-gather inside each host. Each rank sends 1/L of the data across hosts.
 *   AllReduce, hosts of different sizes: reduce inside each host to its lowest rank, AllReduce
 *     among those, broadcast inside each host.
 *   Broadcast: a barrier inside each host (it compares the calls), from the root to one
 *     representative per host over TCP, then inside each host.
 *   Reduce: inside each host to its representative, then over TCP to the root.
 *
 * HCCL_DETERMINISTIC makes every reduction the flat rank-ordered schedule: the only one whose bits
 * do not depend on how the ranks are spread over hosts.
 *
 * Mismatches. Every TCP message carries the op's signature hash and every receiver checks it, so a
 * rank fails at once when what it receives was sent for another call, and tells every rank. That
 * makes every rank fail only if every rank's completion depends, through the messages it waits for,
 * on every other rank: true of AllReduce, AllGather, ReduceScatter, AlltoAll and Barrier, not of a
 * tree Broadcast (the root waits for nobody), a tree Reduce (the leaves neither) or a Scatter. Those
 * end with a check round (a dissemination barrier of empty messages, log2(n) rounds), which keeps
 * the promise that a mismatch fails the op on every rank, as inside a host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_select.h"
#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_log.h"
#include "hier_internal.h"

static int deterministic(const hier_engine_t *eng)
{
    return eng->base.group.settings->deterministic;
}

void hc_hier_log_choice(const hc_op_t *op, const char *how, uint32_t p, uint64_t bytes)
{
    char sig[160];

    if (hc_algo_debug())
        hc_log_write(HC_LOG_INFO, __FILE__, __LINE__, "algo: %s #%llu (%llu bytes): %s over %u ranks",
                     hc_op_sig_format(&op->sig, sig, sizeof(sig)), hc_op_number(op), (unsigned long long)bytes,
                     how, p);
}

static HcclResult run_allreduce(hc_sched_t *s, hc_sched_kind_t kind, const void *sendbuf, void *recvbuf,
                                uint64_t count)
{
    switch (kind) {
    case HC_SCHED_RING:
        return hc_sched_allreduce_ring(s, sendbuf, recvbuf, count);
    case HC_SCHED_RHD:
        return hc_sched_allreduce_rhd(s, sendbuf, recvbuf, count);
    case HC_SCHED_ONESHOT:
        return hc_sched_allreduce_oneshot(s, sendbuf, recvbuf, count);
    default:
        return hc_sched_allreduce_direct(s, sendbuf, recvbuf, count);
    }
}

/* An AllReduce over `group` (TCP), the schedule chosen for its size. */
static HcclResult net_allreduce(hier_engine_t *eng, const hc_group_t *group, const hc_op_t *op, const void *sendbuf,
                                void *recvbuf, uint64_t count, uint32_t phase, const char *level)
{
    uint64_t bytes = count * hc_dtype_size(op->dtype);
    hc_sched_kind_t kind =
        hc_algo_pick_allreduce(eng->requested[HC_COLL_ALLREDUCE], group->size, bytes, deterministic(eng));
    hc_sched_t s;
    hc_chan_t ch;
    char how[64];

    snprintf(how, sizeof(how), "%s %s", level, hc_sched_kind_name(kind));
    hc_hier_log_choice(op, how, group->size, bytes);
    hc_hier_sched(eng, &s, &ch, group, op, phase);
    return run_allreduce(&s, kind, sendbuf, recvbuf, count);
}

/* Blocks of `count` over the L ranks of this host, as V-collective arrays. */
static HcclResult local_blocks(const hier_engine_t *eng, uint64_t count, uint64_t **counts_p, uint64_t **displs_p)
{
    uint32_t l = eng->host.size;
    uint64_t *counts = malloc(2 * l * sizeof(*counts));

    if (counts == NULL) {
        HC_ERROR("out of memory planning a collective over %u local ranks", l);
        return HCCL_E_MEMORY;
    }
    for (uint32_t i = 0; i < l; i++)
        hc_sched_block(count, l, i, &counts[l + i], &counts[i]);
    *counts_p = counts;
    *displs_p = counts + l;
    return HCCL_SUCCESS;
}

/* Reduce-scatter inside the host, AllReduce of this rank's block over its slice, all-gather. */
static HcclResult allreduce_slices(hier_engine_t *eng, hc_op_t *op)
{
    size_t es = hc_dtype_size(op->dtype);
    uint32_t li = eng->host.me;
    uint64_t *counts, *displs;
    hc_op_t sub;
    HcclResult res;

    HC_CHECK(local_blocks(eng, op->count, &counts, &displs));
    hc_hier_log_choice(op, "hierarchical: shm reduce-scatter, slices, shm all-gather", eng->base.group.size,
               op->count * es);
    sub = (hc_op_t){.sendbuf = op->sendbuf, .recvbuf = hc_sched_at(op->recvbuf, displs[li], es), .count = counts[li],
                    .dtype = op->dtype, .redop = op->redop, .counts = counts, .displs = displs};
    res = hc_hier_run_local(eng, op, HC_COLL_REDUCE_SCATTERV, &sub);
    if (res == HCCL_SUCCESS)
        res = net_allreduce(eng, &eng->slice, op, hc_sched_at(op->recvbuf, displs[li], es), hc_sched_at(op->recvbuf, displs[li], es),
                            counts[li], 0, "slices:");
    if (res == HCCL_SUCCESS) {
        sub = (hc_op_t){.sendbuf = hc_sched_at(op->recvbuf, displs[li], es), .recvbuf = op->recvbuf, .count = counts[li],
                        .dtype = op->dtype, .recv_counts = counts, .recv_displs = displs};
        res = hc_hier_run_local(eng, op, HC_COLL_ALLGATHERV, &sub);
    }
    free(counts);
    return res;
}

/* The representative of host h for a rooted op: the root on its own host, else the lowest rank. */
static uint32_t rep_of(const hier_engine_t *eng, uint32_t h, uint32_t root)
{
    return eng->host_of[root] == h ? root : eng->host_first[h];
}

/* The group of every host's representative. */
static HcclResult reps_group(const hier_engine_t *eng, uint32_t root, hc_group_t *group)
{
    uint32_t *reps = malloc(eng->nhosts * sizeof(*reps));
    HcclResult res;

    if (reps == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t h = 0; h < eng->nhosts; h++)
        reps[h] = rep_of(eng, h, root);
    res = hc_group_init(group, &eng->base.group, reps, eng->nhosts);
    free(reps);
    return res;
}

static uint32_t my_rank(const hier_engine_t *eng)
{
    return hc_group_my_rank(&eng->base.group);
}

/* Hosts of different sizes: reduce to each host's lowest rank, AllReduce among them, broadcast. */
static HcclResult allreduce_leaders(hier_engine_t *eng, hc_op_t *op)
{
    uint32_t me = my_rank(eng), rep = rep_of(eng, eng->host_of[me], eng->host_first[0]);
    hc_op_t sub = {.sendbuf = op->sendbuf, .recvbuf = op->recvbuf, .count = op->count, .dtype = op->dtype,
                   .redop = op->redop, .root = eng->local_of[rep]};
    hc_group_t leaders;
    HcclResult res;

    hc_hier_log_choice(op, "hierarchical: shm reduce, leaders, shm broadcast", eng->base.group.size,
               op->count * hc_dtype_size(op->dtype));
    res = hc_hier_run_local(eng, op, HC_COLL_REDUCE, &sub);
    if (res == HCCL_SUCCESS && me == rep) {
        HC_CHECK(reps_group(eng, eng->host_first[0], &leaders));
        res = net_allreduce(eng, &leaders, op, op->recvbuf, op->recvbuf, op->count, 0, "leaders:");
        hc_group_fini(&leaders);
    }
    if (res == HCCL_SUCCESS) {
        sub = (hc_op_t){.sendbuf = op->recvbuf, .recvbuf = op->recvbuf, .count = op->count, .dtype = op->dtype,
                        .root = eng->local_of[rep]};
        res = hc_hier_run_local(eng, op, HC_COLL_BROADCAST, &sub);
    }
    return res;
}

HcclResult hc_hier_allreduce(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);

    if (hc_hier_two_level(eng) && !deterministic(eng))
        return eng->uniform ? allreduce_slices(eng, op) : allreduce_leaders(eng, op);
    return net_allreduce(eng, &eng->base.group, op, op->sendbuf, op->recvbuf, op->count, 0, "flat");
}

/* Broadcast over `group` (TCP) from its member `root`. */
static HcclResult net_bcast(hier_engine_t *eng, const hc_group_t *group, const hc_op_t *op, void *buf,
                            uint32_t root, uint32_t phase)
{
    uint64_t bytes = op->count * hc_dtype_size(op->dtype);
    int large = group->size > 2 && bytes >= (256u << 10) && eng->requested[HC_COLL_BROADCAST] != HC_SCHED_RING;
    hc_sched_t s;
    hc_chan_t ch;

    hc_hier_log_choice(op, large ? "scatter + ring all-gather" : "binomial tree + check round", group->size, bytes);
    hc_hier_sched(eng, &s, &ch, group, op, phase);
    if (large)
        return hc_sched_bcast_scatter_allgather(&s, buf, op->count, root);
    HC_CHECK(hc_sched_bcast_tree(&s, buf, op->count, root));
    return hc_sched_barrier(&s);
}

HcclResult hc_hier_broadcast(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint32_t me = my_rank(eng), rep;
    hc_group_t reps;
    hc_op_t sub;
    HcclResult res = HCCL_SUCCESS;

    if (!hc_hier_two_level(eng))
        return net_bcast(eng, &eng->base.group, op, op->recvbuf, op->root, 0);
    /* A barrier inside the host first: it compares the host's calls, so that a mismatch among them
     * fails this host's representative before the TCP part, whose check round tells every host
     * (found only in the last step, the other hosts would be done already). */
    sub = (hc_op_t){.dtype = op->dtype};
    HC_CHECK(hc_hier_run_local(eng, op, HC_COLL_BARRIER, &sub));
    rep = rep_of(eng, eng->host_of[me], op->root);
    if (me == rep) {
        HC_CHECK(reps_group(eng, op->root, &reps));
        res = net_bcast(eng, &reps, op, op->recvbuf, eng->host_of[op->root], 0);
        hc_group_fini(&reps);
    }
    if (res != HCCL_SUCCESS)
        return res;
    sub = (hc_op_t){.sendbuf = op->recvbuf, .recvbuf = op->recvbuf, .count = op->count, .dtype = op->dtype,
                    .root = eng->local_of[rep]};
    return hc_hier_run_local(eng, op, HC_COLL_BROADCAST, &sub);
}

/* Reduce over `group` (TCP) to its member `root`. */
static HcclResult net_reduce(hier_engine_t *eng, const hc_group_t *group, const hc_op_t *op, const void *sendbuf,
                             void *recvbuf, uint32_t root)
{
    int ordered = deterministic(eng);
    hc_sched_t s;
    hc_chan_t ch;

    hc_hier_log_choice(op, ordered ? "rank-ordered reduce-scatter + gather" : "binomial tree + check round", group->size,
               op->count * hc_dtype_size(op->dtype));
    hc_hier_sched(eng, &s, &ch, group, op, 0);
    if (ordered)
        return hc_sched_reduce_direct(&s, sendbuf, recvbuf, op->count, root);
    HC_CHECK(hc_sched_reduce_tree(&s, sendbuf, recvbuf, op->count, root));
    return hc_sched_barrier(&s);
}

HcclResult hc_hier_reduce(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint32_t me = my_rank(eng), rep;
    uint8_t *partial = op->recvbuf;
    hc_group_t reps;
    hc_op_t sub;
    HcclResult res;

    if (!hc_hier_two_level(eng) || deterministic(eng))
        return net_reduce(eng, &eng->base.group, op, op->sendbuf, op->recvbuf, op->root);
    rep = rep_of(eng, eng->host_of[me], op->root);
    /* A representative other than the root keeps the host's partial result in the stage buffer. */
    if (me == rep && me != op->root)
        HC_CHECK(hc_sched_buf(&eng->stage, op->count * hc_dtype_size(op->dtype) + 1, &partial));
    sub = (hc_op_t){.sendbuf = op->sendbuf, .recvbuf = partial, .count = op->count, .dtype = op->dtype,
                    .redop = op->redop, .root = eng->local_of[rep]};
    res = hc_hier_run_local(eng, op, HC_COLL_REDUCE, &sub);
    if (res == HCCL_SUCCESS && me == rep) {
        HC_CHECK(reps_group(eng, op->root, &reps));
        res = net_reduce(eng, &reps, op, partial, op->recvbuf, eng->host_of[op->root]);
        hc_group_fini(&reps);
    }
    /* The host's other ranks finished their part; they wait for the representative's, so that a
     * mismatch on another host fails them too. */
    if (res == HCCL_SUCCESS) {
        sub = (hc_op_t){.dtype = op->dtype};
        res = hc_hier_run_local(eng, op, HC_COLL_BARRIER, &sub);
    }
    return res;
}
