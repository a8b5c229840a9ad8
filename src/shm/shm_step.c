/*
 * Waiting and the step protocol of the intra-host engine.
 *
 * A waiter spins briefly (the peer is usually a few hundred nanoseconds behind), then yields, then
 * sleeps on the futex of the rank it waits for, counted in that rank's `sleepers` so that a
 * publisher only pays for a wake-up when someone sleeps. Point-to-point progress loops, which wait
 * for "anything" from their peers, sleep on their own rank's doorbell instead, which those peers
 * ring. Ranks routinely outnumber cores here, so spinning is kept short.
 * Sleeps are bounded (FUTEX_SLEEP_NS) so that deadlines, aborts and dead peers are noticed even if a
 * wake-up were lost.
 *
 * Memory ordering: a publisher stores its flag and then reads its sleeper count; a waiter
 * increments that count, re-checks the flag and only then sleeps on the wake_seq value it read
 * before the increment. Either the publisher sees the waiter and wakes it, or the waiter sees the
 * flag: the usual Dekker argument, which needs each side's store ordered before its load. The
 * waiter's side is rare (it is about to sleep), the publisher's is every flag of every op, and a
 * sequentially consistent store there is a locked instruction that waits until the flag's line,
 * which the waiting peers keep reading, is back from their caches. So when every local rank's
 * process could register for it, the order is made asymmetric (hc_shm_publish_flag,
 * hc_shm_fence_waiter): the publisher stores with release order and only keeps the compiler from
 * moving its load, and the waiter calls membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) after counting
 * itself in, which runs a full barrier on every CPU running a thread of a registered process (the
 * others are between two context switches, which are barriers). A publisher whose store came before
 * that barrier has it visible to the waiter's re-check; one whose load comes after it sees the
 * count. The same holds for the doorbell (hc_shm_ring, hc_shm_poll_wait). Against the locked
 * stores, 2 ranks, blocking 8-byte calls: AllGather 8% faster, Send/Recv 4%, the rest 0-3%.
 */
#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_compiler.h"
#include "hc_time.h"
#include "rt_ext.h"
#include "shm_internal.h"

/*
 * Spin budget. When every local rank can have a core of its own, a peer is at most a cache miss
 * away and spinning ~20000 rounds (tens of microseconds) catches it without a context switch: that
 * is what small-message latency is made of (measured: 8-byte AllReduce on 2 ranks, 2 cores, went
 * from 19-28 us with 200 rounds to 1.9-2.2 us). When ranks outnumber cores a spinning rank steals
 * the core its peer needs, so the spin is short (point-to-point loops) or none (collectives, below)
 * and the waiter soon yields, then sleeps. The same happens when other programs keep the cores busy,
 * which the rank count cannot tell: a spin that fails halves the next one (eng->spin_now, down to the
 * shared budget) and one that would have succeeded a little later doubles it back. A round is one
 * pause, ~24 ns on this machine's EPYC.
 *
 * A collective's wait does not spin at all when ranks outnumber CPUs: it waits for every rank, and
 * some of them share its CPU and cannot run before it yields. 4 and 8 ranks on 2 CPUs, blocking
 * calls of 8 B-64 KiB, without the 200-round spin against with it: AllReduce, AllGather, Broadcast,
 * Reduce, Scatter and AlltoAll 1.16x (4 ranks) and 1.25x (8) faster (geometric means; 0.95-1.67 a
 * cell). Skipping it only when the awaited rank last waited on this CPU: 1.05x and 1.09x. A pair
 * exchanging point-to-point messages keeps its spin: it is what lets the load balancer split a
 * talking pair over two CPUs (skip_spin).
 *
 * When every local rank could have a CPU, nobody spins for a rank that shares its CPU: that rank
 * cannot run until the spinner gives the CPU up. Every waiter publishes the CPU it runs on
 * (hc_shm_ctrl_t.cpu_plus_one) and skips the spin, going straight to sched_yield, when the rank it
 * waits for last waited on the same CPU (skip_spin; not when ranks outnumber CPUs, see there).
 * This is what processes just started by a launcher meet: the kernel places a new process on its
 * parent's CPU and moves it only after some milliseconds, and meanwhile a 20000-round spin gave
 * the peer the core only at the end of every spin: 8-byte AllReduce on 2 ranks, the first bursts
 * after start-up took 400-600 us per op instead of 0.6 (and 9 us with both ranks pinned to one CPU
 * by taskset). The yields hand the CPU over at once, and the published CPU is at most one wait
 * old, since every rank waits in every collective. Yielding alone, though, keeps the pair on one
 * CPU: only one of them is ever runnable, so the load balancer sees nothing to move (measured:
 * 5-6 us per op for as long as 7 ms). So when every local rank could have a CPU of its own, the
 * rank with the higher index moves itself to a CPU no local rank runs on (an affinity mask of that
 * CPU alone, then its own mask back: one migration) at most every SPREAD_INTERVAL_NS. Ranks the
 * user pinned to one CPU are never moved, and the mask the user gave is always restored. A move
 * does not always hold: once one of the pair sleeps, the kernel may wake it next to the other
 * again, so the interval is short: a millisecond. Two unbound ranks put on one CPU before every
 * 2000 blocking 8-byte AllReduces took 2.1-6.7 us a call with 10 ms, 0.7-1.1 with 1 ms (bench
 * call_probe's `colocate`).
 */
