/* Who runs a stream's tasks: the measurement and the choice (rt_policy.h says what and why). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hc_config.h"
#include "hc_log.h"
#include "hc_time.h"
#include "rt_policy.h"

#define SHORT_EPOCHS_TO_SYNC 4 /* short-gap epochs in a row that bring the synchronous pattern back */
/* Long-gap epochs in a row that end the synchronous pattern. One is not enough: a caller preempted
 * between its enqueue and its synchronisation shows one long gap now and then on a loaded machine
 * (measured: 2 ranks, 8-byte blocking AllReduce, load 11 on 2 CPUs: one flip was enough to keep the
 * stream in the overlap pattern, handing every op to the worker, 1.10-1.39 us per op against
 * 0.81-0.86 with the caller fixed). A program that computes between the two does it every time. */
#define LONG_EPOCHS_TO_OVERLAP 2
#define STALLS_TO_OVERLAP 1    /* backstop runs that end the synchronous pattern (hc_rt_policy_stalled) */
#define TRIAL_EPOCHS 4         /* epochs of a trial of the other arm */
#define PERIOD_FIRST 4         /* epochs of the worker before the first trial of the caller */
#define PERIOD_MAX 256
#define MARGIN_PERCENT 3       /* the other arm must be this much faster to be kept */
#define IDLE_PERCENT 50        /* a caller off its CPU this much of an epoch, having slept, sleeps */

