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
    void (*destroy)(hc_engine_t *engine);
} hc_engine_ops_t;

/* Implementations embed this first. */
struct hc_engine {
    const hc_engine_ops_t *ops;
    struct hc_comm *comm;
};

#endif /* HC_ENGINE_H */
