/*
 * AlltoAll, AlltoAllV and AlltoAllVC. All three run on one plan (counts and displacements per peer)
 * and one protocol. Each step every rank stages one piece (eng->pipe_bytes / nlocal) for every
 * destination in its slot, and rank r copies piece r of every rank's slot into the block it receives
 * from that rank. From the op size where a source may be read in place (hc_shm_zc_gate: its
 * aclrtMalloc arena from HOSTCCL_ZERO_COPY_MIN, its huge-page plain memory from HOSTCCL_CMA_HUGE_MIN)
 * the first step also carries, from every rank, where its send buffer is and how it is to be read;
 * a source read in place stages nothing and each rank copies its whole block from it in that step
 * (one copy instead of two). When no source is staged the op is that step and a closing one, so that
 * no rank returns (and lets its program write the send buffer) before its readers are done; else the
 * staging steps close it. This rank's own block goes straight from its send to its receive buffer.
 *
 * AlltoAllV counts differ per rank by design, so its signature carries no digest; instead its
 * first step exchanges every rank's send counts, receive counts and send displacements, which lets
 * every rank check the whole matrix (rank i sends what rank j expects), agree on the number of
 * steps and the op's size, and find its block in another rank's buffer. The same step already
 * carries the first piece of every block (the counts sit in the slot's first page), so a small
 * AlltoAllV takes one step, as AlltoAll does; an op large enough to be read in place (which only the
 * exchange tells) ignores those pieces and describes its buffer in the next step. That step is only
 * taken when some rank's buffer could be read in place (each says so with its counts: arena memory,
 * threads of one process, plain memory CMA may read): plain 4 KiB-page memory that CMA does not read
 * took it for nothing, staging its data twice at the first call and again at every describing
 * attempt of the back-off (4 ranks on 2 CPUs, 1 MiB, `alltoallv_test`'s first 20 calls after 2
 * warm-ups: 656-756 us a call against AlltoAll's 150-250). A rank whose own send total makes the op
 * that large and whose buffer could be read in place stages no pieces at all: where ranks share
 * cores a piece is a whole slot's share, so it would stage all its data and then have it read again
 * in place.
 *
 * A small AlltoAllV writes its counts and blocks on its hot line instead, when they fit there (the
 * V_TINY record below; its counts go to the slot too): if every rank's do, each reads only the
 * peers' hot lines, one cache-line transfer per peer as AlltoAll's short path, instead of the flag
 * and then the counts and the piece in the slot; else the slot path takes the blocks of the ranks
 * that wrote a record from it.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "shm_internal.h"

/* Up to this many local ranks a plan's arrays are the plan's own (no allocation per op). */
#define PLAN_RANKS_INLINE 8

typedef struct {
    /* Per peer, in elements: the plan's own words, or (AlltoAllV) the op's arrays, read only. */
    uint64_t *send_count, *send_displ, *recv_count, *recv_displ;
    uint64_t *peer_displ;  /* per source: where this rank's block starts in its send buffer */
    uint64_t largest;      /* largest count anyone moves */
    uint64_t send_elems;   /* extent of this rank's send buffer */
    uint64_t op_bytes;     /* the largest rank's send total: the same on every rank */
    uint64_t *words;       /* the plan's own arrays: inline_words or an allocation */
    uint64_t inline_words[5 * PLAN_RANKS_INLINE];
} plan_t;

/* clear: zero the arrays (AlltoAllVC sums into them); the others write every word they read. */
static HcclResult plan_alloc(plan_t *plan, uint32_t n, int clear)
{
    uint64_t *all = plan->inline_words;

    if (n <= PLAN_RANKS_INLINE) {
        if (clear)
            memset(all, 0, 5 * (size_t)n * sizeof(uint64_t));
    } else if ((all = calloc(5 * (size_t)n, sizeof(uint64_t))) == NULL) {
        HC_ERROR("out of memory planning an alltoall over %u ranks", n);
        return HCCL_E_MEMORY;
    }
    plan->words = all;
    plan->send_count = all;
    plan->send_displ = all + n;
    plan->recv_count = all + 2 * n;
    plan->recv_displ = all + 3 * n;
    plan->peer_displ = all + 4 * n;
    plan->largest = plan->send_elems = plan->op_bytes = 0;
    return HCCL_SUCCESS;
}

