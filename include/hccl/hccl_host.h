/*
 * hostccl host-only extensions: launch information and root-info exchange without MPI, the
 * library's version and last error, and how a communicator reaches each peer.
 *
 * These are not part of CANN. A program that uses them still runs under hccl-run, mpirun or srun;
 * the HCCL calls themselves never depend on the launcher.
 */
#ifndef HCCL_HOST_H_
#define HCCL_HOST_H_

#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOSTCCL_VERSION_MAJOR 0
#define HOSTCCL_VERSION_MINOR 1
#define HOSTCCL_VERSION_PATCH 0

/** Where this process sits in the job, as the launcher described it. */
typedef struct {
    uint32_t rank;           /**< global rank */
    uint32_t size;           /**< number of ranks */
    uint32_t localRank;      /**< rank among the ranks of this host */
    uint32_t localSize;      /**< number of ranks on this host */
    char launcher[16];       /**< "hccl-run", "openmpi", "pmi", "slurm" or "none" */
} HcclHostLaunchInfo;

/**
 * @brief Read the launch information from the environment.
 *
 * Understands hccl-run (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), Open MPI
 * (OMPI_COMM_WORLD_*), MPICH/PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS) and Slurm
 * tasks of a step (SLURM_STEP_ID set; SLURM_PROCID, the step's task counts, SLURM_LOCALID). When
 * launchers nest, the one that started the process wins (docs/multihost.md). Without a launcher:
 * rank 0 of 1.
 * @param info [out] launch information.
 */
extern HcclResult HcclHostGetLaunchInfo(HcclHostLaunchInfo *info);

/**
 * @brief Give rank 0's root info to every rank of the job: the MPI_Bcast of programs without MPI.
 *
 * Rank 0 (of HcclHostGetLaunchInfo) passes the root info it got from HcclGetRootInfo; the other
 * ranks receive it into rootInfo. Uses the rendezvous store of hccl-run (or HOSTCCL_STORE), else the
 * launcher's PMIx server (srun --mpi=pmix, Open MPI's mpirun), else, for a Slurm step on one node,
 * a store that rank 0 serves itself. Call it
 * once per communicator, in the same order on every rank: the n-th call of each rank exchanges the
 * n-th root info. Waits at most HCCL_CONNECT_TIMEOUT seconds.
 * @param rootInfo [in on rank 0, out elsewhere] the root info.
 */
extern HcclResult HcclHostBroadcastRootInfo(HcclRootInfo *rootInfo);

/** @brief hostccl version as major*10000 + minor*100 + patch. */
extern HcclResult HcclHostGetVersion(uint32_t *version);

/**
 * @brief The last error line libhccl logged on the calling thread ("" when none); never NULL.
 *
 * aclGetRecentErrMsg reports the runtime's (libascendcl's) errors; this one reports the HCCL calls'
 * own, including those of operations that the calling thread ran while synchronising a stream, and
 * those of operations that failed on another thread (the stream's worker): the synchronisation that
 * returns the stream's error carries the failed op's line to the synchronising thread.
 * The string stays valid until the thread's next error.
 */
extern const char *HcclHostGetRecentErrMsg(void);

/** Bytes that always hold HcclHostGetLinkInfo's text, its terminating NUL included. */
#define HCCL_HOST_LINK_INFO_MAX 128

/**
 * @brief How this rank of comm reaches communicator rank peer: the transport the library chose.
 *
 * One line, the same whatever the operation, for tools such as hccl-doctor:
 * - "self": peer is this rank;
 * - "shm": shared memory inside the host; "shm+cma": the same, and plain (malloc) buffers backed by
 *   huge pages are read from the peer's memory in one copy with cross-memory attach
 *   (process_vm_readv); "shm+cma malloc": ordinary malloc buffers too, in the larger operations
 *   (where the library measured process_vm_readv fast, or HOSTCCL_CMA_MIN says so);
 * - "tcp ADDR:PORT xN": TCP to peer's listening address ADDR:PORT ("[v6]:PORT" for IPv6), over N
 *   data connections (HOSTCCL_NSOCKS) plus one for control; the connections stay open, the
 *   listener itself is closed once the communicator is created;
 * - "none": the communicator has no connection to peer.
 * Other words may be added by later transports; the first word names the transport.
 *
 * Does not communicate and does not wait.
 * @param comm communicator.
 * @param peer rank in comm, 0 to size - 1.
 * @param buf [out] the text, NUL-terminated; written only on success.
 * @param len bytes at buf; HCCL_HOST_LINK_INFO_MAX is always enough.
 * @return HCCL_SUCCESS; HCCL_E_PTR when comm or buf is NULL; HCCL_E_PARA when comm is not a live
 *         communicator, peer is out of range or the text does not fit in len bytes;
 *         HCCL_E_NOT_SUPPORT when the communicator has no engine that can say.
 */
extern HcclResult HcclHostGetLinkInfo(HcclComm comm, uint32_t peer, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HCCL_HOST_H_ */
