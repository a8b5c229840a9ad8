/* The issue lock (hc_issue.h). */
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hc_compiler.h"
#include "hc_issue.h"

static pthread_once_t asym_once = PTHREAD_ONCE_INIT;
static atomic_int asym_state; /* 0: not asked yet, 1: registered, -1: no membarrier */

static void asym_init(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    int ready = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;

    atomic_store(&asym_state, ready ? 1 : -1);
}

int hc_asym_fence_ready(void)
{
    int state = atomic_load_explicit(&asym_state, memory_order_acquire);

    if (state == 0) {
        pthread_once(&asym_once, asym_init);
        state = atomic_load(&asym_state);
    }
    return state > 0;
}

static HC_TLS_FAST char thread_mark; /* its address names the calling thread */
static const char no_owner;           /* the owner of a lock shared before anyone issued */

int hc_issue_lock_init(hc_issue_lock_t *lock)
{
    atomic_init(&lock->owner, NULL);
    atomic_init(&lock->shared, !hc_asym_fence_ready());
    atomic_init(&lock->busy, 0);
    return pthread_mutex_init(&lock->mutex, NULL);
}

void hc_issue_lock_destroy(hc_issue_lock_t *lock)
{
    pthread_mutex_destroy(&lock->mutex);
}

/* A thread other than the owner is about to take the mutex: end the owner's unlocked path. */
static void take_over(hc_issue_lock_t *lock)
{
    const void *owner = NULL;

    if (atomic_load_explicit(&lock->shared, memory_order_relaxed))
        return;
    /* Nobody may become the owner from here on; an owner already there is waited for. */
    if (!atomic_compare_exchange_strong(&lock->owner, &owner, &no_owner) && owner == &thread_mark)
        return;
    atomic_store(&lock->shared, 1);
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); /* cannot fail once registered */
    while (atomic_load_explicit(&lock->busy, memory_order_acquire))
        sched_yield(); /* the owner's sections are short and never wait */
}

void hc_issue_lock(hc_issue_lock_t *lock)
{
    if (atomic_load_explicit(&lock->owner, memory_order_relaxed) != &thread_mark)
        take_over(lock);
    pthread_mutex_lock(&lock->mutex);
}

void hc_issue_unlock(hc_issue_lock_t *lock)
{
    pthread_mutex_unlock(&lock->mutex);
}

int hc_issue_enter(hc_issue_lock_t *lock)
{
    const void *owner = atomic_load_explicit(&lock->owner, memory_order_relaxed);

    if (owner == NULL && !atomic_load_explicit(&lock->shared, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&lock->owner, &owner, &thread_mark))
        owner = &thread_mark;
    if (owner == &thread_mark) {
        atomic_store_explicit(&lock->busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst); /* the taker's membarrier orders it before the load */
        if (!atomic_load_explicit(&lock->shared, memory_order_relaxed))
            return 1;
        atomic_store_explicit(&lock->busy, 0, memory_order_release);
    }
    hc_issue_lock(lock);
    return 0;
}

void hc_issue_leave(hc_issue_lock_t *lock, int entered)
{
    if (entered)
        atomic_store_explicit(&lock->busy, 0, memory_order_release);
    else
        hc_issue_unlock(lock);
}
