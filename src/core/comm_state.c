/*
 * Communicator state: the process-wide state callbacks (HcclCommRegCommStateCallback) and
 * suspend / resume.
 *
 * Suspend is a quiesce: the flag is set under exec_lock, the lock hc_op_enqueue numbers ops under,
 * so every op is either numbered before it (and is waited for here) or refused with
 * HCCL_E_SUSPENDING. Nothing is torn down: resume only clears the flag, and the communicator's
 * streams, engine and peers are exactly as they were.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_comm.h"
#include "hc_time.h"

/* CANN's bound on a registration name (length 1..159). */
#define STATE_NAME_MAX 160

typedef struct state_cb {
    char name[STATE_NAME_MAX];
    HcclCommStateCallback cb;
    void *args;
    struct state_cb *next;
} state_cb_t;

static pthread_mutex_t callbacks_lock = PTHREAD_MUTEX_INITIALIZER;
static state_cb_t *callbacks; /* registration order */

HcclResult hc_comm_state_register(const char *name, HcclCommStateCallback cb, void *args)
{
    size_t len = strnlen(name, STATE_NAME_MAX);
    state_cb_t **link;

    if (len == 0 || len >= STATE_NAME_MAX) {
        HC_ERROR("HcclCommRegCommStateCallback: regName must be 1 to %d characters long", STATE_NAME_MAX - 1);
        return HCCL_E_PARA;
    }
    pthread_mutex_lock(&callbacks_lock);
    for (link = &callbacks; *link != NULL; link = &(*link)->next)
        if (strcmp((*link)->name, name) == 0)
            break;
    if (*link == NULL) {
        *link = calloc(1, sizeof(**link));
        if (*link == NULL) {
            pthread_mutex_unlock(&callbacks_lock);
            HC_ERROR("HcclCommRegCommStateCallback: out of memory");
            return HCCL_E_MEMORY;
        }
        memcpy((*link)->name, name, len + 1);
    }
    (*link)->cb = cb;
    (*link)->args = args;
    pthread_mutex_unlock(&callbacks_lock);
    return HCCL_SUCCESS;
}

/*
 * The lock is held while the callbacks run, as in CANN, so that a registration never races a
 * notification. A callback must therefore not register callbacks itself (it would deadlock; CANN
 * has the same rule).
 */
HcclResult hc_comm_state_notify(HcclComm handle, HcclCommStatePhase phase)
{
    HcclResult res = HCCL_SUCCESS;

    pthread_mutex_lock(&callbacks_lock);
    for (const state_cb_t *c = callbacks; c != NULL && res == HCCL_SUCCESS; c = c->next) {
        res = c->cb(handle, phase, c->args);
        if (res != HCCL_SUCCESS)
            HC_ERROR("state callback '%s' failed with %s in phase %d", c->name, hc_result_name(res), (int)phase);
    }
    pthread_mutex_unlock(&callbacks_lock);
    return res;
}

HcclResult hc_comm_suspend(hc_comm_t *comm)
{
    int64_t deadline = hc_deadline_after_s(comm->settings.exec_timeout_s);
    HcclResult res = HCCL_SUCCESS;

    hc_issue_lock(&comm->exec_lock);
    atomic_store(&comm->suspended, 1);
    hc_comm_waiter_enter(comm);
    while (atomic_load(&comm->exec_seq) < atomic_load(&comm->next_seq) &&
           atomic_load(&comm->async_error) == HCCL_SUCCESS) {
        if (hc_comm_cond_wait(comm, deadline) == ETIMEDOUT) {
            HC_ERROR("HcclCommSuspend: %llu ops issued before it did not finish within HCCL_EXEC_TIMEOUT=%lld s; "
                     "the communicator stays suspended",
                     (unsigned long long)(atomic_load(&comm->next_seq) - atomic_load(&comm->exec_seq)),
                     (long long)comm->settings.exec_timeout_s);
            res = HCCL_E_TIMEOUT;
            break;
        }
    }
    hc_comm_waiter_leave(comm);
    hc_issue_unlock(&comm->exec_lock);
    return res;
}

void hc_comm_resume(hc_comm_t *comm)
{
    hc_issue_lock(&comm->exec_lock);
    atomic_store(&comm->suspended, 0);
    hc_issue_unlock(&comm->exec_lock);
}
