/* Communicator objects: registry, references, settings, destruction. */
#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_slotmap.h"
#include "hc_time.h"

/* The registry (hc_slotmap.h): lookups take no lock. Kind 5, so a communicator's handle is never
 * a valid runtime handle (streams, events, contexts, physical memory: 1..4) and the other way round. */
#define COMM_KIND 5u
static hc_slotmap_t registry = HC_SLOTMAP_INITIALIZER(hc_comm_t, refs);

HcclResult hc_comm_acquire(HcclComm handle, const char *what, hc_comm_t **comm_p)
{
    hc_comm_t *comm;

    if (handle == NULL) {
        HC_ERROR("%s: the communicator is NULL", what);
        return HCCL_E_PTR;
    }
    comm = hc_slotmap_lookup(&registry, handle, COMM_KIND);
    if (comm == NULL) {
        if (hc_slotmap_from_parent(&registry, handle, COMM_KIND))
            HC_ERROR("%s: communicator %p was created by the parent process before fork(); a child has none of "
                     "its parent's communicators: create its own", what, handle);
        else
            HC_ERROR("%s: %p is not a live communicator (never created, or already destroyed)", what, handle);
        return HCCL_E_PARA;
    }
    *comm_p = comm;
    return HCCL_SUCCESS;
}

static void comm_free(hc_comm_t *comm)
{
    if (comm->engine != NULL)
        comm->engine->ops->destroy(comm->engine);
    hc_comm_mem_free(comm);
    pthread_cond_destroy(&comm->exec_cv);
    hc_issue_lock_destroy(&comm->exec_lock);
    pthread_mutex_destroy(&comm->subcomm_lock);
    hc_trace_fini(&comm->trace);
    hc_op_pool_drain(comm);
    pthread_mutex_destroy(&comm->pool_lock);
    free(comm->local_ranks);
    free(comm->peers);
    free(comm);
}

int hc_comm_handle_live(const void *handle)
{
    return hc_slotmap_is_live(&registry, handle, COMM_KIND);
}

atomic_uint_fast64_t *hc_comm_handle_state(const void *handle)
{
    return hc_slotmap_state_of(&registry, handle, COMM_KIND);
}

void hc_comm_ref(hc_comm_t *comm)
{
    atomic_fetch_add(&comm->refs, 1);
}

void hc_comm_release(hc_comm_t *comm)
{
    if (atomic_fetch_sub(&comm->refs, 1) == 1)
        comm_free(comm);
}

HcclResult hc_comm_register(hc_comm_t *comm)
{
    comm->handle = hc_slotmap_register(&registry, comm, COMM_KIND);
    if (comm->handle != NULL)
        return HCCL_SUCCESS;
    HC_ERROR("cannot register the communicator: out of memory or handles");
    return HCCL_E_MEMORY;
}

/* Remove comm from the registry; 0 if it was there. Once this returns no lookup reaches it. */
static int unregister(hc_comm_t *comm)
{
    return hc_slotmap_unregister(&registry, comm->handle, COMM_KIND) == comm ? 0 : -1;
}

int hc_comm_cond_wait(hc_comm_t *comm, int64_t deadline_ns)
{
    struct timespec ts;

    if (deadline_ns == 0)
        return pthread_cond_wait(&comm->exec_cv, &comm->exec_lock.mutex);
    ts.tv_sec = deadline_ns / HC_NS_PER_S;
    ts.tv_nsec = deadline_ns % HC_NS_PER_S;
    return pthread_cond_timedwait(&comm->exec_cv, &comm->exec_lock.mutex, &ts);
}

/*
 * exec_seq is published after every op, and a thread waits for it only rarely (an op issued on
 * another stream than the one before it, destroy, suspend). A seq_cst store (a locked instruction)
 * ordered the publication before the look at exec_waiters, and right after the op's stores to lines
 * its peers read it waited for them to leave: 2 ranks, blocking 8-byte Broadcast 0.278-0.280 ->
 * 0.262-0.274 us a call without it. So the publisher orders nothing (a release store, then the
 * look), and a waiter, after counting itself, forces a barrier on every thread of the process
 * (membarrier): either the publisher's store is then visible to the waiter's check, or the
 * publisher's look comes after the count and sees it (an asymmetric fence). Without membarrier the
 * store stays seq_cst.
 */
