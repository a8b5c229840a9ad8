/*
 * Announcements and the eager ring of the intra-host engine (shm_internal.h has the layout).
 *
 * Why announcements: DESIGN.md 7 promises that a mismatched collective fails on every rank, so
 * every rank must see every rank's signature of a collective (before completing it, or, for the
 * writers of the eager path, soon after: "Deferred checks" below). Lock-stepped
 * steps give that for free, but they also tie every rank to every other at every collective: a
 * loop of small Broadcasts costs a round trip per call on 2 ranks and a round of context switches
 * per call when ranks outnumber cores. A rank therefore publishes each collective's signature
 * hash when the program enqueues it (the stream runs it later), up to HC_SHM_ANN_SLOTS ahead of
 * what every rank has checked; what could not be announced then is announced by the executing
 * thread, at the latest when the collective starts. A root that finds the others' announcements
 * can check them and move on while they still run earlier collectives.
 *
 * Threads: announcing at enqueue happens under the communicator's exec_lock (hc_op_enqueue holds
 * it); the executing thread takes it only when something is left to announce. Collectives that
 * were enqueued but could not be announced wait in a ring of copies of their signatures (a copy,
 * not the op: the op may be freed by a failure path without running). The ring grows to hold every
 * one of them: when a burst deeper than the ring overwrote entries, each overwritten collective
 * was announced only when its own rank ran it, which tied a root to every rank at every call of the
 * burst (4 ranks on 2 CPUs, 8-byte Broadcast: 1.0 us per call in bursts of 1100, 5.2 in bursts of
 * 2000, 12-14 in bursts of 5000 and more). Only when it cannot grow (out of memory) is a collective
 * left out of it, and announced when it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "shm_internal.h"

#define HC_SHM_PENDING_FIRST 1024 /* entries of the ring at first; doubled as bursts need */

struct hc_shm_pending {
    uint64_t coll_seq; /* 0: empty */
    uint64_t hash;
    hc_op_sig_t sig;
};

HcclResult hc_shm_announce_init(hc_shm_engine_t *eng)
{
    eng->pending = calloc(HC_SHM_PENDING_FIRST, sizeof(*eng->pending));
    eng->pending_cap = HC_SHM_PENDING_FIRST;
    eng->deferred_compared = calloc(eng->nlocal, sizeof(*eng->deferred_compared));
    if (eng->pending == NULL || eng->deferred_compared == NULL) {
        HC_ERROR("out of memory creating the shared memory engine");
        return HCCL_E_MEMORY;
    }
    atomic_init(&eng->ann_next, 1);
    atomic_init(&eng->enq_last, 0);
    return HCCL_SUCCESS;
}

void hc_shm_announce_touch(hc_shm_engine_t *eng)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    volatile uint8_t *p = (volatile uint8_t *)(void *)&mine->ann[0];

    for (; p < (volatile uint8_t *)(void *)&mine->eager[HC_SHM_EAGER_SLOTS]; p += 4096)
        *p = 0; /* zero already: the write only faults the page in */
}

/*
 * Warming. Each process faults in a page of the shared segment at its first access to it (~11 us
 * on the reference VM), also when another rank's process wrote it first. Readers of the eager path
 * reach a new page of the writer's slots and announcements every few collectives, so the first few
 * hundred small collectives after creation ran 2-3x slower (2 ranks, bursts of 50 8-byte
 * Broadcasts: 0.7-3.3 us a call for the first 300, then 0.23-0.30). So at creation every process
 * reads a byte of each page of the others' announcements and eager slots, and the first eager
 * collective of a larger size than any before from a writer reads that much of the writer's medium
 * slots (a Broadcast's readers only the root's). Ranks that are threads of one process share its
 * page tables: nothing to do for them.
 */
static void read_pages(const volatile uint8_t *from, const volatile uint8_t *to)
{
    uint8_t sink = 0;

    for (const volatile uint8_t *p = from; p < to; p += 4096)
        sink ^= *p;
    (void)sink;
}

static int in_other_process(const hc_shm_engine_t *eng, uint32_t i)
{
    return i != eng->me && eng->pids[i] != eng->pids[eng->me];
}

