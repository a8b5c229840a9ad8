/*
 * The nine collectives the perf tools measure, one ops table each.
 *
 * data_size means what it means in hccl_test: the bytes of one rank's whole buffer (all_reduce,
 * broadcast, reduce, send_recv: the buffer; all_gather: the gathered output; reduce_scatter: the
 * input; alltoall(v): the input, one block per peer; scatter: root's input). Bus bandwidth uses the
 * nccl-tests factors, so numbers compare with the hardware's link speed across collectives:
 * all_reduce 2(n-1)/n; all_gather, reduce_scatter and alltoall(v) (n-1)/n; the rest 1.
 */
#include "perf.h"

static double factor_one(uint32_t nranks)
{
    (void)nranks;
    return 1.0;
}

static double factor_all_reduce(uint32_t nranks)
{
    return 2.0 * (double)(nranks - 1) / (double)nranks;
}

static double factor_spread(uint32_t nranks)
{
    return (double)(nranks - 1) / (double)nranks;
}

/* ---- layouts ---------------------------------------------------------------------------------- */

/* One buffer of count elements in, one out (all_reduce, reduce, send_recv before their tweaks). */
static void layout_flat(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    *layout_p = (hc_perf_layout_t){.send_elems = run->count, .recv_elems = run->count,
                                   .check_elems = run->count, .data_elems = run->count};
}

/* nranks blocks in and nranks blocks out (alltoall, alltoallv). */
static void layout_exchange(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    uint64_t total = run->count * run->nranks;

    *layout_p = (hc_perf_layout_t){.send_elems = total, .recv_elems = total, .check_elems = total,
                                   .data_elems = total};
}

/* nranks blocks in, this rank's block out (reduce_scatter, scatter). */
static void layout_split(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    uint64_t total = run->count * run->nranks;

    *layout_p = (hc_perf_layout_t){.send_elems = total, .recv_elems = run->count,
                                   .check_elems = run->count, .data_elems = total};
}

static void layout_all_gather(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    uint64_t total = run->count * run->nranks;

    *layout_p = (hc_perf_layout_t){.send_elems = run->count, .recv_elems = total,
                                   .check_elems = total, .data_elems = total};
}

static void layout_broadcast(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    *layout_p = (hc_perf_layout_t){.send_elems = run->count, .check_elems = run->count,
                                   .data_elems = run->count, .in_place = 1};
}

/* Only the root receives the reduction; the others' receive buffers are not written. */
static void layout_reduce(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    layout_flat(run, layout_p);
    if (run->rank != run->opts->root)
        layout_p->check_elems = 0;
}

/* send_recv pairs rank 2k with 2k + 1; with an odd number of ranks the last one has no partner. */
static uint32_t partner_of(const hc_perf_run_t *run)
{
    return run->rank ^ 1u;
}

static void layout_send_recv(const hc_perf_run_t *run, hc_perf_layout_t *layout_p)
{
    layout_flat(run, layout_p);
    if (partner_of(run) >= run->nranks)
        layout_p->check_elems = 0;
}

/* ---- inputs and expectations ------------------------------------------------------------------ */

static double input_reduce(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_reduce(run, run->rank, index);
}

static double input_move(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_move(run, run->rank, index);
}

static double expect_reduced(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_reduced(run, index);
}

/* reduce_scatter: this rank's block of the reduction. */
static double expect_my_block_reduced(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_reduced(run, run->rank * run->count + index);
}

static double expect_root_data(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_move(run, run->opts->root, index);
}

/* all_gather: block b of the output is rank b's input. */
static double expect_gathered(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_move(run, (uint32_t)(index / run->count), index % run->count);
}

/* alltoall: block b of the output is block `rank` of rank b's input. */
static double expect_exchanged(const hc_perf_run_t *run, uint64_t index)
{
    uint32_t src = (uint32_t)(index / run->count);

    return hc_perf_value_move(run, src, run->rank * run->count + index % run->count);
}

/* scatter: block `rank` of root's input. */
static double expect_scattered(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_move(run, run->opts->root, run->rank * run->count + index);
}

static double expect_partner_data(const hc_perf_run_t *run, uint64_t index)
{
    return hc_perf_value_move(run, partner_of(run), index);
}

/* ---- launches --------------------------------------------------------------------------------- */

static HcclDataType type_of(const hc_perf_run_t *run)
{
    return run->opts->dtype->type;
}

static HcclResult launch_all_reduce(const hc_perf_run_t *run)
{
    return HcclAllReduce(run->send_buf, run->recv_buf, run->count, type_of(run), run->opts->op, run->comm,
                         run->stream);
}

static HcclResult launch_reduce(const hc_perf_run_t *run)
{
    return HcclReduce(run->send_buf, run->recv_buf, run->count, type_of(run), run->opts->op, run->opts->root,
                      run->comm, run->stream);
}

