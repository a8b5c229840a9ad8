/*
 * HcclCommInitClusterInfo(Config): a communicator from a CANN rank table (DESIGN.md 4).
 *
 * No root info travels between the ranks: each derives the same one from the table. Rank 0 serves
 * the rendezvous at the address the table gives it (hc_rank_table_rendezvous); the token is the
 * SHA-256 of the table's contents and HOSTCCL_RANK_TABLE_SECRET, so only ranks that read the same
 * table (and know the secret) get in. From there on it is HcclCommInitRootInfo.
 */
#include <stdio.h>
#include <string.h>

#include "hc_api.h"
#include "hc_boot.h"
#include "hc_check.h"
#include "hc_config.h"
#include "hc_rank_table.h"

/* The root info every rank of the table derives; rank 0 also starts serving it. */
static HcclResult root_info_of(const hc_rank_table_t *table, uint32_t rank, HcclRootInfo *info)
{
    int64_t base = hc_config_int(HC_CFG_IF_BASE_PORT);
    uint8_t digest[32];
    hc_sockaddr_t addr;
    char addr_text[HC_SOCKADDR_STR_BYTES];
    const hc_rank_table_server_t *root_server = &table->servers[table->ranks[0].server];
    HcclResult res;

    HC_CHECK(hc_rank_table_rendezvous(table, base > 0 ? (uint32_t)base : HC_RANK_TABLE_DEFAULT_BASE_PORT, &addr));
    hc_rank_table_digest(table, hc_config_str(HC_CFG_RANK_TABLE_SECRET), digest);
    res = hc_boot_root_at(&addr, digest, rank == 0, root_server->server_id, info);
    if (res != HCCL_SUCCESS && rank == 0)
        HC_ERROR("rank 0 cannot serve the rank table's rendezvous at %s (server \"%s\", %s): the address must be "
                 "one of this host's and the port free",
                 hc_sockaddr_str(&addr, addr_text, sizeof(addr_text)), root_server->server_id, table->ranks[0].where);
    return res;
}

static HcclResult cluster_init(const char *fn, const char *path, uint32_t rank, const HcclCommConfig *config,
                               HcclComm *comm)
{
    hc_log_ctx_t ctx = {.rank = (int)rank, .comm_name = NULL};
    const hc_log_ctx_t *previous = hc_log_ctx_push(&ctx);
    hc_rank_table_t *table = NULL;
    HcclRootInfo info;
    HcclResult res;

    if (path == NULL || comm == NULL) {
        HC_ERROR("%s: %s is NULL", fn, path == NULL ? "clusterInfo" : "comm");
        res = HCCL_E_PTR;
        goto out;
    }
    HC_CHECK_GOTO(hc_rank_table_load(path, &table), res, out);
    if (rank >= table->nranks) {
        HC_ERROR("%s: rank %u is not in rank table %s, which has ranks 0 to %u", fn, rank, path, table->nranks - 1);
        res = HCCL_E_PARA;
        goto out;
    }
    HC_CHECK_GOTO(root_info_of(table, rank, &info), res, out);
    res = hc_api_comm_init(table->nranks, &info, rank, config, NULL, comm);
out:
    hc_rank_table_free(table);
    hc_log_ctx_pop(previous);
    return res;
}

HC_API_EXPORT HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommInitClusterInfo(clusterInfo=%s, rank=%u)", clusterInfo != NULL ? clusterInfo : "NULL",
                         rank);
    return cluster_init("HcclCommInitClusterInfo", clusterInfo, rank, NULL, comm);
}

HC_API_EXPORT HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                                       HcclCommConfig *config, HcclComm *comm)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclCommInitClusterInfoConfig(clusterInfo=%s, rank=%u, config=%p)",
                         clusterInfo != NULL ? clusterInfo : "NULL", rank, (void *)config);
    if (config == NULL) {
        HC_ERROR("HcclCommInitClusterInfoConfig: config is NULL");
        return HCCL_E_PTR;
    }
    return cluster_init("HcclCommInitClusterInfoConfig", clusterInfo, rank, config, comm);
}