void hc_shm_announce_warm(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);
        if (in_other_process(eng, i))
            read_pages((volatile uint8_t *)(void *)&c->ann[0],
                       (volatile uint8_t *)(void *)&c->eager[HC_SHM_EAGER_SLOTS]);
    }
}

/* Fault in `bytes` of every medium slot of local rank i (whose data this process reads or writes). */
static void warm_medium(hc_shm_engine_t *eng, uint32_t i, size_t bytes)
{
    uint64_t *warm = &eng->medium_warm_bytes[i];

    if (bytes <= HC_SHM_EAGER_BYTES || bytes <= *warm || (i != eng->me && !in_other_process(eng, i)))
        return;
    for (uint32_t j = 0; j < HC_SHM_MEDIUM_SLOTS; j++)
        read_pages(hc_shm_ctrl(eng, i)->medium[j] + (*warm & ~(uint64_t)4095), hc_shm_ctrl(eng, i)->medium[j] + bytes);
    *warm = bytes;
}

/* How far local rank i has got: the last collective it finished (DONE), or the last up to which it
 * compared every signature (CHECKED: its announcement entries are free up to there). */
enum progress { DONE, CHECKED };

static uint64_t progress(hc_shm_engine_t *eng, uint32_t i, enum progress which)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, i);

    return atomic_load_explicit(which == DONE ? &c->done_seq : &c->checked_seq, memory_order_acquire);
}

/* The lowest progress of the local ranks, this one included: an announcement made at enqueue may
 * run ahead of this rank's own executing thread, which still compares against its entry. */
static uint64_t all_progress(hc_shm_engine_t *eng, enum progress which)
{
    uint64_t low = UINT64_MAX;

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        uint64_t p = progress(eng, i, which);
        low = p < low ? p : low;
    }
    return low;
}

/* Everything before the oldest deferred collective is checked; with none, everything this rank
 * finished (`done`). */
static void publish_checked(hc_shm_engine_t *eng, uint64_t done)
{
    uint64_t checked = eng->deferred_n != 0 ? eng->deferred[eng->deferred_first].coll_seq - 1 : done;
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);

    if (atomic_load_explicit(&mine->checked_seq, memory_order_relaxed) != checked)
        atomic_store_explicit(&mine->checked_seq, checked, memory_order_release);
}

/* May this rank reuse its entry for collective q? *cache holds what it last saw of the others'
 * progress and is refreshed only when it does not suffice. */
static int entry_free(hc_shm_engine_t *eng, uint64_t *cache, uint64_t q)
{
    if (q <= HC_SHM_ANN_SLOTS || *cache >= q - HC_SHM_ANN_SLOTS)
        return 1;
    *cache = all_progress(eng, CHECKED);
    return *cache >= q - HC_SHM_ANN_SLOTS;
}

/* The running hash after one more collective. A bijection of (chain ^ hash): ranks whose chains
 * differ keep differing for as long as their later calls agree. */
static uint64_t chain_mix(uint64_t chain, uint64_t hash)
{
    uint64_t c = (chain ^ hash) * 0x9e3779b97f4a7c15ull;

    return c ^ (c >> 29);
}

static void publish(hc_shm_engine_t *eng, uint64_t q, uint64_t hash, const hc_op_sig_t *sig)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    unsigned k = q % HC_SHM_ANN_SLOTS;
    hc_shm_ann_t *ann = &mine->ann[k];

    mine->ann_sig[k] = *sig;
    ann->hash = hash;
    eng->ann_chain = chain_mix(eng->ann_chain, hash);
    mine->ann_chain[k] = eng->ann_chain;
    hc_shm_tsan_release(eng);
    hc_shm_publish_flag(eng, &ann->seq, q);
    atomic_store_explicit(&eng->ann_next, q + 1, memory_order_relaxed);
}

static struct hc_shm_pending *pending_of(hc_shm_engine_t *eng, uint64_t q)
{
    return &eng->pending[q & (eng->pending_cap - 1)];
}

/* Make room in the ring for collective q, behind the waiting ann_next..q-1, each at its own index
 * (doubling keeps them apart). 0 when out of memory. Under exec_lock. */
