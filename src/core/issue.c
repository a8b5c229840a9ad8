/* The issue lock (hc_issue.h). */
#include "hc_issue.h"

int hc_issue_lock_init(hc_issue_lock_t *lock)
{
    hc_owner_init(&lock->own, 0);
    return pthread_mutex_init(&lock->mutex, NULL);
}

void hc_issue_lock_destroy(hc_issue_lock_t *lock)
{
    pthread_mutex_destroy(&lock->mutex);
}

void hc_issue_lock(hc_issue_lock_t *lock)
{
    hc_owner_take_over(&lock->own);
    pthread_mutex_lock(&lock->mutex);
}

void hc_issue_unlock(hc_issue_lock_t *lock)
{
    pthread_mutex_unlock(&lock->mutex);
}

int hc_issue_enter(hc_issue_lock_t *lock)
{
    if (hc_owner_enter(&lock->own))
        return 1;
    hc_issue_lock(lock);
    return 0;
}

void hc_issue_leave(hc_issue_lock_t *lock, int entered)
{
    if (entered)
        hc_owner_leave(&lock->own);
    else
        hc_issue_unlock(lock);
}
