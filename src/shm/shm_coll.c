/*
 * The reducing collectives of the intra-host engine (AllReduce, Reduce, ReduceScatter(V)) and the
 * barrier, on the copy-through protocol: in every step each rank stages a chunk (or one piece per
 * destination rank) in its slot, and every rank reads what it needs from all slots. Correct for
 * every size (chunked by the slot size), safe in place (inputs are staged in the slots before any
 * output is written) and deterministic (reductions combine the ranks' inputs in rank order, rounding
 * fp16/bf16 once). AllReduce picks its path by size, memory and cores (hc_shm_allreduce,
 * docs/performance.md): the short path, every rank reducing all of the data, reduce-scatter +
 * all-gather through the slots, the same with the gather written across (CMA), or zero copy.
 *
 * The engine only serves communicators whose ranks all share this host, so a rank's local index is
 * its rank.
 */
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_reduce.h"
#include "shm_internal.h"

/*
 * Ask for the first PREFETCH_MAX bytes of a peer's staged data before reading it. The lines were
 * just written by another core and each costs a cross-core transfer (one way ~0.15 us on the
 * reference VM); the hardware prefetcher keeps only a few in flight, so a kernel that walks them
 * waits for most. Requesting them all first overlaps the transfers: AllReduce 2 ranks, 8 KiB
 * 3.2-3.4 -> 2.6-3.0 us with untouched buffers, 3.2-3.4 -> 2.7-3.1 touched (6 alternating runs
 * each); 512 B-2 KiB and 16 KiB within noise. (The same before the copies of Broadcast and
 * AllGather, 2-32 KiB: no difference; memcpy's own access pattern already keeps them going.)
 * With more peers the budget is shared, so that the prefetched lines stay within L1.
 */
#define PREFETCH_MAX (16u * 1024u)

static void prefetch_peer(const void *data, size_t bytes)
{
    for (size_t b = 0; b < bytes && b < PREFETCH_MAX; b += 64)
        __builtin_prefetch((const uint8_t *)data + b, 0, 3);
}

/* How much of each peer's `bytes` to prefetch: PREFETCH_MAX shared among the peers. */
static size_t prefetch_share(const hc_shm_engine_t *eng, size_t bytes)
{
    size_t share = eng->nlocal > 2 ? PREFETCH_MAX / (eng->nlocal - 1) : PREFETCH_MAX;

    return bytes < share ? bytes : share;
}

/* Reduce `n` elements at byte offset `src_off` of what every rank staged (`staged` bytes, see
 * hc_shm_stage) into dst, in rank order; this rank's own part from `own` instead when not NULL. */
static void reduce_staged(hc_shm_engine_t *eng, const hc_op_t *op, size_t staged, size_t src_off, const void *own,
                          void *dst, uint64_t n)
{
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];
    size_t ahead = prefetch_share(eng, n * hc_dtype_size(op->dtype));

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        inputs[i] = i == eng->me && own != NULL ? own : hc_shm_stage(eng, i, staged) + src_off;
        if (i != eng->me)
            prefetch_peer(inputs[i], ahead);
    }
    hc_reduce_multi(op->dtype, op->redop, dst, inputs, eng->nlocal, n);
}

/*
 * Zero copy pays off above eng->zero_copy_min bytes of data per op (blocks x count,
 * HOSTCCL_ZERO_COPY_MIN): below it the extra synchronisation of the zero-copy paths costs more than
 * the copies it saves. An attempt that falls back (plain memory) has cost an exchange step and the
 * copy path's first step staged at launch, so the next attempts are skipped (hc_shm_zc_skipping).
 */
static uint64_t zero_copy_bytes(const hc_op_t *op, uint32_t blocks)
{
    return op->count * hc_dtype_size(op->dtype) * blocks;
}

static int zero_copy_size(const hc_shm_engine_t *eng, const hc_op_t *op, uint32_t blocks)
{
    return eng->nlocal > 1 && eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK &&
           zero_copy_bytes(op, blocks) >= eng->zero_copy_min;
}

static int zero_copy_worth(const hc_shm_engine_t *eng, const hc_op_t *op, uint32_t blocks)
{
    return zero_copy_size(eng, op, blocks) &&
           !hc_shm_zc_skipping(eng, (hc_coll_t)op->sig.coll, zero_copy_bytes(op, blocks));
}

