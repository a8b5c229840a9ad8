/*
 * Point-to-point over the per-pair channels of the shared segment. A Send, a Recv and every item of
 * a batch (HcclBatchSendRecv, or the sends and receives of a group) are progressed together in one
 * loop, so a batch never deadlocks on the order its items were issued in: each item moves as far as
 * its channel allows and the loop sleeps on the doorbell only when no item could move.
 *
 * Ordering: messages between one sender and one receiver arrive in the order they were sent; each
 * side numbers them (sent_msgs / recv_msgs), and the receiver checks the sender's number, count and
 * type on the first chunk. A mismatch fails both sides with HCCL_E_PARA. When a batch holds several
 * messages of one pair, only the oldest one moves at a time (posted_msgs / done_msgs): the sender
 * does not interleave their chunks, and a receive never takes the chunk of an earlier receive for
 * its own.
 *
 * Two protocols share the channel (shm_internal.h). Eager: the sender copies the message into the
 * ring chunk by chunk and the receiver copies it out, two copies. Rendezvous, for a message of at
 * least eng->p2p_single_copy_min bytes in the sender's aclrtMalloc arena (or any memory when the
 * ranks are threads of one process), or of plain memory when cross-memory attach is allowed and
 * either the message has eng->p2p_cma_min bytes, or eng->cma_huge_min bytes in huge pages (shm_cma.c
 * says why the pages and the machine decide), or it is a send of an exchange (its batch also
 * receives from that peer, so both ranks copy twice through the ring) that the sender's measured
 * choice sends in place (hc_shm_cma_exchange; eng->p2p_cma_sym_min bytes where it does not
 * measure): the sender posts one chunk that says where its buffer is and the receiver copies
 * straight from it, one copy and no staging; the sender's buffer cannot change meanwhile because
 * such a send only completes once the receiver consumed its chunk. The sender alone
 * chooses, from what it knows of its own buffer; the receiver follows the chunk's kind.
 *
 * Completion: a send completes once its receive is posted with the same count and type (an eager
 * one: its data is in the ring by then) or has consumed it (a rendezvous), so a send always needs
 * its receive, as in HCCL, and a mismatch is seen by both sides; but an eager sender does not wait
 * for the receiver's copy, which overlaps its next message.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "shm_internal.h"

typedef hc_shm_p2p_item_t item_t;

/* Copy a message of at most HC_P2P_INLINE_BYTES (1 or more) in a few moves: the library's memcpy
 * costs more than the copy at this size. Two overlapping moves of 8 (or 4) bytes when it has that
 * many. */
static inline void copy_inline(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (n >= 8) {
        uint64_t head, tail;
        memcpy(&head, src, 8);
        memcpy(&tail, src + n - 8, 8);
        memcpy(dst, &head, 8);
        memcpy(dst + n - 8, &tail, 8);
    } else if (n >= 4) {
        uint32_t head, tail;
        memcpy(&head, src, 4);
        memcpy(&tail, src + n - 4, 4);
        memcpy(dst, &head, 4);
        memcpy(dst + n - 4, &tail, 4);
    } else {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = src[i];
    }
}

/* A send is done only once its receive took it (see the top of the file): a count or type mismatch
 * is then reported on both sides, and the program may reuse the buffer of an HcclSend once it
 * synchronised. */
static int item_done(const item_t *it)
{
    return it->started && it->moved == it->bytes && (!it->is_send || it->released);
}

/* A sender, after its send: ask for the pair's next chunk for writing, its header's line and the
 * payload lines past it (as many as this message took, up to HC_P2P_PREFETCH_MAX bytes: the next
 * one is likely as large), so that the stores of the next message do not wait for the receiver's copies to
 * be dropped one line after the other (the eager ring's reason, shm_internal.h). 2 ranks, blocking
 * Send+Recv exchange, PVM guest in its slow state: 64 B 0.78 -> 0.67 us a call, 128 B 0.86 ->
 * 0.75, 2 KiB 1.32 -> 1.23, 256 B and 1 KiB even. The receiver asking for the lines it is about to
 * read as well (as the eager ring's readers do) took them from the sender while it wrote them:
 * 256 B 0.93 -> 1.16. */
#define HC_P2P_PREFETCH_MAX 2048u
static void prefetch_next_chunk(const hc_p2p_chunk_t *chunk, uint64_t bytes)
{
    int payload = bytes > HC_P2P_INLINE_BYTES && bytes <= HC_P2P_PREFETCH_MAX;

    hc_prefetch_write_lines(chunk, HC_P2P_CHUNK_HEADER + (payload ? bytes : 0));
}

/* Receiver: publish the receive of message it->msg_seq (sequence lock, shm_internal.h) and wake
 * its sender if it sleeps. */
