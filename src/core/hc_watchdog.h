/*
 * What a waiting rank says and concludes while it waits (DESIGN.md 7, issue "silent waits"): the
 * policy, written against plain snapshots of what ranks publish, so that any engine can apply it.
 * The engine reads its peers' published state into hc_wd_rank_t and calls these from its wait
 * loops; it keeps the mechanics (what a rank publishes, how to read it, how to sleep).
 *
 *  - A wait that has gone on for HOSTCCL_STILL_WAITING_S says so on a warning line naming whom it
 *    waits for and what that rank is doing, then again at intervals growing by
 *    HOSTCCL_STILL_WAITING_BACKOFF. HCCL_EXEC_TIMEOUT still ends the wait, as in CANN.
 *  - Two ranks that each wait for the other in ops that can never give the other what it waits for
 *    are deadlocked, which is certain from their published state alone: the op fails at once
 *    (hc_watchdog_deadlock) instead of at HCCL_EXEC_TIMEOUT.
 *  - When an op fails, the n-rank diagnosis is printed by one rank only, the lowest live one that
 *    fails (hc_watchdog_claim), not by every rank.
 *
 * Pure: no communicator, no engine; the base services (log, config, time) only.
 */
#ifndef HC_WATCHDOG_H
#define HC_WATCHDOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hc_op.h"

/* A pending send or receive of a rank, as published. */
typedef struct {
    uint32_t peer; /* rank in the communicator */
    uint32_t is_send;
    uint64_t count;
    uint32_t dtype;
} hc_wd_item_t;

#define HC_WD_ITEMS 8

/* What one rank is doing, read from what it publishes. */
typedef struct {
    int in_op;              /* inside an op of this communicator */
    int is_coll;            /* that op is a collective (else a send, receive or batch) */
    uint64_t number;        /* its collective number, or its issue number for point-to-point */
    int64_t since_ns;       /* when it started (as the rank published it) */
    hc_op_sig_t sig;
    uint64_t colls_done;    /* the last collective this rank finished */
    int failed;             /* it failed an op and takes part in nothing any more */
    int finishes_alone;     /* its collective may complete without the others taking part (an eager
                             * writer: the engine knows when), so nobody's wait on it is certain */
    uint32_t nitems;        /* its pending sends and receives (point-to-point ops) */
    hc_wd_item_t items[HC_WD_ITEMS];
} hc_wd_rank_t;

/* The state of one wait. */
typedef struct {
    int64_t started_ns;
    int64_t next_report_ns;   /* 0: no still-waiting line */
    int64_t first_ns;         /* HOSTCCL_STILL_WAITING_S */
    int64_t interval_ns;      /* the current one: grows by backoff after each line */
    int64_t backoff;
    int64_t next_look_ns;     /* the deadlock check runs at most every HC_WD_LOOK_NS */
    uint64_t suspect;         /* the suspected deadlock (hc_watchdog_confirm), 0: none */
    int64_t suspect_since_ns;
} hc_watchdog_t;

/* A suspected deadlock is declared when the same suspicion holds at two looks this far apart with
 * no progress in between: long after every store the peer made is visible, short enough to count
 * as at once. */
#define HC_WD_CONFIRM_NS (20 * 1000 * 1000LL)
#define HC_WD_LOOK_NS (5 * 1000 * 1000LL)

/* Start watching a wait that begins now; interval_s 0 means no still-waiting lines. */
void hc_watchdog_start(hc_watchdog_t *wd, int64_t now_ns, int64_t interval_s, int64_t backoff);

/* The wait made progress: the still-waiting clock and any suspicion start over. */
void hc_watchdog_progress(hc_watchdog_t *wd, int64_t now_ns);

/* Whether a still-waiting line is due now; if so the next one is scheduled (with backoff). */
int hc_watchdog_report_due(hc_watchdog_t *wd, int64_t now_ns);

/* Seconds this wait has lasted, and until the next still-waiting line (for the line itself). */
double hc_watchdog_waited_s(const hc_watchdog_t *wd, int64_t now_ns);
double hc_watchdog_next_s(const hc_watchdog_t *wd, int64_t now_ns);

/* Whether it is time for another deadlock look (every HC_WD_LOOK_NS). */
int hc_watchdog_look_due(hc_watchdog_t *wd, int64_t now_ns);

/*
 * Rank `me`, blocked in its op (`mine`) waiting for rank `peer` (`theirs`): are they deadlocked,
 * whatever the other ranks do? Returns 1 and explains it in `why` when:
 *  - both are in point-to-point ops, each with pending items toward the other, and none of
 *    `me`'s items toward `peer` pairs with one of `peer`'s toward `me` (send-send, receive-receive);
 *  - `me` is in a point-to-point op with items toward `peer`, and `peer` is in a collective that
 *    `me` has not finished, which needs `me` (not one it may finish alone);
 *  - `me` is in a collective, and `peer` in a point-to-point op with items toward `me`.
 * Ops of a communicator run one after the other, so neither op can end: certain, given consistent
 * snapshots (the caller confirms the verdict over time, hc_watchdog_confirm).
 */
int hc_watchdog_deadlock(uint32_t me, const hc_wd_rank_t *mine, uint32_t peer, const hc_wd_rank_t *theirs,
                         char *why, size_t len);

/* A key for a suspicion about `peer` in its op `theirs`: the same key means the same situation. */
uint64_t hc_watchdog_suspect_key(uint32_t peer, const hc_wd_rank_t *theirs);

/* Record suspicion `key` (0: none now); 1 when the same key has held for HC_WD_CONFIRM_NS. */
int hc_watchdog_confirm(hc_watchdog_t *wd, uint64_t key, int64_t now_ns);

/*
 * Whether local rank `me`, whose op just failed, prints the n-rank diagnosis. `word` is shared by
 * the ranks (zero at first). Each failing rank claims it; the lowest claimant prints, once per
 * word. A rank waits up to settle_ns for lower ranks that may still fail (lower_busy(ctx, me) says
 * whether any may) to claim; a rank with no such lower rank prints at once.
 */
int hc_watchdog_claim(atomic_uint_fast64_t *word, uint32_t me, int (*lower_busy)(void *ctx, uint32_t me),
                      void *ctx, int64_t settle_ns);

#endif /* HC_WATCHDOG_H */