#define SPREAD_INTERVAL_NS HC_NS_PER_MS
#define MOVE_INTERVAL_NS (10 * HC_NS_PER_MS) /* going home when ranks outnumber CPUs (go_home) */
#define SPIN_ROUNDS_OWN_CORE 20000
#define SPIN_ROUNDS_SHARED 200
#define YIELD_ROUNDS 20
#define FUTEX_SLEEP_NS (10 * HC_NS_PER_MS)

static void ring_bell(hc_shm_ctrl_t *c)
{
    atomic_fetch_add(&c->bell, 1);
    syscall(SYS_futex, &c->bell, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/*
 * A slot page is faulted in by the first access of each process: ~11 us a page on the reference
 * VM. An op that stages n bytes touches n bytes of one parity per step; which parity holds what
 * depends on the step count, so a path of two steps per op (or one op per size band of the perf
 * tools, separated by a one-step barrier) can leave half of a parity cold until much later: the
 * fp16 AllReduce split path, 2 ranks, 128 KiB, was 31-44 us per call in the first timed band after
 * its warm-ups and 14-22 afterwards. So when an op needs more of the slots than any op before, this
 * process faults in that much of every rank's slots in both parities at once: writing back the
 * byte it reads on its own slot (it is the only writer there), reading the others'.
 */
void hc_shm_warm_slots(hc_shm_engine_t *eng, uint64_t bytes)
{
    uint64_t from = eng->warm_bytes & ~(uint64_t)4095;

    if (bytes > eng->slot_bytes)
        bytes = eng->slot_bytes;
    if (bytes <= eng->warm_bytes)
        return;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        for (uint64_t parity = 0; parity < 2; parity++) {
            volatile uint8_t *slot = hc_shm_slot(eng, i, parity);
            for (uint64_t b = from; b < bytes; b += 4096) {
                uint8_t v = slot[b];
                if (i == eng->me)
                    slot[b] = v;
            }
        }
    eng->warm_bytes = bytes;
}

void hc_shm_publish_cpus(hc_shm_engine_t *eng)
{
    cpu_set_t mask;
    uint64_t *words = hc_shm_ctrl(eng, eng->me)->cpus;

    memset(words, 0, HC_SHM_CPU_WORDS * sizeof(*words));
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0)
        return; /* unknown: all zero */
    for (int cpu = 0; cpu < CPU_SETSIZE && cpu < HC_SHM_CPU_WORDS * 64; cpu++)
        if (CPU_ISSET(cpu, &mask))
            words[cpu / 64] |= 1ull << (cpu % 64);
}

/*
 * The CPUs the local ranks may run on, together: a launcher that binds each rank to its own CPU
 * (hccl-run's default) leaves every rank a mask of one CPU, and "ranks <= CPUs in my mask" would
 * call that sharing (measured: 2 ranks bound to one CPU each ran the shared-core settings, bf16
 * AllReduce 32 KiB 8.0-8.3 us against 5.6 unbound). A rank whose mask is unknown counts as the
 * CPUs online.
 */
void hc_shm_pick_spin(hc_shm_engine_t *eng)
{
    uint64_t all[HC_SHM_CPU_WORDS] = {0};
    long usable = 0, online = sysconf(_SC_NPROCESSORS_ONLN);
    int unknown = 0;

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        const uint64_t *words = hc_shm_ctrl(eng, i)->cpus;
        uint64_t any = 0;
        for (int w = 0; w < HC_SHM_CPU_WORDS; w++) {
            all[w] |= words[w];
            any |= words[w];
        }
        unknown |= any == 0;
    }
    for (int w = 0; w < HC_SHM_CPU_WORDS; w++)
        usable += __builtin_popcountll(all[w]);
    if (unknown && online > usable)
        usable = online;
    eng->own_cores = (long)eng->nlocal <= usable;
    /* No CPU is left for the streams' workers: the runtime's choice of who runs overlapped ops
     * (docs/runtime.md) needs to know, and an unbound rank cannot tell from its own mask. */
    eng->cpus_full = (long)eng->nlocal >= usable;
    if (eng->cpus_full)
        aclrtHostCpusFull(1);
    eng->cpus_shared = !eng->own_cores;
    if (eng->cpus_shared)
        aclrtHostCpusShared(1);
    eng->spin_rounds = eng->own_cores ? SPIN_ROUNDS_OWN_CORE : SPIN_ROUNDS_SHARED;
    eng->spin_now = eng->spin_rounds;
}

