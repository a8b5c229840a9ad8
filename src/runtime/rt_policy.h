/*
 * Who runs a stream's tasks: the policy of the executor (stream_policy.c; docs/runtime.md, "Who
 * runs the tasks"). Everything here is called with the stream's lock held.
 *
 * Two patterns, told apart by measuring the gap between a program's last enqueue and its
 * synchronisation (an "epoch" runs from the first enqueue on a drained stream to the untimed
 * synchronisation that drains it):
 *   - the synchronous pattern (the program synchronises within HC_RT_SHORT_GAP_NS): tasks wait for
 *     the synchronising caller, which runs them (caller-runs), or run on the launching thread at
 *     once when the task says it may (run-at-enqueue); the worker is not woken and only polls, as
 *     a backstop, every HOSTCCL_BACKSTOP_MS (HC_RT_GRACE_NS by default);
 *   - the overlap pattern (the program does something else first): the worker (woken at every
 *     enqueue, so the task starts at once) runs first. The first epoch of a spell (first enqueue
 *     to the end of the synchronisation) is sampled, and again every 4 to 256 epochs, and decides:
 *     a caller that mostly sleeps between enqueue and synchronisation (off its CPU, not only
 *     preempted) or computes while a CPU is spare for the worker gets the worker; one that computes
 *     while no CPU is spare (the one CPU it shares with the worker, the local ranks fill every
 *     CPU, or the program's other threads keep the rest busy) runs the tasks itself: the worker
 *     could only take a CPU from the program. Where another thread synchronises (no sample), now
 *     and then the other runner (for the caller: the task waits for the synchronising caller, or
 *     runs at enqueue when it may) is tried for a few epochs, and the arm whose epochs were faster
 *     is kept; trials back off exponentially while the kept arm wins.
 * Where a sample found a CPU spare for the worker, the worker spins (yielding) for up to
 * HC_RT_SPIN_NS for the next task before it sleeps, and a synchroniser likewise for the worker's
 * task: a sleeping thread's wake-up on an idle CPU cost more than a 64 KiB op runs. There a gap of
 * HC_RT_SPARE_GAP_NS already marks the overlap pattern.
 * A task the worker runs must first wait for the worker to wake up. When the measured wake-up takes
 * about as long as the tasks themselves (small collectives: microseconds either way), a task that
 * may run at once (its peers are already in it) runs on the launching thread even while the worker
 * is the runner: it is over before the worker would have started it.
 * HOSTCCL_PROGRESS=worker or caller fixes the choice instead.
 */
#ifndef RT_POLICY_H
#define RT_POLICY_H

#include <pthread.h>
#include <stdint.h>

#define HC_RT_SHORT_GAP_NS (20 * 1000)  /* a synchronisation this soon after the enqueue: synchronous */
#define HC_RT_GRACE_NS (1000 * 1000)    /* the backstop poll of a worker that is not woken (default) */
#define HC_RT_WINDOW 8                  /* epochs remembered per arm */
#define HC_RT_SAMPLE_EVERY 8            /* synchronous pattern: epochs per timed epoch */
#define HC_RT_SPARE_GAP_NS (5 * 1000)   /* where a CPU is spare, a synchronisation this late: overlap */
#define HC_RT_SPIN_NS (50 * 1000)       /* a worker with a CPU to spare looks for work this long */

typedef enum { HC_RT_RUN_CALLER = 0, HC_RT_RUN_WORKER = 1 } hc_rt_runner_t;

/* A point of a thread's time: when, its CPU time, its voluntary context switches (ns 0: none); and
 * the CPU time of the process's other threads but the stream's worker, so that the program's other
 * threads are seen too. */
typedef struct {
    int64_t ns;
    int64_t cpu_ns;
    int64_t sleeps;
    int64_t others_cpu_ns;
    pthread_t thread; /* the thread they are of */
} hc_rt_sample_point_t;

/* What a sampled epoch showed of the caller between its enqueue and its synchronisation. */
typedef enum {
    HC_RT_SAMPLE_NONE = 0,
    HC_RT_SAMPLE_WANTED, /* sample the open epoch */
    HC_RT_SAMPLE_BUSY,   /* it computed (ran, or waited for a CPU) */
    HC_RT_SAMPLE_SLEPT,  /* it was off its CPU most of the time, and slept or waited */
    HC_RT_SAMPLE_SHARED, /* it computed, and no CPU was spare for the worker */
} hc_rt_sample_t;