static int pending_room(hc_shm_engine_t *eng, uint64_t q)
{
    uint64_t first = atomic_load_explicit(&eng->ann_next, memory_order_relaxed);
    uint64_t cap = eng->pending_cap;
    struct hc_shm_pending *grown;

    if (q - first < cap)
        return 1;
    while (q - first >= cap)
        cap *= 2;
    grown = calloc(cap, sizeof(*grown));
    if (grown == NULL)
        return 0;
    for (uint64_t k = first; k < q; k++)
        grown[k & (cap - 1)] = *pending_of(eng, k);
    free(eng->pending);
    eng->pending = grown;
    eng->pending_cap = cap;
    return 1;
}

/* Announce pending collectives in order while their entries are free. Under exec_lock. */
static void announce_pending(hc_shm_engine_t *eng, uint64_t *cache)
{
    uint64_t q = atomic_load_explicit(&eng->ann_next, memory_order_relaxed);
    int any = 0;

    for (; q <= atomic_load_explicit(&eng->enq_last, memory_order_relaxed); q++) {
        struct hc_shm_pending *p = pending_of(eng, q);
        if (p->coll_seq != q || !entry_free(eng, cache, q))
            break;
        publish(eng, q, p->hash, &p->sig);
        p->coll_seq = 0;
        any = 1;
    }
    if (any)
        hc_shm_wake_sleepers(eng);
}

void hc_shm_announce(hc_engine_t *engine, const hc_op_sig_t *sig, uint64_t q, uint64_t hash)
{
    hc_shm_engine_t *eng = hc_shm_of(engine);

    atomic_store_explicit(&eng->enq_last, q, memory_order_relaxed);
    if (atomic_load_explicit(&eng->ann_next, memory_order_relaxed) == q && entry_free(eng, &eng->ann_min_checked, q)) {
        publish(eng, q, hash, sig);
        hc_shm_wake_sleepers(eng);
        return;
    }
    if (pending_room(eng, q)) /* else it is announced when it runs */
        *pending_of(eng, q) = (struct hc_shm_pending){.coll_seq = q, .hash = hash, .sig = *sig};
}

struct floor_wait {
    uint64_t floor;
    enum progress which;
};

/* Waiting for every rank's progress to reach `floor` (this one's has: it runs a later one). */
static uint32_t behind_floor(hc_shm_engine_t *eng, const void *ctx)
{
    const struct floor_wait *w = ctx;

    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (progress(eng, i, w->which) < w->floor)
            return i;
    return eng->nlocal;
}

/* Wait (executing thread) until every local rank's progress reached `floor`, that of an earlier
 * collective than op: the others wait only for collectives this rank has done its part of, so no
 * cycle. Without `wait`: HCCL_E_AGAIN if not yet. */
static HcclResult all_by(hc_shm_engine_t *eng, enum progress which, uint64_t floor, const hc_op_t *op, int wait)
{
    uint64_t *cache = which == DONE ? &eng->exec_min_done : &eng->exec_min_checked;
    struct floor_wait w = {.floor = floor, .which = which};

    if (*cache >= floor || (*cache = all_progress(eng, which)) >= floor)
        return HCCL_SUCCESS;
    if (!wait)
        return HCCL_E_AGAIN;
    HC_CHECK(hc_shm_wait_for(eng, behind_floor, &w, op));
    *cache = all_progress(eng, which);
    return HCCL_SUCCESS;
}

/* Wait until this rank's entry for collective q is free. */
static HcclResult wait_entry_free(hc_shm_engine_t *eng, uint64_t q, const hc_op_t *op)
{
    return q <= HC_SHM_ANN_SLOTS ? HCCL_SUCCESS : all_by(eng, CHECKED, q - HC_SHM_ANN_SLOTS, op, 1);
}

