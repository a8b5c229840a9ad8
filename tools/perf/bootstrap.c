/*
 * Device, stream and communicator for the perf tools, under any launcher.
 *
 * The HCCL part is the seed pattern: rank 0 makes the root info, every rank receives it, every rank
 * calls HcclCommInitRootInfo. Only the way the root info travels depends on the launcher:
 *   - hccl-run, or any launcher with HOSTCCL_STORE set: HcclHostBroadcastRootInfo, through the store;
 *   - mpirun or srun without a store: MPI_Bcast, when the tools were built with MPI (CMake found
 *     it: HC_PERF_WITH_MPI), as hccl_test itself does;
 *   - a single rank needs no exchange at all.
 * Anything else is explained and refused rather than left to time out.
 */
#include <stdlib.h>
#include <string.h>

#ifdef HC_PERF_WITH_MPI
#include <mpi.h>
#endif

#include "perf.h"

static int acl_failed(const hc_perf_world_t *world, const char *call, aclError err)
{
    fprintf(stderr, "%s: rank %u: %s failed: acl error %d\n", world->tool, world->launch.rank, call, (int)err);
    return -1;
}

static int hccl_failed(const hc_perf_world_t *world, const char *call, HcclResult res)
{
    fprintf(stderr, "%s: rank %u: %s failed: %s\n", world->tool, world->launch.rank, call, HcclGetErrorString(res));
    return -1;
}

/* The store is there whenever hccl-run started us, or the user pointed HOSTCCL_STORE at one. */
static int store_available(void)
{
    const char *store = getenv("HOSTCCL_STORE");

    return store != NULL && store[0] != '\0';
}

#ifdef HC_PERF_WITH_MPI
static int mpi_start(hc_perf_world_t *world)
{
    int initialized = 0;

    MPI_Initialized(&initialized);
    if (!initialized) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
            fprintf(stderr, "%s: rank %u: MPI_Init failed\n", world->tool, world->launch.rank);
            return -1;
        }
        world->mpi_ready = 1;
    }
    return 0;
}

/*
 * The root info will travel by MPI_Bcast: the MPI the tool was built with must see the job the
 * launcher describes. Under another MPI's launcher (the tools built with Open MPI, started by
 * MPICH's mpiexec) every rank is an MPI singleton: rank 0's broadcast reaches nobody and the others
 * would read zeros. Said at start, on every rank, naming the MPI the tool was built for.
 */
static int check_mpi_world(hc_perf_world_t *world)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int size = 0, len = 0;

    if (mpi_start(world) != 0)
        return -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if ((uint32_t)size == world->launch.size)
        return 0;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, ",\n")] = '\0';
    fprintf(stderr,
            "%s: rank %u: the launcher (%s variables) describes %u ranks, but MPI sees %d: this tool was built "
            "with %s, and another MPI's launcher starts it as separate singleton processes. Run it with that "
            "MPI's mpirun, or under hccl-run -n %u (or with HOSTCCL_STORE set).\n",
            world->tool, world->launch.rank, world->launch.launcher, world->launch.size, size, version,
            world->launch.size);
    return -1;
}

static int bcast_with_mpi(hc_perf_world_t *world, HcclRootInfo *info)
{
    if (mpi_start(world) != 0)
        return -1;
    if (MPI_Bcast(info, (int)sizeof(*info), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "%s: rank %u: MPI_Bcast of the root info failed\n", world->tool, world->launch.rank);
        return -1;
    }
    return 0;
}
#endif

/* Rank 0's root info to every rank, by whichever way this launch offers. */
static int share_root_info(hc_perf_world_t *world, HcclRootInfo *info)
{
    HcclResult res;

    if (world->launch.size == 1)
        return 0;
    if (store_available() || strcmp(world->launch.launcher, "hccl-run") == 0) {
        res = HcclHostBroadcastRootInfo(info);
        return res == HCCL_SUCCESS ? 0 : hccl_failed(world, "HcclHostBroadcastRootInfo", res);
    }
#ifdef HC_PERF_WITH_MPI
    return bcast_with_mpi(world, info);
#else
    fprintf(stderr,
            "%s: rank %u: started by %s with %u ranks but there is no way to share the root info: the perf "
            "tools were built without MPI and HOSTCCL_STORE is not set. Run them under hccl-run -n %u, or "
            "rebuild hostccl where CMake finds MPI.\n",
            world->tool, world->launch.rank, world->launch.launcher, world->launch.size, world->launch.size);
    return -1;
#endif
}