static void plan_free(plan_t *plan)
{
    if (plan->words != plan->inline_words)
        free(plan->words);
}

/* Where rank i's blocks of this step start, `stride` elements apart: in its hot line when they all
 * fit there (an 8-byte AlltoAll: one line per peer, as an AllGather), else in its slot. Every rank
 * decides alike, from counts every rank has checked. */
static uint8_t *blocks_of(hc_shm_engine_t *eng, uint32_t i, uint64_t stride, size_t esize)
{
    return hc_shm_stage(eng, i, (size_t)eng->nlocal * stride * esize);
}

/* The distance between blocks in a step of `piece` elements per block: the whole piece, or, when
 * every block is smaller (one step), the largest block, so that small blocks lie together. */
static uint64_t stride_of(uint64_t largest, uint64_t piece)
{
    return largest < piece ? largest : piece;
}

/* The extent of this rank's send buffer in elements, from its counts and displacements. */
static uint64_t send_extent(const uint64_t *counts, const uint64_t *displs, uint32_t n)
{
    uint64_t end = 0;

    for (uint32_t j = 0; j < n; j++)
        if (counts[j] > 0 && displs[j] + counts[j] > end)
            end = displs[j] + counts[j];
    return end;
}

/* Describe this rank's send buffer in the first step; a buffer that overlaps the receive buffer is
 * always staged (its readers would race with this rank's writes). */
static hc_shm_source_t describe_mine(hc_shm_engine_t *eng, const hc_op_t *op, const plan_t *plan, size_t esize)
{
    const uint8_t *send = op->sendbuf, *recv = op->recvbuf;
    uint64_t bytes = plan->send_elems * esize, recv_bytes = 0;

    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (plan->recv_displ[i] + plan->recv_count[i] > recv_bytes / esize)
            recv_bytes = (plan->recv_displ[i] + plan->recv_count[i]) * esize;
    if (send != NULL && recv != NULL && send < recv + recv_bytes && recv < send + bytes)
        bytes = 0;
    hc_shm_zc_describe(eng, op, bytes, 0, plan->op_bytes, eng->zero_copy_min);
    return hc_shm_zc_source(eng, eng->me);
}

/* Stage this step's piece of every block this rank sends, counts[j] elements at displs[j] for rank
 * j (NULL: AlltoAll's equal blocks; the starts at launch pass the op's own arrays and allocate no
 * plan), `stride` elements apart from `slot` (blocks_of; AlltoAllV's first step: first_blocks_of). */
static void stage_pieces(hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts, const uint64_t *displs,
                         uint64_t off, uint64_t piece, uint64_t stride, uint8_t *slot)
{
    size_t esize = hc_dtype_size(op->dtype);

    for (uint32_t j = 0; j < eng->nlocal; j++) {
        uint64_t displ = displs != NULL ? displs[j] : (uint64_t)j * op->count;
        uint64_t count = counts != NULL ? counts[j] : op->count;
        if (j != eng->me) /* this rank's own block goes straight across */
            hc_shm_write(eng, op, slot + (size_t)j * stride * esize,
                         (const uint8_t *)op->sendbuf + (displ + off) * esize, hc_shm_part(count, off, piece) * esize);
    }
}

/* This rank's own block goes straight from its send to its receive buffer: done before the first
 * wait, while the peers get to their first step. */
static void copy_own(hc_shm_engine_t *eng, const hc_op_t *op, const plan_t *plan)
{
    size_t esize = hc_dtype_size(op->dtype);

    hc_copy((uint8_t *)op->recvbuf + plan->recv_displ[eng->me] * esize,
                (const uint8_t *)op->sendbuf + plan->send_displ[eng->me] * esize, plan->recv_count[eng->me] * esize);
}

/* This step's part of every block this rank receives from the others: staged pieces from the
 * slots (or hot lines: blocks_of); in the first step, blocks read in place whole. */