static void post_recv(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, item_t *it)
{
    /* Release stores, not fences (ThreadSanitizer has no fences): a reader that sees a new count
     * or type also sees the odd number before them. */
    atomic_store_explicit(&ch->posted, it->msg_seq << 1 | 1, memory_order_relaxed);
    atomic_store_explicit(&ch->posted_count, it->count, memory_order_release);
    atomic_store_explicit(&ch->posted_dtype, (unsigned)it->dtype, memory_order_release);
    atomic_store_explicit(&ch->posted, it->msg_seq << 1, memory_order_release);
    hc_shm_ring(eng, it->peer);
    eng->p2p_mine[it->peer] = (hc_p2p_posting_t){.msg_seq = it->msg_seq, .count = it->count, .dtype = it->dtype};
    it->posted = 1;
}

/* Is it this receive's turn (every earlier receive from its peer done)? Then it is posted, if it was
 * not yet. */
static int recv_turn(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, item_t *it)
{
    if (eng->done_msgs[it->peer] + 1 != it->msg_seq)
        return 0; /* the chunk at tail is an earlier receive's */
    if (!it->posted)
        post_recv(eng, ch, it);
    return 1;
}

/* Sender: is the receive of its message posted with the same count and type, as the receiver's
 * `posted` says? A mismatch is left to the receiver, which reports it through `error` once it reads
 * the first chunk. */
static int recv_posted(hc_p2p_channel_t *ch, const item_t *it)
{
    uint64_t seq = atomic_load_explicit(&ch->posted, memory_order_acquire), count;
    unsigned dtype;

    if (seq != it->msg_seq << 1)
        return 0;
    count = atomic_load_explicit(&ch->posted_count, memory_order_acquire); /* the re-read stays after */
    dtype = atomic_load_explicit(&ch->posted_dtype, memory_order_acquire);
    return atomic_load_explicit(&ch->posted, memory_order_relaxed) == seq && count == it->count &&
           dtype == (unsigned)it->dtype;
}

static HcclResult report_peer_mismatch(hc_shm_engine_t *eng, const hc_op_t *op, const item_t *it, unsigned error)
{
    if (error == HC_P2P_ERR_UNREADABLE) {
        HC_ERROR("%s #%llu failed: rank %u could not read this rank's send buffer (%llu %s) in place",
                 hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, (unsigned long long)it->count,
                 hc_dtype_name(it->dtype));
        return HCCL_E_UNAVAIL;
    }
    HC_ERROR("%s #%llu failed: send to rank %u (%llu %s) does not match that rank's receive (rank %u reported "
             "a different count or type)",
             hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, (unsigned long long)it->count,
             hc_dtype_name(it->dtype), it->peer);
    (void)eng;
    return HCCL_E_PARA;
}

/* Can the receiver copy this send straight from its buffer? Decided once, by the sender alone. */
static int use_rendezvous(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it)
{
    if (it->bytes < eng->p2p_single_copy_min)
        return 0;
    it->arena_off = hc_shm_arena_offset(eng, it->buf, it->bytes);
    if (it->arena_off >= 0 || eng->pids[it->peer] == eng->pids[eng->me])
        return 1;
    return eng->cma && (it->bytes >= eng->p2p_cma_min ||
                        (it->bytes >= eng->cma_huge_min && hc_shm_cma_huge(eng, it->buf, it->bytes)) ||
                        (it->exchange && hc_shm_cma_exchange(eng, op, it->bytes, it->exchange_max)));
}

/*
 * Each process faults in a chunk's pages at its first access (~11 us a page on the reference VM,
 * and still 6-8 after madvise(MADV_POPULATE_*), which this VM answers without mapping them for
 * good), and a channel walks its HC_P2P_SLOTS chunks one message at a time, so a pair's first
 * messages of a new size each met a cold chunk, inside whatever was timing them: 2 ranks,
 * send_recv_test, 128 KiB after 2 warm-up calls took 45-48 us a call, 5-7 after 4. So the first
 * message that needs more of a chunk than any before touches that much of every chunk of the
 * channel at once. The sender writes bytes that nobody has written or will read before its own
 * later messages do (past every message so far); the receiver reads them, in a process of its own
 * only: ranks that are threads of one process share the page tables the sender's writes filled,
 * and the bytes it reads may be being written (their values are not used).
 */
static void warm_channel(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, uint64_t *warm, uint64_t bytes, int write)
{
    if (bytes > eng->p2p_chunk_bytes)
        bytes = eng->p2p_chunk_bytes;
    if (bytes <= *warm)
        return;
    for (uint64_t n = 0; n < HC_P2P_SLOTS; n++) {
        uintptr_t payload = (uintptr_t)hc_shm_chunk(eng, ch, n) + HC_P2P_CHUNK_HEADER;
        /* The first new byte, then the start of every page after it. */
        for (uintptr_t at = payload + *warm; at < payload + bytes; at = (at & ~(uintptr_t)4095) + 4096) {
            if (write)
                *(volatile uint8_t *)at = 0;
            else
                (void)*(volatile const uint8_t *)at;
        }
    }
    *warm = bytes;
}

