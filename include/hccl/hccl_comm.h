/*
 * hostccl: HCCL communicator management (CANN's hccl_comm.h, hicann/hcomm).
 *
 * Signatures and enum values are CANN's. What each call does on a host, and which return
 * HCCL_E_NOT_SUPPORT, is in docs/api.md. hccl/hccl.h includes this header, as CANN's does.
 */
#ifndef HCCL_COMM_H_
#define HCCL_COMM_H_

#ifndef __cplusplus
#include <stdbool.h>
#endif

#include <hccl/hccl_types.h>
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- creation and destruction ------------------------------------------------------------- */

/**
 * @brief Join a communicator described by a CANN rank table file (JSON, version 1.0).
 * @param clusterInfo path of the rank table.
 * @param rank this rank's rank_id in the table.
 * @param comm [out] the new communicator.
 */
extern HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);

/** @brief HcclCommInitClusterInfo with a configuration. */
extern HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank, HcclCommConfig *config,
                                                HcclComm *comm);

/**
 * @brief Cut a sub-communicator from a parent without a new root info.
 * @param comm pointer to the parent communicator.
 * @param rankNum number of ranks in the sub-communicator.
 * @param rankIds parent ranks of the sub-communicator, in sub-rank order.
 * @param subCommId identifier, equal on every member, distinct per sub-communicator of a parent.
 * @param subCommRankId this rank's position in rankIds.
 * @param config optional configuration.
 * @param subComm [out] the sub-communicator.
 */
extern HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds, uint64_t subCommId,
                                          uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm);

/**
 * @brief Make the root info of a new communicator (call on one rank, usually rank 0).
 *
 * Binds a rendezvous listener (interface from HCCL_IF_IP / HCCL_SOCKET_IFNAME, port from
 * HCCL_IF_BASE_PORT or ephemeral) and serves it from a background thread until every rank has
 * joined or HCCL_CONNECT_TIMEOUT expires. Send the bytes unchanged to every rank.
 * @param rootInfo [out] opaque root info.
 */
extern HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);

/**
 * @brief Join the communicator described by rootInfo as rank `rank` of `nRanks`.
 *
 * Blocks until every rank has joined or HCCL_CONNECT_TIMEOUT expires. Every rank gets the same
 * verdict: a wrong token, a disagreeing nRanks or a repeated rank fails every rank with
 * HCCL_E_PARA and a log line naming the ranks; a missing rank fails with HCCL_E_TIMEOUT naming it.
 * @param nRanks number of ranks.
 * @param rootInfo root info from HcclGetRootInfo.
 * @param rank this rank, 0 <= rank < nRanks.
 * @param comm [out] the new communicator.
 */
extern HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                       HcclComm *comm);

/**
 * @brief HcclCommInitRootInfo with a configuration.
 * @param config initialised with HcclCommConfigInit (any version up to HCCL_COMM_CONFIG_VERSION,
 *        read up to its recorded size); fields left unset take the environment or the defaults.
 */
extern HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                             const HcclCommConfig *config, HcclComm *comm);

/**
 * @brief Set a process-wide configuration value: HCCL_DETERMINISTIC 0, 1 or 2 (strict).
 *        When the HCCL_DETERMINISTIC environment variable is set it wins: the call succeeds and
 *        changes nothing (a warning says so), as in CANN.
 */
extern HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue);

/** @brief Get a process-wide configuration value (the one in effect: environment or HcclSetConfig). */
extern HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue *configValue);

/** @brief Name of comm; commName must hold COMM_NAME_MAX_LENGTH bytes. */
extern HcclResult HcclGetCommName(HcclComm comm, char *commName);

/**
 * @brief The live communicator of this process named commName (HcclGetCommName, hcclCommName).
 * @return HCCL_E_PARA when no communicator has that name.
 */
extern HcclResult HcclCommGetHandleWithName(const char *commName, HcclComm *comm);

/** @brief Number of ranks of comm. */
extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);

/** @brief Rank of the caller in comm. */
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/** @brief Block until every rank of comm has reached the barrier (in stream order). */
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

/**
 * @brief Destroy a communicator: calls the DESTROY_PRE state callbacks, waits for its queued
 *        operations (bounded by HCCL_EXEC_TIMEOUT), frees its threads, sockets and memory, then
 *        calls the DESTROY_POST callbacks.
 */
extern HcclResult HcclCommDestroy(HcclComm comm);

/**
 * @brief Create ndev communicators in this process, one per device (threads as ranks).
 * @param ndev number of devices.
 * @param devices device ids, rank i uses devices[i].
 * @param comms [out] array of ndev communicators.
 */
extern HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);

/** @brief The first error an operation of comm met (HCCL_SUCCESS when none). */
extern HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);

/** @brief CANN's text for an HcclResult ("parameter error"); "unknown error" outside the enum. */
extern const char *HcclGetErrorString(HcclResult code);

/** @brief How many HcclCommConfig capabilities are honoured: every HcclCommConfigCapability below it. */
extern uint32_t HcclGetCommConfigCapability(void);

/** @brief Fill config with its header (size, magic word, version) and "not set" markers. */
static inline void HcclCommConfigInit(HcclCommConfig *config)
{
    typedef struct {
        size_t size;
        uint32_t magicWord;
        uint32_t version;
        uint64_t reserved;
    } HcclCommConfigHeader;
    HcclCommConfigHeader *info;

    if (config == NULL) {
        return;
    }
    info = (HcclCommConfigHeader *)(void *)config;
    info->size = sizeof(HcclCommConfig);
    info->magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
    info->version = HCCL_COMM_CONFIG_VERSION;
    info->reserved = 0;
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
    config->hcclChannelSqDepth = HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET;
}