static HcclResult collect_pieces(hc_shm_engine_t *eng, const hc_op_t *op, const plan_t *plan, uint64_t off,
                                 uint64_t piece, uint64_t stride, const uint8_t *source)
{
    size_t esize = hc_dtype_size(op->dtype);
    HcclResult res = HCCL_SUCCESS;

    for (uint32_t k = 1; k < eng->nlocal && res == HCCL_SUCCESS; k++) {
        uint32_t i = (eng->me + k) % eng->nlocal; /* start at different peers: spread the reads */
        uint8_t *dst = (uint8_t *)op->recvbuf + plan->recv_displ[i] * esize;
        if (source[i] == HC_SHM_SOURCE_SLOT)
            hc_copy(dst + off * esize, blocks_of(eng, i, stride, esize) + (size_t)eng->me * stride * esize,
                        hc_shm_part(plan->recv_count[i], off, piece) * esize);
        else if (off == 0 && plan->recv_count[i] > 0)
            res = hc_shm_zc_read_source(eng, op, i, plan->peer_displ[i] * esize, dst, plan->recv_count[i] * esize);
    }
    return res;
}

/* After the first step's wait: how every source is read. Returns whether some rank stages, which
 * every rank must answer alike (it sets the step count): this rank counts too. *any_p: whether some
 * source is read in place; *slot_only_p: whether no source could have been (hc_shm_zc_slot_only); the
 * same on every rank. */
static int plan_sources(hc_shm_engine_t *eng, uint8_t *source, int *any_p, int *slot_only_p)
{
    int staged = 0;

    *any_p = 0;
    *slot_only_p = 1;
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        source[i] = (uint8_t)hc_shm_zc_source(eng, i);
        staged |= source[i] == HC_SHM_SOURCE_SLOT;
        *any_p |= source[i] != HC_SHM_SOURCE_SLOT;
        *slot_only_p &= hc_shm_zc_slot_only(eng, i);
    }
    return staged;
}

/* Whether an op of op_bytes is large enough for its first step to describe the send buffers:
 * every rank decides alike, from the op's data. */
static int describe_size(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes)
{
    return eng->nlocal > 1 && eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK &&
           op_bytes >= hc_shm_zc_gate(eng, coll, eng->zero_copy_min);
}

/* Whether it describes them: large enough, and not skipping after descriptions that found nothing
 * to read in place (hc_shm_zc_skipping; AlltoAllV's costs a step of its own). */
static int describes(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes)
{
    return describe_size(eng, coll, op_bytes) && !hc_shm_zc_skipping(eng, coll, op_bytes);
}

/* The same at the op's one decision, which counts a skip. */
static int decide_describe(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes)
{
    return describe_size(eng, coll, op_bytes) && hc_shm_zc_try(eng, coll, op_bytes);
}

/* The steps shared by the three collectives, for the blocks from element `from` on (AlltoAllV's
 * count exchange may have moved the ones before). first_step: whether the op's signature check
 * still has to happen (AlltoAllV did it in its count exchange). */