/* A receive posted by `peer` for message `seq` from this rank says that the peer consumed every
 * chunk of the messages before it (it posts a receive only once the previous one is done): the
 * channel's tail has passed the last chunk of message seq - 1, if that one is still on record here.
 * The sender learns it from what the peer tells anyway (an exchange's whole chunks, the `posted`
 * line) instead of fetching `tail`, the line the receiver wrote at every message: once per
 * HC_P2P_SLOTS messages, that fetch was a cache-line transfer on the critical path of a send. */
static void learn_tail(hc_shm_engine_t *eng, uint32_t peer, uint64_t seq)
{
    const hc_p2p_sent_t *sent;

    if (seq <= 1)
        return;
    sent = &eng->p2p_sent_end[(size_t)peer * HC_P2P_SLOTS + (seq - 1) % HC_P2P_SLOTS];
    if (sent->msg_seq == seq - 1 && sent->end_chunk > eng->p2p_tail_seen[peer])
        eng->p2p_tail_seen[peer] = sent->end_chunk;
}

/* The tail of the channel to `peer`, read now and kept: the room check of the next send uses the
 * kept value while it shows room (the tail only grows), so that a send does not begin by fetching
 * the line the receiver wrote when it consumed the last message (one cache-line transfer on the
 * critical path of every message). Acquire: a consumed chunk's slot is the sender's again. */
static uint64_t read_tail(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, uint32_t peer)
{
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);

    eng->p2p_tail_seen[peer] = tail;
    return tail;
}

/* Is a send whose chunks are all in the ring complete? An eager one once its receive is posted with
 * the same count and type (as the receiver's chunks told, with no line to fetch, else as its
 * `posted` says; `tail` is read only when that does not tell), a rendezvous once the receiver
 * consumed its chunk.
 *
 * The receiver writes `tail` and `posted` at every message, and a sender's look at either from its
 * spin takes the line away, so that the receiver's next stores wait for it. So the send of an
 * exchange whose batch still waits for the peer's message of one chunk learns it from that chunk
 * alone while the wait spins (thorough = 0; 2 ranks, 8-byte exchange: 19% of the time was on the
 * look), and the looks resume once the wait yields, before the watchdog reads what is pending. */
static int send_released(hc_shm_engine_t *eng, hc_p2p_channel_t *ch, const item_t *it, const item_t *items,
                         int thorough)
{
    const hc_p2p_posting_t *told = &eng->p2p_theirs[it->peer];

    if (!it->rndv && told->msg_seq == it->msg_seq)
        return told->count == it->count && told->dtype == (uint32_t)it->dtype;
    if (!thorough && !it->rndv && it->exchange) {
        const item_t *recv = &items[it->exchange - 1];
        if (!item_done(recv) && recv->bytes <= eng->p2p_chunk_bytes)
            return 0;
    }
    if (!it->rndv && recv_posted(ch, it)) {
        learn_tail(eng, it->peer, it->msg_seq);
        return 1;
    }
    if (read_tail(eng, ch, it->peer) >= it->end_chunk) {
        hc_shm_tsan_acquire(eng, it->peer); /* the receiver's reads of our buffer are over */
        return 1;
    }
    return 0;
}

/* Move one chunk of a send if the channel has room; *moved_p tells whether anything happened. items
 * and thorough: its batch and how far to look for its completion (send_released). */
