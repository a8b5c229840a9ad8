/* The hierarchical engine object: hosts, creation, the ops table, hooks, sub-ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_dtype.h"
#include "hc_log.h"
#include "hc_shm.h"
#include "hc_time.h"
#include "hier_internal.h"

static void hier_destroy(hc_engine_t *engine)
{
    hier_engine_t *eng = hier_of(engine);

    if (eng == NULL)
        return;
    hc_net_destroy(eng->net);
    if (eng->local != NULL)
        eng->local->ops->destroy(eng->local);
    hc_group_fini(&eng->host);
    hc_group_fini(&eng->slice);
    free(eng->host_of);
    free(eng->host_first);
    free(eng->host_size);
    free(eng->local_of);
    free(eng->grid);
    free(eng->p2p_sent);
    free(eng->p2p_recv);
    free(eng->seg.buf);
    free(eng->work.buf);
    free(eng->stage.buf);
    hc_group_fini(&eng->base.group);
    free(eng);
}

static HcclResult hier_op_begin(hc_engine_t *engine, const hc_op_t *op)
{
    hc_net_op_begin(hier_of(engine)->net, op);
    return HCCL_SUCCESS;
}

/* A failed op: tell every peer (over TCP, and the local ones through shared memory) so that nobody
 * waits for this rank, and drop what the op left posted. */
static void hier_op_end(hc_engine_t *engine, const hc_op_t *op, HcclResult res)
{
    hier_engine_t *eng = hier_of(engine);
    const char *last = hc_log_last_error(), *text = strstr(last, "] error: ");
    char why[1024];

    if (res == HCCL_SUCCESS)
        return;
    /* What this rank logged as the cause, without its "hostccl[rank R comm C] error: " prefix. */
    snprintf(why, sizeof(why), "%s", text != NULL ? text + 9 : last[0] != '\0' ? last : hc_result_name(res));
    hc_net_cancel(eng->net); /* first: nothing may land in the failed op's memory any more */
    hc_net_fail(eng->net, op, res, why);
    if (eng->local != NULL)
        hc_shm_engine_fail(eng->local, res);
}

/* The lowest failing rank prints the n-rank diagnosis; the others wait a moment for the notices of
 * lower ranks (twice the peer-check interval, within [0.2 s, 2 s]) to learn whether one does. */
static int hier_report_turn(hc_engine_t *engine, const hc_op_t *op)
{
    int64_t settle = 2 * engine->group.settings->peer_check_ms * HC_NS_PER_MS;

    (void)op;
    settle = settle < 200 * HC_NS_PER_MS ? 200 * HC_NS_PER_MS : settle > 2 * HC_NS_PER_S ? 2 * HC_NS_PER_S : settle;
    return hc_net_report_turn(hier_of(engine)->net, settle);
}

static void hier_describe(hc_engine_t *engine, const hc_op_t *op, char *buf, size_t len)
{
    hier_engine_t *eng = hier_of(engine);

    /* The intra-host engine sees only the sub-ops: whether a rank is behind in the op is not its to
     * judge (coll_seq 0 asks for no such verdict). */
    if (eng->local != NULL && eng->local->ops->describe != NULL) {
        hc_op_t whole = *op;
        size_t used;
        whole.coll_seq = 0;
        snprintf(buf, len, "  this host's ranks, in the op's shared-memory steps:\n");
        used = strlen(buf);
        eng->local->ops->describe(eng->local, &whole, buf + used, len - used);
    }
    hc_net_describe(eng->net, buf, len);
}

static int same_host(const hier_engine_t *eng, uint32_t r)
{
    return eng->host_of[r] == eng->host_of[hc_group_my_rank(&eng->base.group)];
}

static void hier_describe_link(hc_engine_t *engine, uint32_t r, char *buf, size_t len)
{
    hier_engine_t *eng = hier_of(engine);

    if (eng->local != NULL && same_host(eng, r))
        eng->local->ops->describe_link(eng->local, r, buf, len);
    else
        hc_net_describe_link(eng->net, r, buf, len);
}

static HcclResult hier_mailbox_post(hc_engine_t *engine, uint64_t tag, const HcclRootInfo *info,
                                    const uint32_t *members, uint32_t nmembers)
{
    hier_engine_t *eng = hier_of(engine);
    uint32_t *remote = malloc((nmembers ? nmembers : 1) * sizeof(*remote)), nremote = 0;
    HcclResult res = HCCL_SUCCESS;

    if (remote == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t i = 0; i < nmembers; i++)
        if (eng->local == NULL || !same_host(eng, members[i]))
            remote[nremote++] = members[i];
    if (eng->local != NULL)
        res = eng->local->ops->mailbox_post(eng->local, tag, info, members, nmembers);
    if (res == HCCL_SUCCESS)
        res = hc_net_mailbox_post(eng->net, tag, info, remote, nremote);
    free(remote);
    return res;
}