static HcclResult run_plan(hc_shm_engine_t *eng, hc_op_t *op, const plan_t *plan, int first_step, uint64_t from)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = eng->pipe_bytes / esize / eng->nlocal, largest = plan->largest, steps = 0;
    uint64_t stride = stride_of(largest, piece);
    uint8_t source[HC_SHM_MAX_RANKS_ON_STACK];
    int describe = from == 0 && decide_describe(eng, (hc_coll_t)op->sig.coll, plan->op_bytes);
    int any_in_place = 0;

    if (eng->nlocal > HC_SHM_MAX_RANKS_ON_STACK)
        return HCCL_E_NOT_SUPPORT;
    hc_assert(!op->started || !describe); /* hc_shm_start_alltoall decided alike */
    memset(source, HC_SHM_SOURCE_SLOT, eng->nlocal);
    if (largest >= piece) /* whole steps: fault in all of them at once (hc_shm_warm_slots) */
        hc_shm_warm_slots(eng, piece * esize * eng->nlocal);
    for (uint64_t off = from; off < largest; off += piece, steps++) {
        HcclResult res;
        if (!hc_shm_started(op, off)) { /* AlltoAll's first step may have been staged at launch */
            hc_shm_step_begin(eng, op);
            if (off == 0 && describe)
                source[eng->me] = (uint8_t)describe_mine(eng, op, plan, esize);
            if (source[eng->me] == HC_SHM_SOURCE_SLOT)
                stage_pieces(eng, op, plan->send_count, plan->send_displ, off, piece, stride,
                             blocks_of(eng, eng->me, stride, esize));
            hc_shm_step_publish(eng);
        }
        if (first_step && off == 0) /* AlltoAllV copied its own block in its count exchange */
            copy_own(eng, op, plan);
        res = hc_shm_step_wait_all(eng, op, first_step && off == 0);
        if (res == HCCL_SUCCESS && off == 0 && describe) {
            int slot_only;
            if (!plan_sources(eng, source, &any_in_place, &slot_only))
                largest = 0; /* nothing staged: this step is the only one with data */
            hc_shm_zc_outcome(eng, (hc_coll_t)op->sig.coll, plan->op_bytes, slot_only);
        }
        if (res == HCCL_SUCCESS)
            res = collect_pieces(eng, op, plan, off, piece, stride, source);
        hc_shm_step_end(eng);
        HC_CHECK(res);
    }
    /* A source read in place returns only after its readers are done: a later step says so, or
     * else the closing one, which every rank must take alike (not only those that read in place). */
    return any_in_place && steps == 1 ? hc_shm_zc_close(eng, op) : HCCL_SUCCESS;
}

/* AlltoAll's plan: equal blocks in rank order. */
static HcclResult alltoall_plan(const hc_shm_engine_t *eng, const hc_op_t *op, plan_t *plan)
{
    HC_CHECK(plan_alloc(plan, eng->nlocal, 0));
    for (uint32_t j = 0; j < eng->nlocal; j++) {
        plan->send_count[j] = plan->recv_count[j] = op->count;
        plan->send_displ[j] = plan->recv_displ[j] = (uint64_t)j * op->count;
        plan->peer_displ[j] = (uint64_t)eng->me * op->count;
    }
    plan->largest = op->count;
    plan->send_elems = op->count * eng->nlocal;
    plan->op_bytes = plan->send_elems * hc_dtype_size(op->dtype);
    return HCCL_SUCCESS;
}

/* AlltoAll's short path (hc_shm_tiny): every rank's whole send buffer on its hot line; this rank's
 * block from each. Its own block is copied after its line is staged, so in place is safe. */
static HcclResult tiny_alltoall(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t block = op->count * hc_dtype_size(op->dtype);
    uint8_t *recv = op->recvbuf;

    HC_CHECK(hc_shm_tiny_wait(eng, op));
    for (uint32_t i = 0; i < eng->nlocal; i++)
        memcpy(recv + i * block, hc_shm_tiny_line(eng, i) + eng->me * block, block);
    hc_shm_step_end(eng);
    return HCCL_SUCCESS;
}

HcclResult hc_shm_alltoall(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    plan_t plan; /* plan_alloc initialises it */
    HcclResult res;

    if (hc_shm_tiny(eng, op))
        return tiny_alltoall(eng, op);
    HC_CHECK(alltoall_plan(eng, op, &plan));
    res = run_plan(eng, op, &plan, 1, 0);
    plan_free(&plan);
    return res;
}

/* AlltoAllVC: the matrix (row i: what rank i sends to each rank) is the same on every rank and
 * blocks are contiguous in both buffers. */
HcclResult hc_shm_alltoallvc(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    const uint64_t *m = op->counts;
    uint32_t n = eng->nlocal, me = eng->me;
    uint64_t sent = 0, received = 0, row_max = 0;
    plan_t plan; /* plan_alloc initialises it */
    HcclResult res;

    HC_CHECK(plan_alloc(&plan, n, 1));
    for (uint32_t j = 0; j < n; j++) {
        plan.send_count[j] = m[(size_t)me * n + j];
        plan.send_displ[j] = sent;
        sent += plan.send_count[j];
        plan.recv_count[j] = m[(size_t)j * n + me];
        plan.recv_displ[j] = received;
        received += plan.recv_count[j];
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t row = 0;
        for (uint32_t j = 0; j < n; j++) {
            uint64_t c = m[(size_t)i * n + j];
            plan.peer_displ[i] += j < me ? c : 0;
            plan.largest = c > plan.largest ? c : plan.largest;
            row += c;
        }
        row_max = row > row_max ? row : row_max;
    }
    plan.send_elems = sent;
    plan.op_bytes = row_max * hc_dtype_size(op->dtype);
    res = run_plan(eng, op, &plan, 1, 0);
    plan_free(&plan);
    return res;
}

