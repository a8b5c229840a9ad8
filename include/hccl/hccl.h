/*
 * hostccl: the HCCL API on Linux hosts.
 *
 * Signatures are CANN's (hccl.h). Operations taking a stream are asynchronous: they validate their
 * arguments, enqueue the operation on the stream and return; aclrtSynchronizeStream waits for it.
 * docs/api.md lists every function with its status in hostccl.
 */
#ifndef HCCL_H_
#define HCCL_H_

#include <hccl/hccl_types.h>
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- communicator creation ---------------------------------------------------------------- */

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
 * @brief HcclCommInitRootInfo with a configuration (buffer size, determinism, name).
 * @param config initialised with HcclCommConfigInit; fields left unset take env/defaults.
 */
extern HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                             const HcclCommConfig *config, HcclComm *comm);

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
 * @brief Create ndev communicators in this process, one per device (threads as ranks).
 * @param ndev number of devices.
 * @param devices device ids, rank i uses devices[i].
 * @param comms [out] array of ndev communicators.
 */
extern HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);

/**
 * @brief Destroy a communicator: waits for its queued operations (bounded by HCCL_EXEC_TIMEOUT),
 *        then frees its threads, sockets and memory.
 */
extern HcclResult HcclCommDestroy(HcclComm comm);

/* ---- communicator queries and configuration ------------------------------------------------- */

/** @brief Rank of the caller in comm. */
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/** @brief Number of ranks of comm. */
extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);

/** @brief Name of comm; commName must hold COMM_NAME_MAX_LENGTH bytes. */
extern HcclResult HcclGetCommName(HcclComm comm, char *commName);

/** @brief The first error an operation of comm met (HCCL_SUCCESS when none). */
extern HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);

/** @brief A readable name for an HcclResult. Never NULL. */
extern const char *HcclGetErrorString(HcclResult code);

/** @brief Set a process-wide configuration value (HCCL_DETERMINISTIC). */
extern HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue);

/** @brief Get a process-wide configuration value. */
extern HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue *configValue);

/** @brief Number of HcclCommConfig capabilities supported (HcclCommConfigCapability values below it). */
extern uint32_t HcclGetCommConfigCapability(void);

/** @brief Fill config with its header and "not set" markers. */
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
}

/** @brief Suspend communication (not supported on hosts: HCCL_E_NOT_SUPPORT). */
extern HcclResult HcclCommSuspend(HcclComm comm);

/** @brief Resume communication (not supported on hosts: HCCL_E_NOT_SUPPORT). */
extern HcclResult HcclCommResume(HcclComm comm);

/* ---- collectives ------------------------------------------------------------------------------
 * Every operation is enqueued on `stream` (NULL: the current device's default stream) and runs in
 * stream order. count 0 succeeds and moves nothing. */

/** @brief Reduce count elements across ranks; every rank receives the result. In-place allowed. */
extern HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                HcclReduceOp op, HcclComm comm, aclrtStream stream);

/** @brief Copy count elements from root's buf to every rank's buf. */
extern HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                aclrtStream stream);

/** @brief Reduce count elements across ranks into root's recvBuf. */
extern HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                             uint32_t root, HcclComm comm, aclrtStream stream);

/** @brief Gather sendCount elements from every rank into every rank's recvBuf, in rank order. */
extern HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                HcclComm comm, aclrtStream stream);

/** @brief AllGather with per-rank counts and displacements (uint64_t arrays of rank size). */
extern HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                                 const void *recvDispls, HcclDataType dataType, HcclComm comm, aclrtStream stream);

/** @brief Reduce rankSize*recvCount elements; rank i receives block i. */
extern HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                    HcclReduceOp op, HcclComm comm, aclrtStream stream);

/** @brief ReduceScatter with per-rank counts and displacements (uint64_t arrays of rank size). */
extern HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls, void *recvBuf,
                                     uint64_t recvCount, HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                     aclrtStream stream);

/** @brief Root sends block i of its sendBuf (recvCount elements each) to rank i. */
extern HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                              uint32_t root, HcclComm comm, aclrtStream stream);

/** @brief Every rank sends block j of sendBuf to rank j and receives block i from rank i. */
extern HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
                               uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream);

/** @brief AlltoAll with per-peer counts and displacements (uint64_t arrays of rank size). */
extern HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                                const void *rdispls, HcclDataType recvType, HcclComm comm, aclrtStream stream);

/** @brief AlltoAllV where every rank passes the full rankSize x rankSize count matrix (uint64_t). */
extern HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                                 const void *recvBuf, HcclDataType recvType, HcclComm comm, aclrtStream stream);

/** @brief Block until every rank of comm has reached the barrier (in stream order). */
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

/* ---- point to point --------------------------------------------------------------------------- */

/** @brief Send count elements to destRank; pairs with an HcclRecv on destRank. */
extern HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                           aclrtStream stream);

/** @brief Receive count elements from srcRank; pairs with an HcclSend on srcRank. */
extern HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                           aclrtStream stream);

/** @brief Several sends and receives issued as one operation; never deadlocks on order. */
extern HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                    aclrtStream stream);

/** @brief Start a group: following operations are issued together at HcclGroupEnd. */
extern HcclResult HcclGroupStart(void);

/** @brief End a group started by HcclGroupStart. */
extern HcclResult HcclGroupEnd(void);

#ifdef __cplusplus
}
#endif
#endif /* HCCL_H_ */
