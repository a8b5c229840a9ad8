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
 * each rank times whole ops: from its first copy of WRITE_MEASURED_MIN bytes or more (or the run's
 * start, for an op started at its launch) to the op's end, per size class of the bytes it copied.
 * It keeps the kind whose recent ops were faster and tries the other now and then: after
 * PROBE_FIRST ops, twice as many each time it loses, up to PROBE_MAX, and at once when the kept
 * kind's recent ops got slower than the other's were or another class switched. A probe is two
 * ops, the second timed: the first pays for the other kind's last op. An op's class is predicted
 * from the last op's (a program repeats its calls); an op whose bytes fall in another class is no
 * sample. A class used for the first time starts as the nearest one that has run.
 *
 * Copies below WRITE_MEASURED_MIN, and every copy where the stores are fixed (HOSTCCL_STREAM_STORES)
 * or cannot be chosen (not x86-64), are ordinary.
 */
#include "hc_log.h"
#include "hc_time.h"
#include "shm_internal.h"

#define WRITE_MEASURED_MIN (16u * 1024u)
#define PROBE_FIRST 8u
#define PROBE_MAX 128u
/* Switch when the other kind took less than 7/8 of the kept kind's time per byte. */
#define SWITCH_MARGIN_NUM 7u
#define SWITCH_MARGIN_DEN 8u

/* The class of an op that copied `bytes` (>= WRITE_MEASURED_MIN) into shared memory. */
static uint8_t class_of(uint64_t bytes)
{
    uint32_t bit = (uint32_t)(63 - __builtin_clzll(bytes)) - 14; /* 16 KiB: 0 */

    return (uint8_t)(bit < HC_SHM_WRITER_CLASSES ? bit : HC_SHM_WRITER_CLASSES - 1);
}

static uint32_t estimate(const hc_shm_writer_class_t *c, int kind)
{
    return hc_shm_least_sample(c->ns[kind], HC_SHM_WRITER_SAMPLES);
}

static int faster(const hc_shm_writer_class_t *c, int kind)
{
    uint64_t mine = estimate(c, kind), other = estimate(c, !kind);

    return mine != UINT32_MAX && mine * SWITCH_MARGIN_DEN < other * SWITCH_MARGIN_NUM;
}

/* A class's first op: it starts as the nearest class that has run (the placement that decided there
 * holds for every size), else with ordinary stores after PROBE_FIRST ops. */
static void first_op(hc_shm_writer_t *w, hc_shm_writer_class_t *c)
{
    int at = (int)(c - w->classes);

    c->probe_every = PROBE_FIRST;
    for (int d = 1; d < HC_SHM_WRITER_CLASSES; d++) {
        const hc_shm_writer_class_t *near = NULL;
        if (at - d >= 0 && w->classes[at - d].probe_every != 0)
            near = &w->classes[at - d];
        else if (at + d < HC_SHM_WRITER_CLASSES && w->classes[at + d].probe_every != 0)
            near = &w->classes[at + d];
        if (near != NULL) {
            c->stream = c->last = near->stream;
            c->probe_every = near->probe_every;
            return;
        }
    }
}

/* A class found the other kind faster: the others try it at their next op. */
static void tell_classes(hc_shm_writer_t *w, int kind)
{
    for (int k = 0; k < HC_SHM_WRITER_CLASSES; k++)
        if (w->classes[k].probe_every != 0 && w->classes[k].stream != kind)
            w->classes[k].since_probe = w->classes[k].probe_every;
}

/* The kind op's copies take, decided at its first measured copy. */
static void begin_timing(hc_shm_writer_t *w, const hc_op_t *op)
{
    hc_shm_writer_class_t *c = &w->classes[w->next_class];
    int probe;

    if (c->probe_every == 0)
        first_op(w, c);
    probe = c->since_probe >= c->probe_every;
    w->kind = c->stream ^ (uint8_t)probe;
    if (probe && c->last != w->kind) /* a probe begins: compared afresh, the old samples may be from
                                      * another placement */
        memset(c->ns[w->kind], 0, sizeof(c->ns[w->kind]));
    w->seq = op->seq;
    w->cls = w->next_class;
    w->bytes = 0;
    w->since_ns = hc_fast_now_ns();
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
        begin_timing(w, op);
    w->bytes += n;
    if (w->kind)
        hc_copy_stream(dst, src, n);
    else
        hc_copy(dst, src, n);
}

void hc_shm_write_op_begin(hc_shm_engine_t *eng, const hc_op_t *op)
{
    if (eng->writer.seq == op->seq) /* started at its launch: what the program did since is not the op's */
        eng->writer.since_ns = hc_fast_now_ns();
}

void hc_shm_write_op_end(hc_shm_engine_t *eng, const hc_op_t *op, HcclResult res)
{
    hc_shm_writer_t *w = &eng->writer;
    hc_shm_writer_class_t *c = &w->classes[w->cls];
    int64_t ns;
    uint64_t per;
    int kind = w->kind;

    if (w->seq != op->seq)
        return;
    w->seq = 0;
    ns = hc_fast_now_ns() - w->since_ns;
    w->next_class = class_of(w->bytes < WRITE_MEASURED_MIN ? WRITE_MEASURED_MIN : w->bytes);
    if (res != HCCL_SUCCESS || w->next_class != w->cls)
        return; /* no sample; the next op is predicted from this one */
    if (c->last != kind) {
        c->last = (uint8_t)kind; /* the first op after a change pays for the other kind's last */
        return;
    }
    per = ns <= 0 ? 1 : (uint64_t)ns * 65536u / w->bytes; /* ns per 64 KiB */
    c->ns[kind][c->next[kind]] = per == 0 ? 1 : per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
    c->next[kind] = (uint8_t)((c->next[kind] + 1) % HC_SHM_WRITER_SAMPLES);
    if (kind == c->stream) {
        c->since_probe++;
        if (faster(c, !kind))
            c->since_probe = c->probe_every; /* the kept kind got slower than the other was: try it */
        return;
    }
    c->since_probe = 0; /* a probe's timed op */
    if (faster(c, kind)) {
        c->stream = (uint8_t)kind;
        c->probe_every = PROBE_FIRST;
        tell_classes(w, kind);
        HC_DEBUG("copies of %llu+ bytes into shared memory: %s stores (%.1f us per MiB of op, the other %.1f)",
                 16384ull << w->cls, kind ? "non-temporal" : "ordinary", estimate(c, kind) * 16 / 1e3,
                 estimate(c, !kind) * 16 / 1e3);
    } else {
        c->probe_every = c->probe_every * 2 < PROBE_MAX ? c->probe_every * 2 : PROBE_MAX;
    }
}
