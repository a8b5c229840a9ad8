/*
 * What a collective may do on the thread that launches it: run whole (hc_shm_ready) or start
 * (hc_shm_start).
 *
 * Whether a collective may run at once on the thread that launches it (hc_engine_ops_t.ready: the
 * runtime's run-at-enqueue, docs/runtime.md). A stepped collective only when every other local rank
 * has already begun it (the eager path: eager_ready below): that rank has published the op's first
 * step (its flag of that parity holds the step) with the op's signature hash, which also carries
 * the collective's number. Such a rank's stream has run everything before the op, so an op that
 * needs only the peers' first steps completes with nothing more from the launching thread than
 * running it; one that needs more waits until every peer is running it, not merely started at its
 * launch (needs_more_than_first_steps). A rank that has not begun it may be waiting for something
 * this thread would do after the launch (a Send on another stream, a host barrier). Reading the
 * peers' hot lines costs nothing extra: the op reads them next anyway. Point-to-point ops are
 * shm_p2p.c's: started (receives posted, sends' first chunks in the rings), then ready once the
 * peers' sides are there.
 */
#include "hc_dtype.h"
#include "shm_internal.h"

/*
 * The eager path (shm_announce.c) has no steps. The root of a small Broadcast or Scatter and the
 * other ranks of a small Reduce only write: they need nobody's part, only a free buffer (one started
 * at launch has written its data already) and room to defer their checks (hc_shm_defer_room: at the
 * limit, room the op's check then makes without waiting). The others read the writers' data: they
 * need it published (and, past two ranks, room to defer the other readers' checks); a
 * Reduce root also stages its own input. Run at launch (and claimed without the stream lock), a
 * blocking 8-byte Broadcast or Scatter took 0.25-0.28 us a call against 0.30-0.34 (2 ranks,
 * docs/design-notes.md).
 * -1: op is not on the eager path.
 */
static int eager_ready(hc_shm_engine_t *eng, const hc_op_t *op)
{
    size_t esize = hc_dtype_size(op->dtype);
    int root = eng->me == op->root;
    size_t bytes;

    switch (op->sig.coll) {
    case HC_COLL_REDUCE:
        if (!hc_shm_eager_fits(eng, op))
            return -1;
        bytes = op->count * esize;
        if (!root)
            break; /* a writer, as a Broadcast's root */
        /* The root reads every other rank's slot and stages its own input in its own. */
        if (!hc_shm_eager_free_now(eng, op, bytes))
            return 0;
        for (uint32_t i = 0; i < eng->nlocal; i++)
            if (i != eng->me && !hc_shm_eager_arrived(eng, op, i))
                return 0;
        return 1;
    case HC_COLL_BROADCAST:
        if (!hc_shm_eager_fits(eng, op))
            return -1;
        bytes = op->count * esize;
        break;
    case HC_COLL_SCATTER:
        if (!hc_shm_eager_scatter_fits(eng, op->count, esize))
            return -1;
        bytes = hc_shm_eager_scatter_bytes(eng, op->count * esize);
        break;
    default:
        return -1;
    }
    if (hc_shm_eager_writer(eng, &op->sig, root))
        return hc_shm_defer_room(eng) && (op->started || hc_shm_eager_free_now(eng, op, bytes));
    return (eng->nlocal == 2 || hc_shm_defer_room(eng)) && hc_shm_eager_free_now(eng, op, 0) &&
           hc_shm_eager_arrived(eng, op, op->root);
}

/* Not where ranks share CPUs: there a burst whose queues take turns filling and emptying switches
 * context less often than one whose ranks look at their queue's head at every launch (4 ranks on
 * 2 CPUs, 8-byte Broadcast and Reduce bursts: 10-20% slower with the look). */
int hc_shm_progress_at_launch(hc_engine_t *engine)
{
    return hc_shm_of(engine)->own_cores;
}

