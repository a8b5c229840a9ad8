/*
 * Zero-copy AllReduce over the peers' own buffers (DESIGN.md 2 and 5): when every rank's buffers
 * are aclrtMalloc memory (or all ranks are threads of one process), each rank maps its peers' arenas
 * once and then reads their inputs where they lie, the way HCCS peers read device memory.
 *
 *   step 1  every rank publishes where its buffers are; signatures are checked;
 *           reduce-scatter: rank r reduces slice r of every rank's input into slice r of its own
 *           output (in rank order: deterministic), then all-gather, pushed: it copies that slice
 *           into slice r of every peer's output
 *   step 2  when every rank has published this step, every output is complete and nobody reads
 *           anyone's buffers any more: return
 *
 * Traffic per rank: N read + N/n written for the reduction, about N written for the gather,
 * against 2N copied plus nN read by the copy-through path. In place is safe: slice r of any rank's
 * buffer is read only by rank r, which reads all of them before it writes any (its own first, then
 * the peers'), and the kernels allow dst == src.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_reduce.h"
#include "rt_ext.h"
#include "shm_internal.h"

#define MAX_RANKS 256
#define PEER_MAP_FAILED ((uint8_t *)(void *)-1)

int64_t hc_shm_arena_offset(hc_shm_engine_t *eng, const void *buf, uint64_t bytes)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    uint64_t offset;
    int fd;

    if (buf == NULL || aclrtHostArenaLookup(buf, bytes, &fd, &offset) != ACL_SUCCESS)
        return -1;
    if (mine->arena_fd != fd) {
        struct stat st;
        if (fstat(fd, &st) != 0)
            return -1;
        mine->arena_bytes = (uint64_t)st.st_size;
        mine->arena_fd = fd;
    }
    return (int64_t)offset;
}

/* The size of the file behind fd, or 0 when it cannot be told. */
static uint64_t file_bytes(int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
}

/* Map local rank i's arena here (once); NULL when it cannot be mapped. The size mapped is the one
 * the peer published only if the file really has it: a larger one would map pages past the end of
 * the file, whose access is a SIGBUS. */
static uint8_t *peer_arena(hc_shm_engine_t *eng, uint32_t i)
{
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);
    uint64_t published = peer->arena_bytes;
    char path[64];
    int fd;

    if (eng->peer_arena[i] == PEER_MAP_FAILED)
        return NULL;
    if (eng->peer_arena[i] != NULL && eng->peer_arena_bytes[i] == published)
        return eng->peer_arena[i];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", eng->pids[i], peer->arena_fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0 && (published == 0 || file_bytes(fd) < published)) {
        HC_WARN("rank %u published an arena of %llu bytes, but %s is smaller: collectives with it fall back to "
                "copying", i, (unsigned long long)published, path);
        close(fd);
        eng->peer_arena[i] = PEER_MAP_FAILED;
        return NULL;
    }
    if (fd >= 0) {
        eng->peer_arena[i] = mmap(NULL, published, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
    }
    if (fd < 0 || eng->peer_arena[i] == MAP_FAILED) {
        HC_WARN("cannot map the arena of rank %u (%s): collectives with it fall back to copying", i, path);
        eng->peer_arena[i] = PEER_MAP_FAILED;
        return NULL;
    }
    eng->peer_arena_bytes[i] = published;
    return eng->peer_arena[i];
}

void hc_shm_zc_unmap(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; eng->peer_arena != NULL && i < eng->nlocal; i++)
        if (eng->peer_arena[i] != NULL && eng->peer_arena[i] != PEER_MAP_FAILED)
            munmap(eng->peer_arena[i], eng->peer_arena_bytes[i]);
}

/* Is [off, off + bytes) inside local rank i's arena as mapped here? The offset and length come from
 * the peer's control block: a range outside it would read or write this process's other memory. */
static int in_peer_arena(const hc_shm_engine_t *eng, uint32_t i, int64_t off, uint64_t bytes)
{
    return (uint64_t)off <= eng->peer_arena_bytes[i] && bytes <= eng->peer_arena_bytes[i] - (uint64_t)off;
}

