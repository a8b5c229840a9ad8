/*
 * An engine runs operations over one kind of transport or composition: the intra-host shared
 * memory engine (src/shm), the hierarchical engine that composes it with schedules over TCP
 * (src/algo). It is an ops table (STYLE.md 3): one entry per collective, NULL where the engine
 * cannot run it, so the API can refuse an unsupported call with HCCL_E_NOT_SUPPORT at enqueue time.
 *
 * An engine sees a group view (hc_group.h) and op descriptors whose roots, peers and count arrays
 * are in that group's index space, with an engine-local collective number; it never sees the
 * communicator. Which engine serves a communicator is decided in core (engine.c) from a table of
 * factories.
 */
#ifndef HC_ENGINE_H
#define HC_ENGINE_H

#include "hc_group.h"
#include "hc_op.h"

typedef struct hc_engine hc_engine_t;
typedef struct hc_boot hc_boot_t;

typedef HcclResult (*hc_engine_coll_fn)(hc_engine_t *engine, hc_op_t *op);

typedef struct {
    const char *name;
    hc_engine_coll_fn coll[HC_COLL_COUNT];
    /* A collective was enqueued (called under the group's lock, in issue order; the op itself may
     * already be running, or freed): the engine may tell the peers about it before it runs.
     * Optional. */
    void (*announce)(hc_engine_t *engine, const hc_op_sig_t *sig, uint64_t coll_seq, uint64_t sig_hash);
    /* Around every op: publish what this rank is doing, for the peers' diagnosis. Optional; a
     * failing op_begin fails the op without running it (op_end still runs). A failed op_end result
     * also tells the peers that this rank takes part in nothing any more. */
    HcclResult (*op_begin)(hc_engine_t *engine, const hc_op_t *op);
    void (*op_end)(hc_engine_t *engine, const hc_op_t *op, HcclResult res);
    /* May op run now on the thread that launches it (run-at-enqueue)? Only if it can complete with
     * nothing more from that thread, e.g. every peer has already begun it. Called with no other op
     * of the communicator running or queued on this rank. Optional (NULL: never). */
    int (*ready)(hc_engine_t *engine, const hc_op_t *op);
    /* Start op on the thread that launches it, when it is queued on an idle stream with no other op
     * of the communicator running or queued on this rank: do the part of it that waits for nobody
     * (stage and publish its first step) and return 1, or do nothing and return 0. The run that
     * follows sees op->started and goes on from there. Never blocks. Optional (NULL: never). */
    int (*start)(hc_engine_t *engine, hc_op_t *op);
    /* In a burst of launches (ops of the communicator still queued on the stream): may the launching
     * thread run the queued ops that are ready and start the next one before it launches another
     * (hc_op_run_direct)? shm: where every local rank has a core. Optional (NULL: never). */
    int (*progress_at_launch)(hc_engine_t *engine);
    /* Describe every rank's state (op in progress, last completed, pending point-to-point) as text
     * lines into buf, for the failure report. Optional. */
    void (*describe)(hc_engine_t *engine, const hc_op_t *op, char *buf, size_t len);
    /* Sub-communicator rendezvous without a new root (HcclCreateSubCommConfig): the leader posts
     * the sub-communicator's root info under `tag` for the members (communicator ranks, the leader
     * among them); a member fetches it from the leader (a communicator rank) before the deadline.
     * Tags are never 0. */
    HcclResult (*mailbox_post)(hc_engine_t *engine, uint64_t tag, const HcclRootInfo *info, const uint32_t *members,
                               uint32_t nmembers);
    HcclResult (*mailbox_fetch)(hc_engine_t *engine, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p);
    /* One line naming how this rank reaches communicator rank r ("shm", "shm+cma", "tcp 10.0.0.2
     * x2 sockets"), for tools; optional. */
    void (*describe_link)(hc_engine_t *engine, uint32_t r, char *buf, size_t len);
    /* After op failed on this rank (op_end has run): whether this rank is the one that logs the
     * n-rank description, so that it is printed once, not by every rank (hc_watchdog_claim).
     * Optional: without it every failing rank logs it. */
    int (*report_turn)(hc_engine_t *engine, const hc_op_t *op);
    void (*destroy)(hc_engine_t *engine);
} hc_engine_ops_t;

/* Implementations embed this first. The group view belongs to the engine. */
struct hc_engine {
    const hc_engine_ops_t *ops;
    hc_group_t group;
};

/* Flags for a factory's create. */
#define HC_ENGINE_NO_SHM 1u /* shared memory between the ranks of a host failed: use TCP between all */

/*
 * How an engine is made (the table is in core/engine.c). `fits` decides from the peer table of
 * the communicator's whole group alone, so every rank gives the same answer; `create` is collective
 * over the whole communicator (every rank calls it, in the same order, so that the bootstrap's
 * exchanges line up) and builds the engine over `world`. A create that fails with HCCL_E_UNAVAIL
 * has failed alike on every rank and left nothing behind: the next factory is tried with
 * HC_ENGINE_NO_SHM.
 */
typedef struct {
    const char *name;
    int (*fits)(const hc_group_t *world, unsigned flags);
    HcclResult (*create)(const hc_group_t *world, hc_boot_t *boot, unsigned flags, hc_engine_t **engine_p);
} hc_engine_factory_t;

/* Do communicator ranks a and b share a host (the same boot, network and pid namespaces)? */
int hc_group_same_host(const hc_group_t *world, uint32_t a, uint32_t b);

#endif /* HC_ENGINE_H */