static HcclResult progress_send(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it, const item_t *items,
                                int thorough, int *moved_p)
{
    hc_p2p_channel_t *ch = hc_shm_channel(eng, eng->me, it->peer);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
    unsigned error = atomic_load_explicit(&ch->error, memory_order_relaxed);
    hc_p2p_chunk_t *chunk;
    uint64_t n;

    if (error != HC_P2P_OK)
        return report_peer_mismatch(eng, op, it, error);
    if (it->started && it->moved == it->bytes) {
        it->released = send_released(eng, ch, it, items, thorough);
        *moved_p |= it->released;
        return HCCL_SUCCESS;
    }
    if (eng->posted_msgs[it->peer] + 1 != it->msg_seq) /* an earlier send to this peer is still posting */
        return HCCL_SUCCESS;
    if (head - eng->p2p_tail_seen[it->peer] >= HC_P2P_SLOTS && head - read_tail(eng, ch, it->peer) >= HC_P2P_SLOTS)
        return HCCL_SUCCESS;
    chunk = hc_shm_chunk(eng, ch, head);
    chunk->msg_seq = it->msg_seq;
    chunk->count = it->count;
    chunk->dtype = (uint32_t)it->dtype;
    if (!it->started && use_rendezvous(eng, op, it)) {
        chunk->kind = HC_P2P_RNDV;
        chunk->h.part.offset = 0;
        chunk->h.part.bytes = it->bytes;
        chunk->u.rndv.src_addr = (uintptr_t)it->buf;
        chunk->u.rndv.src_off = it->arena_off;
        it->rndv = 1;
        n = it->bytes;
    } else {
        n = it->bytes - it->moved < eng->p2p_chunk_bytes ? it->bytes - it->moved : eng->p2p_chunk_bytes;
        if (n == it->bytes) {
            const hc_p2p_posting_t *mine = &eng->p2p_mine[it->peer];
            chunk->kind = HC_P2P_WHOLE;
            chunk->h.posted.seq = mine->msg_seq;
            chunk->h.posted.count = mine->count;
            chunk->posted_dtype = (uint16_t)mine->dtype;
        } else {
            chunk->kind = HC_P2P_EAGER;
            chunk->h.part.offset = it->moved;
            chunk->h.part.bytes = n;
        }
        if (n <= HC_P2P_INLINE_BYTES) {
            copy_inline(chunk->u.data, it->buf + it->moved, n);
        } else {
            warm_channel(eng, ch, &eng->p2p_warm_out[it->peer], n, 1);
            hc_shm_write(eng, op, (uint8_t *)chunk + HC_P2P_CHUNK_HEADER, it->buf + it->moved, n);
        }
    }
    /* Release: the chunk (and, for a rendezvous, the program's writes to the buffer before this op)
     * are visible to the receiver once it sees the chunk ready. `head` is for the sender's own
     * count and the diagnosis. */
    hc_shm_tsan_release(eng);
    atomic_store_explicit(&chunk->ready, head + 1, memory_order_release);
    atomic_store_explicit(&ch->head, head + 1, memory_order_relaxed);
    hc_shm_ring(eng, it->peer);
    prefetch_next_chunk(hc_shm_chunk(eng, ch, head + 1), n); /* the pair's next message goes there */
    it->moved += n;
    it->started = 1;
    it->end_chunk = head + 1;
    if (it->moved == it->bytes) {
        eng->posted_msgs[it->peer] = it->msg_seq;
        eng->p2p_sent_end[(size_t)it->peer * HC_P2P_SLOTS + it->msg_seq % HC_P2P_SLOTS] =
            (hc_p2p_sent_t){.msg_seq = it->msg_seq, .end_chunk = head + 1};
    }
    *moved_p = 1;
    return HCCL_SUCCESS;
}

/* Check the first chunk of a message against this rank's receive. */
static HcclResult check_header(hc_shm_engine_t *eng, const hc_op_t *op, const item_t *it, hc_p2p_channel_t *ch,
                               const hc_p2p_chunk_t *chunk)
{
    if (chunk->msg_seq == it->msg_seq && chunk->count == it->count && chunk->dtype == (uint32_t)it->dtype)
        return HCCL_SUCCESS;
    atomic_store(&ch->error, HC_P2P_ERR_MISMATCH);
    hc_shm_ring(eng, it->peer);
    HC_ERROR("%s #%llu mismatch: rank %u sends %llu %s (message %llu), rank %u receives %llu %s (message %llu)",
             hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, (unsigned long long)chunk->count,
             hc_dtype_name((HcclDataType)chunk->dtype), (unsigned long long)chunk->msg_seq, eng->me,
             (unsigned long long)it->count, hc_dtype_name(it->dtype), (unsigned long long)it->msg_seq);
    return HCCL_E_PARA;
}

/* Consume the chunk at `tail`: the sender may reuse the ring slot, and once it was its last chunk,
 * complete its send. */
static void consume(hc_shm_engine_t *eng, const item_t *it, hc_p2p_channel_t *ch, uint64_t tail, int *moved_p)
{
    if (it->moved == it->bytes)
        eng->done_msgs[it->peer] = it->msg_seq;
    hc_shm_tsan_release(eng);
    atomic_store_explicit(&ch->tail, tail + 1, memory_order_release);
    hc_shm_ring(eng, it->peer);
    *moved_p = 1;
}

/*
 * Rendezvous: copy the next piece of the message straight from the sender's buffer. Pieces keep
 * the other items of a batch moving (and an abort noticed) during a copy of hundreds of MiB; they
 * are large enough that the loop around them costs nothing measurable.
 */
#define RNDV_PIECE_BYTES (8u * 1024u * 1024u)

