/*
 * The communicator. A handle given to the user is a hc_comm_t pointer that is also entered in a
 * process-wide registry: every API call looks the handle up there first, so a NULL, foreign or
 * destroyed handle is refused with HCCL_E_PARA without touching freed memory.
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
#include "hc_log.h"
#include "hc_trace.h"

#define HC_HOST_ID_BYTES 32
#define HC_HOSTNAME_BYTES 64

/* What the bootstrap tells every rank about every other. */
typedef struct {
    uint8_t host_id[HC_HOST_ID_BYTES]; /* boot id + network and pid namespaces */
    char hostname[HC_HOSTNAME_BYTES];
    int32_t pid;
    int32_t device;
} hc_peer_t;

/* Settings resolved at creation: HcclCommConfig field > environment > default. */
typedef struct {
    uint64_t buffer_bytes;
    int deterministic;
    int64_t exec_timeout_s;  /* 0: wait forever */
    int64_t peer_check_ms;
    int64_t still_waiting_s; /* HOSTCCL_STILL_WAITING_S, 0: never */
    int64_t still_waiting_backoff;
} hc_comm_settings_t;

typedef struct hc_comm {
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

    hc_engine_t *engine;     /* NULL when no engine can serve the communicator */
    hc_trace_t trace;        /* the flight recorder */
    const char *no_engine_reason;

    atomic_int refs;
    atomic_int async_error;  /* HcclResult: first failure, sticky */
    atomic_int aborting;     /* set when destroy gives up waiting: waits fail fast */
    atomic_uint_fast64_t next_seq;
    uint64_t next_coll_seq;  /* collectives issued (under exec_lock) */
    struct hc_op *_Atomic spare_op; /* one freed op kept for the next (hc_op_alloc) */
    pthread_mutex_t pool_lock;       /* guards the pool and slabs below */
    struct hc_op *pool;              /* more free ops, for bursts of launches (hc_op_alloc) */
    struct hc_op_slab *slabs;        /* the memory of the pooled ops */
    uint32_t nslabs;

    /* Sub-communicators created from this one, per subCommId: how many so far (the n-th creation
     * with an id on every member uses the same mailbox tag). */
    pthread_mutex_t subcomm_lock;
    uint64_t subcomm_ids[64];
    uint32_t subcomm_counts[64];
    uint32_t nsubcomm_ids;

    /* Ops run in issue order even when issued on several streams. */
    pthread_mutex_t exec_lock;
    pthread_cond_t exec_cv;
    atomic_uint_fast64_t exec_seq; /* seq of the last op that finished (or failed) */
    atomic_uint exec_waiters;      /* threads waiting on exec_cv (under exec_lock) */
} hc_comm_t;

/* Find a live communicator by handle and take a reference (release with hc_comm_release).
 * NULL handle: HCCL_E_PTR; unknown or destroyed: HCCL_E_PARA. Both logged with `what`. */
HcclResult hc_comm_acquire(HcclComm handle, const char *what, hc_comm_t **comm_p);
void hc_comm_release(hc_comm_t *comm);

/* Create the communicator object from the bootstrap's results (takes ownership of peers). */
HcclResult hc_comm_create(uint32_t nranks, uint32_t rank, hc_peer_t *peers, const hc_comm_settings_t *settings,
                          const char *name, hc_comm_t **comm_p);

/* Enter comm in the registry: from now on it is a valid handle. */
void hc_comm_register(hc_comm_t *comm);

/* Remove from the registry, wait for queued ops (bounded by the exec timeout), drop the
 * registry's reference. */
HcclResult hc_comm_destroy(hc_comm_t *comm);

/* pthread_cond_timedwait on exec_cv (CLOCK_MONOTONIC deadline, 0 = none), exec_lock held.
 * Returns 0 when woken, ETIMEDOUT after the deadline. */
int hc_comm_cond_wait(hc_comm_t *comm, int64_t deadline_ns);

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

/* Process-wide deterministic flag (HcclSetConfig). -1: not set, use the environment. */
extern atomic_int hc_global_deterministic;

#endif /* HC_COMM_H */