/* Run the zero-copy path `zc` when it is worth it. HCCL_E_AGAIN: run the copy path instead;
 * *checked_p then says whether the zero-copy attempt already compared the signatures. */
static HcclResult try_zero_copy(hc_shm_engine_t *eng, hc_op_t *op, uint32_t blocks,
                                HcclResult (*zc)(hc_shm_engine_t *, hc_op_t *), int *checked_p)
{
    hc_coll_t coll = (hc_coll_t)op->sig.coll;
    HcclResult res;

    *checked_p = 0;
    if (!zero_copy_size(eng, op, blocks))
        return HCCL_E_AGAIN;
    if (!hc_shm_zc_try(eng, coll, zero_copy_bytes(op, blocks)))
        return HCCL_E_AGAIN;
    hc_assert(!op->started); /* hc_shm_start_reducing decided alike */
    res = zc(eng, op);
    *checked_p = res == HCCL_E_AGAIN;
    if (res == HCCL_E_AGAIN || res == HCCL_SUCCESS)
        hc_shm_zc_outcome(eng, coll, zero_copy_bytes(op, blocks), res == HCCL_E_AGAIN);
    return res;
}

static HcclResult check_ranks(const hc_shm_engine_t *eng)
{
    return eng->nlocal <= HC_SHM_MAX_RANKS_ON_STACK ? HCCL_SUCCESS : HCCL_E_NOT_SUPPORT;
}

/* A Reduce root's input, which nobody else reads: it reduces it where it lies instead of staging
 * it, unless the output overlaps it other than exactly (in place), which could overwrite input not
 * yet read. NULL: staged like everyone's. */
static const uint8_t *root_own_input(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    const uint8_t *send = op->sendbuf, *recv = op->recvbuf;
    size_t bytes = op->count * hc_dtype_size(op->dtype);

    if (op->sig.coll != HC_COLL_REDUCE || eng->me != op->root)
        return NULL;
    return recv == send || recv + bytes <= send || recv >= send + bytes ? send : NULL;
}

/* Begin a step of AllReduce or Reduce, stage the chunk [off, off + n) and publish it. */
static void stage_chunk(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t off, uint64_t n)
{
    size_t esize = hc_dtype_size(op->dtype);

    hc_shm_step_begin(eng, op);
    if (root_own_input(eng, op) == NULL)
        hc_shm_write(eng, op, hc_shm_stage(eng, eng->me, n * esize), (const uint8_t *)op->sendbuf + off * esize,
                     n * esize);
    hc_shm_step_publish(eng);
}

/* AllReduce and Reduce: stage a chunk, reduce every rank's chunk (Reduce: on the root only).
 * `checked`: the op's signatures were already compared in an earlier step. The first chunk may
 * have been staged at launch (hc_shm_start). */
static HcclResult reduce_to(hc_shm_engine_t *eng, hc_op_t *op, int everyone, int checked)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t chunk = hc_dtype_elems(eng->pipe_bytes, op->dtype);
    const uint8_t *own = root_own_input(eng, op);

    HC_CHECK(check_ranks(eng));
    hc_shm_warm_slots(eng, op->count * esize);
    for (uint64_t off = 0; off < op->count; off += chunk) {
        uint64_t n = hc_shm_part(op->count, off, chunk);
        if (!hc_shm_started(op, off))
            stage_chunk(eng, op, off, n);
        HC_CHECK(hc_shm_step_wait_all(eng, op, off == 0 && !checked));
        if (everyone || eng->me == op->root)
            reduce_staged(eng, op, n * esize, 0, own != NULL ? own + off * esize : NULL,
                          (uint8_t *)op->recvbuf + off * esize, n);
        hc_shm_step_end(eng);
    }
    return HCCL_SUCCESS;
}