/* The count exchange of AlltoAllV, as each rank stages it at the start of its slot: send counts,
 * receive counts, send displacements, nlocal words each, then one word: whether its send buffer
 * could be read in place (v_may_read_in_place). The first pieces follow from the next page on.
 * At the slot's end, megabytes from the pieces, the counts cost the readers more than their one
 * line (2 ranks, 1 KiB, PVM guest: 0.86 us a call -> 0.72 with the pieces right after the
 * counts); right after them, though, the pieces were 64 bytes into a page, and the copy into
 * them from a large malloc'd buffer (16 bytes into its page) met 4 KiB aliasing (a load waiting for
 * an earlier store whose address matches it in its low 12 bits: 64 KiB 2.85 -> 3.61 us). From the
 * next page, against the slot's end: 256 B 0.91 -> 0.76, 16 KiB 2.35 -> 2.13, 64 KiB 4.78 -> 4.50 (slow
 * state); 1 KiB 0.48 -> 0.44, 16 KiB 1.11 -> 1.00, 64 KiB 2.89 -> 2.66 (fast state). */
#define V_WORDS 3

static size_t counts_bytes(const hc_shm_engine_t *eng)
{
    return (V_WORDS * (size_t)eng->nlocal + 1) * sizeof(uint64_t);
}

/* The counts' room at the start of the slot: whole pages. */
static size_t counts_room(const hc_shm_engine_t *eng)
{
    return (counts_bytes(eng) + 4095) & ~(size_t)4095;
}

static uint64_t *counts_of(hc_shm_engine_t *eng, uint32_t i)
{
    return (uint64_t *)(void *)hc_shm_slot(eng, i, eng->step);
}

/* Where rank i's first pieces start in the count exchange's step: after its counts. */
static uint8_t *first_blocks_of(hc_shm_engine_t *eng, uint32_t i)
{
    return hc_shm_slot(eng, i, eng->step) + counts_room(eng);
}

/* Bytes of the count exchange's step beside the counts, for the first pieces. */
static size_t first_room(const hc_shm_engine_t *eng)
{
    size_t room = eng->slot_bytes - counts_room(eng);

    return eng->pipe_bytes < room ? eng->pipe_bytes : room;
}

/* Elements of every block in the count exchange's step: what fits beside the counts. Two 64-bit
 * divisions: asked only where the pieces are staged or read. */
static uint64_t first_piece(const hc_shm_engine_t *eng, size_t esize)
{
    return first_room(eng) / esize / eng->nlocal;
}

/* Whether this engine runs AlltoAllV: the counts, and at least an element of every block, fit in a
 * slot. */
static int v_fits(const hc_shm_engine_t *eng, size_t esize)
{
    return eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK && counts_room(eng) < eng->slot_bytes &&
           first_room(eng) >= esize * eng->nlocal;
}

/*
 * The tiny record of AlltoAllV's first step, in its hot line's data: a mark, this rank's send and
 * receive counts of every rank (a byte each), then the blocks it sends the others, in rank order,
 * packed. A rank writes it when all of that fits in HC_SHM_INLINE_BYTES, else the mark 0 (its slot
 * holds its counts either way, its first pieces only without a record), so every rank sees from the
 * hot lines it waits on whether every rank wrote one: then the op is those lines alone, and every
 * rank checks the whole count matrix from them as check_matrix does from the slots.
 */
#define V_TINY_MARK 0x5a
#define V_TINY_RANKS 8
#define V_TINY_HEAD(n) (1 + 2 * (size_t)(n))

