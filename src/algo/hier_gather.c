/*
 * The hierarchical engine's AllGather(V), ReduceScatter(V), Scatter, AlltoAll(V/VC) and Barrier.
 * The flat forms run one schedule over every rank; the two-level forms are described in
 * hier_coll.c.
 */
#include <stdlib.h>
#include <string.h>

#include "algo_select.h"
#include "hc_check.h"
#include "hc_dtype.h"
#include "hier_internal.h"

static void world_sched(hier_engine_t *eng, hc_sched_t *s, hc_chan_t *ch, const hc_op_t *op)
{
    hc_hier_sched(eng, s, ch, &eng->base.group, op, 0);
}

/* counts[i] = count, displs[i] = i * count for n ranks (the V form of the plain collectives). */
static HcclResult even_blocks(uint32_t n, uint64_t count, uint64_t **counts_p, uint64_t **displs_p)
{
    uint64_t *counts = malloc(2 * (size_t)n * sizeof(*counts));

    if (counts == NULL) {
        HC_ERROR("out of memory planning a collective over %u ranks", n);
        return HCCL_E_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++) {
        counts[i] = count;
        counts[n + i] = (uint64_t)i * count;
    }
    *counts_p = counts;
    *displs_p = counts + n;
    return HCCL_SUCCESS;
}

static HcclResult flat_allgatherv(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                  const uint64_t *displs)
{
    hc_sched_t s;
    hc_chan_t ch;

    world_sched(eng, &s, &ch, op);
    if (eng->requested[op->sig.coll] == HC_SCHED_RING || eng->base.group.size > 16)
        return hc_sched_allgatherv_ring(&s, op->sendbuf, op->recvbuf, counts, displs);
    return hc_sched_allgatherv_direct(&s, op->sendbuf, op->recvbuf, counts, displs);
}

HcclResult hc_hier_allgather(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts, *displs;
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    res = flat_allgatherv(eng, op, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_hier_allgatherv(hc_engine_t *engine, hc_op_t *op)
{
    return flat_allgatherv(hier_of(engine), op, op->recv_counts, op->recv_displs);
}

static HcclResult flat_reduce_scatterv(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                       const uint64_t *displs)
{
    hc_sched_t s;
    hc_chan_t ch;

    world_sched(eng, &s, &ch, op);
    if (!eng->base.group.settings->deterministic &&
        (eng->requested[op->sig.coll] == HC_SCHED_RING || eng->base.group.size > 16))
        return hc_sched_reduce_scatterv_ring(&s, op->sendbuf, op->recvbuf, counts, displs);
    return hc_sched_reduce_scatterv_direct(&s, op->sendbuf, op->recvbuf, counts, displs);
}

HcclResult hc_hier_reduce_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts, *displs;
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    res = flat_reduce_scatterv(eng, op, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_hier_reduce_scatterv(hc_engine_t *engine, hc_op_t *op)
{
    return flat_reduce_scatterv(hier_of(engine), op, op->counts, op->displs);
}

HcclResult hc_hier_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts, *displs;
    hc_sched_t s;
    hc_chan_t ch;
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    world_sched(eng, &s, &ch, op);
    res = hc_sched_scatterv(&s, op->sendbuf, op->recvbuf, counts, displs, op->root);
    if (res == HCCL_SUCCESS)
        res = hc_sched_barrier(&s); /* the check round (hier_coll.c) */
    free(counts);
    return res;
}

static HcclResult flat_alltoallv(hier_engine_t *eng, const hc_op_t *op, const uint64_t *send_counts,
                                 const uint64_t *send_displs, const uint64_t *recv_counts,
                                 const uint64_t *recv_displs)
{
    hc_sched_t s;
    hc_chan_t ch;

    world_sched(eng, &s, &ch, op);
    return hc_sched_alltoallv_pairwise(&s, op->sendbuf, send_counts, send_displs, op->recvbuf, recv_counts,
                                       recv_displs);
}

HcclResult hc_hier_alltoall(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts, *displs;
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    res = flat_alltoallv(eng, op, counts, displs, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_hier_alltoallv(hc_engine_t *engine, hc_op_t *op)
{
    return flat_alltoallv(hier_of(engine), op, op->counts, op->displs, op->recv_counts, op->recv_displs);
}

/* AlltoAllVC: row r of the matrix is what rank r sends to each rank, packed in rank order. */
HcclResult hc_hier_alltoallvc(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint32_t n = eng->base.group.size, me = eng->base.group.me;
    uint64_t *plan = malloc(4 * (size_t)n * sizeof(*plan)), sent = 0, received = 0;
    HcclResult res;

    if (plan == NULL) {
        HC_ERROR("out of memory planning an alltoallvc over %u ranks", n);
        return HCCL_E_MEMORY;
    }
    for (uint32_t j = 0; j < n; j++) {
        plan[j] = op->counts[(size_t)me * n + j];
        plan[n + j] = sent;
        plan[2 * n + j] = op->counts[(size_t)j * n + me];
        plan[3 * n + j] = received;
        sent += plan[j];
        received += plan[2 * n + j];
    }
    res = flat_alltoallv(eng, op, plan, plan + n, plan + 2 * n, plan + 3 * n);
    free(plan);
    return res;
}

HcclResult hc_hier_barrier(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    hc_sched_t s;
    hc_chan_t ch;

    world_sched(eng, &s, &ch, op);
    return hc_sched_barrier(&s);
}