/*
 * A rank's doorbell is rung only while a progress loop of it waits on it. Ringing on every publish
 * made every chunk an atomic add on a line that the waiting loop reads: a third of a 2-rank 8-byte
 * Send/Recv's time (perf: 34% in the ring). The publisher's store and the waiter's count meet in
 * the usual Dekker pattern: the publisher stores, fences, then reads `bell_waiters`; a waiter
 * counts itself, fences, reads its bell and looks at its channels once more before it sleeps on
 * that value. Either the publisher sees the waiter (and rings, which changes the value or wakes
 * it) or the waiter's last look sees the publication.
 */
void hc_shm_ring(hc_shm_engine_t *eng, uint32_t index)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, index);

    if (eng->asym_fence)
        atomic_signal_fence(memory_order_seq_cst); /* the waiters' membarrier orders the rest */
    else
        atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&c->bell_waiters, memory_order_relaxed) > 0)
        ring_bell(c);
}

void hc_shm_ring_all(hc_shm_engine_t *eng)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (i != eng->me)
            hc_shm_ring(eng, i);
}

void hc_shm_fence_waiter(const hc_shm_engine_t *eng)
{
    if (eng->asym_fence)
        syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0); /* cannot fail once registered */
}

/* Register this process for the waiters' membarrier and say so in this rank's control block
 * (before the creation's last exchange); 0 where the kernel or a seccomp filter refuses it. */
void hc_shm_publish_fence(hc_shm_engine_t *eng)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

    hc_shm_ctrl(eng, eng->me)->asym_fence =
        cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

/* After every local rank published: the asymmetric order only when every one registered, since a
 * publisher that skips the fence relies on every waiter's membarrier reaching it. */
void hc_shm_pick_fence(hc_shm_engine_t *eng)
{
    eng->asym_fence = 1;
    for (uint32_t i = 0; i < eng->nlocal; i++)
        eng->asym_fence &= hc_shm_ctrl(eng, i)->asym_fence == 1;
}

/* The flag that says whether local rank `index` has published step `target` (hc_shm_hot_t). */
static atomic_uint_fast64_t *flag_of(hc_shm_engine_t *eng, uint32_t index, uint64_t target)
{
    return &hc_shm_ctrl(eng, index)->hot[target & 1].arrive;
}

/* The first local rank whose flag is below target, or nlocal when all have reached it. */
static uint32_t first_behind(hc_shm_engine_t *eng, uint64_t target)
{
    for (uint32_t i = 0; i < eng->nlocal; i++)
        if (atomic_load_explicit(flag_of(eng, i, target), memory_order_acquire) < target)
            return i;
    return eng->nlocal;
}

