/*
 * The intra-host engine (DESIGN.md 5). One shared segment per communicator per host:
 *
 *   [header: magic, sizes, doorbell futex word and waiter count, each on its own cache line]
 *   [control block per local rank, 256 bytes: arrive/done step counters, op signature per parity]
 *   [data: per local rank two slots of slot_bytes (double buffering by step parity)]
 *
 * The segment is a memfd made by the lowest local rank; the others open it through
 * /proc/PID/fd/FD during setup. It never has a name, so nothing can be left in /dev/shm, whatever
 * happens to the ranks (DESIGN.md asks for shm_open + unlink-after-map; a memfd gives the same
 * 0600, owner-only access with no window in which a crash leaks a file).
 *
 * Steps. All ranks of a communicator execute the same sequence of steps (an op is one or more
 * steps). At step s (parity b = s & 1) a rank first waits until every rank's `done` >= s - 2 (no
 * one still reads its parity-b slot), writes its slot b and signature b, publishes arrive = s,
 * waits until every rank's arrive >= s, reads what it needs, and publishes done = s. Flags are
 * monotonically increasing 64-bit step numbers, never booleans, so there is nothing to reset.
 */
#ifndef HC_SHM_H
#define HC_SHM_H

#include "hc_boot.h"
#include "hc_comm.h"
#include "hc_engine.h"

/* Create the engine for comm (all of whose ranks share this host); uses the bootstrap to agree
 * on the segment. */
HcclResult hc_shm_engine_create(hc_comm_t *comm, hc_boot_t *boot, hc_engine_t **engine_p);

/*
 * Sub-communicator rendezvous without a new root (HcclCreateSubCommConfig): the leader posts the
 * sub-communicator's root info under `tag` in its mailbox; members read it from the leader's
 * (rank `leader`) mailbox, waiting at most until the deadline. Tags are never 0.
 */
HcclResult hc_shm_mailbox_post(hc_engine_t *engine, uint64_t tag, const HcclRootInfo *info);
HcclResult hc_shm_mailbox_fetch(hc_engine_t *engine, uint32_t leader, uint64_t tag, int64_t deadline_ns,
                                HcclRootInfo *info_p);

/* Is this engine the intra-host engine (which has a mailbox)? */
int hc_shm_engine_is(const hc_engine_t *engine);

#endif /* HC_SHM_H */
