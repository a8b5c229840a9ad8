/*
 * The collectives of the intra-host engine that move data without reducing it: Broadcast, Scatter,
 * AllGather and AllGatherV. Each source's data reaches the readers one of three ways, which the
 * source decides in the op's first step and publishes with where its buffer is (hc_shm_zc_describe):
 *
 *   slots     the source stages its data in its slot, pipe_bytes per step, and the readers copy it
 *             out; the slots alternate by step parity, so the source stages step k+1 while the
 *             readers still copy step k (two copies, overlapped when every rank has a core)
 *   mapped    the readers copy straight from the source's buffer: aclrtMalloc memory (the peers
 *             map its arena) or ranks that are threads of one process; from the collective's
 *             in-place threshold (HOSTCCL_BCAST_IN_PLACE_MIN, HOSTCCL_ALLGATHER_IN_PLACE_MIN,
 *             HOSTCCL_ZERO_COPY_MIN for Scatter)
 *   CMA       the readers copy straight from the source's plain memory with process_vm_readv,
 *             when its pages make that pay (shm_cma.c)
 *
 * A source read in place stages nothing, and a closing step keeps it from returning (and the
 * program from writing its buffer) before its readers are done. Every rank decides alike: whether
 * the first step carries descriptions depends only on the op's size, and how each source is read
 * on what that source published.
 */
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "shm_internal.h"

/* Does the first step of an op of `bytes` describe the sources' buffers? (in_place_min: the
 * collective's threshold for mapped memory.) Every rank decides alike, from the size, and from the
 * outcome of the last ops of its size that described: where no source could be read but from its
 * slot (plain memory that CMA does not read, and no measured choice), the next ones are skipped
 * (hc_shm_zc_skipping), since describing keeps the first step from being staged at launch. At the
 * op's run (`run`) a skip is counted; at launch (hc_shm_start) it is only looked at. */
static int describe_sources(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t bytes, uint64_t in_place_min, int run)
{
    hc_coll_t coll = (hc_coll_t)op->sig.coll;

    if (eng->nlocal < 2 || eng->nlocal > HC_SHM_MAX_RANKS_ON_STACK || bytes < hc_shm_zc_gate(eng, coll, in_place_min))
        return 0;
    return run ? hc_shm_zc_try(eng, coll, bytes) : !hc_shm_zc_skipping(eng, coll, bytes);
}

/* ---- Broadcast and Scatter: one source, the root ---------------------------------------------- */

/*
 * The eager path (shm_announce.c, up to HC_SHM_EAGER_MAX bytes): the root writes and goes on. The
 * root writes at launch when its slot is free then (hc_shm_start: the op is started), so that the
 * readers of a blocking loop find the data without waiting for the thread that runs the op.
 */
static void eager_bcast_write(hc_shm_engine_t *eng, const hc_op_t *op, uint8_t *buf)
{
    hc_copy(buf, op->recvbuf, op->count * hc_dtype_size(op->dtype));
    hc_shm_eager_publish(eng, op);
}

static HcclResult eager_broadcast(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t bytes = op->count * hc_dtype_size(op->dtype);
    uint8_t *buf;

    if (eng->me == op->root) {
        if (!op->started) {
            HC_CHECK(hc_shm_eager_buffer(eng, op, bytes, &buf));
            eager_bcast_write(eng, op, buf);
        }
        hc_shm_eager_prefetch_next(eng, op, eng->me, bytes);
        return hc_shm_check_writer(eng, op);
    }
    hc_assert(!op->started); /* readers start nothing */
    hc_shm_eager_prefetch_data(eng, op->root, op, bytes, 0, bytes);
    HC_CHECK(hc_shm_eager_read(eng, op, op->root, bytes));
    hc_copy(op->recvbuf, hc_shm_eager_data(eng, op->root, op, bytes), bytes);
    hc_shm_eager_prefetch_next(eng, op, op->root, bytes);
    return HCCL_SUCCESS;
}

