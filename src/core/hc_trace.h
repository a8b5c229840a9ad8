/*
 * The flight recorder (DESIGN.md 7): each communicator keeps its last HOSTCCL_TRACE_OPS operations
 * (sequence, signature, state, times, stream). When an op fails with a timeout, a mismatch or a
 * dead peer, the rank prints a diagnosis: its own recent ops and the engine's view of what every
 * rank is doing (which op, since when, the last it completed, pending sends and receives), and
 * writes both as JSON to HOSTCCL_TRACE_DUMP when that is set.
 */
#ifndef HC_TRACE_H
#define HC_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "hc_op.h"

typedef enum { HC_TRACE_QUEUED, HC_TRACE_RUNNING, HC_TRACE_DONE, HC_TRACE_FAILED } hc_trace_state_t;

/*
 * One op in the ring. The recorder is on every op's path, so it takes no lock of its own: the
 * enqueuing thread writes an entry under the communicator's exec_lock (which it holds to number the
 * op anyway), and the thread that runs the op changes its state with a compare-and-swap on `tag`,
 * which fails harmlessly once the entry was reused for an op cap numbers later. Readers take
 * exec_lock (hc_trace_report).
 */
typedef struct {
    uint64_t seq;           /* 0: empty; seq, sig, stream, t_queued: written under exec_lock */
    hc_op_sig_t sig;
    const void *stream;
    int64_t t_queued;       /* CLOCK_MONOTONIC ns */
    atomic_uint_fast64_t tag; /* seq << 2 | hc_trace_state_t */
    atomic_int result;
    atomic_int_fast64_t t_start, t_end;
} hc_trace_entry_t;

/* A copy of an entry, for reports. */
typedef struct {
    uint64_t seq;
    hc_op_sig_t sig;
    hc_trace_state_t state;
    HcclResult result;
    int64_t t_queued, t_start, t_end;
    const void *stream;
} hc_trace_view_t;

typedef struct {
    hc_trace_entry_t *ring; /* cap entries, indexed by seq % cap; NULL when cap is 0 */
    uint32_t cap;
    uint32_t mask;          /* cap - 1 when cap is a power of two (the default), else UINT32_MAX */
} hc_trace_t;

HcclResult hc_trace_init(hc_trace_t *trace, uint32_t cap);
void hc_trace_fini(hc_trace_t *trace);

/* Called with the communicator's exec_lock held. An op whose op->run_ns is set runs as it is
 * launched: it is recorded as running since then. */
void hc_trace_queued(hc_trace_t *trace, const hc_op_t *op, const void *stream);
void hc_trace_state(hc_trace_t *trace, uint64_t seq, hc_trace_state_t state, HcclResult result);
/* op began to run at op->run_ns. */
void hc_trace_running(hc_trace_t *trace, const hc_op_t *op);

/* Did this op's failure come from the peers (timeout, mismatch, dead rank)? Those get a diagnosis. */
int hc_trace_worth_diagnosis(HcclResult res);

struct hc_comm;

/* Print the diagnosis of failed op `op` (this rank's recent ops + the engine's view of every rank)
 * and write it to HOSTCCL_TRACE_DUMP as JSON. */
void hc_trace_report(struct hc_comm *comm, const hc_op_t *op, HcclResult res);

#endif /* HC_TRACE_H */
