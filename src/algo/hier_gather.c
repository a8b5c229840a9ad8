/*
 * The hierarchical engine's AllGather(V), ReduceScatter(V), Scatter, AlltoAll(V/VC) and Barrier.
 * The flat forms run one schedule over every rank (TCP between all of them). With shared memory in
 * hosts of the same size (H hosts of L ranks), AllGather(V) and ReduceScatter(V) take two levels:
 *
 *   AllGatherV: an all-gather over this rank's slice (TCP, one rank per host) puts the blocks of
 *     the slice's ranks in place in recvbuf; then for each host h an all-gather inside every host
 *     spreads the L blocks of host h's ranks, each held by the local rank of its index. Each rank
 *     sends its own block across hosts, and nothing else.
 *   ReduceScatterV: for each host h a reduce-scatter inside every host leaves with local rank j the
 *     host's partial sum of the block of host h's rank j, in a stage buffer in slice order; then a
 *     reduce-scatter over the slice (TCP) adds the hosts' partials. Each rank sends H-1 partial
 *     blocks across hosts, where a flat ring sends n-1.
 *
 * Both hold for any placement of ranks on hosts (the blocks are addressed by rank), and the H
 * sub-ops inside a host run in the same order on every rank. Barrier: inside each host, among one
 * rank per host, inside each host again.
 */
#include <stdlib.h>
#include <string.h>

#include "algo_select.h"
#include "hc_check.h"
#include "hc_dtype.h"
#include "hier_internal.h"

/* The slice all-gather and reduce-scatter: ring for many hosts or when asked, else direct. */
static int slice_ring(const hier_engine_t *eng, hc_coll_t coll, uint32_t members)
{
    return eng->requested[coll] == HC_SCHED_RING || members > 16;
}

/* counts and displs (by communicator rank) of the ranks of host h, by local index, into plan[0..L)
 * and plan[L..2L). */
static void host_plan(const hier_engine_t *eng, uint32_t h, const uint64_t *counts, const uint64_t *displs,
                      uint64_t *plan)
{
    uint32_t l = eng->host.size;

    for (uint32_t j = 0; j < l; j++) {
        uint32_t r = eng->grid[h * l + j];
        plan[j] = counts[r];
        plan[l + j] = displs[r];
    }
}

/* Two levels (file comment); every host has L ranks. */
static HcclResult allgatherv_two_level(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                       const uint64_t *displs)
{
    uint32_t m = eng->slice.size, l = eng->host.size, li = eng->host.me;
    size_t es = hc_dtype_size(op->dtype);
    uint64_t *plan = malloc(2 * (size_t)(m > l ? m : l) * sizeof(*plan));
    hc_sched_t s;
    hc_chan_t ch;
    HcclResult res;

    if (plan == NULL) {
        HC_ERROR("out of memory planning an all-gather over %u hosts", m);
        return HCCL_E_MEMORY;
    }
    hc_hier_log_choice(op, "hierarchical: slices, shm all-gather per host", eng->base.group.size,
                       counts[hc_group_my_rank(&eng->base.group)] * es);
    for (uint32_t k = 0; k < m; k++) {
        plan[k] = counts[hc_group_rank(&eng->slice, k)];
        plan[m + k] = displs[hc_group_rank(&eng->slice, k)];
    }
    hc_hier_sched(eng, &s, &ch, &eng->slice, op, 0);
    if (slice_ring(eng, op->sig.coll, m))
        res = hc_sched_allgatherv_ring(&s, op->sendbuf, op->recvbuf, plan, plan + m);
    else
        res = hc_sched_allgatherv_direct(&s, op->sendbuf, op->recvbuf, plan, plan + m);
    for (uint32_t h = 0; h < eng->nhosts && res == HCCL_SUCCESS; h++) {
        hc_op_t sub;
        host_plan(eng, h, counts, displs, plan);
        sub = (hc_op_t){.sendbuf = hc_sched_at(op->recvbuf, plan[l + li], es), .recvbuf = op->recvbuf,
                        .count = plan[li], .dtype = op->dtype, .recv_counts = plan, .recv_displs = plan + l};
        res = hc_hier_run_local(eng, op, HC_COLL_ALLGATHERV, &sub);
    }
    free(plan);
    return res;
}

