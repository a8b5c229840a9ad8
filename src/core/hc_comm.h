/*
 * The communicator. The handle given to the user names its slot in a process-wide registry
 * (hc_slotmap.h), never its address: every API call looks the handle up there first, without a
 * lock, so a NULL, foreign or destroyed handle is refused with HCCL_E_PARA without touching freed
 * memory.
 *
 * Lifetime: the registry entry and each queued op hold a reference. HcclCommDestroy removes the
 * entry, waits (bounded) for the queued ops, and drops its reference; the last reference frees.
 */
#ifndef HC_COMM_H
#define HC_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <hccl/hccl.h>

#include "hc_engine.h"
#include "hc_group.h"
#include "hc_issue.h"
#include "hc_log.h"
#include "hc_trace.h"

#define HC_COMM_TOKEN_BYTES 16

struct hc_comm_mem; /* memory ranges and symmetric windows (comm_mem.c) */

typedef struct hc_comm {
    void *handle;            /* what the user holds (hc_comm_register) */
    uint32_t rank;
    uint32_t nranks;
    char name[COMM_NAME_MAX_LENGTH];
    hc_log_ctx_t log_ctx;
    hc_comm_settings_t settings;
    int32_t device;

    hc_peer_t *peers;        /* nranks entries */
    uint32_t nlocal;         /* ranks on this host (incl. this one) */
    uint32_t local_index;    /* position of this rank among them */
    uint32_t *local_ranks;   /* nlocal entries, ascending */
    uint8_t token[HC_COMM_TOKEN_BYTES]; /* the root info's secret: transports authenticate with it */

    hc_engine_t *engine;     /* NULL when no engine can serve the communicator */
    hc_trace_t trace;        /* the flight recorder */
    const char *no_engine_reason;

    atomic_uint refs;
    atomic_int async_error;  /* HcclResult: first failure, sticky */
    atomic_int aborting;     /* set when destroy gives up waiting: waits fail fast */
    atomic_int suspended;    /* HcclCommSuspend: new ops fail with HCCL_E_SUSPENDING (set under exec_lock) */
    struct hc_comm_mem *mem; /* NULL until the first memory range or window */
    atomic_uint_fast64_t next_seq;
    uint64_t next_coll_seq;  /* collectives issued (under exec_lock) */
    struct hc_op *_Atomic spare_op; /* one freed op kept for the next (hc_op_alloc) */
    /* More free ops, for bursts of launches (op.c): a lock-free stack of slab indices. */
    atomic_uint_fast64_t pool_head;  /* tag << 32 | index of the top op (0: empty) */
    pthread_mutex_t pool_lock;       /* guards adding slabs */
    struct hc_op_slab *_Atomic slabs[16]; /* the memory of the pooled ops (OP_SLABS_MAX) */
    atomic_uint nslabs;

    /* Sub-communicators created from this one, per subCommId: how many so far (the n-th creation
     * with an id on every member uses the same mailbox tag). */
    pthread_mutex_t subcomm_lock;
    uint64_t subcomm_ids[64];
    uint32_t subcomm_counts[64];
    uint32_t nsubcomm_ids;

    /* Ops run in issue order even when issued on several streams. */
    hc_issue_lock_t exec_lock; /* hc_issue.h */
    pthread_cond_t exec_cv;
    atomic_uint_fast64_t exec_seq; /* seq of the last op that finished (or failed) */
    atomic_uint exec_waiters;      /* threads waiting on exec_cv (under exec_lock) */
} hc_comm_t;

/* Find a live communicator by handle and take a reference (release with hc_comm_release).
 * NULL handle: HCCL_E_PTR; unknown or destroyed: HCCL_E_PARA. Both logged with `what`. */
HcclResult hc_comm_acquire(HcclComm handle, const char *what, hc_comm_t **comm_p);
void hc_comm_ref(hc_comm_t *comm); /* one more reference, for a holder that already has one */
int hc_comm_handle_live(const void *handle); /* still names a live communicator (nothing taken) */
/* The registry's state word for handle, NULL for a handle that can name no communicator: whether it
 * still names a live one is hc_slotmap_state_live(state, handle) (hc_slotmap.h), nothing taken. */
atomic_uint_fast64_t *hc_comm_handle_state(const void *handle);
void hc_comm_release(hc_comm_t *comm);
/* hc_comm_acquire for the length of one call on this thread (comm_borrow.c): *borrowed_p 1 when
 * comm is borrowed without a reference (end it with hc_comm_unborrow before the call returns; an op
 * that outlives the call takes a reference with hc_comm_ref first), 0 when a reference was taken
 * (hc_comm_unborrow releases it). */
HcclResult hc_comm_borrow(HcclComm handle, const char *what, hc_comm_t **comm_p, int *borrowed_p);
void hc_comm_unborrow(hc_comm_t *comm, int borrowed);
/* Destroy, after unregistering comm: wait until no thread is inside a call that borrowed it
 * (bounded by the exec timeout: -1, logged, when one still is). */