/* Scatter's eager path: the root writes the others' blocks into its eager buffer and goes on
 * (at launch when it can, as Broadcast's); each rank copies its block out when it gets there. */
static void eager_scatter_write(hc_shm_engine_t *eng, const hc_op_t *op, uint8_t *buf)
{
    size_t block = op->count * hc_dtype_size(op->dtype);
    const uint8_t *src = op->sendbuf;

    for (uint32_t j = 0; j < eng->nlocal; j++)
        if (j != eng->me)
            hc_copy(buf + hc_shm_eager_scatter_at(eng->me, j, block), src + j * block, block);
    hc_shm_eager_publish(eng, op);
    if (op->recvbuf != src + eng->me * block)
        memmove(op->recvbuf, src + eng->me * block, block); /* the program may overlap them */
}

static HcclResult eager_scatter(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t block = op->count * hc_dtype_size(op->dtype), bytes = hc_shm_eager_scatter_bytes(eng, block);
    size_t at = hc_shm_eager_scatter_at(op->root, eng->me, block);
    uint8_t *buf;

    if (eng->me == op->root) {
        if (!op->started) {
            HC_CHECK(hc_shm_eager_buffer(eng, op, bytes, &buf));
            eager_scatter_write(eng, op, buf);
        }
        hc_shm_eager_prefetch_next(eng, op, eng->me, bytes);
        return hc_shm_check_writer(eng, op);
    }
    hc_assert(!op->started); /* readers start nothing */
    hc_shm_eager_prefetch_data(eng, op->root, op, bytes, at, at + block);
    HC_CHECK(hc_shm_eager_read(eng, op, op->root, bytes));
    hc_copy(op->recvbuf, hc_shm_eager_data(eng, op->root, op, bytes) + at, block);
    hc_shm_eager_prefetch_next(eng, op, op->root, bytes);
    return HCCL_SUCCESS;
}

/* The root's write of an eager Broadcast or Scatter at launch, if its slot is free now. */
static int eager_start(hc_shm_engine_t *eng, hc_op_t *op, size_t bytes,
                       void (*write)(hc_shm_engine_t *, const hc_op_t *, uint8_t *))
{
    uint8_t *buf;

    if (eng->me != op->root || (buf = hc_shm_eager_buffer_now(eng, op, bytes)) == NULL)
        return 0;
    write(eng, op, buf);
    return 1;
}

/*
 * A rooted copy, stepped: Broadcast (every rank gets the root's whole buffer) and Scatter (rank j
 * gets block j). Per step the root stages `n` elements of every other destination's block (piece
 * elements apart in its slot) and each rank copies its own, the root from its send buffer. In the
 * first step the root may instead
 * publish that its buffer is to be read in place: then each rank reads its whole block from it
 * there and a closing step follows.
 */
typedef struct {
    const uint8_t *src;  /* the root's data: block j at src + j * block_bytes */
    uint8_t *dst;        /* this rank's block */
    uint64_t count;      /* elements per block */
    uint64_t block_bytes; /* Scatter: distance between blocks in src; Broadcast: 0 (one block for all) */
    uint64_t op_bytes;   /* the op's data, for the thresholds */
    uint64_t in_place_min;
    uint32_t blocks;     /* blocks staged per step: 1 (Broadcast) or nlocal (Scatter) */
} rooted_t;

/* This rank's block from the root's buffer in place, then the closing step. */
static HcclResult read_root_block(hc_shm_engine_t *eng, const hc_op_t *op, const rooted_t *r)
{
    size_t esize = hc_dtype_size(op->dtype);
    HcclResult res = HCCL_SUCCESS;

    if (eng->me != op->root)
        res = hc_shm_zc_read_source(eng, op, op->root, r->block_bytes * eng->me, r->dst, r->count * esize);
    else if (r->block_bytes != 0 && r->dst != r->src + r->block_bytes * eng->me)
        hc_copy(r->dst, r->src + r->block_bytes * eng->me, r->count * esize);
    hc_shm_step_end(eng);
    HC_CHECK(res);
    return hc_shm_zc_close(eng, op);
}

