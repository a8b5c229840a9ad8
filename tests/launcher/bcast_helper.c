/*
 * HcclHostBroadcastRootInfo across the ranks of hccl-run, through the public library only
 * (linked with libhccl.so, so the exported symbols are what is tested).
 *
 *   twice         two broadcasts in a row deliver rank 0's two different blobs to every rank
 *   dead-root     rank 0 exits at once, before broadcasting: the others fail with HCCL_E_REMOTE
 *                 (hccl-run records the exit in the store), each printing how long it waited
 *   silent-root   rank 0 stays alive but never broadcasts: the others fail with HCCL_E_TIMEOUT and
 *                 exit 42, which makes hccl-run stop rank 0
 *
 * Rank 0 fills the blob with recognisable bytes instead of calling HcclGetRootInfo: this tests
 * the exchange, not the communicator.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hccl/hccl_host.h>

static void fill(HcclRootInfo *info, unsigned call)
{
    for (size_t i = 0; i < sizeof(info->internal); i++)
        info->internal[i] = (char)(i * 31u + call * 101u + 7u);
    snprintf(info->internal, 32, "root info %u", call);
}

static int twice(const HcclHostLaunchInfo *launch)
{
    HcclRootInfo got[2], want[2];

    for (unsigned call = 0; call < 2; call++) {
        HcclResult res;
        fill(&want[call], call);
        if (launch->rank == 0)
            got[call] = want[call];
        else
            memset(&got[call], 0, sizeof(got[call]));
        res = HcclHostBroadcastRootInfo(&got[call]);
        if (res != HCCL_SUCCESS) {
            fprintf(stderr, "rank %u: broadcast %u failed: %d\n", launch->rank, call, (int)res);
            return 1;
        }
        if (memcmp(&got[call], &want[call], sizeof(want[call])) != 0) {
            fprintf(stderr, "rank %u: broadcast %u delivered the wrong bytes\n", launch->rank, call);
            return 1;
        }
    }
    if (memcmp(&got[0], &got[1], sizeof(got[0])) == 0) {
        fprintf(stderr, "rank %u: both broadcasts delivered the same bytes\n", launch->rank);
        return 1;
    }
    printf("rank %u of %u: two root infos received\n", launch->rank, launch->size);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int missing_root(const HcclHostLaunchInfo *launch, int root_dies)
{
    HcclRootInfo info;
    HcclResult res;
    double start;

    if (launch->rank == 0 && root_dies)
        return 0;
    if (launch->rank == 0) {
        for (;;)
            pause(); /* stopped by hccl-run once another rank fails */
    }
    memset(&info, 0, sizeof(info));
    start = now_s();
    res = HcclHostBroadcastRootInfo(&info);
    printf("rank %u: broadcast without root gave %d after %.3f s\n", launch->rank, (int)res, now_s() - start);
    if (root_dies)
        return res == HCCL_E_REMOTE ? 0 : 1;
    return res == HCCL_E_TIMEOUT ? 42 : 1;
}

int main(int argc, char **argv)
{
    HcclHostLaunchInfo launch;

    if (HcclHostGetLaunchInfo(&launch) != HCCL_SUCCESS || strcmp(launch.launcher, "hccl-run") != 0) {
        fprintf(stderr, "bcast_helper: not started by hccl-run\n");
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "twice") == 0)
        return twice(&launch);
    if (argc == 2 && strcmp(argv[1], "dead-root") == 0)
        return missing_root(&launch, 1);
    if (argc == 2 && strcmp(argv[1], "silent-root") == 0)
        return missing_root(&launch, 0);
    fprintf(stderr, "usage: bcast_helper twice|dead-root|silent-root\n");
    return 2;
}
