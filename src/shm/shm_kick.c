/*
 * The runner kick. A rank that launches an op on a stream whose caller runs its tasks (the
 * synchronous pattern: the worker is not woken at enqueue) starts it there when it can (its first
 * step published, hc_shm_start) and leaves the rest queued for the caller's synchronisation. A
 * program that computes instead (the first overlapped op after blocking calls) leaves it to the
 * worker's backstop poll, a millisecond or more later, and its peers wait that long: 2 ranks, 1-4
 * MiB AllReduce, 1.3-2.4 ms against a cold op's 0.15-0.7 (bench/overlap.py's first round). A peer
 * cannot wake another process's worker, which sleeps on its stream's condition variable; so each
 * rank runs a listener thread asleep on a futex word in its control block (`kick`). A rank marks
 * the op it started and left queued (`parked`) until a runner begins it; a peer that has waited
 * ~100 us in one wait (HC_SHM_KICK_SPIN_ROUNDS of its spin, or KICK_AFTER_NS asleep) for a
 * rank that shows an op parked bumps and wakes that word once, and the listener has every stream
 * of its process whose queue nobody runs run it on the worker now, as the backstop would have
 * (aclrtHostKickRunners), which also ends the stream's synchronous pattern as the backstop does.
 *
 * Where ranks share CPUs too: there the backstop's polls back off to 8 ms (stream.c, POLL_MAX_NS),
 * and a rank merely waiting for its CPU could be kicked, but bursts and blocking loops of 4 and 8
 * ranks on 2 CPUs measured no kick at all, the first overlapped op 0.1-1.6 ms instead of 3.3-8.4.
 */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hc_check.h"
#include "rt_ext.h"
#include "shm_internal.h"

#define KICK_AFTER_NS (100 * 1000LL) /* asleep this long in one wait, a waiter kicks */
/* The listener's sleep bound: a safety net only (the stop bumps the word too). */
#define LISTEN_BOUND_S 10
#define LISTEN_STACK_BYTES (128u * 1024u)

static void *listen_main(void *arg)
{
    hc_shm_engine_t *eng = arg;
    hc_shm_ctrl_t *mine = hc_shm_ctrl(eng, eng->me);
    unsigned seen = atomic_load(&mine->kick);

    pthread_setname_np(pthread_self(), "hc-kick");
    atomic_store(&mine->kick_listens, 1);
    while (!atomic_load(&eng->kick_stop)) {
        struct timespec bound = {.tv_sec = LISTEN_BOUND_S, .tv_nsec = 0};
        uint64_t parked;
        unsigned now;

        syscall(SYS_futex, &mine->kick, FUTEX_WAIT, seen, &bound, NULL, 0);
        now = atomic_load(&mine->kick);
        if (now == seen || atomic_load(&eng->kick_stop))
            continue;
        seen = now;
        parked = atomic_load_explicit(&mine->parked, memory_order_relaxed);
        if (parked == 0)
            continue; /* begun meanwhile */
        HC_DEBUG("a peer waits for op #%llu, parked here: the streams nobody runs go to their workers",
                 (unsigned long long)parked);
        aclrtHostKickRunners();
    }
    atomic_store(&mine->kick_listens, 0);
    return NULL;
}

void hc_shm_kick_start(hc_shm_engine_t *eng)
{
    sigset_t blocked, saved;
    pthread_attr_t attr;
    int err;

    if (eng->nlocal < 2)
        return;
    /* Signals go to the program's own threads, as with the streams' workers. */
    sigfillset(&blocked);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, LISTEN_STACK_BYTES);
    pthread_sigmask(SIG_SETMASK, &blocked, &saved);
    err = pthread_create(&eng->kick_thread, &attr, listen_main, eng);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        HC_WARN("no kick listener (%s): an op this rank leaves unsynchronised after blocking calls may keep its "
                "peers waiting for the stream's backstop poll", strerror(err));
        return;
    }
    eng->kick_listening = 1;
}

void hc_shm_kick_stop(hc_shm_engine_t *eng)
{
    hc_shm_ctrl_t *mine;

    if (!eng->kick_listening)
        return;
    mine = hc_shm_ctrl(eng, eng->me);
    atomic_store(&eng->kick_stop, 1);
    atomic_fetch_add(&mine->kick, 1);
    syscall(SYS_futex, &mine->kick, FUTEX_WAKE, 1, NULL, NULL, 0);
    pthread_join(eng->kick_thread, NULL);
    eng->kick_listening = 0;
}

/* Whether local rank `index` shows an op parked and listens, and this wait has not kicked it. Ranks
 * kick where they listen themselves (every rank of the communicator starts its listener). */
static int kickable(hc_shm_engine_t *eng, const hc_shm_kick_t *k, uint32_t index)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, index);

    return eng->kick_listening && k->kicked != index + 1 && index != eng->me &&
           atomic_load_explicit(&c->parked, memory_order_relaxed) != 0 &&
           atomic_load_explicit(&c->kick_listens, memory_order_relaxed);
}

static void kick(hc_shm_engine_t *eng, hc_shm_kick_t *k, uint32_t index)
{
    hc_shm_ctrl_t *c = hc_shm_ctrl(eng, index);

    atomic_fetch_add(&c->kick, 1);
    syscall(SYS_futex, &c->kick, FUTEX_WAKE, 1, NULL, NULL, 0);
    k->kicked = index + 1;
}

int64_t hc_shm_kick_check(hc_shm_engine_t *eng, hc_shm_kick_t *k, const uint32_t *peers, uint32_t npeers,
                          int64_t now)
{
    for (uint32_t i = 0; i < npeers; i++) {
        if (!kickable(eng, k, peers[i]))
            continue;
        if (k->due_ns == 0)
            k->due_ns = now + KICK_AFTER_NS;
        if (now < k->due_ns)
            return k->due_ns - now; /* the same due time for every peer */
        kick(eng, k, peers[i]);
    }
    return -1;
}

void hc_shm_kick_now(hc_shm_engine_t *eng, hc_shm_kick_t *k, const uint32_t *peers, uint32_t npeers)
{
    if (k->due_ns == 0)
        k->due_ns = 1; /* the wait is long enough: a rank found parked from now on is kicked at once */
    for (uint32_t i = 0; i < npeers; i++)
        if (kickable(eng, k, peers[i]))
            kick(eng, k, peers[i]);
}
