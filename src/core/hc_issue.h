/*
 * The lock a communicator's ops are issued under (exec_lock: sequence numbers, the flight
 * recorder's entry, the launch on the stream and the announcement, in one order for every issuing
 * thread), with an unlocked path for the one thread that issues on it.
 *
 * Almost every program issues on a communicator from one thread, and a mutex's two locked
 * instructions on every op cost more than the rest of the numbering: each waits until the stores
 * before it (the previous op's flags, on lines the peers read) have left the core. So the first
 * thread that issues becomes the lock's owner and enters an unlocked section instead (a store and a
 * load). Any other thread that takes the lock first ends that for good: it marks the lock shared,
 * runs membarrier(PRIVATE_EXPEDITED) (an asymmetric fence: after it, either the owner's "busy"
 * store is visible here or the owner's next look sees "shared") and waits until the owner's
 * section is over; from then on every thread takes the mutex. The runtime's stream owner does the
 * same (runtime/stream.c). Without membarrier there is no unlocked path.
 */
#ifndef HC_ISSUE_H
#define HC_ISSUE_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    pthread_mutex_t mutex;
    const void *_Atomic owner; /* the owning thread's mark; NULL: none yet */
    atomic_int shared;         /* another thread took the lock: everyone locks from now on */
    atomic_int busy;           /* the owner is in its unlocked section */
} hc_issue_lock_t;

/* A lock every thread takes as a plain mutex (no owner path), for static use. */
#define HC_ISSUE_LOCK_INITIALIZER {.mutex = PTHREAD_MUTEX_INITIALIZER, .shared = 1}

int hc_issue_lock_init(hc_issue_lock_t *lock);
void hc_issue_lock_destroy(hc_issue_lock_t *lock);

/* Take the mutex (ending the owner's unlocked path when this is another thread). */
void hc_issue_lock(hc_issue_lock_t *lock);
void hc_issue_unlock(hc_issue_lock_t *lock);

/* Enter the section the lock guards: unlocked when this thread owns the lock (or becomes its
 * owner) and nobody shared it, else by taking the mutex. Returns what hc_issue_leave needs. */
int hc_issue_enter(hc_issue_lock_t *lock);
void hc_issue_leave(hc_issue_lock_t *lock, int entered);

/* This process may use membarrier(PRIVATE_EXPEDITED) as the heavy side of an asymmetric fence
 * (registered on the first call). */
int hc_asym_fence_ready(void);

#endif