void hc_comm_waiter_enter(hc_comm_t *comm)
{
    atomic_fetch_add(&comm->exec_waiters, 1);
    if (hc_asym_fence_ready())
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); /* cannot fail once registered */
}

void hc_comm_waiter_leave(hc_comm_t *comm)
{
    atomic_fetch_sub(&comm->exec_waiters, 1);
}

int hc_comm_publish_exec(hc_comm_t *comm, uint64_t seq)
{
    if (!hc_asym_fence_ready()) {
        atomic_store(&comm->exec_seq, seq);
        return atomic_load(&comm->exec_waiters) != 0;
    }
    atomic_store_explicit(&comm->exec_seq, seq, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    return atomic_load_explicit(&comm->exec_waiters, memory_order_relaxed) != 0;
}

static int init_sync(hc_comm_t *comm)
{
    pthread_condattr_t attr;
    int err;

    if (hc_issue_lock_init(&comm->exec_lock) != 0)
        return -1;
    if (pthread_mutex_init(&comm->subcomm_lock, NULL) != 0) {
        hc_issue_lock_destroy(&comm->exec_lock);
        return -1;
    }
    if (pthread_mutex_init(&comm->pool_lock, NULL) != 0) {
        pthread_mutex_destroy(&comm->subcomm_lock);
        hc_issue_lock_destroy(&comm->exec_lock);
        return -1;
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    err = pthread_cond_init(&comm->exec_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (err != 0) {
        hc_issue_lock_destroy(&comm->exec_lock);
        pthread_mutex_destroy(&comm->subcomm_lock);
        pthread_mutex_destroy(&comm->pool_lock);
        return -1;
    }
    return 0;
}

/* Which ranks share this rank's host (same host id), ascending. */
static HcclResult find_local_ranks(hc_comm_t *comm)
{
    const uint8_t *mine = comm->peers[comm->rank].host_id;

    comm->local_ranks = calloc(comm->nranks, sizeof(*comm->local_ranks));
    if (comm->local_ranks == NULL) {
        HC_ERROR("out of memory");
        return HCCL_E_MEMORY;
    }
    for (uint32_t r = 0; r < comm->nranks; r++) {
        if (memcmp(comm->peers[r].host_id, mine, HC_HOST_ID_BYTES) != 0)
            continue;
        if (r == comm->rank)
            comm->local_index = comm->nlocal;
        comm->local_ranks[comm->nlocal++] = r;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_comm_create(uint32_t nranks, uint32_t rank, hc_peer_t *peers, const hc_comm_settings_t *settings,
                          const char *name, hc_comm_t **comm_p)
{
    hc_comm_t *comm = calloc(1, sizeof(*comm));
    HcclResult res;

    if (comm == NULL || init_sync(comm) != 0) {
        HC_ERROR("out of memory creating a communicator");
        free(comm);
        free(peers);
        return HCCL_E_MEMORY;
    }
    if (hc_trace_init(&comm->trace, (uint32_t)hc_config_int(HC_CFG_TRACE_OPS)) != HCCL_SUCCESS) {
        pthread_cond_destroy(&comm->exec_cv);
        hc_issue_lock_destroy(&comm->exec_lock);
        pthread_mutex_destroy(&comm->subcomm_lock);
        pthread_mutex_destroy(&comm->pool_lock);
        free(comm);
        free(peers);
        return HCCL_E_MEMORY;
    }
    comm->rank = rank;
    comm->nranks = nranks;
    comm->peers = peers;
    comm->settings = *settings;
    comm->device = peers[rank].device;
    snprintf(comm->name, sizeof(comm->name), "%s", name);
    comm->log_ctx = (hc_log_ctx_t){.rank = (int)rank, .comm_name = comm->name};
    atomic_init(&comm->refs, 1);
    atomic_init(&comm->async_error, HCCL_SUCCESS);
    atomic_init(&comm->aborting, 0);
    atomic_init(&comm->suspended, 0);
    atomic_init(&comm->next_seq, 0);
    res = find_local_ranks(comm);
    if (res != HCCL_SUCCESS) {
        comm_free(comm);
        return res;
    }
    hc_op_pool_init(comm);
    *comm_p = comm;
    return HCCL_SUCCESS;
}

void hc_comm_set_error(hc_comm_t *comm, HcclResult err)
{
    int expected = HCCL_SUCCESS;

    atomic_compare_exchange_strong(&comm->async_error, &expected, (int)err);
}

/* Wait until every issued op has finished, bounded by the exec timeout; then abort the rest. */
static void drain_ops(hc_comm_t *comm)
{
    int64_t deadline = hc_deadline_after_s(comm->settings.exec_timeout_s);

    hc_issue_lock(&comm->exec_lock);
    hc_comm_waiter_enter(comm);
    while (atomic_load(&comm->exec_seq) < atomic_load(&comm->next_seq) &&
           atomic_load(&comm->async_error) == HCCL_SUCCESS) {
        if (hc_comm_cond_wait(comm, deadline) == ETIMEDOUT) {
            HC_ERROR("destroy: %llu queued ops did not finish within HCCL_EXEC_TIMEOUT=%lld s; aborting them",
                     (unsigned long long)(atomic_load(&comm->next_seq) - atomic_load(&comm->exec_seq)),
                     (long long)comm->settings.exec_timeout_s);
            break;
        }
    }
    hc_comm_waiter_leave(comm);
    hc_issue_unlock(&comm->exec_lock);
    /* Ops still queued or running now fail fast instead of waiting for peers. */
    atomic_store(&comm->aborting, 1);
    hc_comm_set_error(comm, HCCL_E_INTERNAL);
    hc_issue_lock(&comm->exec_lock);
    pthread_cond_broadcast(&comm->exec_cv);
    hc_issue_unlock(&comm->exec_lock);
}

/* The state callbacks see the handle before and after; a DESTROY_PRE callback that fails stops
 * the destruction (the communicator stays usable), one that fails after it is only reported. */
HcclResult hc_comm_destroy(hc_comm_t *comm)
{
    HcclComm handle = comm->handle; /* comm may be freed before the last callback */

    HC_CHECK(hc_comm_state_notify(handle, HCCL_COMM_STATE_PHASE_DESTROY_PRE));
    if (unregister(comm) != 0)
        return HCCL_E_PARA;
    if (hc_comm_wait_borrowers(comm) != 0)
        return HCCL_E_TIMEOUT; /* left allocated: a thread still uses it */
    drain_ops(comm);
    hc_comm_release(comm);
    return hc_comm_state_notify(handle, HCCL_COMM_STATE_PHASE_DESTROY_POST);
}

typedef struct {
    const char *name;
    int32_t device;
    hc_comm_t *found;
} find_name_t;

static void find_name_one(void *obj, void *arg)
{
    hc_comm_t *comm = obj;
    find_name_t *f = arg;

    if (strncmp(comm->name, f->name, COMM_NAME_MAX_LENGTH) != 0)
        return;
    if (f->found != NULL && (f->found->device == f->device || comm->device != f->device))
        return;
    /* Under the registry's mutex, so a reference taken here comes before any unregister returns the
     * registry's; one dropped here was not the last (the registry still holds one). */
    if (f->found != NULL)
        atomic_fetch_sub(&f->found->refs, 1);
    atomic_fetch_add(&comm->refs, 1);
    f->found = comm;
}

/* Names are per process, but threads as ranks (HcclCommInitAll, one thread per device) give every
 * rank of a communicator the same name: as CANN does, the calling thread's device picks among them. */
HcclResult hc_comm_find_by_name(const char *name, hc_comm_t **comm_p)
{
    find_name_t f = {.name = name, .device = aclrtHostCurrentDevice()};

    hc_slotmap_each(&registry, COMM_KIND, find_name_one, &f);
    if (f.found == NULL)
        return HCCL_E_NOT_FOUND;
    *comm_p = f.found;
    return HCCL_SUCCESS;
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_comm_fork_prepare(void)
{
    hc_slotmap_fork_prepare(&registry);
    hc_comm_borrow_fork_prepare();
}

void hc_comm_fork_parent(void)
{
    hc_comm_borrow_fork_parent();
    hc_slotmap_fork_parent(&registry);
}

/*
 * The child has none of the parent's communicators: their ops ran on the parent's streams and
 * threads, and their peers know the parent's pid. They stay allocated and unused (their locks may
 * be held by threads that do not exist here); the registry forgets them, keeping the handles only
 * to explain a call with one.
 */
void hc_comm_fork_child(void)
{
    hc_comm_borrow_fork_child();
    hc_slotmap_fork_child(&registry);
    hc_op_fork_child();
}