/* Wake every sleeper on this rank's futex and every rank's doorbell (used when this rank fails). */
void hc_shm_wake_all(hc_shm_engine_t *eng)
{
    syscall(SYS_futex, &hc_shm_ctrl(eng, eng->me)->wake_seq, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    for (uint32_t i = 0; i < eng->nlocal; i++)
        ring_bell(hc_shm_ctrl(eng, i));
}

/* Does local rank `index`'s process still run? pidfds become readable when the process exits. */
int hc_shm_peer_running(hc_shm_engine_t *eng, uint32_t index)
{
    struct pollfd pfd;

    if (eng->pids[index] == eng->pids[eng->me])
        return 1;
    if (eng->pidfds[index] < 0)
        return kill(eng->pids[index], 0) == 0 || errno != ESRCH;
    pfd = (struct pollfd){.fd = eng->pidfds[index], .events = POLLIN};
    return poll(&pfd, 1, 0) == 0;
}

/* Is local rank `index` still alive and taking part? A rank whose op failed has marked itself. */
static int peer_alive(hc_shm_engine_t *eng, uint32_t index)
{
    if (atomic_load(&hc_shm_ctrl(eng, index)->failed) != HCCL_SUCCESS)
        return 0;
    return hc_shm_peer_running(eng, index);
}

static HcclResult report_stall(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t index, int dead)
{
    const hc_group_t *group = &eng->base.group;
    char sig[160];

    if (op == NULL) /* the caller explains */
        return dead ? HCCL_E_REMOTE : atomic_load(group->aborting) ? HCCL_E_INTERNAL : HCCL_E_TIMEOUT;
    hc_op_sig_format(&op->sig, sig, sizeof(sig));
    if (dead) {
        int failed = atomic_load(&hc_shm_ctrl(eng, index)->failed);
        /* It may have failed on a mismatch of a collective this rank completed unchecked. */
        HcclResult why = failed != HCCL_SUCCESS ? hc_shm_check_deferred(eng, op) : HCCL_SUCCESS;
        if (why == HCCL_SUCCESS && failed != HCCL_SUCCESS)
            why = hc_shm_explain_by_announcement(eng, op, index);
        if (why != HCCL_SUCCESS)
            return why;
        if (failed != HCCL_SUCCESS)
            HC_ERROR("%s #%llu failed: rank %u (pid %d) failed with %s and left the communicator", sig,
                     hc_op_number(op), hc_group_rank(group, index), eng->pids[index],
                     hc_result_name((HcclResult)failed));
        else
            HC_ERROR("%s #%llu failed: rank %u (pid %d) exited while this rank waited for it", sig,
                     hc_op_number(op), hc_group_rank(group, index), eng->pids[index]);
        return HCCL_E_REMOTE;
    }
    if (atomic_load(group->aborting)) {
        HC_ERROR("%s #%llu aborted: the communicator is being destroyed", sig, hc_op_number(op));
        return HCCL_E_INTERNAL;
    }
    HC_ERROR("%s #%llu timed out after HCCL_EXEC_TIMEOUT=%lld s waiting for rank %u (pid %d)", sig,
             hc_op_number(op), (long long)group->settings->exec_timeout_s, hc_group_rank(group, index),
             eng->pids[index]);
    return HCCL_E_TIMEOUT;
}

/*
 * A peer whose /proc/PID/fd vanished may be in the middle of exiting: its file table is gone before
 * its pidfd turns readable. Give it a bounded moment (UNREACHABLE_GRACE_MS) to finish dying, so that
 * a killed peer is reported as such (HCCL_E_REMOTE) rather than as an unreachable buffer.
 */
#define UNREACHABLE_GRACE_MS 200

static int peer_exits_soon(hc_shm_engine_t *eng, uint32_t index)
{
    struct pollfd pfd;

    if (!peer_alive(eng, index))
        return 1;
    if (eng->pidfds[index] < 0)
        return 0;
    pfd = (struct pollfd){.fd = eng->pidfds[index], .events = POLLIN};
    return poll(&pfd, 1, UNREACHABLE_GRACE_MS) > 0;
}

HcclResult hc_shm_unreachable(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t index)
{
    char sig[160];

    if (peer_exits_soon(eng, index))
        return report_stall(eng, op, index, 1); /* it died: HCCL_E_REMOTE, like any wait for it */
    HC_ERROR("%s #%llu: cannot reach the buffer of rank %u (pid %d) in place",
             hc_op_sig_format(&op->sig, sig, sizeof(sig)), hc_op_number(op), hc_group_rank(&eng->base.group, index),
             eng->pids[index]);
    return HCCL_E_UNAVAIL;
}

/* The sleep bound of a wait: FUTEX_SLEEP_NS, or less where a kick comes due (kick_ns >= 0). */
static struct timespec sleep_bound(int64_t kick_ns)
{
    int64_t ns = kick_ns >= 0 && kick_ns < FUTEX_SLEEP_NS ? kick_ns : FUTEX_SLEEP_NS;

    return (struct timespec){.tv_sec = 0, .tv_nsec = (long)ns};
}

/* Sleep until local rank `index` publishes (or the bound), unless it is no longer behind. */
static void sleep_on_rank(hc_shm_engine_t *eng, uint32_t index, hc_shm_behind_fn behind, const void *ctx,
                          struct timespec bound)
{
    hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, index);
    unsigned seen = atomic_load(&peer->wake_seq);

    atomic_fetch_add(&peer->sleepers, 1); /* a full barrier itself, for publishers that fence */
    hc_shm_fence_waiter(eng);
    if (behind(eng, ctx) != eng->nlocal)
        syscall(SYS_futex, &peer->wake_seq, FUTEX_WAIT, seen, &bound, NULL, 0);
    atomic_fetch_sub(&peer->sleepers, 1);
}