/*
 * From these sizes AllReduce copy-through runs as reduce-scatter + all-gather in one pipeline
 * (allreduce_slices) instead of every rank reducing all of the data (reduce_to). Measured with
 * plain malloc buffers, untouched and touched alike: 2 ranks with a core each, fp32 128 KiB 16-17 ->
 * 12.5-14 us, 1 MiB 116-124 -> 81-89, 4 MiB 486-511 -> 313-351, 64 MiB 1.15-1.2x; at 64-96 KiB
 * even, below slower (its extra step). fp16 and bf16, whose every element is widened and narrowed,
 * gain from 16 KiB (bf16 32 KiB 5.6-5.7 us against 6.8-6.9 for the one-chunk split it replaced,
 * touched 5.9-6.3 against 7.2-8.7). Where ranks share cores each step
 * costs a sleep, and the saving grows with the ranks (reduce_to reads n^2 inputs in all): 4 ranks
 * on 2 CPUs even at 384 KiB, 1.5x at 512 KiB, 1.7-1.9x at 4 MiB; 8 ranks 1.3x from 128 KiB, 2-2.7x
 * at 1-4 MiB, slower at 64 KiB. Hence 8 MiB / n^2 there.
 */
#define SLICES_MIN_OWN_CORES (128u * 1024u)
#define SLICES_MIN_OWN_CORES_HALF (16u * 1024u) /* fp16, bf16 */
#define SLICES_MIN_SHARED_CORES_N2 (8u * 1024u * 1024u)

static int slices_worth(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t own = esize == 2 ? SLICES_MIN_OWN_CORES_HALF : SLICES_MIN_OWN_CORES;
    uint64_t least = eng->own_cores ? own : SLICES_MIN_SHARED_CORES_N2 / eng->nlocal / eng->nlocal;

    return eng->nlocal > 1 && op->count * esize >= least;
}

/*
 * AllReduce's copy-through has every rank reduce all n slots (n x N bytes read per rank, n^2 N in
 * all on cores the ranks share) where zero copy reads about 2N per rank, so its threshold falls
 * with n: HOSTCCL_ZERO_COPY_MIN (measured on 2 ranks) divided by n^2/8 from 3 ranks on (4 ranks:
 * half, 8 ranks: an eighth). Measured on 8 ranks: touched 512 KiB 2463-2899 us copy-through against
 * 1646-1654 us zero copy; untouched (23:49, load ~3) 64 KiB 120-154 / 132-135 us, 128 KiB 205-222 /
 * 154-187 us.
 */
static uint32_t allreduce_blocks(const hc_shm_engine_t *eng)
{
    uint32_t scale = eng->nlocal * eng->nlocal / 8;

    return scale > 1 ? scale : 1;
}

/* Where every rank's output is, as described in the current step. */
static void peer_outputs(hc_shm_engine_t *eng, uint64_t *addr, int64_t *off)
{
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[eng->step & 1];
        addr[i] = d->recv_addr;
        off[i] = d->recv_off;
    }
}

/*
 * AllReduce on plain memory where CMA is fast (hc_shm_cma_allreduce): reduce-scatter through the
 * slots, all-gather pushed with process_vm_writev. Rank r owns slice r of the data (hc_shm_slice);
 * in step k every rank stages piece k of every other rank's slice of its input, then reduces
 * piece k of its own slice, its own input read where it lies and the others' from their slots (in
 * rank order: the same bits as the other paths), and writes the result into every peer's output
 * at once, while it is in its cache. A closing step keeps every rank from returning before the
 * others have written its output. Per rank: (n-1)/n of the data staged, 1/n reduced, (n-1)/n
 * written to the peers, against all of it staged and reduced on the copy-through path.
 *
 * In place is safe: a rank writes piece k of slice r into a peer's buffer only after that peer
 * published step k, so after it staged its own input there; and it reads only its own slice of
 * its input, which no peer writes.
 *
 * `described`: a zero-copy attempt has just published every rank's buffers (and checked the
 * signatures) in the current step; else the first step publishes them. The first step may have
 * been staged at launch (hc_shm_start): then the peers of a rank that sleeps after enqueueing
 * reduce their slices and write them into its output without waiting for its worker to wake.
 */
static uint64_t cma_piece(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    return eng->pipe_bytes / hc_dtype_size(op->dtype) / eng->nlocal;
}

/* The distance between the ranks' pieces in a slot, in elements: a whole piece, or the largest
 * slice when every slice is smaller (one step), so that the pieces lie together in the part of the
 * slots the first step faults in. Spread a piece apart, the pages between were faulted in during
 * the ops instead, one by one (PVM guest, 4 ranks on 2 CPUs, 2 MiB: 753-920 us a call over 20
 * calls, 606-685 before this path). */