/* Bytes of this rank's record, or 0 when it does not fit. */
static size_t v_tiny_bytes(const hc_shm_engine_t *eng, const hc_op_t *op, size_t esize)
{
    uint32_t n = eng->nlocal;
    size_t bytes = V_TINY_HEAD(n);

    if (n > V_TINY_RANKS)
        return 0;
    for (uint32_t j = 0; j < n; j++) {
        if (op->counts[j] > UINT8_MAX || op->recv_counts[j] > UINT8_MAX)
            return 0;
        bytes += j != eng->me ? op->counts[j] * esize : 0;
    }
    return bytes <= HC_SHM_INLINE_BYTES ? bytes : 0;
}

/* Write the record (or the mark 0: `fits` is 0) on this rank's hot line of the step begun. */
static void stage_v_tiny(hc_shm_engine_t *eng, const hc_op_t *op, size_t esize, int fits)
{
    uint8_t *line = hc_shm_ctrl(eng, eng->me)->hot[eng->step & 1].data, *at;
    uint32_t n = eng->nlocal;

    if (!fits) {
        line[0] = 0;
        return;
    }
    line[0] = V_TINY_MARK;
    at = line + V_TINY_HEAD(n);
    for (uint32_t j = 0; j < n; j++) {
        size_t block = op->counts[j] * esize;
        line[1 + j] = (uint8_t)op->counts[j];
        line[1 + n + j] = (uint8_t)op->recv_counts[j];
        if (j != eng->me) {
            memcpy(at, (const uint8_t *)op->sendbuf + op->displs[j] * esize, block);
            at += block;
        }
    }
}

/* Whether local rank i wrote its record in this step (read once its flag is seen). */
static int v_tiny_of(hc_shm_engine_t *eng, uint32_t i)
{
    return hc_shm_tiny_line(eng, i)[0] == V_TINY_MARK;
}

static int v_tiny_all(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (!v_tiny_of(eng, i))
            return 0;
    return 1;
}

/* This rank's block from local rank i's record. */
static void copy_v_tiny_block(hc_shm_engine_t *eng, const hc_op_t *op, size_t esize, uint32_t i)
{
    const uint8_t *line = hc_shm_tiny_line(eng, i), *block = line + V_TINY_HEAD(eng->nlocal);

    for (uint32_t j = 0; j < eng->me; j++)
        block += j != i ? (size_t)line[1 + j] * esize : 0;
    memcpy((uint8_t *)op->recvbuf + op->recv_displs[i] * esize, block, op->recv_counts[i] * esize);
}

/* With every rank's record: check the whole count matrix from them, as check_matrix does from the
 * slots. */
static HcclResult check_v_tiny(hc_shm_engine_t *eng, const hc_op_t *op)
{
    uint32_t n = eng->nlocal;

    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *sends = hc_shm_tiny_line(eng, i) + 1;
        for (uint32_t j = 0; j < n; j++) {
            uint8_t expects = hc_shm_tiny_line(eng, j)[1 + n + i];
            if (sends[j] != expects) {
                HC_ERROR("alltoallv #%llu mismatch: rank %u sends %u elements to rank %u, rank %u expects %u "
                         "from rank %u",
                         hc_op_number(op), i, sends[j], j, j, expects, i);
                return HCCL_E_PARA;
            }
        }
    }
    return HCCL_SUCCESS;
}

/* Whether peers could read this rank's send buffer in place in this op: its own send total reaches
 * the size where sources are described (so the op's size, the largest rank's send total, does) and
 * its buffer is of a kind that can be read in place. Published with its counts: an op in which no
 * rank says so takes no describing step (a rank below that size that could be read in place is then
 * staged, as the op's smaller part). */
static int v_may_read_in_place(hc_shm_engine_t *eng, const hc_op_t *op, size_t esize)
{
    uint64_t total = 0;

    for (uint32_t j = 0; j < eng->nlocal; j++)
        total += op->counts[j];
    return describe_size(eng, HC_COLL_ALLTOALLV, total * esize) &&
           hc_shm_zc_may_read_in_place(eng, op, send_extent(op->counts, op->displs, eng->nlocal) * esize);
}

/* Did any rank say, with its counts, that its buffer could be read in place? */
static int v_any_may_read_in_place(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (counts_of(eng, i)[V_WORDS * eng->nlocal] != 0)
            return 1;
    return 0;
}

