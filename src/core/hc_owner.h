/*
 * An object's owner path without a lock: the one thread that uses an object (a stream, a
 * communicator's issue lock) enters a short section with a store and a load instead of taking the
 * object's mutex, for as long as no other thread has used the object. Any other thread first calls
 * hc_owner_take_over: it marks the object shared, for good, runs
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (an asymmetric fence: after it, either the owner's
 * "busy" store is visible here or the owner's next look sees "shared") and waits until the owner's
 * section is over; from then on the owner takes the mutex like everyone. Without membarrier (old
 * kernels) there is no owner path. Used by runtime/stream.c and core/issue.c; each library has its
 * own copy of this file's state, so an object is only ever handled by the one that made it.
 */
#ifndef HC_OWNER_H
#define HC_OWNER_H

#include <stdatomic.h>

#include "hc_compiler.h"

typedef struct {
    const void *_Atomic owner; /* the owning thread's mark; NULL: the first thread to enter */
    atomic_int shared;         /* another thread used the object: no owner path any more */
    atomic_int busy;           /* the owner is in its section */
} hc_owner_t;

/* An object every thread handles through its mutex (no owner path), for static use. */
#define HC_OWNER_SHARED_INITIALIZER {.shared = 1}

/* Its address names the calling thread (owner.c). */
extern HC_TLS_FAST char hc_owner_thread_mark;

/* The calling thread owns it now (mine), or the first thread to enter will. */
void hc_owner_init(hc_owner_t *o, int mine);
/* The first thread to enter an object made with mine = 0 becomes its owner, unless it is shared. */
int hc_owner_claim(hc_owner_t *o);

/* Enter the owner's section: 1 when this thread owns o (or becomes its owner) and nobody shared it;
 * leave with hc_owner_leave. 0: take the mutex instead (nothing is held). Inline: it is on every
 * op's path. */
static inline int hc_owner_enter(hc_owner_t *o)
{
    if (atomic_load_explicit(&o->owner, memory_order_relaxed) != &hc_owner_thread_mark && !hc_owner_claim(o))
        return 0;
    atomic_store_explicit(&o->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the taker's membarrier orders it before the load */
    if (!atomic_load_explicit(&o->shared, memory_order_relaxed))
        return 1;
    atomic_store_explicit(&o->busy, 0, memory_order_release);
    return 0;
}

static inline void hc_owner_leave(hc_owner_t *o)
{
    atomic_store_explicit(&o->busy, 0, memory_order_release);
}
/* A thread is about to use o through its mutex: if it is not the owner, end the owner's path and
 * wait for its section. Two loads for the owner and once o is shared (every lookup calls it). */
void hc_owner_take_over_slow(hc_owner_t *o);
static inline void hc_owner_take_over(hc_owner_t *o)
{
    if (atomic_load_explicit(&o->owner, memory_order_relaxed) != &hc_owner_thread_mark &&
        !atomic_load_explicit(&o->shared, memory_order_relaxed))
        hc_owner_take_over_slow(o);
}

/* This process may use membarrier(PRIVATE_EXPEDITED) as the heavy side of an asymmetric fence
 * (registered on the first call). */
int hc_asym_fence_ready(void);

#endif