static uint64_t slices_stride(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    uint64_t lo, hi, piece = cma_piece(eng, op);

    hc_shm_slice(op->count, hc_dtype_size(op->dtype), eng->nlocal, 0, &lo, &hi); /* the largest slice */
    return hi - lo < piece ? hi - lo : piece;
}

/* Stage piece `off` of every other rank's slice of this rank's input, at that rank's index in the
 * slot (its own index stays free). The op's first step faults the slots in (their first use). */
static void stage_slices(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t off)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = cma_piece(eng, op), stride = slices_stride(eng, op);
    uint8_t *slot = hc_shm_slot(eng, eng->me, eng->step);

    if (off == 0)
        hc_shm_warm_slots(eng, stride * esize * eng->nlocal);
    for (uint32_t j = 0; j < eng->nlocal; j++) {
        uint64_t lo, hi;
        if (j == eng->me)
            continue;
        hc_shm_slice(op->count, esize, eng->nlocal, j, &lo, &hi);
        hc_shm_write(eng, op, slot + (size_t)j * stride * esize, (const uint8_t *)op->sendbuf + (lo + off) * esize,
                     hc_shm_part(hi - lo, off, piece) * esize);
    }
}

/* Begin the step at element offset `off` of every slice, stage this rank's input for the others'
 * slices and publish it; `describe`: the step also describes the buffers (unless a zero-copy
 * attempt just did). */
static void slices_step(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t off, int describe)
{
    size_t esize = hc_dtype_size(op->dtype);

    hc_shm_step_begin(eng, op);
    if (describe)
        hc_shm_zc_describe(eng, op, 0, op->count * esize, op->count * esize, UINT64_MAX);
    stage_slices(eng, op, off);
    hc_shm_step_publish(eng);
}

static HcclResult allreduce_cma(hc_shm_engine_t *eng, hc_op_t *op, int described)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = cma_piece(eng, op), stride = slices_stride(eng, op);
    uint64_t lo[HC_SHM_MAX_RANKS_ON_STACK], hi[HC_SHM_MAX_RANKS_ON_STACK], peer_addr[HC_SHM_MAX_RANKS_ON_STACK];
    int64_t peer_off[HC_SHM_MAX_RANKS_ON_STACK];
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];
    const uint8_t *send = op->sendbuf;
    uint8_t *recv = op->recvbuf;
    uint64_t largest;
    HcclResult res = HCCL_SUCCESS;

    HC_CHECK(check_ranks(eng));
    hc_assert(!(op->started && described)); /* started: no zero-copy attempt (hc_shm_start_reducing) */
    hc_shm_slice(op->count, esize, eng->nlocal, 0, &lo[0], &hi[0]); /* the largest slice */
    for (uint32_t i = 1; i < eng->nlocal; i++)
        hc_shm_slice(op->count, esize, eng->nlocal, i, &lo[i], &hi[i]);
    largest = hi[0] - lo[0];
    if (described)
        peer_outputs(eng, peer_addr, peer_off);
    for (uint64_t off = 0; off == 0 || off < largest; off += piece) {
        uint64_t n = hc_shm_part(hi[eng->me] - lo[eng->me], off, piece);
        int first = off == 0 && !described;
        if (!hc_shm_started(op, off))
            slices_step(eng, op, off, first);
        HC_CHECK(hc_shm_step_wait_all(eng, op, first));
        if (first)
            peer_outputs(eng, peer_addr, peer_off);
        for (uint32_t i = 0; i < eng->nlocal; i++) {
            inputs[i] = i == eng->me ? send + (lo[i] + off) * esize
                                     : hc_shm_slot(eng, i, eng->step) + (size_t)eng->me * stride * esize;
            if (i != eng->me)
                prefetch_peer(inputs[i], prefetch_share(eng, n * esize));
        }
        if (n > 0)
            hc_reduce_multi(op->dtype, op->redop, recv + (lo[eng->me] + off) * esize, inputs, eng->nlocal, n);
        for (uint32_t k = 1; k < eng->nlocal && n > 0 && res == HCCL_SUCCESS; k++) {
            uint32_t j = (eng->me + k) % eng->nlocal; /* start at different peers: spread the writes */
            uint64_t at = (lo[eng->me] + off) * esize;
            res = hc_shm_copy_to_peer(eng, op, j, peer_addr[j] + at, peer_off[j] < 0 ? -1 : peer_off[j] + (int64_t)at,
                                      recv + at, n * esize);
        }
        hc_shm_step_end(eng);
        HC_CHECK(res);
    }
    return hc_shm_zc_close(eng, op);
}

