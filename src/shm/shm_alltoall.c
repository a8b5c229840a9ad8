/*
 * AlltoAll, AlltoAllV and AlltoAllVC on the copy-through protocol: each step every rank stages one
 * piece for every destination; rank r copies piece r of every rank's slot into the block it
 * receives from that rank. All three run on the same plan (counts and displacements per peer).
 *
 * AlltoAllV counts differ per rank by design, so its signature carries no digest; instead its
 * first step exchanges every rank's send and receive counts, which lets every rank check the whole
 * matrix (rank i sends what rank j expects) and agree on the number of steps.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_dtype.h"
#include "shm_internal.h"

typedef struct {
    uint64_t *send_count, *send_displ, *recv_count, *recv_displ; /* per peer, in elements */
    uint64_t largest;                                             /* largest count anyone moves */
} plan_t;

static hc_shm_engine_t *shm_of(hc_engine_t *engine)
{
    return (hc_shm_engine_t *)(void *)engine;
}

static HcclResult plan_alloc(plan_t *plan, uint32_t n)
{
    uint64_t *all = calloc(4 * (size_t)n, sizeof(uint64_t));

    if (all == NULL) {
        HC_ERROR("out of memory planning an alltoall over %u ranks", n);
        return HCCL_E_MEMORY;
    }
    *plan = (plan_t){.send_count = all, .send_displ = all + n, .recv_count = all + 2 * n, .recv_displ = all + 3 * n};
    return HCCL_SUCCESS;
}

static void plan_free(plan_t *plan)
{
    free(plan->send_count);
}

static uint64_t part(uint64_t count, uint64_t off, uint64_t piece)
{
    return off >= count ? 0 : (count - off < piece ? count - off : piece);
}

/* The data steps shared by the three collectives. first_step: whether the op's signature check
 * still has to happen (AlltoAllV did it in its count exchange). */
static HcclResult run_plan(hc_shm_engine_t *eng, hc_op_t *op, const plan_t *plan, int first_step)
{
    size_t esize = hc_dtype_size(op->dtype);
    uint64_t piece = eng->pipe_bytes / esize / eng->nlocal;

    if (plan->largest >= piece) /* whole steps: fault in all of them at once (hc_shm_warm_slots) */
        hc_shm_warm_slots(eng, piece * esize * eng->nlocal);
    for (uint64_t off = 0; off < plan->largest; off += piece) {
        uint8_t *slot;
        HcclResult res;
        HC_CHECK(hc_shm_step_begin(eng, op));
        slot = hc_shm_slot(eng, eng->me, eng->step);
        for (uint32_t j = 0; j < eng->nlocal; j++)
            if (j != eng->me) /* this rank's own block goes straight across below */
                memcpy(slot + (size_t)j * piece * esize,
                       (const uint8_t *)op->sendbuf + (plan->send_displ[j] + off) * esize,
                       part(plan->send_count[j], off, piece) * esize);
        hc_shm_step_publish(eng);
        res = hc_shm_step_wait_all(eng, op, first_step && off == 0);
        for (uint32_t i = 0; i < eng->nlocal && res == HCCL_SUCCESS; i++) {
            uint8_t *dst = (uint8_t *)op->recvbuf + (plan->recv_displ[i] + off) * esize;
            const uint8_t *src = i != eng->me ? hc_shm_slot(eng, i, eng->step) + (size_t)eng->me * piece * esize
                                              : (const uint8_t *)op->sendbuf + (plan->send_displ[i] + off) * esize;
            memcpy(dst, src, part(plan->recv_count[i], off, piece) * esize);
        }
        hc_shm_step_end(eng);
        HC_CHECK(res);
    }
    return HCCL_SUCCESS;
}