/* After publishing a flag: wake whoever sleeps on this rank. */
void hc_shm_wake_sleepers(hc_shm_engine_t *eng)
{
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    unsigned sleepers = eng->asym_fence ? atomic_load_explicit(&mine->sleepers, memory_order_relaxed)
                                        : atomic_load(&mine->sleepers);

    if (sleepers > 0) {
        atomic_fetch_add(&mine->wake_seq, 1);
        syscall(SYS_futex, &mine->wake_seq, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    }
}

/* Publish the CPU this rank runs on (a store only when it changed) and return it plus one. */
static int publish_cpu(hc_shm_engine_t *eng)
{
    atomic_int *mine = &hc_shm_ctrl(eng, eng->me)->cpu_plus_one;
    int cpu_plus_one = sched_getcpu() + 1; /* 0 if unknown, which never matches */

    if (atomic_load_explicit(mine, memory_order_relaxed) != cpu_plus_one)
        atomic_store_explicit(mine, cpu_plus_one, memory_order_relaxed);
    return cpu_plus_one;
}

/* The first of the `npeers` local ranks in `peers` that runs on this rank's CPU, as far as their
 * last waits tell (spinning for it is useless), or eng->nlocal. */
static uint32_t sharing_my_cpu(hc_shm_engine_t *eng, const uint32_t *peers, uint32_t npeers)
{
    int mine = publish_cpu(eng);

    for (uint32_t i = 0; mine != 0 && i < npeers; i++)
        if (peers[i] != eng->me &&
            atomic_load_explicit(&hc_shm_ctrl(eng, peers[i])->cpu_plus_one, memory_order_relaxed) == mine)
            return peers[i];
    return eng->nlocal;
}

/* Move this thread to `cpu` once: its affinity mask set to that CPU alone, then straight back to
 * `mask`, its own, so that the kernel stays free to move it again. */
static void move_once(hc_shm_engine_t *eng, const cpu_set_t *mask, int cpu)
{
    cpu_set_t target;

    CPU_ZERO(&target);
    CPU_SET(cpu, &target);
    if (sched_setaffinity(0, sizeof(target), &target) == 0 && sched_setaffinity(0, sizeof(*mask), mask) != 0)
        HC_WARN("could not restore this thread's affinity mask after moving it to CPU %d: %s", cpu,
                strerror(errno));
    publish_cpu(eng);
}

/* Move this thread to a CPU of its affinity mask that no local rank last waited on (published in
 * cpu_plus_one), keeping the mask itself; nothing when there is none. */
static void move_to_free_cpu(hc_shm_engine_t *eng)
{
    cpu_set_t mask;

    if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) < 2)
        return;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        uint32_t i = 0;

        if (!CPU_ISSET(cpu, &mask))
            continue;
        while (i < eng->nlocal &&
               atomic_load_explicit(&hc_shm_ctrl(eng, i)->cpu_plus_one, memory_order_relaxed) != cpu + 1)
            i++;
        if (i < eng->nlocal)
            continue; /* a local rank runs there */
        move_once(eng, &mask, cpu);
        return;
    }
}

/*
 * When ranks outnumber CPUs, most of them sleep or yield at any moment, so the load balancer sees
 * about one runnable task and left all of them on the CPU they were started on: 4 ranks on 2 CPUs,
 * unbound (as mpirun --bind-to none starts them), ran on CPU 0 alone in about half of the runs, and
 * an 8-byte AllReduce took 28-40 us there against 13-16 with two ranks per CPU. So every
 * MOVE_INTERVAL_NS a waiting rank that is not on its home CPU moves there: local rank i's home is
 * CPU number i mod n of the n CPUs in its mask, the placement `hccl-run --bind-to share` gives (its
 * mask set to that CPU and straight back, as move_to_free_cpu does; the kernel stays free to move
 * it). Interleaving matters beyond the counts: Send/Recv pairs (rank 2k with 2k + 1) and ring
 * neighbours then sit on different CPUs and can run at once (4 ranks, 8 B: 1.2-2.8 us a call,
 * against 13-27 with each pair on one CPU). A thread keeps the local rank index of the first
 * communicator it waited in (usually the world's): one process may be a different local rank in
 * each of its communicators, and must not bounce between their homes.
 */
static HC_TLS_FAST int tls_home_index = -1;

static void go_home(hc_shm_engine_t *eng)
{
    cpu_set_t mask;
    int mine = publish_cpu(eng) - 1, home = -1, k;

    if (mine < 0 || sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) < 2)
        return;
    if (tls_home_index < 0)
        tls_home_index = (int)eng->me;
    k = tls_home_index % CPU_COUNT(&mask);
    for (int cpu = 0; cpu < CPU_SETSIZE && home < 0; cpu++)
        if (CPU_ISSET(cpu, &mask) && k-- == 0)
            home = cpu;
    if (home < 0 || home == mine)
        return;
    move_once(eng, &mask, home);
}

/*
 * Whether to skip the spin for the local ranks in `peers`: when the ranks could each have a CPU
 * and one of them shares this rank's, which then moves away if it is the higher of the two. When
 * ranks outnumber CPUs sharing is the rule: the rank goes to its home CPU now and then (go_home),
 * and point-to-point loops keep their short spin (collectives have none then: wait_until). Before
 * go_home it was what let the load balancer split the pairs that talk (Send/Recv on 4 ranks, 2
 * CPUs: yielding at once stayed at 13-15 us per op for whole runs, spinning settled at 2.3-3.5 us);
 * with go_home, skipping it for a peer on this CPU measured no better.
 */
