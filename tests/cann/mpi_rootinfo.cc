// An hccl_test-style program: MPI starts the ranks, rank 0's root info travels by MPI_Bcast, each
// rank drives device rank % deviceCount. It exercises what hccl_test calls on every run (SoC name,
// stream failure mode, events for timing, a configured communicator) and its -z path: buffers in
// virtual memory reserved with aclrtReserveMemAddress, backed by aclrtMallocPhysical/aclrtMapMem,
// handed to the communicator with HcclCommSetMemoryRange/HcclCommActivateCommMemory. With
// HCCL_TEST_PROFILING=1 it records a profile into HCCL_TEST_PROFILING_PATH, as hccl_test does.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "hccl/hccl.h"
#include "mpi.h"

#define CHECK(cond, what)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            std::printf("rank %d: %s failed (%s:%d)\n", g_rank, what, __FILE__, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                          \
        }                                                                          \
    } while (0)

static int g_rank = -1;

static const uint64_t kCount = 3000; // not a multiple of a page: the mapping is rounded up

int main(int argc, char *argv[])
{
    int size = 0;
    uint32_t devCount = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    CHECK(aclInit(nullptr) == ACL_SUCCESS, "aclInit");
    CHECK(aclrtGetDeviceCount(&devCount) == ACL_SUCCESS && devCount > 0, "aclrtGetDeviceCount");
    int32_t device = g_rank % static_cast<int32_t>(devCount);
    CHECK(aclrtSetDevice(device) == ACL_SUCCESS, "aclrtSetDevice");
    const char *soc = aclrtGetSocName();
    CHECK(soc != nullptr && soc[0] != '\0', "aclrtGetSocName");

    aclrtStream stream = nullptr;
    aclrtEvent start = nullptr, end = nullptr;
    CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS, "aclrtCreateStream");
    CHECK(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE) == ACL_SUCCESS, "aclrtSetStreamFailureMode");
    CHECK(aclrtCreateEvent(&start) == ACL_SUCCESS && aclrtCreateEvent(&end) == ACL_SUCCESS, "aclrtCreateEvent");

    bool profiling = std::getenv("HCCL_TEST_PROFILING") != nullptr && std::strcmp(std::getenv("HCCL_TEST_PROFILING"), "1") == 0;
    aclprofConfig *prof = nullptr;
    if (profiling) {
        const char *dir = std::getenv("HCCL_TEST_PROFILING_PATH");
        std::string path = dir != nullptr ? dir : "/tmp/hostccl_profiling";
        CHECK(aclprofInit(path.c_str(), path.size()) == ACL_SUCCESS, "aclprofInit");
        uint32_t devices[1] = {static_cast<uint32_t>(device)};
        prof = aclprofCreateConfig(devices, 1, ACL_AICORE_PIPE_UTILIZATION, nullptr,
                                   ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_HCCL_TRACE);
        CHECK(prof != nullptr && aclprofStart(prof) == ACL_SUCCESS, "aclprofStart");
    }

    HcclRootInfo rootInfo;
    if (g_rank == 0)
        CHECK(HcclGetRootInfo(&rootInfo) == HCCL_SUCCESS, "HcclGetRootInfo");
    MPI_Bcast(&rootInfo, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    config.hcclBufferSize = 64;
    config.hcclWorldRankID = static_cast<uint32_t>(g_rank);
    HcclComm comm = nullptr;
    CHECK(HcclCommInitRootInfoConfig(static_cast<uint32_t>(size), &rootInfo, static_cast<uint32_t>(g_rank), &config,
                                     &comm) == HCCL_SUCCESS, "HcclCommInitRootInfoConfig");

    // The -z path: reserve, allocate physical memory, map it, give it to the communicator.
    aclrtPhysicalMemProp prop = {ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_HBM_MEM_HUGE,
                                 {static_cast<uint32_t>(device), ACL_MEM_LOCATION_TYPE_DEVICE}, 0};
    size_t granularity = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity) == ACL_SUCCESS,
          "aclrtMemGetAllocationGranularity");
    size_t bytes = kCount * sizeof(float);
    size_t half = (bytes + granularity - 1) / granularity * granularity;
    size_t freeMem = 0, totalMem = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM_HUGE, &freeMem, &totalMem) == ACL_SUCCESS && freeMem >= 2 * half,
          "aclrtGetMemInfo");
    void *va = nullptr;
    aclrtDrvMemHandle handle = nullptr;
    CHECK(aclrtReserveMemAddress(&va, 2 * half, 0, nullptr, 1) == ACL_SUCCESS, "aclrtReserveMemAddress");
    CHECK(HcclCommSetMemoryRange(comm, va, 2 * half, 0, 0) == HCCL_SUCCESS, "HcclCommSetMemoryRange");
    CHECK(aclrtMallocPhysical(&handle, 2 * half, &prop, 0) == ACL_SUCCESS, "aclrtMallocPhysical");
    CHECK(aclrtMapMem(va, 2 * half, 0, handle, 0) == ACL_SUCCESS, "aclrtMapMem");
    CHECK(HcclCommActivateCommMemory(comm, va, 2 * half, 0, handle, 0) == HCCL_SUCCESS, "HcclCommActivateCommMemory");
    float *send = static_cast<float *>(va);
    float *recv = reinterpret_cast<float *>(static_cast<char *>(va) + half);
    float *host = nullptr;
    CHECK(aclrtMallocHost(reinterpret_cast<void **>(&host), bytes) == ACL_SUCCESS, "aclrtMallocHost");
    for (uint64_t i = 0; i < kCount; i++)
        host[i] = static_cast<float>((g_rank + 1) * (i % 7));
    CHECK(aclrtMemcpy(send, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE) == ACL_SUCCESS, "aclrtMemcpy");

    CHECK(aclrtRecordEvent(start, stream) == ACL_SUCCESS, "aclrtRecordEvent");
    for (int iter = 0; iter < 5; iter++)
        CHECK(HcclAllReduce(send, recv, kCount, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream) == HCCL_SUCCESS,
              "HcclAllReduce");
    CHECK(aclrtRecordEvent(end, stream) == ACL_SUCCESS, "aclrtRecordEvent");
    CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS, "aclrtSynchronizeStream");
    float ms = -1;
    CHECK(aclrtEventElapsedTime(&ms, start, end) == ACL_SUCCESS && ms >= 0, "aclrtEventElapsedTime");
    CHECK(aclrtMemcpy(host, bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS, "aclrtMemcpy");
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    for (uint64_t i = 0; i < kCount; i++)
        CHECK(host[i] == ranks_sum * static_cast<float>(i % 7), "the allreduce result");
    std::printf("rank %d of %d on device %d: allreduce over mapped memory correct\n", g_rank, size, device);

    CHECK(HcclCommDeactivateCommMemory(comm, va) == HCCL_SUCCESS, "HcclCommDeactivateCommMemory");
    CHECK(HcclCommUnsetMemoryRange(comm, va) == HCCL_SUCCESS, "HcclCommUnsetMemoryRange");
    CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS, "HcclCommDestroy");
    CHECK(aclrtUnmapMem(va) == ACL_SUCCESS && aclrtFreePhysical(handle) == ACL_SUCCESS, "aclrtUnmapMem");
    CHECK(aclrtReleaseMemAddress(va) == ACL_SUCCESS, "aclrtReleaseMemAddress");
    CHECK(aclrtFreeHost(host) == ACL_SUCCESS, "aclrtFreeHost");
    if (profiling) {
        CHECK(aclprofStop(prof) == ACL_SUCCESS, "aclprofStop");
        CHECK(aclprofFinalize() == ACL_SUCCESS, "aclprofFinalize");
    }
    CHECK(aclrtDestroyEvent(start) == ACL_SUCCESS && aclrtDestroyEvent(end) == ACL_SUCCESS, "aclrtDestroyEvent");
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS, "aclrtDestroyStream");
    CHECK(aclrtResetDevice(device) == ACL_SUCCESS, "aclrtResetDevice");
    CHECK(aclFinalize() == ACL_SUCCESS, "aclFinalize");
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0)
        std::printf("mpi check passed\n");
    MPI_Finalize();
    return 0;
}
