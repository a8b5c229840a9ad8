/*
 * An engine runs a communicator's operations over one kind of transport (the intra-host shared
 * memory engine, later the TCP engine and the hierarchical composition). It is an ops table
 * (STYLE.md 3): one entry per collective, NULL where the engine cannot run it, so the API can
 * refuse an unsupported call with HCCL_E_NOT_SUPPORT at enqueue time instead of failing later.
 */
#ifndef HC_ENGINE_H
#define HC_ENGINE_H

#include "hc_op.h"

typedef struct hc_engine hc_engine_t;

typedef HcclResult (*hc_engine_coll_fn)(hc_engine_t *engine, hc_op_t *op);

typedef struct {
    const char *name;
    hc_engine_coll_fn coll[HC_COLL_COUNT];
    /* A collective was enqueued (called under the communicator's exec_lock, in issue order; the
     * op itself may already be running, or freed): the engine may tell the peers about it before
     * it runs. Optional. */
    void (*announce)(hc_engine_t *engine, const hc_op_sig_t *sig, uint64_t coll_seq, uint64_t sig_hash);
    /* Around every op: publish what this rank is doing, for the peers' diagnosis. Optional; a
     * failing op_begin fails the op without running it (op_end still runs). */
    HcclResult (*op_begin)(hc_engine_t *engine, const hc_op_t *op);
    void (*op_end)(hc_engine_t *engine, const hc_op_t *op, HcclResult res);
    /* Describe every rank's state (op in progress, last completed, pending point-to-point) as text
     * lines into buf, for the failure report. Optional. */
    void (*describe)(hc_engine_t *engine, const hc_op_t *op, char *buf, size_t len);
    /* After op failed on this rank (op_end has run): whether this rank is the one that logs the
     * n-rank description, so that it is printed once, not by every rank (hc_watchdog_claim).
     * Optional: without it every failing rank logs it. */
    int (*report_turn)(hc_engine_t *engine, const hc_op_t *op);
    void (*destroy)(hc_engine_t *engine);
} hc_engine_ops_t;

/* Implementations embed this first. */
struct hc_engine {
    const hc_engine_ops_t *ops;
    struct hc_comm *comm;
};

#endif /* HC_ENGINE_H */
