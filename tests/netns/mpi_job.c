/*
 * The seed's pattern under mpirun across hosts (tests/netns/mpirun.sh): rank 0 HcclGetRootInfo,
 * MPI_Bcast, HcclCommInitRootInfo, an AllReduce whose values are checked. Prints where each rank
 * runs and what HcclHostGetLaunchInfo makes of mpirun's variables. --ops-optional: as job_check.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define COUNT 1031

int main(int argc, char **argv)
{
    int rank, size, wrong = 0, ops_optional = argc > 1 && strcmp(argv[1], "--ops-optional") == 0;
    char host[64] = "";
    HcclHostLaunchInfo me;
    HcclRootInfo root;
    HcclComm comm;
    aclrtStream stream;
    float *x;
    HcclResult res;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof(host) - 1);
    if (HcclHostGetLaunchInfo(&me) != HCCL_SUCCESS || aclInit(NULL) != ACL_SUCCESS ||
        aclrtSetDevice((int32_t)me.localRank) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    printf("mpi_job: rank %d of %d on %s: launch info rank %u of %u, local %u of %u, launcher %s\n", rank, size, host,
           me.rank, me.size, me.localRank, me.localSize, me.launcher);
    memset(&root, 0, sizeof(root));
    if (rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (HcclCommInitRootInfo((uint32_t)size, &root, (uint32_t)rank, &comm) != HCCL_SUCCESS) {
        printf("mpi_job: rank %d HcclCommInitRootInfo failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("mpi_job: rank %d communicator of %d ranks\n", rank, size);
    aclrtMalloc((void **)&x, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST);
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)rank + 1.0f + (float)i * 0.5f;
    res = HcclAllReduce(x, x, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    if (res == HCCL_E_NOT_SUPPORT && ops_optional) {
        printf("mpi_job: rank %d allreduce not supported across these hosts (tolerated)\n", rank);
    } else {
        wrong = res != HCCL_SUCCESS || aclrtSynchronizeStream(stream) != ACL_SUCCESS;
        for (int i = 0; i < COUNT && !wrong; i++)
            wrong = x[i] != (float)size * (float)(size + 1) / 2.0f + (float)size * (float)i * 0.5f;
        printf("mpi_job: rank %d allreduce %s\n", rank, wrong ? "WRONG" : "verified");
    }
    fflush(stdout);
    aclrtFree(x);
    HcclCommDestroy(comm);
    aclrtDestroyStream(stream);
    aclFinalize();
    MPI_Finalize();
    return wrong;
}