static HcclResult launch_reduce_scatter(const hc_perf_run_t *run)
{
    return HcclReduceScatter(run->send_buf, run->recv_buf, run->count, type_of(run), run->opts->op, run->comm,
                             run->stream);
}

static HcclResult launch_broadcast(const hc_perf_run_t *run)
{
    return HcclBroadcast(run->send_buf, run->count, type_of(run), run->opts->root, run->comm, run->stream);
}

static HcclResult launch_all_gather(const hc_perf_run_t *run)
{
    return HcclAllGather(run->send_buf, run->recv_buf, run->count, type_of(run), run->comm, run->stream);
}

static HcclResult launch_alltoall(const hc_perf_run_t *run)
{
    return HcclAlltoAll(run->send_buf, run->count, type_of(run), run->recv_buf, run->count, type_of(run), run->comm,
                        run->stream);
}

/* Equal counts, as hccl_test's alltoallv_test: the V path with the plain exchange's data. */
static HcclResult launch_alltoallv(const hc_perf_run_t *run)
{
    return HcclAlltoAllV(run->send_buf, run->counts, run->displs, type_of(run), run->recv_buf, run->counts,
                         run->displs, type_of(run), run->comm, run->stream);
}

static HcclResult launch_scatter(const hc_perf_run_t *run)
{
    return HcclScatter(run->send_buf, run->recv_buf, run->count, type_of(run), run->opts->root, run->comm,
                       run->stream);
}

/* Both directions of the pair in one group, so neither side's order can deadlock. */
static HcclResult launch_send_recv(const hc_perf_run_t *run)
{
    uint32_t partner = partner_of(run);
    HcclResult res, end;

    if (partner >= run->nranks)
        return HCCL_SUCCESS;
    res = HcclGroupStart();
    if (res != HCCL_SUCCESS)
        return res;
    res = HcclSend(run->send_buf, run->count, type_of(run), partner, run->comm, run->stream);
    if (res == HCCL_SUCCESS)
        res = HcclRecv(run->recv_buf, run->count, type_of(run), partner, run->comm, run->stream);
    end = HcclGroupEnd();
    return res != HCCL_SUCCESS ? res : end;
}

/* ---- the tables ------------------------------------------------------------------------------- */

const hc_perf_coll_ops_t hc_perf_coll_all_reduce = {
    .name = "all_reduce", .reduces = 1, .bus_factor = factor_all_reduce, .layout = layout_flat,
    .input = input_reduce, .expected = expect_reduced, .launch = launch_all_reduce,
};

const hc_perf_coll_ops_t hc_perf_coll_reduce = {
    .name = "reduce", .reduces = 1, .rooted = 1, .bus_factor = factor_one, .layout = layout_reduce,
    .input = input_reduce, .expected = expect_reduced, .launch = launch_reduce,
};

const hc_perf_coll_ops_t hc_perf_coll_reduce_scatter = {
    .name = "reduce_scatter", .reduces = 1, .blocks = 1, .bus_factor = factor_spread, .layout = layout_split,
    .input = input_reduce, .expected = expect_my_block_reduced, .launch = launch_reduce_scatter,
};

const hc_perf_coll_ops_t hc_perf_coll_broadcast = {
    .name = "broadcast", .rooted = 1, .bus_factor = factor_one, .layout = layout_broadcast,
    .input = input_move, .expected = expect_root_data, .launch = launch_broadcast,
};

const hc_perf_coll_ops_t hc_perf_coll_all_gather = {
    .name = "all_gather", .blocks = 1, .bus_factor = factor_spread, .layout = layout_all_gather,
    .input = input_move, .expected = expect_gathered, .launch = launch_all_gather,
};

const hc_perf_coll_ops_t hc_perf_coll_alltoall = {
    .name = "alltoall", .blocks = 1, .bus_factor = factor_spread, .layout = layout_exchange,
    .input = input_move, .expected = expect_exchanged, .launch = launch_alltoall,
};

const hc_perf_coll_ops_t hc_perf_coll_alltoallv = {
    .name = "alltoallv", .blocks = 1, .bus_factor = factor_spread, .layout = layout_exchange,
    .input = input_move, .expected = expect_exchanged, .launch = launch_alltoallv,
};

const hc_perf_coll_ops_t hc_perf_coll_scatter = {
    .name = "scatter", .rooted = 1, .blocks = 1, .bus_factor = factor_one, .layout = layout_split,
    .input = input_move, .expected = expect_scattered, .launch = launch_scatter,
};

const hc_perf_coll_ops_t hc_perf_coll_send_recv = {
    .name = "send_recv", .bus_factor = factor_one, .layout = layout_send_recv,
    .input = input_move, .expected = expect_partner_data, .launch = launch_send_recv,
};
