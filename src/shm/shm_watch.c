/*
 * The waiting policy of hc_watchdog.h applied to this engine: the peers' control blocks read into
 * hc_wd_rank_t snapshots (what each rank does: its op, since when, its pending sends and receives,
 * whether it failed), still-waiting lines with that state, deadlock verdicts, and the choice of the
 * one rank that logs a failure's n-rank diagnosis. The wait loops (shm_step.c) call in once they
 * sleep, so none of this is on an op's fast path.
 */
#include <stdio.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_time.h"
#include "shm_internal.h"

/* The report's wait for lower ranks to claim it (hc_watchdog_claim): a rank waiting for a failed peer
 * notices within HOSTCCL_PEER_CHECK_MS, and ranks that time out do so within moments of each other,
 * so twice the check interval, but at least a second (a loaded machine delays the lower ranks) and
 * at most two. Only ranks with a live lower rank ever wait, and only until one of those claims. */
#define SETTLE_MIN_NS HC_NS_PER_S
#define SETTLE_MAX_NS (2 * HC_NS_PER_S)

#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* One look at local rank i's control block. The fields are written by rank i alone, as plain
 * stores; a look that straddles a change shows as two different looks (read_stable). */
static void read_once(hc_shm_engine_t *eng, uint32_t i, hc_wd_rank_t *out)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);
    uint32_t n = LOAD(c->np2p);

    memset(out, 0, sizeof(*out));
    out->number = LOAD(c->cur_seq);
    out->in_op = out->number != 0;
    out->is_coll = LOAD(c->cur_is_coll) != 0;
    out->since_ns = LOAD(c->cur_since_ns);
    memcpy(&out->sig, (const void *)&c->cur_sig, sizeof(out->sig));
    out->colls_done = atomic_load(&c->done_seq);
    out->failed = atomic_load(&c->failed) != HCCL_SUCCESS;
    out->nitems = n < HC_DIAG_P2P ? n : HC_DIAG_P2P;
    for (uint32_t k = 0; k < out->nitems && k < HC_WD_ITEMS; k++)
        out->items[k] = (hc_wd_item_t){.peer = c->p2p[k].peer, .is_send = c->p2p[k].is_send,
                                       .count = c->p2p[k].count, .dtype = c->p2p[k].dtype};
    /* A writer of the eager path finishes its collective without the others taking part. */
    out->finishes_alone = out->is_coll &&
                          hc_shm_eager_writer(eng, &out->sig, out->sig.root == hc_group_rank(&eng->base.group, i));
}

/* A look at rank i that no change of its op went through; 0 when it changed meanwhile. */
static int read_stable(hc_shm_engine_t *eng, uint32_t i, hc_wd_rank_t *out)
{
    hc_wd_rank_t again;

    read_once(eng, i, out);
    read_once(eng, i, &again);
    return out->number == again.number && out->since_ns == again.since_ns && out->nitems == again.nitems &&
           out->is_coll == again.is_coll;
}

void hc_shm_watch_start(hc_shm_engine_t *eng, hc_watchdog_t *wd)
{
    const hc_comm_settings_t *s = eng->base.group.settings;

    hc_watchdog_start(wd, hc_now_ns(), s->still_waiting_s, s->still_waiting_backoff);
}

/* Has the channel from local rank src to local rank dst no chunk left to consume? */
static int drained(hc_shm_engine_t *eng, uint32_t src, uint32_t dst)
{
    hc_p2p_channel_t *ch = hc_shm_channel(eng, src, dst);

    return atomic_load_explicit(&ch->tail, memory_order_acquire) ==
           atomic_load_explicit(&ch->head, memory_order_acquire);
}

/* Leave out of `theirs` (local rank `peer`'s pending items) the items between it and this rank that
 * do not wait for this rank, only for the peer to notice, which a loaded machine can delay past the
 * confirmation time:
 *  - its sends to this rank whose chunks this rank has all consumed (a 3-rank pipeline of Send/Recv
 *    and AllReduce was once reported as deadlocked at load 16);
 *  - its receives from this rank while chunks from this rank wait in the channel: this rank's send
 *    ended once its message was in the ring (a receiver starved for 20 ms while this rank went on to
 *    a Barrier was reported as deadlocked, fault.slow-peer).
 * A chunk posted or consumed after this look is seen at the next. */
static void drop_unblocked_items(hc_shm_engine_t *eng, uint32_t peer, const hc_wd_rank_t *mine,
                                 hc_wd_rank_t *theirs)
{
    uint32_t me = hc_group_my_rank(&eng->base.group), kept = 0, peer_rank = hc_group_rank(&eng->base.group, peer);
    int sends_consumed = drained(eng, peer, eng->me) && mine->nitems < HC_WD_ITEMS;
    int receives_fed = !drained(eng, eng->me, peer) && mine->nitems < HC_WD_ITEMS;

    if (theirs->nitems >= HC_WD_ITEMS)
        return; /* a list cut short says nothing complete about the others: leave it as is */
    /* An empty channel only says that every chunk posted so far was consumed: while this rank still
     * receives from the peer, the send is in the middle (its next chunk not posted yet: a sender
     * preempted for longer than the confirmation time looked like a receive/receive deadlock,
     * coll.large.3 at load 6). */
    for (uint32_t k = 0; k < mine->nitems && k < HC_WD_ITEMS; k++) {
        if (!mine->items[k].is_send && mine->items[k].peer == peer_rank)
            sends_consumed = 0;
        /* Chunks in the channel may be this rank's current send's, which the receive pairs with (a
         * send of more than the ring holds, to a peer stopped in a batch that also sends, looked
         * like a send/send deadlock, fault.slow-peer.exchange): only what is left of a send this
         * rank has finished feeds the receive by itself. */
        if (mine->items[k].is_send && mine->items[k].peer == peer_rank)
            receives_fed = 0;
    }
    for (uint32_t k = 0; k < theirs->nitems; k++) {
        const hc_wd_item_t *it = &theirs->items[k];
        if (it->peer != me || !(it->is_send ? sends_consumed : receives_fed))
            theirs->items[kept++] = *it;
    }
    theirs->nitems = kept;
}