/*
 * AllReduce copy-through as a reduce-scatter and an all-gather in one pipeline, through the slots
 * (plain memory where CMA does not pay; arena memory below the zero-copy threshold). Rank r owns
 * slice r of the data (hc_shm_slice), as on the CMA path. Step k stages piece k of every other
 * rank's slice of this rank's input (stage_slices) and, at this rank's own index in the slot, its
 * reduced piece k - 1; after the wait each rank copies the others' reduced pieces k - 1 into its
 * output and reduces piece k of its own slice, its own input read where it lies and the others'
 * from their slots, in rank order (the same bits as every other path). One step more than there
 * are pieces. Per rank: (n-1)/n of the data staged, 1/n reduced, 1/n staged again and (n-1)/n
 * copied out, where reduce_to stages all of it and reduces all of it from n inputs.
 *
 * In place is safe: a rank overwrites piece k of another rank's slice in its buffer in step k + 1,
 * after it staged that piece of its input in step k; its own slice is read and written by the same
 * reduction, element by element, and nobody else reads it.
 */
static HcclResult allreduce_slices(hc_shm_engine_t *eng, hc_op_t *op, int checked)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = cma_piece(eng, op), stride = slices_stride(eng, op);
    uint64_t lo[HC_SHM_MAX_RANKS_ON_STACK], hi[HC_SHM_MAX_RANKS_ON_STACK];
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];
    const uint8_t *send = op->sendbuf;
    uint8_t *recv = op->recvbuf;
    uint32_t me = eng->me;

    HC_CHECK(check_ranks(eng));
    for (uint32_t i = 0; i < eng->nlocal; i++)
        hc_shm_slice(op->count, esize, eng->nlocal, i, &lo[i], &hi[i]);
    for (uint64_t off = 0;; off += piece) {
        int reduces = off < hi[0] - lo[0]; /* slice 0 is the largest: the steps it takes, and one */
        uint64_t prev = off - piece, n = hc_shm_part(hi[me] - lo[me], off, piece);
        if (!hc_shm_started(op, off)) {
            hc_shm_step_begin(eng, op);
            if (reduces)
                stage_slices(eng, op, off);
            if (off > 0)
                hc_shm_write(eng, op, hc_shm_slot(eng, me, eng->step) + (size_t)me * stride * esize,
                             recv + (lo[me] + prev) * esize, hc_shm_part(hi[me] - lo[me], prev, piece) * esize);
            hc_shm_step_publish(eng);
        }
        HC_CHECK(hc_shm_step_wait_all(eng, op, off == 0 && !checked));
        for (uint32_t k = 1; k < eng->nlocal && off > 0; k++) {
            uint32_t i = (me + k) % eng->nlocal; /* start at different peers: spread the reads */
            hc_copy(recv + (lo[i] + prev) * esize, hc_shm_slot(eng, i, eng->step) + (size_t)i * stride * esize,
                        hc_shm_part(hi[i] - lo[i], prev, piece) * esize);
        }
        if (n > 0) {
            for (uint32_t i = 0; i < eng->nlocal; i++) {
                inputs[i] = i == me ? send + (lo[i] + off) * esize
                                    : hc_shm_slot(eng, i, eng->step) + (size_t)me * stride * esize;
                if (i != me)
                    prefetch_peer(inputs[i], prefetch_share(eng, n * esize));
            }
            hc_reduce_multi(op->dtype, op->redop, recv + (lo[me] + off) * esize, inputs, eng->nlocal, n);
        }
        hc_shm_step_end(eng);
        if (!reduces)
            return HCCL_SUCCESS;
    }
}

/* AllReduce's short path (hc_shm_tiny): every rank's data on its hot line, reduced in rank order
 * (the same bits as the copy-through path's one step). */