HcclResult hc_shm_alltoall(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    int first_step = 1;
    plan_t plan = {0};
    HcclResult res;

    if (eng->nlocal > 1 && eng->nlocal <= 256 &&
        op->count * hc_dtype_size(op->dtype) * eng->nlocal >= hc_shm_zc_gate(eng, eng->zero_copy_min)) {
        res = hc_shm_zc_alltoall(eng, op);
        if (res != HCCL_E_AGAIN)
            return res;
        first_step = 0; /* checked in the zero-copy attempt */
    }

    HC_CHECK(plan_alloc(&plan, eng->nlocal));
    for (uint32_t j = 0; j < eng->nlocal; j++) {
        plan.send_count[j] = plan.recv_count[j] = op->count;
        plan.send_displ[j] = plan.recv_displ[j] = (uint64_t)j * op->count;
    }
    plan.largest = op->count;
    res = run_plan(eng, op, &plan, first_step);
    plan_free(&plan);
    return res;
}

/* AlltoAllVC: the matrix (row i: what rank i sends to each rank) is the same on every rank and
 * blocks are contiguous in both buffers. */
HcclResult hc_shm_alltoallvc(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    const uint64_t *m = op->counts;
    uint32_t n = eng->nlocal, me = eng->me;
    uint64_t sent = 0, received = 0;
    plan_t plan = {0};
    HcclResult res;

    HC_CHECK(plan_alloc(&plan, n));
    for (uint32_t j = 0; j < n; j++) {
        plan.send_count[j] = m[(size_t)me * n + j];
        plan.send_displ[j] = sent;
        sent += plan.send_count[j];
        plan.recv_count[j] = m[(size_t)j * n + me];
        plan.recv_displ[j] = received;
        received += plan.recv_count[j];
    }
    for (size_t k = 0; k < (size_t)n * n; k++)
        plan.largest = m[k] > plan.largest ? m[k] : plan.largest;
    res = run_plan(eng, op, &plan, 1);
    plan_free(&plan);
    return res;
}

/* Check that rank i sends to j what j expects from i, for the whole matrix gathered in the slots. */
static HcclResult check_matrix(hc_shm_engine_t *eng, const hc_op_t *op, uint64_t *largest_p)
{
    uint32_t n = eng->nlocal;

    *largest_p = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint64_t *sends = (const uint64_t *)(void *)hc_shm_slot(eng, i, eng->step);
        for (uint32_t j = 0; j < n; j++) {
            const uint64_t *recvs = (const uint64_t *)(void *)hc_shm_slot(eng, j, eng->step) + n;
            if (sends[j] != recvs[i]) {
                HC_ERROR("alltoallv #%llu mismatch: rank %u sends %llu elements to rank %u, rank %u expects %llu "
                         "from rank %u",
                         hc_op_number(op), i, (unsigned long long)sends[j], j, j,
                         (unsigned long long)recvs[i], i);
                return HCCL_E_PARA;
            }
            *largest_p = sends[j] > *largest_p ? sends[j] : *largest_p;
        }
    }
    return HCCL_SUCCESS;
}

HcclResult hc_shm_alltoallv(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = shm_of(engine);
    uint32_t n = eng->nlocal;
    plan_t plan = {.send_count = op->counts, .send_displ = op->displs, .recv_count = op->recv_counts,
                   .recv_displ = op->recv_displs};
    uint64_t *slot;
    HcclResult res;

    if (2 * (size_t)n * sizeof(uint64_t) > eng->slot_bytes)
        return HCCL_E_NOT_SUPPORT;
    HC_CHECK(hc_shm_step_begin(eng, op));
    slot = (uint64_t *)(void *)hc_shm_slot(eng, eng->me, eng->step);
    memcpy(slot, op->counts, n * sizeof(uint64_t));
    memcpy(slot + n, op->recv_counts, n * sizeof(uint64_t));
    hc_shm_step_publish(eng);
    res = hc_shm_step_wait_all(eng, op, 1);
    if (res == HCCL_SUCCESS)
        res = check_matrix(eng, op, &plan.largest);
    hc_shm_step_end(eng);
    HC_CHECK(res);
    return run_plan(eng, op, &plan, 0);
}