static HcclResult read_in_place(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it, hc_p2p_channel_t *ch,
                                const hc_p2p_chunk_t *chunk, uint64_t tail, int *moved_p)
{
    uint64_t n = it->bytes - it->moved < RNDV_PIECE_BYTES ? it->bytes - it->moved : RNDV_PIECE_BYTES;
    int64_t off = chunk->u.rndv.src_off < 0 ? -1 : chunk->u.rndv.src_off + (int64_t)it->moved;
    HcclResult res = hc_shm_copy_from_peer(eng, op, it->peer, it->buf + it->moved, chunk->u.rndv.src_addr + it->moved,
                                           off, n);

    if (res != HCCL_SUCCESS) {
        /* The sender waits for this chunk to be consumed: tell it, or it would wait until its
         * timeout. hc_shm_copy_from_peer logged why process_vm_readv failed, if it was tried. */
        atomic_store(&ch->error, HC_P2P_ERR_UNREADABLE);
        hc_shm_ring(eng, it->peer);
        if (res == HCCL_E_UNAVAIL)
            HC_ERROR("%s #%llu: cannot read the send buffer of rank %u in place (its arena could not be "
                     "mapped and cross-memory attach is not allowed)",
                     hc_coll_name(op->sig.coll), hc_op_number(op), it->peer);
        return res;
    }
    it->moved += n;
    it->started = 1;
    *moved_p = 1;
    if (it->moved == it->bytes)
        consume(eng, it, ch, tail, moved_p);
    return HCCL_SUCCESS;
}

/* A whole message's chunk from `peer` tells which receive from this rank the peer posted last. */
static void note_posting(hc_shm_engine_t *eng, uint32_t peer, const hc_p2p_chunk_t *chunk)
{
    eng->p2p_theirs[peer] = (hc_p2p_posting_t){.msg_seq = chunk->h.posted.seq, .count = chunk->h.posted.count,
                                               .dtype = chunk->posted_dtype};
    learn_tail(eng, peer, chunk->h.posted.seq);
}

static HcclResult progress_recv(hc_shm_engine_t *eng, const hc_op_t *op, item_t *it, int *moved_p)
{
    hc_p2p_channel_t *ch = hc_shm_channel(eng, it->peer, eng->me);
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    hc_p2p_chunk_t *chunk;
    uint64_t n;

    if (!recv_turn(eng, ch, it))
        return HCCL_SUCCESS;
    chunk = hc_shm_chunk(eng, ch, tail);
    if (atomic_load_explicit(&chunk->ready, memory_order_acquire) != tail + 1)
        return HCCL_SUCCESS;
    hc_shm_tsan_acquire(eng, it->peer);
    if (!it->started)
        HC_CHECK(check_header(eng, op, it, ch, chunk));
    if (chunk->kind == HC_P2P_WHOLE && !it->started) {
        note_posting(eng, it->peer, chunk);
        n = it->bytes;
    } else if (chunk->kind == HC_P2P_RNDV && chunk->h.part.bytes == it->bytes) {
        return read_in_place(eng, op, it, ch, chunk, tail, moved_p);
    } else if (chunk->kind == HC_P2P_EAGER && chunk->h.part.offset == it->moved &&
               chunk->h.part.bytes <= it->bytes - it->moved) {
        n = chunk->h.part.bytes;
    } else {
        HC_ERROR("%s #%llu: corrupted chunk from rank %u (kind %u, offset %llu, %llu bytes)",
                 hc_coll_name(op->sig.coll), hc_op_number(op), it->peer, chunk->kind,
                 (unsigned long long)chunk->h.part.offset, (unsigned long long)chunk->h.part.bytes);
        return HCCL_E_INTERNAL;
    }
    if (n <= HC_P2P_INLINE_BYTES) {
        copy_inline(it->buf + it->moved, chunk->u.data, n);
    } else {
        if (eng->pids[it->peer] != eng->pids[eng->me])
            warm_channel(eng, ch, &eng->p2p_warm_in[it->peer], n, 0);
        hc_copy(it->buf + it->moved, (uint8_t *)chunk + HC_P2P_CHUNK_HEADER, n);
    }
    it->moved += n;
    it->started = 1;
    consume(eng, it, ch, tail, moved_p);
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

/* After a failure the items left half done must not hold back the pair's next messages (which fail
 * fast on the communicator's sticky error anyway, but should not wait for these first). */
static void forget_items(hc_shm_engine_t *eng, const item_t *items, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t peer = items[i].peer;
        eng->posted_msgs[peer] = eng->sent_msgs[peer];
        eng->done_msgs[peer] = eng->recv_msgs[peer];
    }
}

#define PEERS_ON_STACK 16
#define ITEMS_ON_STACK 8

/*
 * Before a receive takes its data: post it (if it is its turn), then put every send of the batch
 * not yet started into its ring; returns how many sends still are not (their ring is full). A
 * receive that read a rendezvous (a copy of up to RNDV_PIECE_BYTES) ahead of this rank's own send
 * kept the peer waiting for that send as long, and the two ranks of an exchange read in turn
 * instead of at once (2 ranks, bursts of 1 MiB exchanges of huge pages: 50-63 us an exchange, 26
 * of it one read; 30-37 with the sends first). The receive is posted first: a peer's eager send
 * completes on it, and this rank's whole chunks carry it (learn_tail). Only for batches that
 * receive SENDS_FIRST_MIN bytes or more in one item: three passes over every batch (post, send,
 * take) made an 8-byte exchange 6% slower in the VM's fast state.
 */
