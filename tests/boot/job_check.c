/*
 * One rank of a job whose launch and bootstrap the test scripts check (tests/boot, tests/netns,
 * tests/slurm). It prints where it runs, builds a communicator, checks an AllReduce's values, and
 * builds a second communicator the same way (a second rendezvous at the same place must work).
 *
 *   job_check launch [--ops-optional]               HcclHostGetLaunchInfo, HcclHostBroadcastRootInfo,
 *                                                   HcclCommInitRootInfo
 *   job_check rank-table FILE [RANK] [--ops-optional]  HcclCommInitClusterInfo (RANK default: the
 *                                                   launcher's rank)
 *
 * --ops-optional: an AllReduce that returns HCCL_E_NOT_SUPPORT is reported and tolerated (builds
 * without an inter-host engine, where ops across hosts are not supported); the communicator must
 * still be created. Output lines start with "job_check: rank R" for the scripts to count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define COUNT 1031

static int g_ops_optional;

static unsigned long long netns_inode(void)
{
    struct stat st;

    return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* x[i] = rank + 1 + i / 2 on every rank; the sum is exact in fp32 at these sizes. */
static int check_allreduce(HcclComm comm, aclrtStream stream, uint32_t rank, uint32_t size)
{
    float *x;
    int wrong = 0;
    HcclResult res;

    if (aclrtMalloc((void **)&x, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        return 1;
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)rank + 1.0f + (float)i * 0.5f;
    res = HcclAllReduce(x, x, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    if (res == HCCL_E_NOT_SUPPORT && g_ops_optional) {
        printf("job_check: rank %u allreduce not supported across these hosts (tolerated: this build has no "
               "inter-host engine)\n", rank);
        aclrtFree(x);
        return 0;
    }
    if (res != HCCL_SUCCESS || aclrtSynchronizeStream(stream) != ACL_SUCCESS) {
        printf("job_check: rank %u allreduce failed: %s\n", rank, HcclGetErrorString(res));
        aclrtFree(x);
        return 1;
    }
    for (int i = 0; i < COUNT && !wrong; i++)
        wrong = x[i] != (float)size * (float)(size + 1) / 2.0f + (float)size * (float)i * 0.5f;
    printf("job_check: rank %u allreduce %s\n", rank, wrong ? "WRONG" : "verified");
    aclrtFree(x);
    return wrong;
}

static HcclResult comm_from_launcher(const HcclHostLaunchInfo *me, HcclComm *comm)
{
    HcclRootInfo info;
    HcclResult res;

    memset(&info, 0, sizeof(info));
    if (me->rank == 0 && (res = HcclGetRootInfo(&info)) != HCCL_SUCCESS)
        return res;
    if ((res = HcclHostBroadcastRootInfo(&info)) != HCCL_SUCCESS)
        return res;
    return HcclCommInitRootInfo(me->size, &info, me->rank, comm);
}

int main(int argc, char **argv)
{
    HcclHostLaunchInfo me;
    const char *table = NULL;
    uint32_t rank, size = 0;
    aclrtStream stream;
    int failed = 0, argi = 2;

    if (argc < 2 || (strcmp(argv[1], "launch") != 0 && strcmp(argv[1], "rank-table") != 0) ||
        (strcmp(argv[1], "rank-table") == 0 && argc < 3)) {
        fprintf(stderr, "usage: job_check launch|rank-table FILE [RANK] [--ops-optional]\n");
        return 2;
    }
    if (HcclHostGetLaunchInfo(&me) != HCCL_SUCCESS)
        return 1;
    rank = me.rank;
    if (strcmp(argv[1], "rank-table") == 0) {
        table = argv[argi++];
        if (argi < argc && argv[argi][0] != '-')
            rank = (uint32_t)strtoul(argv[argi++], NULL, 10);
    }
    g_ops_optional = argi < argc && strcmp(argv[argi], "--ops-optional") == 0;
    printf("job_check: rank %u of %u, local %u of %u, launcher %s, netns %llu\n", me.rank, me.size, me.localRank,
           me.localSize, me.launcher, netns_inode());
    fflush(stdout);
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice((int32_t)me.localRank) != ACL_SUCCESS ||
        aclrtCreateStream(&stream) != ACL_SUCCESS)
        return 1;
    for (int round = 0; round < 2 && !failed; round++) {
        HcclComm comm = NULL;
        HcclResult res = table != NULL ? HcclCommInitClusterInfo(table, rank, &comm) : comm_from_launcher(&me, &comm);
        if (res != HCCL_SUCCESS) {
            printf("job_check: rank %u communicator %d failed: %s\n", rank, round, HcclGetErrorString(res));
            return 1;
        }
        HcclGetRankSize(comm, &size);
        printf("job_check: rank %u communicator %d of %u ranks\n", rank, round, size);
        failed = check_allreduce(comm, stream, rank, size) || HcclCommDestroy(comm) != HCCL_SUCCESS;
        fflush(stdout);
    }
    aclrtDestroyStream(stream);
    aclFinalize();
    return failed;
}