/*
 * A peer's first step may have been published at its launch (hc_shm_start) by a thread that went
 * on to compute and runs the rest only at its synchronisation. An op that needs no more of the
 * peers than their first step (a small copy-through op: one step) completes anyway; a larger one
 * has later steps or a closing one (the CMA AllReduce always), and run at launch it waits for the
 * peers' compute before this thread gets to its own: 2 ranks, a core each, both computing after
 * enqueueing a 1 MiB AllReduce, one rank's launch took 210-310 us of a 110 us op in most epochs
 * while the stream still predicted the synchronous pattern. So such an op (the CMA AllReduce, and
 * anything from RUN_AT_LAUNCH_ALONE bytes) runs at launch only when every peer is running it (its
 * op_begin has set cur_seq): a peer that is computing makes it queue, and the caller runs it after
 * its own compute. The extra line read per peer is nothing at that size; applied from 32 KiB it
 * cost the blocking copy-through AllReduce there a few percent (2 ranks), for nothing.
 */
#define RUN_AT_LAUNCH_ALONE (64u * 1024u)

static int needs_more_than_first_steps(const hc_shm_engine_t *eng, const hc_op_t *op)
{
    uint64_t bytes = op->count * hc_dtype_size(op->dtype);

    return bytes >= RUN_AT_LAUNCH_ALONE || (op->sig.coll == HC_COLL_ALLREDUCE && hc_shm_cma_allreduce(eng, bytes));
}

static int peers_running(hc_shm_engine_t *eng, const hc_op_t *op)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me && __atomic_load_n(&hc_shm_ctrl(eng, i)->cur_seq, __ATOMIC_RELAXED) != hc_op_number(op))
            return 0;
    return 1;
}

int hc_shm_ready(hc_engine_t *engine, const hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    uint64_t step = eng->step + 1; /* the op's first step, if it is a stepped one */
    int eager;

    if (hc_coll_is_p2p((hc_coll_t)op->sig.coll))
        return hc_shm_p2p_ready(eng, op);
    if (op->coll_seq == 0)
        return 0;
    if ((eager = eager_ready(eng, op)) >= 0)
        return eager;
    if (op->started) {
        /* Its first step is published (hc_shm_start): do the peers' flags show theirs? This rank's
         * flag first, then theirs: of ranks that start at once, the last to look sees every other. */
        step = eng->step;
        atomic_thread_fence(memory_order_seq_cst);
    }
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
    /* The peers move on from this step only after this rank's next one: what was seen holds. */
    eng->ready_step = step;
    eng->ready_hash = op->sig_hash;
    return !needs_more_than_first_steps(eng, op) || peers_running(eng, op);
}

/*
 * Start at launch: the op is queued on an idle stream and is the communicator's next op here, so
 * the engine is this thread's until the op is queued. The stepped collectives stage and publish
 * their first step now (shm_coll.c, shm_move.c, shm_alltoall.c), which waits for nobody: the
 * parity's slot is free once the previous op has seen every rank's last step
 * (hc_shm_step_begin). Peers then find this rank's data without waiting for whichever thread runs
 * the rest: the worker, woken several microseconds later, or the caller at its synchronisation,
 * after its compute. What waits (the peers' steps, the reduction, the copies out) stays with the
 * run.
 */
static int start_op(hc_shm_engine_t *eng, hc_op_t *op)
{
    if (hc_coll_is_p2p((hc_coll_t)op->sig.coll))
        return hc_shm_p2p_start(eng, op);
    if (op->coll_seq == 0 || eng->nlocal < 2)
        return 0;
    switch (op->sig.coll) {
    case HC_COLL_ALLREDUCE:
    case HC_COLL_REDUCE:
    case HC_COLL_REDUCE_SCATTER:
    case HC_COLL_REDUCE_SCATTERV:
    case HC_COLL_BARRIER:
        return hc_shm_start_reducing(eng, op);
    case HC_COLL_BROADCAST:
    case HC_COLL_SCATTER:
    case HC_COLL_ALLGATHER:
    case HC_COLL_ALLGATHERV:
        return hc_shm_start_moving(eng, op);
    case HC_COLL_ALLTOALL:
    case HC_COLL_ALLTOALLV:
        return hc_shm_start_alltoall(eng, op);
    default:
        return 0; /* AlltoAllVC starts nothing */
    }
}

/* A started op is parked until a runner begins it (hc_shm_op_begin): the peers may kick the runner
 * (shm_kick.c). */
int hc_shm_start(hc_engine_t *engine, hc_op_t *op)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);
    int started = start_op(eng, op);

    if (started && eng->kick_listening)
        hc_shm_park(eng, hc_op_number(op));
    return started;
}
