/*
 * The seed's initialisation pattern, unchanged but for CANN's real signatures: rank 0 calls
 * HcclGetRootInfo, MPI_Bcast gives the bytes to every rank, HcclCommInitRootInfo, then an
 * in-place fp16 AllReduce on a stream (tensor parallelism) and aclrtSynchronizeStream.
 * Built with mpicc and `pkg-config --cflags --libs hccl` against the installed hostccl.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "hccl/hccl.h"
#include "acl/acl.h"

int main(int argc, char **argv)
{
    int rank = 0, size = 1, wrong = 0;
    uint32_t hccl_rank = 0;
    const uint64_t count = 3 * 1024 + 5;
    HcclRootInfo root_info;
    HcclComm comm;
    aclrtStream stream;
    aclFloat16 *buf;
    aclError aclRet;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    aclRet = aclInit(NULL);
    if (aclRet != ACL_SUCCESS) {
        printf("ACL init failed, ret=%d\n", aclRet);
        return -1;
    }
    int32_t device_id = rank;
    aclRet = aclrtSetDevice(device_id);
    if (aclRet != ACL_SUCCESS) {
        printf("Set device %d failed\n", device_id);
        return -1;
    }
    if (rank == 0)
        HcclGetRootInfo(&root_info);
    MPI_Bcast(&root_info, sizeof(root_info), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (HcclCommInitRootInfo((uint32_t)size, &root_info, (uint32_t)rank, &comm) != HCCL_SUCCESS) {
        printf("HcclCommInitRootInfo failed on rank %d\n", rank);
        return 1;
    }
    HcclGetRankId(comm, &hccl_rank);
    printf("HCCL init success, rank=%u\n", hccl_rank);

    aclrtCreateStream(&stream);
    aclrtMalloc((void **)&buf, count * sizeof(*buf), ACL_MEM_MALLOC_HUGE_FIRST);
    for (uint64_t i = 0; i < count; i++)
        buf[i] = aclFloatToFloat16((float)(rank + 1));
    HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, comm, stream);
    if (aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        wrong = 1;
    for (uint64_t i = 0; i < count; i++)
        if (aclFloat16ToFloat(buf[i]) != (float)(size * (size + 1) / 2))
            wrong = 1;
    printf("rank %d: fp16 allreduce %s\n", rank, wrong ? "WRONG" : "verified");

    aclrtFree(buf);
    aclrtDestroyStream(stream);
    HcclCommDestroy(comm);
    aclFinalize();
    MPI_Finalize();
    return wrong;
}
