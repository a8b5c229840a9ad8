/*
 * Copies into shared memory that other ranks read next (a slot staged, a ring chunk), with ordinary
 * or non-temporal stores, whichever this rank measures faster.
 *
 * An ordinary store first fetches its line for writing. Where the line was last read by a core
 * that shares no cache with the writer (another CCD of an AMD EPYC, another socket), each fetch
 * crosses the chip and invalidates the reader's copy, and a copy runs at the rate those round
 * trips allow. On an EPYC Milan guest whose two vCPUs sat on different CCDs (a cache-line exchange
 * 0.23-0.28 us, against 0.03-0.07 when they shared one), 2-rank calls on plain memory through the
 * slots and rings took 2-3.5x longer with ordinary stores than with non-temporal ones (whole lines
 * to memory, nothing fetched): Send/Recv 1 MiB 270-333 us against 138-147, AllGather 149-201
 * against 83-98, Broadcast 177-283 against 65-82, and from 16 KiB alike. Where writer and readers
 * share a cache the ordinary stores win, 1.3-2x (the readers find the lines in that cache instead
 * of memory): Send/Recv 1 MiB 89-176 against 170-191, AllGather 66-77 against 111-138. A guest's
 * vCPUs move between the two placements within seconds, and a rank's own copy time does not tell
 * them apart (at 64 KiB its ordinary stores were the slower in both, the readers' cost decided), so
 * each rank times its ops, per byte copied, from an op's first copy of WRITE_MEASURED_MIN bytes or
 * more to that of the next op of its class: what the op cost its readers is in it (a Broadcast
 * root's op ends before its reader has copied, and its next op waits for the slot), and what the
 * program does between the calls, alike for both kinds. It keeps the kind whose recent ops were
 * faster (the least of the last HC_SHM_WRITER_SAMPLES) and tries the other now and then: after
 * PROBE_FIRST ops, twice as many each time it loses, up to PROBE_MAX, and at once when the kept
 * kind's recent ops got slower than the other's were or another class switched. A probe of
 * ordinary stores is two ops, the second timed: the first after non-temporal ones finds its lines
 * in no cache and fetches them cheaply. Non-temporal stores fetch nothing, so their first op is
 * timed and a probe of them is one op (the probes a shared cache pays for). Classes are per
 * collective and size (a program interleaves ops of several, each with its own time per byte); a
 * class used for the first time starts as the nearest one that has run.
 *
 * Copies below WRITE_MEASURED_MIN, and every copy where the stores are fixed (HOSTCCL_STREAM_STORES)
 * or cannot be chosen (not x86-64), are ordinary.
 */
#include "hc_log.h"
#include "hc_time.h"
#include "shm_internal.h"

#define WRITE_MEASURED_LOG2 14 /* 16 KiB */
#define WRITE_MEASURED_MIN (1u << WRITE_MEASURED_LOG2)
#define PROBE_FIRST 8u
#define PROBE_MAX 1024u

/* The class of an op: its collective and the size class of its data (the count of its type; for
 * ops without one, as point-to-point batches, the first copy), WRITE_MEASURED_MIN and less: 0. */
static hc_shm_writer_class_t *class_of(hc_shm_writer_t *w, const hc_op_t *op, size_t first)
{
    uint64_t bytes = op->count != 0 ? op->count * hc_dtype_size(op->dtype) : first;
    uint32_t bit = bytes > WRITE_MEASURED_MIN ? (uint32_t)(63 - __builtin_clzll(bytes)) - WRITE_MEASURED_LOG2 : 0;

    return &w->classes[op->sig.coll][bit < HC_SHM_WRITER_CLASSES ? bit : HC_SHM_WRITER_CLASSES - 1];
}

static uint32_t estimate(const hc_shm_writer_class_t *c, int kind)
{
    return hc_shm_least_sample(c->ns[kind], HC_SHM_WRITER_SAMPLES);
}

/* Did kind take less than 7/8 of the other's time per byte? */
static int faster(const hc_shm_writer_class_t *c, int kind)
{
    return hc_shm_estimate_below(estimate(c, kind), estimate(c, !kind));
}

/* A class's first op: it starts as the nearest size class of its collective that has run, else as
 * the same size class of another collective (the placement that decided there holds for every op),
 * else with ordinary stores, the other kind tried after PROBE_FIRST ops. */
