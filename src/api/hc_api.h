/*
 * The API layer's one path (STYLE.md 4): each public collective fills an hc_call_t with its
 * arguments and calls hc_api_submit, which checks them against the collective's rules, builds the
 * op descriptor and enqueues it. No collective-specific plumbing lives in the wrappers.
 */
#ifndef HC_API_H
#define HC_API_H

#include <hccl/hccl.h>

#include "hc_op.h"

typedef struct {
    const char *fn;          /* public function name, for messages */
    hc_coll_t coll;
    HcclComm handle;
    void *sendbuf;
    void *recvbuf;
    uint64_t count;
    HcclDataType dtype;
    HcclDataType recv_dtype; /* AlltoAll family */
    uint64_t recv_count;     /* AlltoAll */
    HcclReduceOp redop;
    uint32_t root;           /* root or peer */
    const void *counts;      /* V variants: uint64_t arrays of rank size (matrix for VC) */
    const void *displs;
    const void *recv_counts;
    const void *recv_displs;
    const HcclSendRecvItem *items;
    uint32_t nitems;
} hc_call_t;

HcclResult hc_api_submit(const hc_call_t *call, aclrtStream stream);

struct hc_comm;

/* Checks of the calls with count arrays or item lists (api_vector.c). *moved_p receives the number
 * of elements this rank moves (0: nothing to do). */
HcclResult hc_api_check_vectors(const hc_call_t *call, const struct hc_comm *comm, uint64_t *moved_p);
HcclResult hc_api_check_alltoall(const hc_call_t *call);
HcclResult hc_api_check_batch(const hc_call_t *call, const struct hc_comm *comm, uint64_t *moved_p);

/* Point a V variant's op at the caller's count arrays (vectors_borrowed: for the blocking fast path,
 * whose op lives no longer than the call) and compute the digest all ranks must agree on. */
void hc_api_point_vectors(hc_op_t *op, const hc_call_t *call, const struct hc_comm *comm);
/* The same with copies the op owns (the caller's arrays may be freed once the call returns); a
 * batch's items are copied. */
HcclResult hc_api_attach_vectors(hc_op_t *op, const hc_call_t *call, const struct hc_comm *comm);

/* Create a communicator from a root info (api_comm.c); default_comm_name NULL: derived from the
 * root info's token. */
HcclResult hc_api_comm_init(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                            const HcclCommConfig *config, const char *default_comm_name, HcclComm *comm_p);

/* Groups (api_group.c): between HcclGroupStart and HcclGroupEnd ops are parked, then issued
 * together: each communicator's collectives in issue order, then all of its point-to-point calls as
 * one batch that progresses every send and receive at once (so their order never deadlocks). */
int hc_api_group_active(void);
/* Park op; the call's reference on the communicator goes with it (on failure the caller keeps it,
 * and op has been freed). */
HcclResult hc_api_group_add(hc_op_t *op, aclrtStream stream);
/* Park a Send or Recv call (checked) as its item, with no reference: the group's end looks comm up
 * again. */
HcclResult hc_api_group_add_p2p(struct hc_comm *comm, const hc_call_t *call, aclrtStream stream);

/* Whether the launcher's variables say every rank runs on this host (api_host.c). */
int hc_api_launch_one_host(void);

/* fork(): the child's thread starts outside any group. */
void hc_api_group_fork_child(void);

/* HCCL_ENTRY_LOG_ENABLE: log the call at info level whatever the log level. */
int hc_api_entry_log_enabled(void);
void hc_api_entry_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define HC_API_EXPORT __attribute__((visibility("default")))

#endif /* HC_API_H */