static HcclResult hier_mailbox_fetch(hc_engine_t *engine, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                     HcclRootInfo *info_p)
{
    hier_engine_t *eng = hier_of(engine);

    if (eng->local != NULL && same_host(eng, leader))
        return eng->local->ops->mailbox_fetch(eng->local, leader, tag, deadline_ns, info_p);
    return hc_net_mailbox_fetch(eng->net, leader, tag, deadline_ns, info_p);
}

static const hc_engine_ops_t hier_ops = {
    .name = "hier",
    .coll =
        {
            [HC_COLL_ALLREDUCE] = hc_hier_allreduce,
            [HC_COLL_BROADCAST] = hc_hier_broadcast,
            [HC_COLL_REDUCE] = hc_hier_reduce,
            [HC_COLL_ALLGATHER] = hc_hier_allgather,
            [HC_COLL_ALLGATHERV] = hc_hier_allgatherv,
            [HC_COLL_REDUCE_SCATTER] = hc_hier_reduce_scatter,
            [HC_COLL_REDUCE_SCATTERV] = hc_hier_reduce_scatterv,
            [HC_COLL_SCATTER] = hc_hier_scatter,
            [HC_COLL_ALLTOALL] = hc_hier_alltoall,
            [HC_COLL_ALLTOALLV] = hc_hier_alltoallv,
            [HC_COLL_ALLTOALLVC] = hc_hier_alltoallvc,
            [HC_COLL_BARRIER] = hc_hier_barrier,
            [HC_COLL_SEND] = hc_hier_send,
            [HC_COLL_RECV] = hc_hier_recv,
            [HC_COLL_BATCH_SENDRECV] = hc_hier_batch,
        },
    .op_begin = hier_op_begin,
    .op_end = hier_op_end,
    .describe = hier_describe,
    .mailbox_post = hier_mailbox_post,
    .mailbox_fetch = hier_mailbox_fetch,
    .describe_link = hier_describe_link,
    .report_turn = hier_report_turn,
    .destroy = hier_destroy,
};

/* Number the hosts by their lowest rank; without shared memory every rank is a host of its own. */
static HcclResult find_hosts(hier_engine_t *eng)
{
    const hc_group_t *world = &eng->base.group;
    uint32_t n = world->comm_size;

    eng->host_of = calloc(n, sizeof(uint32_t));
    eng->host_first = calloc(n, sizeof(uint32_t));
    eng->host_size = calloc(n, sizeof(uint32_t));
    eng->local_of = calloc(n, sizeof(uint32_t));
    if (eng->host_of == NULL || eng->host_first == NULL || eng->host_size == NULL || eng->local_of == NULL) {
        HC_ERROR("out of memory creating the hierarchical engine");
        return HCCL_E_MEMORY;
    }
    for (uint32_t r = 0; r < n; r++) {
        uint32_t h = 0;
        while (h < eng->nhosts && (!eng->hierarchical || !hc_group_same_host(world, eng->host_first[h], r)))
            h++;
        if (h == eng->nhosts)
            eng->host_first[eng->nhosts++] = r;
        eng->host_of[r] = h;
        eng->local_of[r] = eng->host_size[h]++;
    }
    eng->uniform = 1;
    for (uint32_t h = 1; h < eng->nhosts; h++)
        eng->uniform &= eng->host_size[h] == eng->host_size[0];
    if (eng->uniform) {
        eng->grid = calloc(n, sizeof(uint32_t));
        if (eng->grid == NULL) {
            HC_ERROR("out of memory creating the hierarchical engine");
            return HCCL_E_MEMORY;
        }
        for (uint32_t r = 0; r < n; r++)
            eng->grid[eng->host_of[r] * eng->host_size[0] + eng->local_of[r]] = r;
    }
    return HCCL_SUCCESS;
}

/* The ranks of host h (ascending) and, when uniform, of this rank's slice. */
static HcclResult make_groups(hier_engine_t *eng)
{
    const hc_group_t *world = &eng->base.group;
    uint32_t me = hc_group_my_rank(world), h = eng->host_of[me], n = world->comm_size;
    uint32_t *list = malloc((n > eng->nhosts ? n : eng->nhosts) * sizeof(*list)), k = 0;
    HcclResult res;

    if (list == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t r = 0; r < n; r++)
        if (eng->host_of[r] == h)
            list[k++] = r;
    res = hc_group_init(&eng->host, world, list, k);
    if (res == HCCL_SUCCESS && eng->uniform) {
        k = 0;
        for (uint32_t r = 0; r < n; r++)
            if (eng->local_of[r] == eng->local_of[me])
                list[k++] = r;
        res = hc_group_init(&eng->slice, world, list, k);
    }
    free(list);
    return res;
}

