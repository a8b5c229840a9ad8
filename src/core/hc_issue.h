/*
 * The lock a communicator's ops are issued under (exec_lock: sequence numbers, the flight
 * recorder's entry, the launch on the stream and the announcement, in one order for every issuing
 * thread), with an unlocked path for the one thread that issues on it.
 *
 * Almost every program issues on a communicator from one thread, and a mutex's two locked
 * instructions on every op cost more than the rest of the numbering: each waits until the stores
 * before it (the previous op's flags, on lines the peers read) have left the core. So the first
 * thread that issues becomes the lock's owner and enters its section without the mutex, until
 * another thread takes the lock (hc_owner.h; the runtime's streams do the same).
 */
#ifndef HC_ISSUE_H
#define HC_ISSUE_H

#include <pthread.h>

#include "hc_owner.h"

typedef struct {
    pthread_mutex_t mutex;
    hc_owner_t own; /* the first issuing thread's path without the mutex */
} hc_issue_lock_t;

/* A lock every thread takes as a plain mutex (no owner path), for static use. */
#define HC_ISSUE_LOCK_INITIALIZER {.mutex = PTHREAD_MUTEX_INITIALIZER, .own = HC_OWNER_SHARED_INITIALIZER}

int hc_issue_lock_init(hc_issue_lock_t *lock);
void hc_issue_lock_destroy(hc_issue_lock_t *lock);

/* Take the mutex (ending the owner's unlocked path when this is another thread). */
void hc_issue_lock(hc_issue_lock_t *lock);
void hc_issue_unlock(hc_issue_lock_t *lock);

/* Enter the section the lock guards: unlocked when this thread owns the lock (or becomes its
 * owner) and nobody shared it, else by taking the mutex. Returns what hc_issue_leave needs. */
int hc_issue_enter(hc_issue_lock_t *lock);
void hc_issue_leave(hc_issue_lock_t *lock, int entered);

#endif
