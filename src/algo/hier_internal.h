/*
 * The hierarchical engine (hier_engine.c): the intra-host engine over each host's ranks, TCP
 * between every pair of ranks, and schedules composing the two (HCCL's level0 / level1 split).
 *
 * Hosts. Ranks that share a host (boot id and namespaces) form a host group; the engine knows every
 * host's ranks. When every host has the same number of ranks (`uniform`), the ranks with the same
 * local index on every host form this rank's slice, and large reductions run inside the hosts and
 * then over every slice in parallel, each on its share of the data. Otherwise one representative
 * per host (its lowest rank, or the root) carries the host's part.
 *
 * Sub-ops. What runs inside a host is an op handed to the intra-host engine in its local indices,
 * numbered by this engine (every local rank runs the same sub-ops for every op, so the numbers
 * agree) and signed with the op's signature, so that a mismatch inside a host names the user's
 * calls.
 */
#ifndef HC_HIER_INTERNAL_H
#define HC_HIER_INTERNAL_H

#include "algo_internal.h"
#include "algo_select.h"
#include "hc_algo.h"
#include "hc_net.h"

/* Bits of a channel step above which the phase of a composed op goes (hc_chan_t.step_base). */
#define HC_CHAN_PHASE_SHIFT 28

typedef struct {
    hc_engine_t base;        /* over the whole communicator */
    hc_engine_t *local;      /* the intra-host engine over this host's ranks; NULL when alone */
    hc_group_t host;         /* this host's ranks */
    hc_net_t *net;           /* TCP to every other rank */
    uint32_t nhosts;
    uint32_t *host_of;       /* communicator rank -> host index (hosts numbered by lowest rank) */
    uint32_t *host_first;    /* host index -> its lowest rank */
    uint32_t *host_size;     /* host index -> ranks on it */
    uint32_t *local_of;      /* communicator rank -> index among its host's ranks */
    int uniform;             /* every host has the same number of ranks */
    int hierarchical;        /* ranks of a host share memory (not NO_SHM, tcp, HOSTCCL_HIERARCHY=0) */
    hc_sched_kind_t requested[HC_COLL_COUNT]; /* HCCL_ALGO, per collective */
    uint32_t *grid;          /* uniform: [h * L + j] = the rank of host h with local index j */
    hc_group_t slice;        /* uniform: the ranks with this rank's local index, one per host
                              * (ascending, which need not be host order) */
    uint64_t local_seq;      /* collective numbers given to the intra-host engine */
    uint64_t *p2p_sent;      /* per communicator rank: TCP point-to-point messages sent to it */
    uint64_t *p2p_recv;      /* ... and received from it */
    hc_sched_buf_t seg, work, stage; /* memory kept for the schedules between ops */
} hier_engine_t;

static inline hier_engine_t *hier_of(hc_engine_t *engine)
{
    return (hier_engine_t *)(void *)engine;
}

/* Two levels are possible: hosts share memory inside and there are several of them. */
static inline int hc_hier_two_level(const hier_engine_t *eng)
{
    return eng->local != NULL && eng->nhosts > 1 && eng->hierarchical;
}

/* Log the schedule chosen for op when HOSTCCL_DEBUG=algo. */
void hc_hier_log_choice(const hc_op_t *op, const char *how, uint32_t p, uint64_t bytes);

/* A channel over TCP for `group` (communicator ranks by group index), for op's messages in one
 * phase of a composed op. */
void hc_chan_tcp_init(hc_chan_t *ch, hc_net_t *net, const hc_group_t *group, const hc_op_t *op, uint32_t phase);

/* A schedule context over `group` for op (dtype and reduction from op). */
void hc_hier_sched(hier_engine_t *eng, hc_sched_t *s, hc_chan_t *ch, const hc_group_t *group, const hc_op_t *op,
                   uint32_t phase);

/* Run a sub-op on the intra-host engine: `sub` holds buffers, counts, root in local indices and the
 * collective (sub->sig.coll is overwritten with op's signature for messages; `coll` says what to
 * run). */
HcclResult hc_hier_run_local(hier_engine_t *eng, const hc_op_t *op, hc_coll_t coll, hc_op_t *sub);

/* Collectives and point-to-point (hier_coll.c, hier_p2p.c). */
HcclResult hc_hier_allreduce(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_broadcast(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_reduce(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_allgather(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_allgatherv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_reduce_scatter(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_reduce_scatterv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_scatter(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_alltoall(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_alltoallv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_alltoallvc(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_barrier(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_send(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_recv(hc_engine_t *engine, hc_op_t *op);
HcclResult hc_hier_batch(hc_engine_t *engine, hc_op_t *op);

#endif /* HC_HIER_INTERNAL_H */
