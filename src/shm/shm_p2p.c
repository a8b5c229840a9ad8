/*
 * Point-to-point over the per-pair channels of the shared segment. A Send, a Recv and every item of
 * a batch (HcclBatchSendRecv, or the sends and receives of a group) are progressed together in one
 * loop, so a batch never deadlocks on the order its items were issued in: each item moves as far as
 * its channel allows and the loop sleeps on the doorbell only when no item could move.
 *
 * Ordering: messages between one sender and one receiver arrive in the order they were sent; each
 * side numbers them (sent_msgs / recv_msgs), and the receiver checks the sender's number, count and
 * type on the first chunk. A mismatch fails both sides with HCCL_E_PARA.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "shm_internal.h"

typedef struct {
    int is_send;
    uint32_t peer;        /* local index (= rank on one host) */
    uint8_t *buf;
    uint64_t count;
    HcclDataType dtype;
    uint64_t bytes;
    uint64_t moved;       /* bytes sent or received so far */
    uint64_t msg_seq;
    int started;          /* the first chunk was handled */
    uint64_t end_chunk;   /* send: channel head after its last chunk */
    int acked;            /* send: the receiver consumed every chunk (so it also checked them) */
} item_t;

static hc_shm_engine_t *shm_of(hc_engine_t *engine)
{
    return (hc_shm_engine_t *)(void *)engine;
}

/* A send is done only once the receiver has drained it: a count or type mismatch is then reported
 * on both sides, and the program may reuse the buffer of an HcclSend once it synchronised. */
static int item_done(const item_t *it)
{
    return it->started && it->moved == it->bytes && (!it->is_send || it->acked);
}

static HcclResult report_peer_mismatch(hc_shm_engine_t *eng, const hc_op_t *op, const item_t *it)
{
    HC_ERROR("%s #%llu failed: send to rank %u (%llu %s) does not match that rank's receive (rank %u reported "
             "a different count or type)",
             hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, (unsigned long long)it->count,
             hc_dtype_name(it->dtype), it->peer);
    (void)eng;
    return HCCL_E_PARA;
}

/* Move one chunk of a send if the channel has room; *moved_p tells whether anything happened. */
static HcclResult progress_send(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it, int *moved_p)
{
    hc_p2p_channel_t *ch = hc_shm_channel(eng, eng->me, it->peer);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
    hc_p2p_chunk_t *chunk;
    uint64_t n;

    if (atomic_load(&ch->error))
        return report_peer_mismatch(eng, op, it);
    if (it->started && it->moved == it->bytes) {
        it->acked = atomic_load_explicit(&ch->tail, memory_order_acquire) >= it->end_chunk;
        *moved_p |= it->acked;
        return HCCL_SUCCESS;
    }
    if (head - atomic_load_explicit(&ch->tail, memory_order_acquire) >= HC_P2P_SLOTS)
        return HCCL_SUCCESS;
    n = it->bytes - it->moved < eng->p2p_chunk_bytes ? it->bytes - it->moved : eng->p2p_chunk_bytes;
    chunk = hc_shm_chunk(eng, ch, head);
    *chunk = (hc_p2p_chunk_t){.msg_seq = it->msg_seq, .count = it->count, .dtype = (uint32_t)it->dtype,
                              .offset = it->moved, .bytes = n};
    memcpy((uint8_t *)chunk + HC_P2P_CHUNK_HEADER, it->buf + it->moved, n);
    atomic_store_explicit(&ch->head, head + 1, memory_order_release);
    hc_shm_ring(eng);
    it->moved += n;
    it->started = 1;
    it->end_chunk = head + 1;
    *moved_p = 1;
    return HCCL_SUCCESS;
}

/* Check the first chunk of a message against this rank's receive. */
static HcclResult check_header(hc_shm_engine_t *eng, const hc_op_t *op, const item_t *it, hc_p2p_channel_t *ch,
                               const hc_p2p_chunk_t *chunk)
{
    if (chunk->msg_seq == it->msg_seq && chunk->count == it->count && chunk->dtype == (uint32_t)it->dtype)
        return HCCL_SUCCESS;
    atomic_store(&ch->error, 1);
    hc_shm_ring(eng);
    HC_ERROR("%s #%llu mismatch: rank %u sends %llu %s (message %llu), rank %u receives %llu %s (message %llu)",
             hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, (unsigned long long)chunk->count,
             hc_dtype_name((HcclDataType)chunk->dtype), (unsigned long long)chunk->msg_seq, eng->me,
             (unsigned long long)it->count, hc_dtype_name(it->dtype), (unsigned long long)it->msg_seq);
    return HCCL_E_PARA;
}