uint8_t *hc_shm_peer_buffer(hc_shm_engine_t *eng, uint32_t i, uint64_t addr, int64_t off, uint64_t bytes)
{
    uint8_t *base;

    if (eng->pids[i] == eng->pids[eng->me])
        return (uint8_t *)(uintptr_t)addr;
    if (off < 0 || (base = peer_arena(eng, i)) == NULL || !in_peer_arena(eng, i, off, bytes))
        return NULL;
    return base + off;
}

int hc_shm_peer_range_bad(hc_shm_engine_t *eng, uint32_t i, int64_t off, uint64_t bytes)
{
    if (eng->pids[i] == eng->pids[eng->me] || off < 0 || peer_arena(eng, i) == NULL || in_peer_arena(eng, i, off, bytes))
        return 0;
    HC_ERROR("rank %u published a buffer of %llu bytes at offset %lld of its %llu-byte arena: out of range",
             hc_group_rank(&eng->base.group, i), (unsigned long long)bytes, (long long)off,
             (unsigned long long)eng->peer_arena_bytes[i]);
    return 1;
}

/* Why local rank i's send (or receive) buffer of `bytes`, described in `parity`, could not be had:
 * a range outside its arena (corrupted, HCCL_E_INTERNAL) or an arena that cannot be mapped. */
static HcclResult unreachable(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, unsigned parity, int send,
                              uint64_t bytes)
{
    const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];

    if (hc_shm_peer_range_bad(eng, i, send ? d->send_off : d->recv_off, bytes))
        return HCCL_E_INTERNAL;
    return hc_shm_unreachable(eng, op, i);
}

/* Are all local ranks threads of one process? Then they reach any memory of each other. */
static int one_process(const hc_shm_engine_t *eng)
{
    int same = 1;

    for (uint32_t i = 1; i < eng->nlocal; i++)
        same &= eng->pids[i] == eng->pids[0];
    return same;
}

/* Can every rank reach the buffers the others need of it? Decided from the published descriptors
 * alone, so every rank decides the same. */
static int all_reachable(hc_shm_engine_t *eng, unsigned parity, int need_send, int need_recv)
{
    if (one_process(eng))
        return 1;
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
        if ((need_send && d->send_off < 0) || (need_recv && d->recv_off < 0))
            return 0;
    }
    return 1;
}

static HcclResult reduce_my_slice(hc_shm_engine_t *eng, hc_op_t *op, unsigned parity)
{
    size_t esize = hc_dtype_size(op->dtype);
    const void *inputs[MAX_RANKS];
    uint64_t lo, hi;

    hc_shm_slice(op->count, esize, eng->nlocal, eng->me, &lo, &hi);
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
        uint8_t *send = hc_shm_peer_buffer(eng, i, d->send_addr, d->send_off, op->count * esize);
        if (send == NULL)
            return unreachable(eng, op, i, parity, 1, op->count * esize);
        inputs[i] = send + lo * esize;
    }
    if (hi > lo)
        hc_reduce_multi(op->dtype, op->redop, (uint8_t *)op->recvbuf + lo * esize, inputs, eng->nlocal, hi - lo);
    return HCCL_SUCCESS;
}

/* Write this rank's reduced slice into every peer's output (the all-gather, pushed). */
static HcclResult push_my_slice(hc_shm_engine_t *eng, hc_op_t *op, unsigned parity)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t lo, hi;

    hc_shm_slice(op->count, esize, eng->nlocal, eng->me, &lo, &hi);
    for (uint32_t k = 1; k < eng->nlocal && hi > lo; k++) {
        uint32_t j = (eng->me + k) % eng->nlocal; /* start at different peers: spread the writes */
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, j)->bufs[parity];
        uint8_t *recv = hc_shm_peer_buffer(eng, j, d->recv_addr, d->recv_off, op->count * esize);
        if (recv == NULL)
            return unreachable(eng, op, j, parity, 0, op->count * esize);
        hc_copy(recv + lo * esize, (const uint8_t *)op->recvbuf + lo * esize, (hi - lo) * esize);
    }
    return HCCL_SUCCESS;
}

