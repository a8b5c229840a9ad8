/*
 * The fast clock (hc_time.h): CLOCK_MONOTONIC extrapolated from the CPU's time-stamp counter.
 *
 * A vDSO clock_gettime under kvm-clock took 27 ns here against 11 for the counter alone, and a
 * stream's policy reads the time three or four times a pipelined round (~0.5 us). The counter is
 * used where the CPU says it runs at a constant rate through sleep states (constant_tsc and
 * nonstop_tsc), else every read is clock_gettime. An anchor pairs a counter value with the
 * monotonic time read next to it; the rate comes from the span between two anchors (the first
 * after CALIBRATE_NS), and a read farther than ANCHOR_NS from the anchor, or before it (another
 * CPU's counter a little behind), takes the slow path, which reads the monotonic clock and sets a
 * new anchor. A thread never sees its own reads go back. Values differ from the monotonic clock by
 * the rate's error over at most ANCHOR_NS (well below a microsecond) where the CPUs' counters are in
 * step, as the kernel's own clock needs them to be; by their skew where they are not. Deadlines keep
 * hc_now_ns.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_time.h"

#if defined(__x86_64__)
#include <x86intrin.h>

#define CALIBRATE_NS (10 * HC_NS_PER_MS)
#define ANCHOR_NS (100 * HC_NS_PER_MS)
#define BRACKET_TRIES 3
#define BRACKET_SLACK 64
#define RETRY_NS HC_NS_PER_MS /* after a bracket too wide for an anchor, the next try */

static struct {
    atomic_int usable;          /* 0: not checked, 1: the counter runs at a constant rate, -1: not */
    atomic_uint seq;            /* odd while the anchor is being written */
    atomic_uint_fast64_t tsc;   /* the anchor: a counter value ... */
    atomic_int_fast64_t ns;     /* ... and the monotonic time next to it (0: none yet) */
    atomic_uint_fast64_t mult;  /* ns per count << 32; 0: the rate is not known yet */
    atomic_uint_fast64_t reach; /* counts from the anchor that a read may extrapolate */
    atomic_int_fast64_t tried_ns; /* when a bracket was last too wide for an anchor */
    uint64_t narrowest;         /* the narrowest anchor bracket seen (paired_read), in counts */
} clk = {.narrowest = UINT64_MAX};

/* Initial-exec: the general model called __tls_get_addr on every read. */
static HC_TLS_FAST int64_t last_read;

/* Whether /proc/cpuinfo's first flags line has both. */
static int counter_usable(void)
{
    char line[4096];
    int ok = 0;
    FILE *f = fopen("/proc/cpuinfo", "re");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") != NULL && strstr(line, " nonstop_tsc") != NULL;
            break;
        }
    }
    fclose(f);
    return ok;
}

/* The monotonic time, and in *tsc_p the counter value next to it: the middle of the tightest of
 * BRACKET_TRIES brackets (counter, clock, counter), whose width in counts goes to *bracket_p. A
 * bracket that a preemption or a trap to the hypervisor widened would put the anchor off by that
 * much (and the rate measured from it by that much over CALIBRATE_NS): an ASan build beside busy
 * programs read values 6-10 us (once 36 ms) off the monotonic clock for whole anchors. */
static int64_t paired_read(uint64_t *tsc_p, uint64_t *bracket_p)
{
    uint64_t best = UINT64_MAX;
    int64_t now = 0;

    for (int i = 0; i < BRACKET_TRIES; i++) {
        uint64_t before = __rdtsc();
        int64_t ns = hc_now_ns();
        uint64_t width = __rdtsc() - before;
        if (width < best) {
            best = width;
            now = ns;
            *tsc_p = before + width / 2;
        }
    }
    *bracket_p = best;
    return now;
}

/* The monotonic clock, and (where the counter is usable) a new anchor, with the rate measured
 * since the last one (kept while that is under CALIBRATE_NS ago). One thread writes at a time; the
 * others read the monotonic clock meanwhile. An anchor is set only from a bracket at most twice the
 * narrowest seen so far (plus BRACKET_SLACK counts); else this read just returns the clock, and so
 * do the reads of the next RETRY_NS (one clock read each, not three brackets). */
static int64_t slow_read(void)
{
    int usable = atomic_load_explicit(&clk.usable, memory_order_relaxed);
    unsigned seq;
    uint64_t tsc = 0, counts, bracket;
    int64_t now, anchor_ns;

    if (usable == 0) {
        usable = counter_usable() ? 1 : -1;
        atomic_store_explicit(&clk.usable, usable, memory_order_relaxed);
    }
    now = hc_now_ns();
    anchor_ns = atomic_load_explicit(&clk.ns, memory_order_relaxed);
    if (usable < 0 || (anchor_ns != 0 && now - anchor_ns < CALIBRATE_NS) ||
        now - atomic_load_explicit(&clk.tried_ns, memory_order_relaxed) < RETRY_NS)
        return now; /* no counter, or too early for another anchor or another try */
    seq = atomic_load_explicit(&clk.seq, memory_order_relaxed);
    if ((seq & 1) != 0 || !atomic_compare_exchange_strong_explicit(&clk.seq, &seq, seq + 1, memory_order_acquire,
                                                                   memory_order_relaxed))
        return now;
    anchor_ns = atomic_load_explicit(&clk.ns, memory_order_relaxed);
    if (anchor_ns == 0 || now - anchor_ns >= CALIBRATE_NS) {
        now = paired_read(&tsc, &bracket);
        if (bracket < clk.narrowest)
            clk.narrowest = bracket;
        counts = tsc - atomic_load_explicit(&clk.tsc, memory_order_relaxed);
        if (bracket <= 2 * clk.narrowest + BRACKET_SLACK) {
            if (anchor_ns != 0 && (int64_t)counts > 0) {
                uint64_t mult = (uint64_t)(((unsigned __int128)(now - anchor_ns) << 32) / counts);
                atomic_store_explicit(&clk.reach,
                                      mult != 0 ? (uint64_t)(((unsigned __int128)ANCHOR_NS << 32) / mult) : 0,
                                      memory_order_relaxed);
                atomic_store_explicit(&clk.mult, mult, memory_order_relaxed);
            }
            atomic_store_explicit(&clk.tsc, tsc, memory_order_relaxed);
            atomic_store_explicit(&clk.ns, now, memory_order_relaxed);
        } else {
            atomic_store_explicit(&clk.tried_ns, now, memory_order_relaxed);
        }
    }
    atomic_store_explicit(&clk.seq, seq + 2, memory_order_release);
    return now;
}

int64_t hc_fast_now_ns(void)
{
    int64_t now = 0;
    unsigned seq = atomic_load_explicit(&clk.seq, memory_order_acquire);
    uint64_t mult = atomic_load_explicit(&clk.mult, memory_order_relaxed);

    if (mult != 0 && (seq & 1) == 0) {
        uint64_t tsc = atomic_load_explicit(&clk.tsc, memory_order_relaxed);
        int64_t ns = atomic_load_explicit(&clk.ns, memory_order_relaxed);
        uint64_t reach = atomic_load_explicit(&clk.reach, memory_order_relaxed);
        uint64_t counts;
        atomic_thread_fence(memory_order_acquire);
        counts = __rdtsc() - tsc;
        if (atomic_load_explicit(&clk.seq, memory_order_relaxed) == seq && counts < reach)
            now = ns + (int64_t)((counts * mult) >> 32);
    }
    if (now == 0)
        now = slow_read();
    if (now < last_read)
        return last_read;
    last_read = now;
    return now;
}

#else

int64_t hc_fast_now_ns(void)
{
    return hc_now_ns();
}

#endif