static int skip_spin(hc_shm_engine_t *eng, const uint32_t *peers, uint32_t npeers)
{
    uint32_t sharer;
    int64_t now;

    if (eng->spin_rounds != SPIN_ROUNDS_OWN_CORE) {
        if (eng->spread && (now = hc_coarse_now_ns()) >= eng->next_move_ns) {
            eng->next_move_ns = now + MOVE_INTERVAL_NS;
            go_home(eng);
        }
        return 0;
    }
    sharer = sharing_my_cpu(eng, peers, npeers);
    if (sharer == eng->nlocal)
        return 0;
    now = hc_now_ns(); /* rare, and the coarse clock's tick (4 ms here) is longer than the interval */
    if (eng->spread && eng->me > sharer && now >= eng->next_move_ns) {
        eng->next_move_ns = now + SPREAD_INTERVAL_NS;
        move_to_free_cpu(eng);
    }
    return 1;
}

/* Spin, yield, then sleep until behind(eng, ctx) == nlocal; bounded and peer-aware. `behind`: the
 * rank the caller found behind. Out of line: most waits find every rank there at the first look
 * (wait_until), and this frame (the watchdog's state, the saved registers) cost such a wait ~40
 * instructions. */
static __attribute__((noinline)) HcclResult wait_slow(hc_shm_engine_t *eng, hc_shm_behind_fn behind_fn,
                                                       const void *ctx, const hc_op_t *op, uint32_t behind)
{
    const hc_group_t *group = &eng->base.group;
    int64_t deadline = 0, next_check = 0;
    hc_watchdog_t wd;
    hc_shm_kick_t kick = {0, 0}; /* armed in the loop: a clock read here would cost every wait that spins */
    unsigned spin;

    spin = skip_spin(eng, &behind, 1) || !eng->own_cores ? 0 : eng->spin_now;
    for (unsigned i = 0; i < spin; i++) {
        if ((behind = behind_fn(eng, ctx)) == eng->nlocal)
            return HCCL_SUCCESS;
        if (i == HC_SHM_KICK_SPIN_ROUNDS)
            hc_shm_kick_now(eng, &kick, &behind, 1);
        hc_cpu_relax();
    }
    /* The spin failed: the peers are far behind or not running (more busy threads than cores).
     * Halve the next spin; give it back when a peer turns up while this rank yields, i.e. it was
     * close and a longer spin would have caught it without a context switch. */
    if (spin > 0)
        eng->spin_now = eng->spin_now / 2 > SPIN_ROUNDS_SHARED ? eng->spin_now / 2 : SPIN_ROUNDS_SHARED;
    for (int i = 0; i < YIELD_ROUNDS; i++) {
        if (behind_fn(eng, ctx) == eng->nlocal) {
            if (spin > 0)
                eng->spin_now = eng->spin_now * 2 < eng->spin_rounds ? eng->spin_now * 2 : eng->spin_rounds;
            return HCCL_SUCCESS;
        }
        sched_yield();
    }
    deadline = hc_deadline_after_s(group->settings->exec_timeout_s);
    hc_shm_watch_start(eng, &wd);
    for (;;) {
        int64_t now;
        HcclResult res;
        behind = behind_fn(eng, ctx);
        if (behind == eng->nlocal)
            return HCCL_SUCCESS;
        now = hc_now_ns();
        if (now >= next_check) {
            if (!peer_alive(eng, behind))
                return report_stall(eng, op, behind, 1);
            if (atomic_load(group->aborting))
                return report_stall(eng, op, behind, 0);
            next_check = now + group->settings->peer_check_ms * HC_NS_PER_MS;
        }
        if (hc_deadline_passed(deadline))
            return report_stall(eng, op, behind, 0);
        res = hc_shm_watch(eng, &wd, op, &behind, 1); /* still waiting? deadlocked? */
        if (res != HCCL_SUCCESS)
            return res;
        sleep_on_rank(eng, behind, behind_fn, ctx, sleep_bound(hc_shm_kick_check(eng, &kick, &behind, 1, now)));
    }
}

static inline HcclResult wait_until(hc_shm_engine_t *eng, hc_shm_behind_fn behind_fn, const void *ctx,
                                    const hc_op_t *op)
{
    uint32_t behind = behind_fn(eng, ctx);

    return behind == eng->nlocal ? HCCL_SUCCESS : wait_slow(eng, behind_fn, ctx, op, behind);
}