#define SENDS_FIRST_MIN 4096u /* below, a receive's copy is shorter than the checks would cost */
static uint32_t sends_first(hc_shm_engine_t *eng, const hc_op_t *op, item_t *recv, item_t *items, uint32_t n,
                            int thorough, int *moved_p, HcclResult *res_p)
{
    uint32_t unposted = 0;

    (void)recv_turn(eng, hc_shm_channel(eng, recv->peer, eng->me), recv);
    for (uint32_t j = 0; j < n && *res_p == HCCL_SUCCESS; j++) {
        if (!items[j].is_send || items[j].started)
            continue;
        *res_p = progress_send(eng, op, &items[j], items, thorough, moved_p);
        unposted += !items[j].started;
    }
    return unposted;
}

/* Progress every item until all are done. The pending items are published for the peers'
 * diagnosis only when the loop is about to wait (and again when they changed since): a batch that
 * never waits has nothing to explain, and the peers only diagnose ranks they waited for. */
static HcclResult run_items(hc_shm_engine_t *eng, const hc_op_t *op, item_t *items, uint32_t n)
{
    uint32_t stack_peers[PEERS_ON_STACK];
    uint32_t *peers = n <= PEERS_ON_STACK ? stack_peers : malloc(n * sizeof(*peers));
    hc_shm_poll_t poll;
    uint32_t open = n, unposted = 0; /* sends whose first chunk is not in their ring yet */
    int noted = 0, stale = 1, big = 0;
    HcclResult res = HCCL_SUCCESS;

    if (peers == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        big |= !items[i].is_send && items[i].bytes >= SENDS_FIRST_MIN;
        unposted += items[i].is_send && !items[i].started;
    }
    unposted = big ? unposted : 0;
    hc_shm_poll_init(eng, &poll);
    while (open > 0 && res == HCCL_SUCCESS) {
        int moved = 0, thorough = poll.idle_rounds >= eng->spin_rounds; /* the wait no longer spins */
        uint32_t npeers = 0;
        for (uint32_t i = 0; i < n && res == HCCL_SUCCESS; i++) {
            if (item_done(&items[i]))
                continue;
            if (!items[i].is_send && unposted > 0)
                unposted = sends_first(eng, op, &items[i], items, n, thorough, &moved, &res);
            if (res == HCCL_SUCCESS)
                res = items[i].is_send ? progress_send(eng, op, &items[i], items, thorough, &moved)
                                       : progress_recv(eng, op, &items[i], &moved);
            if (!item_done(&items[i]))
                peers[npeers++] = items[i].peer;
        }
        stale |= npeers != open;
        open = npeers;
        if (res == HCCL_SUCCESS && open > 0 && !moved) {
            if (stale)
                note_pending(eng, items, n);
            noted |= stale;
            stale = 0;
            res = hc_shm_poll_wait(eng, &poll, peers, npeers, op);
        } else if (moved) {
            hc_shm_poll_reset(eng, &poll);
        }
    }
    if (noted || res != HCCL_SUCCESS)
        note_pending(eng, items, n); /* what is left: nothing, or what a failed rank stays in */
    hc_shm_poll_end(eng, &poll);
    if (res != HCCL_SUCCESS)
        forget_items(eng, items, n);
    if (peers != stack_peers)
        free(peers);
    return res;
}

/*
 * The run of a started op that hc_shm_p2p_ready found ready (nothing since can undo that): each send
 * is released, each receive's message is one chunk at the head of its channel. One pass takes the
 * receives' data, without run_items' polling and bookkeeping (2 ranks, grouped 8-byte exchange:
 * 2710 -> 2547 instructions a call, its synchronisation included). 0, having taken nothing, when a
 * receive is not a whole chunk that matches it (a rendezvous, or a mismatch for run_items to
 * report): run_items goes on from there.
 */
static int finish_ready(hc_shm_engine_t *eng, const hc_op_t *op, item_t *items, uint32_t n)
{
    int moved = 0;

    for (uint32_t i = 0; i < n && !items[i].is_send; i++) { /* receives first (make_items) */
        const item_t *it = &items[i];
        hc_p2p_channel_t *ch = hc_shm_channel(eng, it->peer, eng->me);
        const hc_p2p_chunk_t *chunk = hc_shm_chunk(eng, ch, atomic_load_explicit(&ch->tail, memory_order_relaxed));
        if (chunk->kind != HC_P2P_WHOLE || chunk->msg_seq != it->msg_seq || chunk->count != it->count ||
            chunk->dtype != (uint32_t)it->dtype)
            return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (items[i].is_send)
            items[i].released = 1;
        else
            (void)progress_recv(eng, op, &items[i], &moved); /* cannot fail: checked above */
    }
    return 1;
}