/* One synchronisation step with no data: publish, wait for everyone, end. */
static HcclResult sync_step(hc_shm_engine_t *eng, const hc_op_t *op)
{
    HcclResult res;

    HC_CHECK(hc_shm_step_begin(eng, op));
    hc_shm_step_publish(eng);
    res = hc_shm_step_wait_all(eng, op, 0);
    hc_shm_step_end(eng);
    return res;
}

/* How peers are to read this rank's send buffer (send_bytes of it, op_bytes of op data, its arena
 * offset `off`): decided by this rank alone, published in its descriptor. */
static hc_shm_source_t send_read(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t send_bytes, int64_t off,
                                 uint64_t op_bytes, uint64_t in_place_min)
{
    if (send_bytes == 0)
        return HC_SHM_SOURCE_SLOT;
    if (off >= 0 || one_process(eng))
        return hc_shm_mapped_readable(eng, op, op_bytes, in_place_min) ? HC_SHM_SOURCE_MAPPED : HC_SHM_SOURCE_SLOT;
    return hc_shm_cma_readable(eng, op, op->sendbuf, send_bytes, op_bytes) ? HC_SHM_SOURCE_CMA
                                                                                              : HC_SHM_SOURCE_SLOT;
}

/*
 * The first step of every zero-copy op: publish where this rank's buffers are, wait for everyone,
 * check signatures and failed peers. On success the step stays open (the caller does its first
 * phase inside it and ends it); *reachable_p says whether the zero-copy path may go on (every
 * rank's buffers are mapped here: need_send, need_recv). On !*reachable_p the step is already ended
 * and the caller falls back to copying.
 */
static HcclResult open_exchange(hc_shm_engine_t *eng, hc_op_t *op, uint64_t send_bytes, uint64_t recv_bytes,
                                int need_send, int need_recv, int *reachable_p)
{
    hc_shm_buf_desc_t *mine;
    unsigned parity;
    HcclResult res;

    HC_CHECK(hc_shm_step_begin(eng, op));
    parity = eng->step & 1;
    mine = &hc_shm_ctrl(eng, eng->me)->bufs[parity];
    *mine = (hc_shm_buf_desc_t){.send_addr = (uintptr_t)op->sendbuf, .recv_addr = (uintptr_t)op->recvbuf,
                                .send_off = hc_shm_arena_offset(eng, op->sendbuf, send_bytes),
                                .recv_off = hc_shm_arena_offset(eng, op->recvbuf, recv_bytes),
                                .send_read = HC_SHM_SOURCE_SLOT};
    hc_shm_step_publish(eng);
    res = hc_shm_step_wait_all(eng, op, 1);
    *reachable_p = res == HCCL_SUCCESS && all_reachable(eng, parity, need_send, need_recv);
    if (res != HCCL_SUCCESS || !*reachable_p)
        hc_shm_step_end(eng);
    return res;
}

/* Peer i's send / receive buffer of `bytes` for the op whose descriptors are in `parity`. */
static uint8_t *peer_send(hc_shm_engine_t *eng, uint32_t i, unsigned parity, uint64_t bytes)
{
    const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
    return hc_shm_peer_buffer(eng, i, d->send_addr, d->send_off, bytes);
}

static uint8_t *peer_recv(hc_shm_engine_t *eng, uint32_t i, unsigned parity, uint64_t bytes)
{
    const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
    return hc_shm_peer_buffer(eng, i, d->recv_addr, d->recv_off, bytes);
}

/* End the open first step after its phase, then the closing step: nobody returns (and lets the
 * program touch its buffers) before every peer is done with them. */
static HcclResult close_exchange(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult phase)
{
    hc_shm_step_end(eng);
    HC_CHECK(phase);
    return sync_step(eng, op);
}

/*
 * Two synchronisations, not three: the all-gather is pushed (each rank writes its reduced slice
 * into every peer's output) instead of pulled, so when a rank has seen every peer's second flag its
 * output is complete and nobody reads any of its buffers any more: it may return at once. Each
 * synchronisation costs a scheduler wake-up when the cores are busy (measured under load 7: ~450 us
 * each, against 25 us of data movement for 1 MiB on 2 ranks).
 */
