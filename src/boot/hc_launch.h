/*
 * Giving rank 0's bytes to every rank of a job without MPI: what HcclHostBroadcastRootInfo does
 * (include/hccl/hccl_host.h, docs/multihost.md). The job is what the launcher said (api_host.c
 * reads it); the way is the first of these that fits it:
 *
 *   store        the rendezvous store of HOSTCCL_STORE (hccl-run's, or one the user points at)
 *   pmix         the launcher's PMIx server (srun --mpi=pmix, PMIx-based mpirun), libpmix loaded
 *                at run time (pmix.c)
 *   slurm-local  a Slurm step on one node: rank 0 serves a store of its own and tells the others
 *                where through the kernel (launch_slurm.c)
 *
 * Each is one row of an ops table; a job that fits none gets HCCL_E_NOT_SUPPORT with a line saying
 * what would make one fit.
 */
#ifndef HC_LAUNCH_H
#define HC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <hccl/hccl_types.h>

typedef struct {
    uint32_t rank, size, local_rank, local_size;
    const char *launcher;  /* "hccl-run", "openmpi", "pmi", "slurm", "none" */
    int store_is_ours;     /* HOSTCCL_STORE belongs to this job (not to an hccl-run outside its launcher) */
} hc_launch_t;

typedef struct {
    const char *name;
    /* 1 when this way works for the job (cheap: environment only). */
    int (*fits)(const hc_launch_t *job);
    /* Rank 0's len bytes in buf to every rank under key, waiting at most HCCL_CONNECT_TIMEOUT;
     * every rank calls it with the same key. */
    HcclResult (*bcast)(const hc_launch_t *job, const char *key, void *buf, size_t len);
} hc_launch_bcast_ops_t;

extern const hc_launch_bcast_ops_t hc_launch_bcast_store;
extern const hc_launch_bcast_ops_t hc_launch_bcast_pmix;
extern const hc_launch_bcast_ops_t hc_launch_bcast_slurm_local;

/* hccl-run's HOSTCCL_RUN_OUTER: a digest (16 hex digits) of the variables other launchers set per
 * process, as this process sees them (launch_outer.c). */
#define HC_LAUNCH_OUTER_BYTES 17
void hc_launch_outer_digest(char out[HC_LAUNCH_OUTER_BYTES]);

/* The first way that fits the job, or NULL (the caller says what is missing). */
const hc_launch_bcast_ops_t *hc_launch_bcast_pick(const hc_launch_t *job);

#endif /* HC_LAUNCH_H */