/* Two levels (file comment); every host has L ranks. */
static HcclResult reduce_scatterv_two_level(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                            const uint64_t *displs)
{
    uint32_t m = eng->slice.size, l = eng->host.size, li = eng->host.me;
    size_t es = hc_dtype_size(op->dtype);
    uint64_t *plan = malloc((2 * (size_t)l + 3 * (size_t)m) * sizeof(*plan)), *slice_counts, *slice_displs,
             *slot, total = 0;
    uint8_t *stage;
    hc_sched_t s;
    hc_chan_t ch;
    HcclResult res = HCCL_SUCCESS;

    if (plan == NULL) {
        HC_ERROR("out of memory planning a reduce-scatter over %u hosts", m);
        return HCCL_E_MEMORY;
    }
    hc_hier_log_choice(op, "hierarchical: shm reduce-scatter per host, slices", eng->base.group.size,
                       counts[hc_group_my_rank(&eng->base.group)] * es);
    /* The stage holds the slice's blocks in slice order; slot[h]: where host h's block goes. */
    slice_counts = plan + 2 * l, slice_displs = slice_counts + m, slot = slice_displs + m;
    for (uint32_t k = 0; k < m; k++) {
        uint32_t r = hc_group_rank(&eng->slice, k);
        slice_counts[k] = counts[r];
        slice_displs[k] = total;
        slot[eng->host_of[r]] = total;
        total += counts[r];
    }
    res = hc_sched_buf(&eng->stage, total * es + 1, &stage);
    for (uint32_t h = 0; h < eng->nhosts && res == HCCL_SUCCESS; h++) {
        hc_op_t sub;
        host_plan(eng, h, counts, displs, plan);
        sub = (hc_op_t){.sendbuf = op->sendbuf, .recvbuf = hc_sched_at(stage, slot[h], es), .count = plan[li],
                        .dtype = op->dtype, .redop = op->redop, .counts = plan, .displs = plan + l};
        res = hc_hier_run_local(eng, op, HC_COLL_REDUCE_SCATTERV, &sub);
    }
    if (res == HCCL_SUCCESS) {
        hc_hier_sched(eng, &s, &ch, &eng->slice, op, 0);
        if (slice_ring(eng, op->sig.coll, m))
            res = hc_sched_reduce_scatterv_ring(&s, stage, op->recvbuf, slice_counts, slice_displs);
        else
            res = hc_sched_reduce_scatterv_direct(&s, stage, op->recvbuf, slice_counts, slice_displs);
    }
    free(plan);
    return res;
}

/* Whether the two-level forms apply: hosts of the same size sharing memory (and, for reductions,
 * no HCCL_DETERMINISTIC: only the flat rank-ordered schedule gives the same bits on any layout). */
static int gather_two_level(const hier_engine_t *eng, int reduces)
{
    return hc_hier_two_level(eng) && eng->uniform && !(reduces && eng->base.group.settings->deterministic);
}

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

static HcclResult run_allgatherv(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                  const uint64_t *displs)
{
    hc_sched_t s;
    hc_chan_t ch;

    if (gather_two_level(eng, 0))
        return allgatherv_two_level(eng, op, counts, displs);
    world_sched(eng, &s, &ch, op);
    if (eng->requested[op->sig.coll] == HC_SCHED_RING || eng->base.group.size > 16)
        return hc_sched_allgatherv_ring(&s, op->sendbuf, op->recvbuf, counts, displs);
    return hc_sched_allgatherv_direct(&s, op->sendbuf, op->recvbuf, counts, displs);
}

HcclResult hc_hier_allgather(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts = NULL, *displs = NULL; /* set on success (GCC -O3 cannot tell) */
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    res = run_allgatherv(eng, op, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_hier_allgatherv(hc_engine_t *engine, hc_op_t *op)
{
    return run_allgatherv(hier_of(engine), op, op->recv_counts, op->recv_displs);
}

static HcclResult run_reduce_scatterv(hier_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                       const uint64_t *displs)
{
    hc_sched_t s;
    hc_chan_t ch;

    if (gather_two_level(eng, 1))
        return reduce_scatterv_two_level(eng, op, counts, displs);
    world_sched(eng, &s, &ch, op);
    if (!eng->base.group.settings->deterministic &&
        (eng->requested[op->sig.coll] == HC_SCHED_RING || eng->base.group.size > 16))
        return hc_sched_reduce_scatterv_ring(&s, op->sendbuf, op->recvbuf, counts, displs);
    return hc_sched_reduce_scatterv_direct(&s, op->sendbuf, op->recvbuf, counts, displs);
}

HcclResult hc_hier_reduce_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts = NULL, *displs = NULL; /* set on success (GCC -O3 cannot tell) */
    HcclResult res;

    HC_CHECK(even_blocks(eng->base.group.size, op->count, &counts, &displs));
    res = run_reduce_scatterv(eng, op, counts, displs);
    free(counts);
    return res;
}

HcclResult hc_hier_reduce_scatterv(hc_engine_t *engine, hc_op_t *op)
{
    return run_reduce_scatterv(hier_of(engine), op, op->counts, op->displs);
}

HcclResult hc_hier_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hier_engine_t *eng = hier_of(engine);
    uint64_t *counts = NULL, *displs = NULL; /* set on success (GCC -O3 cannot tell) */
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
    uint64_t *counts = NULL, *displs = NULL; /* set on success (GCC -O3 cannot tell) */
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
    uint32_t me = hc_group_my_rank(&eng->base.group);
    hc_group_t firsts;
    hc_sched_t s;
    hc_chan_t ch;
    hc_op_t sub = {.dtype = op->dtype};
    HcclResult res;

    if (!hc_hier_two_level(eng)) {
        world_sched(eng, &s, &ch, op);
        return hc_sched_barrier(&s);
    }
    res = hc_hier_run_local(eng, op, HC_COLL_BARRIER, &sub);
    if (res == HCCL_SUCCESS && me == eng->host_first[eng->host_of[me]]) {
        HC_CHECK(hc_group_init(&firsts, &eng->base.group, eng->host_first, eng->nhosts));
        hc_hier_sched(eng, &s, &ch, &firsts, op, 0);
        res = hc_sched_barrier(&s);
        hc_group_fini(&firsts);
    }
    if (res == HCCL_SUCCESS) {
        sub = (hc_op_t){.dtype = op->dtype};
        res = hc_hier_run_local(eng, op, HC_COLL_BARRIER, &sub);
    }
    return res;
}