static void make_item(hc_shm_engine_t *eng, item_t *it, int is_send, uint32_t peer, void *buf, uint64_t count,
                      HcclDataType dtype)
{
    *it = (item_t){.is_send = is_send, .peer = peer, .buf = buf, .count = count, .dtype = dtype,
                   .bytes = count * hc_dtype_size(dtype),
                   .msg_seq = is_send ? ++eng->sent_msgs[peer] : ++eng->recv_msgs[peer]};
}

/* How many items op may have: room to make them in. */
static uint32_t items_max(const hc_op_t *op)
{
    return op->sig.coll == HC_COLL_BATCH_SENDRECV ? op->nitems : 1;
}

/* Number op's items (each message once: at its start or at its run) into items; returns how many.
 * A batch's items with count 0 take part in numbering but move nothing (both sides skip them the
 * same way only if both counted them; so they are dropped here, as a Send/Recv of count 0 is).
 * Receives come first, each kind in the op's order (messages are numbered per pair and direction,
 * so that order is all that counts): a receive is posted before the sends to its peer go out, whose
 * whole chunks then carry the posting (shm_internal.h), and a receive's chunk read first tells the
 * sends of an exchange that they are received. */
static uint32_t make_items(hc_shm_engine_t *eng, const hc_op_t *op, item_t *items)
{
    uint64_t exchange_max = 0;
    uint32_t n = 0, nrecv;

    if (op->sig.coll == HC_COLL_SEND || op->sig.coll == HC_COLL_RECV) {
        int send = op->sig.coll == HC_COLL_SEND;
        make_item(eng, &items[0], send, op->root, send ? op->sendbuf : op->recvbuf, op->count, op->dtype);
        return 1;
    }
    for (uint32_t i = 0; i < op->nitems; i++) {
        const HcclSendRecvItem *src = &op->items[i];
        if (src->count != 0 && src->sendRecvType != HCCL_SEND) {
            make_item(eng, &items[n++], 0, src->remoteRank, src->buf, src->count, src->dataType);
            if (eng->batch_recv[src->remoteRank] == 0)
                eng->batch_recv[src->remoteRank] = n;
        }
    }
    nrecv = n;
    for (uint32_t i = 0; i < op->nitems; i++) { /* each send marked if it is one of an exchange */
        const HcclSendRecvItem *src = &op->items[i];
        if (src->count != 0 && src->sendRecvType == HCCL_SEND) {
            item_t *it = &items[n++];
            make_item(eng, it, 1, src->remoteRank, src->buf, src->count, src->dataType);
            it->exchange = eng->batch_recv[it->peer];
            if (it->exchange && it->bytes > exchange_max)
                exchange_max = it->bytes;
        }
    }
    for (uint32_t i = 0; i < nrecv; i++)
        eng->batch_recv[items[i].peer] = 0;
    for (uint32_t i = nrecv; i < n; i++)
        items[i].exchange_max = exchange_max;
    return n;
}

/*
 * Begin at launch (the op is queued on an idle stream, or about to run on the launching thread, and
 * is the communicator's next op here: the channels are this thread's). Every receive is posted and
 * every send puts its first chunk (an eager message of one chunk: all of it) in the ring, so that a
 * peer that comes later finds its side done and runs at launch, without the queue and its
 * synchronisation. Nothing here waits or fails: a channel a receiver marked failed is left to the
 * run, which reports it.
 */
int hc_shm_p2p_start(hc_shm_engine_t *eng, hc_op_t *op)
{
    hc_shm_p2p_started_t *st = &eng->p2p_started;

    if (items_max(op) > HC_SHM_P2P_STARTED_MAX)
        return 0;
    st->n = make_items(eng, op, st->items);
    st->seq = op->seq;
    for (uint32_t i = 0; i < st->n; i++) {
        item_t *it = &st->items[i];
        int moved = 0;
        if (!it->is_send) {
            (void)recv_turn(eng, hc_shm_channel(eng, it->peer, eng->me), it);
        } else if (atomic_load_explicit(&hc_shm_channel(eng, eng->me, it->peer)->error, memory_order_relaxed) ==
                   HC_P2P_OK) {
            (void)progress_send(eng, op, it, st->items, 1, &moved);
        }
    }
    return 1;
}

/* Would a started op's run wait for nobody? Its sends' receives are posted (or their chunks
 * consumed), and each receive's message is in the ring whole (one chunk, or a rendezvous). The
 * fence: of two ranks that start at once, the later to look sees the other's side. */
