/* The public collective and point-to-point calls: each fills an hc_call_t and submits it. */
#include "hc_api.h"

HC_API_EXPORT HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                       HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAllReduce", .coll = HC_COLL_ALLREDUCE, .handle = comm, .sendbuf = sendBuf,
                      .recvbuf = recvBuf, .count = count, .dtype = dataType, .redop = op};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                       HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclBroadcast", .coll = HC_COLL_BROADCAST, .handle = comm, .sendbuf = buf,
                      .recvbuf = buf, .count = count, .dtype = dataType, .root = root};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                    HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclReduce", .coll = HC_COLL_REDUCE, .handle = comm, .sendbuf = sendBuf,
                      .recvbuf = recvBuf, .count = count, .dtype = dataType, .redop = op, .root = root};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                       HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAllGather", .coll = HC_COLL_ALLGATHER, .handle = comm, .sendbuf = sendBuf,
                      .recvbuf = recvBuf, .count = sendCount, .dtype = dataType};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                                        const void *recvDispls, HcclDataType dataType, HcclComm comm,
                                        aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAllGatherV", .coll = HC_COLL_ALLGATHERV, .handle = comm, .sendbuf = sendBuf,
                      .recvbuf = recvBuf, .count = sendCount, .dtype = dataType, .recv_dtype = dataType,
                      .recv_counts = recvCounts, .recv_displs = recvDispls};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                           HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclReduceScatter", .coll = HC_COLL_REDUCE_SCATTER, .handle = comm,
                      .sendbuf = sendBuf, .recvbuf = recvBuf, .count = recvCount, .dtype = dataType, .redop = op};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                                            void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                            HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclReduceScatterV", .coll = HC_COLL_REDUCE_SCATTERV, .handle = comm,
                      .sendbuf = sendBuf, .recvbuf = recvBuf, .count = recvCount, .dtype = dataType,
                      .recv_dtype = dataType, .redop = op, .counts = sendCounts, .displs = sendDispls};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                     uint32_t root, HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclScatter", .coll = HC_COLL_SCATTER, .handle = comm, .sendbuf = sendBuf,
                      .recvbuf = recvBuf, .count = recvCount, .dtype = dataType, .root = root};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                                      const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                                      HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAlltoAll", .coll = HC_COLL_ALLTOALL, .handle = comm, .sendbuf = (void *)sendBuf,
                      .recvbuf = (void *)recvBuf, .count = sendCount, .dtype = sendType, .recv_count = recvCount,
                      .recv_dtype = recvType};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                       HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                                       const void *rdispls, HcclDataType recvType, HcclComm comm,
                                       aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAlltoAllV", .coll = HC_COLL_ALLTOALLV, .handle = comm, .sendbuf = (void *)sendBuf,
                      .recvbuf = (void *)recvBuf, .dtype = sendType, .recv_dtype = recvType, .counts = sendCounts,
                      .displs = sdispls, .recv_counts = recvCounts, .recv_displs = rdispls};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                                        const void *recvBuf, HcclDataType recvType, HcclComm comm,
                                        aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclAlltoAllVC", .coll = HC_COLL_ALLTOALLVC, .handle = comm, .sendbuf = (void *)sendBuf,
                      .recvbuf = (void *)recvBuf, .dtype = sendType, .recv_dtype = recvType,
                      .counts = sendCountMatrix};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclBarrier", .coll = HC_COLL_BARRIER, .handle = comm};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                                  HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclSend", .coll = HC_COLL_SEND, .handle = comm, .sendbuf = sendBuf, .count = count,
                      .dtype = dataType, .root = destRank};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                                  HcclComm comm, aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclRecv", .coll = HC_COLL_RECV, .handle = comm, .recvbuf = recvBuf, .count = count,
                      .dtype = dataType, .root = srcRank};
    return hc_api_submit(&call, stream);
}

HC_API_EXPORT HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                           aclrtStream stream)
{
    hc_call_t call = {.fn = "HcclBatchSendRecv", .coll = HC_COLL_BATCH_SENDRECV, .handle = comm,
                      .items = sendRecvInfo, .nitems = itemNum};
    return hc_api_submit(&call, stream);
}