/* AlltoAllV's first step, as this rank stages it (at launch or in the run): its counts at the start
 * of the slot, the first piece of every block it sends at the start (none when the op will read its
 * sources in place anyway, or when its record holds them). Needs nothing of the peers. */
static void stage_v_first(hc_shm_engine_t *eng, const hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint32_t n = eng->nlocal;
    int tiny = v_tiny_bytes(eng, op, esize) > 0, may = !tiny && v_may_read_in_place(eng, op, esize);
    /* With no skipped attempts pending, decide_describe can only say yes: the pieces would go unused. */
    int stage = !tiny && !(may && hc_shm_zc_skips_none(eng, HC_COLL_ALLTOALLV));
    uint64_t *counts;

    /* The slots are not warmed here (hc_shm_warm_slots): that faults in every rank's whole staging
     * in both parities, where a rank reads only its own block of each peer's. 4 ranks on 2 CPUs,
     * the first five 1 MiB calls took 9.9-11.7 ms each with it, 6.9-7.6 without. */
    hc_shm_step_begin(eng, op);
    counts = counts_of(eng, eng->me);
    for (uint32_t j = 0; j < n; j++) { /* n words each: a loop, not three calls of memcpy */
        counts[j] = op->counts[j];
        counts[n + j] = op->recv_counts[j];
        counts[2 * n + j] = op->displs[j];
    }
    counts[V_WORDS * n] = (uint64_t)may;
    if (stage) {
        uint64_t piece = first_piece(eng, esize);
        stage_pieces(eng, op, op->counts, op->displs, 0, piece, piece, first_blocks_of(eng, eng->me));
    }
    stage_v_tiny(eng, op, esize, tiny);
    hc_shm_step_publish(eng);
}

/* Once every peer's first step is seen: ask for the lines it staged besides its flag, its counts
 * and the first piece it sends this rank, all at once. The check reads the counts and only then the
 * copy the piece, so each waited for a cross-core transfer of its own; the piece's place does not
 * depend on the counts. */
static void prefetch_v_first(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t piece)
{
    size_t esize = hc_dtype_size(op->dtype);

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const uint8_t *counts;
        if (i == eng->me)
            continue;
        counts = (const uint8_t *)counts_of(eng, i);
        for (uintptr_t at = (uintptr_t)counts & ~(uintptr_t)63; at < (uintptr_t)counts + counts_bytes(eng); at += 64)
            __builtin_prefetch((const void *)at);
        if (op->recv_counts[i] > 0)
            __builtin_prefetch(first_blocks_of(eng, i) + (size_t)eng->me * piece * esize);
    }
}

/* The first step's pieces: from the record of a rank that wrote one (its whole blocks; it staged
 * none in its slot), else from the rank's slot. */
static void collect_v_first(hc_shm_engine_t *eng, const hc_op_t *op, const plan_t *plan, uint64_t piece)
{
    size_t esize = hc_dtype_size(op->dtype);

    for (uint32_t k = 1; k < eng->nlocal; k++) {
        uint32_t i = (eng->me + k) % eng->nlocal; /* as collect_pieces */
        if (v_tiny_of(eng, i))
            copy_v_tiny_block(eng, op, esize, i);
        else
            hc_copy((uint8_t *)op->recvbuf + plan->recv_displ[i] * esize,
                        first_blocks_of(eng, i) + (size_t)eng->me * piece * esize,
                        hc_shm_part(plan->recv_count[i], 0, piece) * esize);
    }
}

/* Check that rank i sends to j what j expects from i, for the whole matrix gathered in the slots;
 * note the largest count, the largest send total and where this rank's block is in each sender. */
static HcclResult check_matrix(hc_shm_engine_t *eng, const hc_op_t *op, plan_t *plan)
{
    uint32_t n = eng->nlocal;
    uint64_t row_max = 0;

    plan->largest = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint64_t *sends = counts_of(eng, i);
        uint64_t row = 0;
        for (uint32_t j = 0; j < n; j++) {
            const uint64_t *recvs = counts_of(eng, j) + n;
            if (sends[j] != recvs[i]) {
                HC_ERROR("alltoallv #%llu mismatch: rank %u sends %llu elements to rank %u, rank %u expects %llu "
                         "from rank %u",
                         hc_op_number(op), i, (unsigned long long)sends[j], j, j,
                         (unsigned long long)recvs[i], i);
                return HCCL_E_PARA;
            }
            plan->largest = sends[j] > plan->largest ? sends[j] : plan->largest;
            row += sends[j];
        }
        plan->peer_displ[i] = sends[2 * n + eng->me];
        row_max = row > row_max ? row : row_max;
    }
    plan->op_bytes = row_max * hc_dtype_size(op->dtype);
    return HCCL_SUCCESS;
}

