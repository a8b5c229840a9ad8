/* Memory a program gives a communicator (hccl_comm.h): ranges with activated pieces, and symmetric
 * windows. The bookkeeping is src/core/comm_mem.c; these wrappers check the arguments. */
#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"

HC_API_EXPORT HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                                uint64_t flags)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommSetMemoryRange", &c));
    if (baseVirPtr == NULL) {
        HC_ERROR("HcclCommSetMemoryRange: baseVirPtr is NULL");
        res = HCCL_E_PTR;
    } else if (size == 0 || alignment != 0 || flags != 0) {
        HC_ERROR("HcclCommSetMemoryRange: %s", size == 0 ? "size is 0" : "alignment and flags must be 0");
        res = HCCL_E_PARA;
    } else if (aclrtHostMemReserved(baseVirPtr, size) != ACL_SUCCESS) {
        HC_ERROR("HcclCommSetMemoryRange: [%p, +%zu) is not inside an aclrtReserveMemAddress reservation",
                 baseVirPtr, size);
        res = HCCL_E_PARA;
    } else {
        res = hc_comm_mem_set_range(c, baseVirPtr, size);
    }
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommUnsetMemoryRange", &c));
    if (baseVirPtr == NULL) {
        HC_ERROR("HcclCommUnsetMemoryRange: baseVirPtr is NULL");
        res = HCCL_E_PTR;
    } else {
        res = hc_comm_mem_unset_range(c, baseVirPtr);
    }
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                                    aclrtDrvMemHandle handle, uint64_t flags)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommActivateCommMemory", &c));
    if (virPtr == NULL || handle == NULL) {
        HC_ERROR("HcclCommActivateCommMemory: %s is NULL", virPtr == NULL ? "virPtr" : "handle");
        res = HCCL_E_PTR;
    } else if (size == 0 || offset != 0 || flags != 0) {
        HC_ERROR("HcclCommActivateCommMemory: %s", size == 0 ? "size is 0" : "offset and flags must be 0");
        res = HCCL_E_PARA;
    } else {
        res = hc_comm_mem_activate(c, virPtr, size, handle);
    }
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommDeactivateCommMemory", &c));
    if (virPtr == NULL) {
        HC_ERROR("HcclCommDeactivateCommMemory: virPtr is NULL");
        res = HCCL_E_PTR;
    } else {
        res = hc_comm_mem_deactivate(c, virPtr);
    }
    hc_comm_release(c);
    return res;
}

/* flag 1 is CANN's collective-symmetric window, the only kind it supports; 0 is refused as CANN
 * refuses it ("not supported yet"), with HCCL_E_PARA. */
HC_API_EXPORT HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                                HcclCommSymWindow *winHandle, uint32_t flag)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommSymWinRegister", &c));
    if (addr == NULL || winHandle == NULL) {
        HC_ERROR("HcclCommSymWinRegister: %s is NULL", addr == NULL ? "addr" : "winHandle");
        res = HCCL_E_PTR;
    } else if (size == 0 || flag != 1) {
        HC_ERROR("HcclCommSymWinRegister: %s", size == 0 ? "size is 0" : "flag must be 1 (collective symmetric)");
        res = HCCL_E_PARA;
    } else {
        res = hc_comm_win_register(c, addr, size, winHandle);
    }
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle)
{
    if (winHandle == NULL) {
        HC_ERROR("HcclCommSymWinDeregister: winHandle is NULL");
        return HCCL_E_PTR;
    }
    return hc_comm_win_deregister(winHandle);
}

HC_API_EXPORT HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size, HcclCommSymWindow *winHandle,
                                           size_t *offset)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommSymWinGet", &c));
    if (ptr == NULL || winHandle == NULL || offset == NULL) {
        HC_ERROR("HcclCommSymWinGet: %s is NULL", ptr == NULL ? "ptr" : winHandle == NULL ? "winHandle" : "offset");
        res = HCCL_E_PTR;
    } else if (size == 0) {
        HC_ERROR("HcclCommSymWinGet: size is 0");
        res = HCCL_E_PARA;
    } else {
        res = hc_comm_win_get(c, ptr, size, winHandle, offset);
    }
    hc_comm_release(c);
    return res;
}