HcclResult hc_shm_wait_for(hc_shm_engine_t *eng, hc_shm_behind_fn behind, const void *ctx, const hc_op_t *op)
{
    HcclResult res = wait_until(eng, behind, ctx, op);

    for (uint32_t i = 0; res == HCCL_SUCCESS && i < eng->nlocal; i++)
        hc_shm_tsan_acquire(eng, i);
    return res;
}

static uint32_t behind_step(hc_shm_engine_t *eng, const void *target)
{
    return first_behind(eng, *(const uint64_t *)target);
}

HcclResult hc_shm_wait_arrive(hc_shm_engine_t *eng, uint64_t target, const hc_op_t *op)
{
    return hc_shm_wait_for(eng, behind_step, &target, op);
}

HcclResult hc_shm_step_begin(hc_shm_engine_t *eng, const hc_op_t *op)
{
    uint64_t step = eng->step + 1;
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);

    mine->sig[step & 1] = op->sig;
    mine->op_seq[step & 1] = op->coll_seq;
    mine->hot[step & 1].sig_hash = op->sig_hash;
    eng->step = step;
    return HCCL_SUCCESS;
}

void hc_shm_step_publish(hc_shm_engine_t *eng)
{
    hc_shm_tsan_release(eng);
    hc_shm_publish_flag(eng, flag_of(eng, eng->me, eng->step), eng->step);
    hc_shm_wake_sleepers(eng);
}

void hc_shm_tiny_stage(hc_shm_engine_t *eng, const hc_op_t *op)
{
    hc_shm_step_begin(eng, op);
    memcpy(hc_shm_ctrl(eng, eng->me)->hot[eng->step & 1].data, op->sendbuf, hc_shm_tiny_bytes(eng, op));
    hc_shm_step_publish(eng);
}

/* Compare every rank's signature of this step with ours: the mismatch check of DESIGN.md 7. */
static HcclResult check_signatures(hc_shm_engine_t *eng, const hc_op_t *op)
{
    unsigned parity = eng->step & 1;

    uint64_t hash = hc_shm_ctrl(eng, eng->me)->hot[parity].sig_hash;

    for (uint32_t i = 0; i < eng->nlocal; i++) {
        hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);
        /* Equal 64-bit hashes of equal-length inputs: the same call (a collision is 2^-64 likely);
         * the full signature is read only to explain a difference. */
        if (i == eng->me || peer->hot[parity].sig_hash == hash)
            continue;
        return hc_shm_report_mismatch(eng, op, i, &peer->sig[parity], peer->op_seq[parity]);
    }
    return HCCL_SUCCESS;
}

HcclResult hc_shm_report_sig_mismatch(hc_shm_engine_t *eng, const hc_op_sig_t *sig, unsigned long long number,
                                      uint32_t i, const hc_op_sig_t *theirs, uint64_t their_seq)
{
    char mine[160], other[160];

    hc_op_sig_format(sig, mine, sizeof(mine));
    hc_op_sig_format(theirs, other, sizeof(other));
    HC_ERROR("%s #%llu mismatch: rank %u called %s #%llu, rank %u called %s #%llu", hc_coll_name(sig->coll), number,
             hc_group_my_rank(&eng->base.group), mine, number, hc_group_rank(&eng->base.group, i), other,
             (unsigned long long)their_seq);
    return HCCL_E_PARA;
}

HcclResult hc_shm_report_mismatch(hc_shm_engine_t *eng, const hc_op_t *op, uint32_t i, const hc_op_sig_t *theirs,
                                  uint64_t their_seq)
{
    return hc_shm_report_sig_mismatch(eng, &op->sig, hc_op_number(op), i, theirs, their_seq);
}

/* A peer that failed earlier takes part in nothing, even if its flags look far enough. */
HcclResult hc_shm_check_failed_peers(hc_shm_engine_t *eng, const hc_op_t *op)
{
    for (uint32_t i = 0; i < eng->nlocal; i++) {
        hc_shm_ctrl_t *peer = hc_shm_ctrl(eng, i);
        if (i == eng->me || atomic_load(&peer->failed) == HCCL_SUCCESS)
            continue;
        /* A rank that ran ahead on the eager path (shm_announce.c) and failed later has done its
         * part of this collective: this one is not what failed. */
        if (op->coll_seq != 0 && atomic_load(&peer->done_seq) >= op->coll_seq)
            continue;
        return report_stall(eng, op, i, 1);
    }
    return HCCL_SUCCESS;
}

HcclResult hc_shm_step_wait_first(hc_shm_engine_t *eng, const hc_op_t *op)
{
    /* The op's first step as hc_shm_ready saw it: every peer's flag and hash were there, and stay
     * there until this rank publishes the step after it. */
    if (eng->ready_step == eng->step && eng->ready_hash == op->sig_hash) {
        eng->ready_step = 0;
        return HCCL_SUCCESS;
    }
    HC_CHECK(hc_shm_wait_arrive(eng, eng->step, op));
    return check_signatures(eng, op);
}