static void stage_root_blocks(hc_shm_engine_t *eng, const hc_op_t *op, const rooted_t *r, uint64_t off,
                              uint64_t piece)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint8_t *slot = hc_shm_slot(eng, eng->me, eng->step);

    for (uint32_t j = 0; j < r->blocks; j++)
        if (r->block_bytes == 0 || j != eng->me) /* Scatter: the root copies its own block directly */
            hc_shm_write(eng, op, slot + (size_t)j * piece * esize, r->src + j * r->block_bytes + off * esize,
                         hc_shm_part(r->count, off, piece) * esize);
}

/* This step's part of the root's own Scatter block, straight from its send buffer, after the
 * exchange: it overlaps the readers' copies instead of delaying the step (one copy, not two). */
static void copy_root_own(hc_shm_engine_t *eng, const hc_op_t *op, const rooted_t *r, uint64_t off, uint64_t piece)
{
    size_t esize = hc_dtype_size(op->dtype);
    const uint8_t *src = r->src + r->block_bytes * eng->me + off * esize;
    uint8_t *dst = r->dst + off * esize;

    if (dst != src)
        memmove(dst, src, hc_shm_part(r->count, off, piece) * esize); /* the program may overlap them */
}

static HcclResult rooted_copy(hc_shm_engine_t *eng, hc_op_t *op, const rooted_t *r)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = eng->pipe_bytes / r->blocks / esize;
    int describe = describe_sources(eng, op, r->op_bytes, r->in_place_min, 1), root = eng->me == op->root;
    hc_shm_source_t source = HC_SHM_SOURCE_SLOT;
    uint32_t mine = r->block_bytes != 0 ? eng->me : 0; /* Scatter: this rank's piece of each step */

    hc_assert(!op->started || !describe); /* start_rooted decided alike */
    hc_shm_warm_slots(eng, hc_shm_part(r->count, 0, piece) * esize * r->blocks);
    for (uint64_t off = 0; off < r->count; off += piece) {
        if (!hc_shm_started(op, off)) {
            hc_shm_step_begin(eng, op);
            if (off == 0 && describe && root) {
                hc_shm_zc_describe(eng, op, r->blocks * r->count * esize, 0, r->op_bytes, r->in_place_min);
                source = hc_shm_zc_source(eng, eng->me);
            }
            if (root && source == HC_SHM_SOURCE_SLOT)
                stage_root_blocks(eng, op, r, off, piece);
            hc_shm_step_publish(eng);
        }
        HC_CHECK(hc_shm_step_wait_all(eng, op, off == 0));
        if (off == 0 && describe) {
            source = hc_shm_zc_source(eng, op->root);
            hc_shm_zc_outcome(eng, (hc_coll_t)op->sig.coll, r->op_bytes, hc_shm_zc_slot_only(eng, op->root));
        }
        if (source != HC_SHM_SOURCE_SLOT)
            return read_root_block(eng, op, r);
        if (root && r->block_bytes != 0)
            copy_root_own(eng, op, r, off, piece);
        else if (!root)
            hc_copy(r->dst + off * esize, hc_shm_slot(eng, op->root, eng->step) + (size_t)mine * piece * esize,
                        hc_shm_part(r->count, off, piece) * esize);
        hc_shm_step_end(eng);
    }
    return HCCL_SUCCESS;
}

/* The first step of a rooted copy at launch (hc_shm_start): only when its root stages (describes
 * nothing). */
static int start_rooted(hc_shm_engine_t *eng, hc_op_t *op, const rooted_t *r)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = eng->pipe_bytes / r->blocks / esize;

    if (describe_sources(eng, op, r->op_bytes, r->in_place_min, 0))
        return 0;
    hc_shm_warm_slots(eng, hc_shm_part(r->count, 0, piece) * esize * r->blocks);
    hc_shm_step_begin(eng, op);
    if (eng->me == op->root)
        stage_root_blocks(eng, op, r, 0, piece);
    hc_shm_step_publish(eng);
    return 1;
}