static HcclResult progress_recv(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it, int *moved_p)
{
    hc_p2p_channel_t *ch = hc_shm_channel(eng, it->peer, eng->me);
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    hc_p2p_chunk_t *chunk;

    if (atomic_load_explicit(&ch->head, memory_order_acquire) == tail)
        return HCCL_SUCCESS;
    chunk = hc_shm_chunk(eng, ch, tail);
    if (!it->started)
        HC_CHECK(check_header(eng, op, it, ch, chunk));
    if (chunk->offset != it->moved || chunk->bytes > it->bytes - it->moved) {
        HC_ERROR("%s #%llu: corrupted chunk from rank %u (offset %llu, %llu bytes)", hc_coll_name(op->sig.coll),
                 hc_op_number(op), it->peer, (unsigned long long)chunk->offset,
                 (unsigned long long)chunk->bytes);
        return HCCL_E_INTERNAL;
    }
    memcpy(it->buf + it->moved, (uint8_t *)chunk + HC_P2P_CHUNK_HEADER, chunk->bytes);
    it->moved += chunk->bytes;
    it->started = 1;
    atomic_store_explicit(&ch->tail, tail + 1, memory_order_release);
    hc_shm_ring(eng);
    *moved_p = 1;
    return HCCL_SUCCESS;
}

/* Publish the items still pending, for the peers' diagnosis (shm_diag.c). */
static void note_pending(hc_shm_engine_t *eng, const item_t *items, uint32_t n)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    uint32_t k = 0;

    for (uint32_t i = 0; i < n && k < HC_DIAG_P2P; i++) {
        if (item_done(&items[i]))
            continue;
        mine->p2p[k++] = (hc_shm_p2p_note_t){.peer = items[i].peer, .is_send = (uint32_t)items[i].is_send,
                                             .count = items[i].count, .dtype = (uint32_t)items[i].dtype};
    }
    mine->np2p = k;
}

/* Progress every item until all are done. */
static HcclResult run_items(hc_shm_engine_t *eng, const hc_op_t *op, item_t *items, uint32_t n)
{
    uint32_t *peers = malloc((n ? n : 1) * sizeof(*peers));
    hc_shm_poll_t poll;
    uint32_t open = n;
    HcclResult res = HCCL_SUCCESS;

    if (peers == NULL)
        return HCCL_E_MEMORY;
    hc_shm_poll_init(eng, &poll);
    note_pending(eng, items, n);
    while (open > 0 && res == HCCL_SUCCESS) {
        unsigned seen = hc_shm_doorbell(eng);
        int moved = 0;
        uint32_t npeers = 0;
        for (uint32_t i = 0; i < n && res == HCCL_SUCCESS; i++) {
            if (item_done(&items[i]))
                continue;
            res = items[i].is_send ? progress_send(eng, op, &items[i], &moved)
                                   : progress_recv(eng, op, &items[i], &moved);
            if (!item_done(&items[i]))
                peers[npeers++] = items[i].peer;
        }
        if (npeers != open)
            note_pending(eng, items, n);
        open = npeers;
        if (res == HCCL_SUCCESS && open > 0 && !moved)
            res = hc_shm_poll_wait(eng, &poll, seen, peers, npeers, op);
        else if (moved)
            poll.idle_rounds = 0;
    }
    free(peers);
    return res;
}

static item_t make_item(hc_shm_engine_t *eng, int is_send, uint32_t peer, void *buf, uint64_t count,
                        HcclDataType dtype)
{
    item_t it = {.is_send = is_send, .peer = peer, .buf = buf, .count = count, .dtype = dtype,
                 .bytes = count * hc_dtype_size(dtype)};

    it.msg_seq = is_send ? ++eng->sent_msgs[peer] : ++eng->recv_msgs[peer];
    return it;
}

HcclResult hc_shm_send(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    item_t it = make_item(eng, 1, op->root, op->sendbuf, op->count, op->dtype);

    return run_items(eng, op, &it, 1);
}

HcclResult hc_shm_recv(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    item_t it = make_item(eng, 0, op->root, op->recvbuf, op->count, op->dtype);

    return run_items(eng, op, &it, 1);
}

/* A batch: items with count 0 take part in numbering but move nothing (both sides skip them the
 * same way only if both counted them; so they are dropped here, as a Send/Recv of count 0 is). */
HcclResult hc_shm_batch(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    item_t *items = calloc(op->nitems ? op->nitems : 1, sizeof(*items));
    uint32_t n = 0;
    HcclResult res;

    if (items == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t i = 0; i < op->nitems; i++) {
        const HcclSendRecvItem *src = &op->items[i];
        if (src->count == 0)
            continue;
        items[n++] = make_item(eng, src->sendRecvType == HCCL_SEND, src->remoteRank, src->buf, src->count,
                               src->dataType);
    }
    res = run_items(eng, op, items, n);
    free(items);
    return res;
}