HcclResult hc_shm_step_wait_all(hc_shm_engine_t *eng, const hc_op_t *op, int first_step)
{
    if (!first_step)
        return hc_shm_wait_arrive(eng, eng->step, op);
    HC_CHECK(hc_shm_step_wait_first(eng, op));
    return hc_shm_check_failed_peers(eng, op);
}



void hc_shm_poll_init(hc_shm_engine_t *eng, hc_shm_poll_t *poll)
{
    (void)eng;
    poll->deadline = -1;
    poll->watching = 0; /* the deadline and the watchdog start when the loop first sleeps */
    poll->next_check = 0;
    poll->idle_rounds = 0;
    poll->armed = 0;
    poll->moves = poll->watched_moves = 0;
    poll->kick = (hc_shm_kick_t){0, 0};
}

void hc_shm_poll_end(hc_shm_engine_t *eng, hc_shm_poll_t *poll)
{
    if (poll->armed) {
        atomic_fetch_sub(&hc_shm_ctrl(eng, eng->me)->bell_waiters, 1);
        poll->armed = 0;
    }
}

void hc_shm_poll_reset(hc_shm_engine_t *eng, hc_shm_poll_t *poll)
{
    hc_shm_poll_end(eng, poll);
    poll->idle_rounds = 0;
    poll->moves++; /* the watchdog times the wait anew from its next look (hc_shm_poll_wait) */
}

HcclResult hc_shm_poll_wait(hc_shm_engine_t *eng, hc_shm_poll_t *poll, const uint32_t *peers, uint32_t npeers,
                            const hc_op_t *op)
{
    const hc_group_t *group = &eng->base.group;
    hc_shm_ctrl_t *own = hc_shm_ctrl(eng, eng->me);
    int64_t now;

    if (poll->idle_rounds++ == 0 && skip_spin(eng, peers, npeers))
        poll->idle_rounds = eng->spin_rounds; /* straight to the yields */
    if (poll->idle_rounds < eng->spin_rounds) {
        if (poll->idle_rounds == HC_SHM_KICK_SPIN_ROUNDS)
            hc_shm_kick_now(eng, &poll->kick, peers, npeers);
        hc_cpu_relax();
        return HCCL_SUCCESS;
    }
    if (poll->idle_rounds < eng->spin_rounds + YIELD_ROUNDS) {
        sched_yield();
        return HCCL_SUCCESS;
    }
    now = hc_now_ns();
    if (!poll->watching) {
        /* The spin and the yields are over (they take well under a millisecond): from here on the
         * wait is timed and watched. */
        if (poll->deadline == -1)
            poll->deadline = hc_deadline_after_s(group->settings->exec_timeout_s);
        hc_shm_watch_start(eng, &poll->wd);
        poll->watching = 1;
    }
    if (now >= poll->next_check) {
        for (uint32_t i = 0; i < npeers; i++)
            if (!peer_alive(eng, peers[i]))
                return report_stall(eng, op, peers[i], 1);
        if (atomic_load(group->aborting))
            return report_stall(eng, op, npeers > 0 ? peers[0] : eng->me, 0);
        poll->next_check = now + group->settings->peer_check_ms * HC_NS_PER_MS;
    }
    if (hc_deadline_passed(poll->deadline))
        return report_stall(eng, op, npeers > 0 ? peers[0] : eng->me, 0);
    if (poll->moves != poll->watched_moves) {
        poll->watched_moves = poll->moves;
        hc_watchdog_progress(&poll->wd, now);
    }
    if (npeers > 0) {
        HcclResult res = hc_shm_watch(eng, &poll->wd, op, peers, npeers); /* still waiting? deadlocked? */
        if (res != HCCL_SUCCESS)
            return res;
    }
    if (!poll->armed) {
        /* Count in, then let the loop look once more (see hc_shm_ring). */
        atomic_fetch_add(&own->bell_waiters, 1);
        if (eng->asym_fence)
            hc_shm_fence_waiter(eng);
        else
            atomic_thread_fence(memory_order_seq_cst);
        poll->armed_seen = atomic_load(&own->bell);
        poll->armed = 1;
        return HCCL_SUCCESS;
    }
    {
        struct timespec bound = sleep_bound(hc_shm_kick_check(eng, &poll->kick, peers, npeers, now));
        if (atomic_load(&own->bell) == poll->armed_seen)
            syscall(SYS_futex, &own->bell, FUTEX_WAIT, poll->armed_seen, &bound, NULL, 0);
    }
    hc_shm_poll_end(eng, poll);
    return HCCL_SUCCESS;
}