HcclResult hc_shm_announce_running(hc_shm_engine_t *eng, const hc_op_t *op)
{
    hc_issue_lock_t *lock = eng->base.group.lock;
    uint64_t q = op->coll_seq;
    uint64_t next = atomic_load_explicit(&eng->ann_next, memory_order_relaxed);

    /* The usual cases: announced at enqueue, nothing (or enough) announced after it. */
    if (next > q && (next > atomic_load_explicit(&eng->enq_last, memory_order_relaxed) ||
                     next >= q + HC_SHM_ANN_SLOTS / 2))
        return HCCL_SUCCESS;
    if (next <= q) /* not announced yet: its entry is still in use (ann_next == q here) */
        HC_CHECK(wait_entry_free(eng, q, op));
    hc_issue_lock(lock);
    if (atomic_load_explicit(&eng->ann_next, memory_order_relaxed) == q &&
        pending_of(eng, q)->coll_seq != q) {
        /* It has no pending entry: the ring could not grow when it was enqueued. */
        publish(eng, q, op->sig_hash, &op->sig);
        hc_shm_wake_sleepers(eng);
    }
    if (eng->exec_min_checked > eng->ann_min_checked)
        eng->ann_min_checked = eng->exec_min_checked;
    announce_pending(eng, &eng->ann_min_checked);
    hc_issue_unlock(lock);
    return HCCL_SUCCESS;
}

void hc_shm_announce_done(hc_shm_engine_t *eng, const hc_op_t *op)
{
    hc_shm_tsan_release(eng);
    publish_checked(eng, op->coll_seq);
    hc_shm_publish_flag(eng, &hc_shm_ctrl(eng, eng->me)->done_seq, op->coll_seq);
    hc_shm_wake_sleepers(eng);
}

/* Local rank i's announcement of collective q, or a later one (never beyond: see wait_entry_free). */
static uint64_t announced(hc_shm_engine_t *eng, uint32_t i, uint64_t q)
{
    return atomic_load_explicit(&hc_shm_ctrl(eng, i)->ann[q % HC_SHM_ANN_SLOTS].seq, memory_order_acquire);
}

int hc_shm_announced_op(hc_shm_engine_t *eng, uint32_t i, uint64_t q)
{
    return q != 0 && announced(eng, i, q) == q;
}

struct ann_wait {
    uint64_t q;
    uint32_t rank; /* HC_SHM_EAGER_ALL: every rank */
};

/* Waiting for rank w->rank's (every rank's) announcement of collective w->q. */
static uint32_t behind_announced(hc_shm_engine_t *eng, const void *ctx)
{
    const struct ann_wait *w = ctx;

    if (w->rank != HC_SHM_EAGER_ALL)
        return announced(eng, w->rank, w->q) < w->q ? w->rank : eng->nlocal;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (announced(eng, i, w->q) < w->q)
            return i;
    return eng->nlocal;
}

/*
 * Deferred checks. A writer of the eager path (the root of a small Broadcast or Scatter, the others
 * of a small Reduce) that compared every rank's signature before completing would wait, per call,
 * for its readers to finish the previous call and announce this one: a round trip per call in a
 * blocking loop, where MPI's eager sends cost a copy. So a writer completes once its data is
 * published and compares the others' signatures later: at the start of its next op that is not
 * such a write, in a wait that finds a failed peer, and at the latest HC_SHM_DEFER_MAX collectives
 * on, where it waits for them. A reader compares the rank it reads from before it reads (the data
 * must be what it expects: the writer's hash travels with its data, and only a writer that wrote
 * none, having made another call, is compared by its announcement) and defers the other readers'
 * signatures, when there are any.
 *
 * So every mismatch fails the collective on the readers that see it and the next op of every other
 * rank (HCCL_E_PARA, with the line naming both calls). The announcement entries of a collective
 * stay until every rank has checked it (checked_seq, published behind the oldest deferred one):
 * entry_free waits for that, not for done_seq.
 */