static HcclResult tiny_allreduce(hc_shm_engine_t *eng, hc_op_t *op)
{
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];

    HC_CHECK(hc_shm_tiny_wait(eng, op));
    for (uint32_t i = 0; i < eng->nlocal; i++)
        inputs[i] = hc_shm_tiny_line(eng, i);
    hc_reduce_multi(op->dtype, op->redop, op->recvbuf, inputs, eng->nlocal, op->count);
    hc_shm_step_end(eng);
    return HCCL_SUCCESS;
}

HcclResult hc_shm_allreduce(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    int checked;
    HcclResult res;

    if (hc_shm_tiny(eng, op))
        return tiny_allreduce(eng, op);
    res = try_zero_copy(eng, op, allreduce_blocks(eng), hc_shm_zc_allreduce, &checked);

    if (res != HCCL_E_AGAIN)
        return res;
    if (hc_shm_cma_allreduce(eng, op->count * hc_dtype_size(op->dtype)))
        return allreduce_cma(eng, op, checked);
    return slices_worth(eng, op) ? allreduce_slices(eng, op, checked) : reduce_to(eng, op, 1, checked);
}

/*
 * The eager path of small rooted collectives (at most HC_SHM_EAGER_MAX, shm_announce.c): the
 * writers (the root of a Broadcast, every rank of a Reduce) put their data in their eager slot for
 * the collective (above HC_SHM_EAGER_BYTES: in a medium slot it names) and go on, up to
 * HC_SHM_EAGER_SLOTS collectives ahead (HC_SHM_MEDIUM_SLOTS of the larger ones); the readers wait
 * only for the slots they read. The readers compare the writers' signatures before reading, the
 * writers compare the others' later (hc_shm_check_writer), so a mismatch fails everywhere, on the
 * writers at their next op; every rank decides alike (hc_shm_eager_fits).
 *
 * Reduce: every rank stages its input in its slot (the root too: the output may be its input);
 * the root reduces the slots in rank order, as the stepped path does. */
static void eager_reduce_write(hc_shm_engine_t *eng, const hc_op_t *op, uint8_t *buf)
{
    hc_copy(buf, op->sendbuf, op->count * hc_dtype_size(op->dtype));
    if (eng->me != op->root)
        hc_shm_eager_publish(eng, op); /* the root's own slot is for itself */
}

static HcclResult eager_reduce(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t bytes = op->count * hc_dtype_size(op->dtype);
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];
    uint8_t *buf;

    hc_assert(!op->started || eng->me != op->root); /* only the others start (at launch) */
    if (!op->started) {
        HC_CHECK(hc_shm_eager_buffer(eng, op, bytes, &buf));
        eager_reduce_write(eng, op, buf);
    }
    if (eng->me != op->root) {
        hc_shm_eager_prefetch_next(eng, op, eng->me, bytes);
        return hc_shm_check_writer(eng, op);
    }
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me)
            hc_shm_eager_prefetch_data(eng, i, op, bytes, 0, bytes);
    HC_CHECK(hc_shm_eager_read(eng, op, HC_SHM_EAGER_ALL, bytes)); /* the root reads every rank's slot */
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        inputs[i] = hc_shm_eager_data(eng, i, op, bytes);
        if (i != eng->me)
            prefetch_peer(inputs[i], prefetch_share(eng, bytes));
    }
    hc_reduce_multi(op->dtype, op->redop, op->recvbuf, inputs, eng->nlocal, op->count);
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me)
            hc_shm_eager_prefetch_next(eng, op, i, bytes);
    return HCCL_SUCCESS;
}

/* A non-root's write of an eager Reduce at launch, if its slot is free now: the root, which waits for
 * every slot, then finds this one without waiting for the thread that runs the op here. */
static int eager_reduce_start(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t bytes = op->count * hc_dtype_size(op->dtype);
    uint8_t *buf;

    if (eng->me == op->root || (buf = hc_shm_eager_buffer_now(eng, op, bytes)) == NULL)
        return 0;
    eager_reduce_write(eng, op, buf);
    return 1;
}

HcclResult hc_shm_reduce(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    int checked;
    HcclResult res;

    if (hc_shm_eager_fits(eng, op))
        return eager_reduce(eng, op);
    res = try_zero_copy(eng, op, 1, hc_shm_zc_reduce, &checked);
    return res != HCCL_E_AGAIN ? res : reduce_to(eng, op, 0, checked);
}


