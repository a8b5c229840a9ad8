/* Schedule selection (algo_select.c): HCCL_ALGO and the cost model. */
#ifndef HC_ALGO_SELECT_H
#define HC_ALGO_SELECT_H

#include <stdint.h>

#include "hc_op.h"

typedef enum {
    HC_SCHED_AUTO = 0,
    HC_SCHED_RING,
    HC_SCHED_RHD,
    HC_SCHED_DIRECT,
    HC_SCHED_ONESHOT,
    HC_SCHED_PAIRWISE,
    HC_SCHED_TREE,
    HC_SCHED_HIER,
    HC_SCHED_UNSUPPORTED
} hc_sched_kind_t;

/* Parse HCCL_ALGO (text may be NULL) into what each collective asks for (HC_SCHED_AUTO: choose).
 * Every part it cannot honour is a warning naming it (once per process). */
void hc_algo_parse(const char *text, hc_sched_kind_t requested[HC_COLL_COUNT]);

/* HOSTCCL_DEBUG contains "algo": log every choice. */
int hc_algo_debug(void);
const char *hc_sched_kind_name(hc_sched_kind_t kind);

/* Modelled time (us) of an AllReduce of `bytes` over p ranks on TCP with schedule kind. */
double hc_algo_cost_allreduce(hc_sched_kind_t kind, uint32_t p, uint64_t bytes);

/* The AllReduce schedule for p ranks: rank-ordered direct when deterministic, else what was
 * requested (ring, H-D_R), else the cheapest by the model. */
hc_sched_kind_t hc_algo_pick_allreduce(hc_sched_kind_t requested, uint32_t p, uint64_t bytes, int deterministic);

#endif /* HC_ALGO_SELECT_H */