/* Rank i has announced the deferred collective d: the same call? (HCCL_E_PARA, logged, if not.) */
static HcclResult compare_deferred(hc_shm_engine_t *eng, const hc_op_t *op, const hc_shm_deferred_t *d, uint32_t i)
{
    unsigned k = d->coll_seq % HC_SHM_ANN_SLOTS;
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);

    hc_shm_tsan_acquire(eng, i);
    hc_assert(atomic_load(&peer->ann[k].seq) == d->coll_seq); /* kept until this rank checks it */
    if (peer->ann[k].hash == d->hash)
        return HCCL_SUCCESS;
    hc_shm_report_sig_mismatch(eng, &d->sig, d->number, i, &peer->ann_sig[k], d->coll_seq);
    HC_ERROR("%s #%llu fails: this rank's %s #%llu had completed before the calls could be compared (small "
             "Broadcasts, Scatters and Reduces compare them afterwards)",
             hc_coll_name(op->sig.coll), hc_op_number(op), hc_coll_name(d->sig.coll), d->number);
    return HCCL_E_PARA;
}

/* Compare local rank i's calls of the deferred collectives it has announced and was not compared on
 * yet, oldest first (a rank announces in order; the walk stops at the first it has not announced,
 * which is also its only look at a line the rank may be writing). Each collective is compared once
 * per rank: the list's later entries used to be compared again on every call while one rank lagged
 * (a reader of a 4-rank 8-byte Broadcast loop spent a quarter of its time there). */
static HcclResult compare_announced(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    uint32_t *compared = &eng->deferred_compared[i];

    /* All at once when the rank has announced the list's last collective: equal running hashes
     * there are equal calls up to it. Else (or if they differ), one by one, finding the first. */
    if (*compared < eng->deferred_n) {
        uint64_t q = eng->deferred[(eng->deferred_first + eng->deferred_n - 1) % HC_SHM_DEFER_MAX].coll_seq;
        unsigned k = q % HC_SHM_ANN_SLOTS;
        if (announced(eng, i, q) >= q && announced(eng, eng->me, q) == q) {
            hc_shm_tsan_acquire(eng, i);
            if (hc_shm_ctrl(eng, i)->ann_chain[k] == hc_shm_ctrl(eng, eng->me)->ann_chain[k]) {
                *compared = eng->deferred_n;
                return HCCL_SUCCESS;
            }
        }
    }
    for (; *compared < eng->deferred_n; ++*compared) {
        const hc_shm_deferred_t *d = &eng->deferred[(eng->deferred_first + *compared) % HC_SHM_DEFER_MAX];
        if (announced(eng, i, d->coll_seq) < d->coll_seq)
            break;
        HC_CHECK(compare_deferred(eng, op, d, i));
    }
    return HCCL_SUCCESS;
}

/* Compare what the others have announced of the deferred collectives, and drop those every rank was
 * compared on. All ranks are compared before any wait, so that a mismatch one of them shows is
 * reported even while another has not announced the collective yet (a rank that ran ahead would
 * otherwise see only that the culprit failed and left). `wait`: then wait for each rank's
 * announcement of the oldest. */
static HcclResult check_deferred(hc_shm_engine_t *eng, const hc_op_t *op, int wait)
{
    uint32_t before = eng->deferred_n, done = eng->deferred_n;
    HcclResult res = HCCL_SUCCESS;

    for (uint32_t i = 0; i < eng->nlocal && res == HCCL_SUCCESS; i++)
        if (i != eng->me)
            res = compare_announced(eng, op, i);
    for (uint32_t i = 0; i < eng->nlocal && res == HCCL_SUCCESS && wait && before > 0; i++) {
        struct ann_wait w = {.q = eng->deferred[eng->deferred_first].coll_seq, .rank = i};
        if (i == eng->me || eng->deferred_compared[i] > 0)
            continue;
        res = hc_shm_wait_for(eng, behind_announced, &w, op);
        if (res == HCCL_SUCCESS)
            res = compare_announced(eng, op, i);
    }
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me && eng->deferred_compared[i] < done)
            done = eng->deferred_compared[i];
    if (done == 0)
        return res;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me)
            eng->deferred_compared[i] -= done;
    eng->deferred_first = (eng->deferred_first + done) % HC_SHM_DEFER_MAX;
    eng->deferred_n -= done;
    hc_shm_tsan_release(eng);
    publish_checked(eng, atomic_load_explicit(&hc_shm_ctrl(eng, eng->me)->done_seq, memory_order_relaxed));
    hc_shm_wake_sleepers(eng);
    return res;
}