HcclResult hc_shm_alltoallv(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    uint32_t n = eng->nlocal;
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece;
    plan_t plan; /* plan_alloc initialises it */
    HcclResult res = HCCL_SUCCESS;
    int tiny;

    if (!v_fits(eng, esize))
        return HCCL_E_NOT_SUPPORT;
    HC_CHECK(plan_alloc(&plan, n, 0)); /* check_matrix writes peer_displ, the only array of its own */
    plan.send_count = op->counts; /* the op's own arrays, which the plan only reads */
    plan.send_displ = op->displs;
    plan.recv_count = op->recv_counts;
    plan.recv_displ = op->recv_displs;
    if (!hc_shm_started(op, 0)) /* else staged at launch (hc_shm_start_alltoall) */
        stage_v_first(eng, op);
    copy_own(eng, op, &plan);
    res = hc_shm_step_wait_first(eng, op);
    tiny = res == HCCL_SUCCESS && v_tiny_all(eng); /* then the op is this step alone */
    piece = tiny ? 0 : first_piece(eng, esize);
    if (res == HCCL_SUCCESS && !tiny)
        prefetch_v_first(eng, op, piece);
    if (res == HCCL_SUCCESS)
        res = tiny ? check_v_tiny(eng, op) : check_matrix(eng, op, &plan);
    if (res == HCCL_SUCCESS)
        res = hc_shm_check_failed_peers(eng, op);
    if (res == HCCL_SUCCESS && !tiny && v_any_may_read_in_place(eng) &&
        decide_describe(eng, HC_COLL_ALLTOALLV, plan.op_bytes))
        piece = 0; /* read in place from the next step on: the pieces staged here go unused */
    else if (res == HCCL_SUCCESS)
        collect_v_first(eng, op, &plan, piece);
    hc_shm_step_end(eng);
    op->started = 0; /* what the launch started was this step: the steps after it are run_plan's own */
    if (res == HCCL_SUCCESS && !tiny && plan.largest > piece) {
        plan.send_elems = send_extent(plan.send_count, plan.send_displ, n);
        res = run_plan(eng, op, &plan, 0, piece);
    }
    plan_free(&plan);
    return res;
}

/* The first step of AlltoAll (when it stages) and AlltoAllV at launch (hc_shm_start). AlltoAllVC
 * checks its matrix first and starts nothing. */
int hc_shm_start_alltoall(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece, stride;

    if (op->sig.coll == HC_COLL_ALLTOALLV) {
        if (!v_fits(eng, esize)) /* hc_shm_alltoallv refuses it alike */
            return 0;
        stage_v_first(eng, op);
        return 1;
    }
    if (op->sig.coll == HC_COLL_ALLTOALL && hc_shm_tiny(eng, op)) {
        hc_shm_tiny_stage(eng, op);
        return 1;
    }
    if (op->sig.coll != HC_COLL_ALLTOALL || eng->nlocal > HC_SHM_MAX_RANKS_ON_STACK ||
        describes(eng, HC_COLL_ALLTOALL, op->count * eng->nlocal * esize)) /* alltoall_plan's op_bytes */
        return 0;
    piece = eng->pipe_bytes / esize / eng->nlocal;
    if (op->count >= piece) /* as run_plan does */
        hc_shm_warm_slots(eng, piece * esize * eng->nlocal);
    hc_shm_step_begin(eng, op);
    stride = stride_of(op->count, piece); /* run_plan's: largest is count */
    stage_pieces(eng, op, NULL, NULL, 0, piece, stride, blocks_of(eng, eng->me, stride, esize));
    hc_shm_step_publish(eng);
    return 1;
}