static int64_t cpu_clock_ns(clockid_t clock)
{
    struct timespec ts;

    if (clock_gettime(clock, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * The CPU time of the process's threads but this one and the stream's worker, each thread's clock
 * read on its own (-1: /proc/self/task could not be read). The process clock would be one read,
 * but it brings a thread running on another CPU up to date only at that CPU's tick: over an epoch
 * of a few ms it was off by up to a tick a CPU (4 threads computing on 2 CPUs: below half a CPU in
 * 716 of 900 windows of 1 ms, where 1.0-1.6 were theirs), and a sample found a CPU spare where
 * none was. Reading a running thread's own clock brings it up to date. A thread that ends between
 * two points takes its time with it (that sample may find a CPU spare; the next looks again). Cost:
 * 14 us with 3 threads, 24 with 8 (2-CPU virtual machine), at the two points of a sampled epoch.
 */
static int others_cpu_ns(const hc_rt_policy_t *p, int64_t *sum_p)
{
    union {
        struct dirent64 align;
        char bytes[4096];
    } buf;
    clockid_t own, worker = 0;
    int64_t sum = 0;
    long n;
    int fd;

    if (pthread_getcpuclockid(pthread_self(), &own) != 0 ||
        (p->worker_known && pthread_getcpuclockid(p->worker, &worker) != 0))
        return -1;
    fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while ((n = syscall(SYS_getdents64, fd, buf.bytes, sizeof(buf.bytes))) > 0) {
        for (long at = 0; at < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf.bytes + at);
            long tid = d->d_name[0] >= '1' && d->d_name[0] <= '9' ? strtol(d->d_name, NULL, 10) : 0;
            /* A thread's CPU clock: the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as
             * pthread_getcpuclockid makes it. */
            clockid_t clock = (clockid_t)((~(clockid_t)tid) * 8 + 6);

            at += d->d_reclen;
            if (tid > 0 && clock != own && clock != worker)
                sum += cpu_clock_ns(clock); /* 0 for a thread that has just ended */
        }
    }
    close(fd);
    if (n < 0)
        return -1;
    *sum_p = sum;
    return 0;
}

void hc_rt_policy_sample_point(const hc_rt_policy_t *p, hc_rt_sample_point_t *point)
{
    struct rusage ru;

    if (others_cpu_ns(p, &point->others_cpu_ns) != 0) {
        clockid_t worker_clock;
        int64_t worker_ns = p->worker_known && pthread_getcpuclockid(p->worker, &worker_clock) == 0
                                ? cpu_clock_ns(worker_clock)
                                : 0;
        point->others_cpu_ns =
            cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - worker_ns;
    }
    /* The caller's clock last, next to the wall clock: the wall time and the caller's CPU time span
     * the same stretch, the reads of the others outside it. */
    point->cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    point->sleeps = getrusage(RUSAGE_THREAD, &ru) == 0 ? (int64_t)ru.ru_nvcsw : 0;
    point->thread = pthread_self();
    point->ns = hc_fast_now_ns();
}

/*
 * Whether the caller slept between `from` and `to`: off its CPU most of the time, and not only
 * because it was preempted (a voluntary context switch, a sleep or a wait, happened). A caller that
 * computes while the worker takes its core is preempted, not asleep, and its CPU time alone would
 * call it idle: with both ranks computing on their only core, a rank's CPU time between enqueue and
 * synchronisation was below half the wall time, so it never tried the caller as runner, and
 * enqueue + compute + synchronise took 1.24-1.32x the sequential time at 1 MiB (2 ranks,
 * bench/overlap.py). (The run-queue delay of /proc/thread-self/schedstat would tell the two apart
 * directly, but the kernel brings it up to date only at a later context switch.)
 */
static int slept_between(const hc_rt_sample_point_t *from, const hc_rt_sample_point_t *to)
{
    int64_t wall = to->ns - from->ns, off_cpu = wall - (to->cpu_ns - from->cpu_ns);

    return wall > 0 && to->sleeps > from->sleeps && off_cpu * 100 > wall * IDLE_PERCENT;
}

static atomic_int cpus_full, cpus_shared;

void hc_rt_policy_cpus_full(int delta)
{
    atomic_fetch_add_explicit(&cpus_full, delta, memory_order_relaxed);
}

void hc_rt_policy_cpus_shared(int delta)
{
    atomic_fetch_add_explicit(&cpus_shared, delta, memory_order_relaxed);
}

int hc_rt_policy_cpus_shared_now(void)
{
    return atomic_load_explicit(&cpus_shared, memory_order_relaxed) > 0;
}

/*
 * Whether the program's other threads kept the caller's other CPUs busy between two points (less
 * than half a CPU of them left idle on average): a multi-threaded compute (BLAS, torch's intra-op
 * threads) that fills the rank's share of the CPUs, where the worker would take a CPU from it. The
 * caller's own CPU time and the worker's do not count (the worker runs the op in the first epoch
 * of a spell).
 */
static int others_fill_cpus(const hc_rt_sample_point_t *from, const hc_rt_sample_point_t *to, int cpus)
{
    int64_t wall = to->ns - from->ns, others = to->others_cpu_ns - from->others_cpu_ns;

    return wall > 0 && (int64_t)(cpus - 1) * wall - others < wall / 2;
}

/* Whether no CPU is spare for the stream's worker: a communicator's local ranks fill every CPU they
 * may use, this thread and the worker may run only on one and the same CPU, or (given the epoch's
 * two points) the program's other threads kept the other CPUs busy. */
static int no_spare_cpu(const hc_rt_policy_t *p, const hc_rt_sample_point_t *from, const hc_rt_sample_point_t *to)
{
    cpu_set_t mine, its;

    if (atomic_load_explicit(&cpus_full, memory_order_relaxed) > 0)
        return 1;
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
        return 0;
    if (CPU_COUNT(&mine) == 1)
        return p->worker_known && pthread_getaffinity_np(p->worker, sizeof(its), &its) == 0 &&
               CPU_EQUAL(&mine, &its);
    return from != NULL && others_fill_cpus(from, to, CPU_COUNT(&mine));
}

void hc_rt_policy_set_worker(hc_rt_policy_t *p, pthread_t worker)
{
    p->worker = worker;
    p->worker_known = 1;
}

static int forced_runner(void)
{
    const char *v = hc_config_str(HC_CFG_PROGRESS);

    if (v == NULL || strcasecmp(v, "auto") == 0 || v[0] == '\0')
        return -1;
    if (strcasecmp(v, "worker") == 0)
        return HC_RT_RUN_WORKER;
    if (strcasecmp(v, "caller") == 0)
        return HC_RT_RUN_CALLER;
    HC_WARN("HOSTCCL_PROGRESS=%s is not auto, worker or caller; using auto", v);
    return -1;
}

void hc_rt_policy_init(hc_rt_policy_t *p)
{
    memset(p, 0, sizeof(*p));
    p->forced = forced_runner();
    p->sync_pattern = 1; /* most programs enqueue and synchronise; the gaps tell otherwise */
    p->arm = HC_RT_RUN_WORKER;
    p->period = PERIOD_FIRST;
    p->spare_cpu = -1;
}

/* The runner of an epoch opened now. */
static hc_rt_runner_t current_runner(const hc_rt_policy_t *p)
{
    if (p->forced >= 0)
        return (hc_rt_runner_t)p->forced;
    if (p->sync_pattern)
        return HC_RT_RUN_CALLER;
    return p->trial_left > 0 ? (hc_rt_runner_t)!p->arm : p->arm;
}

int hc_rt_policy_caller_runs(const hc_rt_policy_t *p)
{
    return (p->epoch_start_ns != 0 ? p->epoch_arm : current_runner(p)) == HC_RT_RUN_CALLER;
}

int hc_rt_policy_claim_allowed(const hc_rt_policy_t *p)
{
    if (hc_rt_policy_caller_runs(p))
        return 1;
    if (p->forced >= 0)
        return 0;
    /* The worker runs: only when its wake-up costs about what the task does. */
    return p->task_ns > 0 && p->wake_ns > 0 && p->task_ns < 2 * p->wake_ns;
}

int hc_rt_policy_spins(const hc_rt_policy_t *p)
{
    return p->spare_cpu > 0 && !p->sync_pattern && !hc_rt_policy_caller_runs(p);
}

int hc_rt_policy_times_tasks(const hc_rt_policy_t *p)
{
    return !p->sync_pattern;
}

/* Exponentially weighted average with weight 1/8 for the new sample. */
static int64_t ewma(int64_t avg, int64_t sample)
{
    return avg == 0 ? sample : avg + (sample - avg) / 8;
}

void hc_rt_policy_woke(hc_rt_policy_t *p, int64_t now_ns)
{
    if (p->kick_ns == 0)
        p->kick_ns = now_ns;
}

void hc_rt_policy_task_ran(hc_rt_policy_t *p, int64_t start_ns, int64_t end_ns, int by_worker)
{
    if (by_worker && p->kick_ns != 0 && start_ns > p->kick_ns)
        p->wake_ns = ewma(p->wake_ns, start_ns - p->kick_ns);
    p->kick_ns = 0; /* a task run by a synchroniser leaves no wake-up to time */
    if (end_ns > start_ns)
        p->task_ns = ewma(p->task_ns, end_ns - start_ns);
}

int hc_rt_policy_wants_time(hc_rt_policy_t *p, int queued)
{
    (void)queued;
    /* Once a long gap was seen, every epoch is timed until the next one decides. */
    if (p->epoch_start_ns != 0 || !p->sync_pattern || p->long_epochs > 0)
        return 1;
    return ++p->sample_tick % HC_RT_SAMPLE_EVERY == 0;
}

void hc_rt_policy_launched(hc_rt_policy_t *p, int64_t now_ns)
{
    if (p->epoch_start_ns == 0) {
        p->epoch_start_ns = now_ns;
        p->epoch_arm = current_runner(p);
        if (p->sample == HC_RT_SAMPLE_WANTED)
            hc_rt_policy_sample_point(p, &p->at_enq);
        else
            p->at_enq.ns = 0;
    }
    p->last_enq_ns = now_ns;
}

/* The overlap pattern begins: the worker runs (progress first: the task starts at once), and the
 * first epoch is sampled (next_epoch), so that a caller that computes while no CPU is spare for the
 * worker takes over after one epoch. Each spell starts so: a caller kept as runner from an earlier spell would
 * make the peers of a caller that now sleeps wait for the backstop (1 MiB, rank 0 sleeping after
 * enqueueing: the peer's median wait 0.25-0.32 -> 1.4-1.7 ms). */
static void enter_overlap(hc_rt_policy_t *p)
{
    p->sync_pattern = 0;
    p->short_epochs = 0;
    p->long_epochs = 0;
    p->stalls = 0;
    p->arm = HC_RT_RUN_WORKER;
    p->epochs = 0;
    p->period = PERIOD_FIRST;
    p->trial_left = 0;
    p->n[0] = p->n[1] = 0;
    p->sample = HC_RT_SAMPLE_WANTED;
}

static void close_epoch(hc_rt_policy_t *p)
{
    p->epoch_start_ns = 0;
    p->at_enq.ns = 0;
    p->epoch_discard = 0;
}

int hc_rt_policy_sampling(const hc_rt_policy_t *p)
{
    return p->at_enq.ns != 0;
}

/* In the overlap pattern, one more epoch whose gap was short or not: whether that brought the
 * synchronous pattern back (SHORT_EPOCHS_TO_SYNC in a row; the open epoch is closed unrecorded). */
static int short_gap_ends_overlap(hc_rt_policy_t *p, int short_gap)
{
    p->short_epochs = short_gap ? p->short_epochs + 1 : 0;
    if (p->short_epochs < SHORT_EPOCHS_TO_SYNC || p->forced >= 0)
        return 0;
    p->sync_pattern = 1;
    p->long_epochs = 0;
    /* What the spell's samples said of the CPUs holds for the spell only: a single mistaken
     * finding of none spare would otherwise keep gaps of 5-20 us short for good (2 of 5 runs of a
     * 64 KiB AllReduce on a 16-CPU guest hid nothing). */
    p->spare_cpu = -1;
    close_epoch(p);
    return 1;
}

/* Whether a synchronisation gap-ns after the last enqueue is short (the synchronous pattern). Where a
 * CPU is spare for the worker (known from the spell's last sample, else from the CPUs alone), from
 * HC_RT_SPARE_GAP_NS on it is not: the worker, spinning there, starts the task at once. */
static int is_short_gap(hc_rt_policy_t *p, int64_t gap)
{
    if (gap >= HC_RT_SHORT_GAP_NS)
        return 0;
    if (gap < HC_RT_SPARE_GAP_NS || p->spare_cpu == 0)
        return 1;
    return p->spare_cpu < 0 && no_spare_cpu(p, NULL, NULL);
}

int hc_rt_policy_sync_begin(hc_rt_policy_t *p, int64_t entry_ns, const hc_rt_sample_point_t *before)
{
    int short_gap;

    if (p->epoch_start_ns == 0)
        return 0;
    short_gap = is_short_gap(p, entry_ns - p->last_enq_ns);
    if (p->sync_pattern) {
        close_epoch(p);
        p->stalls = 0;
        p->long_epochs = short_gap ? 0 : p->long_epochs + 1;
        if (p->long_epochs >= LONG_EPOCHS_TO_OVERLAP && p->forced < 0)
            enter_overlap(p);
        return 0;
    }
    if (p->at_enq.ns != 0) {
        /* Was the caller busy between its first enqueue and now (computing, or preempted while it
         * computes, on the core the worker would need), or asleep? */
        hc_rt_sample_point_t now;
        if (before == NULL || before->ns == 0) {
            hc_rt_policy_sample_point(p, &now);
            before = &now;
        }
        /* Another thread synchronises than enqueued: its clocks say nothing of the launcher's, and
         * the trials decide. */
        if (!pthread_equal(before->thread, p->at_enq.thread))
            p->sample = HC_RT_SAMPLE_NONE;
        else if (slept_between(&p->at_enq, before))
            p->sample = HC_RT_SAMPLE_SLEPT;
        else
            p->sample = no_spare_cpu(p, &p->at_enq, before) ? HC_RT_SAMPLE_SHARED : HC_RT_SAMPLE_BUSY;
        if (p->sample == HC_RT_SAMPLE_SHARED || p->sample == HC_RT_SAMPLE_BUSY)
            p->spare_cpu = p->sample == HC_RT_SAMPLE_BUSY;
        p->at_enq.ns = 0;
    }
    if (short_gap_ends_overlap(p, short_gap))
        return 0;
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

static int64_t median_of(const int64_t *ring, uint32_t n)
{
    int64_t v[HC_RT_WINDOW];
    uint32_t k = n < HC_RT_WINDOW ? n : HC_RT_WINDOW;

    memcpy(v, ring, k * sizeof(*v));
    /* Insertion sort: at most HC_RT_WINDOW values. */
    for (uint32_t i = 1; i < k; i++)
        for (uint32_t j = i; j > 0 && cmp_i64(&v[j - 1], &v[j]) > 0; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[k / 2];
}

/* The trial is over: keep the faster arm. */
/* The other runner is kept from now on; the next trial comes after a short period. */
static void switch_arm(hc_rt_policy_t *p, hc_rt_runner_t arm)
{
    p->arm = arm;
    p->epochs = 0;
    p->period = 2 * PERIOD_FIRST;
    p->switches++;
}

/* The kept runner holds: the next trial comes twice as late, up to PERIOD_MAX epochs. */
static void back_off(hc_rt_policy_t *p)
{
    p->epochs = 0;
    p->period = p->period * 2 < PERIOD_MAX ? p->period * 2 : PERIOD_MAX;
}

static void compare(hc_rt_policy_t *p)
{
    hc_rt_runner_t other = (hc_rt_runner_t)!p->arm;
    int64_t kept = p->n[p->arm] > 0 ? median_of(p->cycle_ns[p->arm], p->n[p->arm]) : INT64_MAX;
    int64_t tried = median_of(p->cycle_ns[other], p->n[other]);

    if (tried * 100 < kept * (100 - MARGIN_PERCENT)) {
        HC_DEBUG("stream runner: the %s ran epochs in %lld ns against the %s's %lld: switching",
                 other == HC_RT_RUN_WORKER ? "worker" : "caller", (long long)tried,
                 p->arm == HC_RT_RUN_WORKER ? "worker" : "caller", (long long)kept);
        switch_arm(p, other);
        return;
    }
    back_off(p);
}

/*
 * One more epoch of the kept arm: time for a trial of the other one? The first epoch of a spell and
 * the one before each trial are sampled, and what the caller did there decides without a trial:
 *   - a caller that sleeps between enqueue and synchronisation gets the worker: it leaves its core
 *     free, and the caller as runner would make the peers wait for it, which its clock cannot see;
 *   - a caller that computes while a CPU is spare for the worker gets the worker too: the op
 *     progresses on that CPU while the caller computes. Trials misled there: an epoch's time is one
 *     rank's, and a collective's depends on its peers' runners. A rank trying the caller while its
 *     peer's worker did its part (a CMA AllReduce writes into the other's output) timed 182 us
 *     epochs against its worker's 377, so each rank kept the caller and nothing was hidden (2 ranks
 *     on 16 CPUs, 2 each, both computing: 0.00-0.04 of the op at 64 KiB-4 MiB, against 0.54-0.93
 *     with the worker fixed);
 *   - a caller that computes while no CPU is spare for the worker (the one CPU it shares with the
 *     caller, every CPU taken by a local rank: hc_shm_pick_spin tells, or the program's other
 *     threads keeping the rest busy: others_fill_cpus) runs the tasks
 *     itself: the worker could only run by taking a CPU from a rank, the work is the same whoever
 *     does it, and the hand-offs and a worker waiting for the peers come on top. Trials there only
 *     measured noise (2 ranks, one CPU each, both computing: epochs of either runner 120-690 us
 *     for a 1 MiB AllReduce of ~130 us and as long a compute), so the runner flipped back and forth.
 * Trials remain for epochs whose synchronising thread is not the launching one (no sample).
 */
static void next_epoch(hc_rt_policy_t *p)
{
    hc_rt_sample_t seen = p->sample;
    hc_rt_runner_t called_for = seen == HC_RT_SAMPLE_SHARED ? HC_RT_RUN_CALLER : HC_RT_RUN_WORKER;
    int decides = seen == HC_RT_SAMPLE_SLEPT || seen == HC_RT_SAMPLE_SHARED || seen == HC_RT_SAMPLE_BUSY;

    p->sample = HC_RT_SAMPLE_NONE;
    if (decides && p->arm != called_for) {
        HC_DEBUG("stream runner: the caller %s: the %s runs",
                 seen == HC_RT_SAMPLE_SLEPT   ? "sleeps"
                 : seen == HC_RT_SAMPLE_BUSY ? "computes, and a CPU is spare for the worker"
                                             : "computes, and no CPU is spare for the worker",
                 called_for == HC_RT_RUN_WORKER ? "worker" : "caller");
        switch_arm(p, called_for);
        return;
    }
    if (++p->epochs + 1 == p->period) {
        p->sample = HC_RT_SAMPLE_WANTED;
        return;
    }
    if (p->epochs < p->period)
        return;
    if (decides) {
        back_off(p); /* the sample calls for the kept arm: no trial; look again later */
        return;
    }
    p->trial_left = TRIAL_EPOCHS;
    p->n[!p->arm] = 0;
}

void hc_rt_policy_sync_end(hc_rt_policy_t *p, int64_t exit_ns)
{
    hc_rt_runner_t arm = p->epoch_arm;

    if (p->epoch_start_ns == 0)
        return;
    if (p->epoch_discard) {
        close_epoch(p);
        return;
    }
    p->cycle_ns[arm][p->n[arm]++ % HC_RT_WINDOW] = exit_ns - p->epoch_start_ns;
    close_epoch(p);
    if (p->forced >= 0)
        return;
    if (p->trial_left > 0) {
        if (arm != p->arm && --p->trial_left == 0)
            compare(p);
        return;
    }
    next_epoch(p);
}

/*
 * A pipelined program (launch op i+1, compute, wait for op i's event) keeps a task queued behind
 * the one it waits for, so none of its waits drains the stream and ends an epoch: the gaps would
 * never show it the overlap pattern, and the callers would run each op at its wait, after the
 * compute, unless the backstop found one stuck for a grace period. Such a wait's gap runs from the
 * program's latest record on the stream (its last launch that it can wait for: what it did since is
 * its compute), not from the awaited one's, which is a whole round earlier: the round's length
 * would then decide, and a round that the worker's wake-ups made slow kept the worker (8-byte
 * rounds of 10-50 us instead of 1). In the synchronous pattern a late wait counts as a long gap
 * where a CPU is spare for the worker (where none is, the callers running the ops is what a sample
 * would choose anyway); in the overlap pattern these gaps count as a synchronisation's do. The
 * samples come from the waits that do drain the stream (the end of a micro-batch).
 */
void hc_rt_policy_waited_behind(hc_rt_policy_t *p, int64_t gap_ns)
{
    if (p->forced >= 0)
        return;
    if (!p->sync_pattern) {
        /* A wait that finds the task not yet run soon after the program's last launch: the
         * worker's wake-up costs more than the program leaves it (8-byte pipelined rounds took
         * 3.4-5.3x the op followed by the compute while they stayed here). */
        short_gap_ends_overlap(p, is_short_gap(p, gap_ns));
        return;
    }
    if (gap_ns < HC_RT_SPARE_GAP_NS || p->spare_cpu == 0 || (p->spare_cpu < 0 && no_spare_cpu(p, NULL, NULL)))
        return; /* nothing for the worker to gain */
    if (++p->long_epochs >= LONG_EPOCHS_TO_OVERLAP) {
        enter_overlap(p);
        close_epoch(p); /* the next launch opens one, with the worker as runner */
    }
}

void hc_rt_policy_stalled(hc_rt_policy_t *p)
{
    /* A task waited a whole grace period (50 times the long gap) for a caller that did not come:
     * the program overlaps, or the caller was preempted for that long. One stall ends the
     * synchronous pattern: waiting for a second (and for a sampled epoch to see the gap) cost the
     * next overlap epochs a grace period or more each (1 rank, enqueue; sleep 20 ms; synchronise
     * after 1000 blocking epochs: 1.8-18 ms for the first two epochs, then 16-41 us). A preempted
     * caller loses far more than the few epochs the worker then runs before four short gaps bring
     * the synchronous pattern back. */
    if (p->sync_pattern && p->forced < 0 && ++p->stalls >= STALLS_TO_OVERLAP) {
        enter_overlap(p);
        p->epoch_discard = 1;
    }
}