int hc_shm_defer_room(hc_shm_engine_t *eng)
{
    uint64_t oldest;

    if (eng->deferred_n < HC_SHM_DEFER_MAX)
        return 1;
    oldest = eng->deferred[eng->deferred_first].coll_seq;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me && announced(eng, i, oldest) < oldest)
            return 0;
    return 1;
}

/* Also called by a wait that found a failed peer (report_stall), which may be inside one of the
 * checks here: it then leaves the list to that check. */
HcclResult hc_shm_check_deferred(hc_shm_engine_t *eng, const hc_op_t *op)
{
    return eng->deferred_busy ? HCCL_SUCCESS : check_deferred(eng, op, 0);
}

/* Leave op's comparison for later. When the list is full, check it (waiting for the oldest entry):
 * only then, because the others write their announcements four to a line, and each look at one
 * that a peer is writing costs a cache-line exchange on both sides (a blocking 8-byte Broadcast on
 * 2 ranks, slow VM state: 0.59-0.68 us per call with a look per call, 0.42-0.46 with a look per 16
 * calls). */
static HcclResult defer(hc_shm_engine_t *eng, const hc_op_t *op)
{
    HcclResult res = HCCL_SUCCESS;

    if (eng->deferred_n >= HC_SHM_DEFER_MAX) {
        eng->deferred_busy = 1;
        res = check_deferred(eng, op, 1);
        eng->deferred_busy = 0;
    }
    if (res == HCCL_SUCCESS)
        eng->deferred[(eng->deferred_first + eng->deferred_n++) % HC_SHM_DEFER_MAX] = (hc_shm_deferred_t){
            .coll_seq = op->coll_seq, .number = hc_op_number(op), .hash = op->sig_hash, .sig = op->sig};
    return res;
}

HcclResult hc_shm_check_writer(hc_shm_engine_t *eng, const hc_op_t *op)
{
    return defer(eng, op);
}

HcclResult hc_shm_explain_by_announcement(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    unsigned k;
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);

    if (op->coll_seq == 0)
        return HCCL_SUCCESS;
    k = op->coll_seq % HC_SHM_ANN_SLOTS;
    if (atomic_load(&peer->ann[k].seq) != op->coll_seq || peer->ann[k].hash == op->sig_hash)
        return HCCL_SUCCESS;
    return hc_shm_report_mismatch(eng, op, i, &peer->ann_sig[k], op->coll_seq);
}

/* Are this rank's eager slot for op and, for more than HC_SHM_EAGER_BYTES, its next medium slot free
 * (every rank finished the collective that used them last)? Waited for (bounded) when `wait`, else
 * HCCL_E_AGAIN. */
static HcclResult eager_free(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes, int wait)
{
    if (op->coll_seq > HC_SHM_EAGER_SLOTS)
        HC_CHECK(all_by(eng, DONE, op->coll_seq - HC_SHM_EAGER_SLOTS, op, wait));
    return bytes <= HC_SHM_EAGER_BYTES
               ? HCCL_SUCCESS
               : all_by(eng, DONE, eng->medium_user[eng->medium_next % HC_SHM_MEDIUM_SLOTS], op, wait);
}

/* This rank's buffer for op's eager data: its slot, or the next medium slot, once eager_free says
 * both are free. */
static HcclResult eager_take(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes, int wait, uint8_t **buf_p)
{
    hc_shm_eager_t *slot = hc_shm_eager_slot(eng, eng->me, op);
    uint32_t j;

    HC_CHECK(eager_free(eng, op, bytes, wait));
    if (bytes <= HC_SHM_EAGER_BYTES) {
        *buf_p = slot->data;
        return HCCL_SUCCESS;
    }
    warm_medium(eng, eng->me, bytes);
    j = eng->medium_next++ % HC_SHM_MEDIUM_SLOTS;
    eng->medium_user[j] = op->coll_seq;
    slot->medium = j;
    *buf_p = hc_shm_ctrl(eng, eng->me)->medium[j];
    return HCCL_SUCCESS;
}

int hc_shm_eager_free_now(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes)
{
    uint64_t q = op->coll_seq;

    return (q <= HC_SHM_ANN_SLOTS || all_by(eng, CHECKED, q - HC_SHM_ANN_SLOTS, op, 0) == HCCL_SUCCESS) &&
           eager_free(eng, op, bytes, 0) == HCCL_SUCCESS;
}

