/* Communicator state (hccl_comm.h): suspend and resume, state callbacks, status and lookups by
 * name, group status, NIC switching. */
#include <string.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"

HC_API_EXPORT HcclResult HcclCommSuspend(HcclComm comm)
{
    hc_comm_t *c;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommSuspend(comm=%p)", comm);
    HC_CHECK(hc_comm_acquire(comm, "HcclCommSuspend", &c));
    res = hc_comm_suspend(c);
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommResume(HcclComm comm)
{
    hc_comm_t *c;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommResume(comm=%p)", comm);
    HC_CHECK(hc_comm_acquire(comm, "HcclCommResume", &c));
    res = hc_comm_state_notify(comm, HCCL_COMM_STATE_PHASE_RESUME_PRE);
    if (res == HCCL_SUCCESS) {
        hc_comm_resume(c);
        res = hc_comm_state_notify(comm, HCCL_COMM_STATE_PHASE_RESUME_POST);
    }
    hc_comm_release(c);
    return res;
}

HC_API_EXPORT HcclResult HcclCommRegCommStateCallback(const char *regName, HcclCommStateCallback cb, void *args)
{
    if (regName == NULL || cb == NULL) {
        HC_ERROR("HcclCommRegCommStateCallback: %s is NULL", regName == NULL ? "regName" : "cb");
        return HCCL_E_PTR;
    }
    return hc_comm_state_register(regName, cb, args);
}

HC_API_EXPORT HcclResult HcclCommGetStatus(const char *commId, HcclCommStatus *status)
{
    hc_comm_t *c;

    if (commId == NULL || status == NULL) {
        HC_ERROR("HcclCommGetStatus: %s is NULL", commId == NULL ? "commId" : "status");
        return HCCL_E_PTR;
    }
    if (hc_comm_find_by_name(commId, &c) != HCCL_SUCCESS) {
        HC_ERROR("HcclCommGetStatus: no live communicator is named '%.*s'", (int)COMM_NAME_MAX_LENGTH, commId);
        return HCCL_E_NOT_FOUND;
    }
    *status = atomic_load(&c->suspended) ? HCCL_COMM_STATUS_SUSPENDING : HCCL_COMM_STATUS_READY;
    hc_comm_release(c);
    return HCCL_SUCCESS;
}

/* The handle stays valid after the call (the registry keeps the communicator alive until
 * HcclCommDestroy): the reference the lookup took is dropped at once. */
HC_API_EXPORT HcclResult HcclCommGetHandleWithName(const char *commName, HcclComm *comm)
{
    hc_comm_t *c;

    if (commName == NULL || comm == NULL) {
        HC_ERROR("HcclCommGetHandleWithName: %s is NULL", commName == NULL ? "commName" : "comm");
        return HCCL_E_PTR;
    }
    if (hc_comm_find_by_name(commName, &c) != HCCL_SUCCESS) {
        HC_ERROR("HcclCommGetHandleWithName: no live communicator is named '%.*s'", (int)COMM_NAME_MAX_LENGTH,
                 commName);
        return HCCL_E_PARA;
    }
    *comm = c;
    hc_comm_release(c);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGroupStatusGet(bool *isGroupEnabled)
{
    if (isGroupEnabled == NULL) {
        HC_ERROR("HcclGroupStatusGet: isGroupEnabled is NULL");
        return HCCL_E_PTR;
    }
    *isGroupEnabled = hc_api_group_active() != 0;
    return HCCL_SUCCESS;
}

/* An Ascend server switches a rank's RoCE traffic to a backup NIC; hostccl's ranks talk through
 * shared memory and host sockets, which have no backup device NIC to switch to. */
HC_API_EXPORT HcclResult HcclCommWorkingDevNicSet(HcclComm comm, uint32_t *ranks, bool *useBackup, uint32_t nRanks)
{
    hc_comm_t *c;

    HC_CHECK(hc_comm_acquire(comm, "HcclCommWorkingDevNicSet", &c));
    hc_comm_release(c);
    if (ranks == NULL || useBackup == NULL) {
        HC_ERROR("HcclCommWorkingDevNicSet: %s is NULL", ranks == NULL ? "ranks" : "useBackup");
        return HCCL_E_PTR;
    }
    HC_ERROR("HcclCommWorkingDevNicSet: a host has no backup device NICs to switch %u ranks to", nRanks);
    return HCCL_E_NOT_SUPPORT;
}