typedef struct {
    int forced;             /* -1: measure; else the hc_rt_runner_t HOSTCCL_PROGRESS names */
    int sync_pattern;       /* 1: the synchronous pattern */
    unsigned short_epochs;  /* consecutive short-gap epochs while in the overlap pattern */
    unsigned long_epochs;   /* consecutive long-gap epochs while in the synchronous pattern */
    unsigned stalls;        /* backstop runs since the last synchronisation (synchronous pattern) */
    unsigned sample_tick;   /* synchronous pattern: queued epochs since the last timed one */
    hc_rt_runner_t arm;     /* overlap pattern: the runner kept */
    hc_rt_runner_t epoch_arm; /* the runner of the open epoch */
    int64_t epoch_start_ns; /* first enqueue of the open epoch, 0: none open */
    int64_t last_enq_ns;    /* last enqueue (or run at enqueue) of the open epoch */
    hc_rt_sample_point_t at_enq; /* the caller at that enqueue, when sampled (ns 0: not sampled) */
    hc_rt_sample_t sample;  /* the open epoch's sample: wanted, or what the last one showed */
    int spare_cpu;          /* 1: the last sample that computed found a CPU spare, 0: none, -1: unknown */
    int worker_known;       /* worker below is set */
    pthread_t worker;       /* the stream's worker (its CPUs, against the caller's) */
    int epoch_discard;      /* the open epoch changed pattern midway: not recorded */
    uint32_t epochs;        /* epochs in the kept arm since the last comparison */
    uint32_t period;        /* epochs between comparisons */
    uint32_t trial_left;    /* epochs left of a trial of the other arm (0: none) */
    uint32_t n[2];          /* epochs in the rings below, by arm */
    int64_t cycle_ns[2][HC_RT_WINDOW];
    uint64_t switches;      /* times the kept arm changed (tests, logs) */
    int64_t task_ns;        /* overlap pattern: average run time of a task (EWMA, 0: unknown) */
    int64_t wake_ns;        /* overlap pattern: average wake-up of the worker (EWMA, 0: unknown) */
    int64_t kick_ns;        /* when the worker was woken for the task at the head, 0: not timed */
} hc_rt_policy_t;

void hc_rt_policy_init(hc_rt_policy_t *p);

/* Whether the runner of the next epoch is the caller (run-at-enqueue allowed, worker not woken). */
int hc_rt_policy_caller_runs(const hc_rt_policy_t *p);

/* Whether a task that may run at once should run on the launching thread (with the stream idle). */
int hc_rt_policy_claim_allowed(const hc_rt_policy_t *p);

/* Whether the worker, as the runner with a CPU to spare, spins for its next task and its
 * synchroniser for the worker, up to HC_RT_SPIN_NS, before sleeping. */
int hc_rt_policy_spins(const hc_rt_policy_t *p);

/* Whether task run times and wake-ups are being measured (the overlap pattern). */
int hc_rt_policy_times_tasks(const hc_rt_policy_t *p);

/* The worker was woken at now_ns / started a task at start_ns; a task ran from start_ns to end_ns. */
void hc_rt_policy_woke(hc_rt_policy_t *p, int64_t now_ns);
void hc_rt_policy_task_ran(hc_rt_policy_t *p, int64_t start_ns, int64_t end_ns, int by_worker);

/* Whether a launch must be timed (hc_rt_policy_launched): an epoch is open and measured, or the
 * next one is. In the synchronous pattern one epoch in HC_RT_SAMPLE_EVERY is timed, and every one
 * after a long gap until the next decides: two clock reads per op were measured on the critical
 * path of a 2-rank 8-byte AllReduce (0.82 -> 0.89 us, median of 8 alternating runs). */
int hc_rt_policy_wants_time(hc_rt_policy_t *p, int queued);

/* A task was launched at now_ns (queued, or run at once): opens the epoch if none is open. */
void hc_rt_policy_launched(hc_rt_policy_t *p, int64_t now_ns);

/* Whether the open epoch is sampled: its synchronisation takes a sample point before the lock. */
int hc_rt_policy_sampling(const hc_rt_policy_t *p);

/* The calling thread's CPU time and voluntary context switches, and the time, now. */
void hc_rt_policy_sample_point(const hc_rt_policy_t *p, hc_rt_sample_point_t *point);

/* An untimed synchronisation began at entry_ns with an epoch open (`before`: the caller as it
 * arrived, before the lock, or NULL or not taken: sampled now if needed); returns whether its end
 * must be reported (hc_rt_policy_sync_end). */
int hc_rt_policy_sync_begin(hc_rt_policy_t *p, int64_t entry_ns, const hc_rt_sample_point_t *before);
void hc_rt_policy_sync_end(hc_rt_policy_t *p, int64_t exit_ns);

/* The program waits (untimed, on the host) for a task that has not run, with later tasks queued
 * behind it, gap_ns after its latest record on the stream: a pipelined program, waiting for events,
 * that may never drain the stream. */
void hc_rt_policy_waited_behind(hc_rt_policy_t *p, int64_t gap_ns);

/* The backstop poll found a task nobody ran for a whole grace period (and runs it). */
void hc_rt_policy_stalled(hc_rt_policy_t *p);

/* Communicators whose local ranks fill every CPU they may use, counted (aclrtHostCpusFull). */
void hc_rt_policy_cpus_full(int delta);
/* Communicators whose local ranks outnumber their CPUs, counted (aclrtHostCpusShared); any now? */
void hc_rt_policy_cpus_shared(int delta);
int hc_rt_policy_cpus_shared_now(void);

/* The stream's worker thread, once it exists. */
void hc_rt_policy_set_worker(hc_rt_policy_t *p, pthread_t worker);

#endif /* RT_POLICY_H */