HcclResult hc_shm_eager_buffer(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes, uint8_t **buf_p)
{
    return eager_take(eng, op, bytes, 1, buf_p);
}

uint8_t *hc_shm_eager_buffer_now(hc_shm_engine_t *eng, const hc_op_t *op, size_t bytes)
{
    uint8_t *buf;

    return eager_take(eng, op, bytes, 0, &buf) == HCCL_SUCCESS ? buf : NULL;
}

void hc_shm_eager_publish(hc_shm_engine_t *eng, const hc_op_t *op)
{
    hc_shm_eager_t *slot = hc_shm_eager_slot(eng, eng->me, op);

    slot->hash = op->sig_hash;
    hc_shm_tsan_release(eng);
    hc_shm_publish_flag(eng, &slot->seq, op->coll_seq);
    hc_shm_wake_sleepers(eng);
}

struct eager_wait {
    const hc_op_t *op;
    uint32_t rank;
};

static int eager_behind(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    return atomic_load_explicit(&hc_shm_eager_slot(eng, i, op)->seq, memory_order_acquire) < op->coll_seq;
}

/* Has writer i announced another call as op's collective (it writes no data for op then)? */
static int announced_other(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    return announced(eng, i, op->coll_seq) == op->coll_seq &&
           hc_shm_ctrl(eng, i)->ann[op->coll_seq % HC_SHM_ANN_SLOTS].hash != op->sig_hash;
}

/* Is writer i's eager data of op still to come: not published, and no announcement of another call
 * says it never will? */
static int eager_waiting(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    return eager_behind(eng, op, i) && !announced_other(eng, op, i);
}

/* Waiting for writer w->rank's (every other rank's) eager data of w->op. */
static uint32_t behind_eager(hc_shm_engine_t *eng, const void *ctx)
{
    const struct eager_wait *w = ctx;

    if (w->rank != HC_SHM_EAGER_ALL)
        return eager_waiting(eng, w->op, w->rank) ? w->rank : eng->nlocal;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me && eager_waiting(eng, w->op, i))
            return i;
    return eng->nlocal;
}

int hc_shm_eager_arrived(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    return !eager_behind(eng, op, i);
}

/* Writer i's signature of op, once behind_eager let it go: the hash with its data, or, where the
 * data did not come or differs, its announcement, which names the call it made (a writer may
 * publish its data before it announces: wait for that too, bounded). */
static HcclResult eager_compare(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i)
{
    unsigned k = op->coll_seq % HC_SHM_ANN_SLOTS;
    struct ann_wait w = {.q = op->coll_seq, .rank = i};
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);

    if (!eager_behind(eng, op, i) && hc_shm_eager_slot(eng, i, op)->hash == op->sig_hash)
        return HCCL_SUCCESS;
    HC_CHECK(hc_shm_wait_for(eng, behind_announced, &w, op));
    return hc_shm_report_mismatch(eng, op, i, &peer->ann_sig[k], op->coll_seq);
}

HcclResult hc_shm_eager_read(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, size_t bytes)
{
    struct eager_wait w = {.op = op, .rank = i};

    for (uint32_t k = 0; bytes > HC_SHM_EAGER_BYTES && k < eng->nlocal; k++) /* no loop for small data */
        if (k == i || (i == HC_SHM_EAGER_ALL && k != eng->me))
            warm_medium(eng, k, bytes);
    HC_CHECK(hc_shm_wait_for(eng, behind_eager, &w, op));
    for (uint32_t k = 0; k < eng->nlocal; k++)
        if (k != eng->me && (k == i || i == HC_SHM_EAGER_ALL))
            HC_CHECK(eager_compare(eng, op, k));
    HC_CHECK(hc_shm_check_failed_peers(eng, op));
    /* A Reduce root compared every rank; a reader of one writer, past two ranks, defers the others. */
    return i != HC_SHM_EAGER_ALL && eng->nlocal > 2 ? defer(eng, op) : HCCL_SUCCESS;
}