int hc_comm_wait_borrowers(hc_comm_t *comm);
void hc_comm_borrow_fork_prepare(void);
void hc_comm_borrow_fork_parent(void);
void hc_comm_borrow_fork_child(void);

/* Create the communicator object from the bootstrap's results (takes ownership of peers). */
HcclResult hc_comm_create(uint32_t nranks, uint32_t rank, hc_peer_t *peers, const hc_comm_settings_t *settings,
                          const char *name, hc_comm_t **comm_p);

/* Pick and build the communicator's engine (engine.c): collective over the communicator. */
HcclResult hc_engine_attach(hc_comm_t *comm, hc_boot_t *boot);

/* Enter comm in the registry: from now on comm->handle is a valid handle. HCCL_E_MEMORY (logged)
 * when the registry cannot grow. */
HcclResult hc_comm_register(hc_comm_t *comm);

/* Remove from the registry, wait for queued ops (bounded by the exec timeout), drop the
 * registry's reference. */
HcclResult hc_comm_destroy(hc_comm_t *comm);

/* pthread_cond_timedwait on exec_cv (CLOCK_MONOTONIC deadline, 0 = none), exec_lock held.
 * Returns 0 when woken, ETIMEDOUT after the deadline. */
int hc_comm_cond_wait(hc_comm_t *comm, int64_t deadline_ns);

/* A thread about to wait on exec_cv for exec_seq (exec_lock held) counts itself in exec_waiters
 * with this, and leaves with hc_comm_waiter_leave; a finishing op publishes exec_seq with
 * hc_comm_publish_exec (op.c) and wakes the waiters it then sees. */
void hc_comm_waiter_enter(hc_comm_t *comm);
void hc_comm_waiter_leave(hc_comm_t *comm);
/* Store exec_seq = seq; 1 if a waiter may need waking (take exec_lock and broadcast exec_cv). */
int hc_comm_publish_exec(hc_comm_t *comm, uint64_t seq);

/* Record err as the communicator's failure if it is the first one. */
void hc_comm_set_error(hc_comm_t *comm, HcclResult err);

/* Resolve settings: config (may be NULL) over environment over defaults. Invalid config
 * fields are HCCL_E_PARA, logged. */
HcclResult hc_comm_settings_resolve(const HcclCommConfig *config, hc_comm_settings_t *settings_p, char *name,
                                    size_t name_len);

/* fork(): a child starts with no communicators (comm.c). */
void hc_comm_fork_prepare(void);
void hc_comm_fork_parent(void);
void hc_comm_fork_child(void);

/* Process-wide deterministic level (HcclSetConfig). -1: not set. */
extern atomic_int hc_global_deterministic;

/* HCCL_DETERMINISTIC: -1 when unset (or invalid, warned once), else 0, 1 or 2 (strict). */
int hc_comm_env_deterministic(void);

/* The process-wide level in effect: the environment when set (it wins, as in CANN), else
 * HcclSetConfig's value, else 0. */
int hc_comm_global_deterministic(void);

/* The live communicator named name, with a reference taken; HCCL_E_NOT_FOUND (not logged) when none. */
HcclResult hc_comm_find_by_name(const char *name, hc_comm_t **comm_p);

/* ---- state (comm_state.c) ---------------------------------------------------------------------- */

/* Call every registered state callback for phase; the first error a callback returns. */
HcclResult hc_comm_state_notify(HcclComm handle, HcclCommStatePhase phase);

/* Register (or replace) the callback named name. */
HcclResult hc_comm_state_register(const char *name, HcclCommStateCallback cb, void *args);

/* Refuse new ops, then wait (bounded by the exec timeout) for the ops issued before. */
HcclResult hc_comm_suspend(hc_comm_t *comm);

/* Accept ops again. */
void hc_comm_resume(hc_comm_t *comm);

/* ---- memory ranges and symmetric windows (comm_mem.c) ---------------------------------------- */

HcclResult hc_comm_mem_set_range(hc_comm_t *comm, void *base, size_t size);
HcclResult hc_comm_mem_unset_range(hc_comm_t *comm, void *base);
HcclResult hc_comm_mem_activate(hc_comm_t *comm, void *ptr, size_t size, aclrtDrvMemHandle handle);
HcclResult hc_comm_mem_deactivate(hc_comm_t *comm, void *ptr);
HcclResult hc_comm_win_register(hc_comm_t *comm, void *addr, uint64_t size, HcclCommSymWindow *win_p);
HcclResult hc_comm_win_deregister(HcclCommSymWindow win);
HcclResult hc_comm_win_get(hc_comm_t *comm, void *ptr, size_t size, HcclCommSymWindow *win_p, size_t *offset_p);

/* Free what comm_mem.c holds for comm (at the last reference). */
void hc_comm_mem_free(hc_comm_t *comm);

#endif /* HC_COMM_H */