HcclResult hc_shm_barrier(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);

    if (!hc_shm_started(op, 0)) {
        hc_shm_step_begin(eng, op);
        hc_shm_step_publish(eng);
    }
    HC_CHECK(hc_shm_step_wait_all(eng, op, 1));
    hc_shm_step_end(eng);
    return HCCL_SUCCESS;
}

/*
 * ReduceScatter and ReduceScatterV: the slot holds one piece per destination rank; every rank
 * stages piece j from its block j, then reduces piece `me` of every rank's slot into its output.
 */
static uint64_t rs_piece(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    return eng->pipe_bytes / hc_dtype_size(op->dtype) / eng->nlocal;
}

/* The largest block, which sets the step count; warms the slots when it takes whole steps. */
static uint64_t rs_prepare(hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts)
{
    uint64_t piece = rs_piece(eng, op), largest = 0;

    for (uint32_t i = 0; i < eng->nlocal; i++)
        largest = counts != NULL && counts[i] > largest ? counts[i] : largest;
    if (counts == NULL)
        largest = op->count;
    if (largest >= piece) /* whole steps: fault in all of them at once (hc_shm_warm_slots) */
        hc_shm_warm_slots(eng, piece * hc_dtype_size(op->dtype) * eng->nlocal);
    return largest;
}

/* This rank's own block of the input, which it reduces where it lies instead of staging it, or NULL
 * when the output overlaps the input anywhere else than exactly there (the in-place convention):
 * the output's writes could then reach input not yet read. */
static const uint8_t *rs_own_block(const hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts,
                                   const uint64_t *displs)
{
    size_t esize = hc_dtype_size(op->dtype);
    const uint8_t *send = op->sendbuf, *recv = op->recvbuf;
    uint64_t total = 0;
    const uint8_t *own = send + (displs != NULL ? displs[eng->me] : (uint64_t)eng->me * op->count) * esize;
    uint64_t mine = (counts != NULL ? counts[eng->me] : op->count) * esize;

    for (uint32_t j = 0; j < eng->nlocal; j++) {
        uint64_t start = displs != NULL ? displs[j] : (uint64_t)j * op->count;
        uint64_t end = start + (counts != NULL ? counts[j] : op->count);
        total = end > total ? end : total;
    }
    if (recv == own || recv + mine <= send || recv >= send + total * esize)
        return own;
    return NULL;
}

/* Begin a step of ReduceScatter, stage piece j of every block j from `off` (but this rank's own
 * when it is read in place: own_in_place, from rs_own_block) and publish. */
static void rs_stage(hc_shm_engine_t *eng, const hc_op_t *op, const uint64_t *counts, const uint64_t *displs,
                     uint64_t off, int own_in_place)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = rs_piece(eng, op);
    uint8_t *slot;

    hc_shm_step_begin(eng, op);
    slot = hc_shm_slot(eng, eng->me, eng->step);
    for (uint32_t j = 0; j < eng->nlocal; j++) {
        if (j == eng->me && own_in_place)
            continue;
        uint64_t count = counts != NULL ? counts[j] : op->count;
        uint64_t base = displs != NULL ? displs[j] : (uint64_t)j * op->count;
        hc_shm_write(eng, op, slot + (size_t)j * piece * esize, (const uint8_t *)op->sendbuf + (base + off) * esize,
                     hc_shm_part(count, off, piece) * esize);
    }
    hc_shm_step_publish(eng);
}

static HcclResult reduce_scatter(hc_shm_engine_t *eng, hc_op_t *op, const uint64_t *counts, const uint64_t *displs,
                                 int checked)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = rs_piece(eng, op), largest;
    const uint8_t *own = rs_own_block(eng, op, counts, displs);

    HC_CHECK(check_ranks(eng));
    largest = rs_prepare(eng, op, counts);
    for (uint64_t off = 0; off < largest; off += piece) {
        if (!hc_shm_started(op, off))
            rs_stage(eng, op, counts, displs, off, own != NULL);
        HC_CHECK(hc_shm_step_wait_all(eng, op, off == 0 && !checked));
        reduce_staged(eng, op, eng->slot_bytes, (size_t)eng->me * piece * esize,
                      own != NULL ? own + off * esize : NULL, (uint8_t *)op->recvbuf + off * esize,
                      hc_shm_part(counts != NULL ? counts[eng->me] : op->count, off, piece));
        hc_shm_step_end(eng);
    }
    return HCCL_SUCCESS;
}