static rooted_t broadcast_plan(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    return (rooted_t){.src = op->recvbuf, .dst = op->recvbuf, .count = op->count,
                      .op_bytes = op->count * hc_dtype_size(op->dtype), .in_place_min = eng->bcast_in_place_min,
                      .blocks = 1};
}

HcclResult hc_shm_broadcast(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    rooted_t r = broadcast_plan(eng, op);

    if (hc_shm_eager_fits(eng, op))
        return eager_broadcast(eng, op);
    return rooted_copy(eng, op, &r);
}

/* Scatter: rank j gets block j of the root's send buffer. The op's data is all nlocal blocks. */
static rooted_t scatter_plan(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);

    return (rooted_t){.src = op->sendbuf, .dst = op->recvbuf, .count = op->count, .block_bytes = op->count * esize,
                      .op_bytes = op->count * esize * eng->nlocal, .in_place_min = eng->zero_copy_min,
                      .blocks = eng->nlocal};
}

HcclResult hc_shm_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    rooted_t r = scatter_plan(eng, op);

    if (hc_shm_eager_scatter_fits(eng, op->count, hc_dtype_size(op->dtype)))
        return eager_scatter(eng, op);
    return rooted_copy(eng, op, &r);
}

/* ---- AllGather and AllGatherV: every rank a source ---------------------------------------------- */

/*
 * Every rank stages a chunk (eng->pipe_bytes) of its block; every rank copies each rank's chunk to
 * that rank's place in the output. counts/displs NULL: equal blocks of op->count. A block whose
 * source published that it is read in place is copied from there in the first step and never
 * staged; the step count is set by the largest block still staged, which every rank knows. A block
 * read in place is safe to return once a later step (or the closing one) has passed: its readers
 * published that step after reading.
 */
static uint64_t block_count(const hc_op_t *op, const uint64_t *counts, uint32_t i)
{
    return counts != NULL ? counts[i] : op->count;
}

/* Where block i starts in the output, in elements: AllGatherV's displacement, else rank order. */
static uint64_t block_displ(const hc_op_t *op, const uint64_t *displs, uint32_t i)
{
    return displs != NULL ? displs[i] : (uint64_t)i * op->count;
}

/* After the first step's wait: how each block is read, the same on every rank, and the outcome
 * for describing (hc_shm_zc_outcome; op_bytes: the op's data). Returns the largest block still
 * staged, which sets the step count; *in_place_p: some block is read in place. */
static uint64_t plan_sources(hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts, uint64_t op_bytes,
                             uint8_t *source, int *in_place_p)
{
    uint64_t largest = 0;
    int slot_only = 1;

    *in_place_p = 0;
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        uint64_t count = block_count(op, counts, i);
        source[i] = (uint8_t)hc_shm_zc_source(eng, i);
        *in_place_p |= source[i] != HC_SHM_SOURCE_SLOT && count > 0;
        slot_only &= count == 0 || hc_shm_zc_slot_only(eng, i);
        largest = source[i] == HC_SHM_SOURCE_SLOT && count > largest ? count : largest;
    }
    hc_shm_zc_outcome(eng, (hc_coll_t)op->sig.coll, op_bytes, slot_only);
    return largest;
}

/* Where rank i stages its block for this step: in its hot line when the largest block (which every
 * rank knows) fits there, else in its slot (hc_shm_stage). */
static uint8_t *gather_buf(hc_shm_engine_t *eng, uint32_t i, uint64_t largest, size_t esize)
{
    return hc_shm_stage(eng, i, largest * esize);
}

/* This step's part [off, off + chunk) of peer i's block into the output at element `base`: from
 * where i staged it (gather_buf), else the whole block from i's buffer, in the first step only. */
static HcclResult copy_block(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, uint64_t count, uint64_t base,
                             uint64_t off, uint64_t chunk, uint64_t largest, int staged)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint8_t *dst = (uint8_t *)op->recvbuf + (base + off) * esize;

    if (staged)
        hc_copy(dst, gather_buf(eng, i, largest, esize), hc_shm_part(count, off, chunk) * esize);
    else if (off == 0)
        return hc_shm_zc_read_source(eng, op, i, 0, dst, count * esize);
    return HCCL_SUCCESS;
}

