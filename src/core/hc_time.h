/* Monotonic time and deadlines. Every wait in hostccl has a deadline (0 = none). */
#ifndef HC_TIME_H
#define HC_TIME_H

#include <stdint.h>
#include <time.h>

#define HC_NS_PER_MS 1000000LL
#define HC_NS_PER_S 1000000000LL

static inline int64_t hc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * HC_NS_PER_S + ts.tv_nsec;
}

/* The monotonic clock for timings that are read often (a stream's policy: gaps, task and wake-up
 * times): hc_now_ns extrapolated from the CPU's time-stamp counter where it runs at a constant rate
 * (time.c), within a microsecond of it and a few times cheaper to read; hc_now_ns elsewhere. Never
 * for deadlines. A thread's reads never go back. */
int64_t hc_fast_now_ns(void);

/* The coarse clock: a few ns to read against ~30 (kvm-clock) for hc_now_ns, a few ms of resolution;
 * for bookkeeping on every op's path ("in this op for 30 s"), never for deadlines or timings. */
static inline int64_t hc_coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * HC_NS_PER_S + ts.tv_nsec;
}

/* Deadline seconds from now; seconds <= 0 means no deadline (returns 0). */
static inline int64_t hc_deadline_after_s(int64_t seconds)
{
    return seconds > 0 ? hc_now_ns() + seconds * HC_NS_PER_S : 0;
}

static inline int hc_deadline_passed(int64_t deadline_ns)
{
    return deadline_ns != 0 && hc_now_ns() >= deadline_ns;
}

/* Milliseconds left before the deadline, for poll(): -1 when there is none, 0 when passed. */
static inline int hc_deadline_ms_left(int64_t deadline_ns)
{
    int64_t left;

    if (deadline_ns == 0)
        return -1;
    left = (deadline_ns - hc_now_ns() + HC_NS_PER_MS - 1) / HC_NS_PER_MS;
    if (left <= 0)
        return 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

#endif /* HC_TIME_H */