/* Is a deadlock between this rank and local rank `peer` certain (and confirmed over time)? */
static HcclResult check_deadlock(hc_shm_engine_t *eng, hc_watchdog_t *wd, const hc_op_t *op, uint32_t peer,
                                 const hc_wd_rank_t *mine, int64_t now, int *suspected_p)
{
    const hc_group_t *group = &eng->base.group;
    hc_wd_rank_t theirs;
    char why[512], sig[160];

    if (peer == eng->me || !read_stable(eng, peer, &theirs))
        return HCCL_SUCCESS;
    drop_unblocked_items(eng, peer, mine, &theirs);
    if (!hc_watchdog_deadlock(hc_group_my_rank(group), mine, hc_group_rank(group, peer), &theirs, why, sizeof(why)))
        return HCCL_SUCCESS;
    *suspected_p = 1;
    if (!hc_watchdog_confirm(wd, hc_watchdog_suspect_key(hc_group_rank(group, peer), &theirs), now))
        return HCCL_SUCCESS;
    HC_ERROR("%s #%llu deadlocks with rank %u (pid %d): %s", hc_op_sig_format(&op->sig, sig, sizeof(sig)),
             hc_op_number(op), hc_group_rank(group, peer), eng->pids[peer], why);
    return HCCL_E_PARA;
}

/* Is there a live local rank below this one inside an op? */
static int lower_in_op(hc_shm_engine_t *eng, uint32_t me)
{
    for (uint32_t j = 0; j < me; j++)
        if (LOAD(hc_shm_ctrl(eng, j)->cur_seq) != 0 && hc_shm_peer_running(eng, j))
            return 1;
    return 0;
}

/* The still-waiting line: whom this rank waits for and what that rank does; the lowest local rank
 * that waits also describes every rank. */
static void still_waiting(hc_shm_engine_t *eng, hc_watchdog_t *wd, const hc_op_t *op, uint32_t peer, int64_t now)
{
    const hc_group_t *group = &eng->base.group;
    char sig[160], state[1024] = "";

    hc_shm_describe_rank(eng, peer, op->coll_seq, state, sizeof(state));
    HC_WARN("%s #%llu still waiting after %.1f s for rank %u (next report in %.0f s; fails at "
            "HCCL_EXEC_TIMEOUT=%lld s):\n%s", hc_op_sig_format(&op->sig, sig, sizeof(sig)), hc_op_number(op),
            hc_watchdog_waited_s(wd, now), hc_group_rank(group, peer), hc_watchdog_next_s(wd, now),
            (long long)group->settings->exec_timeout_s, state);
    if (!lower_in_op(eng, eng->me)) {
        char every[4096];
        hc_shm_describe(&eng->base, op, every, sizeof(every));
        HC_WARN("every rank while %s #%llu waits:\n%s", sig, hc_op_number(op), every);
    }
}

HcclResult hc_shm_watch(hc_shm_engine_t *eng, hc_watchdog_t *wd, const hc_op_t *op, const uint32_t *peers,
                        uint32_t npeers)
{
    int64_t now = hc_now_ns();
    int suspected = 0;

    if (op == NULL || npeers == 0)
        return HCCL_SUCCESS;
    if (hc_watchdog_look_due(wd, now)) {
        hc_wd_rank_t mine;
        read_once(eng, eng->me, &mine);
        for (uint32_t k = 0; k < npeers && !suspected; k++)
            HC_CHECK(check_deadlock(eng, wd, op, peers[k], &mine, now, &suspected));
        if (!suspected)
            hc_watchdog_confirm(wd, 0, now);
    }
    if (hc_watchdog_report_due(wd, now))
        still_waiting(eng, wd, op, peers[0], now);
    return HCCL_SUCCESS;
}

/* Could a lower local rank still fail and claim the report? Any whose process runs: one that is in
 * no op now may enter one and fail a moment later (a rank that is slower to reach the failing op). */
static int lower_busy(void *ctx, uint32_t me)
{
    hc_shm_engine_t *eng = ctx;

    for (uint32_t j = 0; j < me; j++)
        if (hc_shm_peer_running(eng, j))
            return 1;
    return 0;
}

int hc_shm_report_turn(hc_engine_t *engine, const hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    int64_t settle = 2 * eng->base.group.settings->peer_check_ms * HC_NS_PER_MS;

    (void)op;
    settle = settle < SETTLE_MIN_NS ? SETTLE_MIN_NS : settle > SETTLE_MAX_NS ? SETTLE_MAX_NS : settle;
    return hc_watchdog_claim(&eng->hdr->report_claim, eng->me, lower_busy, eng, settle);
}