/* This rank's own block into its place in the output, while the peers get to the step: when it is
 * staged, this step's part of it, which the staging has just brought into this rank's cache (a
 * separate pass over the whole block read it from memory a second time once it is larger than the
 * caches); else the whole block, in the first step. */
static void copy_own(const hc_op_t *op, uint64_t mine, uint64_t base, uint64_t off, uint64_t chunk, int staged)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint8_t *dst = (uint8_t *)op->recvbuf + (base + off) * esize;
    const uint8_t *src = (const uint8_t *)op->sendbuf + off * esize;

    if (dst == src || off >= mine || (!staged && off != 0)) /* in place, past its end, or done */
        return;
    hc_copy(dst, src, (staged ? hc_shm_part(mine, off, chunk) : mine) * esize);
}

/* The largest block and the op's data, in bytes; whether the first step describes the sources (at
 * the op's run, `run`, or at launch: describe_sources). Warms the slots for the first step. */
static int gather_prepare(hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts, int run,
                          uint64_t *largest_p, uint64_t *total_p)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t largest = 0, total = 0;

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        largest = block_count(op, counts, i) > largest ? block_count(op, counts, i) : largest;
        total += block_count(op, counts, i) * esize;
    }
    hc_shm_warm_slots(eng, hc_shm_part(largest, 0, eng->pipe_bytes / esize) * esize);
    *largest_p = largest;
    *total_p = total;
    return describe_sources(eng, op, total, eng->gather_in_place_min, run);
}

static void gather_stage(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t mine, uint64_t off, uint64_t largest)
{
    size_t esize = hc_dtype_size(op->dtype);

    hc_shm_write(eng, op, gather_buf(eng, eng->me, largest, esize), (const uint8_t *)op->sendbuf + off * esize,
                 hc_shm_part(mine, off, eng->pipe_bytes / esize) * esize);
}

static HcclResult gather_all(hc_shm_engine_t *eng, hc_op_t *op, const uint64_t *counts, const uint64_t *displs)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t chunk = eng->pipe_bytes / esize, largest, staged_largest, total, steps = 0;
    uint64_t mine = block_count(op, counts, eng->me);
    uint8_t source[HC_SHM_MAX_RANKS_ON_STACK] = {0};
    int describe = gather_prepare(eng, op, counts, 1, &largest, &total), in_place_reads = 0;

    hc_assert(!op->started || !describe); /* hc_shm_start_moving decided alike */
    staged_largest = largest; /* where the blocks are staged: decided before plan_sources */

    for (uint64_t off = 0; off < largest; off += chunk, steps++) {
        HcclResult res = HCCL_SUCCESS;
        if (!hc_shm_started(op, off)) {
            hc_shm_step_begin(eng, op);
            if (off == 0 && describe) {
                hc_shm_zc_describe(eng, op, mine * esize, 0, total, eng->gather_in_place_min);
                source[eng->me] = (uint8_t)hc_shm_zc_source(eng, eng->me);
            }
            if (source[eng->me] == HC_SHM_SOURCE_SLOT)
                gather_stage(eng, op, mine, off, staged_largest);
            hc_shm_step_publish(eng);
        }
        copy_own(op, mine, block_displ(op, displs, eng->me), off, chunk,
                 source[eng->me] == HC_SHM_SOURCE_SLOT);
        HC_CHECK(hc_shm_step_wait_all(eng, op, off == 0));
        if (off == 0 && describe)
            largest = plan_sources(eng, op, counts, total, source, &in_place_reads);
        for (uint32_t k = 1; k < eng->nlocal && res == HCCL_SUCCESS; k++) {
            uint32_t i = (eng->me + k) % eng->nlocal; /* start at different peers: spread the reads */
            uint64_t base = block_displ(op, displs, i);
            res = copy_block(eng, op, i, block_count(op, counts, i), base, off, chunk, staged_largest,
                             source[i] == HC_SHM_SOURCE_SLOT);
        }
        hc_shm_step_end(eng);
        HC_CHECK(res);
    }
    return in_place_reads && steps == 1 ? hc_shm_zc_close(eng, op) : HCCL_SUCCESS;
}

