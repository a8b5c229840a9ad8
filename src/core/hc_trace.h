/*
 * The flight recorder (DESIGN.md 7): each communicator keeps its last HOSTCCL_TRACE_OPS operations
 * (sequence, signature, state, times, stream). When an op fails with a timeout, a mismatch or a
 * dead peer, the rank prints a diagnosis: its own recent ops and the engine's view of what every
 * rank is doing (which op, since when, the last it completed, pending sends and receives), and
 * writes both as JSON to HOSTCCL_TRACE_DUMP when that is set.
 */
#ifndef HC_TRACE_H
#define HC_TRACE_H

#include <pthread.h>
#include <stdint.h>

#include "hc_op.h"

typedef enum { HC_TRACE_QUEUED, HC_TRACE_RUNNING, HC_TRACE_DONE, HC_TRACE_FAILED } hc_trace_state_t;

typedef struct {
    uint64_t seq;           /* 0: empty */
    hc_op_sig_t sig;
    hc_trace_state_t state;
    HcclResult result;
    int64_t t_queued, t_start, t_end; /* CLOCK_MONOTONIC ns */
    const void *stream;
} hc_trace_entry_t;

typedef struct {
    pthread_mutex_t lock;
    hc_trace_entry_t *ring; /* cap entries, indexed by seq % cap; NULL when cap is 0 */
    uint32_t cap;
} hc_trace_t;

HcclResult hc_trace_init(hc_trace_t *trace, uint32_t cap);
void hc_trace_fini(hc_trace_t *trace);

void hc_trace_queued(hc_trace_t *trace, const hc_op_t *op, const void *stream);
void hc_trace_state(hc_trace_t *trace, uint64_t seq, hc_trace_state_t state, HcclResult result);

/* Did this op's failure come from the peers (timeout, mismatch, dead rank)? Those get a diagnosis. */
int hc_trace_worth_diagnosis(HcclResult res);

struct hc_comm;

/* Print the diagnosis of failed op `op` (this rank's recent ops + the engine's view of every rank)
 * and write it to HOSTCCL_TRACE_DUMP as JSON. */
void hc_trace_report(struct hc_comm *comm, const hc_op_t *op, HcclResult res);

#endif /* HC_TRACE_H */