HcclResult hc_shm_zc_allreduce(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t bytes = op->count * hc_dtype_size(op->dtype);
    unsigned parity;
    int reachable;
    HcclResult res;

    HC_CHECK(open_exchange(eng, op, bytes, bytes, 1, 1, &reachable));
    if (!reachable)
        return HCCL_E_AGAIN; /* signatures were checked in this step */
    parity = eng->step & 1;
    res = reduce_my_slice(eng, op, parity);
    if (res == HCCL_SUCCESS)
        res = push_my_slice(eng, op, parity);
    return close_exchange(eng, op, res);
}

/*
 * Broadcast, Scatter, AllGather and AlltoAll read each source rank's block where it lies when they
 * can, else from the source's slot (shm_move.c, shm_alltoall.c): the source decides which before staging anything and
 * publishes it in its descriptor, and the readers follow what it published, so the first step
 * serves both and a source that cannot be read in place costs no extra step.
 */
void hc_shm_zc_describe(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t send_bytes, uint64_t recv_bytes,
                        uint64_t op_bytes, uint64_t in_place_min)
{
    hc_shm_buf_desc_t *mine = &hc_shm_ctrl(eng, eng->me)->bufs[eng->step & 1];
    int64_t send_off = send_bytes > 0 ? hc_shm_arena_offset(eng, op->sendbuf, send_bytes) : -1;

    *mine = (hc_shm_buf_desc_t){.send_addr = (uintptr_t)op->sendbuf, .recv_addr = (uintptr_t)op->recvbuf,
                                .send_off = send_off,
                                .recv_off = recv_bytes > 0 ? hc_shm_arena_offset(eng, op->recvbuf, recv_bytes) : -1,
                                .send_read = (uint32_t)send_read(eng, op, send_bytes, send_off, op_bytes,
                                                                 in_place_min)};
    mine->send_measured = eng->timing != NULL && eng->timing_seq == op->seq; /* the measured choice's op */
}

int hc_shm_zc_may_read_in_place(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t send_bytes)
{
    if (send_bytes == 0)
        return 0;
    return one_process(eng) || hc_shm_arena_offset(eng, op->sendbuf, send_bytes) >= 0 ||
           hc_shm_cma_may_read(eng, op, op->sendbuf, send_bytes);
}

hc_shm_source_t hc_shm_zc_source(hc_shm_engine_t *eng, uint32_t j)
{
    return (hc_shm_source_t)hc_shm_ctrl(eng, j)->bufs[eng->step & 1].send_read;
}

int hc_shm_zc_slot_only(hc_shm_engine_t *eng, uint32_t j)
{
    const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, j)->bufs[eng->step & 1];

    return d->send_read == HC_SHM_SOURCE_SLOT && !d->send_measured;
}

static uint8_t size_class(uint64_t op_bytes)
{
    return op_bytes == 0 ? 0 : (uint8_t)(63 - __builtin_clzll(op_bytes));
}

int hc_shm_zc_skipping(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes)
{
    return eng->zc_skip[coll] > 0 && eng->zc_class[coll] == size_class(op_bytes);
}

int hc_shm_zc_skips_none(const hc_shm_engine_t *eng, hc_coll_t coll)
{
    return eng->zc_skip[coll] == 0;
}

int hc_shm_zc_try(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes)
{
    if (!hc_shm_zc_skipping(eng, coll, op_bytes))
        return 1;
    eng->zc_skip[coll]--;
    return 0;
}

void hc_shm_zc_outcome(hc_shm_engine_t *eng, hc_coll_t coll, uint64_t op_bytes, int fell_back)
{
    uint16_t *backoff = &eng->zc_backoff[coll];

    if (eng->zc_class[coll] != size_class(op_bytes)) {
        eng->zc_class[coll] = size_class(op_bytes);
        *backoff = 0;
    }
    if (!fell_back)
        *backoff = eng->zc_skip[coll] = 0;
    else
        *backoff = eng->zc_skip[coll] = *backoff == 0                       ? 1
                                        : *backoff >= HC_SHM_ZC_SKIP_MAX / 2 ? HC_SHM_ZC_SKIP_MAX
                                                                             : *backoff * 2;
}