static int init_comm(hc_perf_world_t *world)
{
    HcclRootInfo info;
    HcclResult res;

    memset(&info, 0, sizeof(info));
    if (world->launch.rank == 0) {
        res = HcclGetRootInfo(&info);
        if (res != HCCL_SUCCESS)
            return hccl_failed(world, "HcclGetRootInfo", res);
    }
    if (share_root_info(world, &info) != 0)
        return -1;
    res = HcclCommInitRootInfo(world->launch.size, &info, world->launch.rank, &world->comm);
    if (res != HCCL_SUCCESS)
        return hccl_failed(world, "HcclCommInitRootInfo", res);
    return 0;
}

/*
 * HCCL_TEST_PROFILING=1 records a profile of the run, as in hccl_test: a Chrome trace of every
 * operation (and the other stream tasks) per rank, written into HCCL_TEST_PROFILING_PATH (hccl_test's
 * default /var/log/npu/profiling when unset) when the tool ends.
 */
static int start_profiling(hc_perf_world_t *world)
{
    const char *flag = getenv("HCCL_TEST_PROFILING");
    const char *path = getenv("HCCL_TEST_PROFILING_PATH");
    uint32_t device = world->launch.localRank;
    aclError err;

    if (flag == NULL || strcmp(flag, "0") == 0)
        return 0;
    if (strcmp(flag, "1") != 0) {
        fprintf(stderr, "%s: HCCL_TEST_PROFILING must be 0 or 1, not \"%s\"\n", world->tool, flag);
        return -1;
    }
    if (path == NULL || path[0] == '\0')
        path = "/var/log/npu/profiling";
    err = aclprofInit(path, strlen(path));
    if (err != ACL_SUCCESS)
        return acl_failed(world, "aclprofInit", err);
    world->prof = aclprofCreateConfig(&device, 1, ACL_AICORE_NONE, NULL, ACL_PROF_HCCL_TRACE | ACL_PROF_TASK_TIME);
    if (world->prof == NULL)
        return acl_failed(world, "aclprofCreateConfig", ACL_ERROR_INVALID_PARAM);
    err = aclprofStart(world->prof);
    return err == ACL_SUCCESS ? 0 : acl_failed(world, "aclprofStart", err);
}

/* Before anything else: a root info that cannot reach every rank is refused at once, not after a
 * rank has waited HCCL_CONNECT_TIMEOUT for it. */
static int check_launch(hc_perf_world_t *world)
{
    if (world->launch.size == 1 || store_available() || strcmp(world->launch.launcher, "hccl-run") == 0)
        return 0;
#ifdef HC_PERF_WITH_MPI
    return check_mpi_world(world);
#else
    return 0; /* share_root_info refuses it */
#endif
}

int hc_perf_world_init(hc_perf_world_t *world)
{
    aclError err;

    if (check_launch(world) != 0)
        return -1;

    err = aclInit(NULL);
    if (err != ACL_SUCCESS)
        return acl_failed(world, "aclInit", err);
    world->acl_ready = 1;
    err = aclrtSetDevice((int32_t)world->launch.localRank);
    if (err != ACL_SUCCESS)
        return acl_failed(world, "aclrtSetDevice", err);
    err = aclrtCreateStream(&world->stream);
    if (err != ACL_SUCCESS)
        return acl_failed(world, "aclrtCreateStream", err);
    if (start_profiling(world) != 0)
        return -1;
    return init_comm(world);
}

/* Teardown in reverse; errors here change nothing about the results already printed. */
void hc_perf_world_fini(hc_perf_world_t *world)
{
    if (world->prof != NULL) {
        (void)aclprofStop(world->prof);
        (void)aclprofFinalize();
        (void)aclprofDestroyConfig(world->prof);
        world->prof = NULL;
    }
    if (world->comm != NULL)
        (void)HcclCommDestroy(world->comm);
    if (world->stream != NULL)
        (void)aclrtDestroyStream(world->stream);
    if (world->acl_ready)
        (void)aclFinalize();
#ifdef HC_PERF_WITH_MPI
    if (world->mpi_ready)
        MPI_Finalize();
#endif
    world->comm = NULL;
    world->stream = NULL;
    world->acl_ready = 0;
    world->mpi_ready = 0;
}