int hc_shm_p2p_ready(hc_shm_engine_t *eng, const hc_op_t *op)
{
    hc_shm_p2p_started_t *st = &eng->p2p_started;

    if (!op->started || st->seq != op->seq)
        return 0;
    atomic_thread_fence(memory_order_seq_cst);
    for (uint32_t i = 0; i < st->n; i++) { /* receives first (make_items) */
        const item_t *it = &st->items[i];
        if (it->is_send) {
            if (!it->started || it->moved != it->bytes ||
                !send_released(eng, hc_shm_channel(eng, eng->me, it->peer), it, st->items, 1))
                return 0;
        } else {
            hc_p2p_channel_t *ch = hc_shm_channel(eng, it->peer, eng->me);
            uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
            const hc_p2p_chunk_t *chunk = hc_shm_chunk(eng, ch, tail);
            if (eng->done_msgs[it->peer] + 1 != it->msg_seq ||
                atomic_load_explicit(&chunk->ready, memory_order_acquire) != tail + 1)
                return 0;
            if (chunk->kind == HC_P2P_WHOLE)
                note_posting(eng, it->peer, chunk);
            else if (chunk->h.part.bytes != it->bytes)
                return 0;
        }
    }
    st->ready = op->seq;
    return 1;
}

HcclResult hc_shm_p2p_init(hc_shm_engine_t *eng)
{
    uint32_t n = eng->nlocal;
    size_t data = HC_SHM_HEADER_BYTES + (size_t)n * HC_SHM_CTRL_BYTES;

    /* The channels follow the control blocks (page-aligned) and every rank's two slots. */
    data = (data + 4095) & ~(size_t)4095;
    eng->p2p_base = data + (size_t)n * 2 * eng->slot_bytes;
    eng->p2p_chunk_stride = HC_P2P_CHUNK_HEADER + eng->p2p_chunk_bytes;
    eng->p2p_channel_bytes = HC_P2P_CHANNEL_HEADER + HC_P2P_SLOTS * eng->p2p_chunk_stride;

    eng->sent_msgs = calloc(n, sizeof(*eng->sent_msgs));
    eng->recv_msgs = calloc(n, sizeof(*eng->recv_msgs));
    eng->posted_msgs = calloc(n, sizeof(*eng->posted_msgs));
    eng->done_msgs = calloc(n, sizeof(*eng->done_msgs));
    eng->p2p_tail_seen = calloc(n, sizeof(*eng->p2p_tail_seen));
    eng->p2p_warm_out = calloc(n, sizeof(*eng->p2p_warm_out));
    eng->p2p_warm_in = calloc(n, sizeof(*eng->p2p_warm_in));
    eng->p2p_mine = calloc(n, sizeof(*eng->p2p_mine));
    eng->p2p_theirs = calloc(n, sizeof(*eng->p2p_theirs));
    eng->batch_recv = calloc(n, sizeof(*eng->batch_recv));
    eng->p2p_sent_end = calloc((size_t)n * HC_P2P_SLOTS, sizeof(*eng->p2p_sent_end));
    if (eng->sent_msgs == NULL || eng->recv_msgs == NULL || eng->posted_msgs == NULL || eng->done_msgs == NULL ||
        eng->p2p_tail_seen == NULL || eng->p2p_warm_out == NULL || eng->p2p_warm_in == NULL ||
        eng->p2p_mine == NULL || eng->p2p_theirs == NULL || eng->batch_recv == NULL || eng->p2p_sent_end == NULL)
        return HCCL_E_MEMORY; /* hc_shm_p2p_fini frees what was allocated */
    return HCCL_SUCCESS;
}

void hc_shm_p2p_fini(hc_shm_engine_t *eng)
{
    free(eng->sent_msgs);
    free(eng->recv_msgs);
    free(eng->posted_msgs);
    free(eng->done_msgs);
    free(eng->p2p_tail_seen);
    free(eng->p2p_warm_out);
    free(eng->p2p_warm_in);
    free(eng->p2p_mine);
    free(eng->p2p_theirs);
    free(eng->batch_recv);
    free(eng->p2p_sent_end);
}

/* Send, Recv and batches alike: the items begun at launch, else made now. */
HcclResult hc_shm_p2p(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    hc_shm_p2p_started_t *st = &eng->p2p_started;
    item_t stack_items[ITEMS_ON_STACK];
    item_t *items;
    uint32_t n;
    HcclResult res;

    if (op->started && st->seq == op->seq) {
        st->seq = 0;
        if (st->n == 0 || (st->ready == op->seq && finish_ready(eng, op, st->items, st->n)))
            return HCCL_SUCCESS;
        return run_items(eng, op, st->items, st->n);
    }
    items = items_max(op) <= ITEMS_ON_STACK ? stack_items : malloc(items_max(op) * sizeof(*items));
    if (items == NULL)
        return HCCL_E_MEMORY;
    n = make_items(eng, op, items);
    res = n > 0 ? run_items(eng, op, items, n) : HCCL_SUCCESS; /* n 0: every item was empty */
    if (items != stack_items)
        free(items);
    return res;
}
