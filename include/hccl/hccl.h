/*
 * hostccl: the HCCL API on Linux hosts.
 *
 * Signatures are CANN's (hccl.h, hicann/hccl): the collectives and point-to-point operations here,
 * communicator management in hccl/hccl_comm.h (included). Operations taking a stream are
 * asynchronous: they validate their arguments, enqueue the operation on the stream and return;
 * aclrtSynchronizeStream waits for it. docs/api.md lists every function with its status.
 */
#ifndef HCCL_H_
#define HCCL_H_

#include <hccl/hccl_types.h>
#include <hccl/hccl_comm.h>
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* HCCL_H_ */
