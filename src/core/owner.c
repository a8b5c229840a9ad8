/* The owner path without a lock (hc_owner.h). */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hc_compiler.h"
#include "hc_owner.h"

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

HC_TLS_FAST char hc_owner_thread_mark;
static const char no_owner; /* the owner of an object shared before anyone entered */

void hc_owner_init(hc_owner_t *o, int mine)
{
    atomic_init(&o->owner, mine ? (const void *)&hc_owner_thread_mark : NULL);
    atomic_init(&o->shared, !hc_asym_fence_ready());
    atomic_init(&o->busy, 0);
}

int hc_owner_claim(hc_owner_t *o)
{
    const void *owner = NULL;

    return !atomic_load_explicit(&o->shared, memory_order_relaxed) &&
           atomic_compare_exchange_strong(&o->owner, &owner, &hc_owner_thread_mark);
}

void hc_owner_take_over_slow(hc_owner_t *o)
{
    const void *owner = NULL;

    /* Nobody may become the owner from here on; an owner already there is waited for. */
    if (!atomic_compare_exchange_strong(&o->owner, &owner, &no_owner) && owner == &hc_owner_thread_mark)
        return;
    atomic_store(&o->shared, 1);
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); /* cannot fail once registered */
    while (atomic_load_explicit(&o->busy, memory_order_acquire))
        sched_yield(); /* the owner's sections are short and never wait */
}