/* Whether AllGather(V) takes the short path: every block fits on a hot line. AllGather's blocks
 * are the op's count (hc_shm_tiny); AllGatherV's are its receive counts, which every rank has alike
 * (their digest is in the signature). */
static int gather_tiny(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);

    if (op->sig.coll == HC_COLL_ALLGATHER)
        return hc_shm_tiny(eng, op);
    if (eng->nlocal < 2 || eng->nlocal > HC_SHM_MAX_RANKS_ON_STACK)
        return 0;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (op->recv_counts[i] > HC_SHM_INLINE_BYTES / esize)
            return 0;
    return 1;
}

/* AllGather(V)'s short path: every block on its rank's hot line, one step (a blocking 8-byte
 * AllGatherV on 2 ranks: ~1800 instructions a call on the general path, ~1450 here). `counts` and
 * `displs`: AllGatherV's, NULL for AllGather's equal blocks in rank order. */
static HcclResult tiny_gather(hc_shm_engine_t *eng, hc_op_t *op, const uint64_t *counts, const uint64_t *displs)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint8_t *recv = op->recvbuf, *own = recv + block_displ(op, displs, eng->me) * esize;

    if (!op->started)
        hc_shm_tiny_stage(eng, op);
    if (own != op->sendbuf) /* not in place: the peers cannot see the output */
        memmove(own, op->sendbuf, op->count * esize);
    HC_CHECK(hc_shm_step_wait_all(eng, op, 1));
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me)
            memcpy(recv + block_displ(op, displs, i) * esize, hc_shm_tiny_line(eng, i),
                   block_count(op, counts, i) * esize);
    hc_shm_step_end(eng);
    return HCCL_SUCCESS;
}

HcclResult hc_shm_allgather(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);

    return gather_tiny(eng, op) ? tiny_gather(eng, op, NULL, NULL) : gather_all(eng, op, NULL, NULL);
}

HcclResult hc_shm_allgatherv(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);

    return gather_tiny(eng, op) ? tiny_gather(eng, op, op->recv_counts, op->recv_displs)
                                : gather_all(eng, op, op->recv_counts, op->recv_displs);
}

int hc_shm_start_moving(hc_shm_engine_t *eng, hc_op_t *op)
{
    uint64_t largest, total;
    rooted_t r;

    switch (op->sig.coll) {
    case HC_COLL_BROADCAST:
        if (hc_shm_eager_fits(eng, op))
            return eager_start(eng, op, op->count * hc_dtype_size(op->dtype), eager_bcast_write);
        r = broadcast_plan(eng, op);
        return start_rooted(eng, op, &r);
    case HC_COLL_SCATTER:
        if (hc_shm_eager_scatter_fits(eng, op->count, hc_dtype_size(op->dtype)))
            return eager_start(eng, op, hc_shm_eager_scatter_bytes(eng, op->count * hc_dtype_size(op->dtype)),
                               eager_scatter_write);
        r = scatter_plan(eng, op);
        return start_rooted(eng, op, &r);
    case HC_COLL_ALLGATHER:
    case HC_COLL_ALLGATHERV:
        if (gather_tiny(eng, op)) {
            hc_shm_tiny_stage(eng, op);
            return 1;
        }
        if (eng->nlocal > HC_SHM_MAX_RANKS_ON_STACK ||
            gather_prepare(eng, op, op->recv_counts, 0, &largest, &total) || largest == 0)
            return 0;
        hc_shm_step_begin(eng, op);
        gather_stage(eng, op, block_count(op, op->recv_counts, eng->me), 0, largest);
        hc_shm_step_publish(eng);
        return 1;
    default:
        return 0;
    }
}