uint64_t hc_shm_zc_gate(const hc_shm_engine_t *eng, hc_coll_t coll, uint64_t in_place_min)
{
    uint64_t cma = hc_shm_cma_gate(eng, coll), mapped = hc_shm_mapped_gate(eng, coll);
    uint64_t least = in_place_min < cma ? in_place_min : cma;

    return mapped < least ? mapped : least;
}

HcclResult hc_shm_zc_read_source(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t j, uint64_t offset, void *dst,
                                 size_t bytes)
{
    const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, j)->bufs[eng->step & 1];

    return hc_shm_copy_from_peer(eng, op, j, dst, d->send_addr + offset,
                                 d->send_off < 0 ? -1 : d->send_off + (int64_t)offset, bytes);
}

HcclResult hc_shm_zc_close(hc_shm_engine_t *eng, const hc_op_t *op)
{
    return sync_step(eng, op);
}

/* ReduceScatter: rank r reduces block r of every rank's input, in rank order. */
HcclResult hc_shm_zc_reduce_scatter(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t block = op->count * hc_dtype_size(op->dtype);
    const void *inputs[MAX_RANKS];
    HcclResult res = HCCL_SUCCESS;
    unsigned parity;
    int reachable;

    HC_CHECK(open_exchange(eng, op, block * eng->nlocal, block, 1, 0, &reachable));
    if (!reachable)
        return HCCL_E_AGAIN;
    parity = eng->step & 1;
    for (uint32_t i = 0; i < eng->nlocal && res == HCCL_SUCCESS; i++) {
        uint8_t *send = peer_send(eng, i, parity, block * eng->nlocal);
        res = send != NULL ? HCCL_SUCCESS : unreachable(eng, op, i, parity, 1, block * eng->nlocal);
        inputs[i] = send != NULL ? send + (size_t)eng->me * block : NULL;
    }
    if (res == HCCL_SUCCESS)
        hc_reduce_multi(op->dtype, op->redop, op->recvbuf, inputs, eng->nlocal, op->count);
    return close_exchange(eng, op, res);
}

/* Reduce: every rank reduces its slice of all inputs straight into the root's output. */
/* Can every local rank write the root's output? Its arena, or one process for all of them. */
static int root_output_shared(hc_shm_engine_t *eng, uint32_t root, unsigned parity)
{
    if (hc_shm_ctrl(eng, root)->bufs[parity].recv_off >= 0)
        return 1;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (eng->pids[i] != eng->pids[root])
            return 0;
    return 1;
}

HcclResult hc_shm_zc_reduce(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype), bytes = op->count * esize;
    const void *inputs[MAX_RANKS];
    HcclResult res = HCCL_SUCCESS;
    uint64_t lo, hi;
    unsigned parity;
    uint8_t *out;
    int reachable;

    HC_CHECK(open_exchange(eng, op, bytes, eng->me == op->root ? bytes : 0, 1, 0, &reachable));
    parity = eng->step & 1;
    /* The root's output must be reachable too, by every rank, and every rank must decide alike: a
     * root whose output is plain memory reaches it, its peers in other processes do not. */
    if (reachable && !root_output_shared(eng, op->root, parity)) {
        hc_shm_step_end(eng);
        reachable = 0;
    }
    if (!reachable)
        return HCCL_E_AGAIN;
    out = peer_recv(eng, op->root, parity, bytes);
    hc_shm_slice(op->count, esize, eng->nlocal, eng->me, &lo, &hi);
    for (uint32_t i = 0; i < eng->nlocal && res == HCCL_SUCCESS; i++) {
        uint8_t *send = peer_send(eng, i, parity, bytes);
        res = out == NULL ? unreachable(eng, op, op->root, parity, 0, bytes)
              : send == NULL ? unreachable(eng, op, i, parity, 1, bytes) : HCCL_SUCCESS;
        inputs[i] = send != NULL ? send + lo * esize : NULL;
    }
    if (res == HCCL_SUCCESS && hi > lo)
        hc_reduce_multi(op->dtype, op->redop, out + lo * esize, inputs, eng->nlocal, hi - lo);
    return close_exchange(eng, op, res);
}
