// A CANN-style sample: one thread per device, each joining the communicator with
// HcclCommInitRootInfo, the way CANN's examples/02_collectives programs are written. It runs
// AllReduce, Broadcast, AllGather, ReduceScatter, AlltoAll and a Send/Recv ring on every rank,
// checks every element, and prints one line per rank in rank order (so the output can be compared
// as a whole), then "all checks passed".
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hccl/hccl.h"
#include "hccl/hccl_types.h"

#define ACL_OK(call)                                                                       \
    do {                                                                                   \
        aclError acl_ret_ = (call);                                                        \
        if (acl_ret_ != ACL_SUCCESS) {                                                     \
            std::printf("acl call failed %s:%d, retcode: %d\n", __FILE__, __LINE__, acl_ret_); \
            return false;                                                                  \
        }                                                                                  \
    } while (0)

#define HCCL_OK(call)                                                                      \
    do {                                                                                   \
        HcclResult hccl_ret_ = (call);                                                     \
        if (hccl_ret_ != HCCL_SUCCESS) {                                                   \
            std::printf("hccl call failed %s:%d, retcode: %d (%s)\n", __FILE__, __LINE__, hccl_ret_, \
                        HcclGetErrorString(hccl_ret_));                                    \
            return false;                                                                  \
        }                                                                                  \
    } while (0)

struct Rank {
    const HcclRootInfo *rootInfo;
    uint32_t device;
    uint32_t nRanks;
    std::string report;
    bool ok;
};

