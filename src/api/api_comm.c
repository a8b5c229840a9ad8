/* Communicator creation, destruction and queries. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_api.h"
#include "hc_boot.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_result.h"

HC_API_EXPORT HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclGetRootInfo(rootInfo=%p)", (void *)rootInfo);
    if (rootInfo == NULL) {
        HC_ERROR("HcclGetRootInfo: rootInfo is NULL");
        return HCCL_E_PTR;
    }
    return hc_boot_root_create(rootInfo, hc_api_launch_one_host());
}

/* The calling thread's device, or -1 when none is set (the runtime logs nothing for a query). */
static int32_t current_device(void)
{
    int32_t device = -1;

    if (aclrtGetDevice(&device) != ACL_SUCCESS)
        device = -1;
    return device;
}

static HcclResult check_init_args(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm)
{
    if (rootInfo == NULL || comm == NULL) {
        HC_ERROR("HcclCommInitRootInfo: %s is NULL", rootInfo == NULL ? "rootInfo" : "comm");
        return HCCL_E_PTR;
    }
    if (nRanks == 0 || rank >= nRanks) {
        HC_ERROR("HcclCommInitRootInfo: rank %u is out of range for nRanks %u", rank, nRanks);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_api_comm_init(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                            const HcclCommConfig *config, const char *default_comm_name, HcclComm *comm_p)
{
    char name[COMM_NAME_MAX_LENGTH];
    hc_log_ctx_t ctx = {.rank = (int)rank, .comm_name = NULL};
    const hc_log_ctx_t *previous = hc_log_ctx_push(&ctx);
    hc_comm_settings_t settings;
    hc_peer_t self, *peers = NULL;
    hc_boot_t *boot = NULL;
    hc_comm_t *comm = NULL;
    HcclResult res;

    HC_CHECK_GOTO(check_init_args(nRanks, rootInfo, rank, comm_p), res, out);
    HC_CHECK_GOTO(hc_boot_root_token(rootInfo, (uint8_t[HC_TOKEN_BYTES]){0}), res, out);
    if (default_comm_name != NULL)
        snprintf(name, sizeof(name), "%s", default_comm_name);
    else
        hc_boot_root_name(rootInfo, name, sizeof(name));
    HC_CHECK_GOTO(hc_comm_settings_resolve(config, &settings, name, sizeof(name)), res, out);
    ctx.comm_name = name;
    HC_CHECK_GOTO(hc_boot_self(current_device(), &self), res, out);
    HC_CHECK_GOTO(hc_boot_join(rootInfo, nRanks, rank, &self, &boot, &peers), res, out);
    HC_CHECK_GOTO(hc_comm_create(nRanks, rank, peers, &settings, name, &comm), res, err_boot);
    hc_boot_root_token(rootInfo, comm->token);
    HC_CHECK_GOTO(hc_engine_attach(comm, boot), res, err_comm);
    hc_boot_close(boot);
    hc_comm_register(comm);
    HC_INFO("communicator ready: rank %u of %u, %u on this host, engine %s", rank, nRanks, comm->nlocal,
            comm->engine != NULL ? comm->engine->ops->name : "none");
    *comm_p = comm;
    goto out;

err_comm:
    hc_comm_release(comm);
err_boot:
    hc_boot_close(boot);
out:
    hc_log_ctx_pop(previous);
    return res;
}

HC_API_EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                              HcclComm *comm)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommInitRootInfo(nRanks=%u, rootInfo=%p, rank=%u)", nRanks, (const void *)rootInfo,
                         rank);
    return hc_api_comm_init(nRanks, rootInfo, rank, NULL, NULL, comm);
}

HC_API_EXPORT HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                                    const HcclCommConfig *config, HcclComm *comm)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommInitRootInfoConfig(nRanks=%u, rootInfo=%p, rank=%u, config=%p)", nRanks,
                         (const void *)rootInfo, rank, (const void *)config);
    if (config == NULL) {
        HC_ERROR("HcclCommInitRootInfoConfig: config is NULL");
        return HCCL_E_PTR;
    }
    return hc_api_comm_init(nRanks, rootInfo, rank, config, NULL, comm);
}

HC_API_EXPORT HcclResult HcclCommDestroy(HcclComm comm)
{
    hc_comm_t *c;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommDestroy(comm=%p)", comm);
    HC_CHECK(hc_comm_acquire(comm, "HcclCommDestroy", &c));
    res = hc_comm_destroy(c);
    hc_comm_release(c);
    return res;
}

/* The common part of the queries: a live communicator and somewhere to write the answer. On
 * success the caller reads what it needs and releases the communicator. */
static HcclResult begin_query(HcclComm handle, const void *out, const char *fn, const char *out_name,
                              hc_comm_t **comm_p)
{
    HC_CHECK(hc_comm_acquire(handle, fn, comm_p));
    if (out == NULL) {
        HC_ERROR("%s: %s is NULL", fn, out_name);
        hc_comm_release(*comm_p);
        return HCCL_E_PTR;
    }
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)
{
    hc_comm_t *c;

    HC_CHECK(begin_query(comm, rank, "HcclGetRankId", "rank", &c));
    *rank = c->rank;
    hc_comm_release(c);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)
{
    hc_comm_t *c;

    HC_CHECK(begin_query(comm, rankSize, "HcclGetRankSize", "rankSize", &c));
    *rankSize = c->nranks;
    hc_comm_release(c);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGetCommName(HcclComm comm, char *commName)
{
    hc_comm_t *c;

    HC_CHECK(begin_query(comm, commName, "HcclGetCommName", "commName", &c));
    snprintf(commName, COMM_NAME_MAX_LENGTH, "%s", c->name);
    hc_comm_release(c);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError)
{
    hc_comm_t *c;

    HC_CHECK(begin_query(comm, asyncError, "HcclGetCommAsyncError", "asyncError", &c));
    *asyncError = (HcclResult)atomic_load(&c->async_error);
    hc_comm_release(c);
    return HCCL_SUCCESS;
}
