/*
 * What each rank publishes about itself for the others' failure diagnosis, and the description a
 * failing rank prints: for every rank, the op it is in (and for how long) or the last it finished;
 * who has not reached the failed op; and for point-to-point, which sends and receives do not pair.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_time.h"
#include "shm_internal.h"

HcclResult hc_shm_op_begin(hc_engine_t *engine, const hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);

    mine->cur_sig = op->sig;
    mine->cur_since_ns = op->run_ns != 0 ? op->run_ns : hc_coarse_now_ns(); /* on every op's path: read once */
    mine->np2p = 0;
    mine->cur_seq = hc_op_number(op);
    mine->cur_is_coll = op->coll_seq != 0;
    if (atomic_load_explicit(&mine->parked, memory_order_relaxed) != 0) /* begun: nothing to kick (shm_kick.c) */
        atomic_store_explicit(&mine->parked, 0, memory_order_relaxed);
    if (eng->deferred_n != 0 && !hc_shm_eager_defers(eng, &op->sig, eng->me == op->root))
        HC_CHECK(hc_shm_check_deferred(eng, op));
    return op->coll_seq != 0 ? hc_shm_announce_running(eng, op) : HCCL_SUCCESS;
}

void hc_shm_op_end(hc_engine_t *engine, const hc_op_t *op, HcclResult res)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);

    hc_shm_cma_op_end(eng, op, res);
    hc_shm_write_op_end(eng, op, res);
    mine->last_result = (int32_t)res;
    if (res == HCCL_SUCCESS) {
        mine->cur_seq = 0;
        mine->np2p = 0;
        if (op->coll_seq != 0) {
            mine->last_seq = op->coll_seq;
            hc_shm_announce_done(eng, op);
        }
    } else {
        /* A failed rank stays "in" its op, pending items included: that is what the others'
         * diagnosis must show, even when they fail at the same moment. */
        hc_shm_engine_fail(engine, res);
    }
}

/* Append a formatted line to buf (never overflowing). */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;

    if (used + 1 >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

void hc_shm_describe_rank(hc_shm_engine_t *eng, uint32_t i, uint64_t failed_seq, char *buf, size_t len)
{
    const hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);
    uint64_t cur = c->cur_seq;
    char sig[160];

    if (cur != 0) {
        hc_op_sig_t s = c->cur_sig;
        int failed = atomic_load(&((hc_shm_ctrl_t *)c)->failed);
        add(buf, len, "  rank %u (pid %d): in %s #%llu for %.1f s%s%s%s\n", hc_group_rank(&eng->base.group, i),
            eng->pids[i], hc_op_sig_format(&s, sig, sizeof(sig)), (unsigned long long)cur,
            (double)(hc_coarse_now_ns() - c->cur_since_ns) / 1e9,
            c->cur_is_coll && failed_seq != 0 && cur < failed_seq ? " (behind)" : "",
            failed != HCCL_SUCCESS ? ", failed with " : "", failed != HCCL_SUCCESS ? hc_result_name((HcclResult)failed) : "");
    } else {
        /* Behind: it has not called the op, or it has (announced at enqueue) and nothing runs it yet:
         * its stream is busy with earlier work, or left for a synchronisation that has not come. */
        int behind = failed_seq != 0 && c->last_seq < failed_seq;
        add(buf, len, "  rank %u (pid %d): not in an operation; last collective finished #%llu (%s)%s\n",
            hc_group_rank(&eng->base.group, i), eng->pids[i], (unsigned long long)c->last_seq,
            hc_result_name((HcclResult)c->last_result),
            !behind                                    ? ""
            : hc_shm_announced_op(eng, i, failed_seq) ? " <- has enqueued the op, but its stream has not started it "
                                                        "(earlier work on that stream, or not synchronised yet)"
                                                      : " <- has not called the op yet");
    }
    for (uint32_t k = 0; k < c->np2p && k < HC_DIAG_P2P; k++)
        add(buf, len, "    pending %s %s rank %u: %llu %s\n", c->p2p[k].is_send ? "send" : "recv",
            c->p2p[k].is_send ? "to" : "from", c->p2p[k].peer, (unsigned long long)c->p2p[k].count,
            hc_dtype_name((HcclDataType)c->p2p[k].dtype));
}

/* Does rank j have a pending item that pairs with rank i's item k? */
static int has_partner(hc_shm_engine_t *eng, uint32_t i, const hc_shm_p2p_note_t *item)
{
    const hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, item->peer);

    for (uint32_t k = 0; k < peer->np2p && k < HC_DIAG_P2P; k++)
        if (peer->p2p[k].peer == i && peer->p2p[k].is_send != item->is_send)
            return 1;
    return 0;
}

/* Point-to-point items nobody pairs with: "rank 1 sends to 3, but rank 3 does not receive from 1". */
static void describe_unmatched(hc_shm_engine_t *eng, char *buf, size_t len)
{
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);
        for (uint32_t k = 0; k < c->np2p && k < HC_DIAG_P2P; k++) {
            const hc_shm_p2p_note_t *item = &c->p2p[k];
            const hc_shm_ctrl_t *peer;
            if (item->peer >= eng->nlocal || has_partner(eng, i, item))
                continue;
            peer = hc_shm_ctrl(eng, item->peer);
            add(buf, len, "  unmatched: rank %u %s rank %u, but rank %u %s\n", i,
                item->is_send ? "sends to" : "receives from", item->peer, item->peer,
                peer->np2p == 0 ? "has no pending send or receive"
                                : (item->is_send ? "does not receive from it" : "does not send to it"));
        }
    }
}

void hc_shm_describe(hc_engine_t *engine, const hc_op_t *op, char *buf, size_t len)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);

    buf[0] = '\0';
    for (uint32_t i = 0; i < eng->nlocal; i++)
        hc_shm_describe_rank(eng, i, op->coll_seq, buf, len);
    describe_unmatched(eng, buf, len);
}

void hc_shm_describe_link(hc_engine_t *engine, uint32_t r, char *buf, size_t len)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    uint32_t i = hc_group_index_of(&engine->group, r);

    if (i == UINT32_MAX)
        snprintf(buf, len, "none");
    else if (i == eng->me)
        snprintf(buf, len, "self");
    else
        snprintf(buf, len, "shm%s%s", eng->cma ? "+cma" : "", hc_shm_cma_plain(eng) ? " malloc" : "");
}
