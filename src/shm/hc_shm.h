/*
 * The intra-host engine (DESIGN.md 5). One shared segment per communicator per host:
 *
 *   [header: magic, sizes, the failure report's claim]
 *   [control block per local rank: step flags, signatures, futex words, announcements, eager ring]
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
 *
 * The engine runs over a group view whose ranks all share this host: the whole communicator, or
 * one host's ranks inside the hierarchical engine, which hands it sub-ops in local indices.
 */
#ifndef HC_SHM_H
#define HC_SHM_H

#include "hc_engine.h"

/* Fits a communicator whose ranks all share this host (and HOSTCCL_TRANSPORT is not tcp). */
extern const hc_engine_factory_t hc_shm_engine_factory;

/* Create the engine over `group` (all on this host). Collective over the whole communicator: the
 * segment is agreed through the bootstrap, whose exchanges include every communicator rank, so
 * every rank of every host calls this once, in the same order. HCCL_E_UNAVAIL on every rank when
 * some host's ranks cannot map their segment. */
HcclResult hc_shm_engine_create(const hc_group_t *group, hc_boot_t *boot, hc_engine_t **engine_p);

/* Tell the local peers that this rank failed (res) and takes part in nothing any more. */
void hc_shm_engine_fail(hc_engine_t *engine, HcclResult res);

#endif /* HC_SHM_H */
