/*
 * Tensor-parallel AllReduce, the seed's first pattern, written with CANN's real signatures.
 *
 * Each rank holds a partial activation (here: rank r contributes r+1 in every element, as if its
 * column slice of a MatMul produced that); an in-place AllReduce(SUM) gives every rank the full
 * result, which is checked against the closed form. Run: hccl-run -n 4 ./tp_allreduce
 */
#include <stdio.h>
#include <stdlib.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define CHECK_ACL(call)                                                                      \
    do {                                                                                     \
        aclError err_ = (call);                                                              \
        if (err_ != ACL_SUCCESS) {                                                           \
            fprintf(stderr, "%s failed: %d\n", #call, err_);                                 \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define CHECK_HCCL(call)                                                                     \
    do {                                                                                     \
        HcclResult res_ = (call);                                                            \
        if (res_ != HCCL_SUCCESS) {                                                          \
            fprintf(stderr, "%s failed: %s\n", #call, HcclGetErrorString(res_));             \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

int main(void)
{
    const uint64_t batch = 4, seq_len = 128, hidden_half = 512;
    const uint64_t count = batch * seq_len * hidden_half;
    HcclHostLaunchInfo launch;
    HcclRootInfo root_info;
    HcclComm comm;
    aclrtStream stream;
    float *activations;
    uint32_t rank, size;
    uint64_t wrong = 0;

    CHECK_ACL(aclInit(NULL));
    CHECK_HCCL(HcclHostGetLaunchInfo(&launch));
    CHECK_ACL(aclrtSetDevice((int32_t)launch.localRank));
    CHECK_ACL(aclrtCreateStream(&stream));

    /* Rank 0 makes the root info; every rank receives it (MPI_Bcast under mpirun). */
    if (launch.rank == 0)
        CHECK_HCCL(HcclGetRootInfo(&root_info));
    CHECK_HCCL(HcclHostBroadcastRootInfo(&root_info));
    CHECK_HCCL(HcclCommInitRootInfo(launch.size, &root_info, launch.rank, &comm));
    CHECK_HCCL(HcclGetRankId(comm, &rank));
    CHECK_HCCL(HcclGetRankSize(comm, &size));

    CHECK_ACL(aclrtMalloc((void **)&activations, count * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (uint64_t i = 0; i < count; i++)
        activations[i] = (float)(rank + 1) * (float)(i % 7 + 1);

    /* In place, as inference does it to save memory; enqueue, then wait on the stream. */
    CHECK_HCCL(HcclAllReduce(activations, activations, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    CHECK_ACL(aclrtSynchronizeStream(stream));

    for (uint64_t i = 0; i < count; i++) {
        float expected = (float)(size * (size + 1) / 2) * (float)(i % 7 + 1);
        if (activations[i] != expected)
            wrong++;
    }
    printf("rank %u/%u: allreduce of %llu fp32 (%llu KiB) %s\n", rank, size, (unsigned long long)count,
           (unsigned long long)(count * sizeof(float) / 1024), wrong == 0 ? "verified" : "WRONG");

    CHECK_ACL(aclrtFree(activations));
    CHECK_HCCL(HcclCommDestroy(comm));
    CHECK_ACL(aclrtDestroyStream(stream));
    CHECK_ACL(aclFinalize());
    return wrong == 0 ? 0 : 1;
}