static int want_every_pair(const void *ctx, uint32_t a, uint32_t b)
{
    (void)ctx, (void)a, (void)b;
    return 1;
}

static int hier_fits(const hc_group_t *world, unsigned flags)
{
    (void)world, (void)flags;
    return 1;
}

static int any_host_shared(const hier_engine_t *eng)
{
    for (uint32_t h = 0; h < eng->nhosts; h++)
        if (eng->host_size[h] > 1)
            return 1;
    return 0;
}

static HcclResult hier_create(const hc_group_t *world, hc_boot_t *boot, unsigned flags, hc_engine_t **engine_p)
{
    hier_engine_t *eng = calloc(1, sizeof(*eng));
    const char *transport = hc_config_str(HC_CFG_TRANSPORT);
    HcclResult res;

    if (eng == NULL) {
        HC_ERROR("out of memory creating the hierarchical engine");
        return HCCL_E_MEMORY;
    }
    eng->base.ops = &hier_ops;
    if (hc_group_init(&eng->base.group, world, world->ranks, world->size) != HCCL_SUCCESS) {
        free(eng);
        return HCCL_E_MEMORY;
    }
    eng->hierarchical = !(flags & HC_ENGINE_NO_SHM) && !(transport != NULL && strcmp(transport, "tcp") == 0) &&
                        hc_config_int(HC_CFG_HIERARCHY) != 0;
    hc_algo_parse(world->settings->algo, eng->requested); /* HcclCommConfig.hcclAlgo, else HCCL_ALGO */
    HC_CHECK_GOTO(find_hosts(eng), res, err);
    HC_CHECK_GOTO(make_groups(eng), res, err);
    eng->p2p_sent = calloc(world->comm_size, sizeof(uint64_t));
    eng->p2p_recv = calloc(world->comm_size, sizeof(uint64_t));
    if (eng->p2p_sent == NULL || eng->p2p_recv == NULL) {
        res = HCCL_E_MEMORY;
        goto err;
    }
    /* Every rank creates its host's engine when any host has several ranks, so that the
     * bootstrap's exchanges (over the whole communicator) line up on every rank. */
    if (any_host_shared(eng))
        HC_CHECK_GOTO(hc_shm_engine_create(&eng->host, boot, &eng->local), res, err);
    HC_CHECK_GOTO(hc_net_create(world, boot, want_every_pair, eng, &eng->net), res, err);
    HC_INFO("hierarchical engine: %u hosts%s, %u ranks on this one", eng->nhosts,
            eng->uniform ? " of equal size" : "", eng->host.size);
    *engine_p = &eng->base;
    return HCCL_SUCCESS;

err:
    hier_destroy(&eng->base);
    return res;
}

const hc_engine_factory_t hc_hier_engine_factory = {
    .name = "hier",
    .fits = hier_fits,
    .create = hier_create,
};

void hc_hier_sched(hier_engine_t *eng, hc_sched_t *s, hc_chan_t *ch, const hc_group_t *group, const hc_op_t *op,
                   uint32_t phase)
{
    hc_chan_tcp_init(ch, eng->net, group, op, phase);
    *s = (hc_sched_t){.ch = ch, .n = group->size, .me = group->me, .dtype = op->dtype, .redop = op->redop,
                      .esize = hc_dtype_size(op->dtype), .seg = &eng->seg, .work = &eng->work};
}

HcclResult hc_hier_run_local(hier_engine_t *eng, const hc_op_t *op, hc_coll_t coll, hc_op_t *sub)
{
    const hc_engine_ops_t *ops = eng->local->ops;
    HcclResult res;

    sub->comm = op->comm;
    sub->seq = op->seq;
    sub->parent_number = hc_op_number(op);
    sub->sig = op->sig;
    if (hc_coll_is_p2p(coll)) {
        sub->coll_seq = 0;
        sub->sig_hash = op->sig_hash;
    } else {
        uint64_t words[3];
        sub->coll_seq = ++eng->local_seq;
        words[0] = op->sig_hash, words[1] = coll, words[2] = sub->coll_seq;
        sub->sig_hash = hc_op_digest(words, 3);
    }
    res = ops->op_begin(eng->local, sub);
    if (res == HCCL_SUCCESS)
        res = ops->coll[coll](eng->local, sub);
    ops->op_end(eng->local, sub, res);
    /* A local peer left because of a failure another rank told it of over TCP: the same notice is
     * here too, and may say that this op is this rank's mismatch as well. */
    if (res == HCCL_E_REMOTE)
        res = hc_net_explain(eng->net, op, res);
    return res;
}
