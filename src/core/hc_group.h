/*
 * The group view an engine runs over (DESIGN.md 5): which communicator ranks it serves, this rank's
 * place among them, and what it needs of the communicator (peer table, settings, abort flag, the
 * lock that orders announcements), but never the communicator itself. The intra-host engine runs
 * over the ranks of one host, the inter-host schedules over one rank per host or every rank, so an
 * engine's "rank i" is group index i; ops handed to an engine name roots and peers in that space.
 */
#ifndef HC_GROUP_H
#define HC_GROUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <hccl/hccl_types.h>
#include <hccl/hccl.h>

#include "hc_issue.h"

#define HC_HOST_ID_BYTES 32
#define HC_HOSTNAME_BYTES 64
#define HC_NET_ADDR_BYTES 28 /* a struct sockaddr_in6 */

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
    int deterministic;       /* 0, 1, 2 (strict); every reduction is in rank order on a host */
    int64_t exec_timeout_s;  /* 0: wait forever */
    int64_t peer_check_ms;
    int64_t still_waiting_s; /* HOSTCCL_STILL_WAITING_S, 0: never */
    int64_t still_waiting_backoff;
    uint32_t op_expansion_mode; /* HcclCommConfig's value, as given (a host expands every op) */
    uint32_t world_rank_id;  /* HcclCommConfig v6, as given */
    uint64_t job_id;
    uint64_t sym_win_max_gb; /* largest symmetric window per rank, GB */
    char algo[HCCL_COMM_ALGO_MAX_LENGTH]; /* HcclCommConfig.hcclAlgo, else HCCL_ALGO, else "" */
} hc_comm_settings_t;

typedef struct {
    uint32_t size;                      /* ranks in the group */
    uint32_t me;                        /* this rank's index in it */
    uint32_t *ranks;                    /* group index -> communicator rank (owned by the view) */
    uint32_t comm_size;                 /* ranks of the communicator (boot exchanges are over all) */
    const hc_peer_t *peers;             /* the communicator's table, by communicator rank */
    const hc_comm_settings_t *settings;
    atomic_int *aborting;               /* set when the communicator is destroyed with ops pending */
    hc_issue_lock_t *lock;              /* the communicator's exec_lock (enqueue order; hc_issue.h) */
    const uint8_t *token;               /* the communicator's secret (HC_TOKEN_BYTES), for transports */
} hc_group_t;

/* The communicator rank of group index i. */
static inline uint32_t hc_group_rank(const hc_group_t *group, uint32_t i)
{
    return group->ranks[i];
}

/* This rank's communicator rank. */
static inline uint32_t hc_group_my_rank(const hc_group_t *group)
{
    return group->ranks[group->me];
}

/* Copy `from` with the members in `ranks` (n of them, communicator ranks, this rank among them).
 * HCCL_E_MEMORY (logged) or HCCL_E_INTERNAL when this rank is not a member. */
HcclResult hc_group_init(hc_group_t *group, const hc_group_t *from, const uint32_t *ranks, uint32_t n);
void hc_group_fini(hc_group_t *group);

/* The index of communicator rank r in the group, or UINT32_MAX. */
uint32_t hc_group_index_of(const hc_group_t *group, uint32_t r);

#endif /* HC_GROUP_H */