// Device buffer of n floats, filled from the host.
static bool Upload(const std::vector<float> &host, void **dev)
{
    size_t bytes = host.size() * sizeof(float);
    ACL_OK(aclrtMalloc(dev, bytes, ACL_MEM_MALLOC_HUGE_ONLY));
    ACL_OK(aclrtMemcpy(*dev, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    return true;
}

static bool Download(void *dev, std::vector<float> &host)
{
    size_t bytes = host.size() * sizeof(float);
    ACL_OK(aclrtMemcpy(host.data(), bytes, dev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    return true;
}

static bool Check(const std::vector<float> &got, const std::vector<float> &want, const char *what, uint32_t rank)
{
    for (size_t i = 0; i < want.size(); i++) {
        if (got[i] != want[i]) {
            std::printf("rank %u: %s element %zu is %g, expected %g\n", rank, what, i, got[i], want[i]);
            return false;
        }
    }
    return true;
}

static bool RunCollectives(Rank &r, HcclComm comm, aclrtStream stream)
{
    const uint32_t n = r.nRanks, me = r.device;
    std::vector<float> in(n), out(n), block(1), all(n * n);
    void *send = nullptr, *recv = nullptr;

    // AllReduce: element i of rank k is i + k; the sum over ranks is n*i + n(n-1)/2.
    for (uint32_t i = 0; i < n; i++)
        in[i] = static_cast<float>(i + me);
    if (!Upload(in, &send) || !Upload(in, &recv))
        return false;
    HCCL_OK(HcclAllReduce(send, recv, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (!Download(recv, out))
        return false;
    std::vector<float> want(n);
    for (uint32_t i = 0; i < n; i++)
        want[i] = static_cast<float>(n * i + n * (n - 1) / 2);
    if (!Check(out, want, "allreduce", me))
        return false;
    std::ostringstream line;
    line << "rankId: " << me << ", allreduce: [";
    for (float v : out)
        line << " " << v;
    line << " ]";

    // Broadcast from the last rank: everyone gets its input.
    HCCL_OK(HcclBroadcast(send, n, HCCL_DATA_TYPE_FP32, n - 1, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (!Download(send, out))
        return false;
    for (uint32_t i = 0; i < n; i++)
        want[i] = static_cast<float>(i + n - 1);
    if (!Check(out, want, "broadcast", me))
        return false;

    // AllGather of one element per rank, then ReduceScatter of the gathered vector.
    block[0] = static_cast<float>(10 * me);
    void *one = nullptr;
    if (!Upload(block, &one))
        return false;
    HCCL_OK(HcclAllGather(one, recv, 1, HCCL_DATA_TYPE_FP32, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (!Download(recv, out))
        return false;
    for (uint32_t i = 0; i < n; i++)
        want[i] = static_cast<float>(10 * i);
    if (!Check(out, want, "allgather", me))
        return false;
    HCCL_OK(HcclReduceScatter(recv, one, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (!Download(one, block))
        return false;
    if (!Check(block, std::vector<float>{static_cast<float>(10 * me * n)}, "reducescatter", me))
        return false;

    // AlltoAll: block j of rank k holds 100k + j; rank k receives 100j + k from rank j.
    for (uint32_t j = 0; j < n; j++)
        in[j] = static_cast<float>(100 * me + j);
    ACL_OK(aclrtMemcpy(send, n * sizeof(float), in.data(), n * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
    HCCL_OK(HcclAlltoAll(send, 1, HCCL_DATA_TYPE_FP32, recv, 1, HCCL_DATA_TYPE_FP32, comm, stream));
    ACL_OK(aclrtSynchronizeStream(stream));
    if (!Download(recv, out))
        return false;
    for (uint32_t j = 0; j < n; j++)
        want[j] = static_cast<float>(100 * j + me);
    if (!Check(out, want, "alltoall", me))
        return false;

    // A ring of Send/Recv in one group: each rank sends its id to the next.
    if (n > 1) {
        block[0] = static_cast<float>(me);
        ACL_OK(aclrtMemcpy(one, sizeof(float), block.data(), sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
        HCCL_OK(HcclGroupStart());
        HCCL_OK(HcclSend(one, 1, HCCL_DATA_TYPE_FP32, (me + 1) % n, comm, stream));
        HCCL_OK(HcclRecv(recv, 1, HCCL_DATA_TYPE_FP32, (me + n - 1) % n, comm, stream));
        HCCL_OK(HcclGroupEnd());
        ACL_OK(aclrtSynchronizeStream(stream));
        std::vector<float> got(1);
        if (!Download(recv, got))
            return false;
        if (!Check(got, std::vector<float>{static_cast<float>((me + n - 1) % n)}, "send/recv ring", me))
            return false;
    }
    ACL_OK(aclrtFree(one));
    ACL_OK(aclrtFree(send));
    ACL_OK(aclrtFree(recv));
    r.report = line.str();
    return true;
}

static void Sample(Rank *r)
{
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;

    r->ok = false;
    if (aclrtSetDevice(static_cast<int32_t>(r->device)) != ACL_SUCCESS)
        return;
    if (HcclCommInitRootInfo(r->nRanks, r->rootInfo, r->device, &comm) != HCCL_SUCCESS) {
        std::printf("rank %u: HcclCommInitRootInfo failed\n", r->device);
        return;
    }
    if (aclrtCreateStream(&stream) == ACL_SUCCESS)
        r->ok = RunCollectives(*r, comm, stream);
    if (HcclCommDestroy(comm) != HCCL_SUCCESS || aclrtDestroyStream(stream) != ACL_SUCCESS ||
        aclrtResetDevice(static_cast<int32_t>(r->device)) != ACL_SUCCESS)
        r->ok = false;
}

int main()
{
    uint32_t devCount = 0;
    HcclRootInfo rootInfo;

    if (aclInit(nullptr) != ACL_SUCCESS || aclrtGetDeviceCount(&devCount) != ACL_SUCCESS) {
        std::printf("aclInit or aclrtGetDeviceCount failed\n");
        return 1;
    }
    std::cout << "Found " << devCount << " NPU device(s) available" << std::endl;
    if (aclrtSetDevice(0) != ACL_SUCCESS || HcclGetRootInfo(&rootInfo) != HCCL_SUCCESS) {
        std::printf("HcclGetRootInfo failed\n");
        return 1;
    }
    std::vector<Rank> ranks(devCount);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < devCount; i++) {
        ranks[i] = Rank{&rootInfo, i, devCount, "", false};
        threads.emplace_back(Sample, &ranks[i]);
    }
    bool ok = true;
    for (uint32_t i = 0; i < devCount; i++) {
        threads[i].join();
        ok = ok && ranks[i].ok;
    }
    for (const Rank &r : ranks)
        std::cout << r.report << std::endl;
    if (aclFinalize() != ACL_SUCCESS)
        ok = false;
    std::cout << (ok ? "all checks passed" : "CHECKS FAILED") << std::endl;
    return ok ? 0 : 1;
}
