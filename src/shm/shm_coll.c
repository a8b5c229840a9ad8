/*
 * Collectives of the intra-host engine, first data path: every step each rank publishes a chunk
 * through its slot and every rank reads what it needs from all slots. Correct for every size
 * (chunked by the slot size), in-place safe (inputs are staged in the slots before any output is
 * written) and deterministic (reductions combine the ranks' inputs in rank order, rounding
 * fp16/bf16 once). The bandwidth-optimal schedules come with the "Intra-host speed" issue.
 */
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "hc_reduce.h"
#include "shm_internal.h"

#define MAX_LOCAL_STACK 64

static hc_shm_engine_t *shm_of(hc_engine_t *engine)
{
    return (hc_shm_engine_t *)(void *)engine;
}

/* End the step even on failure so that the flags stay monotonic for the next op. */
static HcclResult finish_step(hc_shm_engine_t *eng, HcclResult res)
{
    hc_shm_step_end(eng);
    return res;
}

HcclResult hc_shm_allreduce(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t chunk = eng->slot_bytes / esize;
    const void *srcs[MAX_LOCAL_STACK];
    const void **inputs = eng->nlocal <= MAX_LOCAL_STACK ? srcs : NULL;
    HcclResult res = HCCL_SUCCESS;

    if (inputs == NULL)
        return HCCL_E_NOT_SUPPORT;
    for (uint64_t off = 0; off < op->count && res == HCCL_SUCCESS; off += chunk) {
        uint64_t n = op->count - off < chunk ? op->count - off : chunk;
        HC_CHECK(hc_shm_step_begin(eng, op));
        memcpy(hc_shm_slot(eng, eng->me, eng->step), (const uint8_t *)op->sendbuf + off * esize, n * esize);
        hc_shm_step_publish(eng);
        res = hc_shm_step_wait_all(eng, op, off == 0);
        if (res == HCCL_SUCCESS) {
            for (uint32_t i = 0; i < eng->nlocal; i++)
                inputs[i] = hc_shm_slot(eng, i, eng->step);
            hc_reduce_multi(op->dtype, op->redop, (uint8_t *)op->recvbuf + off * esize, inputs, eng->nlocal, n);
        }
        res = finish_step(eng, res);
    }
    return res;
}

HcclResult hc_shm_broadcast(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t chunk = eng->slot_bytes / esize;
    uint32_t root = op->root; /* one host: local index == rank */
    HcclResult res = HCCL_SUCCESS;

    for (uint64_t off = 0; off < op->count && res == HCCL_SUCCESS; off += chunk) {
        uint64_t n = op->count - off < chunk ? op->count - off : chunk;
        uint8_t *data = (uint8_t *)op->recvbuf + off * esize;
        HC_CHECK(hc_shm_step_begin(eng, op));
        if (eng->me == root)
            memcpy(hc_shm_slot(eng, root, eng->step), data, n * esize);
        hc_shm_step_publish(eng);
        res = hc_shm_step_wait_all(eng, op, off == 0);
        if (res == HCCL_SUCCESS && eng->me != root)
            memcpy(data, hc_shm_slot(eng, root, eng->step), n * esize);
        res = finish_step(eng, res);
    }
    return res;
}

HcclResult hc_shm_barrier(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);

    HC_CHECK(hc_shm_step_begin(eng, op));
    hc_shm_step_publish(eng);
    return finish_step(eng, hc_shm_step_wait_all(eng, op, 1));
}
