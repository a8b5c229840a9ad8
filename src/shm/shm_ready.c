/*
 * Whether a collective may run at once on the thread that launches it (hc_engine_ops_t.ready: the
 * runtime's run-at-enqueue, docs/runtime.md). Only when every other local rank has already begun
 * it: that rank has published the op's first step (its flag of that parity holds the step) with
 * the op's signature hash, which also carries the collective's number. Such a rank's stream has
 * run everything before the op and waits for this rank in it, so the op completes with nothing
 * more from the launching thread than running it; a rank that has not begun it may be waiting for
 * something this thread would do after the launch (a Send on another stream, a host barrier).
 * Reading the peers' hot lines costs nothing extra: the op reads them next anyway.
 */
#include "shm_internal.h"

int hc_shm_ready(hc_engine_t *engine, const hc_op_t *op)
{
    hc_shm_engine_t *eng = (hc_shm_engine_t *)(void *)engine;
    uint64_t step = eng->step + 1; /* the op's first step, if it is a stepped one */

    if (op->coll_seq == 0)
        return 0;
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const hc_shm_hot_t *hot = &hc_shm_ctrl(eng, i)->hot[step & 1];
        if (i == eng->me)
            continue;
        if (atomic_load_explicit(&hot->arrive, memory_order_acquire) != step)
            return 0;
        hc_shm_tsan_acquire(eng, i);
        if (hot->sig_hash != op->sig_hash)
            return 0; /* another call: the op's own check reports the mismatch */
    }
    return 1;
}