/* ---- suspend, resume, state ----------------------------------------------------------------- */

/**
 * @brief Quiesce comm: from now on new operations on it fail with HCCL_E_SUSPENDING, and the call
 *        returns once the operations issued before it have finished (bounded by HCCL_EXEC_TIMEOUT:
 *        HCCL_E_TIMEOUT, the communicator stays suspended). HcclCommResume continues.
 */
extern HcclResult HcclCommSuspend(HcclComm comm);

/**
 * @brief A state callback: called with the communicator and the phase it is in.
 * @return HCCL_SUCCESS, or an error that the calling HcclCommDestroy / HcclCommResume returns.
 */
typedef HcclResult (*HcclCommStateCallback)(HcclComm comm, HcclCommStatePhase state, void *args);

/**
 * @brief Register a process-wide state callback under regName (1..159 characters); registering a
 *        name again replaces its callback. Called at the phases of HcclCommStatePhase.
 */
extern HcclResult HcclCommRegCommStateCallback(const char *regName, HcclCommStateCallback cb, void *args);

/** @brief Continue a suspended communicator (RESUME_PRE callbacks, resume, RESUME_POST callbacks). */
extern HcclResult HcclCommResume(HcclComm comm);

/**
 * @brief The state of the communicator named commId: HCCL_COMM_STATUS_READY or _SUSPENDING.
 * @return HCCL_E_NOT_FOUND when no live communicator of this process has that name.
 */
extern HcclResult HcclCommGetStatus(const char *commId, HcclCommStatus *status);

/* ---- memory ranges (zero copy over reserved virtual memory) -------------------------------- */

/**
 * @brief Tell comm about a virtual range reserved with aclrtReserveMemAddress, whose pieces are
 *        then activated with HcclCommActivateCommMemory.
 * @param alignment must be 0. @param flags must be 0.
 */
extern HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                         uint64_t flags);

/** @brief Forget a range set by HcclCommSetMemoryRange (its pieces must be deactivated first). */
extern HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr);

/**
 * @brief Activate [virPtr, virPtr+size), inside a set range and mapped with aclrtMapMem to the
 *        physical allocation handle, for use by comm's operations.
 * @param offset must be 0. @param flags must be 0.
 */
extern HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                             aclrtDrvMemHandle handle, uint64_t flags);

/** @brief Deactivate memory activated at virPtr. */
extern HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr);

/**
 * @brief Switch ranks to their backup NICs. A host has no backup device NICs: HCCL_E_NOT_SUPPORT.
 */
extern HcclResult HcclCommWorkingDevNicSet(HcclComm comm, uint32_t *ranks, bool *useBackup, uint32_t nRanks);

/* ---- groups --------------------------------------------------------------------------------- */

/** @brief Start a group: following operations are issued together at HcclGroupEnd. */
extern HcclResult HcclGroupStart(void);

/** @brief End a group started by HcclGroupStart. */
extern HcclResult HcclGroupEnd(void);

/** @brief Whether the calling thread is inside HcclGroupStart ... HcclGroupEnd. */
extern HcclResult HcclGroupStatusGet(bool *isGroupEnabled);

/* ---- symmetric memory windows --------------------------------------------------------------- */

/**
 * @brief Register [addr, addr+size) as a symmetric window of comm (every rank registers one of the
 *        same size). flag must be 1 (collective symmetric); 0 and other values: HCCL_E_PARA.
 */
extern HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size, HcclCommSymWindow *winHandle,
                                         uint32_t flag);

/** @brief Deregister a window. */
extern HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle);

/**
 * @brief The registered window of comm that contains [ptr, ptr+size), and ptr's offset in it.
 * @return HCCL_E_NOT_FOUND when no window contains the whole range.
 */
extern HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size, HcclCommSymWindow *winHandle,
                                    size_t *offset);

/* ---- configuration queries ------------------------------------------------------------------ */

typedef enum {
    HCCL_OP_EXPANSION_MODE_INVALID = -1,
    HCCL_OP_EXPANSION_MODE_AI_CPU = 0,
    HCCL_OP_EXPANSION_MODE_AIV = 1,
    HCCL_OP_EXPANSION_MODE_HOST = 2,
    HCCL_OP_EXPANSION_MODE_HOST_TS = 3,
    HCCL_OP_EXPANSION_MODE_CCU_MS = 4,
    HCCL_OP_EXPANSION_MODE_CCU_SCHED = 5,
    HCCL_OP_EXPANSION_AIV_ONLY = 6
} HcclOpExpansionMode;

typedef enum {
    HCCL_CONFIG_TYPE_INVALID = -1,
    HCCL_CONFIG_TYPE_OP_EXPANSION_MODE = 0, /**< info: an HcclConfigTypeOpExpansionMode */
    HCCL_CONFIG_TYPE_HCCL_ALGO = 1          /**< info: HCCL_COMM_ALGO_MAX_LENGTH chars, the algorithm setting */
} HcclConfigType;

typedef HcclOpExpansionMode HcclConfigTypeOpExpansionMode;

/**
 * @brief Read one of comm's settings into info (infoLen bytes). On a host the operation expansion
 *        mode is HCCL_OP_EXPANSION_MODE_HOST: every operation runs on the host.
 */
extern HcclResult HcclConfigGetInfo(HcclComm comm, HcclConfigType cfgType, uint32_t infoLen, void *info);

#ifdef __cplusplus
}
#endif
#endif /* HCCL_COMM_H_ */
