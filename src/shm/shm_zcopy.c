/*
 * Zero-copy AllReduce over the peers' own buffers (DESIGN.md 2 and 5): when every rank's buffers
 * are aclrtMalloc memory (or all ranks are threads of one process), each rank maps its peers' arenas
 * once and then reads their inputs where they lie, the way HCCS peers read device memory.
 *
 *   step 1  every rank publishes where its buffers are; signatures are checked;
 *           reduce-scatter: rank r reduces slice r of every rank's input into slice r of its own
 *           output (in rank order: deterministic)
 *   step 2  all-gather: rank r copies slice j from rank j's output, for every j != r
 *   step 3  nobody returns (and lets the program touch its buffers) before every peer is done
 *
 * Traffic per rank: N read + N/n written for the reduction, about N read and written for the
 * gather, against 2N copied plus nN read by the copy-through path. In place is safe: slice r of
 * rank r's buffer is read only by rank r, which writes it last, and the kernels allow dst == src.
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

/* Describe one of this rank's buffers: arena offset, or -1. Also publishes the arena fd once. */
static int64_t arena_offset(hc_shm_engine_t *eng, const void *buf, uint64_t bytes)
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

/* Map local rank i's arena here (once); NULL when it cannot be mapped. */
static uint8_t *peer_arena(hc_shm_engine_t *eng, uint32_t i)
{
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);
    char path[64];
    int fd;

    if (eng->peer_arena[i] == PEER_MAP_FAILED)
        return NULL;
    if (eng->peer_arena[i] != NULL && eng->peer_arena_bytes[i] == peer->arena_bytes)
        return eng->peer_arena[i];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", eng->pids[i], peer->arena_fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        eng->peer_arena[i] = mmap(NULL, peer->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
    }
    if (fd < 0 || eng->peer_arena[i] == MAP_FAILED) {
        HC_WARN("cannot map the arena of rank %u (%s): collectives with it fall back to copying", i, path);
        eng->peer_arena[i] = PEER_MAP_FAILED;
        return NULL;
    }
    eng->peer_arena_bytes[i] = peer->arena_bytes;
    return eng->peer_arena[i];
}

void hc_shm_zc_unmap(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; eng->peer_arena != NULL && i < eng->nlocal; i++)
        if (eng->peer_arena[i] != NULL && eng->peer_arena[i] != PEER_MAP_FAILED)
            munmap(eng->peer_arena[i], eng->peer_arena_bytes[i]);
}

/* Where local rank i's buffer (address in its process, arena offset) is in this process. */
static uint8_t *peer_buffer(hc_shm_engine_t *eng, uint32_t i, uint64_t addr, int64_t off)
{
    uint8_t *base;

    if (eng->pids[i] == eng->pids[eng->me])
        return (uint8_t *)(uintptr_t)addr;
    if (off < 0 || (base = peer_arena(eng, i)) == NULL)
        return NULL;
    return base + off;
}

/* Can every rank reach every other's buffers? Decided from the published descriptors alone, so
 * every rank decides the same. */
static int all_reachable(hc_shm_engine_t *eng, unsigned parity)
{
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
        if (eng->pids[i] != eng->pids[0] && (d->send_off < 0 || d->recv_off < 0))
            return 0;
    }
    return 1;
}

/* Slice j of count elements: [lo, hi), boundaries rounded to 64 bytes for the kernels. */
static void slice(uint64_t count, size_t esize, uint32_t n, uint32_t j, uint64_t *lo_p, uint64_t *hi_p)
{
    uint64_t per = (count + n - 1) / n, align = 64 / esize ? 64 / esize : 1;

    per = (per + align - 1) / align * align;
    *lo_p = (uint64_t)j * per < count ? (uint64_t)j * per : count;
    *hi_p = *lo_p + per < count ? *lo_p + per : count;
}

static HcclResult reduce_my_slice(hc_shm_engine_t *eng, hc_op_t *op, unsigned parity)
{
    size_t esize = hc_dtype_size(op->dtype);
    const void *inputs[MAX_RANKS];
    uint64_t lo, hi;

    slice(op->count, esize, eng->nlocal, eng->me, &lo, &hi);
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, i)->bufs[parity];
        uint8_t *send = peer_buffer(eng, i, d->send_addr, d->send_off);
        if (send == NULL)
            return HCCL_E_UNAVAIL;
        inputs[i] = send + lo * esize;
    }
    if (hi > lo)
        hc_reduce_multi(op->dtype, op->redop, (uint8_t *)op->recvbuf + lo * esize, inputs, eng->nlocal, hi - lo);
    return HCCL_SUCCESS;
}

static HcclResult gather_slices(hc_shm_engine_t *eng, hc_op_t *op, unsigned parity)
{
    size_t esize = hc_dtype_size(op->dtype);

    for (uint32_t k = 1; k < eng->nlocal; k++) {
        uint32_t j = (eng->me + k) % eng->nlocal; /* start at different peers: spread the reads */
        const hc_shm_buf_desc_t *d = &hc_shm_ctrl(eng, j)->bufs[parity];
        uint8_t *recv = peer_buffer(eng, j, d->recv_addr, d->recv_off);
        uint64_t lo, hi;
        if (recv == NULL)
            return HCCL_E_UNAVAIL;
        slice(op->count, esize, eng->nlocal, j, &lo, &hi);
        memcpy((uint8_t *)op->recvbuf + lo * esize, recv + lo * esize, (hi - lo) * esize);
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

HcclResult hc_shm_zc_allreduce(hc_shm_engine_t *eng, hc_op_t *op)
{
    size_t bytes = op->count * hc_dtype_size(op->dtype);
    hc_shm_buf_desc_t *mine;
    unsigned parity;
    HcclResult res;

    hc_assert(eng->nlocal <= MAX_RANKS);
    HC_CHECK(hc_shm_step_begin(eng, op));
    parity = eng->step & 1;
    mine = &hc_shm_ctrl(eng, eng->me)->bufs[parity];
    *mine = (hc_shm_buf_desc_t){.send_addr = (uintptr_t)op->sendbuf, .recv_addr = (uintptr_t)op->recvbuf,
                                .send_off = arena_offset(eng, op->sendbuf, bytes),
                                .recv_off = arena_offset(eng, op->recvbuf, bytes)};
    hc_shm_step_publish(eng);
    res = hc_shm_step_wait_all(eng, op, 1);
    if (res == HCCL_SUCCESS && !all_reachable(eng, parity)) {
        hc_shm_step_end(eng);
        return HCCL_E_AGAIN; /* signatures were checked in this step */
    }
    if (res == HCCL_SUCCESS)
        res = reduce_my_slice(eng, op, parity);
    hc_shm_step_end(eng);
    HC_CHECK(res);
    HC_CHECK(hc_shm_step_begin(eng, op));
    hc_shm_step_publish(eng);
    res = hc_shm_step_wait_all(eng, op, 0);
    if (res == HCCL_SUCCESS)
        res = gather_slices(eng, op, parity);
    hc_shm_step_end(eng);
    HC_CHECK(res);
    return sync_step(eng, op);
}