static void first_op(hc_shm_writer_t *w, hc_shm_writer_class_t *c)
{
    size_t coll = (size_t)(c - &w->classes[0][0]) / HC_SHM_WRITER_CLASSES;
    int at = (int)((size_t)(c - &w->classes[0][0]) % HC_SHM_WRITER_CLASSES);
    const hc_shm_writer_class_t *row = w->classes[coll], *near = NULL;

    for (int d = 1; d < HC_SHM_WRITER_CLASSES && near == NULL; d++) {
        if (at - d >= 0 && row[at - d].probe_every != 0)
            near = &row[at - d];
        else if (at + d < HC_SHM_WRITER_CLASSES && row[at + d].probe_every != 0)
            near = &row[at + d];
    }
    for (size_t k = 0; k < HC_COLL_COUNT && near == NULL; k++)
        if (w->classes[k][at].probe_every != 0)
            near = &w->classes[k][at];
    c->probe_every = PROBE_FIRST;
    if (near != NULL) {
        c->stream = c->last = near->stream;
        c->probe_every = near->probe_every;
    }
}

/* A class found the other kind faster: the others try it at their next op. */
static void tell_classes(hc_shm_writer_t *w, int kind)
{
    for (size_t k = 0; k < HC_COLL_COUNT; k++)
        for (int i = 0; i < HC_SHM_WRITER_CLASSES; i++)
            if (w->classes[k][i].probe_every != 0 && w->classes[k][i].stream != kind)
                w->classes[k][i].since_probe = w->classes[k][i].probe_every;
}

/* The class's last op took from its first measured copy until now: a sample of its kind, unless it
 * failed or was the first ordinary op after non-temporal ones, and what it decides.
 * A probe's sample switches when faster by the margin; a kept kind's when slower than the other's
 * last makes the next op a probe. */
static void take_sample(hc_shm_writer_t *w, hc_shm_writer_class_t *c, int64_t now)
{
    int kind = c->last;

    if (!c->open_ok || !c->open_kept || now <= c->open_since_ns || c->open_bytes == 0)
        return;
    hc_shm_add_sample(c->ns[kind], &c->next[kind], HC_SHM_WRITER_SAMPLES, (uint64_t)(now - c->open_since_ns),
                      c->open_bytes);
    if (kind == c->stream) {
        c->since_probe++;
        if (faster(c, !kind))
            c->since_probe = c->probe_every;
        return;
    }
    c->since_probe = 0;
    if (faster(c, kind)) {
        c->stream = (uint8_t)kind;
        c->probe_every = PROBE_FIRST;
        tell_classes(w, kind);
        HC_DEBUG("copies of %llu+ bytes into shared memory: %s stores (%.1f us per MiB copied, the other %.1f)",
                 (unsigned long long)WRITE_MEASURED_MIN << ((size_t)(c - &w->classes[0][0]) % HC_SHM_WRITER_CLASSES),
                 kind ? "non-temporal" : "ordinary", estimate(c, kind) * 16 / 1e3, estimate(c, !kind) * 16 / 1e3);
    } else {
        c->probe_every = c->probe_every * 2 < PROBE_MAX ? c->probe_every * 2 : PROBE_MAX;
    }
}

/* The kind op's copies take, decided at its first measured copy (of `first` bytes), after the
 * class's last op is sampled. */
static void begin_op(hc_shm_writer_t *w, const hc_op_t *op, size_t first)
{
    hc_shm_writer_class_t *c = class_of(w, op, first);
    int64_t now = hc_fast_now_ns();
    int probe;

    if (c->probe_every == 0)
        first_op(w, c);
    else
        take_sample(w, c, now);
    probe = c->since_probe >= c->probe_every;
    w->kind = c->stream ^ (uint8_t)probe;
    if (probe && c->last != w->kind) /* a probe begins: compared afresh, the old samples may be from
                                      * another placement */
        memset(c->ns[w->kind], 0, sizeof(c->ns[w->kind]));
    c->open_kept = c->last == w->kind || w->kind == 1;
    c->last = w->kind;
    c->open_ok = 0;
    c->open_since_ns = now;
    c->open_bytes = 0;
    w->seq = op->seq;
    w->cls = c;
}

void hc_shm_write(hc_shm_engine_t *eng, const hc_op_t *op, void *dst, const void *src, size_t n)
{
    hc_shm_writer_t *w = &eng->writer;

    if (w->fixed == 1) {
        hc_copy_stream(dst, src, n);
        return;
    }
    if (w->fixed == 0 || !HC_COPY_HAS_STREAM || (w->seq != op->seq && n < WRITE_MEASURED_MIN)) {
        hc_copy(dst, src, n);
        return;
    }
    if (w->seq != op->seq)
        begin_op(w, op, n);
    w->cls->open_bytes += n;
    if (w->kind)
        hc_copy_stream(dst, src, n);
    else
        hc_copy(dst, src, n);
}

void hc_shm_write_op_end(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult res)
{
    hc_shm_writer_t *w = &eng->writer;

    if (w->seq != op->seq)
        return;
    w->seq = 0;
    w->cls->open_ok = res == HCCL_SUCCESS;
}
