/*
 * A thread's borrow of a communicator for the length of one call, without touching its reference
 * count. Every collective and point-to-point call used to take a reference (three atomic
 * read-modify-writes on the registry's slot and the count) and drop it (a fourth) at its end, right
 * after the op's stores to lines its peers read: a locked instruction waits for those stores, and a
 * blocking 8-byte Broadcast on 2 ranks took 0.448 us a call with them against 0.410 without
 * (bench/results/2026-12-03-kvm-p2p-alltoall.md).
 *
 * The calling thread remembers the last communicator it looked up (handle, object and the
 * registry slot's state word). A borrow of that handle publishes the object in the thread's
 * hazard record (a plain store), then checks that the handle is still registered (a load of that
 * state word, whose memory is never freed); the return clears the record. hc_comm_destroy, after
 * unregistering the handle, runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (hc_owner.h's
 * asymmetric fence: after it, either a borrower's store is visible to it, or that borrower's
 * check sees the handle gone and backs off) and waits until no record holds the communicator,
 * before its ops are drained and its last reference dropped. A call that borrows inside another
 * call's borrow (nested), a thread without a record, or a process without membarrier takes a
 * reference as before.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_comm.h"
#include "hc_owner.h"
#include "hc_slotmap.h"
#include "hc_time.h"

typedef struct hazard {
    hc_comm_t *_Atomic comm; /* the communicator this thread is inside a call of, or NULL */
    struct hazard *next;
} hazard_t;

static pthread_mutex_t hazards_lock = PTHREAD_MUTEX_INITIALIZER;
static hazard_t *hazards; /* every thread's record, under hazards_lock */
static pthread_key_t hazard_key;
static pthread_once_t hazard_once = PTHREAD_ONCE_INIT;
static int hazard_key_ok;

static HC_TLS_FAST struct {
    HcclComm handle; /* the communicator this thread looked up last; NULL: none */
    hc_comm_t *comm;
    atomic_uint_fast64_t *state; /* handle's slot state in the registry (hc_comm_handle_state) */
    hazard_t *rec;
} tls;

/* Thread exit: the record leaves the list (a destroyer then no longer waits for it), and the thread
 * forgets it (a call from a later key destructor makes a new one). */
static void hazard_thread_exit(void *rec)
{
    tls.rec = NULL;
    tls.handle = NULL;
    pthread_mutex_lock(&hazards_lock);
    for (hazard_t **p = &hazards; *p != NULL; p = &(*p)->next) {
        if (*p == rec) {
            *p = ((hazard_t *)rec)->next;
            break;
        }
    }
    pthread_mutex_unlock(&hazards_lock);
    free(rec);
}

static void hazard_key_create(void)
{
    hazard_key_ok = pthread_key_create(&hazard_key, hazard_thread_exit) == 0;
}

/* This thread's record, made on first use; NULL when there can be none (no membarrier, no memory,
 * no key to free it at thread exit). */
static hazard_t *my_record(void)
{
    hazard_t *rec;

    if (tls.rec != NULL)
        return tls.rec;
    if (!hc_asym_fence_ready())
        return NULL;
    pthread_once(&hazard_once, hazard_key_create);
    if (!hazard_key_ok || (rec = calloc(1, sizeof(*rec))) == NULL)
        return NULL;
    if (pthread_setspecific(hazard_key, rec) != 0) {
        free(rec);
        return NULL;
    }
    pthread_mutex_lock(&hazards_lock);
    rec->next = hazards;
    hazards = rec;
    pthread_mutex_unlock(&hazards_lock);
    tls.rec = rec;
    return rec;
}

/* A lookup that takes a reference (a thread's first call on a communicator, a nested one, a
 * handle destroyed since), remembering the handle for the next borrow. Not inlined: the fast path
 * of hc_comm_borrow then saves no registers (a borrow took ~60 instructions with it inside). */
static __attribute__((noinline)) HcclResult acquire_and_remember(HcclComm handle, const char *what,
                                                                 hc_comm_t **comm_p)
{
    HC_CHECK(hc_comm_acquire(handle, what, comm_p));
    if (my_record() != NULL) {
        tls.handle = handle;
        tls.comm = *comm_p;
        tls.state = hc_comm_handle_state(handle); /* not NULL: the handle named a live communicator */
    }
    return HCCL_SUCCESS;
}

HcclResult hc_comm_borrow(HcclComm handle, const char *what, hc_comm_t **comm_p, int *borrowed_p)
{
    hazard_t *rec = tls.rec;

    *borrowed_p = 0;
    if (handle != NULL && handle == tls.handle && rec != NULL &&
        atomic_load_explicit(&rec->comm, memory_order_relaxed) == NULL) {
        atomic_store_explicit(&rec->comm, tls.comm, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst); /* the destroyer's membarrier orders it before the load */
        if (hc_slotmap_state_live(tls.state, handle)) {
            *comm_p = tls.comm;
            *borrowed_p = 1;
            return HCCL_SUCCESS;
        }
        atomic_store_explicit(&rec->comm, NULL, memory_order_release);
        tls.handle = NULL; /* destroyed: the lookup below says so */
    }
    return acquire_and_remember(handle, what, comm_p);
}

void hc_comm_unborrow(hc_comm_t *comm, int borrowed)
{
    if (borrowed)
        atomic_store_explicit(&tls.rec->comm, NULL, memory_order_release);
    else
        hc_comm_release(comm);
}

/* Does some thread's record hold comm? */
static int borrowed_anywhere(const hc_comm_t *comm)
{
    int found = 0;

    pthread_mutex_lock(&hazards_lock);
    for (const hazard_t *h = hazards; h != NULL && !found; h = h->next)
        found = atomic_load_explicit(&h->comm, memory_order_acquire) == comm;
    pthread_mutex_unlock(&hazards_lock);
    return found;
}

int hc_comm_wait_borrowers(hc_comm_t *comm)
{
    int64_t deadline;

    if (!hc_asym_fence_ready())
        return 0; /* nobody borrows without it */
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); /* cannot fail once registered */
    if (!borrowed_anywhere(comm))
        return 0;
    /* Another thread is inside a call on comm (destroying a communicator another thread is using is
     * the program's error; the call itself ends within the op timeouts). */
    deadline = hc_deadline_after_s(comm->settings.exec_timeout_s);
    while (borrowed_anywhere(comm)) {
        struct timespec pause = {.tv_nsec = 100 * 1000};
        if (hc_deadline_passed(deadline)) {
            HC_ERROR("destroy: another thread was still inside a call on this communicator after "
                     "HCCL_EXEC_TIMEOUT=%lld s; the communicator's memory is left allocated",
                     (long long)comm->settings.exec_timeout_s);
            return -1;
        }
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* fork(): the list is not changing while the process forks. In the child the one thread is inside
 * no call, and the other threads' records stay behind, cleared (their threads do not exist there;
 * the child has none of the parent's communicators either). */
void hc_comm_borrow_fork_prepare(void)
{
    pthread_mutex_lock(&hazards_lock);
}

void hc_comm_borrow_fork_parent(void)
{
    pthread_mutex_unlock(&hazards_lock);
}

void hc_comm_borrow_fork_child(void)
{
    for (hazard_t *h = hazards; h != NULL; h = h->next)
        atomic_store_explicit(&h->comm, NULL, memory_order_relaxed);
    tls.handle = NULL;
    pthread_mutex_unlock(&hazards_lock);
}