/* ReduceScatter's short path (hc_shm_tiny): every rank's whole input on its hot line, this rank's
 * block reduced from them in rank order (the same bits as the copy-through path). */
static HcclResult tiny_reduce_scatter(hc_shm_engine_t *eng, hc_op_t *op)
{
    const void *inputs[HC_SHM_MAX_RANKS_ON_STACK];
    size_t at = (size_t)eng->me * op->count * hc_dtype_size(op->dtype);

    HC_CHECK(hc_shm_tiny_wait(eng, op));
    for (uint32_t i = 0; i < eng->nlocal; i++)
        inputs[i] = hc_shm_tiny_line(eng, i) + at;
    hc_reduce_multi(op->dtype, op->redop, op->recvbuf, inputs, eng->nlocal, op->count);
    hc_shm_step_end(eng);
    return HCCL_SUCCESS;
}

HcclResult hc_shm_reduce_scatter(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    int checked;
    HcclResult res;

    if (hc_shm_tiny(eng, op))
        return tiny_reduce_scatter(eng, op);
    res = try_zero_copy(eng, op, eng->nlocal, hc_shm_zc_reduce_scatter, &checked);
    return res != HCCL_E_AGAIN ? res : reduce_scatter(eng, op, NULL, NULL, checked);
}

HcclResult hc_shm_reduce_scatterv(hc_engine_t *engine, hc_op_t *op)
{
    return reduce_scatter(hc_shm_of(engine), op, op->counts, op->displs, 0);
}

/*
 * The start of the reducing collectives and the barrier at launch (hc_shm_start): their first
 * step, when the op will take a stepped path (copy-through, or AllReduce with CMA), which every
 * rank decides alike from the op's size.
 */
int hc_shm_start_reducing(hc_shm_engine_t *eng, hc_op_t *op)
{
    switch (op->sig.coll) {
    case HC_COLL_ALLREDUCE:
    case HC_COLL_REDUCE:
        if (op->sig.coll == HC_COLL_ALLREDUCE && hc_shm_tiny(eng, op)) {
            hc_shm_tiny_stage(eng, op);
            return 1;
        }
        if (op->sig.coll == HC_COLL_REDUCE && hc_shm_eager_fits(eng, op))
            return eager_reduce_start(eng, op);
        if (check_ranks(eng) != HCCL_SUCCESS ||
            (op->sig.coll == HC_COLL_ALLREDUCE ? zero_copy_worth(eng, op, allreduce_blocks(eng))
                                               : hc_shm_eager_fits(eng, op) || zero_copy_worth(eng, op, 1)))
            return 0;
        if (op->sig.coll == HC_COLL_ALLREDUCE && hc_shm_cma_allreduce(eng, op->count * hc_dtype_size(op->dtype))) {
            slices_step(eng, op, 0, 1);
            return 1;
        }
        if (op->sig.coll == HC_COLL_ALLREDUCE && slices_worth(eng, op)) {
            slices_step(eng, op, 0, 0);
            return 1;
        }
        hc_shm_warm_slots(eng, op->count * hc_dtype_size(op->dtype));
        stage_chunk(eng, op, 0, hc_shm_part(op->count, 0, hc_dtype_elems(eng->pipe_bytes, op->dtype)));
        return 1;
    case HC_COLL_REDUCE_SCATTER:
    case HC_COLL_REDUCE_SCATTERV:
        if (op->sig.coll == HC_COLL_REDUCE_SCATTER && hc_shm_tiny(eng, op)) {
            hc_shm_tiny_stage(eng, op);
            return 1;
        }
        if (check_ranks(eng) != HCCL_SUCCESS ||
            (op->sig.coll == HC_COLL_REDUCE_SCATTER && zero_copy_worth(eng, op, eng->nlocal)))
            return 0;
        rs_prepare(eng, op, op->counts);
        rs_stage(eng, op, op->counts, op->displs, 0, rs_own_block(eng, op, op->counts, op->displs) != NULL);
        return 1;
    case HC_COLL_BARRIER:
        hc_shm_step_begin(eng, op);
        hc_shm_step_publish(eng);
        return 1;
    default:
        return 0;
    }
}
